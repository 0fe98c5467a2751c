"""Replace the stored text of contents in place (``replace_texts``): a content's row,
its chunks, both FTS5 indexes and the entries holding it, kept in step. Used by
``ctxkeep redact --rescan`` (``maintenance.redact_rescan``) after a redaction rule
change; the new text is hashed, chunked and indexed exactly as ingest does
(``transforms.normalize``, ``transforms.chunk``, ``sinks.sqlite.load``)."""

from __future__ import annotations

import hashlib
import sqlite3

import polars as pl

from ctxkeep.sinks.sqlite.fts import add_facets, delete_chunk_rows, prune_vocab
from ctxkeep.sinks.sqlite.load import _insert_chunks
from ctxkeep.transforms.grams import vocab_terms


def content_hash(text: str) -> str:
    """SHA-256 hex of a text, as ingest hashes it (``transforms.normalize``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def replace_texts(conn: sqlite3.Connection, changes: dict[str, str]) -> dict:
    """Give each content ``old content_hash → new text`` its new text, in the caller's
    transaction: the old chunks leave ``fts_words`` (FTS5 ``'delete'`` with their
    values), ``fts_grams`` and ``fts_symbols``, the new text is chunked and indexed with the same facets
    and tool-name title, the ``contents`` row takes the new hash, UTF-8 byte size and
    token estimate, and every entry holding it (``entry_rows.content_id``,
    ``text_bytes``, ``token_estimate``) follows. When the new text equals a content
    already stored, the two merge (the entries point at that one; its chunks gain the
    facets). Returns ``{"contents": n replaced, "merged": n merged into an existing
    content, "chunks_deleted": n, "chunks_added": n}``."""

    from ctxkeep.transforms.chunk import chunks_frame
    from ctxkeep.transforms.tokens import estimate_tokens

    out = {"contents": 0, "merged": 0, "chunks_deleted": 0, "chunks_added": 0}
    if not changes:
        return out
    olds = list(changes)
    counts, methods = estimate_tokens([changes[h] for h in olds])
    fresh: dict[str, str] = {}  # new hash -> text, for contents that need chunks
    facets: dict[str, frozenset[str]] = {}
    tools: dict[str, str] = {}
    old_texts: list[str] = []  # the replaced chunks' texts: their vocabulary may leave
    for old, tokens, method in zip(olds, counts, methods, strict=True):
        new_text = changes[old]
        row = conn.execute("SELECT content_id FROM contents WHERE content_hash = ?", (old,)).fetchone()
        if row is None:
            continue
        (cid,) = row
        chunks = conn.execute(
            "SELECT chunk_id, facets FROM chunks WHERE content_id = ? ORDER BY seq", (cid,)
        ).fetchall()
        fac = frozenset(chunks[0][1].split()) if chunks else frozenset()
        ids = [c for c, _ in chunks]
        if ids:
            marks = ",".join("?" * len(ids))
            old_texts += [
                t for (t,) in conn.execute(f"SELECT text FROM chunks WHERE chunk_id IN ({marks})", ids)
            ]
            conn.execute(
                f"INSERT INTO fts_words(fts_words, rowid, title, text, facets) SELECT 'delete', "
                f"chunk_id, title, text, facets FROM chunks WHERE chunk_id IN ({marks})",
                ids,
            )
            delete_chunk_rows(conn, marks, ids)
            conn.execute(f"DELETE FROM chunk_rows WHERE chunk_id IN ({marks})", ids)
            out["chunks_deleted"] += len(ids)
        new = content_hash(new_text)
        nbytes = len(new_text.encode("utf-8", "surrogatepass"))
        same = conn.execute("SELECT content_id FROM contents WHERE content_hash = ?", (new,)).fetchone()
        # the entries point at the content now holding the text: this one, or the one merged into
        conn.execute(
            "UPDATE entry_rows SET content_id = ?, text_bytes = ?, token_estimate = ? WHERE content_id = ?",
            (same[0] if same else cid, nbytes, tokens, cid),
        )
        if same:
            conn.execute("DELETE FROM contents WHERE content_id = ?", (cid,))
            if new in fresh:  # made by this call: its chunks are inserted below
                facets[new] = facets[new] | fac
            elif fac:
                add_facets(conn, {new: set(fac)})
            out["merged"] += 1
            continue
        conn.execute(
            "UPDATE contents SET content_hash = ?, bytes = ?, token_estimate = ?, token_method = ? "
            "WHERE content_id = ?",
            (new, nbytes, tokens, method, cid),
        )
        tool = conn.execute(
            "SELECT tool_name FROM entry_rows WHERE content_id = ? AND tool_name IS NOT NULL ORDER BY rowid LIMIT 1",
            (cid,),
        ).fetchone()
        if tool:
            tools[new] = tool[0]
        fresh[new] = new_text
        facets[new] = fac
        out["contents"] += 1
    if fresh:
        frame = chunks_frame(pl.DataFrame({"content_hash": list(fresh), "text": list(fresh.values())}))
        if frame.height:
            _insert_chunks(conn, frame, tools, facets)
            out["chunks_added"] += frame.height
    if old_texts and conn.execute("SELECT 1 FROM sqlite_master WHERE name='vocab'").fetchone():
        # a term only the old texts held (a secret now redacted) leaves the vocabulary
        prune_vocab(conn, vocab_terms(old_texts))
    return out


def count_contents(conn: sqlite3.Connection) -> int:
    """The rows of ``contents``."""
    return conn.execute("SELECT count(*) FROM contents").fetchone()[0]


def texts_after(conn: sqlite3.Connection, after: int, limit: int) -> list[tuple[int, str, str]]:
    """``(content_id, content_hash, text)`` of the next ``limit`` contents after
    ``after`` in ``content_id`` order (text: the chunks joined in ``seq`` order)."""
    ids = conn.execute(
        "SELECT content_id, content_hash FROM contents WHERE content_id > ? ORDER BY content_id LIMIT ?",
        (after, limit),
    ).fetchall()
    if not ids:
        return []
    parts: dict[int, list[str]] = {cid: [] for cid, _ in ids}
    for cid, text in conn.execute(
        "SELECT content_id, text FROM chunks WHERE content_id BETWEEN ? AND ? ORDER BY content_id, seq",
        (ids[0][0], ids[-1][0]),
    ):
        if cid in parts:
            parts[cid].append(text)
    return [(cid, h, "".join(parts[cid])) for cid, h in ids]


def quarantine_rows(conn: sqlite3.Connection) -> list[tuple[int, bytes | None, str | None]]:
    """``(id, raw bytes, reason)`` of every ``quarantine`` row."""
    return conn.execute("SELECT id, raw, reason FROM quarantine").fetchall()


def text_media(conn: sqlite3.Connection) -> list[tuple[str, int, bytes]]:
    """``(entry_id, seq, data)`` of the ``media`` rows holding text (``text/*``)."""
    return conn.execute(
        "SELECT entry_id, seq, data FROM media WHERE media_type LIKE 'text/%' AND data IS NOT NULL"
    ).fetchall()


def update_rows(
    conn: sqlite3.Connection,
    quarantine: list[tuple[bytes | None, str | None, int]],
    media: list[tuple[bytes, int, str, str, int]],
) -> None:
    """Rewrite ``quarantine`` rows ``(raw, reason, id)`` and ``media`` rows ``(data,
    bytes, sha256, entry_id, seq)``, in the caller's transaction."""
    conn.executemany("UPDATE quarantine SET raw = ?, reason = ? WHERE id = ?", quarantine)
    conn.executemany("UPDATE media SET data = ?, bytes = ?, sha256 = ? WHERE entry_id = ? AND seq = ?", media)

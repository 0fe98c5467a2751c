"""Load one transformed batch into the SQLite store, in one transaction
(``load_batch``): contents, chunks and their FTS5 rows, entries, usage, quarantined
lines, status changes and the watermarks of the files read."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import polars as pl

from ctxkeep.schema import (
    CACHE_SPLIT_COLUMNS,
    STORED_COLUMNS,
    USAGE_COLUMNS,
    USAGE_ONLY_COLUMNS,
    USAGE_ROW_COLUMNS,
)
from ctxkeep.sinks.sqlite.connection import write
from ctxkeep.sinks.sqlite.coverage import store as store_coverage
from ctxkeep.sinks.sqlite.ddl import ENTRY_ROW_COLUMNS, ID_TABLES, STORED_AS_ID, title_stored
from ctxkeep.sinks.sqlite.fts import FACET_COLUMNS, add_facets, add_vocab, insert_rows
from ctxkeep.sinks.sqlite.params import IN_JSON, in_parts, json_list
from ctxkeep.sinks.sqlite.status import StatusChange, apply_changes
from ctxkeep.timeutil import UTC_FORMAT_POLARS, now_iso
from ctxkeep.transforms import facets as fx
from ctxkeep.transforms.grams import symbols_batch, vocab_terms, vocab_union

if TYPE_CHECKING:  # Polars is imported where frames are loaded, not by readers
    import polars as pl

    from ctxkeep.schema import Watermark

#: ``usage`` columns in insert order
_USAGE_INSERT = list(USAGE_ROW_COLUMNS)

# None binds as NULL either way, but the sqlite3 module (CPython 3.11-3.13) sends a
# parameter that is not exactly int, float, str or bytes-like through its adapter
# search: the ``adapters`` lookup misses for ``None``, then ``__adapt__`` and
# ``__conform__`` are looked up, ~0.7 µs a None. An adapter for ``NoneType`` (a C
# callable returning None) ends that search at the lookup: the same NULL bound, the
# entry rows of the 200 MB bench tree (97,941 rows of 28 columns, 41 % None) bound in
# 0.76 s of CPU instead of 1.43 s. Process-wide, as every ``register_adapter``; it changes
# no value any connection binds.
# typeshed types the adapter as Callable[[None], ...]; dict.get is overloaded (it is
# called with the one None argument)
sqlite3.register_adapter(type(None), {}.get)  # type: ignore[arg-type]


def _usage_upsert() -> str:
    """The usage upsert of ``load_batch``: on a stored key a row with a larger total
    replaces it (not Codex keys, see ``load_batch``); any row fills the cache split and
    logged cost the stored one lacks (a backfill after migration v5). A row with
    unknown tokens (all null) and a cost (a session's running cost: Crush, Go opencode,
    ``sources.charm_db``) replaces the stored row, its tokens null, keeping the larger
    cost (the agent's cost only grows; a store written before parser v3 held the last
    response's tokens there)."""
    total = " + ".join(f"coalesce(usage.{c},0)" for c in USAGE_COLUMNS)
    xtotal = " + ".join(f"coalesce(excluded.{c},0)" for c in USAGE_COLUMNS)
    unknown = (
        "("
        + " AND ".join(f"excluded.{c} IS NULL" for c in USAGE_COLUMNS)
        + " AND excluded.cost_usd IS NOT NULL)"
    )
    stale = " OR ".join(f"usage.{c} IS NOT NULL" for c in USAGE_COLUMNS)
    snapshot = f"({unknown} AND ({stale} OR excluded.cost_usd > coalesce(usage.cost_usd, 0)))"
    larger = f"(({xtotal} > {total} AND usage.usage_key NOT LIKE 'codex:%') OR {unknown})"
    sets = [
        f"{c}=CASE WHEN {larger} THEN excluded.{c} ELSE usage.{c} END"
        for c in _USAGE_INSERT[1:]
        if c not in USAGE_ONLY_COLUMNS
    ] + [
        f"{c}=CASE WHEN {larger} THEN coalesce(excluded.{c}, usage.{c}) ELSE coalesce(usage.{c}, excluded.{c}) END"
        for c in CACHE_SPLIT_COLUMNS
    ]
    sets.append(
        f"cost_usd=CASE WHEN {unknown} THEN max(excluded.cost_usd, coalesce(usage.cost_usd, 0)) "
        f"WHEN {larger} THEN coalesce(excluded.cost_usd, usage.cost_usd) "
        "ELSE coalesce(usage.cost_usd, excluded.cost_usd) END"
    )
    fills = " OR ".join(f"(usage.{c} IS NULL AND excluded.{c} IS NOT NULL)" for c in USAGE_ONLY_COLUMNS)
    grew = f"(({xtotal} > {total} AND usage.usage_key NOT LIKE 'codex:%') AND NOT {unknown})"
    return (
        f"INSERT INTO usage({','.join(_USAGE_INSERT)}) VALUES({','.join('?' * len(_USAGE_INSERT))}) "
        f"ON CONFLICT(usage_key) DO UPDATE SET {', '.join(sets)} WHERE {grew} OR {snapshot} OR {fills}"
    )


_USAGE_UPSERT = _usage_upsert()


def _ts_text(df: pl.DataFrame) -> pl.DataFrame:

    return df.with_columns(pl.col("ts").dt.strftime(UTC_FORMAT_POLARS))


def _tool_names(entries: pl.DataFrame) -> dict[str, str]:
    """``content_hash → tool_name`` of the entries that have one (first seen wins)."""

    if not entries.height or "tool_name" not in entries.columns:
        return {}
    return dict(
        entries.filter(pl.col("tool_name").is_not_null() & pl.col("content_hash").is_not_null())
        .unique(subset="content_hash", keep="first", maintain_order=True)
        .select("content_hash", "tool_name")
        .iter_rows()
    )


def _as_ids(col: pl.Expr, ids: dict[str, int]) -> pl.Expr:
    """``col`` (str) with each value replaced by its id in ``ids`` (Int64; null stays
    null)."""

    return col.replace_strict(ids, default=None, return_dtype=pl.Int64)


def value_ids(conn: sqlite3.Connection, id_col: str, values: list) -> dict[str, int]:
    """``value → id`` of the distinct non-null ``values`` (str) of id column ``id_col``
    of ``entry_rows`` (``ddl.ID_TABLES``: ``file_id`` for source paths, ``project_id``
    for project dirs, ``ingest_id`` for load stamps), adding the values not stored yet,
    in the caller's write transaction."""
    table, col = ID_TABLES[id_col]
    new = list(dict.fromkeys(v for v in values if v is not None))
    if not new:
        return {}
    conn.executemany(f"INSERT OR IGNORE INTO {table}({col}) VALUES(?)", [(v,) for v in new])
    out: dict[str, int] = {}
    for part in in_parts(new):
        out.update(
            conn.execute(
                f"SELECT {col}, {id_col} FROM {table} WHERE {col} IN ({','.join('?' * len(part))})", part
            )
        )
    return out


def content_ids(conn: sqlite3.Connection, hashes: pl.Series) -> dict[str, int]:
    """``content_hash → contents.content_id`` of the distinct non-null ``hashes`` that
    ``contents`` holds (``load_batch`` stores a batch's contents before its entries)."""
    out: dict[str, int] = {}
    for part in in_parts(hashes.drop_nulls().unique().to_list()):
        out.update(
            conn.execute(
                f"SELECT content_hash, content_id FROM contents WHERE content_hash {IN_JSON}",
                (json_list(part),),
            )
        )
    return out


def save_watermark(conn: sqlite3.Connection, wm: Watermark) -> None:
    """Store ``wm`` (replacing the file's previous one; ``updated_at`` now, UTC), in the
    caller's transaction."""
    conn.execute(
        "INSERT OR REPLACE INTO watermarks VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            wm.path,
            wm.agent,
            wm.dev,
            wm.ino,
            wm.size,
            wm.mtime_ns,
            wm.offset,
            wm.head_len,
            wm.head_hash,
            wm.parser_version,
            json.dumps(wm.state, ensure_ascii=False),
            now_iso(),
        ),
    )


def with_index_terms(frames: dict) -> dict:
    """``frames`` (``load_batch``'s keyword frames) with the terms ``load_batch`` would
    compute from the chunk texts for the FTS tables, computed here: a ``symbols``
    column (str, ``transforms.grams.symbols_batch``; '' for no ``fts_symbols`` row) on
    ``chunks`` and ``vocab`` (set of str, ``vocab_terms``). The writer thread's caller
    runs it, so that these scans (~2 s of the writer's 14 s on the 200 MB tree) overlap
    the load of the group before; ``load_batch`` stores the same either way. Chunk rows
    a reader process made with their terms (``chunks_frame(index_terms=True)``: a
    ``vocab`` column of each chunk's tokens) give ``vocab`` as the union of that
    column (``grams.vocab_union``: the same set) and lose the column."""

    chunks = frames.get("chunks")
    if chunks is None or not chunks.height:
        return frames
    if "vocab" in chunks.columns:  # computed by a reader process, per chunk
        return {**frames, "chunks": chunks.drop("vocab"), "vocab": vocab_union(chunks["vocab"])}
    if "symbols" in chunks.columns:
        return frames
    texts = chunks["text"].to_list()
    return {
        **frames,
        "chunks": chunks.with_columns(pl.Series("symbols", symbols_batch(texts), dtype=pl.String)),
        "vocab": vocab_terms(texts),
    }


def load_batch(
    conn: sqlite3.Connection,
    *,
    entries: pl.DataFrame,
    contents: pl.DataFrame,
    chunks: pl.DataFrame,
    usage: pl.DataFrame,
    quarantine: list[dict],
    watermarks: Iterable[Watermark | None] = (),
    status_changes: Iterable[StatusChange | dict] | None = None,
    vocab: set[str] | None = None,
    before_watermarks: Callable[[sqlite3.Connection], None] | None = None,
    coverage: Iterable[tuple] = (),
    usage_held: set[str] | None = None,
) -> int:
    """Store one batch in a single transaction and return the number of new entries.

    Args:
        entries: new entries, columns ``STORED_COLUMNS`` (extra columns ignored).
        contents: new contents: content_hash, bytes, token_estimate, token_method.
        chunks: content_hash (str), seq (int), title (str), text (str), grams (str;
            '' for none) from ``transforms.chunk.chunks_frame``. The first chunk's title
            is prefixed with the tool name of the entry holding the text, if any, so
            tool names weigh like titles in the word index.
        usage: usage rows (``transforms.normalize.usage_frame``); on a key already
            stored, the row with the larger total wins (a Claude response logged again
            with more output; a cache split or logged cost the stored row lacks is
            filled from any re-read row), except for Codex keys: they name the cumulative session
            total, so the first row stored is the true delta and a later one computed
            from a partial read (a compressed rollout re-read from offset 0, a fork's
            replay) must not replace it.
        quarantine: rows from ``sources.contract.quarantine_row`` (+ ``agent``); a row
            with ``retract`` (``sources.readers.jsonl.retract_row``) deletes the rows of
            its path from its offset to offset + length whose reason starts with it
            (a judged unended last line that grew), first.
        watermarks: saved with the batch, so the batch is stored exactly once (one per
            file whose new bytes the batch holds; None entries are skipped).
        status_changes: applied after the entries (``status.apply_changes``).
        coverage: ``(agent, path, parser_version, sources.coverage.Tally)`` of the
            batches, added to the coverage ledger (``coverage.store``).
        before_watermarks: called with ``conn`` inside the transaction before the
            watermarks are saved (the vault's manifest rows, ``sinks.vault.record``).
        vocab: ``transforms.grams.vocab_terms`` of the chunk texts, with a ``symbols``
            column on ``chunks`` (``with_index_terms``); computed here when absent.
        usage_held: when given, the keys of ``usage`` that the store held before this
            batch's upsert are added to it (the rows it may update in place, their
            rowids kept: ``duckdb_store.sync``'s ``usage_only``; added before the
            commit, so a batch that fails may leave keys it did not update).

    Raises StoreBusy when another writer holds the database.
    """

    stamp = now_iso()
    facets = (
        fx.facets_by_content(entries.select(*FACET_COLUMNS).unique().iter_rows()) if entries.height else {}
    )
    with write(conn):
        if contents.height:
            conn.executemany(
                "INSERT OR IGNORE INTO contents(content_hash, bytes, token_estimate, token_method) "
                "VALUES(?,?,?,?)",
                contents.select("content_hash", "bytes", "token_estimate", "token_method").rows(),
            )
        if chunks.height:
            _insert_chunks(conn, chunks, _tool_names(entries), facets, vocab)
        if facets:  # new entries holding texts stored before: their chunks gain tokens
            add_facets(conn, facets)
        n_new = 0
        if entries.height:
            changes = conn.total_changes
            stamp_id = value_ids(conn, "ingest_id", [stamp])[stamp]
            new_stamp = conn.total_changes > changes
            e = _ts_text(entries.select(STORED_COLUMNS)).with_columns(
                pl.col("is_sidechain").cast(pl.Int64),
                *(
                    _as_ids(pl.col(c), value_ids(conn, STORED_AS_ID[c], entries[c].unique().to_list())).alias(
                        c
                    )
                    for c in ("source_path", "project_dir")
                ),
                _as_ids(pl.col("content_hash"), content_ids(conn, entries["content_hash"])).alias(
                    "content_hash"
                ),
                pl.lit(stamp_id, dtype=pl.Int64).alias("ingested_at"),
            )
            before = conn.total_changes
            conn.executemany(
                f"INSERT OR IGNORE INTO entry_rows({','.join(ENTRY_ROW_COLUMNS)}) "
                f"VALUES({','.join('?' * len(ENTRY_ROW_COLUMNS))})",
                e.rows(),
            )
            n_new = conn.total_changes - before
            if new_stamp and not n_new:  # every entry was stored before: no entry holds the stamp
                conn.execute("DELETE FROM ingests WHERE ingest_id = ?", (stamp_id,))
        if usage.height:
            if usage_held is not None:
                for part in in_parts(usage["usage_key"].to_list()):
                    usage_held.update(
                        k
                        for (k,) in conn.execute(
                            f"SELECT usage_key FROM usage WHERE usage_key {IN_JSON}", (json_list(part),)
                        )
                    )
            conn.executemany(_USAGE_UPSERT, _ts_text(usage.select(_USAGE_INSERT)).rows())
        if quarantine and any("retract" in q for q in quarantine):
            # a judged unended last line that grew (``sources.readers.jsonl.retract_row``):
            # its rows go, before this batch's rows of the whole line are added
            conn.executemany(
                "DELETE FROM quarantine WHERE path = ? AND offset >= ? AND offset <= ? AND substr(reason, 1, ?) = ?",
                [
                    (q["path"], q["offset"], q["offset"] + q["length"], len(q["retract"]), q["retract"])
                    for q in quarantine
                    if "retract" in q
                ],
            )
            quarantine = [q for q in quarantine if "retract" not in q]
        if quarantine:
            conn.executemany(
                "INSERT OR IGNORE INTO quarantine(agent, path, offset, length, reason, action, raw, "
                "first_seen, raw_sha256) VALUES(?,?,?,?,?,?,?,?,?)",
                [
                    (
                        q.get("agent"),
                        q["path"],
                        q["offset"],
                        q["length"],
                        q["reason"],
                        q["action"],
                        q["raw"],
                        stamp,
                        q.get("raw_sha256"),
                    )
                    for q in quarantine
                ],
            )
        if status_changes:
            apply_changes(conn, status_changes, stamp=stamp)
        if coverage:
            store_coverage(conn, coverage, stamp)
        if before_watermarks is not None:
            before_watermarks(conn)
        for wm in watermarks:
            if wm is not None:
                save_watermark(conn, wm)
    return n_new


def _insert_chunks(
    conn: sqlite3.Connection,
    chunks: pl.DataFrame,
    tools: dict[str, str],
    facets: dict[str, frozenset[str]],
    vocab: set[str] | None = None,
) -> None:
    """Insert ``chunks`` (of contents just stored) with their FTS rows (symbol terms
    and ``vocab`` from ``with_index_terms`` when given); pops from ``facets`` the
    contents whose chunks got them here."""

    ids = content_ids(conn, chunks["content_hash"])
    first = conn.execute("SELECT coalesce(max(chunk_id), 0) FROM chunk_rows").fetchone()[0] + 1
    rows = []
    grams_rows = []
    merged: dict[str, str] = {}
    for i, (h, seq, title, text, grams) in enumerate(
        chunks.select("content_hash", "seq", "title", "text", "grams").iter_rows()
    ):
        cid = first + i
        if seq == 0 and tools.get(h):  # tool names weigh like titles
            title = f"{tools[h]} {title or ''}".strip()
        fac = merged.get(h)
        if fac is None:
            fac = merged[h] = fx.merge(facets.pop(h, ()))
        rows.append((cid, ids[h], seq, title or "", text, fac))
        if grams:
            grams_rows.append((cid, grams, fac))
    conn.executemany(
        "INSERT INTO chunk_rows(chunk_id, content_id, seq, title, text, facets) "
        f"VALUES(?1, ?2, ?3, {title_stored('?4', '?5')}, ?5, ?6)",
        rows,
    )
    conn.execute(
        "INSERT INTO fts_words(rowid, title, text, facets) SELECT chunk_id, title, "
        "text, facets FROM chunks WHERE chunk_id >= ?",
        (first,),
    )
    if grams_rows:
        conn.executemany("INSERT INTO fts_grams(rowid, grams, facets) VALUES(?,?,?)", grams_rows)
    syms = chunks["symbols"].to_list() if "symbols" in chunks.columns else symbols_batch([r[4] for r in rows])
    insert_rows(conn, "fts_symbols", [(r[0], r[5]) for r in rows], syms)
    add_vocab(conn, vocab_terms(chunks["text"].to_list()) if vocab is None else vocab)

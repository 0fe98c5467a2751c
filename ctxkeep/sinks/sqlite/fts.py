"""The FTS5 indexes of the store and the ``facets`` of chunks (their filter tokens).

``fts_words`` indexes ``chunks`` (title, text, facets) as external content;
``fts_grams`` holds ``transforms.grams`` of the chunk texts with the same facets
(rowid = chunk_id); ``vocab`` / ``fts_vocab`` the vocabulary of the chunk texts and its
trigrams (``add_vocab``). A chunk's ``facets`` are the tokens (``transforms.facets``) of
every entry holding its text, so that search filters inside the MATCH.
"""

from __future__ import annotations

import sqlite3

from ctxkeep.sinks.sqlite.ddl import FTS_TABLES, set_ranks
from ctxkeep.sinks.sqlite.params import in_parts

#: the entry columns a chunk's facets are made of (``transforms.facets.facets_by_content``)
FACET_COLUMNS = ("content_hash", "agent", "kind", "role", "tool_name", "session_id", "project_dir")


def rebuild_fts_tables(conn: sqlite3.Connection, batch: int = 5000) -> dict:
    """Drop, recreate (from ``ddl.FTS_TABLES``) and fill ``fts_words`` (FTS5
    ``'rebuild'`` from ``chunks``) and ``fts_grams`` (``transforms.grams`` of the chunk
    texts, with the chunks' facets), inside the caller's transaction. Returns
    ``{"chunks": n, "grams_rows": n}``."""
    from ctxkeep.transforms.grams import grams_batch, vocab_terms

    conn.execute("DELETE FROM vocab")
    for table, ddl in FTS_TABLES.items():
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(ddl)
    conn.execute("INSERT INTO fts_words(fts_words) VALUES('rebuild')")
    n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    n_grams, last = 0, 0
    while True:
        rows = conn.execute(
            "SELECT chunk_id, text, facets FROM chunks WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?",
            (last, batch),
        ).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        terms = grams_batch([text for _, text, _ in rows])
        g = [(chunk_id, gr, facets) for (chunk_id, _, facets), gr in zip(rows, terms, strict=True) if gr]
        conn.executemany("INSERT INTO fts_grams(rowid, grams, facets) VALUES(?,?,?)", g)
        n_grams += len(g)
        add_vocab(conn, vocab_terms([text for _, text, _ in rows]))
    conn.execute("INSERT INTO fts_words(fts_words) VALUES('optimize')")
    conn.execute("INSERT INTO fts_grams(fts_grams) VALUES('optimize')")
    conn.execute("INSERT INTO fts_vocab(fts_vocab) VALUES('optimize')")
    set_ranks(conn)
    return {"chunks": n_chunks, "grams_rows": n_grams}


def add_vocab(conn: sqlite3.Connection, terms: set[str]) -> int:
    """Add the ``terms`` not yet in ``vocab`` (``transforms.grams.vocab_terms``) to it
    and to its trigram index ``fts_vocab``, in the caller's transaction. Returns the
    number added."""
    if not terms:
        return 0
    top = conn.execute("SELECT coalesce(max(term_id), 0) FROM vocab").fetchone()[0]
    conn.executemany("INSERT OR IGNORE INTO vocab(term) VALUES(?)", [(t,) for t in sorted(terms)])
    cur = conn.execute(
        "INSERT INTO fts_vocab(rowid, term) SELECT term_id, term FROM vocab WHERE term_id > ?", (top,)
    )
    return cur.rowcount


def prune_vocab(conn: sqlite3.Connection, terms: set[str]) -> int:
    """Remove from ``vocab`` / ``fts_vocab`` those of ``terms`` (the vocabulary of
    deleted chunks) that no chunk's word index entry holds any more (``fts_words``, a
    stemmed superset: a term whose stem another chunk holds stays), in the caller's
    transaction. Returns the number removed."""
    gone = [
        t
        for t in terms
        if conn.execute("SELECT 1 FROM fts_words WHERE fts_words MATCH ? LIMIT 1", (f'"{t}"',)).fetchone()
        is None
    ]
    for part in in_parts(gone):
        marks = ",".join("?" * len(part))
        conn.execute(
            f"INSERT INTO fts_vocab(fts_vocab, rowid, term) SELECT 'delete', term_id, term FROM vocab "
            f"WHERE term IN ({marks})",
            part,
        )
        conn.execute(f"DELETE FROM vocab WHERE term IN ({marks})", part)
    return len(gone)


def refresh_facets(conn: sqlite3.Connection) -> int:
    """Recompute ``chunks.facets`` of every chunk from the entries now holding its
    text (drops tokens of purged entries), in the caller's transaction. The FTS tables
    are not updated: rebuild them after (``rebuild_fts_tables``). Returns the number of
    chunks whose facets changed."""
    from ctxkeep.transforms import facets as fx

    by = fx.facets_by_content(
        conn.execute(
            f"SELECT DISTINCT {', '.join(FACET_COLUMNS)} FROM entries WHERE content_hash IS NOT NULL"
        )
    )
    rows = conn.execute(
        "SELECT ch.chunk_id, ch.facets, c.content_hash FROM chunks ch "
        "JOIN contents c ON c.content_id = ch.content_id"
    ).fetchall()
    changed = []
    for cid, old, h in rows:
        new = fx.merge(by.get(h, ()))
        if new != old:
            changed.append((new, cid))
    conn.executemany("UPDATE chunks SET facets=? WHERE chunk_id=?", changed)
    return len(changed)


def add_facets(conn: sqlite3.Connection, facets: dict[str, set[str]]) -> int:
    """Merge ``content_hash → tokens`` into the stored chunks of those contents and
    re-index the chunks whose ``facets`` changed (FTS5 ``'delete'`` with the old
    values, then insert), in the caller's transaction. Returns the number of chunks
    changed."""
    from ctxkeep.transforms import facets as fx

    changed = []
    for part in in_parts(list(facets)):
        for cid, old, h in conn.execute(
            f"SELECT ch.chunk_id, ch.facets, c.content_hash FROM contents c JOIN chunks ch "
            f"ON ch.content_id = c.content_id WHERE c.content_hash IN ({','.join('?' * len(part))})",
            part,
        ):
            new = fx.merge(set(old.split()) | facets[h])
            if new != old:
                changed.append((new, cid))
    for part in in_parts(changed):
        ids = [cid for _, cid in part]
        marks = ",".join("?" * len(ids))
        conn.execute(
            f"INSERT INTO fts_words(fts_words, rowid, title, text, facets) SELECT 'delete', "
            f"chunk_id, title, text, facets FROM chunks WHERE chunk_id IN ({marks})",
            ids,
        )
        conn.executemany("UPDATE chunks SET facets=? WHERE chunk_id=?", part)
        conn.execute(
            f"INSERT INTO fts_words(rowid, title, text, facets) SELECT chunk_id, title, text, "
            f"facets FROM chunks WHERE chunk_id IN ({marks})",
            ids,
        )
        conn.executemany("UPDATE fts_grams SET facets=? WHERE rowid=?", part)
    return len(changed)

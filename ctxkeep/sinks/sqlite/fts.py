"""The FTS5 indexes of the store and the ``facets`` of chunks (their filter tokens).

``fts_words`` indexes ``chunks`` (title, text, facets) as external content;
``fts_grams`` holds ``transforms.grams`` of the chunk texts with the same facets
(rowid = chunk_id), ``fts_symbols`` their symbol terms (``transforms.grams.symbols``,
likewise); ``vocab`` / ``fts_vocab`` the vocabulary of the chunk texts and its
trigrams (``add_vocab``). A chunk's ``facets`` are the tokens (``transforms.facets``) of
every entry holding its text, so that search filters inside the MATCH.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping
from collections.abc import Set as AbstractSet

from ctxkeep.sinks.sqlite.ddl import CHUNK_FTS_TABLES, FTS_TABLES, set_ranks
from ctxkeep.sinks.sqlite.params import IN_JSON, in_parts, json_list

#: the entry columns a chunk's facets are made of (``transforms.facets.facets_by_content``)
FACET_COLUMNS = ("content_hash", "agent", "kind", "role", "tool_name", "session_id", "project_dir")


def rebuild_fts_tables(
    conn: sqlite3.Connection, batch: int = 5000, progress: Callable[[int, int], None] | None = None
) -> dict:
    """Drop, recreate (from ``ddl.FTS_TABLES``) and fill ``fts_words`` (FTS5
    ``'rebuild'`` from ``chunks``), ``fts_grams`` and ``fts_symbols``
    (``transforms.grams`` and ``symbols`` of the chunk texts, with the chunks' facets)
    and the vocabulary, inside the caller's transaction; ``progress(done, total)``
    (chunks) after each batch of ``batch`` chunks. Returns ``{"chunks": n,
    "grams_rows": n, "symbols_rows": n}``."""
    from ctxkeep.transforms.grams import vocab_terms

    conn.execute("DELETE FROM vocab")
    for table, ddl in FTS_TABLES.items():
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(ddl)
    conn.execute("INSERT INTO fts_words(fts_words) VALUES('rebuild')")
    n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    n_grams, n_syms, last, done = 0, 0, 0, 0
    while True:
        rows = conn.execute(
            "SELECT chunk_id, text, facets FROM chunks WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?",
            (last, batch),
        ).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        texts = [text for _, text, _ in rows]
        keys = [(chunk_id, facets) for chunk_id, _, facets in rows]
        n_grams += insert_rows(conn, "fts_grams", keys, chunk_terms("fts_grams", texts))
        n_syms += insert_rows(conn, "fts_symbols", keys, chunk_terms("fts_symbols", texts))
        add_vocab(conn, vocab_terms(texts))
        done += len(rows)
        if progress is not None:
            progress(done, n_chunks)
    for table in FTS_TABLES:
        conn.execute(f"INSERT INTO {table}({table}) VALUES('optimize')")
    set_ranks(conn)
    return {"chunks": n_chunks, "grams_rows": n_grams, "symbols_rows": n_syms}


#: ``merge_segments``: an FTS table is merged into one segment when the segments beside
#: its largest hold at least this share of its leaf pages: the index then merges once
#: each time it grew by half since its last merge (the cost of a merge is the whole
#: index's: 10 GB store, ``fts_words`` 1.1 GB in 13 segments and ``fts_grams``, 12.5 CPU
#: s), so its total cost stays within ~3 merges of the final size
MERGE_SPREAD = 1 / 3
#: ... and holds at least this many leaf pages (~4 KB each): a small index's walks are
#: short whatever its segments
MERGE_MIN_LEAVES = 2000


def segment_leaves(conn: sqlite3.Connection, table: str) -> list[int]:
    """The leaf pages of each segment of the FTS5 table ``table``, largest first: the
    highest leaf number in its ``%_idx`` (FTS5 numbers a segment's leaves from 1; the
    last leaves of a long doclist hold no term and are not counted). One read of
    ``%_idx`` (~28,000 rows at 10 GB, ~3 ms CPU); [] for an empty index."""
    return [
        r[0] for r in conn.execute(f"SELECT max(pgno) AS n FROM {table}_idx GROUP BY segid ORDER BY n DESC")
    ]


def merge_segments(conn: sqlite3.Connection, tables: tuple[str, ...] = tuple(FTS_TABLES)) -> list[str]:
    """Merge each FTS5 table of ``tables`` (default ``ddl.FTS_TABLES``; those the store
    lacks are skipped) whose segments are spread
    (``MERGE_SPREAD``, ``MERGE_MIN_LEAVES``) into one segment (FTS5 ``'optimize'``), in
    the caller's transaction; returns the tables merged.

    Why: every token of a MATCH is read through an iterator over each segment, merged
    by rowid, so a walk costs more the more segments hold its doclists; a bulk ingest
    leaves them spread (10 GB store: ``fts_words`` in 13 segments, the largest 48 % of
    the leaves). The same rows match and rank the same (BM25's counts and lengths do
    not depend on segments): bench_search at 10 GB, 400 searches, the hits of all 143
    distinct queries identical, CPU p95 38.4 -> 32.5 ms (docs/design.md, Search)."""
    merged = []
    for table in tables:
        if not _has_table(conn, table):
            continue
        leaves = segment_leaves(conn, table)
        total = sum(leaves)
        if len(leaves) > 1 and total >= MERGE_MIN_LEAVES and total - leaves[0] >= MERGE_SPREAD * total:
            conn.execute(f"INSERT INTO {table}({table}) VALUES('optimize')")
            merged.append(table)
    return merged


#: FTS5's default ``automerge``: a level's segments are merged (incrementally, inside
#: the inserts) once it holds this many; the value a table without the setting has
FTS5_AUTOMERGE = 4
#: ``settle_segments``: the pages (FTS5's ``pgsz``, 4,050 bytes) each FTS5 ``'merge'``
#: step writes at most; steps repeat until one merges nothing
SETTLE_PAGES = 2000


def level_segments(conn: sqlite3.Connection, table: str) -> list[int]:
    """The segments on each level of the FTS5 table ``table`` (level 0 first), read from
    its structure record (``%_data`` rowid 10). Its layout (SQLite's fts5_index.c,
    "structure record"): a 4-byte cookie, in newer versions the 4 bytes ``ff 00 00 01``
    (structure V2, whose segments hold 5 more varints), then SQLite varints: levels,
    segments, the write counter, and per level ``nMerge``, ``nSeg`` and 3 varints per
    segment. [] for a table never written. Raises ValueError on a record it cannot read."""
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id=10").fetchone()
    if row is None:
        return []
    b, i = bytes(row[0]), 4
    per_seg = 3
    if b[4:8] == b"\xff\x00\x00\x01":
        i, per_seg = 8, 8

    def varint() -> int:
        nonlocal i
        v = 0
        for k in range(9):
            if i >= len(b):
                raise ValueError(f"{table}: truncated structure record")
            c = b[i]
            i += 1
            if k == 8:
                return (v << 8) | c
            v = (v << 7) | (c & 0x7F)
            if c < 0x80:
                return v
        return v

    levels, _segments, _counter = varint(), varint(), varint()
    out = []
    for _ in range(levels):
        _merge, n = varint(), varint()
        for _ in range(n * per_seg):
            varint()
        out.append(n)
    return out


def automerge_settings(
    conn: sqlite3.Connection, tables: tuple[str, ...] = tuple(FTS_TABLES)
) -> dict[str, int]:
    """The persisted FTS5 ``automerge`` of each table of ``tables`` the store has (its
    ``%_config`` row, ``FTS5_AUTOMERGE`` when it has none): one indexed read a table."""
    out = {}
    for table in tables:
        if _has_table(conn, table):
            row = conn.execute(f"SELECT v FROM {table}_config WHERE k='automerge'").fetchone()
            out[table] = FTS5_AUTOMERGE if row is None else int(row[0])
    return out


def bulk_begin(conn: sqlite3.Connection, settings: Mapping[str, int]) -> None:
    """Turn FTS5's ``automerge`` off (0) on the tables of ``settings``
    (``automerge_settings``) inside the caller's open transaction, which must end with
    ``bulk_end`` (or roll back). Why: a bulk load's incremental merges run inside its
    inserts on the writer thread, the ingest's critical path, and their work grows with
    the index; with them off FTS5 still merges a level of 16 segments (its
    ``crisismerge``), and the run's end merges the rest (``merge_segments``,
    ``settle_segments``) in fewer, larger merges."""
    for table, value in settings.items():
        if value:
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('automerge', 0)")


def bulk_end(conn: sqlite3.Connection, settings: Mapping[str, int]) -> None:
    """Before the COMMIT of a transaction ``bulk_begin`` began: flush the FTS5 tables'
    pending rows to segments (a SAVEPOINT makes FTS5 write them: SQLite 3.40 has no
    ``'flush'`` command), still with ``automerge`` 0, then write back each table's
    setting of ``settings``. So a committed store never holds the 0: a kill or a
    rollback before the COMMIT drops it with the transaction's rows."""
    if not any(settings.values()):
        return
    conn.execute("SAVEPOINT fts_flush")
    conn.execute("RELEASE fts_flush")
    for table, value in settings.items():
        if value:
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('automerge', ?)", (value,))


def settle_segments(
    conn: sqlite3.Connection,
    skip: Collection[str] = (),
    pages: int | None = None,
    tables: tuple[str, ...] = tuple(FTS_TABLES),
) -> int:
    """After a bulk load (``bulk_begin``), in the caller's transaction: FTS5 ``'merge'``
    steps of ``pages`` (default ``SETTLE_PAGES``) on each table of ``tables`` (default
    ``ddl.FTS_TABLES``) the store has but those of ``skip`` (e.g. the ones
    ``merge_segments`` merged), until a step merges nothing. A level holding
    ``usermerge`` (4, as FTS5's automerge) segments or more is merged into one on the
    next level, so each level ends with fewer than 4: the shape the inserts' own merges
    keep (a search walks each segment's doclists). Its work is the merging the bulk
    load put off, done in fewer, wider merges (up to 16 segments at once instead of
    4); like the automerge, it may take in an older segment that shares a level.
    Returns the steps that merged something."""
    pages = pages or SETTLE_PAGES
    steps = 0
    for table in tables:
        if table in skip or not _has_table(conn, table):
            continue
        while True:
            before = conn.total_changes
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('merge', ?)", (pages,))
            if conn.total_changes - before < 2:  # FTS5's documented test of a step's work
                break
            steps += 1
    return steps


def insert_rows(conn: sqlite3.Connection, table: str, chunks: list[tuple[int, str]], terms: list[str]) -> int:
    """Insert into ``table`` (one of ``ddl.CHUNK_FTS_TABLES``) a row ``(rowid =
    chunk_id, terms, facets)`` for each chunk ``(chunk_id, facets)`` of ``chunks``
    whose ``terms`` (same order) are not empty. Returns the number inserted."""
    rows = [(cid, t, fac) for (cid, fac), t in zip(chunks, terms, strict=True) if t]
    conn.executemany(f"INSERT INTO {table}(rowid, {CHUNK_FTS_TABLES[table]}, facets) VALUES(?,?,?)", rows)
    return len(rows)


def chunk_terms(table: str, texts: list[str]) -> list[str]:
    """The terms of ``texts`` (chunk texts) for ``table`` of ``ddl.CHUNK_FTS_TABLES``:
    ``transforms.grams.grams_batch`` for ``fts_grams``, ``symbols_batch`` for
    ``fts_symbols`` (one string per text, '' for no row)."""
    from ctxkeep.transforms.grams import grams_batch, symbols_batch

    return (grams_batch if table == "fts_grams" else symbols_batch)(texts)


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name=?", (name,)).fetchone() is not None


def _contentless(conn: sqlite3.Connection, table: str) -> bool:
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name=?", (table,)).fetchone()
    return sql is not None and "content=''" in sql[0]


def delete_chunk_rows(conn: sqlite3.Connection, chunk_ids: str, params: tuple | list = ()) -> None:
    """Delete the rows of the chunks ``chunk_ids`` (an SQL list or sub-select over
    chunk ids, with its ``params``) from ``ddl.CHUNK_FTS_TABLES``, in the caller's
    transaction, before the chunks themselves go. Those tables are contentless
    (schema v8): FTS5's ``'delete'`` command takes the values a row was inserted with,
    recomputed here from the chunk's text (``chunk_terms``) and ``facets`` (kept equal
    to the indexed ones by ``add_facets``). Tables a store lacks are skipped; one
    still holding its content (before v8) is deleted from by rowid."""
    cur = conn.execute(f"SELECT chunk_id, text, facets FROM chunks WHERE chunk_id IN ({chunk_ids})", params)
    while rows := cur.fetchmany(5000):  # a purge may remove most of a store's text
        _delete_rows(conn, rows)


def _delete_rows(conn: sqlite3.Connection, rows: list[tuple[int, str, str]]) -> None:
    """FTS5 ``'delete'`` of chunks ``(chunk_id, text, facets)`` from the chunk FTS tables."""
    for table, col in CHUNK_FTS_TABLES.items():
        if not _has_table(conn, table):
            continue
        if not _contentless(conn, table):
            for part in in_parts([r[0] for r in rows]):
                conn.execute(f"DELETE FROM {table} WHERE rowid IN ({','.join('?' * len(part))})", part)
            continue
        terms = chunk_terms(table, [t for _, t, _ in rows])
        conn.executemany(
            f"INSERT INTO {table}({table}, rowid, {col}, facets) VALUES('delete', ?, ?, ?)",
            [(cid, t, fac) for (cid, _, fac), t in zip(rows, terms, strict=True) if t],
        )


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


def refresh_facets(conn: sqlite3.Connection, table: str = "chunk_rows") -> int:
    """Recompute ``chunks.facets`` of every chunk from the entries now holding its
    text (drops tokens of purged entries), in the caller's transaction; written to
    ``table`` (``chunk_rows``; the table ``chunks`` of a store before v10, migrating).
    The FTS tables are not updated: rebuild them after (``rebuild_fts_tables``).
    Returns the number of chunks whose facets changed."""
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
    conn.executemany(f"UPDATE {table} SET facets=? WHERE chunk_id=?", changed)
    return len(changed)


def add_facets(conn: sqlite3.Connection, facets: Mapping[str, AbstractSet[str]]) -> int:
    """Merge ``content_hash → tokens`` into the stored chunks of those contents and
    re-index the chunks whose ``facets`` changed (FTS5 ``'delete'`` with the old
    values, then insert, in every FTS table), in the caller's transaction. Returns the number of chunks
    changed."""
    from ctxkeep.transforms import facets as fx

    changed = []
    for part in in_parts(list(facets)):
        for cid, old, h in conn.execute(  # one statement text (``params.json_list``)
            f"SELECT ch.chunk_id, ch.facets, c.content_hash FROM contents c JOIN chunks ch "
            f"ON ch.content_id = c.content_id WHERE c.content_hash {IN_JSON}",
            (json_list(part),),
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
        _delete_rows(
            conn,
            conn.execute(
                f"SELECT chunk_id, text, facets FROM chunks WHERE chunk_id IN ({marks})", ids
            ).fetchall(),
        )
        conn.executemany("UPDATE chunk_rows SET facets=? WHERE chunk_id=?", part)
        conn.execute(
            f"INSERT INTO fts_words(rowid, title, text, facets) SELECT chunk_id, title, text, "
            f"facets FROM chunks WHERE chunk_id IN ({marks})",
            ids,
        )
        rows = conn.execute(
            f"SELECT chunk_id, text, facets FROM chunks WHERE chunk_id IN ({marks})", ids
        ).fetchall()
        keys = [(cid, fac) for cid, _, fac in rows]
        for table in CHUNK_FTS_TABLES:
            if _has_table(conn, table):
                insert_rows(conn, table, keys, chunk_terms(table, [t for _, t, _ in rows]))
    return len(changed)

"""Reindex: rebuild both FTS5 indexes and the DuckDB store from the SQLite rows.

For after a tokenizer or schema change, or to repair an index. The FTS tables are
dropped and created again from the current DDL (``sqlite_store.DDL``, so a changed
tokenizer takes effect), ``fts_words`` is filled with FTS5's ``'rebuild'`` command from
``chunks`` (it is an external-content table), ``fts_grams`` from the chunk texts through
``transforms.grams``; then DuckDB is deleted and synced from scratch.
"""
from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

from ..transforms.grams import grams_batch
from . import purge as purge_mod
from . import sqlite_store
from .lock import hold

BATCH = 5000


def _ddl(table: str) -> str:
    m = re.search(rf"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5\(.*?\);", sqlite_store.DDL, re.S)
    if not m:  # pragma: no cover - the DDL always has both
        raise RuntimeError(f"no DDL for {table}")
    return m.group(0)[:-1]


def rebuild_fts(conn: sqlite3.Connection) -> dict:
    """Drop and recreate ``fts_words`` and ``fts_grams`` and fill them from ``chunks``
    in one transaction. Returns ``{"chunks": n indexed in fts_words, "grams_rows": n
    chunks with substring-index terms}``. The caller holds the store lock."""
    with sqlite_store.write(conn):
        conn.execute("DROP TABLE IF EXISTS fts_words")
        conn.execute("DROP TABLE IF EXISTS fts_grams")
        conn.execute(_ddl("fts_words"))
        conn.execute(_ddl("fts_grams"))
        conn.execute("INSERT INTO fts_words(fts_words) VALUES('rebuild')")
        n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        n_grams = 0
        last = 0
        while True:
            rows = conn.execute("SELECT chunk_id, text FROM chunks WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?",
                                (last, BATCH)).fetchall()
            if not rows:
                break
            last = rows[-1][0]
            terms = grams_batch([t for _, t in rows])
            g = [(cid, gr) for (cid, _), gr in zip(rows, terms) if gr]
            conn.executemany("INSERT INTO fts_grams(rowid, grams) VALUES(?,?)", g)
            n_grams += len(g)
        conn.execute("INSERT INTO fts_words(fts_words) VALUES('optimize')")
        conn.execute("INSERT INTO fts_grams(fts_grams) VALUES('optimize')")
    sqlite_store.ensure_schema(conn)  # re-applies persistent FTS settings (e.g. a rank function)
    return {"chunks": n_chunks, "grams_rows": n_grams}


def reindex(home: Path, *, fts: bool = True, analytics: bool = True, timeout: float = -1) -> dict:
    """Rebuild the FTS indexes (``fts``) and DuckDB (``analytics``) of the store at
    ``home`` under the store lock.

    Returns ``{"chunks", "grams_rows", "analytics": note, "seconds"}``. Raises StoreBusy
    when the lock is not free within ``timeout`` seconds, StoreError when there is no
    store yet.
    """
    t0 = time.perf_counter()
    home = Path(home)
    if not (home / sqlite_store.DB_NAME).exists():
        from ..errors import StoreError
        raise StoreError("no store to reindex", where=str(home / sqlite_store.DB_NAME),
                         hint="run `ctxkeep ingest` first")
    out: dict = {"chunks": 0, "grams_rows": 0, "analytics": "skipped"}
    with hold(home, timeout, what="reindex"):
        conn = sqlite_store.connect(home)
        try:
            if fts:
                out.update(rebuild_fts(conn))
            if analytics:
                out["analytics"] = purge_mod.rebuild_analytics(conn, home)
        finally:
            conn.close()
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out

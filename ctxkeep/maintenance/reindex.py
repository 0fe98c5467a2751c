"""Reindex: rebuild both FTS5 indexes and the DuckDB store from the SQLite rows.

For after a tokenizer or schema change, or to repair an index. The FTS tables are
dropped and created again from the current DDL (``sqlite_store.DDL``, so a changed
tokenizer takes effect), ``fts_words`` is filled with FTS5's ``'rebuild'`` command from
``chunks`` (it is an external-content table), ``fts_grams`` from the chunk texts through
``transforms.grams``; the chunks' facet tokens are recomputed from the entries first;
then DuckDB is deleted and synced from scratch (``rebuild_analytics``, which purge
and retention call too, after they delete rows).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ctxkeep.errors import StoreError
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB, ANALYTICS_WAL, STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite.store_safety import damaged

# duckdb itself is imported only when used, so that importing purge, retention or
# reindex stays cheap


def rebuild_analytics(conn: sqlite3.Connection, home: Path) -> str:
    """Delete ``analytics.duckdb`` (and its WAL) and rebuild it from SQLite
    (``sinks.duckdb.sync(..., rebuild=True)``, then ``sqlite_store.mark_analytics_synced``),
    so no deleted row survives in DuckDB's free blocks (purge, retention, reindex).
    Returns a one-line note; never raises (a failed rebuild is redone by the next
    ingest, which rebuilds a missing analytics store)."""
    for name in (ANALYTICS_DB, ANALYTICS_WAL):
        try:
            (Path(home) / name).unlink()
        except FileNotFoundError:
            pass
    try:
        from ctxkeep.sinks import duckdb as duckdb_store

        r = duckdb_store.sync(conn, Path(home), rebuild=True)
        sqlite_store.mark_analytics_synced(conn, r["entries_rowid"], r["status_seq"])
        return f"analytics rebuilt: {r['entries_synced']} entries"
    except Exception as e:
        return (
            f"analytics store not rebuilt ({type(e).__name__}: {str(e).splitlines()[0]}); "
            "the next ingest rebuilds it"
        )


def rebuild_fts(conn: sqlite3.Connection) -> dict:
    """Recompute every chunk's facets from the entries now holding its text
    (``sqlite_store.refresh_facets``: tokens of purged entries go), then drop,
    recreate and fill ``fts_words`` and ``fts_grams`` from ``chunks``
    (``sqlite_store.rebuild_fts_tables``), in one transaction. Returns ``{"chunks": n
    indexed in fts_words, "grams_rows": n chunks with substring-index terms,
    "facets_changed": n chunks}``. The caller holds the store lock."""
    with sqlite_store.write(conn):
        changed = sqlite_store.refresh_facets(conn)
        out = sqlite_store.rebuild_fts_tables(conn)
    return {**out, "facets_changed": changed}


def run_reindex(home: Path, *, fts: bool = True, analytics: bool = True, timeout: float = -1) -> dict:
    """Rebuild the FTS indexes (``fts``) and DuckDB (``analytics``) of the store at
    ``home`` under the store lock.

    Returns ``{"chunks", "grams_rows", "analytics": note, "seconds"}``. Raises StoreBusy
    when the lock is not free within ``timeout`` seconds, StoreError when there is no
    store yet, StoreDamaged when ``PRAGMA quick_check`` finds damage (checked first).
    """
    t0 = time.perf_counter()
    home = Path(home)
    if not (home / STORE_DB).exists():
        raise StoreError("no store to reindex", where=str(home / STORE_DB), hint="run `ctxkeep ingest` first")
    out: dict = {"chunks": 0, "grams_rows": 0, "analytics": "skipped"}
    with hold(home, timeout, what="reindex"):
        conn = sqlite_store.connect(home)
        try:
            # reindex reads every chunk: a damaged store is refused before anything is dropped
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
            if problems != ["ok"]:
                raise damaged(home / STORE_DB, "; ".join(problems))
            if fts:
                out.update(rebuild_fts(conn))
            if analytics:
                out["analytics"] = rebuild_analytics(conn, home)
        finally:
            conn.close()
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out

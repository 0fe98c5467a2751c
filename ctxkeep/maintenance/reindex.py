"""Reindex: rebuild both FTS5 indexes and the DuckDB store from the SQLite rows.

For after a tokenizer or schema change, or to repair an index. The FTS tables are
dropped and created again from the current DDL (``sqlite_store.DDL``, so a changed
tokenizer takes effect), ``fts_words`` is filled with FTS5's ``'rebuild'`` command from
``chunks`` (it is an external-content table), ``fts_grams`` from the chunk texts through
``transforms.grams``; the chunks' facet tokens are recomputed from the entries first;
then DuckDB is deleted and synced from scratch (``rebuild_analytics``, which purge
and retention call too, after they delete rows).

The vault behind it (issue 27): before the indexes, the files the agents deleted that
the vault holds (gone from disk) and whose stored derivation is missing (no
watermark) or was made by an older parser than today's are derived again from the
vault (``reparse.reparse(paths=…)``), so the rows the indexes are rebuilt from are
what today's parsers make of every session kept, not only of the files still on disk
(``ingest`` reads those again by itself after a parser change).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ctxkeep.errors import StoreError
from ctxkeep.sinks import recovery
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite import intents
from ctxkeep.sinks.sqlite.intents import kill_point

# duckdb itself is imported only when used, so that importing purge, retention or
# reindex stays cheap


def rebuild_analytics(conn: sqlite3.Connection, home: Path) -> str:
    """Delete ``analytics.duckdb`` (and its WAL) and rebuild it from SQLite
    (``sinks.recovery.rebuild_analytics``), so no deleted row survives in DuckDB's free
    blocks. Returns a one-line note; never raises (a failed rebuild is redone by the
    next ingest, which rebuilds a missing analytics store)."""
    return recovery.rebuild_analytics(conn, home)[1]


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


def stale_in_vault(conn) -> list[str]:
    """The vault paths (``vault_files.path``) of the files whose agent's file is gone
    from disk and whose derivation in the store is missing (no watermark) or is an
    older parser's than today's (the watermark's ``parser_version``): what only the
    vault can derive again. Sorted; ``[]`` for a store before the vault."""
    from ctxkeep.sinks.vault import manifest
    from ctxkeep.sources import SOURCES

    try:
        latest = manifest.generations(conn, latest=True)
    except sqlite3.Error:
        return []
    versions = {p: w.parser_version for p, w in sqlite_store.load_watermarks(conn, state=False).items()}
    out = []
    for g in latest:
        disk = g.disk_path
        if Path(disk).exists() or g.agent not in SOURCES:
            continue
        if versions.get(disk) != SOURCES[g.agent].PARSER_VERSION:
            out.append(g.path)
    return sorted(out)


def run_reindex(home: Path, *, fts: bool = True, analytics: bool = True, timeout: float = -1) -> dict:
    """Rebuild the FTS indexes (``fts``) and DuckDB (``analytics``) of the store at
    ``home`` under the store lock.

    First the files only the vault can derive (``stale_in_vault``) are reparsed from
    it (``from_vault``: ``{"files", "diff"}`` as ``reparse`` answers, or None when
    there were none).

    Returns ``{"chunks", "grams_rows", "analytics": note, "from_vault", "seconds"}``.
    Raises StoreBusy when the lock is not free within ``timeout`` seconds, StoreError
    when there is no store yet, StoreDamaged when ``PRAGMA quick_check`` finds damage
    (checked first), VaultDamaged (an object does not read back: nothing changed),
    ConfigError for a broken ``prices.toml`` when ``analytics`` (before anything changes).
    """
    t0 = time.perf_counter()
    home = Path(home)
    if not (home / STORE_DB).exists():
        raise StoreError("no store to reindex", where=str(home / STORE_DB), hint="run `ctxkeep ingest` first")
    if analytics:
        from ctxkeep.sinks.prices_file import prices_error

        err = prices_error(home)
        if err is not None:
            raise err
    out: dict = {"chunks": 0, "grams_rows": 0, "analytics": "skipped", "from_vault": None}
    with hold(home, timeout, what="reindex"):
        conn = sqlite_store.connect(home)
        try:
            recovery.recover(conn, home, check=True)
            stale = stale_in_vault(conn)
        finally:
            conn.close()
        if stale:  # (reparse swaps store.db: done before the indexes' connection opens)
            from ctxkeep.maintenance.reparse import reparse

            r = reparse(home, paths=stale)
            out["from_vault"] = {"files": r["files"], "diff": r["diff"]}
        conn = sqlite_store.connect(home)
        try:
            # reindex reads every chunk: a damaged store is refused before anything is dropped
            recovery.recover(conn, home, check=True)
            # a killed reindex is finished by the next command (sinks.recovery)
            iid = intents.begin(conn, "reindex", {"fts": fts, "analytics": analytics})
            if fts:
                out.update(rebuild_fts(conn))
                intents.advance(conn, iid, "fts")
            kill_point("reindex", "analytics")
            _done, note = recovery.complete(conn, home, [iid])
            if analytics:
                out["analytics"] = note
        finally:
            conn.close()
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out

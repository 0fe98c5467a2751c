"""The analytics store for the notebooks and the app: the period they show
(``Window``: an IANA zone and local dates) and read-only connections to
``analytics.duckdb`` (DuckDB, the model of ``sinks/duckdb/model.sql``) and
``store.db`` (SQLite, for what only the system of record holds: quarantine, dedup).

The period comes from ``query.notebooks`` (a thin use until the service layer
answers it itself); the DuckDB file is opened as every reader opens it
(``sinks.analytics_read.open_readonly``: brought current with SQLite first, or, while
an ingest holds it, a copy of its last checkpoint). Raises ``UsageError`` for a bad
zone or date, ``CtxkeepError`` when there is no store yet, ``StoreError`` for a
damaged analytics file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxkeep.errors import CtxkeepError
from ctxkeep.query.notebooks import Window, frame, window

__all__ = ["Window", "agents_of", "frame", "open_store", "window"]


def open_store(store: str | Path | None, *, wait: float = 0.0):
    """``(home, duck, lite)`` for a notebook or the app: ``home`` resolved (""/None:
    ``$CTXKEEP_HOME`` or the platform data dir), ``duck`` a read-only DuckDB connection
    (brought current first, waiting at most ``wait`` seconds for the store lock: a page
    never waits on an ingest), ``lite`` a read-only sqlite3 connection to
    ``store.db``. Raises CtxkeepError ``no store yet`` (run ingest) or what
    ``open_readonly`` raises."""
    from ctxkeep.config import resolve_home
    from ctxkeep.sinks.analytics_read import open_readonly
    from ctxkeep.sinks.files import STORE_DB

    home = Path(resolve_home(str(store) if store else None))
    if not (home / STORE_DB).exists():
        raise CtxkeepError("no store yet", where=str(home), hint="run `ctxkeep ingest` first")
    duck, _note = open_readonly(home, wait=wait)
    return home, duck, open_lite(home)


def open_lite(home: Path) -> sqlite3.Connection:
    """A read-only sqlite3 connection to ``<home>/store.db`` (the app opens one again
    when a reparse, reindex or restore put a new store in place); a hot journal a killed
    writer left is rolled back first (``readonly.open_ro``; StoreError on a read-only
    mount)."""
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.sinks.sqlite.readonly import open_ro

    return open_ro(Path(home) / STORE_DB)


def agents_of(duck) -> list[str]:
    """Every agent the store holds entries or usage of, sorted (the colour domain of
    the notebooks' charts: one colour per agent on every page), from the read-only
    DuckDB connection ``duck`` of ``open_store``."""
    rows = duck.sql(
        "SELECT DISTINCT agent FROM all_entries UNION SELECT DISTINCT agent FROM usage"
    ).fetchall()
    return sorted({a for (a,) in rows if a})

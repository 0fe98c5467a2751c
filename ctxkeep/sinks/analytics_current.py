"""Bring DuckDB current: the one step every reader of ``analytics.duckdb`` takes first.

DuckDB is derived from SQLite and may lag behind it: a small ingest (the agents'
hooks, ``ingest --path FILE`` of a few new lines) stores its entries in SQLite only
and leaves the DuckDB sync to the next reader (``pipeline.engine.DEFER_ANALYTICS_BYTES``),
a small first ingest (the corpus of a new user) leaves DuckDB's first build to it
(``pipeline.engine.FIRST_BUILD_DEFER_BYTES``), and a sync that found the file held by
another process is caught up later too. Every
reader of DuckDB (``ctxkeep report``, the status line, notebooks and the app,
``doctor``, ``export``) calls ``bring_current`` before it opens the file.

``bring_current`` reads SQLite's sync marks (``sqlite_store.analytics_behind``: two
``max()`` lookups, no DuckDB import) and returns at once when DuckDB holds everything.
Otherwise it takes the store lock (``sinks.lock.hold``) for at most ``wait`` seconds:
DuckDB takes one writing process at a time, and an ingest holds the lock while it
writes; under it, the incremental ``sinks.duckdb.sync`` (entries past the rowid mark,
the status log, usage) and ``mark_analytics_synced``, as an ingest's closing sync
does. It never fails its reader: a lock held past ``wait`` (a long ingest or
compress), a DuckDB file held by another process (a notebook) or any DuckDB error
leaves DuckDB as it is and comes back as a one-line note (the reader then shows what
DuckDB holds: the lag is said, never hidden); so does a damaged SQLite store, which
is ``doctor``'s matter, not the mirror's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxkeep.errors import CtxkeepError, StoreBusy
from ctxkeep.sinks import recovery
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB, STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.prices_file import prices_error
from ctxkeep.sinks.sqlite import store_safety

#: how long a reader waits for the store lock by default (seconds): a hook-path ingest
#: of a few lines holds it for well under a second
WAIT_SECONDS = 2.0


def behind(home: Path) -> bool:
    """True when SQLite at ``home`` holds entries or status changes that DuckDB does not
    (``sqlite_store.analytics_behind``): DuckDB exists and lags, or was never built (no
    sync ever recorded, ``sqlite_store.analytics_built``: a small first ingest left its
    first build to the first reader, ``pipeline.engine.FIRST_BUILD_DEFER_BYTES``).
    False without a store, without a DuckDB file once one was built (a deleted one is
    rebuilt by ``ingest`` or ``doctor --repair``, not by a reader: the reports say it is
    missing) or when SQLite cannot be opened read-only (the reader's own open says
    why)."""
    home = Path(home)
    if not (home / STORE_DB).exists():
        return False
    exists = (home / ANALYTICS_DB).exists()
    try:
        conn = sqlite_store.connect(home, readonly=True)
    except CtxkeepError:
        return False
    try:
        if not exists and sqlite_store.analytics_built(conn):
            return False
        return sqlite_store.analytics_behind(conn, home)
    except sqlite3.Error:  # a damaged store: its own readers and doctor say so
        return False
    finally:
        conn.close()


def bring_current(home: Path, *, wait: float = WAIT_SECONDS) -> str | None:
    """Sync DuckDB at ``home`` from SQLite when it lags behind (see the module doc).

    ``wait``: seconds to wait for the store lock (0: do not wait, the status line).
    Returns None when DuckDB is current (already, or now), else a one-line note of why
    it still lags (the reader goes on with what DuckDB holds). Never raises: a damaged
    SQLite page found by the sync is a note too (``doctor`` reports the store)."""
    home = Path(home)
    if not behind(home):
        return None
    err = prices_error(home)
    if err is not None:  # a sync would price nothing: DuckDB keeps its last prices
        return f"analytics store not brought current: {err}"
    try:
        with hold(home, wait, what="analytics catch-up"):
            good = store_safety.known_good(home)  # its sync marks keep it so
            conn = sqlite_store.connect(home)
            try:
                ok, note = recovery.sync_analytics(conn, home)
            finally:
                conn.close()
            if good:
                store_safety.mark_good(home)
    except StoreBusy:
        return (
            "another ctxkeep run holds the store: the analytics store may lag behind store.db "
            "(the next report catches up)"
        )
    except (CtxkeepError, sqlite3.Error) as e:  # a store this version cannot write, a damaged page
        return f"analytics store not brought current ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"
    return None if ok else note

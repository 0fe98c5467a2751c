"""How far DuckDB holds SQLite, kept in the ``meta`` table.

Keys (text values): ``analytics_entries_rowid`` and ``analytics_status_seq``, the
``entries.rowid`` and ``status_log.seq`` high-water marks of the last complete DuckDB
sync (``sinks.duckdb.sync``). (``schema_version`` is ``connection.schema_version``.)
``analytics_prices``: the CRC-32 of ``<home>/prices.toml``'s bytes that the last usage sync
priced with (``prices_stamp``; ``0`` without the file), so that an edited price file makes
DuckDB behind too (newuser17 F3: an edit showed only after ``reindex``); absent in a store
synced before it (then only entries and status changes count).
Neither key: DuckDB was never built for this store (a small first ingest leaves its
first build to the first reader: ``pipeline.engine.FIRST_BUILD_DEFER_BYTES``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxkeep.sinks.files import ANALYTICS_DB, PRICES_FILE
from ctxkeep.sinks.sqlite.connection import write


def prices_stamp(home: Path) -> str:
    """The CRC-32 of ``<home>/prices.toml``'s bytes as text (``"0"`` without the file or
    when it cannot be read: the sync's own read then says why)."""
    import zlib

    try:
        return str(zlib.crc32((Path(home) / PRICES_FILE).read_bytes()))
    except OSError:
        return "0"


def mark_analytics_synced(
    conn: sqlite3.Connection,
    entries_rowid: int,
    status_seq: int,
    prices: str | None = None,
    usage_seq: int | None = None,
) -> None:
    """Record how far DuckDB holds SQLite (``duckdb_store.sync``'s return), so that
    ``analytics_behind`` can tell without opening DuckDB; ``prices``: the
    ``prices_stamp`` its usage was priced with (a sync that priced nothing leaves the last
    one); ``usage_seq``: the ``usage_log`` seq DuckDB's usage now holds (its
    ``usage_log_seq``): the log rows below it are deleted, the one at it kept (its seq
    is the mark: a new row gets the next). Own transaction."""
    marks = [("analytics_entries_rowid", str(entries_rowid)), ("analytics_status_seq", str(status_seq))]
    if prices is not None:
        marks.append(("analytics_prices", prices))
    with write(conn):
        conn.executemany("INSERT OR REPLACE INTO meta VALUES(?, ?)", marks)
        if usage_seq:
            conn.execute("DELETE FROM usage_log WHERE seq < ?", (usage_seq,))


def analytics_behind(conn: sqlite3.Connection, home: Path | None = None) -> bool:
    """True when SQLite holds entries or status changes past what the last complete
    DuckDB sync recorded (``mark_analytics_synced``): a sync failed or was
    interrupted, and even an ingest with nothing new must catch DuckDB up. With the
    store's ``home``: also when ``<home>/analytics.duckdb`` is gone (deleted) while
    SQLite holds an entry, or when its ``prices.toml`` is not the one the last usage sync
    priced with (``prices_stamp``)."""
    gone = home is not None and not (Path(home) / ANALYTICS_DB).exists()
    if gone and conn.execute("SELECT 1 FROM entry_rows LIMIT 1").fetchall():
        return True
    marks = dict(
        conn.execute(
            "SELECT key, value FROM meta "
            "WHERE key IN ('analytics_entries_rowid', 'analytics_status_seq', 'analytics_prices')"
        ).fetchall()
    )
    if home is not None and "analytics_prices" in marks and marks["analytics_prices"] != prices_stamp(home):
        return True
    rowid = conn.execute("SELECT coalesce(max(rowid), 0) FROM entry_rows").fetchone()[0]
    seq = conn.execute("SELECT coalesce(max(seq), 0) FROM status_log").fetchone()[0]
    return rowid > int(marks.get("analytics_entries_rowid", 0)) or seq > int(
        marks.get("analytics_status_seq", 0)
    )


def analytics_built(conn: sqlite3.Connection) -> bool:
    """Whether a complete DuckDB sync was ever recorded for this store
    (``mark_analytics_synced``). False for a store whose first ingest left DuckDB to its
    readers (``analytics_current.behind`` then has a missing file built, not reported
    as deleted), or whose only syncs failed."""
    return conn.execute("SELECT 1 FROM meta WHERE key = 'analytics_entries_rowid'").fetchone() is not None


def usage_top(conn: sqlite3.Connection) -> int:
    """The top rowid of ``usage`` (0: empty): an ingest's new usage keys get rowids
    above it (``duckdb_store.UsageSteps`` syncs them as its groups commit)."""
    return conn.execute("SELECT coalesce(max(rowid), 0) FROM usage").fetchone()[0]

"""The export watermarks of a Parquet lake (``lake_exports``, ``maintenance.export``):
per ``(dest, tbl, machine, agent, month)`` partition, the rows and digest written and
the lake files holding them (a JSON list of paths). Writes run in their own
transaction (``connection.write``).
"""

from __future__ import annotations

import json
import sqlite3

from ctxkeep.sinks.sqlite.connection import write


def recorded(conn: sqlite3.Connection, dest: str, tbl: str, machine: str) -> dict:
    """``{(agent, month): (rows, digest, [files])}`` written to ``dest`` for ``tbl`` as
    ``machine``."""
    return {
        (a, mo): (n, d, json.loads(f or "[]"))
        for a, mo, n, d, f in conn.execute(
            "SELECT agent, month, rows, digest, files FROM lake_exports WHERE dest=? AND tbl=? AND machine=?",
            (dest, tbl, machine),
        )
    }


def other_machines(conn: sqlite3.Connection, dest: str, tbl: str, machine: str) -> list[str]:
    """The machine names other than ``machine`` this store exported ``tbl`` under."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT machine FROM lake_exports WHERE dest=? AND tbl=? AND machine<>?",
            (dest, tbl, machine),
        )
    ]


def forget(
    conn: sqlite3.Connection, dest: str, tbl: str, machine: str, part: tuple[str, str] | None = None
) -> None:
    """Delete the watermarks of ``machine``'s ``tbl`` in ``dest``: all of them, or the
    ``(agent, month)`` partition ``part``."""
    with write(conn):
        if part is None:
            conn.execute(
                "DELETE FROM lake_exports WHERE dest=? AND tbl=? AND machine=?", (dest, tbl, machine)
            )
        else:
            conn.execute(
                "DELETE FROM lake_exports WHERE dest=? AND tbl=? AND machine=? AND agent=? AND month=?",
                (dest, tbl, machine, *part),
            )


def record(
    conn: sqlite3.Connection,
    dest: str,
    tbl: str,
    machine: str,
    part: tuple[str, str],
    rows: int,
    digest: str,
    files: list[str],
    stamp: str,
) -> None:
    """Set the watermark of partition ``part`` (``(agent, month)``): ``rows`` written
    with ``digest`` into ``files`` at ``stamp`` (ISO-8601 UTC)."""
    with write(conn):
        conn.execute(
            "INSERT OR REPLACE INTO lake_exports VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (dest, tbl, machine, *part, rows, digest, json.dumps(sorted(files)), stamp),
        )


def chunk_rows(conn: sqlite3.Connection, hashes: list[str]) -> list[tuple[str, int, str]]:
    """``(content_hash, seq, text)`` of the chunks of the contents ``hashes``, through a
    TEMP table (one join instead of an ``IN`` list per 900 hashes)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _lake_hashes(h TEXT PRIMARY KEY)")
    try:
        conn.executemany("INSERT OR IGNORE INTO _lake_hashes VALUES(?)", ((h,) for h in hashes))
        return conn.execute(
            "SELECT c.content_hash, ch.seq, ch.text FROM _lake_hashes x JOIN contents c ON c.content_hash = x.h "
            "JOIN chunks ch ON ch.content_id = c.content_id"
        ).fetchall()
    finally:
        conn.execute("DROP TABLE IF EXISTS _lake_hashes")


def partitions(conn: sqlite3.Connection) -> list[tuple[str, str, str, list[str]]]:
    """``(dest, agent, month, [files])`` of every partition an export recorded (any
    table or machine: one item per table and machine); [] on a store without
    ``lake_exports``."""
    try:
        return [
            (d, a, mo, json.loads(f or "[]"))
            for d, a, mo, f in conn.execute("SELECT dest, agent, month, files FROM lake_exports")
        ]
    except sqlite3.OperationalError:
        return []

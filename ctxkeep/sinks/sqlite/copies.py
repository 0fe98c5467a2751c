"""Whole-file copies of the store (the SQL of ``maintenance.backup``): write one with
SQLite's online backup API, check one before it is trusted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxkeep.sinks.sqlite.connection import schema_version
from ctxkeep.sinks.sqlite.store_safety import APPLICATION_ID


def copy_store(src: sqlite3.Connection, dest: Path) -> None:
    """Copy the database of ``src`` into ``dest`` (an existing, empty file) with the
    online backup API, as one self-contained file (``journal_mode=DELETE``: no WAL).
    Raises sqlite3.DatabaseError."""
    dst = sqlite3.connect(dest)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    finally:
        dst.close()


def copy_problem(path: Path) -> str | None:
    """Why the store copy at ``path`` (opened read-only and immutable) is not usable,
    or None: ``PRAGMA quick_check(3)`` fails, or it is not a ctxkeep store (neither
    ``application_id`` = ``APPLICATION_ID`` nor a ``meta`` table with a
    ``schema_version``), or SQLite cannot read it (its message)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            qc = [r[0] for r in conn.execute("PRAGMA quick_check(3)").fetchall()]
            if qc != ["ok"]:
                return "quick_check: " + "; ".join(qc)
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            if app != APPLICATION_ID and schema_version(conn) == 0:
                return "not a ctxkeep store"
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return str(e)
    return None

"""Read-only opens of a store file (``mode=ro``) that a killed writer's hot rollback
journal does not stop: ``open_ro`` for the light readers outside ``connection.connect``
(the statusline, the hooks' worker, ``service.analytics.open_lite``, a wipe's counts,
the integrity checks, reparse's copy) and ``roll_back_hot_journal``, which
``connection._open_readonly`` uses too. Imports nothing of ctxkeep but its errors (the
statusline and the hooks' worker load this module on their fast paths).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

#: busy timeout of every connection, milliseconds
BUSY_TIMEOUT_MS = 30000


def roll_back_hot_journal(path: Path) -> None:
    """Roll back the hot journal (``store.db-journal``) a killed writer left, which a
    ``mode=ro`` connection refuses (SQLITE_READONLY_ROLLBACK, "attempt to write a
    readonly database"). A store only ever has one in its first moments: switching a new
    file to WAL always goes through a rollback journal (SQLite's OP_JournalMode; the
    vault's SIGKILL trials met it in CI when a first ingest was killed in that switch).
    The rollback is SQLite's own recovery, which any writable open runs (it takes the
    file's exclusive lock; a live writer's journal is not hot): a writable connection
    reads once and closes. Raises StoreError when the store cannot be opened writable
    (a read-only mount or folder); sqlite3.DatabaseError when SQLite finds the file
    damaged after the rollback."""
    from ctxkeep.errors import StoreError

    uri = Path(os.path.abspath(path)).as_uri()
    try:
        rw = sqlite3.connect(f"{uri}?mode=rw", uri=True, isolation_level=None)
        try:
            rw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            rw.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        finally:
            rw.close()
    except sqlite3.OperationalError as e:
        raise StoreError(
            f"a killed write left {path.name}-journal to roll back, and the store is read-only here ({e})",
            where=str(path),
            hint="run `ctxkeep ingest` once where the store is writable",
        ) from None


def open_ro(path: Path, *, immutable: bool = False, timeout: float = 5.0) -> sqlite3.Connection:
    """``path`` opened ``mode=ro`` (``sqlite3.connect``'s ``timeout``, seconds; with
    ``immutable``, ``&immutable=1``: no journal or WAL is read, nothing to roll back),
    a hot rollback journal beside it rolled back first (``roll_back_hot_journal``). The
    file is read once here (SQLite opens it lazily); another failure of that read is
    left to the caller's first statement, as with a plain connect. Raises StoreError
    when the journal cannot be rolled back (a read-only mount), sqlite3.Error as
    ``sqlite3.connect``."""
    uri = f"{Path(os.path.abspath(path)).as_uri()}?mode=ro{'&immutable=1' if immutable else ''}"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout)
    if immutable:
        return conn
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError as e:
        if (
            getattr(e, "sqlite_errorcode", None) != sqlite3.SQLITE_READONLY_ROLLBACK
            or not Path(path).is_file()
        ):
            return conn
        conn.close()
        roll_back_hot_journal(Path(path))
        conn = sqlite3.connect(uri, uri=True, timeout=timeout)
    return conn

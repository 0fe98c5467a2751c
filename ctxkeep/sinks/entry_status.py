"""Status and location updates of stored entries, in SQLite and DuckDB together.

Used by the compress flow: entries whose lines were cut from a session file are marked
``archived`` (they stay in the store and stay searchable); entries whose lines moved in
the rewritten file get their new ``source_offset``; a restore marks them ``active``
again. SQLite is the system of record: DuckDB is updated after it, and a DuckDB file
held by another process is reported (``duckdb`` note), not fatal — ``reindex`` rebuilds
it from SQLite.
"""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pyarrow as pa

from . import duckdb_store
from .sqlite_store import _chunks, existing_entry_ids, now_iso, write


def present_ids(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """The subset of ``ids`` (entry ids) stored in SQLite ``entries``."""
    return existing_entry_ids(conn, list(set(ids)))


def quarantined_hashes(conn: sqlite3.Connection, path: str) -> set[str]:
    """SHA-256 hex of the complete raw bytes of every line quarantined for ``path``
    (lines longer than the quarantine's raw limit are not complete, so not listed)."""
    out = set()
    for raw, length in conn.execute("SELECT raw, length FROM quarantine WHERE path = ?", (path,)):
        if raw is not None and len(raw) == length:
            out.add(hashlib.sha256(raw).hexdigest())
    return out


def set_status(conn: sqlite3.Connection, home: Path, ids: list[str], status: str,
               from_status: str | None = None) -> dict:
    """Set ``status`` (``active``/``archived``/``consumed``) of the entries ``ids`` in
    SQLite, then DuckDB; with ``from_status``, only entries that have that status. When
    the store has a ``status_log`` table, each change is appended to it too (so a
    DuckDB sync that replays the log agrees).
    Returns ``{"sqlite": rows changed, "duckdb": rows changed or None, "note": str}``."""
    ids = list(set(ids))
    cond = "status = ?" if from_status else "status != ?"
    arg = from_status or status
    n = 0
    log = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='status_log'").fetchone()
    stamp = now_iso()
    with write(conn):
        for part in _chunks(ids):
            marks = ",".join("?" * len(part))
            changed = [r[0] for r in conn.execute(
                f"SELECT entry_id FROM entries WHERE {cond} AND entry_id IN ({marks})", [arg, *part])]
            if not changed:
                continue
            conn.executemany("UPDATE entries SET status = ? WHERE entry_id = ?",
                             [(status, i) for i in changed])
            if log:  # stores that log status changes for the DuckDB sync to replay
                conn.executemany("INSERT INTO status_log(entry_id, status, changed_at) VALUES(?,?,?)",
                                 [(i, status, stamp) for i in changed])
            n += len(changed)
    duck, note = _duck(home, f"UPDATE entries SET status = ? FROM _ids WHERE "
                             f"entries.entry_id = _ids.entry_id AND entries.{cond}",
                       pa.table({"entry_id": pa.array(ids, pa.string())}), [status, arg])
    return {"sqlite": n, "duckdb": duck, "note": note}


def relocate(conn: sqlite3.Connection, home: Path, source_path: str,
             moves: list[tuple[str, int]]) -> dict:
    """Set ``source_offset`` of entries to their byte offset in the rewritten file.

    Args: ``moves``: (entry_id, new offset in bytes) pairs; only entries of
    ``source_path`` change. Returns ``{"sqlite": rows, "duckdb": rows or None, "note"}``."""
    n = 0
    with write(conn):
        for eid, off in moves:
            cur = conn.execute("UPDATE entries SET source_offset = ? WHERE entry_id = ? AND "
                               "source_path = ? AND source_offset IS NOT ?", (off, eid, source_path, off))
            n += cur.rowcount
    tbl = pa.table({"entry_id": pa.array([m[0] for m in moves], pa.string()),
                    "off": pa.array([m[1] for m in moves], pa.int64())})
    duck, note = _duck(home, "UPDATE entries SET source_offset = _ids.off FROM _ids "
                             "WHERE entries.entry_id = _ids.entry_id AND entries.source_path = ?",
                       tbl, [source_path])
    return {"sqlite": n, "duckdb": duck, "note": note}


def _duck(home: Path, sql: str, tbl: pa.Table, params: list) -> tuple[int | None, str]:
    if not (Path(home) / duckdb_store.DB_NAME).exists():
        return None, "no analytics store"
    try:
        con = duckdb_store.connect(home)
    except Exception as e:  # noqa: BLE001 - held by a notebook: SQLite stays the truth
        return None, f"analytics store not updated ({type(e).__name__}); run reindex"
    try:
        con.register("_ids", tbl)
        rows = con.execute(sql, params).fetchall()
        return (rows[0][0] if rows else 0), "ok"
    finally:
        con.close()

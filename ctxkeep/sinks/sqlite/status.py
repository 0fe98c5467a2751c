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
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks.sqlite import _chunks, existing_entry_ids, now_iso, write


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


def set_status_sqlite(conn: sqlite3.Connection, ids: list[str], status: str,
                      from_status: str | None = None) -> int:
    """Set ``status`` (``active``/``archived``/``consumed``) of the entries ``ids`` in
    SQLite; with ``from_status``, only entries that have that status. When the store has
    a ``status_log`` table, each change is appended to it too (so a DuckDB sync that
    replays the log agrees). Returns the number of rows changed."""
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
            if log:
                conn.executemany("INSERT INTO status_log(entry_id, status, changed_at) VALUES(?,?,?)",
                                 [(i, status, stamp) for i in changed])
            n += len(changed)
    return n


def relocate_sqlite(conn: sqlite3.Connection, source_path: str, moves: list[tuple[str, int]]) -> int:
    """Set ``source_offset`` of entries of ``source_path`` to their byte offset in the
    rewritten file. ``moves``: (entry_id, new offset in bytes). Returns rows changed."""
    n = 0
    with write(conn):
        for eid, off in moves:
            cur = conn.execute("UPDATE entries SET source_offset = ? WHERE entry_id = ? AND "
                               "source_path = ? AND source_offset IS NOT ?", (off, eid, source_path, off))
            n += cur.rowcount
    return n


@dataclass
class DuckChanges:
    """Changes to replay on DuckDB in one connection: ``status``: (ids, status,
    from_status) triples; ``moves``: (source_path, [(entry_id, offset)]) pairs."""

    status: list[tuple[list[str], str, str | None]] = field(default_factory=list)
    moves: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.status or self.moves)


def apply_duck(home: Path, changes: DuckChanges) -> tuple[int | None, str]:
    """Replay ``changes`` on DuckDB ``entries`` (after ``duckdb_store.sync``). Returns
    (rows changed or None, note): ``ok``, ``no analytics store`` or why it was not
    updated (e.g. a notebook holds the file; ``reindex`` rebuilds it from SQLite)."""
    if not changes:
        return 0, "ok"
    if not (Path(home) / duckdb_store.DB_NAME).exists():
        return None, "no analytics store"
    try:
        con = duckdb_store.connect(home)
    except Exception as e:  # noqa: BLE001 - held by a notebook: SQLite stays the truth
        return None, f"analytics store not updated ({type(e).__name__}); run reindex"
    n = 0
    try:
        con.execute("BEGIN")
        for ids, status, from_status in changes.status:
            con.register("_ids", pa.table({"entry_id": pa.array(list(set(ids)), pa.string())}))
            cond = "entries.status = ?" if from_status else "entries.status != ?"
            rows = con.execute(f"UPDATE entries SET status = ? FROM _ids WHERE "
                               f"entries.entry_id = _ids.entry_id AND {cond}",
                               [status, from_status or status]).fetchall()
            n += rows[0][0] if rows else 0
            con.unregister("_ids")
        for path, moves in changes.moves:
            con.register("_mv", pa.table({"entry_id": pa.array([m[0] for m in moves], pa.string()),
                                          "off": pa.array([m[1] for m in moves], pa.int64())}))
            rows = con.execute("UPDATE entries SET source_offset = _mv.off FROM _mv WHERE "
                               "entries.entry_id = _mv.entry_id AND entries.source_path = ?",
                               [path]).fetchall()
            n += rows[0][0] if rows else 0
            con.unregister("_mv")
        con.execute("COMMIT")
        return n, "ok"
    finally:
        con.close()


def set_status(conn: sqlite3.Connection, home: Path, ids: list[str], status: str,
               from_status: str | None = None) -> dict:
    """``set_status_sqlite`` then the same change on DuckDB. Returns ``{"sqlite": rows,
    "duckdb": rows or None, "note": str}``."""
    n = set_status_sqlite(conn, ids, status, from_status)
    duck, note = apply_duck(home, DuckChanges(status=[(ids, status, from_status)]))
    return {"sqlite": n, "duckdb": duck, "note": note}


def relocate(conn: sqlite3.Connection, home: Path, source_path: str,
             moves: list[tuple[str, int]]) -> dict:
    """``relocate_sqlite`` then the same change on DuckDB. Returns ``{"sqlite": rows,
    "duckdb": rows or None, "note": str}``."""
    n = relocate_sqlite(conn, source_path, moves)
    duck, note = apply_duck(home, DuckChanges(moves=[(source_path, moves)]))
    return {"sqlite": n, "duckdb": duck, "note": note}

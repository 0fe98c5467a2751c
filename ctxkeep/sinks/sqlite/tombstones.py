"""Purge marks: the ``tombstones`` and ``purge_files`` rows a purge leaves, the
watermarks it drops and the run details it scrubs (the SQL of ``maintenance.purge``).

- ``tombstones(scope, value, created_at)``: a purged ``session`` id or ``project`` dir;
  ``pipeline.engine.transform_batch`` skips what it covers (``lookup.tombstoned``);
- ``purge_files(scope, value, kind, item)``: what a purge of ``(scope, value)``
  concerned: ``kind`` ``path`` (a source file read again by a ``reingest`` purge),
  ``session`` (a session a project purge tombstoned on its own) or ``file`` (a file
  removed wholly; the ingest plan skips it, ``delete.purged_files``).

Every function writes in the caller's transaction (``connection.write``).
"""

from __future__ import annotations

import json
import sqlite3


def add(
    conn: sqlite3.Connection, scope: str, value: str, stamp: str, owned: set[str], files: list[str]
) -> bool:
    """Tombstone ``(scope, value)`` at ``stamp`` (ISO-8601 UTC); for a ``project``, each
    session of ``owned`` (selected whole) gets its own tombstone too; ``files`` are
    remembered as ``purge_files`` kind ``path``. Returns False when ``(scope, value)``
    had its tombstone already (an earlier purge of it: the stamp stays)."""
    key = (scope, value)
    new = conn.execute("INSERT OR IGNORE INTO tombstones VALUES(?,?,?)", (*key, stamp)).rowcount == 1
    if scope == "project":
        for sid in owned:
            if sid:
                conn.execute("INSERT OR IGNORE INTO tombstones VALUES('session',?,?)", (sid, stamp))
                conn.execute("INSERT OR IGNORE INTO purge_files VALUES(?,?,'session',?)", (*key, sid))
    conn.executemany("INSERT OR IGNORE INTO purge_files VALUES(?,?,'path',?)", [(*key, f) for f in files])
    return new


def lift(conn: sqlite3.Connection, scope: str, value: str, files: list[str]) -> tuple[int, int]:
    """Lift the tombstone of ``(scope, value)`` and those of the sessions its purge
    tombstoned (a ``session`` scope: ``value`` itself), drop the watermarks of
    ``files`` and of the paths the purge remembered, and forget its ``purge_files``
    rows. Returns ``(tombstones lifted, watermark rows dropped)``."""
    key = (scope, value)
    linked = conn.execute("SELECT kind, item FROM purge_files WHERE scope=? AND value=?", key).fetchall()
    paths = set(files) | {item for kind, item in linked if kind == "path"}
    sessions = {item for kind, item in linked if kind == "session"}
    if scope == "session":
        sessions.add(value)
    n = conn.execute("DELETE FROM tombstones WHERE scope=? AND value=?", key).rowcount
    for sid in sessions:
        n += conn.execute("DELETE FROM tombstones WHERE scope='session' AND value=?", (sid,)).rowcount
    dropped = 0
    for p in sorted(paths):
        dropped += conn.execute("DELETE FROM watermarks WHERE path=?", (p,)).rowcount
    conn.execute("DELETE FROM purge_files WHERE scope=? AND value=?", key)
    return n, dropped


def forget_files(conn: sqlite3.Connection, scope: str, value: str, whole: list[str], remember: bool) -> int:
    """Delete the watermark rows of ``whole`` (files a purge removed wholly); with
    ``remember`` they become ``purge_files`` kind ``file`` of ``(scope, value)``.
    Returns the watermark rows deleted."""
    n = 0
    for path in whole:
        n += conn.execute("DELETE FROM watermarks WHERE path=?", (path,)).rowcount
    if remember:
        conn.executemany(
            "INSERT OR IGNORE INTO purge_files VALUES(?,?,'file',?)", [(scope, value, p) for p in whole]
        )
    return n


def created(conn: sqlite3.Connection) -> dict[tuple[str, str], str | None]:
    """When each standing tombstone was set: ``{(scope, value): created_at}`` (ISO-8601
    UTC; an ingest's summary says "purged on" with it)."""
    return {(sc, v): at for sc, v, at in conn.execute("SELECT scope, value, created_at FROM tombstones")}


def has(conn: sqlite3.Connection, scope: str, value: str) -> bool:
    """True when the store holds a tombstone of ``(scope, value)``."""
    row = conn.execute("SELECT 1 FROM tombstones WHERE scope = ? AND value = ?", (scope, value)).fetchone()
    return row is not None


def _scrub_json(value, needles: tuple[str, ...]):
    """``value`` (decoded JSON) without what names a needle: list items that mention one
    are dropped, strings that contain one become ``"[purged]"``, dict keys that contain
    one are dropped."""
    if isinstance(value, str):
        return "[purged]" if any(n in value for n in needles) else value
    if isinstance(value, list):
        return [_scrub_json(v, needles) for v in value if not _mentions(v, needles)]
    if isinstance(value, dict):
        return {k: _scrub_json(v, needles) for k, v in value.items() if not any(n in k for n in needles)}
    return value


def _mentions(value, needles: tuple[str, ...]) -> bool:
    return any(n in json.dumps(value, default=str) for n in needles)


def scrub_run_details(conn: sqlite3.Connection, sessions: set[str], files: list[str]) -> int:
    """Remove from every ``runs.detail`` (JSON) what names one of ``sessions`` (ids) or
    ``files`` (paths): the file lists of compress runs, an earlier purge's value, a
    problem line (``_scrub_json``). In the caller's transaction. Returns the runs
    changed."""
    needles = tuple(sorted({n for n in (*sessions, *files) if n and n != "*"}))
    if not needles:
        return 0
    changed = 0
    for run_id, detail in conn.execute("SELECT run_id, detail FROM runs WHERE detail IS NOT NULL").fetchall():
        if not any(n in detail for n in needles):
            continue
        try:
            new = json.dumps(_scrub_json(json.loads(detail), needles), default=str)
        except ValueError:
            new = "{}"
        conn.execute("UPDATE runs SET detail=? WHERE run_id=?", (new, run_id))
        changed += 1
    return changed

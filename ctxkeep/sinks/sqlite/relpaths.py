"""Session-file paths a store holds relative (``.claude/projects/x.jsonl``), as
``compress FILE``, ``ingest --path P`` and ``backfill --path P`` stored them before
newuser24 F1, beside the absolute path discovery stores for the same file: found
(``relative_paths``) and merged into their absolute twin (``merge``) by ``doctor``.

The tables with a session file's path: ``files`` (the entries' ``source_path``, by
``entry_rows.file_id``), ``watermarks``, ``coverage``, ``quarantine`` and
``vault_files`` (the vault's generations by ``vfile_id``). DuckDB holds none of them
(its ``compress_files`` log aside), so a merge is one SQLite transaction: a SIGKILL
leaves the store before or after it (SQLite's atomic commit), never between tables.

A relative path's twin is the one absolute path any of those tables holds that ends
with ``/`` + the relative path (``os.path.normpath``'d). None, or several (the same
relative name under two folders): no twin, and the path is reported, not guessed
(the directory it was typed in is recorded nowhere).
"""

from __future__ import annotations

import os
import sqlite3

from ctxkeep.paths import is_relative_stored
from ctxkeep.sinks.sqlite.connection import write

#: (table, path column) of every table holding a session file's path
PATH_TABLES = (
    ("files", "path"),
    ("watermarks", "path"),
    ("coverage", "path"),
    ("quarantine", "path"),
    ("vault_files", "path"),
)


def _tables(conn: sqlite3.Connection) -> list[str]:
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [t for t, _c in PATH_TABLES if t in have]


def relative_paths(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """``{relative path: [tables holding it]}``, paths sorted; empty for a sound store.
    One scan of each table's paths not starting with ``/`` (~0.01 s per 10,000 rows)."""
    out: dict[str, list[str]] = {}
    for t in _tables(conn):
        for (p,) in conn.execute(f"SELECT DISTINCT path FROM {t} WHERE substr(path, 1, 1) <> '/'"):
            if isinstance(p, str) and is_relative_stored(p):
                out.setdefault(p, []).append(t)
    return dict(sorted(out.items()))


def twin(conn: sqlite3.Connection, rel: str) -> str | None:
    """The one absolute path the store holds that ends with ``/`` + ``rel``
    (normalized), or None (none, or several: ambiguous)."""
    tail = "/" + os.path.normpath(rel)
    found: set[str] = set()
    for t in _tables(conn):
        found |= {
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT path FROM {t} WHERE substr(path, 1, 1) = '/' "
                "AND length(path) > ? AND substr(path, -?) = ?",
                (len(tail), len(tail), tail),
            )
        }
    return next(iter(found)) if len(found) == 1 else None


def _merge_one(conn: sqlite3.Connection, rel: str, abs_: str, tables: set[str]) -> None:
    if "files" in tables:
        a = conn.execute("SELECT file_id FROM files WHERE path = ?", (abs_,)).fetchone()
        r = conn.execute("SELECT file_id FROM files WHERE path = ?", (rel,)).fetchone()
        if r is not None and a is not None:
            conn.execute("UPDATE entry_rows SET file_id = ? WHERE file_id = ?", (a[0], r[0]))
            conn.execute("DELETE FROM files WHERE file_id = ?", (r[0],))
        elif r is not None:
            conn.execute("UPDATE files SET path = ? WHERE file_id = ?", (abs_, r[0]))
    # the absolute twin's row is the newer read of the file (the plain ingest that
    # followed read it from byte 0 under its absolute name): it wins a collision
    for t in ("watermarks", "coverage", "quarantine"):
        if t in tables:
            conn.execute(f"UPDATE OR IGNORE {t} SET path = ? WHERE path = ?", (abs_, rel))
            conn.execute(f"DELETE FROM {t} WHERE path = ?", (rel,))
    if "vault_files" in tables:
        r = conn.execute("SELECT vfile_id FROM vault_files WHERE path = ?", (rel,)).fetchone()
        if r is None:
            return
        a = conn.execute("SELECT vfile_id FROM vault_files WHERE path = ?", (abs_,)).fetchone()
        if a is None:
            conn.execute("UPDATE vault_files SET path = ? WHERE vfile_id = ?", (abs_, r[0]))
            return
        # both held generations: one file, its generations numbered again by when
        # each was captured (the newest is what restore writes)
        gens = conn.execute(
            "SELECT gen_id FROM vault_generations WHERE vfile_id IN (?, ?) "
            "ORDER BY coalesce(created_at, ''), gen, gen_id",
            (a[0], r[0]),
        ).fetchall()
        for i, (gid,) in enumerate(gens, 1):  # negative first: UNIQUE(vfile_id, gen)
            conn.execute(
                "UPDATE vault_generations SET vfile_id = ?, gen = ? WHERE gen_id = ?", (a[0], -i, gid)
            )
        conn.execute("UPDATE vault_generations SET gen = -gen WHERE vfile_id = ? AND gen < 0", (a[0],))
        conn.execute("DELETE FROM vault_files WHERE vfile_id = ?", (r[0],))


def merge(
    conn: sqlite3.Connection, found: dict[str, list[str]] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Merge every relative path (``found``, default ``relative_paths(conn)``) into its
    twin, in one transaction. Returns ``({relative: absolute merged into}, [relative
    paths left: no twin or several])``. Raises sqlite3.Error or StoreBusy (nothing changed: ``connection.write``)."""
    found = relative_paths(conn) if found is None else found
    merged: dict[str, str] = {}
    left: list[str] = []
    plan: list[tuple[str, str, set[str]]] = []
    for rel, held in found.items():
        a = twin(conn, rel)
        if a is None:
            left.append(rel)
        else:
            plan.append((rel, a, set(held)))
    if not plan:
        return merged, left
    with write(conn):
        for rel, a, in_tables in plan:
            _merge_one(conn, rel, a, in_tables)
            merged[rel] = a
    return merged, left

"""Store checks: the read-only SQL of ``ctxkeep doctor`` (``maintenance.doctor``) and
the two writes its repair makes.

Every check opens ``store.db`` read-only (``immutable``: the WAL is ignored, for a
foreign WAL that must not be read) and closes it again; what is found is returned
as values, the verdict is ``doctor``'s.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ctxkeep.sinks.sqlite.params import in_parts
from ctxkeep.sinks.sqlite.sync_marks import analytics_behind

#: the FTS5 tables FTS5's ``integrity-check`` command runs on
FTS_TABLES = ("fts_words", "fts_grams", "fts_symbols")


def _ro(path: Path, immutable: bool = False) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro{'&immutable=1' if immutable else ''}", uri=True)


def integrity(db: Path, *, full: bool = False, immutable: bool = False) -> list[str]:
    """``PRAGMA quick_check(20)`` (``integrity_check`` with ``full``) of ``db``: its
    lines, ``["ok"]`` for a sound file. Raises sqlite3.DatabaseError for a file that
    cannot be read at all."""
    pragma = "integrity_check" if full else "quick_check"
    conn = _ro(db, immutable)
    try:
        return [r[0] for r in conn.execute(f"PRAGMA {pragma}(20)").fetchall()]
    finally:
        conn.close()


def fts_integrity(db: Path, *, immutable: bool = False) -> list[tuple[str, str, str]]:
    """FTS5's ``integrity-check`` on each ``FTS_TABLES`` table ``db`` holds:
    ``[(table, status, detail)]`` with status ``ok``, ``damaged`` or ``skipped``.
    FTS5 runs the check as a write statement: on a read-only connection it is run
    again on a writable one (it changes nothing), except with ``immutable`` (a
    foreign WAL: ``skipped`` until it is moved aside)."""
    out: list[tuple[str, str, str]] = []
    conn = _ro(db, immutable)
    try:
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for t in [t for t in FTS_TABLES if t in have]:
            try:
                conn.execute(f"INSERT INTO {t}({t}) VALUES('integrity-check')")
                out.append((t, "ok", "integrity-check passed"))
            except sqlite3.DatabaseError as e:
                if "readonly" not in str(e).lower():
                    out.append((t, "damaged", str(e)))
                elif immutable:
                    out.append((t, "skipped", "checked once the foreign WAL is moved aside"))
                else:
                    rw = sqlite3.connect(db)
                    try:
                        rw.execute(f"INSERT INTO {t}({t}) VALUES('integrity-check')")
                        out.append((t, "ok", "integrity-check passed"))
                    except sqlite3.DatabaseError as e2:
                        out.append((t, "damaged", str(e2)))
                    finally:
                        rw.close()
    finally:
        conn.close()
    return out


@dataclass(frozen=True)
class Tallies:
    """What doctor compares with the other files: ``orphan_chunks`` (chunks without
    their content), ``orphan_entries`` (entries whose stored content id has no
    ``contents`` row), ``entries``, ``usage`` (rows of token usage), ``archived`` (ids retention moved to Parquet) and
    ``watermarks`` (``[(path, offset bytes)]``), ``analytics_behind`` (SQLite holds
    entries or status changes DuckDB has not synced, ``sync_marks.analytics_behind``)."""

    orphan_chunks: int
    orphan_entries: int
    entries: int
    usage: int
    archived: int
    watermarks: list[tuple[str, int]]
    analytics_behind: bool


def tallies(db: Path, *, immutable: bool = False) -> Tallies:
    """The ``Tallies`` of ``db``. Raises sqlite3.Error for a store that cannot be read."""
    conn = _ro(db, immutable)
    try:
        one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
        return Tallies(
            orphan_chunks=one(
                "SELECT count(*) FROM chunks ch LEFT JOIN contents c ON c.content_id = ch.content_id "
                "WHERE c.content_id IS NULL"
            ),
            # the stored id, not the view's hash (which is null when its contents row is gone)
            orphan_entries=one(
                "SELECT count(*) FROM entry_rows e LEFT JOIN contents c ON c.content_id = e.content_id "
                "WHERE e.content_id IS NOT NULL AND c.content_id IS NULL"
            ),
            entries=one("SELECT count(*) FROM entries"),
            usage=one("SELECT count(*) FROM usage"),
            archived=one("SELECT count(*) FROM archived"),
            watermarks=[(p, o) for p, o in conn.execute("SELECT path, offset FROM watermarks")],
            analytics_behind=analytics_behind(conn),
        )
    finally:
        conn.close()


def add_archived(conn: sqlite3.Connection, rows: list[tuple[str, str]]) -> int:
    """Insert ``(entry_id, archived_at)`` rows into ``archived`` (existing ids are
    kept), in the caller's transaction. Returns the rows added."""
    before = conn.total_changes
    conn.executemany("INSERT OR IGNORE INTO archived VALUES(?, ?)", rows)
    return conn.total_changes - before


def active_entries_of_files(conn: sqlite3.Connection, paths: list[str]) -> list[str]:
    """The ids of the ``active`` entries read from the source files ``paths``."""
    out: list[str] = []
    for part in in_parts(paths, 500):
        out += [
            r[0]
            for r in conn.execute(
                "SELECT e.entry_id FROM entry_rows e JOIN files f ON f.file_id = e.file_id "
                f"WHERE e.status = 'active' AND f.path IN ({','.join('?' * len(part))})",
                part,
            )
        ]
    return out

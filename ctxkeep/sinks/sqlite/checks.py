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

from ctxkeep.sinks.sqlite.lookup import uuid_keyed_files
from ctxkeep.sinks.sqlite.params import in_parts
from ctxkeep.sinks.sqlite.readonly import open_ro
from ctxkeep.sinks.sqlite.sync_marks import analytics_behind

#: the FTS5 tables FTS5's ``integrity-check`` command runs on
FTS_TABLES = ("fts_words", "fts_grams", "fts_symbols")


def _ro(path: Path, immutable: bool = False) -> sqlite3.Connection:
    return open_ro(path, immutable=immutable)


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


def fts_integrity(db: Path, *, immutable: bool = False, readonly: bool = False) -> list[tuple[str, str, str]]:
    """FTS5's ``integrity-check`` on each ``FTS_TABLES`` table ``db`` holds:
    ``[(table, status, detail)]`` with status ``ok``, ``damaged`` or ``skipped``.
    FTS5 runs the check as a write statement: on a read-only connection it is run
    again on a writable one (it changes nothing), except with ``immutable`` (a
    foreign WAL: ``skipped`` until it is moved aside) or ``readonly`` (a store that
    cannot be written: ``skipped``, never called damaged)."""
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
                elif readonly:
                    out.append((t, "skipped", "the store is read-only: FTS5 runs this check as a write"))
                elif immutable:
                    out.append((t, "skipped", "checked once the WAL that does not belong is moved aside"))
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


#: the contents an entry holds (``bytes > 0``: text that is cut into at least one
#: chunk, ``transforms.chunk``) whose chunks are missing, do not run 0..n-1 without a
#: gap, or do not add up to the content's bytes (the chunks concatenate back to the
#: text exactly, ``chunk_text``: a lost last chunk): ``(content_id, content_hash)`` rows
CHUNK_GAPS_SQL = (
    "SELECT co.content_id, co.content_hash FROM contents co "
    "LEFT JOIN (SELECT content_id, count(*) AS n, min(seq) AS lo, max(seq) AS hi, "
    "sum(length(CAST(text AS BLOB))) AS b FROM chunk_rows GROUP BY content_id) g "
    "ON g.content_id = co.content_id "
    "WHERE co.bytes > 0 AND (g.n IS NULL OR g.lo != 0 OR g.hi + 1 != g.n OR g.b != co.bytes) "
    "AND EXISTS (SELECT 1 FROM entry_rows e WHERE e.content_id = co.content_id)"
)


def _has(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


@dataclass(frozen=True)
class Tallies:
    """What doctor compares with the other files: ``orphan_chunks`` (chunks without
    their content), ``orphan_entries`` (entries whose stored content id has no
    ``contents`` row), ``chunk_gaps`` (contents an entry holds whose chunks are missing
    or have gaps: ``CHUNK_GAPS_SQL``), ``fts_rows``/``chunk_count`` (rows ``fts_words``
    indexed, by its ``docsize`` shadow table, against the chunks), ``entries``, ``usage`` (rows of token usage), ``archived`` (ids retention moved to Parquet) and
    ``watermarks`` (``[(path, offset bytes)]``), ``analytics_behind`` (SQLite holds
    entries or status changes DuckDB has not synced, ``sync_marks.analytics_behind``),
    ``uuid_keyed`` (``lookup.uuid_keyed_files``)."""

    orphan_chunks: int
    orphan_entries: int
    chunk_gaps: int
    fts_rows: int
    chunk_count: int
    entries: int
    usage: int
    archived: int
    watermarks: list[tuple[str, int]]
    analytics_behind: bool
    #: ``(files, bytes)`` of Claude Code files keyed by uuid alone (``lookup.uuid_keyed_files``)
    uuid_keyed: tuple[int, int] = (0, 0)


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
            chunk_gaps=one(f"SELECT count(*) FROM ({CHUNK_GAPS_SQL})"),
            fts_rows=one("SELECT count(*) FROM fts_words_docsize") if _has(conn, "fts_words_docsize") else -1,
            chunk_count=one("SELECT count(*) FROM chunk_rows"),
            entries=one("SELECT count(*) FROM entries"),
            usage=one("SELECT count(*) FROM usage"),
            archived=one("SELECT count(*) FROM archived"),
            watermarks=[(p, o) for p, o in conn.execute("SELECT path, offset FROM watermarks")],
            analytics_behind=analytics_behind(conn),
            uuid_keyed=uuid_keyed_files(conn),
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


def chunk_gap_files(conn: sqlite3.Connection) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The contents with chunk gaps (``CHUNK_GAPS_SQL``) as ``{content_hash:
    content_id}``, and the ``(agent, path)`` of the source files of the entries that
    hold them (where their text can be read again)."""
    gaps = {h: cid for cid, h in conn.execute(CHUNK_GAPS_SQL)}
    files: list[tuple[str, str]] = []
    ids = list(gaps.values())
    for part in in_parts(ids):
        files += conn.execute(
            "SELECT DISTINCT e.agent, f.path FROM entry_rows e JOIN files f ON f.file_id = e.file_id "
            f"WHERE e.content_id IN ({','.join('?' * len(part))})",
            part,
        ).fetchall()
    return gaps, sorted(set(files))


def drop_chunks(conn: sqlite3.Connection, content_ids: list[int]) -> int:
    """Delete the (partial) chunk rows of ``content_ids``, in the caller's transaction
    (their FTS rows go with the FTS rebuild that follows). Returns the rows deleted."""
    before = conn.total_changes
    for part in in_parts(content_ids):
        conn.execute(f"DELETE FROM chunk_rows WHERE content_id IN ({','.join('?' * len(part))})", part)
    return conn.total_changes - before


def vault_paths(db: Path, agent: str) -> list[str]:
    """The paths of the files of ``agent`` the vault holds generations of (``[]`` for a
    store without a vault, or one that cannot be read)."""
    try:
        conn = _ro(db)
        try:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT f.path FROM vault_files f JOIN vault_generations g "
                    "ON g.vfile_id = f.vfile_id WHERE f.agent = ? ORDER BY f.path",
                    (agent,),
                )
            ]
        finally:
            conn.close()
    except sqlite3.Error:
        return []


def coverage_rows(db: Path, *, immutable: bool = False) -> list[dict]:
    """The coverage ledger of ``db`` (``coverage.coverage_ledger``: per agent, agent
    version and parser version), read-only. Raises sqlite3.DatabaseError for a file
    that cannot be read."""
    from ctxkeep.sinks.sqlite.coverage import coverage_ledger

    conn = _ro(db, immutable)
    try:
        return coverage_ledger(conn)
    finally:
        conn.close()


def wal_view_problem(db: Path) -> str | None:
    """Why the WAL beside ``db`` (one of this store by ``store_safety.wal_verdict``) is
    of another generation of the file, by what SQLite reads: the database with its WAL
    fails ``PRAGMA quick_check`` while the file alone passes (b-tree pages of the WAL
    pointing at pages of another file: a WAL of an older copy beside a newer
    ``store.db``), or runs the file alone records (``runs``: never deleted) are not
    there, or differ, with the WAL. Returns one line, or None when the WAL applies
    cleanly. Opens the file read-only twice (``mode=ro`` does not checkpoint the WAL;
    ``immutable`` reads the file alone); costs two quick_checks. None too when the
    store with its WAL cannot be opened for a reason other than damage (a read-only
    file system without the ``-shm``)."""

    from ctxkeep.sinks.sqlite.store_safety import is_corruption

    def look(immutable: bool) -> tuple[str | None, set]:
        try:
            conn = _ro(db, immutable)
            try:
                rows = [r[0] for r in conn.execute("PRAGMA quick_check(3)").fetchall()]
                runs = (
                    set(conn.execute("SELECT run_id, started_at FROM runs").fetchall())
                    if _has(conn, "runs")
                    else set()
                )
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            # damage is an answer; anything else (no -shm on a read-only file system,
            # a lock) is not: None
            return (str(e) if is_corruption(e) else None), set()
        return ("ok" if rows == ["ok"] else " ".join(" ".join(rows).split())[:160]), runs

    alone, alone_runs = look(True)
    if alone != "ok":  # the file itself is damaged: the integrity check says so
        return None
    merged, merged_runs = look(False)
    if merged is None:  # cannot be told
        return None
    if merged != "ok":
        return f"with this WAL the store fails quick_check ({merged}) while the file alone passes"
    gone = alone_runs - merged_runs
    if gone:
        return f"with this WAL {len(gone)} of the {len(alone_runs)} runs the file records are gone or changed"
    return None


@dataclass(frozen=True)
class Known:
    """What ``db`` holds or let go on purpose, for doctor's lost-entry check: ``ids``
    (its entries and the ids retention moved to the Parquet archive), the purged
    ``sessions``, ``projects`` and wholly removed ``files`` (tombstones,
    ``purge_files`` kind ``file``), and ``pending`` (open intents: an operation whose
    DuckDB part the next command completes)."""

    ids: set[str]
    sessions: set[str]
    projects: set[str]
    files: set[str]
    pending: int


def known_entries(db: Path, *, immutable: bool = False) -> Known:
    """``Known`` of ``db``. Raises sqlite3.Error for a store that cannot be read."""
    conn = _ro(db, immutable)
    try:
        ids = {r[0] for r in conn.execute("SELECT entry_id FROM entry_rows")}
        ids |= {r[0] for r in conn.execute("SELECT entry_id FROM archived")}
        tomb = conn.execute("SELECT scope, value FROM tombstones").fetchall()
        files = {r[0] for r in conn.execute("SELECT item FROM purge_files WHERE kind = 'file'")}
        pending = conn.execute("SELECT count(*) FROM intents").fetchone()[0] if _has(conn, "intents") else 0
        return Known(
            ids,
            {v for k, v in tomb if k == "session"},
            {v for k, v in tomb if k == "project"},
            files,
            pending,
        )
    finally:
        conn.close()


def archived_times(conn: sqlite3.Connection) -> dict[str, str]:
    """The ``archived`` table: entry_id → archive time (ISO-8601 UTC)."""
    return {e: str(t or "") for e, t in conn.execute("SELECT entry_id, archived_at FROM archived")}

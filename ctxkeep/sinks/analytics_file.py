"""The analytics file's health, without importing DuckDB: whether ``analytics.duckdb``
is damaged (by its header, or by the words of a DuckDB error), whether an error says
another process holds it, and moving a damaged one aside. The file is derived from
SQLite (``sinks.duckdb.sync``), so a damaged one is never repaired in place: it is set
aside and the next sync fills a new one."""

from __future__ import annotations

import sys
from pathlib import Path

from ctxkeep.sinks.files import ANALYTICS_DB, ANALYTICS_WAL
from ctxkeep.timeutil import now_iso

#: a DuckDB database file: 8 bytes of checksum, then the magic (DuckDB storage format,
#: ``MainHeader::MAGIC_BYTES``, duckdb/src/storage/storage_info.cpp)
DUCKDB_MAGIC = b"DUCK"


def analytics_file_problem(home: Path) -> str | None:
    """Why ``<home>/analytics.duckdb`` is not a DuckDB database by its first 12 bytes
    (shorter, or no ``DUCK`` magic at offset 8), or None (missing, empty or sound).
    Reads 12 bytes; imports no DuckDB."""
    p = Path(home) / ANALYTICS_DB
    try:
        with open(p, "rb") as f:
            head = f.read(12)
    except FileNotFoundError:
        return None
    if not head:
        return None
    if len(head) < 12 or head[8:12] != DUCKDB_MAGIC:
        return "not a DuckDB database file (no DUCK magic at offset 8)"
    return None


#: DuckDB's words for a damaged database file (DuckDB 2.0.1, seen here: a flipped or
#: zeroed block, "Corrupt database file: computed checksum … does not match stored
#: checksum … in block at location N"; a truncated file, IO Error "Could not read
#: enough bytes from file …"; a file without the magic, "… is not a valid DuckDB
#: database file")
_DUCKDB_DAMAGE = ("corrupt database file", "could not read enough bytes", "not a valid duckdb database")
#: DuckDB's words for a file another process holds (DuckDB 2.0.1: IO Error "Could not
#: set lock on file …: Conflicting lock is held in …"); not the word "lock" alone,
#: which "block at location" holds
_DUCKDB_HELD = ("could not set lock", "conflicting lock")


def analytics_damage(e: BaseException) -> str | None:
    """The first line of a DuckDB error that says ``analytics.duckdb`` is damaged
    (``_DUCKDB_DAMAGE``), else None. Imports no DuckDB."""
    first = (str(e).strip().splitlines() or [""])[0]
    low = first.lower()
    return first if any(w in low for w in _DUCKDB_DAMAGE) else None


def analytics_held(e: BaseException) -> bool:
    """Whether a DuckDB error says another process holds the file (``_DUCKDB_HELD``)."""
    low = str(e).lower()
    return any(w in low for w in _DUCKDB_HELD)


def set_aside_damaged_analytics(home: Path, why: str | None = None, *, say: bool = True) -> str | None:
    """When ``why`` says so (the first line of a DuckDB error, ``analytics_damage``) or
    ``analytics_file_problem`` finds ``analytics.duckdb`` damaged, move it (and its
    WAL) aside as ``analytics.duckdb.damaged-<UTC>`` with one warning line on stderr
    (``say``; ``doctor --repair`` says it in its own actions), so the next sync rebuilds it from SQLite (it is derived: nothing is lost). Returns
    the new path, or None (sound, or already gone)."""
    why = why or analytics_file_problem(home)
    if why is None:
        return None
    home = Path(home)
    stamp = now_iso().replace(":", "").replace("-", "")
    dest = home / f"{ANALYTICS_DB}.damaged-{stamp}"
    if not (home / ANALYTICS_DB).exists():
        return None
    # the WAL first: a process killed between the two moves must not leave a WAL that
    # the next open replays onto a new file
    try:
        (home / ANALYTICS_WAL).replace(home / f"{ANALYTICS_WAL}.damaged-{stamp}")
    except FileNotFoundError:
        pass
    try:
        (home / ANALYTICS_DB).replace(dest)
    except FileNotFoundError:
        return None
    if say:
        sys.stderr.write(
            f"warning: {ANALYTICS_DB} is damaged ({why}); moved aside ({dest}), rebuilt from store.db\n"
        )
    return str(dest)


def set_aside_if_damaged(home: Path, e: BaseException) -> bool:
    """When ``e`` says ``analytics.duckdb`` is damaged (``analytics_damage``: a process
    killed mid-checkpoint left one in CI), move it aside (``set_aside_damaged_analytics``,
    one warning line) and return True: the next open starts a new file."""
    why = analytics_damage(e)
    return why is not None and set_aside_damaged_analytics(home, why) is not None

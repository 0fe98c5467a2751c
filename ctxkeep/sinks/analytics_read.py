"""Read-only opens of the DuckDB analytics store (``analytics.duckdb``) for the reports
and ``doctor``.

Kept apart from ``sinks.duckdb`` (the writer: its import loads PyArrow, ~0.2 s a
report). DuckDB allows one writing process per file: a running ingest holds it, so
``open_readonly`` falls back to a copy of the file's last checkpoint.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import duckdb

from ctxkeep.errors import CtxkeepError, NothingStored, StoreError
from ctxkeep.sinks import analytics_current
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.analytics_file import analytics_held
from ctxkeep.sinks.files import ANALYTICS_DB, STORE_DB
from ctxkeep.sinks.prices_file import prices_error


def _store_entries(home: Path) -> bool:
    """Whether ``<home>/store.db`` exists and holds an entry (``connect(readonly=True)``;
    False for no store or one that cannot be read: the caller's error then stands)."""

    try:
        conn = sqlite_store.connect(home, readonly=True)
    except CtxkeepError:
        return False
    try:
        return conn.execute("SELECT 1 FROM entries LIMIT 1").fetchall() != []
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _damaged(path: Path, e: Exception) -> StoreError:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return StoreError(
        f"analytics store is unreadable: {first}",
        where=str(path),
        hint="rebuild it from store.db with `ctxkeep reindex`",
    )


def unreadable(home: Path, e: Exception) -> StoreError:
    """The error of ``<home>/analytics.duckdb`` when DuckDB fails to read it (on open or
    mid-query): its first line, and the hint to rebuild it with ``reindex``."""
    return _damaged(Path(home) / ANALYTICS_DB, e)


def open_readonly(
    home: Path, *, wait: float = analytics_current.WAIT_SECONDS
) -> tuple[duckdb.DuckDBPyConnection, str | None]:
    """Open ``<home>/analytics.duckdb`` read-only, brought current with SQLite first
    (``analytics_current.bring_current``, waiting up to ``wait`` seconds for the store
    lock). Returns ``(connection, note)``: when DuckDB could not be brought current,
    ``note`` says why (it shows what it holds); when a running ingest holds the file, a
    copy of its last checkpoint is opened instead and ``note`` says so (else None).
    Raises StoreError: no analytics store (run ingest; NothingStored while an ingest
    runs: try again when it ends), or a damaged file (run
    reindex), or a held file that could not be copied; ConfigError for a broken
    ``prices.toml`` (``sinks.prices_file.prices_error``: every cost would be wrong or
    missing, so no report is shown)."""
    err = prices_error(Path(home))
    if err is not None:
        raise err
    lag = analytics_current.bring_current(Path(home), wait=wait)
    path = Path(home) / ANALYTICS_DB
    if not path.exists():
        from ctxkeep.sinks.lock import held_by_another

        if held_by_another(Path(home)):  # a first ingest: DuckDB comes at its end (newuser17 F13)
            raise NothingStored(
                "no usage stored yet: an ingest is running", where=str(path), hint="try again when it ends"
            )
        if _store_entries(Path(home)):  # deleted since: the next ingest rebuilds it
            raise StoreError(
                "the analytics store is missing",
                where=str(path),
                hint="run `ctxkeep ingest`: it rebuilds it from store.db",
            )
        if (Path(home) / STORE_DB).exists():  # ingested, but no session file held any usage yet
            raise NothingStored(
                "no usage stored yet",
                where=str(path),
                hint="`ctxkeep sources` shows where ctxkeep looks for session files",
            )
        raise StoreError("no analytics store", where=str(path), hint="run `ctxkeep ingest` first")
    try:
        return duckdb.connect(str(path), read_only=True), lag
    except duckdb.IOException as e:
        if not analytics_held(e):
            raise _damaged(path, e) from e
        holder = _holder(Path(home), e)
    except duckdb.Error as e:
        raise _damaged(path, e) from e
    # held by a writer (a running ingest, or a user's own read-write connection): read
    # its last checkpoint from a copy
    tmp = Path(tempfile.mkdtemp(prefix="ctxkeep-report-"))
    try:
        shutil.copyfile(path, tmp / ANALYTICS_DB)
        con = duckdb.connect(str(tmp / ANALYTICS_DB), read_only=True)
        con.execute("SELECT count(*) FROM usage").fetchall()
    except (OSError, duckdb.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StoreError(
            f"analytics store is held by {holder} and its last checkpoint is unreadable",
            where=str(path),
            hint="run the report again when the ingest has finished"
            if holder == _INGEST
            else "close that connection (or open the file with read_only=True) and run the report again",
        ) from e
    shutil.rmtree(tmp, ignore_errors=True)  # the open connection keeps the file's data
    if holder == _INGEST:
        return con, f"the analytics store is held by {holder}: this report shows its last synced state"
    return con, (
        f"the analytics store is held by {holder}: this report shows its last synced state, "
        "without what was ingested since; close that connection, or open the file with read_only=True"
    )


#: the holder ``_holder`` names when the store lock is held too
_INGEST = "a running ingest"


def _holder(home: Path, e: Exception) -> str:
    """Who holds ``analytics.duckdb`` (``e``: DuckDB's lock error): ``a running ingest``
    when another process holds the store lock as well (an ingest keeps the file for its
    whole run), else the process DuckDB names (its message: ``Conflicting lock is held
    in <program> (PID <n>)``, duckdb ``src/common/local_file_system.cpp``): a user's
    own read-write connection was blamed on an ingest that was not there (newuser20 F5)."""
    import re

    from ctxkeep.sinks.lock import held_by_another

    if held_by_another(home):
        return _INGEST
    m = re.search(r"\(PID (\d+)\)", str(e))
    return f"another process (PID {m[1]})" if m else "another process"


#: bytes before DuckDB's first block: its main header and two database headers of 4 KiB
#: each (duckdb ``src/storage/single_file_block_manager.cpp``: ``BLOCK_START`` is
#: ``Storage::FILE_HEADER_SIZE * 3``, block ``i`` at ``BLOCK_START + i * block_alloc_size``)
DUCKDB_HEADER_BYTES = 3 * 4096


def _referenced_blocks(con: duckdb.DuckDBPyConnection, tables: list[str]) -> set[int]:
    """The block ids DuckDB lists as in use: every column segment's block (and its
    ``additional_block_ids``, DuckDB >= 1.2) of each table (``pragma_storage_info``) and
    every metadata block (``pragma_metadata_info``). Index (ART) blocks are not listed
    by DuckDB; ``inspect`` covers them by its count of used blocks."""
    ids: set[int] = set()
    for t in tables:
        cur = con.execute(f"SELECT * FROM pragma_storage_info('{t}')")
        names = [d[0] for d in cur.description or []]
        at = names.index("block_id")
        more = names.index("additional_block_ids") if "additional_block_ids" in names else -1
        for row in cur.fetchall():
            ids.add(int(row[at]))
            if more >= 0 and row[more]:
                ids.update(int(b) for b in row[more])
    ids.update(int(r[0]) for r in con.execute("SELECT block_id FROM pragma_metadata_info()").fetchall())
    return {b for b in ids if b >= 0}


def inspect(path: Path) -> dict:
    """A deep read-only look at the analytics file at ``path`` (for ``doctor``):
    ``{"entries": rows of entries, "usage": rows of usage, "problems": [str]}``.
    Problems: a file too short for what DuckDB itself says it uses (a truncated file,
    whose reports fail on the first missing block): fewer blocks than ``PRAGMA
    database_size``'s ``used_blocks``, or a block listed by ``pragma_storage_info`` or
    ``pragma_metadata_info`` past its end; and every base table that cannot be read to
    its end (each row hashed: DuckDB reads, and checks the checksum of, every block).
    Not a problem: a file shorter than ``total_blocks``: a checkpoint that frees the last
    blocks truncates the file after writing a header that still counts them, and they
    stay on the free list (duckdb ``SingleFileBlockManager::Truncate``; F19: doctor
    called such a file damaged). Raises duckdb.Error (a held file: an ``IOException``
    naming a lock) or OSError when the file does not open at all."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        problems: list[str] = []
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
                "AND table_schema = 'main' ORDER BY table_name"
            ).fetchall()
        ]
        row = con.execute("SELECT block_size, used_blocks FROM pragma_database_size()").fetchone()
        if row is not None:
            block, used = int(row[0]), int(row[1])
            have = path.stat().st_size
            held = max(0, have - DUCKDB_HEADER_BYTES) // block if block else 0
            try:
                past = sorted(b for b in _referenced_blocks(con, tables) if b >= held)
            except duckdb.Error as e:  # a table's row-group pointers unreadable
                past = []
                problems.append(f"storage info unreadable: {(str(e).splitlines() or [''])[0][:120]}")
            if used > held or past:
                problems.append(
                    f"{have:,} bytes, shorter than the {used} blocks of {block:,} bytes it uses"
                    + (f" (block {past[0]} is past its end)" if past else "")
                )
        for t in tables:
            try:
                con.execute(f'SELECT count(*), sum(hash(COLUMNS(*))) FROM "{t}"').fetchall()
            except duckdb.Error as e:
                problems.append(f"table {t} unreadable: {(str(e).splitlines() or [''])[0][:120]}")
        counts = {}
        for t in ("entries", "usage"):
            try:
                counts[t] = con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] if t in tables else 0
            except duckdb.Error:
                counts[t] = -1
        return {**counts, "problems": problems}
    finally:
        con.close()


def entry_sources(path: Path) -> list[tuple[str, str, str, str, str]]:
    """Every entry of the analytics file at ``path`` as ``(entry_id, agent, session_id,
    source_path, project_dir)`` (for ``doctor``'s comparison with SQLite: DuckDB's
    rowid sync never removes rows, so an entry it holds that SQLite lacks was lost by
    SQLite). Raises duckdb.Error or OSError as ``inspect``."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return [
            (str(e), str(a), str(s or ""), str(p or ""), str(d or ""))
            for e, a, s, p, d in con.execute(
                "SELECT entry_id, agent, session_id, source_path, project_dir FROM entries"
            ).fetchall()
        ]
    finally:
        con.close()

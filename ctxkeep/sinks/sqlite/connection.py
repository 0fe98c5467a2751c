"""Connections to the SQLite store (``<home>/store.db``) and its write transactions.

WAL, ``synchronous=NORMAL``, a 30 s busy timeout; one writer at a time (writes use
``BEGIN IMMEDIATE``; maintenance runs also take the lock, ``sinks.lock``). The file is
created 0600. A writable open creates and migrates the schema (``ensure_schema``).

Every open goes through ``connect``, which first checks the file (``store_safety``):
a damaged header raises StoreDamaged; before any open (a reader's too) a
``store.db-wal`` left by no live process is checked against this database's identity
and moved aside when it belongs to another one (``store_safety.check_wal``). A reader
opens a store it cannot open ``mode=ro`` (a read-only mount or folder without
``store.db-shm``) immutable instead, without the WAL (``_open_readonly``). The identity (``meta.store_id``,
``meta.created_at`` and, in the SQLite header, ``application_id`` = ``APPLICATION_ID``
and ``user_version`` = the id's first 32 bits) is written by the first writable open;
every ``write`` transaction rewrites ``user_version``, so each transaction in the WAL
carries an image of page 1 naming its database.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxkeep.config import ensure_home
from ctxkeep.errors import StoreBusy, StoreError
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.sqlite import ddl, store_safety, wiped
from ctxkeep.sinks.sqlite.migrations import ensure_identity, frees_space, migrate, phase, phases
from ctxkeep.sinks.sqlite.readonly import BUSY_TIMEOUT_MS
from ctxkeep.sinks.sqlite.readonly import roll_back_hot_journal as _roll_back_hot_journal
from ctxkeep.sinks.sqlite.store_safety import damaged

log = logging.getLogger(__name__)

#: page cache of a writing connection, KiB (``PRAGMA cache_size``; memory, not disk)
CACHE_KIB = 64 * 1024
#: page cache of an ingest's own connection while a writer thread stores its groups
#: (KiB; ``reading_cache``, ``CTXKEEP_READ_CACHE_MB``): its reads are the transform's
#: dedup lookups, a random leaf of the content-hash and id indexes each, and each
#: COMMIT of the writer resets a reader's cache (WAL: the pages may have changed), so
#: at 64 MiB it only grew with the store between two COMMITs (2 GB fresh ingest: 1 ->
#: 42 MiB over the run, 64 at 12 GB) and freed it again, without hits to show for it
READ_CACHE_KIB = int(float(os.environ.get("CTXKEEP_READ_CACHE_MB", "8")) * 1024)
#: page size of a new store, bytes (``PRAGMA page_size``, set before its first table;
#: an existing store keeps its own). 16 KiB, not SQLite's 4 KiB: a chunk row (up to 4 KiB
#: of text plus title and facets) fits one page instead of spilling to an overflow page,
#: and a page holds more rows; 200 MB tree, chunks 61.6 → ~57 MB, store ~0.02x raw less
PAGE_SIZE = 16384
#: WAL bytes written before a commit checkpoints them into the database
#: (``PRAGMA wal_autocheckpoint``, in pages of the store's size; default 1,000 pages):
#: each checkpoint syncs the WAL and the database, and a bulk ingest of 200 MB
#: checkpointed ~50 times at 4 MiB, rewriting the same hot index and FTS pages each
#: time (entries load of 100,000 rows: 7.0 s wall at 4 MiB, 3.7 s at 64 MiB, same CPU)
WAL_CHECKPOINT_BYTES = 64 * 1024 * 1024
#: the WAL file is truncated to this after a checkpoint (``PRAGMA
#: journal_size_limit``, bytes), so a big load does not leave it at its peak size
WAL_LIMIT_BYTES = 64 * 1024 * 1024
#: bytes of the store an interactive read-only connection (``connect(mmap=True)``) maps into memory (``PRAGMA mmap_size``;
#: SQLite caps it at its ``SQLITE_MAX_MMAP_SIZE``, 2 GiB in the usual builds, and reads
#: the rest as usual): pages are read from the OS page cache without a copy or a
#: syscall each. 2 GB store, the bench's 200 queries x 3 rounds in one process,
#: alternating connections: CPU 6.5 -> 5.9 s, p95 29.5 -> 25.9 ms (load 8). The pages
#: touched count in the reader's RSS as shared file pages, which the OS can drop.
READ_MMAP_BYTES = 1 << 31
#: the oldest schema a reader can search: v10, whose entries the search reads by file and
#: content id (``entry_rows``, v9) and whose chunks through the ``chunks`` view (v10);
#: older stores are upgraded by the first writable open (``ctxkeep ingest``). A v10
#: store is read as it is: its coverage ledger (v12) is empty until an ingest
MIN_READ_VERSION = 10


def _create_private(path: Path) -> None:
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)


def _open_readonly(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only (``mode=ro``), or, when SQLite cannot open it so
    (SQLITE_CANTOPEN: a WAL-mode store on a read-only mount or in a read-only folder
    without its ``store.db-shm``, which a reader must create; SQLite's "WAL mode on
    read-only media", https://sqlite.org/wal.html#readonly), opened ``immutable``: the
    database file alone, without locks or the WAL. A WAL left beside it then holds
    commits this reader cannot see: one warning says so (the store is read as of its
    last checkpoint). Raises sqlite3.DatabaseError for any other failure."""
    uri = Path(os.path.abspath(path)).as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # opens the file and its WAL
        return conn
    except sqlite3.OperationalError as e:
        conn.close()
        code = getattr(e, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_READONLY_ROLLBACK and path.is_file():
            _roll_back_hot_journal(path)
            return _open_readonly(path)
        if code != sqlite3.SQLITE_CANTOPEN or not path.is_file():
            raise
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size:
        sys.stderr.write(
            f"warning: {path} is read-only and its {wal.name} ({wal.stat().st_size:,} bytes) cannot be "
            "applied: read as of its last checkpoint - open it once where it is writable to fold it in\n"
        )
    return sqlite3.connect(
        f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False
    )


def connect(
    home: Path, *, readonly: bool = False, mmap: bool = False, new_store: bool = False
) -> sqlite3.Connection:
    """Open (creating if needed, unless ``readonly``) ``<home>/store.db``.

    ``mmap`` (read-only only): map the store (``READ_MMAP_BYTES``), for the interactive
    readers (search, show, the MCP server), whose reads jump around the store. Bulk
    readers (the DuckDB sync, the ingest plan, backup, retention) do not: every page
    they scan would count in the process's RSS (a 2 GB ingest's closing sync peaked
    at 1.6 GB RSS with the store mapped, 0.78 GB without).

    ``new_store``: ``doctor --repair`` creating the store it rebuilds in a home whose
    ``store.db`` is gone (``store_safety.check_file``).

    Returns a connection in autocommit mode (use ``write()`` for transactions).
    Raises StoreDamaged (``store.db is missing``) when the file is gone from a home that
    held data (store.id, the vault's packs, backups, archive, DuckDB: a writable open
    would build a new store from what the agents' files hold now), StoreError when a
    read-only open finds no store in a new home, or the schema is newer
    than this version of ctxkeep (or, read-only, older than ``MIN_READ_VERSION``).
    """
    try:
        return _connect(home, readonly=readonly, mmap=mmap, new_store=new_store)
    except store_safety.StoreDamaged as e:
        if not isinstance(e.__cause__, sqlite3.DatabaseError):  # by the file's own checks
            raise
    # SQLite's "malformed" while opening: once more on a fresh connection before the store
    # is called damaged (a word that sends the user to `doctor --repair`). A long-running
    # reader (the app) was told so of a sound store another process had just replaced by
    # a rename (reindex, reparse, restore: newuser19 F15); doctor found it sound
    time.sleep(REOPEN_SECONDS)
    return _connect(home, readonly=readonly, mmap=mmap, new_store=new_store)


#: the wait before ``connect``'s one second try after SQLite called the store malformed
REOPEN_SECONDS = 0.2


def _connect(home: Path, *, readonly: bool, mmap: bool, new_store: bool) -> sqlite3.Connection:
    """``connect``'s one try; StoreDamaged from SQLite's corruption error has it as its
    ``__cause__`` (and ``why``)."""
    path = Path(home) / STORE_DB
    if wiped.marked(Path(home)):  # ``purge --all`` wiped it (or was cut short: finished here)
        if readonly:
            raise StoreError(
                "no store yet (`ctxkeep purge --all` wiped it)", where=str(path), hint="run `ctxkeep ingest`"
            )
        wiped.finish(Path(home))
    if readonly and not path.exists():
        held = store_safety.held_data(Path(home))
        if held:
            raise store_safety.missing(path, held)
        raise StoreError("no store yet", where=str(path), hint="run `ctxkeep ingest` first")
    journal = Path(f"{path}-journal")
    if path.is_file() and journal.is_file() and journal.stat().st_size:
        # a killed writer's hot journal: rolled back before the header is judged (the
        # file may hold the killed transaction's pages); a failure here is judged below
        with contextlib.suppress(sqlite3.DatabaseError, StoreError):
            _roll_back_hot_journal(path)
    store_safety.check_file(
        Path(home), new_store=new_store
    )  # StoreDamaged: header, size, a 0-byte store that held data
    if not readonly:
        ensure_home(Path(home))
        # a foreign WAL is moved aside, never applied. Readers do not check: on a fresh
        # store a killed writer's own WAL was judged foreign by a read-only open (test
        # test_own_wal_of_a_killed_writer_is_applied), and moving it would lose commits.
        store_safety.check_wal(Path(home))
        _create_private(path)
    try:
        if readonly:
            conn = _open_readonly(path)
        else:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            store_safety.check_is_store(conn, path)
            if not readonly:
                if not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file: before its first table
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                # a 64 MiB page cache (default 2 MiB): the random-keyed indexes of a big
                # ingest group (entry_id, content_hash) otherwise spill and re-read pages
                conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
                _load_pragmas(conn)
                store_id, created = ensure_schema(conn)
                store_safety.write_id_file(Path(home), store_id, created)
                if wiped.marked(Path(home)):  # the wipe's tombstones into the new store
                    wiped.adopt(conn, Path(home))
            else:
                if schema_version(conn) == 0:  # a first ingest killed before it committed its schema
                    # (found by the vault's SIGKILL trials: `vault verify` then failed on a missing table)
                    raise StoreError("no store yet", where=str(path), hint="run `ctxkeep ingest` first")
                check_version(conn, readonly=True)
                if mmap:
                    conn.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
        except BaseException:
            conn.close()
            raise
    except sqlite3.DatabaseError as e:
        if store_safety.is_corruption(e):  # SQLite's own text kept as the cause (logs, doctor)
            raise damaged(path, e) from e
        raise
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    """The store's schema version (``meta.schema_version``; 0 for a store without a
    ``meta`` table)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0]) if row else 0


def check_version(conn: sqlite3.Connection, *, readonly: bool = False) -> None:
    """Raise StoreError when the store's schema is newer than this ctxkeep, or (for a
    reader, which never migrates) older than ``MIN_READ_VERSION``."""
    v = schema_version(conn)
    if v > ddl.SCHEMA_VERSION:
        raise StoreError(
            f"store schema v{v} is newer than this ctxkeep (v{ddl.SCHEMA_VERSION})", hint="upgrade ctxkeep"
        )
    if readonly and 0 < v < MIN_READ_VERSION:
        raise StoreError(
            f"store schema v{v} is older than this ctxkeep reads (v{MIN_READ_VERSION})",
            hint="run `ctxkeep ingest` once to upgrade the store",
        )


def ensure_schema(conn: sqlite3.Connection) -> tuple[str, str]:
    """Migrate an older schema (``migrations.migrate``), create what is missing
    (``ddl.create_all``), record the version, the identity (``migrations.ensure_identity``)
    and the FTS ranks, in one transaction, then VACUUM once when a step run freed much of
    the file (``migrations.frees_space``). Returns ``(store_id, created_at)``.
    Raises StoreError for a newer schema, StoreBusy when another writer holds the
    database."""
    check_version(conn)
    # a migration's index sorts and VACUUM's copy of the store go to temporary files,
    # not memory: with the load pragmas' temp_store=MEMORY, upgrading a 1.9 GB store to
    # v9 peaked at 1.67 GB RSS (0.99 GB with VACUUM on disk)
    prev = conn.execute("PRAGMA temp_store").fetchall()[0][0]
    conn.execute("PRAGMA temp_store=FILE")
    ran: list[str] = []
    old = schema_version(conn)  # for the upgrade's progress only
    try:
        with write(conn):
            # read again in the transaction: another writer may have upgraded it meanwhile
            ran = migrate(conn, schema_version(conn))
            ddl.create_all(conn)
            if ran:  # a step may have changed usage before its log triggers existed:
                # DuckDB's next sync compares every row (``duckdb_store._logged_changes``)
                conn.execute("INSERT INTO usage_log(usage_key) VALUES(NULL)")
            conn.execute("INSERT OR IGNORE INTO meta VALUES('schema_version', ?)", (str(ddl.SCHEMA_VERSION),))
            ident = ensure_identity(conn)
            ddl.set_ranks(conn)
            if ran:
                phase("committing the upgrade")
        if frees_space(ran):
            # once, after the commit (VACUUM runs in no transaction): the pages the step
            # freed go back to the file system (v9: ~0.2x of the raw JSONL; ~5 s per 200
            # MB). A crash inside, or another writer holding the store, leaves it migrated
            # and unvacuumed (the free pages are reused by the next writes).
            phase("compacting the store (VACUUM)")
            try:
                conn.execute("VACUUM")
            except sqlite3.OperationalError as e:
                log.warning("ctxkeep: the upgraded store was not compacted (%s)", e)
    except BaseException:
        if 0 < old < ddl.SCHEMA_VERSION:  # an upgrade was under way (rolled back)
            phases.info("upgrade failed", extra={"progress": None, "done": True, "failed": True})
        raise
    finally:
        conn.execute(f"PRAGMA temp_store={int(prev)}")
    if ran:
        phases.info("upgraded", extra={"progress": None, "done": True})
    return ident


def begin(conn: sqlite3.Connection) -> None:
    """Open a write transaction on ``conn`` (``BEGIN IMMEDIATE``, page 1 stamped: a WAL
    then names its database, ``store_safety``); the caller ends it with ``COMMIT`` or
    ``ROLLBACK`` (``write`` does). Raises StoreBusy when another writer holds the
    database past the timeout."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise StoreBusy("the store is locked by another writer", hint="retry later") from None
        raise
    try:
        store_safety.stamp_page1(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction (``begin``), committed on success, rolled back on error.
    Inside a transaction the caller holds (the ingest writer's, which stores several
    groups in one: ``pipeline.writer``) it joins it: nothing is committed here, and on
    an error the caller rolls its transaction back (no savepoint: a savepoint copies
    each page it first changes to a sub-journal, which cost the 2 GB ingest's writer
    as much CPU as the fewer COMMITs saved: docs/design.md, "Throughput", session 21). Raises StoreBusy when another writer holds the
    database past the timeout."""
    if conn.in_transaction:
        yield conn
        return
    begin(conn)
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


@contextmanager
def reading_cache(conn: sqlite3.Connection, kib: int = READ_CACHE_KIB) -> Iterator[sqlite3.Connection]:
    """``conn``'s page cache at ``kib`` KiB (``READ_CACHE_KIB``; SQLite drops the pages
    past it) while it only reads beside a writing connection, then ``CACHE_KIB`` again
    (its own writes after, e.g. the FTS merge, get the writer's cache)."""
    conn.execute(f"PRAGMA cache_size=-{int(kib)}")
    try:
        yield conn
    finally:
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")


def sibling(conn: sqlite3.Connection) -> sqlite3.Connection | None:
    """A second writing connection to the database file of ``conn`` (its ``main``
    schema) with the pragmas of ``connect`` (busy timeout, ``synchronous=NORMAL``, the
    page cache), in autocommit mode, usable from another thread (the ingest's writer
    thread). The schema is not touched (``conn`` made it). Returns None for an
    in-memory or temporary database (nothing to share)."""
    row = next((r for r in conn.execute("PRAGMA database_list").fetchall() if r[1] == "main"), None)
    if not row or not row[2]:
        return None
    other = sqlite3.connect(row[2], isolation_level=None, check_same_thread=False)
    other.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    other.execute("PRAGMA synchronous=NORMAL")
    other.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    _load_pragmas(other)
    return other


def _load_pragmas(conn: sqlite3.Connection) -> None:
    """The pragmas of a writing connection for bulk loads: fewer, larger WAL
    checkpoints (``WAL_CHECKPOINT_BYTES``, ``WAL_LIMIT_BYTES``) and temporary b-trees
    (sorts of ``INSERT … SELECT``, FTS5 merges) in memory. Durability is that of
    ``synchronous=NORMAL`` in WAL mode either way: a commit is atomic, and only the
    last commits can be lost on power loss (their watermarks with them, so they are
    read again)."""
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_BYTES // page}")
    conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
    conn.execute("PRAGMA temp_store=MEMORY")

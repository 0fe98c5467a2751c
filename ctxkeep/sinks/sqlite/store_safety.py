"""Checks made before the SQLite store is opened: the file's header, a stale WAL, the
store's identity. ``connection.connect`` runs them; ``maintenance.doctor`` reports them.

Format facts are from SQLite's file format document
(https://www.sqlite.org/fileformat.html): the database header (100 bytes of page 1:
the 16-byte magic ``"SQLite format 3\\0"``, the page size at offset 16 as a 2-byte
big-endian number, 1 meaning 65536; ``user_version`` at 60 and ``application_id`` at
68, 4-byte big-endian) and the WAL (a 32-byte header: magic 0x377f0682 or 0x377f0683,
version, page size, checkpoint sequence, salt-1, salt-2, two checksums; then frames of a
24-byte header, page number, database size in pages for a commit frame else 0, the two
salts and two checksums, followed by the page image).

The identity: ``application_id`` = ``APPLICATION_ID`` ("ctxk") marks a ctxkeep store;
``user_version`` holds the first 32 bits of ``meta.store_id``. ``stamp_page1`` rewrites
``user_version`` in every write transaction (``connection.write``), so every committed
transaction of a ctxkeep WAL holds an image of page 1 naming its database.

A WAL is *foreign* (``wal_verdict``) when its page size differs from the database's,
or when a page-1 image in its committed frames (frames whose salts match the WAL
header, up to the last commit frame) carries another ``application_id`` /
``user_version`` than the database file, or when it has committed frames but no page-1
image while the database has an identity (every ctxkeep transaction writes page 1).
Frame checksums are not recomputed: the salt test takes a superset of the frames
SQLite would apply, which only makes the page-1 test stricter. A WAL with no committed
frame is left to SQLite (it ignores it).

A WAL of this store is *stale* (``wal_verdict``) when it was written on top of another
generation of ``store.db``: its last commit frame counts more pages than the file holds
and some page between the file's end and that count is in no frame of the WAL (a WAL
only ever adds the pages it allocates; the others were in the file it was written
on). That is a WAL of a later generation beside an older ``store.db`` restored by hand
(a copy of the store kept on ingesting): SQLite would read the missing pages as
absent, so b-tree pages of the WAL point at nothing and the WAL's ``watermarks`` claim
files whose entries are gone (1,549 entries lost until a backfill, issue 24). The file
alone is a consistent older state; the WAL is moved aside like a foreign one.

A WAL is only examined when no live process has the database open: SQLite's readers and
writers hold a shared lock on the ``-shm`` file's "DMS" byte (offset 128, os_unix.c
``UNIX_SHM_DMS``), so an exclusive open-file-description lock on it that fails means a
live connection (this process's own included: OFD locks conflict with its POSIX
locks). The probe's file descriptor is kept open for the life of the process (closing a
descriptor would drop this process's POSIX locks on the file, SQLite's own).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import sqlite3
import struct
import sys
import threading
from pathlib import Path

from ctxkeep.errors import StoreError
from ctxkeep.sinks.files import (
    ANALYTICS_DB,
    ARCHIVE_DIR,
    BACKUPS_DIR,
    INTEGRITY_STAMP,
    STORE_DB,
    STORE_ID_FILE,
    VAULT_DIR,
)
from ctxkeep.timeutil import now_iso

SQLITE_MAGIC = b"SQLite format 3\x00"
WAL_MAGICS = (0x377F0682, 0x377F0683)
#: ``PRAGMA application_id`` of a ctxkeep store: "ctxk"
APPLICATION_ID = 0x6374786B
_DMS_OFFSET = 128
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37 if sys.platform.startswith("linux") else None)
_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", 36 if sys.platform.startswith("linux") else None)
#: SQLite's lock byte of a database file (os_unix.c ``PENDING_BYTE``; RESERVED and the
#: SHARED range follow it)
_PENDING_BYTE = 0x40000000
#: descriptors of the store's files this process read (``kept_fd``), by (st_dev, st_ino),
#: oldest first; never closed while among the last ``KEPT_FDS``
_probe_fds: dict[tuple[int, int], int] = {}
#: how many such descriptors a process keeps (a process uses one or two stores; the
#: suite's one process creates thousands): beyond it the oldest whose store no
#: connection has open are closed (``_closable``); those of open stores stay, however many
KEPT_FDS = 16
#: held while a descriptor of ``kept_fd`` is used: another thread's ``kept_fd`` may close one
KEPT_LOCK = threading.RLock()
#: the (st_dev, st_ino) each path had when ``kept_fd`` last kept it
_kept_paths: dict[str, tuple[int, int]] = {}


def kept_fd(path: Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor of ``path`` that this process keeps open: ctxkeep's own reads of
    ``store.db`` and its ``-shm`` must never ``close()`` one, since a close drops every
    POSIX lock the process holds on the file, those of its SQLite connections included
    (sqlite.org/howtocorrupt.html 2.2). Dropped locks let another process that closes
    its last connection take the EXCLUSIVE lock and delete ``-wal`` and ``-shm`` under a
    live connection of this one, which then reads the new WAL through the old index:
    "database disk image is malformed" in that process alone until all its connections
    close (newuser19 F15, the long-running app; ``tests/sinks/test_long_reader.py``).
    Keyed by the file's (st_dev, st_ino): a file replaced by a rename gets a new one,
    and the old file's is closed then (its disk space freed: a reparse's old store; the
    connections still on it see a file no other process opens by name). Beyond
    ``KEPT_FDS``, the least recently used are closed, but only those whose store no
    connection has open (``_closable``): a close under this process's own connection is
    what the descriptor is kept for (a process holding more than ``KEPT_FDS`` open stores
    keeps them all; before session 23 the 17th file closed the oldest, open or not).
    Raises OSError (the open)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino)
    was = _kept_paths.get(str(path))
    if was is not None and was != key and was in _probe_fds:
        os.close(_probe_fds.pop(was))
    _kept_paths[str(path)] = key
    fd = _probe_fds.pop(key, None)
    if fd is None:
        fd = os.open(path, flags)
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != key:  # replaced between the stat and the open
            key = (now.st_dev, now.st_ino)
            if key in _probe_fds:
                os.close(fd)
                fd = _probe_fds.pop(key)
    _probe_fds[key] = fd  # the most recent last
    if len(_probe_fds) > KEPT_FDS:
        over = len(_probe_fds) - KEPT_FDS
        for old in list(itertools.islice((k for k in _probe_fds if k != key and _closable(k)), over)):
            os.close(_probe_fds.pop(old))
    if len(_kept_paths) > 4 * KEPT_FDS:  # the paths of closed descriptors
        for p in [p for p, k in _kept_paths.items() if k not in _probe_fds]:
            del _kept_paths[p]
    return fd


def _closable(key: tuple[int, int]) -> bool:
    """True when closing the kept descriptor ``key`` drops no lock of a live SQLite
    connection of this process: the file is deleted (``st_nlink`` 0: no process opens
    it by name again), or no process holds a lock on it (``F_OFD_GETLK``, which sees
    this process's POSIX locks too): neither on a database's lock bytes (``PENDING_BYTE``
    0x40000000 and the 510 SHARED bytes after: a WAL-mode connection holds a SHARED lock
    there as long as it is open, measured) nor on a ``-shm``'s (offsets 120-135: the
    WRITE, CKPT, RECOVER, READ and DMS locks; os_unix.c). Where OFD locks are not
    available: True (the least recently used is closed, as before session 23). Used by
    ``kept_fd``'s bound, oldest first."""
    fd = _probe_fds[key]
    try:
        if os.fstat(fd).st_nlink == 0:
            return True
    except OSError:
        return True
    return _unlocked(fd, 120, 16) and _unlocked(fd, _PENDING_BYTE, 512)


def _unlocked(fd: int, start: int, length: int) -> bool:
    """True when no process (this one included) holds a lock on bytes ``start`` to
    ``start + length`` of the file open as ``fd`` (``F_OFD_GETLK``: nothing taken)."""
    if _OFD_GETLK is None:
        return True
    try:  # struct flock: l_type, l_whence, l_start, l_len, l_pid (Linux x86-64/aarch64 layout)
        r = fcntl.fcntl(fd, _OFD_GETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, start, length, 0))
    except OSError:
        return False
    return struct.unpack("hhqqi4x", r)[0] == fcntl.F_UNLCK


def _dms_free(fd: int) -> bool:
    """True when no connection (this process's included) holds the DMS byte of the
    ``-shm`` open as ``fd`` (an OFD write lock on it can be taken, and is released at
    once); False where OFD locks are not available."""
    if _OFD_SETLK is None:
        return False
    try:  # struct flock: l_type, l_whence, l_start, l_len, l_pid (Linux x86-64/aarch64 layout)
        fcntl.fcntl(fd, _OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, _DMS_OFFSET, 1, 0))
    except OSError:
        return False
    fcntl.fcntl(fd, _OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_UNLCK, os.SEEK_SET, _DMS_OFFSET, 1, 0))
    return True


class StoreDamaged(StoreError):
    """``store.db`` is not a readable SQLite database of a ctxkeep store (a bad header,
    a size that is not a whole number of pages, SQLITE_CORRUPT / SQLITE_NOTADB while
    reading, a 0-byte file where a store held data). ``ctxkeep doctor`` says more."""

    #: what SQLite or the check said (for doctor; never printed in the error line)
    why: str | None = None


def damaged(path: Path, why: object | None = None) -> StoreDamaged:
    """The one error of a damaged store: ``store.db is damaged (<path>) - run 'ctxkeep
    doctor'`` (``why`` kept as ``.why`` for doctor, never printed in the line)."""
    e = StoreDamaged(f"{Path(path).name} is damaged", where=str(path), hint="run 'ctxkeep doctor'")
    e.why = str(why) if why is not None else None
    return e


def is_corruption(e: BaseException) -> bool:
    """True for SQLite's SQLITE_CORRUPT / SQLITE_NOTADB errors (``sqlite3.DatabaseError``
    "database disk image is malformed", "file is not a database", FTS5's "database disk
    image is malformed" and the like), False for busy, locked, read-only and other
    operational errors."""
    if not isinstance(e, sqlite3.DatabaseError):
        return False
    name = getattr(e, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return True
    msg = str(e).lower()
    return any(k in msg for k in ("malformed", "not a database", "corrupt"))


def header_problem(path: Path) -> str | None:
    """Why ``path`` (an existing, non-empty file) is not a sound SQLite database file
    by its header alone, or None: a short file, the wrong magic, a page size that is
    not a power of two in 512..65536, a size that is not a whole number of pages
    (unless the header's page count fits in the file or a WAL holds the frames: a
    write cut short by a full disk, not damage). Reads 100 bytes."""
    size = path.stat().st_size
    with KEPT_LOCK:  # never a close() under a connection: ``kept_fd``
        head = os.pread(kept_fd(path), 100, 0)
    if len(head) < 100:
        return f"{size} bytes: shorter than an SQLite header"
    if head[:16] != SQLITE_MAGIC:
        return "no SQLite header (the first 16 bytes are not 'SQLite format 3')"
    ps = struct.unpack(">H", head[16:18])[0]
    ps = 65536 if ps == 1 else ps
    if ps < 512 or ps & (ps - 1):
        return f"page size {ps} in the header is not a power of two in 512..65536"
    if size % ps:
        # a write cut short (a checkpoint on a full disk) leaves a partial page past the
        # end: SQLite reads only the pages its header counts (bytes 28-31, valid when
        # bytes 92-95 equal the change counter at 24-27: sqlite.org/fileformat.html
        # 1.3.7), and a WAL still holds the frames a cut checkpoint was copying
        n_pages = struct.unpack(">I", head[28:32])[0]
        counted = head[92:96] == head[24:28] and n_pages > 0 and n_pages * ps <= size
        wal = path.with_name(path.name + "-wal")
        if counted or (wal.exists() and wal.stat().st_size > 0):
            return None
        return f"{size:,} bytes is not a whole number of {ps}-byte pages (truncated or extended)"
    return None


def held_data(home: Path) -> list[str]:
    """What shows that the store at ``home`` held data: the identity file
    (``store.id``), store backups, the Parquet archive, the vault's packs, the DuckDB
    store. Names relative to ``home``; empty for a new home, and for one a ``purge
    --all`` wiped (``wiped.WIPE_MARK``: a deliberate wipe is not damage, and the
    backups it leaves are the user's)."""
    home = Path(home)
    from ctxkeep.sinks.sqlite.wiped import marked

    if marked(home):
        return []
    out = []
    if (home / STORE_ID_FILE).exists():
        out.append(STORE_ID_FILE)
    for d in (BACKUPS_DIR, ARCHIVE_DIR):
        if (home / d).is_dir() and any((home / d).iterdir()):
            out.append(d + "/")
    if next((home / VAULT_DIR).rglob("*.pack"), None) is not None:  # the first pack is enough
        out.append(VAULT_DIR + "/")
    if (home / ANALYTICS_DB).exists() and (home / ANALYTICS_DB).stat().st_size:
        out.append(ANALYTICS_DB)
    return out


def missing(path: Path, held: list[str]) -> StoreDamaged:
    """The error of a ``store.db`` gone from a home that shows it held data (``held``:
    ``held_data``): ``store.db is missing (<path>) - run 'ctxkeep doctor --repair' ...``.
    An ingest into such a home would build a new store from the agents' files as they
    are now, without what compress moved out of them or what only the vault holds."""
    e = StoreDamaged(
        f"{Path(path).name} is missing",
        where=str(path),
        hint=f"run 'ctxkeep doctor --repair': it rebuilds the store from {', '.join(held)}",
    )
    e.why = "missing, but the home holds " + ", ".join(held)
    return e


def check_file(home: Path, *, new_store: bool = False) -> None:
    """Raise StoreDamaged when ``<home>/store.db`` exists and its header is damaged
    (``header_problem``), or it is 0 bytes or missing while the home shows it held data
    (``held_data``: ``missing``): such a store is never silently rebuilt from what the
    agents' files hold now. A missing file, or a 0-byte one, in a new home passes (a
    writable open creates the store); ``new_store`` lets ``doctor --repair`` create the
    store it rebuilds."""
    path = Path(home) / STORE_DB
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        held = [] if new_store else held_data(home)
        if held:
            raise missing(path, held) from None
        return
    if size == 0:
        held = [] if new_store else held_data(home)
        if held:
            raise damaged(path, f"0 bytes, but the home holds {', '.join(held)}")
        return
    why = header_problem(path)
    if why:
        raise damaged(path, why)


def check_is_store(conn: sqlite3.Connection, path: Path) -> None:
    """Raise StoreError when the open database has tables but is no ctxkeep store (no
    ``meta`` table), so that ctxkeep never adds its tables to another program's
    database. Reads the schema (one page); SQLITE_CORRUPT propagates."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
    if names and "meta" not in names:
        raise StoreError(
            "not a ctxkeep store: the database has other tables and no meta table",
            where=str(path),
            hint="pass --home DIR naming a ctxkeep home",
        )


#: page cache of ``check_integrity``'s read of every page, KiB
CHECK_CACHE_KIB = 2048


def check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    """Raise StoreDamaged when ``PRAGMA quick_check`` finds damage (or SQLite raises
    SQLITE_CORRUPT while it reads): the check of the commands that write (ingest before
    it stores anything, purge, retention, compress, reindex), so none writes into a
    damaged b-tree. Reads every page: ~0.27 s per 170 MB, through a page cache cut to
    ``CHECK_CACHE_KIB`` meanwhile (then restored): read through the writer's 64 MiB
    cache, a check filled it with the whole store, up to 64 MB of RSS for an ingest of
    a few lines (the hook path's budget, docs/design.md). Damage found also removes the
    ``INTEGRITY_STAMP`` (``forget_good``): no later run trusts the store unchecked."""
    cache = conn.execute("PRAGMA cache_size").fetchone()[0]
    conn.execute(f"PRAGMA cache_size=-{CHECK_CACHE_KIB}")
    try:
        problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as e:
        if is_corruption(e):
            forget_good(Path(path).parent)
            raise damaged(path, e) from None
        raise
    finally:
        conn.execute(f"PRAGMA cache_size={int(cache)}")
    if problems != ["ok"]:
        forget_good(Path(path).parent)
        raise damaged(path, "; ".join(problems))


def _files_state(home: Path) -> list:
    """``[inode, size, mtime_ns]`` of ``store.db`` and ``[size, mtime_ns]`` of its WAL
    (None when absent or empty: a read-only open creates an empty one, which holds no
    frame): what changes when any process writes or checkpoints the store."""
    db = os.stat(Path(home) / STORE_DB)
    try:
        w = os.stat(Path(home) / (STORE_DB + "-wal"))
        wal = [w.st_size, w.st_mtime_ns] if w.st_size else None
    except FileNotFoundError:
        wal = None
    return [db.st_ino, db.st_size, db.st_mtime_ns, wal]


def known_good(home: Path) -> bool:
    """True when ``INTEGRITY_STAMP`` names the store's files as they are now: since
    ctxkeep last knew the store undamaged (a ``check_integrity`` passed, or a run that
    began on a known-good store committed, ``mark_good``) no process wrote
    ``store.db`` or its WAL. What lets a few new lines (the hook path) skip the
    whole-store read of ``check_integrity`` (~3 s at 2 GB); a file changed any other way
    (another program, a restore, a torn copy) no longer matches, and the next ingest
    reads every page. Damage that leaves size and mtime alone (a failing disk) is found
    by the full check of every bigger ingest, of the maintenance commands and of
    ``doctor``. Two stats and a small read; False on any error."""
    try:
        stamp = json.loads((Path(home) / INTEGRITY_STAMP).read_text())
        return stamp == _files_state(home)
    except (OSError, ValueError):
        return False


def mark_good(home: Path) -> None:
    """Write ``INTEGRITY_STAMP`` for the store's files as they are now (the caller
    knows the store undamaged: its check passed, or it began on a ``known_good`` store
    and only SQLite wrote since; its connections are closed). Written whole (a
    temporary file renamed over it); a failure to write only costs the next small
    ingest a full check."""
    p = Path(home) / INTEGRITY_STAMP
    tmp = p.with_name(p.name + ".tmp")
    try:
        tmp.write_text(json.dumps(_files_state(home)))
        os.replace(tmp, p)
    except OSError:
        forget_good(home)


def forget_good(home: Path) -> None:
    """Remove ``INTEGRITY_STAMP``: the next ingest checks every page."""
    for name in (INTEGRITY_STAMP, INTEGRITY_STAMP + ".tmp"):
        with contextlib.suppress(OSError):
            (Path(home) / name).unlink()


def header_id(store_id: str) -> int:
    """The 32-bit ``user_version`` written for ``store_id`` (hex): its first 8 hex
    digits as a signed 32-bit integer (SQLite stores a signed value), never 0."""
    v = int(store_id[:8], 16) or 1
    return v - (1 << 32) if v >= 1 << 31 else v


def stamp_page1(conn: sqlite3.Connection) -> None:
    """Rewrite ``user_version`` with its own value in the caller's write transaction,
    so that the transaction's WAL frames include page 1 (one page, ~µs). Does nothing
    for a store without an identity yet."""
    v = conn.execute("PRAGMA user_version").fetchone()[0]
    if v:
        conn.execute(f"PRAGMA user_version={int(v)}")


def write_id_file(home: Path, store_id: str, created_at: str) -> None:
    """Write ``<home>/store.id`` (``<store_id> <created_at>``, 0600) if missing: the
    store's identity outside the database, so a lost or emptied ``store.db`` is known to
    have held a store."""
    p = Path(home) / STORE_ID_FILE
    if p.exists():
        return
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{store_id} {created_at}\n")


def live(home: Path) -> bool:
    """True when a live connection (any process, this one included) has ``store.db``
    open in WAL mode: the ``-shm`` file's DMS byte is locked. False when there is no
    ``-shm`` file. Where OFD locks are not available (not Linux), True whenever a
    ``-shm`` exists (no check then: SQLite alone handles the WAL)."""
    shm = Path(home) / (STORE_DB + "-shm")
    if not shm.exists():
        return False
    if _OFD_SETLK is None:
        return True
    with KEPT_LOCK:  # (the descriptor stays open while it is used)
        try:
            fd = kept_fd(shm, os.O_RDWR)  # kept open: a close would drop SQLite's locks on it
        except OSError:
            return True  # cannot tell: leave the WAL to SQLite
        return not _dms_free(fd)


def wal_verdict(db: Path, wal: Path) -> tuple[str, str]:
    """Whether ``wal`` belongs to ``db``: ``("own" | "foreign" | "stale" | "empty", why)``; see the
    module doc for the rules. Reads the WAL's frame headers (24 bytes per frame) and
    the page-1 images' 100-byte headers, and the database's first 100 bytes."""
    with KEPT_LOCK:  # never a close() under a connection: ``kept_fd``
        dbhead = os.pread(kept_fd(db), 100, 0)
    db_ps = struct.unpack(">H", dbhead[16:18])[0] if len(dbhead) >= 18 else 0
    db_ps = 65536 if db_ps == 1 else db_ps
    db_ident = (dbhead[68:72], dbhead[60:64]) if len(dbhead) >= 72 else (b"", b"")
    size = wal.stat().st_size
    with open(wal, "rb") as f:
        h = f.read(32)
        if len(h) < 32:
            return "empty", "shorter than a WAL header"
        magic, _ver, ps, _seq, s1, s2 = struct.unpack(">6I", h[:24])
        if magic not in WAL_MAGICS:
            return "empty", "no WAL header (SQLite ignores it)"
        if db_ps and ps != db_ps:
            return "foreign", f"its page size {ps} is not the database's {db_ps}"
        committed_p1: bytes | None = None
        p1: bytes | None = None
        commits = 0
        pages: set[int] = set()  # the pages the frames up to the last commit write
        seen: set[int] = set()
        last_size = 0  # the database's size in pages after the last commit
        off = 32
        while off + 24 + ps <= size:
            f.seek(off)
            fh = f.read(24)
            pgno, commit, fs1, fs2 = struct.unpack(">4I", fh[:16])
            if (fs1, fs2) != (s1, s2):
                break
            seen.add(pgno)
            if pgno == 1:
                p1 = f.read(100)
            if commit:
                commits += 1
                committed_p1 = p1 if p1 is not None else committed_p1
                pages |= seen
                last_size = commit
            off += 24 + ps
    if not commits:
        return "empty", "no committed frame (SQLite ignores it)"
    has_identity = db_ident[0] == struct.pack(">I", APPLICATION_ID)
    if committed_p1 is None:
        if has_identity:
            return "foreign", f"{commits} committed transactions without this store's page 1"
        return "own", "a WAL of a store without an identity (applied as SQLite would)"
    wal_ident = (committed_p1[68:72], committed_p1[60:64])
    if not has_identity and wal_ident[0] == struct.pack(">I", APPLICATION_ID):
        # a new store whose identity (and schema) is still only in its WAL: another
        # ingest is creating it and has not checkpointed yet (two first ingests at once
        # moved the creator's live WAL aside: new-user trial)
        return "own", f"{commits} committed transactions that give this new store its identity"
    if wal_ident != db_ident:
        return "foreign", "its page 1 names another database (application_id/user_version)"
    file_pages = db.stat().st_size // db_ps if db_ps else 0
    absent = [p for p in range(file_pages + 1, last_size + 1) if p not in pages] if db_ps else []
    if absent:
        return "stale", (
            f"a WAL of another generation of this store: written on a store.db of {last_size:,} pages, "
            f"this one holds {file_pages:,} and {len(absent):,} of the pages between are in no frame "
            "(an older store.db restored beside a newer WAL)"
        )
    return "own", f"{commits} committed transactions of this store"


#: ``check_wal``'s answer when a foreign WAL could not be moved (a read-only dir)
UNMOVABLE = "unmovable"


def check_wal(home: Path) -> str | None:
    """Before an open (writable or read-only): when ``<home>/store.db-wal`` exists, no live process has
    the store open (``live``) and the WAL is foreign or stale (``wal_verdict``), move it and its
    ``-shm`` aside as ``store.db-wal.foreign-<UTC>`` (``.stale-<UTC>``; ``set_wal_aside``) and print
    one warning line on stderr. Returns the new WAL path, ``UNMOVABLE`` when the
    directory does not allow the move (the caller then opens the database immutable,
    without the WAL), or None when nothing was moved. An own WAL is left for SQLite to
    apply (it holds committed transactions)."""
    home = Path(home)
    db, wal = home / STORE_DB, home / (STORE_DB + "-wal")
    if not wal.exists() or not db.exists() or db.stat().st_size == 0 or live(home):
        return None
    verdict, why = wal_verdict(db, wal)
    if verdict not in ("foreign", "stale"):
        return None
    return set_wal_aside(home, verdict, why)


def set_wal_aside(home: Path, verdict: str, why: str) -> str:
    """Move ``<home>/store.db-wal`` and its ``-shm`` aside as ``store.db-wal.<verdict>-<UTC>``
    (never deleted) with one warning line on stderr. Returns the new WAL path, or
    ``UNMOVABLE`` when the directory does not allow the move."""
    home = Path(home)
    wal, shm = home / (STORE_DB + "-wal"), home / (STORE_DB + "-shm")
    whose = "belongs to another database" if verdict == "foreign" else "is not of this store.db's generation"
    stamp = now_iso().replace(":", "").replace("-", "")
    dest = wal.with_name(f"{wal.name}.{verdict}-{stamp}")
    try:
        os.replace(wal, dest)
    except OSError:  # a read-only dir: the caller opens the database without its WAL
        sys.stderr.write(f"warning: {wal.name} {whose} ({why}); not applied\n")
        return UNMOVABLE
    if shm.exists():
        os.replace(shm, shm.with_name(f"{shm.name}.{verdict}-{stamp}"))
    sys.stderr.write(f"warning: {wal.name} {whose} ({why}); moved aside, not applied ({dest})\n")
    return str(dest)

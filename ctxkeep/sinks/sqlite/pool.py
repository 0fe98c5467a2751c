"""Extra read-only connections to a store a reader already holds open, kept for reuse.

A search runs some of its candidate lists on a second connection in a thread
(``query.search``): sqlite3 releases the GIL while a statement steps, so two FTS5
statements run on both cores at once. Opening that connection costs ~1 ms (the file
checks of ``connect``); a long-lived process (the MCP server, the app) searches many
times, so the connection is given back after each search and kept, at most
``KEEP_IDLE`` of them in the process (a test suite opens hundreds of stores: the oldest
idle one is closed first).

``borrow(conn)`` opens (or takes an idle) read-only connection to the database file of
``conn`` (``PRAGMA database_list``, its ``main`` schema), with the same ``mmap_size`` and
busy timeout; ``give_back`` returns it. An idle connection is keyed by the file's path,
device and inode: a store replaced under the same path (a restore, ``doctor --repair``)
gets new connections, never one reading the old file. A forked child never uses the
connections its parent kept. An idle connection is closed after ``IDLE_CLOSE`` seconds
(a daemon timer), so a process that has stopped searching holds the store no more.

``wait_unopened(home, what)``: before a run replaces ``store.db`` or moves its
``-wal``/``-shm`` (a reparse's swap, ``restore``, ``doctor --repair``), the idle
connections kept here are closed and the run waits for other processes' connections
to close, else refuses (StoreBusy).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path

from ctxkeep.errors import StoreBusy
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.sqlite.connection import BUSY_TIMEOUT_MS, _open_readonly
from ctxkeep.sinks.sqlite.store_safety import live

#: idle extra connections kept in the process, all stores together
KEEP_IDLE = 4
#: seconds an idle connection is kept before a timer closes it: a long-lived process
#: (the MCP server, the app) holds no pooled connection once it has stopped searching,
#: so a run that replaces the store's files (``wait_unopened``, ``READERS_WAIT`` 10 s)
#: finds it closed instead of refusing (``CTXKEEP_POOL_IDLE_SECONDS``)
IDLE_CLOSE = float(os.environ.get("CTXKEEP_POOL_IDLE_SECONDS", "") or 3.0)

_Key = tuple[str, int, int, int]
_idle: OrderedDict[_Key, list[sqlite3.Connection]] = OrderedDict()
_lock = threading.Lock()
#: when each idle connection was given back (``time.monotonic``), by ``id``
_since: dict[int, float] = {}
#: the pending timer that closes connections idle past ``IDLE_CLOSE`` (None: none)
_timer: threading.Timer | None = None
#: a forked child's inherited idle connections: never used (SQLite: a connection must
#: not cross a fork) nor closed (closing could touch the parent's files), only kept
_forked: list[sqlite3.Connection] = []


def _after_fork_in_child() -> None:
    global _lock, _timer
    _lock = threading.Lock()
    _timer = None
    _since.clear()
    _forked.extend(c for v in _idle.values() for c in v)
    _idle.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Borrowed:
    """A borrowed connection (``conn``) and the key it goes back under."""

    __slots__ = ("conn", "key")

    def __init__(self, conn: sqlite3.Connection, key: _Key):
        self.conn, self.key = conn, key


def borrow(conn: sqlite3.Connection) -> Borrowed | None:
    """A read-only connection to the database file of ``conn``, usable from another
    thread, or None when there is none to share: an in-memory or temporary database, or
    ``conn`` inside a transaction (a second connection would not see its uncommitted
    writes). Raises nothing: a file that cannot be opened again gives None."""
    try:
        if conn.in_transaction:
            return None
        row = next((r for r in conn.execute("PRAGMA database_list").fetchall() if r[1] == "main"), None)
        if not row or not row[2]:
            return None
        path = row[2]
        st = os.stat(path)
        mmap = int(conn.execute("PRAGMA mmap_size").fetchone()[0])
    except (sqlite3.Error, OSError):
        return None
    key = (path, st.st_dev, st.st_ino, mmap)
    with _lock:
        free = _idle.get(key)
        if free:
            other = free.pop()
            _since.pop(id(other), None)
            if not free:
                del _idle[key]
            return Borrowed(other, key)
    try:
        other = _open_readonly(Path(path))
        other.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if mmap:
            other.execute(f"PRAGMA mmap_size={mmap}")
    except (sqlite3.Error, OSError):
        return None
    return Borrowed(other, key)


def give_back(b: Borrowed, *, reuse: bool = True) -> None:
    """Return ``b`` for reuse (``reuse``; the oldest idle connection beyond
    ``KEEP_IDLE`` is closed), or close it (a connection whose statement was interrupted
    is never reused)."""
    if not reuse:
        b.conn.close()
        return
    drop: list[sqlite3.Connection] = []
    with _lock:
        _idle.setdefault(b.key, []).append(b.conn)
        _since[id(b.conn)] = time.monotonic()
        _idle.move_to_end(b.key)
        while sum(len(v) for v in _idle.values()) > KEEP_IDLE:
            k = next(iter(_idle))
            drop.append(_idle[k].pop(0))
            _since.pop(id(drop[-1]), None)
            if not _idle[k]:
                del _idle[k]
        _arm(IDLE_CLOSE)
    for c in drop:
        c.close()


def _arm(delay: float) -> None:
    """Start the idle timer in ``delay`` seconds unless one is pending (under ``_lock``).
    A daemon thread: it never keeps a process from exiting."""
    global _timer
    if _timer is None:
        _timer = threading.Timer(max(delay, 0.01), _close_stale)
        _timer.daemon = True
        _timer.start()


def _close_stale() -> None:
    """The timer: close the idle connections given back ``IDLE_CLOSE`` seconds ago or
    more (taken out of ``_idle`` under the lock first, so none is borrowed while it
    closes), and re-arm for the youngest left. Raises nothing."""
    global _timer
    drop: list[sqlite3.Connection] = []
    with _lock:
        _timer = None
        now = time.monotonic()
        for k in list(_idle):
            keep = [c for c in _idle[k] if now - _since.get(id(c), now) < IDLE_CLOSE]
            drop += [c for c in _idle[k] if c not in keep]
            if keep:
                _idle[k] = keep
            else:
                del _idle[k]
        for c in drop:
            _since.pop(id(c), None)
        if _idle:
            youngest = max(_since.get(id(c), now) for v in _idle.values() for c in v)
            _arm(youngest + IDLE_CLOSE - now)
    for c in drop:
        try:
            c.close()
        except sqlite3.Error:
            pass


def close_idle() -> None:
    """Close every idle connection (tests; a process about to remove a store)."""
    with _lock:
        conns = [c for v in _idle.values() for c in v]
        _idle.clear()
        _since.clear()
    for c in conns:
        c.close()


#: how long a run about to replace ``store.db`` or move its ``-wal``/``-shm`` waits for
#: other processes' connections to close (``wait_unopened``; a search closes its own in
#: under a second), seconds
READERS_WAIT = 10.0


def wait_unopened(home: Path, what: str, *, wait: float | None = None) -> None:
    """Return once no connection has ``<home>/store.db`` open (``store_safety.live``: the ``-shm``
    file's DMS byte; 0.1-0.2 ms a probe), polling every 0.1 s for up to ``wait``
    seconds (None: ``READERS_WAIT``); else raise StoreBusy naming what to close. For the runs that replace the
    store's file or delete or move its ``-wal``/``-shm`` (``what``: the command, for the
    line): a connection of another process that is open then, idle or reading, holds
    the old index and reads the new files through it ("disk I/O error", then "database
    disk image is malformed" in that process until it closes: measured session 23). A
    ``BEGIN EXCLUSIVE`` does not tell (WAL readers do not block it); an exclusive-mode
    connection (``locking_mode=EXCLUSIVE``) does, as this probe does, without writing.
    This process's own connections count too (OFD locks conflict with its POSIX
    locks): the caller closes them first; this closes the idle ones this module keeps
    (``close_idle``).
    The probe cannot keep a reader from opening the store in the few milliseconds
    between it and the swap (the caller holds the store lock: no writer can)."""
    close_idle()
    deadline = time.monotonic() + (READERS_WAIT if wait is None else wait)
    while live(home):
        if time.monotonic() >= deadline:
            raise StoreBusy(
                f"another process has the store open (the MCP server, the app, a search): {what} "
                "would replace its files under it",
                where=str(Path(home) / STORE_DB),
                hint="close the app or MCP server using this store (or let the search end), then run it again",
            )
        time.sleep(0.1)

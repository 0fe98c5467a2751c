"""A long-running process that holds a connection to the store (the app's
``nbkit.Store.lite``) keeps reading it right while other processes write and close it
(newuser19 F15: the app called a sound store "damaged" for minutes; a restart cured it).

The trigger: ctxkeep read ``store.db``'s header with ``open()``/``close()`` at every
connect, and a ``close()`` drops every POSIX lock the process holds on the file, the
held connection's SHARED lock included (sqlite.org/howtocorrupt.html 2.2). The next
process to close its last connection then took the EXCLUSIVE lock, thought itself the
last user, and deleted ``-wal`` and ``-shm``; the long-running process kept SQLite's
per-inode state (the old ``-shm`` mapped) for every new connection to the same inode,
and read the new WAL through the old index: "database disk image is malformed"."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

from ctxkeep.service.store import reading
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import connection, store_safety

WRITE = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("CREATE TABLE IF NOT EXISTS probe(x, y)")
c.execute("BEGIN")
for i in range(int(sys.argv[2])):
    c.execute("INSERT INTO probe VALUES(?, randomblob(300))", (i,))
c.execute("COMMIT")
c.close()
"""


def _other_process_writes(db, n: int) -> None:
    subprocess.run([sys.executable, "-c", WRITE, str(db), str(n)], check=True)


def test_a_held_connection_survives_other_processes_closing_the_store(tmp_path, monkeypatch):
    monkeypatch.setattr(connection, "REOPEN_SECONDS", 0)
    sqlite_store.connect(tmp_path).close()
    db = tmp_path / "store.db"
    _other_process_writes(db, 100)
    held = sqlite_store.connect(tmp_path, readonly=True)  # the app's Store.lite
    try:
        assert held.execute("SELECT count(*) FROM probe").fetchone() == (100,)
        with reading(tmp_path) as conn:  # any page of the app: a connect, a header check
            assert conn.execute("SELECT count(*) FROM probe").fetchone() == (100,)
        shm = os.stat(f"{db}-shm").st_ino
        for n in (1000, 1000, 3000):
            _other_process_writes(db, n)
        # the other processes left the WAL index this process maps in place
        assert os.stat(f"{db}-shm").st_ino == shm
        with reading(tmp_path) as conn:
            assert conn.execute("SELECT count(*) FROM probe").fetchone() == (5100,)
            assert conn.execute("PRAGMA quick_check").fetchone() == ("ok",)
    finally:
        held.close()


def test_the_kept_descriptors_are_bounded(tmp_path):
    """The header check keeps a descriptor per store file it read (``kept_fd``), the
    last ``KEPT_FDS`` only: a process that opens many stores (the suite) runs out of
    none."""
    before = len(os.listdir("/proc/self/fd"))
    for i in range(store_safety.KEPT_FDS + 8):
        home = tmp_path / str(i)
        home.mkdir()
        db = home / "store.db"
        sqlite3.connect(db).execute("CREATE TABLE t(x)").connection.close()
        assert store_safety.header_problem(db) is None
    grown = len(os.listdir("/proc/self/fd")) - before
    # (earlier tests of this process may have filled the kept set: it grows by at most
    # KEPT_FDS, and holds exactly this test's last KEPT_FDS stores)
    assert grown <= store_safety.KEPT_FDS
    # (a store an earlier test of this process still has open, an idle connection the
    # pool keeps, is never closed: ``_closable``; this test's closed stores fill the rest)
    kept = store_safety._probe_fds
    still_open = {k[1] for k in kept if not store_safety._closable(k)}
    held = {os.fstat(fd).st_ino for fd in kept.values()} - still_open
    order = [os.stat(tmp_path / str(i) / "store.db").st_ino for i in range(store_safety.KEPT_FDS + 8)]
    n = store_safety.KEPT_FDS - len(still_open)
    assert n > 0 and len(kept) == store_safety.KEPT_FDS and held == set(order[-n:])


def test_the_descriptor_of_a_replaced_store_is_closed(tmp_path):
    """A store replaced by a rename (reparse's swap) frees its disk space: the
    descriptor kept of the old file is closed when the path names another."""
    db = tmp_path / "store.db"
    for name in ("store.db", "new.db"):
        sqlite3.connect(tmp_path / name).execute("CREATE TABLE t(x)").connection.close()
    assert store_safety.header_problem(db) is None
    old = os.stat(db).st_ino
    before = len(os.listdir("/proc/self/fd"))
    os.replace(tmp_path / "new.db", db)
    assert store_safety.header_problem(db) is None
    assert len(os.listdir("/proc/self/fd")) == before
    held = {os.fstat(fd).st_ino for fd in store_safety._probe_fds.values()}
    assert old not in held and os.stat(db).st_ino in held


def test_the_bound_never_closes_a_descriptor_under_an_open_store(tmp_path, monkeypatch):
    """A process that holds the store open and then reads more than ``KEPT_FDS`` other
    store files (a ``[backup] keep`` of 20 checked one by one, a suite) keeps the open
    store's descriptors: before session 23 the 17th file closed them, the held
    connection's locks with them, and the next process to close the store deleted its
    ``-wal`` and ``-shm`` under it."""
    monkeypatch.setattr(connection, "REOPEN_SECONDS", 0)
    home = tmp_path / "home"
    sqlite_store.connect(home).close()
    db = home / "store.db"
    _other_process_writes(db, 100)
    held = sqlite_store.connect(home, readonly=True)
    try:
        assert held.execute("SELECT count(*) FROM probe").fetchone() == (100,)
        with store_safety.KEPT_LOCK:
            assert store_safety.header_problem(db) is None and store_safety.live(home)
            mine = {(os.stat(p).st_dev, os.stat(p).st_ino) for p in (db, f"{db}-shm")}
            assert mine <= set(store_safety._probe_fds)
            fds = {k: store_safety._probe_fds[k] for k in mine}
        others = []
        for i in range(store_safety.KEPT_FDS + 8):  # closed stores: theirs are closed, the oldest first
            other = tmp_path / f"b{i}.db"
            sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.close()
            assert store_safety.header_problem(other) is None
            others.append(other)
        kept = store_safety._probe_fds
        assert mine <= set(kept) and all(kept[k] == fd for k, fd in fds.items())
        assert all(os.fstat(fd).st_ino in {k[1] for k in mine} for fd in fds.values())
        assert len(kept) <= store_safety.KEPT_FDS + len(mine)
        # the held connection still holds its locks: other processes that write and close
        # the store leave its -shm in place, and the held connection reads what they wrote
        shm = os.stat(f"{db}-shm").st_ino
        _other_process_writes(db, 1000)
        assert os.stat(f"{db}-shm").st_ino == shm
        assert held.execute("SELECT count(*) FROM probe").fetchone() == (1100,)
        assert held.execute("PRAGMA quick_check").fetchone() == ("ok",)
    finally:
        held.close()
    # closed now: the next reads may close them
    for other in others[:2]:
        os.remove(other)
    for i in range(store_safety.KEPT_FDS + 2):
        other = tmp_path / f"c{i}.db"
        sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.close()
        store_safety.header_problem(other)
    assert not mine & set(store_safety._probe_fds)

"""The pool's idle connections close after ``pool.IDLE_CLOSE`` seconds, so a long-lived
process that has stopped searching (the MCP server, the app) does not keep a store open:
a run that replaces the store's files (``pool.wait_unopened``) then goes ahead instead of
refusing (session 23)."""

from __future__ import annotations

import sqlite3
import time

from ctxkeep.sinks.sqlite import pool, store_safety


def _store(tmp_path):
    home = tmp_path / "store"
    home.mkdir()
    c = sqlite3.connect(home / "store.db", isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE t(x)")
    c.execute("INSERT INTO t VALUES (1)")
    return home, c


def test_an_idle_pooled_connection_closes_and_the_store_is_free(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "IDLE_CLOSE", 0.3)
    pool.close_idle()
    home, own = _store(tmp_path)
    b = pool.borrow(own)
    assert b is not None
    assert b.conn.execute("SELECT x FROM t").fetchone() == (1,)
    own.close()
    pool.give_back(b)
    assert [c for v in pool._idle.values() for c in v] == [b.conn]
    assert store_safety.live(home)  # the pooled connection holds it
    deadline = time.monotonic() + 5
    while pool._idle and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pool._idle
    assert not store_safety.live(home)
    # closed, not merely dropped
    try:
        b.conn.execute("SELECT 1")
        raise AssertionError("the idle connection is still open")
    except sqlite3.ProgrammingError:
        pass
    pool.wait_unopened(home, "test", wait=0)


def test_a_connection_given_back_again_is_kept_its_full_time(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "IDLE_CLOSE", 0.6)
    pool.close_idle()
    home, own = _store(tmp_path)
    b = pool.borrow(own)
    pool.give_back(b)
    time.sleep(0.4)
    b2 = pool.borrow(own)
    assert b2 is not None and b2.conn is b.conn  # reused, not closed
    time.sleep(0.4)  # past the first give-back's IDLE_CLOSE, while borrowed
    assert b2.conn.execute("SELECT x FROM t").fetchone() == (1,)
    pool.give_back(b2)
    time.sleep(0.3)  # young: kept
    assert [c for v in pool._idle.values() for c in v] == [b.conn]
    deadline = time.monotonic() + 5
    while pool._idle and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pool._idle
    own.close()

"""A read-only open that SQLite answers "malformed" once is tried again on a fresh
connection before the store is called damaged (newuser19 F15: the long-running app said
"store.db is damaged" of a store doctor found sound, and showed a blank page until
restarted); a store damaged for good still is, with SQLite's own error as the cause."""

from __future__ import annotations

import sqlite3

import pytest

from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import connection
from ctxkeep.sinks.sqlite.store_safety import StoreDamaged


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setattr(connection, "REOPEN_SECONDS", 0)
    sqlite_store.connect(tmp_path).close()  # a new, sound store
    return tmp_path


def test_one_malformed_open_is_tried_again(home, monkeypatch):
    real = connection._open_readonly
    calls = []

    def flaky(path):
        calls.append(path)
        if len(calls) == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(path)

    monkeypatch.setattr(connection, "_open_readonly", flaky)
    conn = sqlite_store.connect(home, readonly=True)
    try:
        assert conn.execute("SELECT count(*) FROM entries").fetchone() == (0,)
    finally:
        conn.close()
    assert len(calls) == 2


def test_a_store_malformed_every_time_is_damaged_with_sqlite_s_words(home, monkeypatch):
    def broken(path):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(connection, "_open_readonly", broken)
    with pytest.raises(StoreDamaged) as got:
        sqlite_store.connect(home, readonly=True)
    assert str(got.value.__cause__) == "database disk image is malformed"
    assert got.value.why == "database disk image is malformed"

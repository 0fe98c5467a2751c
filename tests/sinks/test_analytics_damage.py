"""A damaged ``analytics.duckdb`` (a block whose checksum does not match: a process
SIGKILLed mid-checkpoint left one in CI's crash trials, DuckDB 2.0.1) is set aside and
rebuilt from SQLite by the next writer, and ``doctor`` calls it damaged, not held."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ctxkeep.sinks import analytics_file
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store

BLOCK = 4096  # DuckDB's headers: 3 blocks of 4 KiB, then 256 KiB blocks


def flip(path: Path, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))


def entries(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM entries").fetchall()[0][0]
    finally:
        con.close()


def sqlite_entries(home: Path) -> int:
    conn = sqlite_store.connect(home, readonly=True)
    try:
        return conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture
def damaged(store) -> Path:
    duck = store / "analytics.duckdb"
    n = entries(duck)
    assert n == sqlite_entries(store) > 0
    flip(duck, 3 * BLOCK + 200)
    with pytest.raises(duckdb.Error) as e:
        entries(duck)
    assert analytics_file.analytics_damage(e.value).startswith("Corrupt database file: computed checksum")
    assert not analytics_file.analytics_held(e.value)  # "block at location" holds "lock"
    return store


def test_sync_sets_a_damaged_file_aside_and_rebuilds_it(damaged, capsys):
    conn = sqlite_store.connect(damaged)
    try:
        r = duckdb_store.sync(conn, damaged)
    finally:
        conn.close()
    n = sqlite_entries(damaged)
    assert r["entries_synced"] == n
    assert entries(damaged / "analytics.duckdb") == n
    aside = list(damaged.glob("analytics.duckdb.damaged-*"))
    assert len(aside) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "analytics.duckdb is damaged (Corrupt database file" in err


def test_truncated_file_is_damaged_too(store):
    duck = store / "analytics.duckdb"
    with open(duck, "r+b") as f:
        f.truncate(3 * BLOCK + 1000)
    with pytest.raises(duckdb.Error) as e:
        entries(duck)
    assert analytics_file.analytics_damage(e.value) is not None
    conn = sqlite_store.connect(store)
    try:
        duckdb_store.sync(conn, store)
    finally:
        conn.close()
    assert entries(duck) == sqlite_entries(store)


def test_doctor_calls_it_damaged_and_repair_rebuilds(damaged):
    from ctxkeep.maintenance import doctor

    found = [f for f in doctor.check(damaged) if f.check == "duckdb"]
    assert [f.status for f in found] == ["damaged"], found
    assert "Corrupt database file" in found[0].detail


def test_a_held_file_is_still_held():
    assert analytics_file.analytics_held(
        duckdb.IOException('IO Error: Could not set lock on file "x": Conflicting lock is held in y (PID 1)')
    )
    assert analytics_file.analytics_damage(duckdb.IOException("IO Error: Could not set lock on file")) is None

"""Machine identity (sinks/machine.py, config ``machine``): DuckDB ``usage.machine`` is
the configured name (else the hostname) and follows a rename; the machine id is a
uuid kept in SQLite ``meta`` and stable across opens."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS_HOME, ingest
from ctxkeep.config import load_config
from ctxkeep.errors import ConfigError
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.machine import identify


def machines_in_duckdb(home: Path) -> dict[str, int]:
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        return dict(con.execute("SELECT machine, count(*) FROM usage GROUP BY ALL").fetchall())
    finally:
        con.close()


def meta(home: Path, key: str):
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


@pytest.fixture
def gemini_home(tmp_path) -> Path:
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    h = tmp_path / "h"
    h.mkdir()
    return h


def test_usage_machine_is_the_hostname_by_default(gemini_home):
    ingest(CORPUS_HOME, gemini_home, ["gemini-cli"])
    conn = sqlite3.connect(f"file:{gemini_home / 'store.db'}?mode=ro", uri=True)
    n = conn.execute("SELECT count(*) FROM usage").fetchone()[0]
    conn.close()
    assert machines_in_duckdb(gemini_home) == {socket.gethostname(): n} and n > 0


def test_usage_machine_is_the_configured_name_and_follows_a_rename(gemini_home):
    (gemini_home / "config.toml").write_text('machine = "laptop"\n')
    ingest(CORPUS_HOME, gemini_home, ["gemini-cli"])
    (n,) = machines_in_duckdb(gemini_home).values()
    assert machines_in_duckdb(gemini_home) == {"laptop": n}
    (gemini_home / "config.toml").write_text('machine = "laptop-2"\n')
    conn = sqlite_store.connect(gemini_home)
    try:
        duckdb_store.sync(conn, gemini_home)
    finally:
        conn.close()
    assert machines_in_duckdb(gemini_home) == {"laptop-2": n}


def test_machine_id_is_a_stable_uuid_per_store(gemini_home, tmp_path):
    ingest(CORPUS_HOME, gemini_home, ["gemini-cli"])
    mid = meta(gemini_home, "machine_id")
    assert len(mid) == 32 and int(mid, 16) >= 0
    conn = sqlite_store.connect(gemini_home)
    try:
        assert identify(gemini_home, conn).id == mid
    finally:
        conn.close()
    assert meta(gemini_home, "machine_id") == mid  # a reopen keeps it
    other = tmp_path / "other"
    sqlite_store.connect(other).close()
    assert meta(other, "machine_id") not in (None, mid)


@pytest.mark.parametrize("name", ["a/b", "k=v", "with space", "ünï", "x" * 65, 42])
def test_a_name_that_cannot_be_a_partition_value_is_a_config_error(tmp_path, name):
    value = f'"{name}"' if isinstance(name, str) else name
    (tmp_path / "config.toml").write_text(f"machine = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    assert "cannot name a lake partition" in str(e.value) and "config.toml" in str(e.value)
    assert "\n" not in str(e.value)


def test_good_names(tmp_path):
    for name in ("laptop", "ws-02.corp", "ci_runner_3", "2024"):
        (tmp_path / "config.toml").write_text(f'machine = "{name}"\n')
        assert load_config(tmp_path).machine == name

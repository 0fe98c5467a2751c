"""The usage sync reads, compares, prices and writes SQLite ``usage`` slice by slice,
each slice in a DuckDB transaction of its own (memory grows with a slice, not with the
table), and ends with the same DuckDB tables as one whole-table pass."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import duckdb
import pytest

from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store

SLICE = 7


def _fresh_sync(home: Path) -> dict:
    (home / duckdb_store.DB_NAME).unlink(missing_ok=True)
    sq = sqlite_store.connect(home, readonly=True)
    try:
        return duckdb_store.sync(sq, home)
    finally:
        sq.close()


def _tables(home: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in ("usage", "usage_buckets", "session_text", "tool_errors")
        }
    finally:
        con.close()


def _sqlite_usage(home: Path) -> int:
    with closing(sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)) as c:
        return c.execute("SELECT count(*) FROM usage").fetchone()[0]


@pytest.fixture
def two_stores(store, tmp_path) -> tuple[Path, Path]:
    other = tmp_path / "other"
    shutil.copytree(store, other)
    return store, other


def test_sliced_sync_equals_one_slice(two_stores, monkeypatch):
    whole, sliced = two_stores
    rows = _sqlite_usage(whole)
    assert rows > 3 * SLICE  # several slices, and a last one that is not full
    monkeypatch.setattr(duckdb_store, "USAGE_SLICE_ROWS", rows + 1)
    r1 = _fresh_sync(whole)
    monkeypatch.setattr(duckdb_store, "USAGE_SLICE_ROWS", SLICE)
    r2 = _fresh_sync(sliced)
    assert r1["usage_rows"] == r2["usage_rows"] == rows
    assert r1["usage_changed"] == r2["usage_changed"] == rows
    assert r1["unpriced_models"] == r2["unpriced_models"]
    a, b = _tables(whole), _tables(sliced)
    assert len(a["usage"]) == rows
    # the corpus's Codex 0.34 rows are priced as the version's assumed model in a slice too
    assert any(r[-6] == "assumed" for r in b["usage"])
    assert a == b
    con = duckdb.connect(str(sliced / duckdb_store.DB_NAME), read_only=True)
    try:
        assert duckdb_store.buckets_fresh(con)
    finally:
        con.close()


def test_a_sync_failing_half_way_keeps_whole_slices_and_the_next_completes(two_stores, monkeypatch):
    ref, home = two_stores
    rows = _sqlite_usage(home)
    _fresh_sync(ref)
    monkeypatch.setattr(duckdb_store, "USAGE_SLICE_ROWS", SLICE)
    real = duckdb_store._upsert_slice
    calls = []

    def failing(*a):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return real(*a)

    monkeypatch.setattr(duckdb_store, "_upsert_slice", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        _fresh_sync(home)
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        # the two slices before the failure were committed, the third rolled back
        assert con.execute("SELECT count(*) FROM usage").fetchall()[0][0] == 2 * SLICE
        assert not duckdb_store.buckets_fresh(con)  # reports read ``usage`` until a sync completes
    finally:
        con.close()
    monkeypatch.setattr(duckdb_store, "_upsert_slice", real)
    sq = sqlite_store.connect(home, readonly=True)
    try:
        r = duckdb_store.sync(sq, home)
    finally:
        sq.close()
    # the failed first sync never moved its price mark: every row is priced again
    assert r["usage_changed"] == rows
    assert _tables(home)["usage"] == _tables(ref)["usage"]
    assert _tables(home)["usage_buckets"] == _tables(ref)["usage_buckets"]

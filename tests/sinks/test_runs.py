"""Run records (``sinks.sqlite.runs.recorded_run``): one ``runs`` row per run, finished
``ok``, ``failed`` or ``interrupted`` with the summary as it stood when the block ended."""

from __future__ import annotations

import json
import time

import pytest

from ctxkeep.sinks import sqlite as sqlite_store

COLS = "flow, status, files, bytes, entries_new, quarantined, seconds, detail, finished_at"


def _runs(home):
    conn = sqlite_store.connect(home, readonly=True)
    try:
        rows = conn.execute(f"SELECT {COLS} FROM runs ORDER BY run_id").fetchall()
        return [dict(zip(COLS.split(", "), r, strict=True)) for r in rows]
    finally:
        conn.close()


def test_an_ok_run_is_recorded_with_its_summary(store_home):
    conn = sqlite_store.connect(store_home)
    t0 = time.perf_counter() - 2.0  # the run began before the block (lock wait, plan)
    with sqlite_store.recorded_run(conn, "ingest", t0=t0) as run:
        assert run.run_id is not None
        row = conn.execute("SELECT status, finished_at FROM runs WHERE run_id=?", (run.run_id,)).fetchone()
        assert row == ("running", None)
        run.summary = {"files": 3, "bytes": 4096, "entries_new": 7, "quarantined": 1, "per_agent": {"x": 7}}
    conn.close()
    assert run.status == "ok" and 2.0 <= run.seconds < 60
    [r] = _runs(store_home)
    assert (r["flow"], r["status"], r["files"], r["bytes"], r["entries_new"], r["quarantined"]) == (
        "ingest",
        "ok",
        3,
        4096,
        7,
        1,
    )
    assert r["seconds"] == run.seconds and r["finished_at"]
    assert json.loads(r["detail"]) == {
        "files": 3,
        "bytes": 4096,
        "entries_new": 7,
        "quarantined": 1,
        "per_agent": {"x": 7},
        "seconds": run.seconds,
    }


def test_a_failed_run_keeps_the_figures_so_far(store_home):
    conn = sqlite_store.connect(store_home)
    figures = {"files": 0}
    with (
        pytest.raises(ValueError, match="boom"),
        sqlite_store.recorded_run(conn, "retention", t0=time.perf_counter()) as run,
    ):
        run.summary = lambda: dict(figures)  # read when the block ends
        figures["files"] = 2
        raise ValueError("boom")
    conn.close()
    assert run.status == "failed"
    [r] = _runs(store_home)
    assert (r["flow"], r["status"], r["files"]) == ("retention", "failed", 2)


def test_an_interrupted_run_says_so(store_home):
    conn = sqlite_store.connect(store_home)
    with (
        pytest.raises(KeyboardInterrupt),
        sqlite_store.recorded_run(conn, "compress", t0=time.perf_counter()),
    ):
        raise KeyboardInterrupt
    conn.close()
    assert [(r["flow"], r["status"]) for r in _runs(store_home)] == [("compress", "interrupted")]


def test_a_home_is_opened_for_the_start_and_the_end(store_home):
    with sqlite_store.recorded_run(store_home, "ingest", t0=time.perf_counter()) as run:
        assert [r["status"] for r in _runs(store_home)] == ["running"]
        run.summary = {"entries_new": 5}
    [r] = _runs(store_home)
    assert (r["status"], r["entries_new"]) == ("ok", 5)


def test_no_store_records_nothing_but_times_the_block(store_home):
    with sqlite_store.recorded_run(None, "compress", t0=time.perf_counter() - 1.0) as run:
        run.summary = {"files": 1}
    assert run.run_id is None and run.status == "ok" and run.seconds >= 1.0
    assert not (store_home / "store.db").exists()


def test_an_untimed_run_stores_no_seconds(store_home):
    conn = sqlite_store.connect(store_home)
    with sqlite_store.recorded_run(conn, "purge") as run:
        run.summary = {"scope": "session", "entries_new": 0}
    conn.close()
    [r] = _runs(store_home)
    assert run.seconds is None and r["seconds"] is None
    assert json.loads(r["detail"]) == {"scope": "session", "entries_new": 0}

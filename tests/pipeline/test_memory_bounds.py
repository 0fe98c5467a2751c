"""What an ingest keeps in memory is bounded, whatever the size of the run (issue 26,
target 2: peak RSS of a 10 GB ingest ≤ 1 GB)."""

from __future__ import annotations

import threading
import time

from ctxkeep.pipeline.analytics_sync import AnalyticsSyncer
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store


def _until(cond, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_analytics_thread_holds_at_most_ahead_groups(tmp_path, monkeypatch):
    """DuckDB behind (here: its open held up): the writer's ``on_commit`` waits once
    ``ahead`` committed groups wait for the analytics thread, instead of queueing
    every group's entries; once DuckDB moves, every group is synced."""
    home = tmp_path / "store"
    sqlite_store.connect(home).close()
    gate = threading.Event()
    real = duckdb_store.connect

    def held(h, **kw):
        gate.wait(60)
        return real(h, **kw)

    monkeypatch.setattr(duckdb_store, "connect", held)
    syncer = AnalyticsSyncer(home, ahead=2)
    writer = threading.Thread(target=lambda: [syncer.on_commit(0) for _ in range(6)])
    writer.start()
    try:
        # the thread took the first group (held in connect), two wait, the writer waits
        assert _until(lambda: syncer._q.qsize() == 2)
        time.sleep(0.3)
        assert writer.is_alive() and syncer._q.qsize() == 2
    finally:
        gate.set()
    writer.join(60)
    assert not writer.is_alive()
    assert syncer.finish() == "analytics: 0 entries synced"

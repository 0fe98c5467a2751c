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


def _corpus_ingest(home, monkeypatch, cache_at_read: list | None = None, **kw) -> dict:
    """The corpus in small groups (``test_writer_txn``'s), several to a transaction;
    ``cache_at_read`` gets the ingest connection's ``PRAGMA cache_size`` once the last
    group is handed to the writer (``on_read``) and again after the ingest."""
    import pytest

    from conftest import CORPUS_HOME
    from ctxkeep.pipeline import engine
    from ctxkeep.pipeline import writer as writer_mod
    from ctxkeep.pipeline.plan import plan
    from ctxkeep.sources.contract import DiscoveryContext

    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    monkeypatch.setattr(writer_mod, "TXN_ROWS", 1500)
    conn = sqlite_store.connect(home)

    def cache() -> None:
        assert cache_at_read is not None
        cache_at_read.append(conn.execute("PRAGMA cache_size").fetchone()[0])

    try:
        p = plan(home, conn, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
        r = engine.ingest_files(
            conn,
            p.todo,
            sqlite_store.tombstoned(conn),
            group_bytes=128 * 1024,
            on_read=None if cache_at_read is None else cache,
            **kw,
        )
        if cache_at_read is not None:
            cache()
        return r
    finally:
        conn.close()


def test_the_open_transaction_holds_its_groups_without_their_texts(tmp_path, monkeypatch):
    """The groups waiting in the writer's open transaction for its COMMIT (up to
    ``TXN_BYTES`` of them) keep only what their accounting and ``on_commit`` read: the
    new entries' ``STORED_COLUMNS``, no texts, no watermark states, no vault records."""
    from ctxkeep.pipeline import writer as writer_mod
    from ctxkeep.schema import STORED_COLUMNS

    held: list[tuple] = []
    real = writer_mod.Writer._commit

    def commit(self, conn):
        for g, _n, _first in self.pending:
            if g.frames is not None:
                held.append((sorted(g.frames), g.frames["entries"].columns, g.watermarks, g.vault_group))
        real(self, conn)

    monkeypatch.setattr(writer_mod.Writer, "_commit", commit)
    got: list[list[str]] = []
    r = _corpus_ingest(tmp_path / "store", monkeypatch, on_commit=lambda n, first, e: got.append(e.columns))
    assert r["entries_new"] == 3890
    assert len(held) >= 10
    assert all(keys == ["entries"] and cols == STORED_COLUMNS for keys, cols, _, _ in held), held[0][:2]
    assert "text" not in STORED_COLUMNS
    assert all(wm == [] and vg is None for _, _, wm, vg in held)
    assert len(got) >= 10 and all(cols == STORED_COLUMNS for cols in got)


def test_the_ingest_connection_reads_beside_the_writer_with_a_small_page_cache(tmp_path, monkeypatch):
    """While the writer thread stores the groups, the ingest's own connection only
    reads (the dedup lookups), with ``READ_CACHE_KIB`` of page cache: at the writer's
    64 MiB it grew with the store between two COMMITs (1 -> 42 MiB over a 2 GB
    ingest). Its writes after (the FTS merge) get ``CACHE_KIB`` back; without a writer
    thread it keeps ``CACHE_KIB`` throughout."""
    from ctxkeep.sinks.sqlite import connection

    assert connection.READ_CACHE_KIB < connection.CACHE_KIB
    for writer, during in ((True, connection.READ_CACHE_KIB), (False, connection.CACHE_KIB)):
        seen: list[int] = []
        r = _corpus_ingest(tmp_path / f"store-{writer}", monkeypatch, cache_at_read=seen, writer=writer)
        assert r["entries_new"] == 3890
        assert seen == [-during, -connection.CACHE_KIB], (writer, seen)

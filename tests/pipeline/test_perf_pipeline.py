"""The ingest speed-ups keep results: the read-ahead thread yields exactly what the
sequential reader yields (same order, errors raised, stops with its consumer), and the
store keeps only the entry indexes its queries need."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import readahead
from ctxkeep.pipeline.plan import plan
from ctxkeep.pipeline.readahead import ReadItem
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext


def _todo():
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    conn = sqlite3.connect(":memory:")
    # a plan against an empty watermark table: every corpus file is to be read
    conn.execute(
        "CREATE TABLE watermarks(path, agent, dev, ino, size, mtime_ns, offset, head_len, "
        "head_hash, parser_version, state)"
    )
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as h:
        p = plan(
            Path(h), conn, agents=["claude-code", "codex"], ctx=DiscoveryContext(home=CORPUS_HOME, env={})
        )
    return p.todo


def _sig(items):
    return [
        (
            str(i.file.path),
            None
            if i.batch is None
            else (
                i.batch.bytes_read,
                i.batch.lines,
                len(i.batch.entries),
                [e.get("record_id") for e in i.batch.entries][:5],
            ),
            i.read,
        )
        for i in items
    ]


def test_read_ahead_yields_what_the_sequential_reader_yields():
    todo = _todo()
    seq = _sig(readahead.read_files(todo))
    ahead = _sig(readahead.read_ahead(todo, depth=2))
    assert ahead == seq
    # one closing item per file, all read (none vanished)
    assert sum(1 for _, b, got in seq if b is None and got) == len(todo)
    assert sum(b[2] for _, b, _ in seq if b is not None) > 1000
    # the corpus's 16 Claude Code + Codex files and the sub-agent's .meta.json (a
    # sidecar) each fit one batch: batch, end item
    assert len(todo) == 17 and len(seq) == 2 * len(todo)


def test_read_ahead_raises_the_readers_error_after_the_items_before_it(monkeypatch):
    def boom(todo):
        yield ReadItem("a", None, True)
        yield ReadItem("b", None, True)
        raise ValueError("bad file")

    monkeypatch.setattr(readahead, "read_files", boom)
    got = []
    with pytest.raises(ValueError, match="bad file"):
        for item in readahead.read_ahead([], depth=1):
            got.append(item.file)
    assert got == ["a", "b"]


def test_read_ahead_stops_its_thread_when_the_consumer_stops(monkeypatch):
    def endless(todo):
        i = 0
        while True:
            yield ReadItem(i, None, True)
            i += 1

    monkeypatch.setattr(readahead, "read_files", endless)
    gen = readahead.read_ahead([], depth=3)
    assert [next(gen).file for _ in range(5)] == [0, 1, 2, 3, 4]
    gen.close()
    assert not any(t.name == "ctxkeep-read-ahead" and t.is_alive() for t in threading.enumerate())


def test_closing_a_read_ahead_stops_a_source_blocked_on_its_process(monkeypatch):
    """``close`` calls the stop the source registered (``stop_with_thread``: a reader
    process killed), so it does not wait for the source's next item: a reader of a 1 GB
    session took seconds to make its next chunk after Ctrl-C (newuser20 F8). Without the
    call the source below blocks for good and ``close`` with it."""
    stopped = threading.Event()

    def blocked(todo):
        readahead.stop_with_thread(stopped.set)
        try:
            yield ReadItem(0, None, True)
            stopped.wait()  # the pipe waiting for the process's next chunk
            yield ReadItem(1, None, True)
        finally:
            readahead.stop_with_thread(None)

    monkeypatch.setattr(readahead, "read_files", blocked)
    monkeypatch.setattr(readahead, "READ_CHUNK_ITEMS", 1)  # the first item handed over alone
    gen = readahead.read_ahead([], depth=3)
    assert next(gen).file == 0
    closer = threading.Thread(target=gen.close, daemon=True)
    closer.start()
    closer.join(60)  # (a bound on a hang: without the stop, the source waits for ever)
    assert not closer.is_alive() and stopped.is_set()
    assert readahead._STOPS == {}  # forgotten once its thread ended


def _indexes(conn) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='entry_rows' AND sql IS NOT NULL"
        )
    }


def test_entry_indexes_are_the_needed_ones_also_on_an_older_store(store_home):
    conn = sqlite_store.connect(store_home)
    assert _indexes(conn) == {"entries_session", "entries_content", "entries_source"}
    assert conn.execute("PRAGMA cache_size").fetchone()[0] == -sqlite_store.CACHE_KIB
    # a store made before: its two unneeded indexes are dropped at the next open
    conn.execute("CREATE INDEX entries_project ON entry_rows(project_id)")
    conn.execute("CREATE INDEX entries_agent_kind ON entry_rows(agent, kind)")
    conn.close()
    conn = sqlite_store.connect(store_home)
    assert _indexes(conn) == {"entries_session", "entries_content", "entries_source"}
    conn.close()

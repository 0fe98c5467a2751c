"""The ingest speed-ups keep results: the read-ahead thread yields exactly what the
sequential reader yields (same order, errors raised, stops with its consumer), and the
store keeps only the entry indexes its queries need."""
from __future__ import annotations

import sqlite3
import threading

import pytest

from ctxkeep.pipeline import engine as pipeline
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext

from conftest import CORPUS_HOME


def _todo():
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    conn = sqlite3.connect(":memory:")
    # a plan against an empty watermark table: every corpus file is to be read
    conn.execute("CREATE TABLE watermarks(path, agent, dev, ino, size, mtime_ns, offset, head_len, "
                 "head_hash, parser_version, state)")
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as h:
        p = pipeline.plan(Path(h), conn, agents=["claude-code", "codex"],
                          ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
    return p.todo


def _sig(items):
    return [(str(f.path), None if b is None else (b.bytes_read, b.lines, len(b.entries),
                                                   [e.get("record_id") for e in b.entries][:5]), got)
            for f, b, got in items]


def test_read_ahead_yields_what_the_sequential_reader_yields():
    todo = _todo()
    seq = _sig(pipeline._read_files(todo))
    ahead = _sig(pipeline._read_ahead(todo, depth=2))
    assert ahead == seq
    # one closing item per file, all read (none vanished)
    assert sum(1 for _, b, got in seq if b is None and got) == len(todo)
    assert sum(b[2] for _, b, _ in seq if b is not None) > 1000
    # the corpus's 16 Claude Code + Codex files each fit one batch: batch, end item
    assert len(todo) == 16 and len(seq) == 2 * len(todo)


def test_read_ahead_raises_the_readers_error_after_the_items_before_it(monkeypatch):
    def boom(todo):
        yield "a", None, True
        yield "b", None, True
        raise ValueError("bad file")

    monkeypatch.setattr(pipeline, "_read_files", boom)
    got = []
    with pytest.raises(ValueError, match="bad file"):
        for item in pipeline._read_ahead([], depth=1):
            got.append(item[0])
    assert got == ["a", "b"]


def test_read_ahead_stops_its_thread_when_the_consumer_stops(monkeypatch):
    def endless(todo):
        i = 0
        while True:
            yield i, None, True
            i += 1

    monkeypatch.setattr(pipeline, "_read_files", endless)
    gen = pipeline._read_ahead([], depth=3)
    assert [next(gen)[0] for _ in range(5)] == [0, 1, 2, 3, 4]
    gen.close()
    assert not any(t.name == "ctxkeep-read-ahead" and t.is_alive() for t in threading.enumerate())


def _indexes(conn) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='entries' AND sql IS NOT NULL")}


def test_entry_indexes_are_the_needed_ones_also_on_an_older_store(store_home):
    conn = sqlite_store.connect(store_home)
    assert _indexes(conn) == {"entries_session", "entries_content", "entries_source"}
    assert conn.execute("PRAGMA cache_size").fetchone()[0] == -sqlite_store.CACHE_KIB
    # a store made before: its two unneeded indexes are dropped at the next open
    conn.execute("CREATE INDEX entries_project ON entries(project_dir)")
    conn.execute("CREATE INDEX entries_agent_kind ON entries(agent, kind)")
    conn.close()
    conn = sqlite_store.connect(store_home)
    assert _indexes(conn) == {"entries_session", "entries_content", "entries_source"}
    conn.close()

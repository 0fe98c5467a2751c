"""Lists run ahead on a second read-only connection (``query.search.ahead``): the same
hits as one connection, on the corpus store, with each list taken from the thread at
least once; the connection is reused, not borrowed inside a transaction, and a failure
or a wrong guess in the thread changes nothing."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ctxkeep.query.search import Filters, ahead, search
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import pool

#: queries of every list the thread runs: grams (camelCase, CJK, CJK with words),
#: symbols, the phrase ranked on its own (a word list of 50+ rows), any (a short word
#: list), with facet filters and a time filter (no guess: grams only)
QUERIES = [
    ("useTodos", {}),
    ("QTableWidgetItem", {}),
    ("调研", {}),
    ("gemini 处理", {}),
    ("c++ compiler", {}),
    ("exit code", {}),
    ("the file", {}),
    ("error test", {"kind": "message"}),
    ("file TodoWrite", {}),
    ("embedding /Users/chip/dev/ai-music/diverse_musical_ai.py", {"role": "user"}),
    ("constitution useTodos", {"agent": "claude-code", "kind": "tool_call"}),
    ("timeline filtering", {}),
    ("docs update", {"since": "2025-09-01"}),
    ("useTodos", {"since": "2025-09-01", "until": "2025-12-01"}),
    ("printer gcode", {}),
    ("qzxvkjwplorbfemtu useTodos", {}),
]


def _hits(res) -> str:
    """Everything a search returns, as one string (hits with every field, note,
    suggestions, budget figures)."""
    return json.dumps(
        [
            res.query,
            res.note,
            list(res.suggestions),
            res.used_tokens,
            res.omitted,
            [vars(h) for h in res.hits],
        ],
        default=str,
        sort_keys=True,
    )


@pytest.fixture(scope="module")
def conn(corpus_store):
    home, _ = corpus_store
    c = sqlite_store.connect(home, readonly=True, mmap=True)
    yield c
    c.close()
    pool.close_idle()


@pytest.fixture
def taken(monkeypatch):
    """The names of the lists a search took from the thread."""
    names: list[str] = []
    take = ahead.Ahead.take

    def spy(self, name, match):
        got = take(self, name, match)
        if got is not None:
            names.append(name)
        return got

    monkeypatch.setattr(ahead.Ahead, "take", spy)
    return names


def test_parallel_lists_give_the_same_hits(conn, taken):
    for q, f in QUERIES:
        n = len(taken)
        one = _hits(search(conn, q, filters=Filters(**f), limit=10, budget_tokens=4000, parallel=False))
        assert len(taken) == n  # parallel=False: nothing from the thread
        two = _hits(search(conn, q, filters=Filters(**f), limit=10, budget_tokens=4000, parallel=True))
        assert two == one, (q, f)
        taken.append(f"-- {q}")
    got = {n for n in taken if not n.startswith("-- ")}
    # every kind of list came from the second connection at least once
    assert {"grams", "grams_all", "symbols", "phrase", "any"} <= got, taken


def test_the_second_connection_is_reused_and_reads_the_same_file(conn):
    pool.close_idle()
    search(conn, "useTodos", parallel=True)
    assert sum(len(v) for v in pool._idle.values()) == 1
    (key, [kept]), *_ = pool._idle.items()
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    assert key[0] == path and kept.execute("PRAGMA database_list").fetchone()[2] == path
    # read-only, and mapped as the caller's connection is
    with pytest.raises(sqlite3.OperationalError):
        kept.execute("CREATE TABLE nope(x)")
    assert kept.execute("PRAGMA mmap_size").fetchone()[0] == conn.execute("PRAGMA mmap_size").fetchone()[0]
    search(conn, "QTableWidgetItem", parallel=True)
    assert [c for v in pool._idle.values() for c in v] == [kept]


def test_no_second_connection_inside_a_transaction(corpus_store, tmp_path, taken):
    """A writer's uncommitted rows are visible to its own connection only: a search
    inside its transaction runs every list on it."""
    import shutil

    home = tmp_path / "copy"
    shutil.copytree(corpus_store[0], home)
    w = sqlite_store.connect(home)
    try:
        assert pool.borrow(w) is not None
        w.execute("BEGIN")
        assert pool.borrow(w) is None
        before = _hits(search(w, "useTodos", parallel=False))
        assert _hits(search(w, "useTodos", parallel=True)) == before
        assert not taken
        w.execute("ROLLBACK")
    finally:
        w.close()
        pool.close_idle()
    mem = sqlite3.connect(":memory:")
    assert pool.borrow(mem) is None


def test_a_failure_in_the_thread_falls_back_to_the_callers_connection(conn, monkeypatch, taken):
    want = _hits(search(conn, "useTodos file", parallel=False))
    real = ahead.retrieve.fts_ids
    calls = []

    def thread_only(c, *a, **k):  # the thread's statements fail, the caller's do not
        if c is not conn:
            calls.append(1)
            raise sqlite3.OperationalError("disk I/O error")
        return real(c, *a, **k)

    monkeypatch.setattr(ahead.retrieve, "fts_ids", thread_only)
    assert _hits(search(conn, "useTodos file", parallel=True)) == want
    assert calls and not taken


def test_a_dropped_list_is_interrupted_and_its_connection_not_reused(conn):
    """``drop`` of the list the thread is running interrupts it; the connection is
    closed on ``close``, not given back."""
    import threading

    pool.close_idle()
    started = threading.Event()
    release = threading.Event()

    def slow(c):
        started.set()
        release.wait(5)
        return True

    job = ahead.Job("phrase", "fts_words", '"exit code"', guess=slow)
    a = ahead.Ahead([job], Filters(), 50, {}, False)
    assert a.start(conn)
    assert started.wait(5)
    b = a.borrowed
    a.drop("phrase")
    release.set()
    a.close()
    assert a.interrupted and not pool._idle
    assert job.rows is None  # dropped while its guess ran: the list itself never ran
    with pytest.raises(sqlite3.ProgrammingError):
        b.conn.execute("SELECT 1")


def test_a_forked_child_never_uses_its_parents_connections(conn):
    import os

    pool.close_idle()
    search(conn, "useTodos", parallel=True)
    kept = [c for v in pool._idle.values() for c in v]
    assert kept
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing idle to borrow (a search opens its own)
        ok = not pool._idle and pool._forked == kept
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"1"
    os.waitpid(pid, 0)
    assert [c for v in pool._idle.values() for c in v] == kept


def test_by_default_only_when_a_core_is_free(conn, monkeypatch, taken):
    """``parallel=None`` runs lists ahead when the load average leaves a core free, and
    on one connection when it does not (or the process may use one core)."""
    monkeypatch.setattr(ahead.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(ahead.os, "getloadavg", lambda: (0.4, 0.5, 0.5))
    assert ahead.core_free()
    search(conn, "useTodos")
    assert taken == ["grams"]
    monkeypatch.setattr(ahead.os, "getloadavg", lambda: (2.3, 1.0, 1.0))
    assert not ahead.core_free()
    search(conn, "useTodos")
    assert taken == ["grams"]
    monkeypatch.setattr(ahead.os, "getloadavg", lambda: (0.4, 0.5, 0.5))
    monkeypatch.setattr(ahead.os, "sched_getaffinity", lambda pid: {0})
    assert not ahead.core_free()

    def no_load():
        raise OSError("no load average")

    monkeypatch.setattr(ahead.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(ahead.os, "getloadavg", no_load)
    assert not ahead.core_free()

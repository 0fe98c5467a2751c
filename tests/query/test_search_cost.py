"""What a search costs in SQLite, counted rather than timed: a MATCH without any
match is walked once and never ranked (no BM25 pass, whose per-phrase document counts
scan each posting list again), and the read-only connection maps the store."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxkeep.query.search import Filters, search
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite.connection import READ_MMAP_BYTES


def _statements(conn, fn) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        conn.set_trace_callback(None)
    return seen


#: a word no corpus text holds (checked below), with a filter and without
NOWHERE = "qzxvkjwplorbfemtu"


@pytest.mark.parametrize("filters", [Filters(), Filters(kind="message"), Filters(since="2025-01-01")])
def test_a_match_without_matches_is_never_ranked(corpus_conn, filters):
    n = corpus_conn.execute("SELECT count(*) FROM fts_words WHERE fts_words MATCH ?", (f'"{NOWHERE}"',))
    assert n.fetchone()[0] == 0
    res = {}
    sql = _statements(corpus_conn, lambda: res.update(r=search(corpus_conn, NOWHERE, filters=filters)))
    assert res["r"].hits == []
    fts = [
        s for s in sql if " MATCH " in s and "fts_vocab" not in s and "count(*) FROM (SELECT rowid" not in s
    ]
    assert fts, "the lists ran no MATCH at all"
    assert not [s for s in fts if "bm25(" in s], "a list without matches was ranked"
    # one statement per list (the window: its count, or its ids when filtered), not a
    # second walk of the same MATCH
    window = [s for s in fts if "count(*), min(rowid)" in s or "ORDER BY rowid DESC LIMIT" in s]
    assert len(window) == len(fts)
    assert len({s.split(" MATCH ")[1] for s in fts}) == len(fts)


def test_a_match_with_matches_is_still_ranked(corpus_conn):
    sql = _statements(corpus_conn, lambda: search(corpus_conn, "error"))
    assert [s for s in sql if "bm25(fts_words" in s]


def test_readonly_connection_maps_the_store(corpus_store):
    home, _ = corpus_store
    ro = sqlite_store.connect(home, readonly=True)
    rw = sqlite_store.connect(home)
    try:
        assert ro.execute("PRAGMA mmap_size").fetchone()[0] == min(READ_MMAP_BYTES, 0x7FFF0000)
        assert rw.execute("PRAGMA mmap_size").fetchone()[0] == 0  # writers unchanged
    finally:
        ro.close()
        rw.close()


def test_a_search_process_imports_no_writer_module():
    """``ctxkeep search`` imports the store's connection and lookups, not the modules
    only writers use (names of ``ctxkeep.sinks.sqlite`` load on first use), and every
    name the package lists still resolves."""
    code = (
        "import sys\n"
        "from ctxkeep.cli import core\n"
        "import ctxkeep.query.search\n"
        "from ctxkeep.sinks import sqlite as s\n"
        "s.connect, s.schema_version\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('ctxkeep.sinks.sqlite.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "ctxkeep.sinks.sqlite.connection" in out and "ctxkeep.sinks.sqlite.lookup" in out
    for writer in ("load", "status", "media", "runs", "sync_marks"):
        assert f"ctxkeep.sinks.sqlite.{writer}" not in out
    for name in sqlite_store.__all__:
        assert getattr(sqlite_store, name) is not None
    with pytest.raises(AttributeError):
        sqlite_store.no_such_name  # noqa: B018

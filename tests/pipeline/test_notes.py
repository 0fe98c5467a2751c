"""Notes (pipeline.notes, MCP ctx_index): index a text or a file under a label; the
same label again replaces it; the file is never modified."""

from __future__ import annotations

import hashlib

import pytest

from conftest import corpus
from ctxkeep.errors import UsageError
from ctxkeep.pipeline.notes import index_note
from ctxkeep.query.search import Filters, search
from ctxkeep.sinks import sqlite as sqlite_store


@pytest.fixture
def conn(store_home):
    c = sqlite_store.connect(store_home)
    yield c
    c.close()


def _counts(c):
    return [
        c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("entries", "contents", "chunks", "fts_grams")
    ]


def test_index_text_and_replace(conn):
    r1 = index_note(conn, "design", text="We chose SQLite FTS5 over Elasticsearch because 字段 matter.")
    assert r1["replaced"] == 0 and r1["chunks"] == 1 and r1["token_estimate"] > 5
    hits = search(conn, "Elasticsearch", filters=Filters(agent="note")).hits
    assert [(h.session_id, h.entry_id) for h in hits] == [("design", r1["entry_id"])]
    r2 = index_note(conn, "design", text="Decision reversed: we use Tantivy now.")
    assert r2["replaced"] == 1 and r2["entry_id"] != r1["entry_id"]
    assert search(conn, "Elasticsearch").hits == [] and search(conn, "字段").hits == []
    assert [h.entry_id for h in search(conn, "Tantivy").hits] == [r2["entry_id"]]
    assert _counts(conn) == [1, 1, 1, 0]
    # the same text again: same entry, nothing duplicated
    r3 = index_note(conn, "design", text="Decision reversed: we use Tantivy now.")
    assert r3["entry_id"] == r2["entry_id"] and r3["replaced"] == 0 and _counts(conn) == [1, 1, 1, 0]


def test_text_shared_with_another_label_survives_replace(conn):
    index_note(conn, "a", text="shared words")
    index_note(conn, "b", text="shared words")
    index_note(conn, "a", text="other words")
    assert {h.session_id for h in search(conn, "shared").hits} == {"b"}


def test_index_corpus_file_read_only(conn):
    p = corpus("code/zen-mcp-server/.aider.chat.history.md")
    before = hashlib.sha256(p.read_bytes()).hexdigest()
    r = index_note(conn, "aider", path=p)
    assert r["bytes"] == p.stat().st_size == 6252 and r["chunks"] == 2
    assert hashlib.sha256(p.read_bytes()).hexdigest() == before
    h = search(conn, "调研").hits
    assert h[0].entry_id == r["entry_id"] and "请你调研一下" in h[0].snippet
    row = conn.execute("SELECT agent, kind, role, project_dir, source_path FROM entries").fetchone()
    assert row == ("note", "message", "user", str(p.parent), str(p))


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"text": "x", "path": "/etc/hosts"}, "exactly one of text and path"),
        ({}, "exactly one of text and path"),
        ({"text": "   "}, "the note is empty"),
        ({"path": "/no/such/file"}, "no such file"),
    ],
)
def test_bad_requests(conn, kw, msg):
    with pytest.raises(UsageError, match=msg):
        index_note(conn, "lbl", **kw)
    with pytest.raises(UsageError, match="label"):
        index_note(conn, " ", text="x")

"""``sinks.sqlite.load`` binds None through a ``NoneType`` adapter (the sqlite3 module's
adapter search is skipped): None is still stored as SQL NULL, by every connection, and
the loaded entries keep NULL where the batch held None."""

from __future__ import annotations

import sqlite3

from ctxkeep.pipeline.transform import transform_batch
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import load
from ctxkeep.sources.contract import Batch


def test_adapter_registered_and_none_binds_null():
    assert (type(None), sqlite3.PrepareProtocol) in sqlite3.adapters
    assert load.sqlite3 is sqlite3
    conn = sqlite3.connect(":memory:")
    row = conn.execute("SELECT typeof(?), ? IS NULL, coalesce(?, 'was null')", (None, None, None)).fetchone()
    assert row == ("null", 1, "was null")
    conn.execute("CREATE TABLE t(a TEXT, b INTEGER NOT NULL DEFAULT 7, c)")
    conn.executemany("INSERT INTO t(a, c) VALUES(?, ?)", [(None, None), ("x", None)])
    assert conn.execute("SELECT typeof(a), b, typeof(c) FROM t ORDER BY rowid").fetchall() == [
        ("null", 7, "null"),
        ("text", 7, "null"),
    ]


def test_loaded_entries_keep_null(tmp_path):
    entries = [
        {
            "agent": "claude-code",
            "session_id": "s1",
            "native_id": "n1",
            "part": 0,
            "project_dir": None,
            "ts": "2025-06-01T10:00:00Z",
            "role": "user",
            "kind": "message",
            "tool_name": None,
            "text": "hello there",
            "record_id": "r1",
            "source_path": "/x.jsonl",
            "source_offset": 0,
        }
    ]
    conn = sqlite_store.connect(tmp_path)
    frames = transform_batch(conn, Batch(entries, [], None), {})
    assert sqlite_store.load_batch(conn, quarantine=[], **frames) == 1
    row = conn.execute(
        "SELECT typeof(project_id), typeof(tool_name), typeof(model), typeof(input_tokens), "
        "typeof(parent_session_id), typeof(session_id) FROM entry_rows"
    ).fetchone()
    assert row == ("null", "null", "null", "null", "null", "text")

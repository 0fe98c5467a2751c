"""Zed: a generated threads.db (tests/fixtures/zed/make_fixtures.py; format facts in
ctxkeep/sources/zed.py): a zstd 0.3.0 thread (thinking, a tool call with its result,
usage per request, folder as project, summary as title) and a plain 0.2.0 one; a
thread rewritten by Zed read again and only its new message added."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import zstandard

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "zed" / "home"


def test_both_thread_versions(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(HOME, home)  # a reader may create -wal/-shm beside the database
    store = tmp_path / "store"
    s = ingest(home, store, agents="zed")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "zed") == {
        "user/message": 2,
        "assistant/message": 3,
        "assistant/thinking": 1,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/meta": 3,  # two titles, one usage row
    }
    rows = q(
        store,
        f"SELECT session_id, role, kind, tool_name, native_id, project_dir, {ENTRY_TEXT} FROM entries e "
        "WHERE agent='zed' AND session_id='th-new' AND kind <> 'meta' ORDER BY rowid",
    )
    assert rows == [
        ("th-new", "user", "message", None, None, "/work/demo", "why does test_sum fail?"),
        ("th-new", "assistant", "thinking", None, None, "/work/demo", "Read the test first."),
        ("th-new", "assistant", "message", None, None, "/work/demo", "Reading the test."),
        (
            "th-new",
            "assistant",
            "tool_call",
            "read_file",
            "toolu_1",
            "/work/demo",
            '{"path":"tests/test_sum.py"}',
        ),
        ("th-new", "tool", "tool_result", "read_file", "toolu_1", "/work/demo", "assert sum([1, 2]) == 4"),
        (
            "th-new",
            "assistant",
            "message",
            None,
            None,
            "/work/demo",
            "The expected value is wrong: 1 + 2 is 3.",
        ),
    ]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens "
        "FROM usage WHERE agent='zed'",
    ) == [("th-new", "claude-sonnet-4-5", 2100, 90, 300, 1200)]
    assert q(
        store,
        f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='zed' AND kind='tool_result' AND "
        "session_id='th-old'",
    ) == [("ok",)]
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        led = {
            r["agent_version"]: (r["records"], r["parsed"])
            for r in sqlite_store.coverage_ledger(conn, ["zed"])
        }
    finally:
        conn.close()
    assert led == {"0.2.0": (1, 1), "0.3.0": (1, 1)}

    # Zed rewrites the thread with a new message (INSERT OR REPLACE: a new row image)
    db = home / ".local/share/zed/threads/threads.db"
    c = sqlite3.connect(db)
    data = json.loads(
        zstandard.ZstdDecompressor().decompress(
            c.execute("SELECT data FROM threads WHERE id='th-new'").fetchone()[0]
        )
    )
    data["messages"].insert(3, {"User": {"id": "u-2", "content": [{"Text": "thanks"}]}})
    c.execute(
        "INSERT OR REPLACE INTO threads(id, summary, updated_at, data_type, data, folder_paths) "
        "VALUES ('th-new', 'Fix the failing test', '2026-01-06T12:05:00Z', 'zstd', ?, '/work/demo')",
        (zstandard.ZstdCompressor().compress(json.dumps(data).encode()),),
    )
    c.commit()
    c.close()
    again = ingest(home, store, agents="zed")
    assert again.entries_new == 1
    assert q(store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='zed' AND message_id='u-2'") == [
        ("thanks",)
    ]

"""Goose and Cursor: generated fixtures (no real files exist in public repositories;
see tests/fixtures/goose/README.md and tests/fixtures/cursor/README.md)."""

from __future__ import annotations

import json
import os
import sqlite3
import time

from conftest import ingest, q
from ctxkeep.sources import cursor, goose
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import TEXT, fixture_home, kinds, usage_by_day

GOOSE_DIR = ".local/share/goose/sessions"
CURSOR_DB = ".config/Cursor/User/globalStorage/state.vscdb"


# ------------------------------------------------------------------ goose


def test_goose_discovery_default_and_env_override(tmp_path):
    home = fixture_home("goose", tmp_path / "home")
    d = goose.discover(DiscoveryContext(home=home, env={}))
    assert sorted(f.path.name for f in d.files) == ["20250301_legacy.jsonl", "sessions.db"]
    root = tmp_path / "gooseroot"
    (root / "data" / "sessions").mkdir(parents=True)
    d2 = goose.discover(DiscoveryContext(home=home, env={"GOOSE_PATH_ROOT": str(root)}))
    assert d2.files == [] and d2.reason == f"no sessions.db or *.jsonl in {root / 'data' / 'sessions'}"


def test_goose_sessions_db_and_legacy(tmp_path):
    home = fixture_home("goose", tmp_path / "home")
    # the legacy file's metadata line has no time: goose.py dates it by the file's mtime,
    # which git does not keep; set it as make_fixtures.py does (2025-02-01T09:00:11Z)
    legacy = home / ".local/share/goose/sessions/20250301_legacy.jsonl"
    os.utime(legacy, (1738400011, 1738400011))
    store = tmp_path / "store"
    s = ingest(home, store, "goose")
    assert s.per_agent == {"goose": 18} and s.quarantined == 0
    assert kinds(store, "goose") == {
        ("system", "meta"): 4,
        ("user", "message"): 3,
        ("assistant", "message"): 4,
        ("assistant", "thinking"): 1,
        ("assistant", "tool_call"): 3,
        ("tool", "tool_result"): 3,
    }
    assert q(store, "SELECT session_id, count(*) FROM entries WHERE agent='goose' GROUP BY 1 ORDER BY 1") == [
        ("20250301_1", 7),
        ("20250301_legacy", 5),
        ("20250302_1", 6),
    ]
    assert q(
        store, f"SELECT tool_name, {TEXT} FROM entries e WHERE kind='tool_call' AND session_id='20250301_1'"
    ) == [("developer__shell", '{"command":"rg -n test_parse_dates"}')]
    assert q(store, f"SELECT {TEXT} FROM entries e WHERE kind='tool_result' AND session_id='20250302_1'") == [
        ("42",)
    ]
    # a block type goose added later becomes meta, named
    assert q(
        store, "SELECT tool_name FROM entries WHERE agent='goose' AND kind='meta' AND tool_name != 'session'"
    ) == [("systemNotification",)]
    assert q(store, "SELECT DISTINCT project_dir FROM entries WHERE session_id='20250301_1'") == [
        ("/home/user/src/parser",)
    ]
    assert q(store, "SELECT min(ts) FROM entries WHERE session_id='20250301_1' AND role='user'") == [
        ("2025-03-01T09:00:05.000000Z",)
    ]
    # session token totals (accumulated_*), per day of the session's start
    assert usage_by_day(store, "goose") == {
        "2025-02-01": (700, 200, 0, 0),
        "2025-03-01": (5200, 830, 0, 0),
        "2025-03-02": (1200, 240, 0, 0),
    }


def test_goose_new_rows_once_and_compaction_rewrite_dedups(tmp_path):
    home = fixture_home("goose", tmp_path / "home")
    store = tmp_path / "store"
    ingest(home, store, "goose")
    db = home / GOOSE_DIR / "sessions.db"
    w = sqlite3.connect(db)
    # goose's replace_conversation: delete a session's rows and insert them again (new ids)
    rows = w.execute(
        "SELECT session_id, role, content_json, created_timestamp FROM messages "
        "WHERE session_id='20250302_1' ORDER BY id"
    ).fetchall()
    w.execute("DELETE FROM messages WHERE session_id='20250302_1'")
    w.executemany(
        "INSERT INTO messages(session_id, role, content_json, created_timestamp) VALUES (?,?,?,?)", rows
    )
    w.execute(
        "INSERT INTO messages(session_id, role, content_json, created_timestamp) VALUES (?,?,?,?)",
        ("20250302_1", "user", json.dumps([{"type": "text", "text": "And warnings?"}]), int(time.time())),
    )
    w.commit()
    w.close()
    s = ingest(home, store, "goose")
    assert s.per_agent == {"goose": 1}
    assert ingest(home, store, "goose").entries_new == 0


# ------------------------------------------------------------------ cursor


def test_cursor_discovery(tmp_path):
    home = fixture_home("cursor", tmp_path / "home")
    d = cursor.discover(DiscoveryContext(home=home, env={}))
    assert [f.path.relative_to(home).as_posix() for f in d.files] == [
        CURSOR_DB,
        ".cursor/projects/home-user-src-webapp/agent-transcripts/7d3c1e9a-0b6f-4f5e-9a2d-3c4b5a6d7e8f/"
        "7d3c1e9a-0b6f-4f5e-9a2d-3c4b5a6d7e8f.jsonl",
    ]
    empty = cursor.discover(DiscoveryContext(home=tmp_path / "nobody", env={}))
    assert empty.files == [] and empty.reason.startswith("no Cursor globalStorage/state.vscdb")


def test_cursor_state_vscdb_and_transcript(tmp_path):
    home = fixture_home("cursor", tmp_path / "home")
    store = tmp_path / "store"
    s = ingest(home, store, "cursor")
    assert s.per_agent == {"cursor": 14} and s.quarantined == 0
    assert kinds(store, "cursor") == {
        ("system", "meta"): 2,
        ("user", "message"): 3,
        ("assistant", "message"): 4,
        ("assistant", "thinking"): 1,
        ("assistant", "tool_call"): 2,
        ("tool", "tool_result"): 2,
    }
    assert q(
        store, "SELECT session_id, count(*) FROM entries WHERE agent='cursor' GROUP BY 1 ORDER BY 1"
    ) == [
        ("7d3c1e9a-0b6f-4f5e-9a2d-3c4b5a6d7e8f", 5),
        ("a1b2c3d4-0000-4000-8000-000000000001", 6),
        ("a1b2c3d4-0000-4000-8000-000000000002", 3),
    ]
    assert q(
        store, "SELECT tool_name FROM entries WHERE agent='cursor' AND kind='tool_call' ORDER BY tool_name"
    ) == [("Edit",), ("read_file",)]
    # tokenCount per bubble, model from modelInfo; zero counts are not usage
    assert q(store, "SELECT usage_key, model, input_tokens, output_tokens FROM usage ORDER BY usage_key") == [
        ("cursor:b-002", "claude-4-sonnet", 1800, 95),
        ("cursor:b-003", "claude-4-sonnet", 2100, 40),
    ]
    assert usage_by_day(store, "cursor") == {"2025-05-01": (3900, 135, 0, 0)}
    assert ingest(home, store, "cursor").files_read == 0


def test_cursor_updated_and_new_bubbles(tmp_path):
    home = fixture_home("cursor", tmp_path / "home")
    store = tmp_path / "store"
    ingest(home, store, "cursor")
    db = home / CURSOR_DB
    w = sqlite3.connect(db)
    c1 = "a1b2c3d4-0000-4000-8000-000000000001"
    # ON CONFLICT REPLACE: an updated key gets a new rowid; a new bubble is a new key
    (val,) = w.execute("SELECT value FROM cursorDiskKV WHERE key=?", (f"composerData:{c1}",)).fetchone()
    comp = json.loads(val)
    comp["fullConversationHeadersOnly"].append({"bubbleId": "b-004", "type": 1})
    w.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (f"composerData:{c1}", json.dumps(comp)))
    w.execute(
        "INSERT INTO cursorDiskKV VALUES (?, ?)",
        (f"bubbleId:{c1}:b-004", json.dumps({"type": 1, "bubbleId": "b-004", "text": "Add a test for it."})),
    )
    w.commit()
    w.close()
    s = ingest(home, store, "cursor")
    assert s.per_agent == {"cursor": 1}
    assert q(store, f"SELECT {TEXT} FROM entries e WHERE native_id='b-004'") == [("Add a test for it.",)]
    assert ingest(home, store, "cursor").entries_new == 0

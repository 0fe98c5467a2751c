"""Windsurf: handmade workspace databases in both chat-data shapes (format facts in
ctxkeep/sources/windsurf.py) read into prompts, answers, a tool call with its result,
titles, the project from ``workspace.json`` and a request's token usage; discovery
through ``$WINDSURF_DIR``; a rewritten chat value adds only its new request; a
``--path`` state.vscdb of Windsurf is Windsurf's, not Cursor's."""

from __future__ import annotations

import json
import sqlite3

from conftest import ingest, q
from ctxkeep.sources import files_for_paths, windsurf
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import fixture_home
from helpers_sources import ENTRY_TEXT, kinds

WS = ".config/Windsurf/User/workspaceStorage"
A = "a1b2c3d4e5f60718293a4b5c6d7e8f90"


def test_both_shapes_messages_tool_call_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(fixture_home("windsurf", tmp_path / "home"), store, agents="windsurf")
    assert s.files_read == 2 and s.quarantined == 0
    assert kinds(store, "windsurf") == {
        "user/message": 3,
        "assistant/message": 4,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 3,
    }
    assert q(
        store,
        f"SELECT role, kind, native_id, tool_name, model, {ENTRY_TEXT}, strftime('%H:%M:%S', ts) FROM entries e "
        "WHERE agent='windsurf' AND session_id='ws-sess-1' AND kind != 'meta' ORDER BY rowid",
    ) == [
        ("user", "message", None, None, None, "How are orders listed?", "00:00:00"),
        ("assistant", "message", None, None, "swe-1", "With `list_orders()` in api.py.", "00:00:00"),
        ("user", "message", None, None, None, "Add pagination", "00:00:30"),
        ("assistant", "message", None, None, "swe-1", "Adding a `page` parameter. Done.", "00:00:30"),
        ("assistant", "tool_call", "call_77", "edit_file", "swe-1", "Editing api.py", "00:00:30"),
        ("tool", "tool_result", "call_77", "edit_file", None, "Edited api.py", "00:00:30"),
    ]
    assert q(
        store,
        f"SELECT role, {ENTRY_TEXT}, project_dir FROM entries e WHERE agent='windsurf' AND session_id='tab-9' "
        "AND kind='message' ORDER BY rowid",
    ) == [
        ("user", "What does cache.py do?", "/home/dev/cache lib"),
        ("assistant", "It memoizes lookups.", "/home/dev/cache lib"),
        ("assistant", "Entries expire after 60 s.", "/home/dev/cache lib"),
    ]
    assert q(
        store,
        f"SELECT session_id, {ENTRY_TEXT} FROM entries e WHERE agent='windsurf' AND tool_name='title' ORDER BY 1",
    ) == [("tab-9", "Explain the cache"), ("ws-sess-1", "Paginate the orders API")]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens, project_dir FROM usage WHERE agent='windsurf'",
    ) == [("ws-sess-1", "swe-1", 5200, 340, "/home/dev/orders")]


def test_env_dir_rewritten_value_and_path_claim(tmp_path):
    home = fixture_home("windsurf", tmp_path / "home")
    user = home / ".config/Windsurf/User"
    env = {"WINDSURF_DIR": str(user)}
    found = windsurf.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert sorted(f.path.parent.name for f in found) == [A, "c3d4e5f60718293a4b5c6d7e8f90a1b2"]
    store = tmp_path / "store"
    assert ingest(tmp_path / "nohome", store, agents="windsurf", env=env).entries_new == 12
    db = home / WS / A / "state.vscdb"
    c = sqlite3.connect(db)
    doc = json.loads(c.execute("SELECT value FROM ItemTable WHERE key='aiChat.chatdata'").fetchone()[0])
    doc["requests"].append(
        {
            "requestId": "request_3",
            "message": {"text": "Thanks"},
            "response": [{"value": "Welcome."}],
            "timestamp": 1782000090000,
        }
    )
    c.execute("UPDATE ItemTable SET value=? WHERE key='aiChat.chatdata'", (json.dumps(doc),))
    c.commit()
    c.close()
    assert ingest(tmp_path / "nohome", store, agents="windsurf", env=env).entries_new == 2
    assert ingest(tmp_path / "nohome", store, agents="windsurf", env=env).entries_new == 0
    files, problems = files_for_paths([db])
    assert [(f.agent, f.mode) for f in files] == [("windsurf", "sqlite")] and problems == []


def test_empty_home_says_where_it_looked(tmp_path):
    d = windsurf.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".config/Windsurf/User" in (d.reason or "")
    assert len(d.searched) == 6

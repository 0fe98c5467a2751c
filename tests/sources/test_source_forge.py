"""Forge: a handmade ``.forge.db`` (format facts in ctxkeep/sources/forge.py) read into
the prompt, reasoning, tool calls and their results (an error marked), the ``task``
sub-agent's conversation under its parent, the working directory from the system
message and per-message usage; discovery through ``$FORGE_DIR``; a rewritten
conversation row adds only its new messages."""

from __future__ import annotations

import json
import sqlite3

from conftest import ingest, q
from ctxkeep.sources import forge
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import fixture_home
from helpers_sources import ENTRY_TEXT, kinds

PARENT = "0c4f6a7e-1b2d-4e3f-8a9b-1c2d3e4f5a6b"
CHILD = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f2a3b4c5d"


def test_conversations_tool_calls_subagent_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(fixture_home("forge", tmp_path / "home"), store, agents="forge")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "forge") == {
        "system/meta": 6,
        "user/message": 2,
        "assistant/thinking": 1,
        "assistant/tool_call": 3,
        "tool/tool_result": 2,
        "assistant/message": 2,
    }
    assert q(
        store,
        f"SELECT kind, native_id, tool_name, {ENTRY_TEXT}, strftime('%H:%M:%S', ts) FROM entries e "
        "WHERE agent='forge' AND kind IN ('tool_call', 'tool_result') ORDER BY native_id, kind",
    ) == [
        ("tool_call", "call_1", "read", '{"file_path":"/home/dev/invoices/total.py"}', "12:00:05"),
        ("tool_result", "call_1", "read", "total = sum(lines) * 1.2", "12:00:05"),
        ("tool_call", "call_2", "shell", '{"command":"pytest -q"}', "12:00:05"),
        ("tool_result", "call_2", "shell", "[error] 1 failed", "12:00:05"),
        ("tool_call", "call_3", "task", f'{{"session_id":"{CHILD}","prompt":"Audit rounding"}}', "12:00:09"),
    ]
    assert q(
        store,
        "SELECT DISTINCT session_id, parent_session_id, project_dir FROM entries WHERE agent='forge' ORDER BY 1",
    ) == [(PARENT, None, "/home/dev/invoices"), (CHILD, PARENT, "/home/dev/invoices")]
    assert q(store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='forge' AND kind='thinking'") == [
        ("Rounding is the usual suspect.",)
    ]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens, cache_read_tokens FROM usage WHERE agent='forge' "
        "ORDER BY ts",
    ) == [
        (PARENT, "claude-sonnet-4-5", 1200, 80, 3000),
        (PARENT, "claude-sonnet-4-5", 400, 60, 4100),
        (CHILD, "claude-haiku-4-5", 900, 50, 0),
    ]


def test_env_dir_and_a_rewritten_conversation(tmp_path):
    home = fixture_home("forge", tmp_path / "home")
    env = {"FORGE_DIR": str(home / ".forge")}
    found = forge.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert [f.path.name for f in found] == [".forge.db"]
    store = tmp_path / "store"
    assert ingest(tmp_path / "nohome", store, agents="forge", env=env).entries_new == 16
    c = sqlite3.connect(home / ".forge" / ".forge.db")
    doc = json.loads(
        c.execute("SELECT context FROM conversations WHERE conversation_id=?", (CHILD,)).fetchone()[0]
    )
    doc["messages"].append(
        {"message": {"text": {"role": "User", "content": "Thanks", "timestamp": "2026-07-01T12:01:00Z"}}}
    )
    c.execute(
        "UPDATE conversations SET context=?, updated_at='2026-07-01 13:05:00' WHERE conversation_id=?",
        (json.dumps(doc), CHILD),
    )
    c.commit()
    c.close()
    assert ingest(tmp_path / "nohome", store, agents="forge", env=env).entries_new == 1
    assert ingest(tmp_path / "nohome", store, agents="forge", env=env).entries_new == 0


def test_empty_home_says_where_it_looked(tmp_path):
    d = forge.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".forge" in (d.reason or "")

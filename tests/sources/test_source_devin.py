"""Devin CLI: a handmade ``cli/sessions.db`` and transcript (format facts in
ctxkeep/sources/devin.py) read into the prompt, reasoning, tool calls of both shapes
(OpenAI ``tool_calls`` and ``tool_use`` blocks) and their results, the session's title,
project and model, and per-step usage from the transcript; discovery through
``$DEVIN_DIR``; nodes appended later arrive once."""

from __future__ import annotations

import json
import sqlite3

from conftest import ingest, q
from ctxkeep.sources import devin
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import fixture_home
from helpers_sources import ENTRY_TEXT, kinds

SID = "devin-5f1e2d3c4b5a"


def test_message_nodes_tool_calls_and_transcript_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(fixture_home("devin", tmp_path / "home"), store, agents="devin")
    assert s.files_read == 2 and s.quarantined == 0
    assert kinds(store, "devin") == {
        "system/meta": 4,
        "user/message": 1,
        "assistant/thinking": 2,
        "assistant/message": 3,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
    }
    assert q(
        store,
        f"SELECT role, kind, native_id, tool_name, {ENTRY_TEXT}, strftime('%H:%M:%S', ts) FROM entries e "
        "WHERE agent='devin' AND kind IN ('tool_call', 'tool_result') ORDER BY ts, kind",
    ) == [
        ("assistant", "tool_call", "call-1", "grep", '{"pattern":"cookie"}', "13:46:50"),
        ("tool", "tool_result", "call-1", None, "auth.py:12: cookie.secure = True", "13:46:55"),
        ("assistant", "tool_call", "tu-2", "read_file", '{"file_path":"config/dev.toml"}', "13:47:00"),
        ("tool", "tool_result", "tu-2", None, "https = false", "13:47:05"),
    ]
    assert q(
        store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='devin' AND kind='thinking' ORDER BY ts"
    ) == [("Start with the session cookie.",), ("Secure cookies need HTTPS.",)]
    assert q(
        store,
        "SELECT DISTINCT model, project_dir FROM entries WHERE agent='devin' AND role='assistant'",
    ) == [("swe-1.5", "/home/dev/webapp")]
    assert q(
        store,
        f"SELECT tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='devin' AND kind='meta' AND tool_name!='usage' ORDER BY 1",
    ) == [
        ("system", "You are Devin."),
        ("title", "Login fails"),
    ]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens, cache_read_tokens FROM usage WHERE agent='devin' ORDER BY ts",
    ) == [(SID, "swe-1.5", 500, 120, 1500), (SID, "swe-1.5-fast", 600, 180, 2000)]


def test_env_dir_and_appended_nodes(tmp_path):
    home = fixture_home("devin", tmp_path / "home")
    env = {"DEVIN_DIR": str(home / ".local/share/devin")}
    found = devin.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert sorted((f.path.name, f.mode) for f in found) == [
        (f"{SID}.json", "rewrite"),
        ("sessions.db", "sqlite"),
    ]
    store = tmp_path / "store"
    first = ingest(tmp_path / "nohome", store, agents="devin", env=env).entries_new
    c = sqlite3.connect(home / ".local/share/devin/cli/sessions.db")
    c.execute(
        "INSERT INTO message_nodes (session_id, node_id, parent_node_id, chat_message, created_at) VALUES (?, 8, 7, ?, ?)",
        (SID, json.dumps({"role": "user", "content": "Enable HTTPS locally"}), 1783000100),
    )
    c.commit()
    c.close()
    assert first > 0
    assert ingest(tmp_path / "nohome", store, agents="devin", env=env).entries_new == 1
    assert ingest(tmp_path / "nohome", store, agents="devin", env=env).entries_new == 0


def test_empty_home_says_where_it_looked(tmp_path):
    d = devin.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".local/share/devin" in (d.reason or "")

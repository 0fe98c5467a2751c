"""Warp: a handmade ``warp.sqlite`` (format facts in ctxkeep/sources/warp.py) read into
the user's queries with their model, project and time, a cancelled exchange's status,
and the conversation's tool counts and token totals (no usage row: Warp logs no
input/output split); discovery through ``$WARP_DIR``; a new exchange and a rewritten
conversation row arrive once."""

from __future__ import annotations

import json
import sqlite3

from conftest import ingest, q
from ctxkeep.sources import warp
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import fixture_home
from helpers_sources import ENTRY_TEXT, kinds


def test_queries_status_and_tool_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(fixture_home("warp", tmp_path / "home"), store, agents="warp")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "warp") == {"user/message": 2, "system/meta": 2}
    assert q(
        store,
        f"SELECT role, tool_name, native_id, model, project_dir, {ENTRY_TEXT}, strftime('%H:%M', ts) FROM entries e "
        "WHERE agent='warp' ORDER BY ts, role DESC",
    ) == [
        ("user", None, "ex-1", "claude-4-5-sonnet", "/home/dev/api", "Why does make build fail?", "09:00"),
        ("user", None, "ex-2", "claude-4-5-sonnet", "/home/dev/api", "Now fix it", "09:03"),
        ("system", "output_status", "ex-2", "claude-4-5-sonnet", "/home/dev/api", "Cancelled", "09:03"),
        (
            "system",
            "tool_usage",
            None,
            None,
            "/home/dev/api",
            '{"tools":{"run_command":2,"read_files":1,"apply_file_diff":1},'
            '"tokens":[{"model":"Claude Sonnet 4.5","warp_tokens":52000,"byok_tokens":0}]}',
            "09:04",
        ),
    ]
    assert q(store, "SELECT count(*) FROM usage WHERE agent='warp'") == [(0,)]


def test_env_dir_new_exchange_and_rewritten_conversation(tmp_path):
    home = fixture_home("warp", tmp_path / "home")
    data = home / ".local/state/warp-terminal"
    env = {"WARP_DIR": str(data)}
    assert [
        f.path.name for f in warp.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    ] == ["warp.sqlite"]
    store = tmp_path / "store"
    assert ingest(tmp_path / "nohome", store, agents="warp", env=env).entries_new == 4
    c = sqlite3.connect(data / "warp.sqlite")
    c.execute(
        "INSERT INTO ai_queries (exchange_id, conversation_id, start_ts, input, working_directory, output_status, "
        "model_id) VALUES ('ex-3', 'conv-7', '2026-10-01 09:10:00', ?, '/home/dev/api', 'Success', 'gpt-5')",
        (json.dumps([{"Query": {"text": "Run the tests", "context": []}}]),),
    )
    c.execute(
        "UPDATE agent_conversations SET conversation_data=?, last_modified_at='2026-10-01 09:11:00'",
        (
            json.dumps(
                {"conversation_usage_metadata": {"tool_usage_metadata": {"run_command_stats": {"count": 3}}}}
            ),
        ),
    )
    c.commit()
    c.close()
    assert ingest(tmp_path / "nohome", store, agents="warp", env=env).entries_new == 2
    assert ingest(tmp_path / "nohome", store, agents="warp", env=env).entries_new == 0


def test_empty_home_says_where_it_looked(tmp_path):
    d = warp.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and "warp-terminal" in (d.reason or "")
    assert len(d.searched) == 3

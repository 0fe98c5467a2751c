"""Grok CLI: handmade sessions in both chat-history generations (format facts in
ctxkeep/sources/grok.py) read into prompts, injected instructions, reasoning, client
and backend tool calls, results, the fork's parent and the usage of ``updates.jsonl``;
discovery through ``$GROK_DIR``; appended lines read incrementally."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import grok
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "grok" / "home"
CUR = "019f7a00-1111-7000-8000-0000000000a1"
OLD = "019e1b00-2222-7000-8000-0000000000b2"


def test_both_generations_tool_calls_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="grok")
    assert s.files_read == 5 and s.quarantined == 0  # 3 transcripts, 2 summary.json (sidecars)
    assert kinds(store, "grok") == {
        "system/meta": 4,
        "user/message": 2,
        "assistant/thinking": 2,
        "assistant/tool_call": 3,
        "assistant/message": 4,
        "tool/tool_result": 2,
    }
    assert q(
        store,
        f"SELECT session_id, native_id, tool_name, model, {ENTRY_TEXT} FROM entries e "
        "WHERE agent='grok' AND kind='tool_call' ORDER BY session_id, native_id",
    ) == [
        (OLD, "call_1", "grep", "grok-4", '{"pattern":"cache"}'),
        (CUR, "call_7", "read_file", "grok-4.5", '{"target_file":"weather/client.py"}'),
        (CUR, "ws_7", "web_search", None, '{"type":"search","query":"python ttl cache"}'),
    ]
    assert q(
        store,
        f"SELECT session_id, native_id, {ENTRY_TEXT} FROM entries e WHERE agent='grok' AND kind='tool_result' "
        "ORDER BY session_id",
    ) == [(OLD, "call_1", "client.py:3: cache = {}"), (CUR, "call_7", "def fetch(city): ...")]
    assert q(
        store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='grok' AND role='user' ORDER BY session_id"
    ) == [("Why is the forecast stale?",), ("Cache the forecast for ten minutes",)]
    assert q(
        store,
        "SELECT tool_name FROM entries WHERE agent='grok' AND kind='meta' AND session_id=? ORDER BY 1",
        CUR,
    ) == [("project_instructions",), ("system",), ("usage",)]
    assert q(
        store,
        "SELECT DISTINCT session_id, parent_session_id, project_dir FROM entries WHERE agent='grok' "
        "AND parent_session_id IS NOT NULL",
    ) == [(CUR, OLD, "/home/dev/weather")]
    assert q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, cost_usd, "
        "strftime('%Y-%m-%dT%H:%M:%S', ts) FROM usage WHERE agent='grok'",
    ) == [("grok-4.5", 2000, 220, 3000, 40, 0.0123, "2026-08-01T09:00:30")]


def test_env_dir_and_incremental_append(tmp_path):
    sessions = tmp_path / "sessions"
    shutil.copytree(HOME / ".grok/sessions", sessions)
    env = {"GROK_DIR": str(sessions)}
    found = grok.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert sorted((f.path.parent.name, f.path.name, f.mode) for f in found) == [
        (OLD, "chat_history.jsonl", "append"),
        (OLD, "summary.json", "rewrite"),  # a sidecar (readers.sidecar)
        (CUR, "chat_history.jsonl", "append"),
        (CUR, "summary.json", "rewrite"),
        (CUR, "updates.jsonl", "append"),
    ]
    store = tmp_path / "store"
    assert ingest(tmp_path, store, agents="grok", env=env).entries_new == 17
    folder = sessions / "%2Fhome%2Fdev%2Fweather" / CUR
    with (folder / "updates.jsonl").open("a") as f:
        f.write(
            '{"timestamp":1785574900,"params":{"update":{"prompt_id":"p-2","usage":{"modelUsage":'
            '{"grok-4.5":{"inputTokens":900,"cachedReadTokens":0,"outputTokens":30},'
            '"grok-code-fast":{"inputTokens":100,"outputTokens":5}}}}}}\n'
        )
    assert ingest(tmp_path, store, agents="grok", env=env).entries_new == 2
    assert q(
        store, "SELECT model, input_tokens, output_tokens FROM usage WHERE agent='grok' ORDER BY input_tokens"
    ) == [("grok-code-fast", 100, 5), ("grok-4.5", 900, 30), ("grok-4.5", 2000, 220)]


def test_empty_home_says_where_it_looked(tmp_path):
    d = grok.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".grok/sessions" in (d.reason or "")

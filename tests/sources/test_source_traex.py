"""TraeX: a handmade Codex-shaped rollout in TraeX's dated tree (format facts in
ctxkeep/sources/traex.py) read as ``traex`` prompts, tool calls, results and usage, not
as Codex's; discovery through ``$TRAEX_SESSIONS_DIR``; ``--path`` gives it to traex."""

from __future__ import annotations

from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import codex, files_for_paths, traex
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "traex" / "home"
SID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def test_messages_tool_calls_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="traex")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "traex") == {
        "system/meta": 3,
        "user/message": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "assistant/message": 1,
    }
    assert q(
        store,
        f"SELECT kind, native_id, tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='traex' "
        "AND kind IN ('tool_call', 'tool_result') ORDER BY kind",
    ) == [
        ("tool_call", "call_t1", "shell", "rg -L require_auth routes/"),
        ("tool_result", "call_t1", None, "routes/health.py\n"),
    ]
    # input = input_tokens - cached_input_tokens; the model from turn_context
    assert q(
        store,
        "SELECT usage_key, session_id, project_dir, model, input_tokens, output_tokens, cache_read_tokens, "
        "reasoning_tokens FROM usage WHERE agent='traex'",
    ) == [(f"traex:{SID}:2400:1800:90:20:2490", SID, "/home/dev/api", "doubao-seed-code", 600, 90, 1800, 20)]
    assert q(store, "SELECT count(*) FROM entries WHERE agent='codex'") == [(0,)]


def test_discovery_env_and_path_claim(tmp_path):
    sessions = HOME / ".trae/cli/sessions"
    found = traex.discover(DiscoveryContext(home=tmp_path, env={"TRAEX_SESSIONS_DIR": str(sessions)})).files
    assert [f.path.name for f in found] == [f"rollout-2026-09-15T11-00-00-{SID}.jsonl"]
    assert codex.discover(DiscoveryContext(home=HOME, env={})).files == []
    files, problems = files_for_paths([sessions])
    assert problems == [] and [f.agent for f in files] == ["traex"]


def test_empty_home_says_where_it_looked(tmp_path):
    d = traex.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".trae/cli/sessions" in (d.reason or "") and len(d.searched) == 2

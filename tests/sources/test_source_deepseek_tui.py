"""DeepSeek TUI: a handmade session document (format facts in
ctxkeep/sources/deepseek_tui.py) read into prompts, thinking, tool calls, object and
block tool results and the title; ``latest.json`` skipped; discovery through
``$DEEPSEEK_TUI_SESSIONS_DIR``; a rewritten document read again without doubling, and
a truncated history's lost messages marked rewound."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import deepseek_tui
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "deepseek-tui" / "home"
SID = "sess_4f2a9c"


def test_messages_tool_calls_and_results(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="deepseek-tui")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "deepseek-tui") == {
        "system/meta": 2,
        "user/message": 1,
        "assistant/thinking": 1,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "assistant/message": 1,
    }
    assert q(store, "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='deepseek-tui'") == [
        (SID, "/home/dev/retry-lib")
    ]
    assert q(
        store,
        f"SELECT native_id, tool_name, model, {ENTRY_TEXT} FROM entries e WHERE agent='deepseek-tui' "
        "AND kind='tool_call' ORDER BY native_id",
    ) == [
        ("toolu_01", "read_file", "deepseek-chat", '{"path":"tests/test_backoff.py"}'),
        ("toolu_02", "run_shell", "deepseek-reasoner", '{"command":"pytest -q tests/test_backoff.py"}'),
    ]
    assert q(
        store,
        f"SELECT native_id, {ENTRY_TEXT} FROM entries e WHERE agent='deepseek-tui' AND kind='tool_result' "
        "ORDER BY native_id",
    ) == [
        ("toolu_01", "def test_backoff():\n    assert delay(3) < 0.9"),
        ("toolu_02", "1 passed in 0.02s"),
    ]
    assert q(
        store,
        f"SELECT tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='deepseek-tui' AND kind='meta' ORDER BY 1",
    ) == [("system", "You are DeepSeek TUI, a coding agent."), ("title", "Fix the flaky retry test")]
    # the format logs only a session total_tokens: no usage row is made up
    assert q(store, "SELECT count(*) FROM usage WHERE agent='deepseek-tui'") == [(0,)]


def test_env_dir_rewrite_and_truncation(tmp_path):
    sessions = tmp_path / "sessions"
    shutil.copytree(HOME / ".codewhale/sessions", sessions)
    env = {"DEEPSEEK_TUI_SESSIONS_DIR": str(sessions)}
    found = deepseek_tui.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert [f.path.name for f in found] == [f"{SID}.json"]
    store = tmp_path / "store"
    assert ingest(tmp_path, store, agents="deepseek-tui", env=env).entries_new == 9
    doc_path = sessions / f"{SID}.json"
    doc = json.loads(doc_path.read_text())
    doc["messages"].append(
        {"role": "user", "content": "Seed it with 7.", "timestamp": "2026-07-03T08:01:00Z"}
    )
    doc_path.write_text(json.dumps(doc))
    assert ingest(tmp_path, store, agents="deepseek-tui", env=env).entries_new == 1
    doc["messages"] = doc["messages"][:2]  # the user went back to the first prompt
    doc_path.write_text(json.dumps(doc))
    assert ingest(tmp_path, store, agents="deepseek-tui", env=env).entries_new == 0
    assert q(store, "SELECT count(*) FROM entries WHERE agent='deepseek-tui' AND status='rewound'") == [
        (7,)
    ]  # messages 2-7: thinking, 2 calls, 2 results, the answer, the later prompt


def test_empty_home_says_where_it_looked(tmp_path):
    d = deepseek_tui.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".codewhale/sessions" in (d.reason or "")
    assert d.searched == [tmp_path / ".codewhale/sessions", tmp_path / ".deepseek/sessions"]

"""Qoder: a handmade Claude Code-shaped session with its ``-session.json`` and a
sub-agent (format facts in ctxkeep/sources/qoder.py) read as ``qoder`` entries with
prefixed usage keys, the title, the fork parent and the sub-agent's parent; discovery
through ``$QODER_PROJECTS_DIR`` and the platform dirs."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import claude_code, qoder
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "qoder" / "home"
SID = "8d2c4e6a-3b5f-4a7c-9e1d-2f3a4b5c6d7e"
FORK = "1a1a1a1a-0000-4000-8000-000000000000"


def test_messages_tool_calls_usage_title_and_parents(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="qoder")
    assert s.files_read == 3 and s.quarantined == 0  # with the -session.json (a sidecar)
    assert kinds(store, "qoder") == {
        "user/message": 2,
        "assistant/message": 3,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 1,
    }
    assert q(
        store, "SELECT usage_key, model, input_tokens, output_tokens, cache_read_tokens FROM usage ORDER BY 1"
    ) == [
        ("qoder:msg_q1:req_q1", "qwen3-coder-plus", 1500, 60, 200),
        ("qoder:msg_q2:req_q2", "qwen3-coder-plus", 1700, 25, 1500),
        ("qoder:msg_s1:req_s1", "qwen3-coder-flash", 300, 8, 0),
    ]
    assert q(
        store,
        f"SELECT native_id, tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='qoder' "
        "AND kind IN ('tool_call', 'tool_result') ORDER BY kind",
    ) == [
        ("call_q1", "Read", '{"file_path":"/home/dev/shop/cart.py"}'),
        ("call_q1", None, "total = round(sum(prices), 2)"),
    ]
    assert q(
        store,
        f"SELECT session_id, parent_session_id, {ENTRY_TEXT} FROM entries e WHERE agent='qoder' AND kind='meta'",
    ) == [(SID, FORK, "Cart rounding")]
    rows = q(
        store, "SELECT DISTINCT session_id, parent_session_id FROM entries WHERE agent='qoder' ORDER BY 1"
    )
    assert (SID, FORK) in rows and any(sid != SID and parent == SID for sid, parent in rows), rows


def test_discovery_env_and_platform_dirs(tmp_path):
    projects = tmp_path / "qp"
    shutil.copytree(HOME / ".qoder/projects", projects)
    found = qoder.discover(
        DiscoveryContext(home=tmp_path / "nohome", env={"QODER_PROJECTS_DIR": str(projects)})
    )
    assert sorted(f.path.name for f in found.files) == [
        f"{SID}-session.json",  # a sidecar of the transcript (readers.sidecar)
        f"{SID}.jsonl",
        "agent-c0ffee12.jsonl",
    ]
    mac = tmp_path / "mac" / "Library/Application Support/Qoder/SharedClientCache/cli/projects"
    shutil.copytree(HOME / ".qoder/projects", mac)
    assert len(qoder.discover(DiscoveryContext(home=tmp_path / "mac", env={})).files) == 3
    # the transcripts are Claude Code-shaped but not Claude Code's
    assert claude_code.discover(DiscoveryContext(home=HOME, env={})).files == []
    assert qoder.matches(next(HOME.rglob(f"{SID}.jsonl")))


def test_empty_home_says_where_it_looked(tmp_path):
    d = qoder.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".qoder/projects" in (d.reason or "") and len(d.searched) == 5

"""Zencoder: a handmade session and the sub-agent session it started (format facts in
ctxkeep/sources/zencoder.py) read into typed prompts, injected context, reasoning,
tool calls and results, the header's model and the parent link; discovery through
``$ZENCODER_DIR``; appended lines read incrementally."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import zencoder
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "zencoder" / "home"
PARENT = "5b0e7f3c-2a41-4d9e-8c6b-1f2e3d4c5b6a"
CHILD = "9c8d7e6f-1a2b-4c3d-8e9f-0a1b2c3d4e5f"


def test_messages_tool_calls_results_and_subagent(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="zencoder")
    assert s.files_read == 2 and s.quarantined == 0
    assert kinds(store, "zencoder") == {
        "system/meta": 7,
        "user/message": 2,
        "assistant/thinking": 1,
        "assistant/message": 3,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
    }
    assert q(
        store,
        f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='zencoder' AND role='user' AND session_id=?",
        PARENT,
    ) == [("Why does invoice rounding drift?",)]
    assert q(
        store,
        f"SELECT native_id, tool_name, model, project_dir, {ENTRY_TEXT} FROM entries e "
        "WHERE agent='zencoder' AND kind='tool_call' ORDER BY native_id",
    ) == [
        ("tc_1", "Read", "claude-sonnet-4-5", "/home/dev/billing", '{"file_path":"billing/totals.py"}'),
        ("tc_2", "Task", "claude-sonnet-4-5", "/home/dev/billing", '{"prompt":"find rounding tests"}'),
    ]
    # the tagged part of a result is context, not the tool's output
    assert q(
        store,
        f"SELECT native_id, {ENTRY_TEXT} FROM entries e WHERE agent='zencoder' AND kind='tool_result' "
        "ORDER BY native_id",
    ) == [
        ("tc_1", "total = sum(float(x) for x in lines)"),
        ("tc_2", f"Sub-agent done. <session-id>{CHILD}</session-id>"),
    ]
    assert q(
        store,
        f"SELECT native_id, {ENTRY_TEXT} FROM entries e WHERE agent='zencoder' AND tool_name='subagent'",
    ) == [("tc_2", CHILD)]
    assert q(
        store,
        "SELECT DISTINCT session_id, parent_session_id FROM entries WHERE agent='zencoder' "
        "AND parent_session_id IS NOT NULL",
    ) == [(CHILD, PARENT)]
    assert q(
        store,
        "SELECT DISTINCT model FROM entries WHERE agent='zencoder' AND session_id=? AND role='assistant'",
        CHILD,
    ) == [("claude-haiku-4-5",)]
    # the format logs no token counts
    assert q(store, "SELECT count(*) FROM usage WHERE agent='zencoder'") == [(0,)]


def test_env_dir_and_incremental_append(tmp_path):
    sessions = tmp_path / "sessions"
    shutil.copytree(HOME / ".zencoder/sessions", sessions)
    env = {"ZENCODER_DIR": str(sessions)}
    found = zencoder.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert sorted(f.path.stem for f in found) == [PARENT, CHILD]
    store = tmp_path / "store"
    assert ingest(tmp_path, store, agents="zencoder", env=env).entries_new == 17
    with (sessions / f"{PARENT}.jsonl").open("a") as f:
        f.write('{"role":"user","content":[{"type":"text","text":"Patch it."}]}\n')
    assert ingest(tmp_path, store, agents="zencoder", env=env).entries_new == 1
    # the appended line kept the header's session id, project and time (watermark state)
    assert q(
        store,
        "SELECT session_id, project_dir, strftime('%Y-%m-%dT%H:%M:%S', ts) FROM entries "
        "WHERE agent='zencoder' AND role='user' ORDER BY source_offset DESC LIMIT 1",
    ) == [(PARENT, "/home/dev/billing", "2026-04-10T14:00:00")]


def test_empty_home_says_where_it_looked(tmp_path):
    d = zencoder.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".zencoder/sessions" in (d.reason or "")

"""Pi: a generated session (tests/fixtures/pi/make_fixtures.py; format facts in
ctxkeep/sources/pi.py): messages, thinking, a tool call and its result, a compaction
summary, usage and the logged cost per assistant message, the header's cwd and format
version, $PI_CODING_AGENT_DIR, and lines appended later read once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "pi" / "home"
SID = "0b7f5a52-1c2d-4e3f-9a8b-7c6d5e4f3a2b"


def test_session_entries_tools_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="pi")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "pi") == {
        "user/message": 1,
        "assistant/message": 1,
        "assistant/thinking": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 1,  # model_change
        "system/summary": 1,  # compaction
    }
    assert q(store, "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='pi'") == [
        (SID, "/work/demo")
    ]
    assert q(
        store,
        f"SELECT tool_name, native_id, {ENTRY_TEXT} FROM entries e WHERE agent='pi' AND kind='tool_call'",
    ) == [("bash", "toolu_9", '{"command":"ls"}')]
    assert q(
        store,
        f"SELECT tool_name, native_id, {ENTRY_TEXT} FROM entries e WHERE agent='pi' AND kind='tool_result'",
    ) == [("bash", "toolu_9", "a.txt\nb.txt")]
    assert q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, round(cost_usd, 7) "
        "FROM usage WHERE agent='pi' ORDER BY ts",
    ) == [
        ("claude-sonnet-4-5", 1200, 40, 300, 50, 0.0044775),
        ("claude-sonnet-4-5", 20, 12, 1500, 0, 0.0006),
    ]
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        led = sqlite_store.coverage_ledger(conn, ["pi"])
    finally:
        conn.close()
    assert [(r["agent_version"], r["records"], r["parsed"], r["unknown"]) for r in led] == [("3", 7, 7, {})]


def test_env_override_and_appended_lines(tmp_path):
    agent = tmp_path / "piagent"
    shutil.copytree(HOME / ".pi" / "agent", agent)
    env = {"PI_CODING_AGENT_DIR": str(agent)}
    store = tmp_path / "store"
    first = ingest(tmp_path / "nohome", store, agents="pi", env=env)
    assert first.files_read == 1
    f = next(agent.rglob("*.jsonl"))
    with f.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "e7",
                    "parentId": "e6",
                    "timestamp": "2026-01-02T10:06:00.000Z",
                    "message": {"role": "user", "content": "thanks"},
                }
            )
            + "\n"
        )
    again = ingest(tmp_path / "nohome", store, agents="pi", env=env)
    assert again.entries_new == 1 and again.bytes == len(f.read_bytes().splitlines(keepends=True)[-1])

"""OpenHands: a generated conversation folder (tests/fixtures/openhands/make_fixtures.py;
format facts in ctxkeep/sources/openhands.py): messages, reasoning, an action as a tool
call with its thought, the observation as its result, usage per LLM response timed by
its event, an unknown event kind named in the coverage ledger, $OH_CONVERSATIONS_PATH,
and a new event file read once (the conversation's fingerprint)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "openhands" / "home"
SID = "4e2d9c1a-7b6f-4e3d-8c2b-1a0f9e8d7c6b"


def test_conversation_entries_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="openhands")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "openhands") == {
        "user/message": 1,
        "assistant/message": 2,  # the action's thought and the answer
        "assistant/thinking": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 3,  # the state update, two usage rows
    }
    rows = q(
        store,
        f"SELECT role, kind, tool_name, native_id, project_dir, {ENTRY_TEXT} FROM entries e "
        "WHERE agent='openhands' AND kind IN ('message', 'tool_call', 'tool_result') ORDER BY ts, kind",
    )
    assert rows == [
        ("user", "message", None, "ev-1", "/work/demo", "what does main.py print?"),
        ("assistant", "message", None, "ev-2", "/work/demo", "I will read the file."),
        (
            "assistant",
            "tool_call",
            "file_editor",
            "call_1",
            "/work/demo",
            '{"command": "view", "path": "/work/demo/main.py"}',
        ),
        ("tool", "tool_result", "file_editor", "call_1", "/work/demo", "print('hello')"),
        ("assistant", "message", None, "ev-4", "/work/demo", "It prints hello."),
    ]
    assert q(
        store,
        "SELECT ts, model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens FROM usage "
        "WHERE agent='openhands' ORDER BY ts",
    ) == [
        ("2026-01-05T08:00:02.000000Z", "anthropic/claude-sonnet-4-5", 3000, 80, 1000, 200),
        ("2026-01-05T08:00:05.000000Z", "anthropic/claude-sonnet-4-5", 300, 25, 4000, 0),
    ]
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        led = sqlite_store.coverage_ledger(conn, ["openhands"])
    finally:
        conn.close()
    assert [(r["records"], r["parsed"], list(r["unknown"])) for r in led] == [
        (5, 4, ["ConversationStateUpdateEvent"])
    ]


def test_env_override_and_a_new_event(tmp_path):
    convs = tmp_path / "convs"
    shutil.copytree(HOME / ".openhands" / "conversations", convs)
    env = {"OH_CONVERSATIONS_PATH": str(convs)}
    store = tmp_path / "store"
    assert ingest(tmp_path / "nohome", store, agents="openhands", env=env).files_read == 1
    again = ingest(tmp_path / "nohome", store, agents="openhands", env=env)
    assert again.files_read == 0 and again.entries_new == 0  # the fingerprint did not change
    ev = {
        "id": "ev-6",
        "timestamp": "2026-01-05T08:01:00.000000",
        "source": "user",
        "kind": "MessageEvent",
        "llm_message": {"role": "user", "content": "thanks"},
    }
    (next(convs.iterdir()) / "events" / "event-00006-ev-6.json").write_text(json.dumps(ev))
    third = ingest(tmp_path / "nohome", store, agents="openhands", env=env)
    assert third.files_read == 1 and third.entries_new == 1

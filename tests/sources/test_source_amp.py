"""Amp: a generated thread (tests/fixtures/amp/make_fixtures.py; format facts in
ctxkeep/sources/amp.py): messages, thinking, a tool call and its result, the title as
the session's title, the project from the first tree's uri, usage per assistant
message, discovery through $AMP_DATA_DIR, a rewritten thread adding only what is new
and a truncated one marking the dropped messages rewound."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "amp" / "home"
TID = "T-019ca26f-aaaa-bbbb-cccc-dddddddddddd"
THREAD = HOME / ".local/share/amp/threads" / f"{TID}.json"


def test_thread_messages_tools_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="amp")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "amp") == {
        "user/message": 1,
        "assistant/message": 2,
        "assistant/thinking": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 3,  # the title and two usage rows
    }
    assert q(store, "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='amp'") == [
        (TID, "/work/demo")
    ]
    assert q(
        store,
        f"SELECT tool_name, native_id, {ENTRY_TEXT} FROM entries e WHERE agent='amp' AND kind='tool_call'",
    ) == [("Read", "toolu_01", '{"path":"main.go"}')]
    assert q(
        store, f"SELECT native_id, {ENTRY_TEXT} FROM entries e WHERE agent='amp' AND kind='tool_result'"
    ) == [("toolu_01", "package main")]
    assert q(
        store,
        "SELECT ts, model, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens FROM usage "
        "WHERE agent='amp' ORDER BY ts",
    ) == [
        ("2026-01-01T00:00:02.000000Z", "claude-sonnet-4-5", 10, 178, 986, 11372),
        ("2026-01-01T00:00:05.000000Z", "claude-sonnet-4-5", 40, 12, 0, 12358),
    ]
    # the user's message takes its sentAt time (epoch ms)
    assert q(store, "SELECT ts FROM entries WHERE agent='amp' AND role='user'") == [
        ("2026-01-01T00:00:00.500000Z",)
    ]


def test_title_is_the_session_title(tmp_path):
    from ctxkeep.query.sessions import list_sessions
    from ctxkeep.sinks import sqlite as sqlite_store

    store = tmp_path / "store"
    ingest(HOME, store, agents="amp")
    conn = sqlite_store.connect(store, readonly=True)
    try:
        rows, _ = list_sessions(conn, store, agents=["amp"])
    finally:
        conn.close()
    assert [(r.session_id, r.title) for r in rows] == [(TID, "Read main.go and fix the test")]


def test_discovery_env_override_and_rewrites(tmp_path):
    from ctxkeep.sources import amp
    from ctxkeep.sources.contract import DiscoveryContext

    data = tmp_path / "elsewhere"
    shutil.copytree(HOME / ".local/share/amp", data)
    d = amp.discover(
        DiscoveryContext(home=tmp_path / "nohome", env={"AMP_DATA_DIR": f"{data}, {tmp_path}/x"})
    )
    assert [f.path.name for f in d.files] == [f"{TID}.json"]
    assert d.searched == [data / "threads", tmp_path / "x" / "threads"]
    empty = amp.discover(DiscoveryContext(home=tmp_path / "nohome", env={}))
    assert empty.files == [] and "does not exist" in empty.reason

    store = tmp_path / "store"
    env = {"AMP_DATA_DIR": str(data)}
    ingest(tmp_path / "nohome", store, agents="amp", env=env)
    assert ingest(tmp_path / "nohome", store, agents="amp", env=env).entries_new == 0  # unchanged
    f = data / "threads" / f"{TID}.json"
    doc = json.loads(f.read_text())
    doc["messages"].append({"role": "user", "messageId": 4, "content": [{"type": "text", "text": "thanks"}]})
    f.write_text(json.dumps(doc))
    assert ingest(tmp_path / "nohome", store, agents="amp", env=env).entries_new == 1  # only the new message
    doc["messages"] = doc["messages"][:2]  # the thread edited back to its first turn
    f.write_text(json.dumps(doc))
    ingest(tmp_path / "nohome", store, agents="amp", env=env)
    assert q(
        store,
        "SELECT message_id, status FROM entries WHERE agent='amp' AND kind='message' ORDER BY CAST(message_id AS INT)",
    ) == [("0", "active"), ("1", "active"), ("3", "rewound"), ("4", "rewound")]

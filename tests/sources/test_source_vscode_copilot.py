"""VS Code Copilot Chat: a handmade workspace chat as a mutation log and an empty-window
chat as an older whole document (format facts in ctxkeep/sources/vscode_copilot.py) read
into prompts, Markdown answers, thinking, tool calls with their results, usage per
request, the workspace folder as project and the title; a turn that grows after an
ingest replaces its shorter copy; a pending turn waits; discovery through
``$VSCODE_COPILOT_DIR``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import ingest, q
from ctxkeep.sources import files_for_paths, vscode_copilot
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "vscode-copilot" / "home"
USER = HOME / ".config" / "Code" / "User"
SID = "3c9e7a12-5b4f-4d6e-9a8b-0c1d2e3f4a5b"
LOG = USER / "workspaceStorage" / "5f2d9a0c41b7e3" / "chatSessions" / f"{SID}.jsonl"


def test_messages_tool_calls_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="vscode-copilot")
    assert s.files_read == 2 and s.quarantined == 0
    assert kinds(store, "vscode-copilot") == {
        "user/message": 2,
        "assistant/message": 3,
        "assistant/thinking": 1,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/meta": 1,
    }
    assert q(
        store,
        f"SELECT role, kind, tool_name, native_id, {ENTRY_TEXT} FROM entries e WHERE session_id=? "
        "AND kind != 'meta' ORDER BY source_offset, role != 'user', rowid",
        SID,
    ) == [
        ("user", "message", None, None, "Why is the cart total off by a cent?"),
        ("assistant", "message", None, None, "Looking at `/home/dev/shop-api/cart.py`"),
        ("assistant", "thinking", None, None, "Float sums drift; the total should use Decimal."),
        ("assistant", "tool_call", "copilot_readFile", "call_read1", '{"message":"Reading cart.py"}'),
        ("tool", "tool_result", "copilot_readFile", "call_read1", "Read cart.py, lines 1 to 40"),
        (
            "assistant",
            "tool_call",
            "copilot_runInTerminal",
            "call_test1",
            '{"message":"Running pytest","command":"pytest -q tests/test_cart.py",'
            '"input":"pytest -q tests/test_cart.py"}',
        ),
        ("tool", "tool_result", "copilot_runInTerminal", "call_test1", "1 failed: 10.99 != 11.0"),
        # the streamed "The total su" was truncated away by a Push with i
        (
            "assistant",
            "message",
            None,
            None,
            "The total sums floats; use `Decimal` and round once at the end.",
        ),
    ]
    assert q(store, "SELECT DISTINCT project_dir FROM entries WHERE session_id=?", SID) == [
        ("/home/dev/shop-api",)
    ]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens FROM usage WHERE agent='vscode-copilot' ORDER BY 1",
    ) == [
        (SID, "claude-sonnet-4.5", 18250, 412),
        ("8d7c6b5a-4e3f-4a2b-9c1d-0e9f8a7b6c5d", "gpt-4.1-2025-04-14", 950, 64),
    ]
    assert q(store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='vscode-copilot' AND kind='meta'") == [
        ("Fix the cart total rounding",)
    ]
    assert ingest(HOME, store, agents="vscode-copilot").entries_new == 0


def _append(path: Path, *ops: dict) -> None:
    with open(path, "a") as f:
        for op in ops:
            f.write(json.dumps(op) + "\n")


def test_growing_turn_pending_turn_and_env_dir(tmp_path, monkeypatch):
    user = tmp_path / "User"
    shutil.copytree(USER, user)
    env = {"VSCODE_COPILOT_DIR": str(user)}
    nohome = tmp_path / "nohome"
    found = vscode_copilot.discover(DiscoveryContext(home=nohome, env=env)).files
    assert sorted(f.path.suffix for f in found) == [".json", ".jsonl"]
    store = tmp_path / "store"
    assert ingest(nohome, store, agents="vscode-copilot", env=env).entries_new == 11
    log = user / "workspaceStorage" / "5f2d9a0c41b7e3" / "chatSessions" / f"{SID}.jsonl"
    # a second turn starts: pending, so it waits while the file is fresh
    req = {
        "requestId": "request_2b",
        "timestamp": 1767600100000,
        "modelId": "copilot/claude-sonnet-4.5",
        "message": {"text": "Now add a test for it"},
        "response": [],
        "modelState": {"value": 0},
    }
    _append(log, {"kind": 2, "k": ["requests"], "v": [req]})
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "3600")
    assert ingest(nohome, store, agents="vscode-copilot", env=env).entries_new == 0
    # it completes; the first turn's answer grows too: its new copy replaces the old one
    _append(
        log,
        {"kind": 2, "k": ["requests", 1, "response"], "v": [{"value": "Added test_total_rounds_once."}]},
        {"kind": 1, "k": ["requests", 1, "modelState"], "v": {"value": 1}},
        {"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": " Done."}]},
    )
    assert ingest(nohome, store, agents="vscode-copilot", env=env).entries_new == 2 + 7
    assert q(
        store,
        "SELECT status, count(*) FROM entries e WHERE session_id=? GROUP BY 1 ORDER BY 1",
        SID,
    ) == [("active", 11), ("rewound", 7)]
    assert q(
        store,
        f"SELECT {ENTRY_TEXT} FROM entries e WHERE session_id=? AND status='active' AND role='user' ORDER BY ts",
        SID,
    ) == [("Why is the cart total off by a cent?",), ("Now add a test for it",)]


def test_path_claims_and_bad_log(tmp_path):
    files, problems = files_for_paths([LOG])
    assert problems == [] and [(f.agent, f.mode) for f in files] == [("vscode-copilot", "rewrite")]
    with pytest.raises(ValueError, match="no Initial"):
        vscode_copilot.replay('{"kind":1,"k":["a"],"v":1}\n')
    state, applied, skipped = vscode_copilot.replay(
        '{"kind":0,"v":{"a":[1,2,3]}}\nnot json\n{"kind":2,"k":["a"],"i":1,"v":[9]}\n'
    )
    assert (state, applied, skipped) == ({"a": [1, 9]}, 2, 1)
    # a torn line in a log: the rest is read, the line quarantined at its byte offset
    log = tmp_path / "User" / "workspaceStorage" / "h" / "chatSessions" / f"{SID}.jsonl"
    log.parent.mkdir(parents=True)
    good = LOG.read_bytes()
    log.write_bytes(good + b'{"kind":1,"k":["requests",0,"resu\n')
    store = tmp_path / "store"
    s = ingest(
        tmp_path / "nohome",
        store,
        agents="vscode-copilot",
        env={"VSCODE_COPILOT_DIR": str(tmp_path / "User")},
    )
    assert s.entries_new == 9 and s.quarantined == 1
    assert q(store, "SELECT offset, reason FROM quarantine")[0][0] == len(good)
    assert "mutation log line is not JSON" in q(store, "SELECT reason FROM quarantine")[0][0]
    d = vscode_copilot.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and d.searched[0] == tmp_path / ".config/Code/User/workspaceStorage"

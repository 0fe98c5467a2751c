"""Kiro IDE: a handmade workspace session (its index and execution log) and an older
``.chat`` file (format facts in ctxkeep/sources/kiro_ide.py) read into prompts, the
execution's text and tool actions with their results, the prompt-log fallback, the
IDE's context as ``meta``, the chat file's model and its project found by the
workspace hash; discovery through ``$KIRO_IDE_DIR``; an execution log written after its
session is picked up on the next run."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import kiro_ide
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import fixture_home
from helpers_sources import ENTRY_TEXT, kinds

SID = "7e6d5c4b-3a29-4817-a6b5-c4d3e2f1a0b9"
ROOT = Path(".config/Kiro/User/globalStorage/kiro.kiroagent")
CHAT = "e828acfc792e3bbcd2a6c6c35323cb44:9f8e7d6c5b4a39281706f5e4d3c2b1a0"


def test_workspace_session_execution_log_and_chat_file(tmp_path):
    store = tmp_path / "store"
    s = ingest(fixture_home("kiro-ide", tmp_path / "home"), store, agents="kiro-ide")
    # (and the workspace's ``sessions.json`` and the session's execution log: sidecars,
    # for the vault, no entries)
    assert s.files_read == 4 and s.quarantined == 0
    assert kinds(store, "kiro-ide") == {
        "user/message": 2,
        "assistant/message": 3,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/meta": 3,
    }
    rows = q(
        store,
        f"SELECT role, kind, native_id, tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='kiro-ide' "
        "AND session_id=? AND kind != 'meta' ORDER BY rowid",
        SID,
    )
    assert rows == [
        ("user", "message", "u1", None, "The cart total ignores discounts"),
        ("assistant", "tool_call", "act-1", "readCode", '{"file":"cart.py"}'),
        ("tool", "tool_result", "act-1", "readCode", "def total(items): ..."),
        ("assistant", "message", "a1", None, "The discount is never subtracted."),
        (
            "assistant",
            "tool_call",
            "act-3",
            "replace",
            '{"file":"cart.py","originalContent":"return s\\n","modifiedContent":"return s - d\\n"}',
        ),
        ("tool", "tool_result", "t1", None, "tests passed"),
        ("assistant", "message", "a2", None, "Done: discounts apply."),
    ]
    assert q(
        store,
        "SELECT DISTINCT project_dir, strftime('%Y-%m-%dT%H:%M:%S', ts) FROM entries WHERE agent='kiro-ide' "
        "AND session_id=?",
        SID,
    ) == [("/home/dev/shop", "2026-06-16T08:53:20")]
    assert q(
        store,
        f"SELECT role, kind, tool_name, model, {ENTRY_TEXT}, project_dir FROM entries e "
        "WHERE agent='kiro-ide' AND session_id=? ORDER BY rowid",
        CHAT,
    ) == [
        ("system", "meta", "context", None, "# System Prompt\nYou are Kiro.", "/home/dev/shop"),
        ("system", "meta", "context", None, "I will follow these instructions.", "/home/dev/shop"),
        ("user", "message", None, None, "Add a README", "/home/dev/shop"),
        ("assistant", "message", None, "claude-sonnet-4", "README added.", "/home/dev/shop"),
    ]
    assert q(store, "SELECT count(*) FROM usage WHERE agent='kiro-ide'") == [(0,)]


def test_env_dir_and_a_late_execution_log(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "3600")  # the session is live
    home = fixture_home("kiro-ide", tmp_path / "home")
    root = home / ROOT
    env = {"KIRO_IDE_DIR": str(root)}
    found = kiro_ide.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert sorted(f.path.name for f in found) == [
        f"{SID}.json",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0.chat",
        "b1c2d3e4f5",  # the execution log, a sidecar of the session that names exec-42
        "sessions.json",  # the index, a sidecar the folder's sessions share
    ]
    folder = next(root.glob("workspace-sessions/*"))
    session = next(root.glob(f"workspace-sessions/*/{SID}.json"))
    assert [f.meta for f in found if f.path.name == "sessions.json"] == [
        {"sidecar": "session-index", "sidecar_of": str(folder), "shared": True}
    ]
    assert [f.meta for f in found if f.path.name == "b1c2d3e4f5"] == [
        {"sidecar": "execution-log", "sidecar_of": str(session), "session": SID, "execution": "exec-42"}
    ]
    doc = json.loads(session.read_text())
    doc["history"] += [
        {"message": {"role": "user", "content": "And the tax?", "id": "u3"}},
        {"message": {"role": "assistant", "content": "", "id": "a3"}, "executionId": "exec-43"},
    ]
    session.write_text(json.dumps(doc))
    store = tmp_path / "store"
    assert ingest(tmp_path / "nohome", store, agents="kiro-ide", env=env).entries_new == 13
    log = next(root.glob("*/414d1636299d2b9e4ce7e17fb11f63e9"))
    (log / "c0ffee").write_text(
        json.dumps(
            {
                "executionId": "exec-43",
                "actions": [
                    {"actionId": "act-9", "actionType": "say", "output": {"message": "Tax is added too."}}
                ],
            }
        )
    )
    assert ingest(tmp_path / "nohome", store, agents="kiro-ide", env=env).entries_new == 1
    # the late log is discovered as the session's too (its history names exec-43)
    found = kiro_ide.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert {f.path.name: f.meta.get("execution") for f in found if f.path.parent == log} == {
        "b1c2d3e4f5": "exec-42",
        "c0ffee": "exec-43",
    }
    assert q(store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='kiro-ide' AND native_id='a3'") == [
        ("Tax is added too.",)
    ]


def test_empty_home_says_where_it_looked(tmp_path):
    d = kiro_ide.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and "kiro.kiroagent" in (d.reason or "")
    assert len(d.searched) == 3

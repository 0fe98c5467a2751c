"""Qwen Code, Continue, Cline, Roo Code and Kilo Code: agents with no real file in the
corpus, tested on the handmade fixtures in tests/fixtures/<agent>/ (see their README)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ingest, q
from ctxkeep.sources import SOURCES, cline, continue_dev, kilo_code, qwen_code, roo_code
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import kinds


def _home(tmp_path: Path, agent: str) -> Path:
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / agent / "home", home)
    old = time.time() - 3600
    for p in home.rglob("*"):
        os.utime(p, (old, old))
    return home


def test_qwen_code(tmp_path):
    home = _home(tmp_path, "qwen-code")
    d = qwen_code.discover(DiscoveryContext(home=home, env={}))
    assert [f.path.name for f in d.files] == ["7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f.jsonl"]
    store = tmp_path / "store"
    s = ingest(home, store, agents=["qwen-code"])
    assert s.quarantined == 0
    assert kinds(store, "qwen-code") == {
        "user/message": 1,
        "assistant/thinking": 1,
        "assistant/message": 2,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 1,
        "system/summary": 1,
    }
    assert q(store, "SELECT DISTINCT session_id, project_dir FROM entries") == [
        ("7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", "/home/dev/qwen-demo")
    ]
    assert q(store, "SELECT tool_name, native_id FROM entries WHERE kind='tool_call'") == [
        ("list_directory", "call_ls_1")
    ]
    # promptTokenCount includes the cached tokens (Gemini API semantics)
    assert q(
        store,
        "SELECT substr(ts,1,10), model, sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
        "sum(reasoning_tokens) FROM usage GROUP BY 1, 2",
    ) == [("2026-02-10", "qwen3-coder-plus", (12000 - 8000) + (12100 - 11900), 60 + 20, 8000 + 11900, 12)]
    assert q(
        store,
        "SELECT count(*) FROM entries e JOIN contents c USING(content_hash) JOIN chunks "
        "USING(content_id) WHERE text = '目录里有 README.md 和 src/。'",
    ) == [(1,)]


def test_qwen_env_overrides(tmp_path):
    home = _home(tmp_path, "qwen-code")
    alt = tmp_path / "alt-qwen"
    shutil.move(str(home / ".qwen"), alt)
    d = qwen_code.discover(DiscoveryContext(home=home, env={"QWEN_HOME": str(alt)}))
    assert len(d.files) == 1 and d.files[0].path.is_relative_to(alt)


def test_continue_sessions(tmp_path):
    home = _home(tmp_path, "continue")
    d = continue_dev.discover(DiscoveryContext(home=home, env={}))
    assert sorted(f.path.name for f in d.files) == ["c-new.json", "c-old.json"]  # not sessions.json
    store = tmp_path / "store"
    s = ingest(home, store, agents=["continue"])
    assert s.quarantined == 0
    by_session = dict(q(store, "SELECT session_id, count(*) FROM entries GROUP BY 1"))
    # c-old: user, context item, assistant, title; c-new: user, thinking, tool call,
    # tool result (the role "tool" message; the toolCallStates copy is not repeated),
    # final answer, title
    assert by_session == {"c-old": 4, "c-new": 6}
    assert kinds(store, "continue") == {
        "user/message": 2,
        "user/meta": 1,
        "assistant/message": 2,
        "assistant/thinking": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 2,
    }
    assert dict(q(store, "SELECT session_id, project_dir FROM entries WHERE tool_name='title'")) == {
        "c-old": "/home/dev/tools",
        "c-new": "/home/dev/webapp",
    }
    assert q(
        store, "SELECT input_tokens, output_tokens, cache_read_tokens FROM usage ORDER BY usage_key"
    ) == [(5200 - 4096, 48, 4096), (5400 - 5120, 30, 5120)]
    assert q(store, "SELECT tool_name FROM entries WHERE kind='tool_call'") == [
        ("builtin_run_terminal_command",)
    ]


def test_continue_edited_history_marks_old_turns(tmp_path):
    home = _home(tmp_path, "continue")
    store = tmp_path / "store"
    ingest(home, store, agents=["continue"])
    p = home / ".continue" / "sessions" / "c-old.json"
    doc = json.loads(p.read_text())
    doc["history"][1]["message"]["content"] = "It matches a 7-digit phone number like 555-1234."
    p.write_text(json.dumps(doc))
    s = ingest(home, store, agents=["continue"])
    assert s.entries_new == 1  # only the regenerated answer
    assert s.status_changed == 1
    # the first answer stays searchable, out of the active entries
    assert q(
        store,
        "SELECT status, count(*) FROM entries WHERE session_id='c-old' AND role='assistant' "
        "GROUP BY 1 ORDER BY 1",
    ) == [("active", 1), ("rewound", 1)]


@pytest.mark.parametrize(
    "agent, mod, task, project, usage",
    [
        (
            "cline",
            cline.SOURCE,
            "1733050000000",
            "/home/dev/webapp",
            [
                ("claude-3-5-sonnet-20241022", 3, 120, 9120, 0),
                ("claude-3-5-sonnet-20241022", 4, 210, 350, 9120),
                ("claude-3-5-sonnet-20241022", 2, 15, 0, 9470),
            ],
        ),
        (
            "roo-code",
            roo_code.SOURCE,
            "0f8e2b1c-6a43-4d7e-9a51-2d2c1b7e9f10",
            "/Users/dev/api",
            [(None, 5400, 80, 0, 1024), (None, 610, 95, 0, 5376)],
        ),
        (
            "kilo-code",
            kilo_code.SOURCE,
            "5b6c7d8e-0000-4000-8000-00000000kilo",
            None,
            [(None, 1200, 40, 1100, 0)],
        ),
    ],
)
def test_cline_family_tasks(tmp_path, agent, mod, task, project, usage):
    home = _home(tmp_path, agent)
    d = mod.discover(DiscoveryContext(home=home, env={"APPDATA": str(home / "AppData" / "Roaming")}))
    # (Cline's fixture keeps ``task_metadata.json`` too: a sidecar of the history)
    names = ["api_conversation_history.json", "ui_messages.json"]
    assert sorted(f.path.name for f in d.files) == sorted(
        names + (["task_metadata.json"] if agent == "cline" else [])
    )
    assert all(f.meta["task"] == task for f in d.files)
    store = tmp_path / "store"
    s = ingest(home, store, env={"APPDATA": str(home / "AppData" / "Roaming")}, agents=[agent])
    assert s.quarantined == 0
    hist = json.loads(
        next(f.path for f in d.files if f.path.name == "api_conversation_history.json").read_text()
    )
    n_tool_use = sum(
        1
        for m in hist
        for b in (m.get("content") if isinstance(m.get("content"), list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    k = kinds(store, agent)
    assert k["assistant/tool_call"] == n_tool_use
    assert k["tool/tool_result"] == n_tool_use
    assert q(store, "SELECT DISTINCT session_id FROM entries") == [(task,)]
    assert q(
        store, "SELECT DISTINCT project_dir FROM entries WHERE source_path LIKE '%api_conversation%'"
    ) == [(project,)]
    got = q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens "
        "FROM usage ORDER BY ts",
    )
    assert got == usage


def test_cline_counts_and_timestamps(tmp_path):
    home = _home(tmp_path, "cline")
    store = tmp_path / "store"
    ingest(home, store, agents=["cline"])
    assert kinds(store, "cline") == {
        "user/message": 2,
        "assistant/message": 3,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/meta": 4,
    }
    # no per-message ts in Cline's history: the task id (ms) is the time
    assert q(store, "SELECT DISTINCT ts FROM entries WHERE source_path LIKE '%api_conversation%'") == [
        ("2024-12-01T10:46:40.000000Z",)
    ]
    denied = q(
        store,
        "SELECT text FROM entries e JOIN contents c USING(content_hash) JOIN chunks USING(content_id) "
        "WHERE kind='tool_result' AND native_id='toolu_01B'",
    )
    assert denied == [("[error] The user denied this operation.",)]


def test_roo_reasoning_summary_and_ts(tmp_path):
    home = _home(tmp_path, "roo-code")
    store = tmp_path / "store"
    ingest(home, store, agents=["roo-code"])
    assert kinds(store, "roo-code") == {
        "user/message": 2,
        "assistant/thinking": 1,
        "assistant/message": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "assistant/summary": 1,
        "system/meta": 2,
    }
    assert q(store, "SELECT min(ts), max(ts) FROM entries WHERE source_path LIKE '%api_conversation%'") == [
        ("2025-01-15T10:00:00.000000Z", "2025-01-15T10:00:04.000000Z")
    ]


def test_truncated_task_history_marks_rewound_and_keeps_new(tmp_path):
    home = _home(tmp_path, "cline")
    store = tmp_path / "store"
    ingest(home, store, agents=["cline"])
    p = next(home.rglob("api_conversation_history.json"))
    hist = json.loads(p.read_text())
    # checkpoint restore to after message 2, then a different answer at index 3
    hist = hist[:3] + [
        {"role": "assistant", "content": [{"type": "text", "text": "Let me check the router instead."}]}
    ]
    p.write_text(json.dumps(hist))
    s = ingest(home, store, agents=["cline"])
    assert s.entries_new == 1
    assert q(store, "SELECT count(DISTINCT message_id) FROM entries WHERE status='rewound'") == [(3,)]
    assert q(
        store, "SELECT count(*) FROM entries WHERE status='active' AND source_path LIKE '%api_conversation%'"
    ) == [(6,)]


def test_vscode_dirs_cover_three_platforms_and_apps():
    from ctxkeep.sources.vscode_family import user_dirs

    dirs = {
        str(p)
        for p in user_dirs(DiscoveryContext(home=Path("/h"), env={"APPDATA": "C:/Users/u/AppData/Roaming"}))
    }
    for app in ("Code", "Cursor", "Windsurf"):
        assert f"/h/.config/{app}/User" in dirs
        assert f"/h/Library/Application Support/{app}/User" in dirs
        assert f"C:/Users/u/AppData/Roaming/{app}/User" in dirs


def test_all_file_agents_registered_with_matches():
    for name in (
        "gemini-cli",
        "copilot-cli",
        "qwen-code",
        "continue",
        "cline",
        "roo-code",
        "kilo-code",
        "aider",
        "specstory",
    ):
        mod = SOURCES[name]
        assert name == mod.AGENT and callable(mod.matches) and mod.PARSER_VERSION >= 1


def test_qwen_legacy_gemini_style_json(tmp_path):
    """Older Qwen Code (a Gemini CLI fork) wrote Gemini's JSON documents under
    ~/.qwen/tmp/<hash>/chats/: read with the Gemini mapping, stored as qwen-code."""
    from conftest import corpus

    src = corpus(
        ".gemini/tmp/3f1c0a6c9e5b4d2f8a7e6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e/chats/"
        "session-2025-12-08T17-35-9fae96a8.json"
    )
    home = tmp_path / "home"
    dst = home / ".qwen" / "tmp" / "abc" / "chats" / src.name
    dst.parent.mkdir(parents=True)
    shutil.copy(src, dst)
    d = qwen_code.discover(DiscoveryContext(home=home, env={}))
    assert [(f.path, f.mode) for f in d.files] == [(dst, "rewrite")]
    store = tmp_path / "store"
    ingest(home, store, agents=["qwen-code"])
    assert q(store, "SELECT agent, tool_name, count(*) FROM entries GROUP BY 1, 2 ORDER BY 2") == [
        ("qwen-code", "error", 1),
        ("qwen-code", "info", 1),
    ]


def test_unknown_record_types_become_meta(tmp_path):
    home = tmp_path / "home"
    g = home / ".gemini" / "tmp" / "p" / "chats" / "session-z.jsonl"
    g.parent.mkdir(parents=True)
    g.write_text(
        json.dumps({"sessionId": "s-z", "projectHash": "h"})
        + "\n"
        + json.dumps(
            {"id": "m1", "type": "plan_update", "timestamp": "2026-06-01T00:00:00Z", "content": "step 2 of 3"}
        )
        + "\n"
        + json.dumps({"$checkpoint": {"n": 1}})
        + "\n"
    )
    c = home / ".copilot" / "session-state" / "s1" / "events.jsonl"
    c.parent.mkdir(parents=True)
    c.write_text(
        json.dumps(
            {
                "type": "session.start",
                "data": {"sessionId": "s1"},
                "id": "e1",
                "timestamp": "2026-06-01T00:00:00Z",
            }
        )
        + "\n"
        + json.dumps(
            {
                "type": "assistant.hologram",
                "data": {"message": "new in v9"},
                "id": "e2",
                "timestamp": "2026-06-01T00:00:01Z",
            }
        )
        + "\n"
    )
    store = tmp_path / "store"
    s = ingest(home, store, agents=["gemini-cli", "copilot-cli"])
    assert s.quarantined == 0
    assert q(store, "SELECT agent, kind, tool_name FROM entries ORDER BY agent, source_offset") == [
        ("copilot-cli", "meta", "session.start"),
        ("copilot-cli", "meta", "assistant.hologram"),
        ("gemini-cli", "meta", "plan_update"),
        ("gemini-cli", "meta", "unknown-record"),
    ]


def test_path_option_finds_task_files(tmp_path):
    from ctxkeep.sources import files_for_paths

    home = _home(tmp_path, "roo-code")
    files, problems = files_for_paths([home / "Library"])
    assert problems == []
    assert sorted((f.agent, f.path.name, f.mode) for f in files) == [
        ("roo-code", "api_conversation_history.json", "rewrite"),
        ("roo-code", "ui_messages.json", "rewrite"),
    ]

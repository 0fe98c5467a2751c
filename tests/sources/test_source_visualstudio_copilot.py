"""Visual Studio Copilot: a handmade OTLP trace file (format facts in
ctxkeep/sources/visual_studio_copilot.py) holding two conversations read into
sessions by conversation id: the turn, its prompt stored once although every chat
call repeats it, a tool call named by the chat output and by its execution stored
once with its result, answers, usage per chat span with the response model, the
Visual Studio build as the ledger's version; appended lines arrive once; a span of no
conversation is not stored."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import files_for_paths, visual_studio_copilot
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "visualstudio-copilot" / "home"
TRACES = HOME / ".cache" / "VSGitHubCopilotLogs" / "traces"
A = "7e2f4c1a-9b3d-4e5f-8a6b-1c2d3e4f5a6b"
B = "0f9e8d7c-6b5a-4f3e-9d2c-1b0a9f8e7d6c"


def test_conversations_tool_calls_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="visualstudio-copilot")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "visualstudio-copilot") == {
        "system/meta": 3,  # two turns, the usage of the call that only asked for a tool
        "user/message": 2,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "assistant/message": 2,
    }
    assert q(
        store,
        f"SELECT role, kind, tool_name, native_id, {ENTRY_TEXT} FROM entries e WHERE session_id=? "
        "AND kind != 'meta' ORDER BY ts, kind",
        A,
    ) == [
        ("user", "message", None, "aa00000000000002", "Make Parse() return null on empty input"),
        ("assistant", "tool_call", "get_file", "call_p1", '{"path":"src/Parser.cs"}'),
        (
            "tool",
            "tool_result",
            "get_file",
            "call_p1",
            "public static Node Parse(string s) => new Lexer(s).Read();",
        ),
        (
            "assistant",
            "message",
            None,
            "aa00000000000004",
            "Parse now returns null when the input is empty or whitespace.",
        ),
    ]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens FROM usage WHERE agent='visualstudio-copilot' "
        "ORDER BY input_tokens",
    ) == [
        (B, "gpt-5.5", 800, 41),
        (A, "gpt-5.5-2026-03-05", 5210, 38),
        (A, "gpt-5.5-2026-03-05", 5600, 95),
    ]
    assert q(
        store, "SELECT DISTINCT session_id FROM entries WHERE agent='visualstudio-copilot' ORDER BY 1"
    ) == [
        (B,),
        (A,),
    ]
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        led = [
            (r["agent_version"], r["records"], r["parsed"])
            for r in sqlite_store.coverage_ledger(conn, ["visualstudio-copilot"])
        ]
    finally:
        conn.close()
    assert led == [("18.6.11822.322", 4, 4)]


def test_appended_lines_arrive_once_and_env_dir(tmp_path):
    traces = tmp_path / "traces"
    shutil.copytree(TRACES, traces)
    env = {"VISUALSTUDIO_COPILOT_DIR": str(traces)}
    nohome = tmp_path / "nohome"
    d = visual_studio_copilot.discover(DiscoveryContext(home=nohome, env=env))
    assert [f.path.parent for f in d.files] == [traces]
    store = tmp_path / "store"
    assert ingest(nohome, store, agents="visualstudio-copilot", env=env).entries_new == 9
    f = d.files[0].path
    lines = f.read_text().splitlines(keepends=True)
    with open(f, "a") as out:
        out.write(lines[2])  # the same chat span written again: nothing new
        out.write(lines[1].replace("call_p1", "call_p2").replace("aa00000000000003", "aa00000000000005"))
    assert ingest(nohome, store, agents="visualstudio-copilot", env=env).entries_new == 2
    assert ingest(nohome, store, agents="visualstudio-copilot", env=env).entries_new == 0


def test_path_claims_and_empty_home(tmp_path):
    files, problems = files_for_paths([TRACES])
    assert problems == [] and [f.agent for f in files] == ["visualstudio-copilot"]
    session = tmp_path / "Sln" / ".vs" / "Sln" / "copilot-chat" / "t1" / "sessions" / A
    session.parent.mkdir(parents=True)
    shutil.copyfile(next(TRACES.iterdir()), session)
    assert visual_studio_copilot.matches(session)
    found = visual_studio_copilot.discover(
        DiscoveryContext(home=tmp_path, env={}, extra_dirs=[tmp_path / "Sln"])
    )
    assert [x.path for x in found.files] == [session]
    d = visual_studio_copilot.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and d.searched[0] == tmp_path / ".cache/VSGitHubCopilotLogs/traces"

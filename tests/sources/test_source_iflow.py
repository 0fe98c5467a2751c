"""iFlow: a handmade transcript (format facts in ctxkeep/sources/iflow.py) read into
prompts, tool calls (the streaming snapshots' repeats once), functionResponse results,
usage and meta lines; discovery through ``$IFLOW_DIR``; appended lines read
incrementally."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import iflow
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "iflow" / "home"
SID = "7a1c0e52-0d3f-4b7e-9a11-2f4c6b8d9e01"
_TEXT = (
    "SELECT e.native_id, e.tool_name, ch.text FROM entries e JOIN contents c USING (content_hash) "
    "JOIN chunks ch ON ch.content_id = c.content_id AND ch.seq = 0 WHERE e.agent = 'iflow' "
)


def test_messages_tool_calls_results_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="iflow")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "iflow") == {
        "user/message": 1,
        "assistant/message": 2,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/meta": 2,
    }
    assert q(store, "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='iflow'") == [
        (SID, "/home/dev/todo-app")
    ]
    calls = q(
        store,
        _TEXT + "AND e.kind='tool_call' ORDER BY e.native_id",
    )
    assert calls == [
        ("call_a", "read_file", '{"absolute_path":"/home/dev/todo-app/cli.py"}'),
        ("call_b", "search_file_content", '{"pattern":"def list_"}'),
    ]
    results = q(
        store,
        _TEXT + "AND e.kind='tool_result' ORDER BY e.native_id",
    )
    assert results == [
        ("call_a", "read_file", "import argparse\n\ndef list_items(args):\n    ..."),
        ("call_b", None, "cli.py:3: def list_items(args):"),
    ]
    assert q(
        store,
        "SELECT model, input_tokens, output_tokens FROM usage WHERE agent='iflow' ORDER BY input_tokens",
    ) == [("glm-4.7", 1200, 80), ("glm-4.7", 1500, 40)]
    assert q(
        store, "SELECT tool_name FROM entries WHERE agent='iflow' AND kind='meta' ORDER BY tool_name"
    ) == [("checkpoint",), ("injected",)]
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        led = sqlite_store.coverage_ledger(conn, ["iflow"])
    finally:
        conn.close()
    # the checkpoint line names no version (tallied under the last one seen) and is a
    # type not understood: stored as meta, not counted as parsed
    assert [(r["agent_version"], r["records"], r["parsed"], list(r["unknown"])) for r in led] == [
        ("1.0.0", 8, 7, ["checkpoint"])
    ]


def test_env_dir_subagent_and_incremental_append(tmp_path):
    projects = tmp_path / "projects"
    shutil.copytree(HOME / ".iflow/projects", projects)
    env = {"IFLOW_DIR": str(projects)}
    found = iflow.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert [f.path.name for f in found] == [f"session-{SID}.jsonl"]
    store = tmp_path / "store"
    assert ingest(tmp_path, store, agents="iflow", env=env).entries_new == 9
    conv = found[0].path
    with conv.open("a") as f:
        f.write(
            '{"uuid":"u9","parentUuid":"a3","sessionId":"session-' + SID + '","type":"user",'
            '"timestamp":"2026-03-02T10:01:00Z","message":{"role":"user","content":"Run the tests."}}\n'
        )
    child = conv.parent / "session-0b9e4c2a-1111-4222-8333-944455556666.jsonl"
    child.write_text(
        '{"uuid":"c1","parentUuid":null,"sessionId":"session-' + SID + '","type":"user",'
        '"timestamp":"2026-03-02T10:00:06Z","message":{"role":"user","content":"Find list_items."}}\n'
    )
    s = ingest(tmp_path, store, agents="iflow", env=env)
    assert s.entries_new == 2
    assert q(store, "SELECT count(*) FROM entries WHERE agent='iflow' AND role='user'") == [(3,)]
    assert q(
        store,
        "SELECT session_id, parent_session_id FROM entries WHERE agent='iflow' AND parent_session_id IS NOT NULL",
    ) == [("0b9e4c2a-1111-4222-8333-944455556666", SID)]


def test_empty_home_says_where_it_looked(tmp_path):
    d = iflow.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".iflow/projects" in (d.reason or "")

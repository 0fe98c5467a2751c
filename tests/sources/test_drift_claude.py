"""Format drift of Claude Code (issue 25, item 2): workflow sub-agents, and two lines
with one uuid. Fixtures: tests/fixtures/drift/claude (README.md there names the
sources of each format fact)."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT

FIX = Path(__file__).parent.parent / "fixtures" / "drift" / "claude"
WF_SESSION = "5e55a000-0000-4000-8000-00000000000a"
DUP_SESSION = "5e55d000-0000-4000-8000-00000000000d"


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(FIX, home / ".claude")
    return home


def test_workflow_subagents_are_discovered_as_sub_sessions(tmp_path, store_home):
    from ctxkeep.sources import claude_code
    from ctxkeep.sources.contract import DiscoveryContext

    home = _home(tmp_path)
    d = claude_code.discover(DiscoveryContext(home=home, env={}))
    from ctxkeep.sources.readers.sidecar import SIDECAR, is_sidecar

    wf = [f for f in d.files if "workflows" in f.path.parts and not is_sidecar(f)]
    # the transcript only: journal.jsonl and the .meta.json are sidecars (vaulted with
    # the session, session 21), not sessions
    assert [f.path.name for f in wf] == ["agent-a7748a49cbfabf1b6.jsonl"]
    side = sorted(
        (f.path.name, f.meta[SIDECAR]) for f in d.files if "workflows" in f.path.parts and is_sidecar(f)
    )
    assert side == [
        ("agent-a7748a49cbfabf1b6.meta.json", "workflow-meta"),
        ("journal.jsonl", "workflow-journal"),
    ]
    assert wf[0].meta == {
        "subagent": "a7748a49cbfabf1b6",
        "parent_session": WF_SESSION,
        "workflow_run": "wf_1a2b3c4d-5e6",
    }
    ingest(home, store_home, "claude-code")
    rows = q(
        store_home,
        f"SELECT session_id, parent_session_id, role, {ENTRY_TEXT} FROM entries e WHERE session_id = ? ORDER BY ts",
        "agent-a7748a49cbfabf1b6",
    )
    assert rows == [
        ("agent-a7748a49cbfabf1b6", WF_SESSION, "user", "Reconnoiter the corpus"),
        ("agent-a7748a49cbfabf1b6", WF_SESSION, "assistant", "Found 3 files."),
    ]


def test_a_workflow_subagent_given_with_path_keeps_its_parent(tmp_path):
    from ctxkeep.sources import files_for_paths

    home = _home(tmp_path)
    p = next(home.rglob("agent-a7748a49cbfabf1b6.jsonl"))
    files, problems = files_for_paths([p])
    assert problems == [] and [(f.agent, f.meta["parent_session"]) for f in files] == [
        ("claude-code", WF_SESSION)
    ]


def test_two_lines_with_one_uuid_keep_the_valid_copy_and_quarantine_the_other(tmp_path, store_home):
    home = _home(tmp_path)
    s = ingest(home, store_home, "claude-code")
    texts = [
        r[0]
        for r in q(
            store_home,
            f"SELECT {ENTRY_TEXT} FROM entries e WHERE session_id = ? AND kind = 'message' ORDER BY ts",
            DUP_SESSION,
        )
    ]
    # 1: the first copy lacks its message (damaged): the later valid copy is kept
    # 2: two valid copies: the first is kept, the later one is quarantined, not dropped silently
    # 3: the first copy holds invalid UTF-8 (repaired leniently): the clean copy is kept
    assert texts == ["the valid copy of the first prompt", "second prompt", "third prompt café"]
    dups = q(
        store_home,
        "SELECT offset, reason FROM quarantine WHERE reason LIKE 'duplicate record id%' ORDER BY offset",
    )
    raw = (home / f".claude/projects/-work-demo/{DUP_SESSION}.jsonl").read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(raw) if b == 10][:-1]
    assert [o for o, _ in dups] == [starts[0], starts[3], starts[4]]
    assert "a damaged copy; the valid copy at offset" in dups[0][1]
    assert f"another copy of the record at offset {starts[2]}, which is kept" in dups[1][1]
    assert s.quarantined >= 3
    # the ledger counts the set-aside copies as quarantined, not parsed
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        row = next(
            r for r in sqlite_store.coverage_ledger(conn, ["claude-code"]) if r["agent_version"] == "2.1.140"
        )
    finally:
        conn.close()
    assert (row["records"], row["quarantined"], row["parsed"]) == (10, 3, 7)

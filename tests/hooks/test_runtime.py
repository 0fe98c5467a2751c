"""The hook runtime (`ctxkeep hook …`) run as the agents run it: a subprocess with the
agent's JSON on stdin, against a copy of the corpus store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import CORPUS_HOME

CLAUDE = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
TRANSCRIPT = CORPUS_HOME / ".claude/projects/-experiments-worktrees" / f"{CLAUDE}.jsonl"
CTXKEEP = [sys.executable, "-m", "ctxkeep"]


def _hook(store, args, payload, **env):
    e = {**os.environ, "CTXKEEP_HOME": str(store), **env}
    t0 = time.perf_counter()
    p = subprocess.run(
        [*CTXKEEP, "hook", *args],
        input=payload if isinstance(payload, str) else json.dumps(payload),
        capture_output=True,
        text=True,
        env=e,
        timeout=60,
    )
    return p, time.perf_counter() - t0


def _log(store) -> str:
    return (store / "hooks.log").read_text()


def test_session_start_compact_prints_the_snapshot(store):
    if not TRANSCRIPT.exists():
        pytest.skip("corpus missing")
    payload = {
        "session_id": CLAUDE,
        "transcript_path": str(TRANSCRIPT),
        "cwd": "-experiments/worktrees",
        "hook_event_name": "SessionStart",
        "source": "compact",
    }
    p, secs = _hook(store, ["claude-code", "session-start"], payload)
    print(f"SessionStart hook (compact) on the corpus store: {secs:.2f} s wall")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    ctx = out["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart"
    assert ctx["additionalContext"].startswith(f"# Resume: claude-code session {CLAUDE}")
    assert "Well, the subagents seem to be either stuck or done... can you check?" in ctx["additionalContext"]
    # a startup is not a resume: ingest only, nothing printed
    p, _ = _hook(store, ["claude-code", "session-start"], {**payload, "source": "startup"})
    assert p.returncode == 0 and p.stdout == ""


def test_precompact_and_session_end_ingest_only_that_transcript(store):
    payload = {"session_id": CLAUDE, "transcript_path": str(TRANSCRIPT), "trigger": "auto"}
    for ev in ("precompact", "session-end"):
        p, _ = _hook(store, ["claude-code", ev], payload)
        assert p.returncode == 0 and p.stdout == ""
    log = _log(store)
    assert "claude-code precompact: ingested" in log and "claude-code session-end: ingested" in log


def test_bad_input_never_fails_the_agent(store):
    cases = [
        (["claude-code", "session-end"], {"session_id": "x", "transcript_path": "/no/such/file.jsonl"}),
        (["claude-code", "precompact"], "this is not json"),
        (["claude-code", "nope"], {}),
        (["gemini-cli", "BeforeTool"], {"session_id": "x"}),
        (["codex", "notify", json.dumps({"type": "agent-turn-complete", "thread-id": "no-such-thread"})], ""),
    ]
    for args, payload in cases:
        p, _ = _hook(store, args, payload, CODEX_HOME=str(store / "no-codex"))
        assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), args
    log = _log(store)
    assert "no transcript at '/no/such/file.jsonl'" in log
    assert "precompact: error: json.decoder.JSONDecodeError" in log
    assert "unknown Claude Code event nope" in log
    assert "gemini-cli BeforeTool: skipped" in log
    assert "no rollout for thread no-such-thread" in log


def test_timeout_exits_zero_and_logs(store):
    payload = {"session_id": CLAUDE, "transcript_path": str(TRANSCRIPT), "source": "compact"}
    p, _ = _hook(store, ["claude-code", "session-start", "--timeout", "0.0001"], payload)
    assert (p.returncode, p.stdout) == (0, "")
    assert "session-start: timeout: gave up after" in _log(store)


def test_codex_notify_ingests_the_thread_rollout(store):
    tid = "c61729d4-da6d-46a4-9a29-ec2c614e5e23"
    note = json.dumps({"type": "agent-turn-complete", "thread-id": tid, "turn-id": "1", "cwd": "/x"})
    p, _ = _hook(store, ["codex", "notify", note], "", CODEX_HOME=str(CORPUS_HOME / ".codex"))
    assert (p.returncode, p.stdout) == (0, "")
    assert f"rollout-2025-10-31T19-02-58-{tid}.jsonl" in _log(store)


def _store_sessions(store, sql, args=()):
    import sqlite3

    conn = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_session_start_resumes_only_its_agents_sessions_of_that_project(store):
    """A SessionStart hook resumes a session of its own agent and of the project
    ``cwd`` names exactly: never a Codex session of ``/tmp/repo`` for a Claude Code
    session in ``/tmp``, nothing for a new id in a project with no stored session."""
    rows = _store_sessions(
        store,
        "SELECT e.agent, p.project_dir, e.session_id, max(e.ts) FROM entry_rows e JOIN projects p "
        "USING (project_id) WHERE e.parent_session_id IS NULL AND e.ts IS NOT NULL "
        "AND p.project_dir IN ('/tmp', '/tmp/repo') "
        "GROUP BY 1, 2, 3",
    )
    by = {}
    for agent, proj, sid, ts in rows:
        by.setdefault((agent, proj), []).append((ts, sid))
    assert ("codex", "/tmp/repo") in by and ("claude-code", "/tmp") in by, rows
    assert ("claude-code", "/tmp/repo") not in by
    newest_claude_tmp = max(by[("claude-code", "/tmp")])[1]
    base = {"transcript_path": "/nonexistent.jsonl", "session_id": "abcd-new", "hook_event_name": "SessionStart",
            "source": "resume"}  # fmt: skip
    for cwd in ("/tmp/repo", "/tmp/h9-new-project", None):
        payload = {**base, "cwd": cwd} if cwd else base
        p, _ = _hook(store, ["claude-code", "session-start"], payload)
        assert (p.returncode, p.stdout) == (0, ""), (cwd, p.stdout[:300])
    assert "no stored claude-code session 'abcd-new' and none of project '/tmp/repo'" in _log(store)
    p, _ = _hook(store, ["claude-code", "session-start"], {**base, "cwd": "/tmp/"})
    md = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    assert md.startswith(f"# Resume: claude-code session {newest_claude_tmp}\nproject /tmp;"), md[:200]
    # a known id of another agent is not this agent's session either
    codex_sid = by[("codex", "/tmp/repo")][0][1]
    p, _ = _hook(
        store, ["claude-code", "session-start"], {**base, "session_id": codex_sid, "cwd": "/tmp/repo"}
    )
    assert (p.returncode, p.stdout) == (0, "")


def test_codex_notify_ingests_only_the_rollout_of_that_exact_thread(store):
    """A part of a thread id (``5e23``, the last group ``ec2c614e5e23``) or a glob
    pattern never picks another thread's rollout."""
    for tid in ("5e23", "ec2c614e5e23", "*", "../*"):
        note = json.dumps({"type": "agent-turn-complete", "thread-id": tid})
        p, _ = _hook(store, ["codex", "notify", note], "", CODEX_HOME=str(CORPUS_HOME / ".codex"))
        assert (p.returncode, p.stdout) == (0, "")
        assert f"no rollout for thread {tid}" in _log(store), tid
    assert "rollout-2025-10-31T19-02-58" not in _log(store)

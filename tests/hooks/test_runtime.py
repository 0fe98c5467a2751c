"""The hook runtime (`ctxkeep hook …`) run as the agents run it: a subprocess with the
agent's JSON on stdin, against a copy of the corpus store. A hook queues its ingest for
a detached worker (``hooks.worker``); ``_settle`` waits for the worker before the log
or the store is read."""

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


def _settle(store) -> None:
    """Wait until the store's hook worker has worked off its queue."""
    from ctxkeep.hooks import worker

    assert worker.wait_idle(store, 60), "the hook worker did not finish in 60 s"


def _log(store) -> str:
    _settle(store)
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
    assert "precompact: error: the hook's input is not JSON (Expecting value at character 0)" in log
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


# -- the detached ingest (hooks.worker) --------------------------------------------


def _new_session(tmp_path, n: int, start=None):
    """A Claude Code session file of ``n`` handmade lines no store holds
    (``session_lines.claude_lines``); returns (session id, path, the lines)."""
    import datetime as dt
    import uuid

    from session_lines import claude_lines

    sid = str(uuid.uuid4())
    lines = claude_lines(sid, n, start or dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC))
    path = tmp_path / "sessions" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return sid, path, lines


def _append(path, lines) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _stored(store, sid: str) -> int:
    return _store_sessions(store, "SELECT count(*) FROM entries WHERE session_id = ?", (sid,))[0][0]


def test_the_hook_queues_the_ingest_and_a_detached_worker_stores_the_new_lines(store, tmp_path):
    sid, path, lines = _new_session(tmp_path, 10)
    _append(path, lines)
    p, _ = _hook(store, ["claude-code", "precompact"], {"session_id": sid, "transcript_path": str(path)})
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    log = (store / "hooks.log").read_text()  # the hook's own line, written before it returned
    assert f"claude-code precompact: queued: ingest of {path} queued (a worker started)" in log
    _settle(store)
    assert _stored(store, sid) == 10
    assert f"claude-code precompact: ingested: ingested 10 new entries from {path}" in _log(store)
    assert not (store / "hook-queue.jsonl").read_bytes()  # worked off


def test_claude_codes_stop_hook_stores_each_response_of_a_running_session(store, tmp_path):
    """newuser20 F1: a long Claude Code session was searchable only at its end or a
    compaction. ``Stop`` fires after each response (stdin ``session_id``,
    ``transcript_path``, ``stop_hook_active``): each turn is stored by the next worker,
    the hook prints nothing (any stdout or exit 2 would make Claude Code go on)."""
    sid, path, lines = _new_session(tmp_path, 10)
    payload = {
        "session_id": sid,
        "transcript_path": str(path),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    stored: list[int] = []
    for lo, hi in ((0, 4), (4, 10)):  # two responses, the file growing between them
        _append(path, lines[lo:hi])
        p, _ = _hook(store, ["claude-code", "stop"], payload)
        assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
        _settle(store)
        stored.append(_stored(store, sid))
    assert stored == [4, 10]
    log = _log(store)
    assert f"claude-code stop: ingested: ingested 4 new entries from {path}" in log
    assert f"claude-code stop: ingested: ingested 6 new entries from {path}" in log


def test_triggers_while_a_worker_runs_are_queued_once_never_a_second_ingest(store, tmp_path):
    """While a worker holds the store's worker lock, hooks only queue ("run again");
    the worker then ingests the file once for all of them."""
    import fcntl

    from ctxkeep.hooks import worker

    sid, path, lines = _new_session(tmp_path, 12)
    _append(path, lines[:6])
    fd = os.open(store / worker.WORKER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a worker "runs"
    try:
        payload = {"session_id": sid, "transcript_path": str(path)}
        for ev in ("precompact", "session-end", "precompact"):
            p, _ = _hook(store, ["claude-code", ev], payload)
            assert (p.returncode, p.stdout) == (0, "")
        _append(path, lines[6:])  # grows before the worker gets to it
        assert [r["event"] for r in worker.take(store)] == ["precompact", "session-end", "precompact"]
        for ev in ("precompact", "session-end", "precompact"):  # put back, as the hooks left them
            worker.enqueue(store, "claude-code", ev, path)
        assert _stored(store, sid) == 0  # nothing ingested while the lock is held
        log = (store / "hooks.log").read_text()
        assert log.count("queued (the running worker takes it)") == 3
    finally:
        os.close(fd)
    assert worker.drain(store) == 1  # one file, one ingest for the three triggers
    assert _stored(store, sid) == 12
    log = _log(store)
    assert log.count(f"ingested 12 new entries from {path}") == 2  # its precompact and session-end lines
    assert "unchanged since the last ingest" not in log


def test_a_second_worker_exits_while_one_holds_the_lock(store, tmp_path):
    import fcntl

    from ctxkeep.hooks import worker

    sid, path, lines = _new_session(tmp_path, 4)
    _append(path, lines)
    worker.enqueue(store, "claude-code", "precompact", path)
    fd = os.open(store / worker.WORKER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert worker.running(store) and worker.drain(store) == 0
        assert worker.queued(store) and _stored(store, sid) == 0  # left to the holder
    finally:
        os.close(fd)
    assert not worker.running(store) and worker.drain(store) == 1 and _stored(store, sid) == 4


def test_a_report_right_after_a_hook_ingest_counts_the_new_usage(store, tmp_path):
    """The hook's ingest leaves DuckDB behind SQLite (a small ingest defers its sync);
    ``report`` brings it current first and counts the new responses."""
    from ctxkeep.sinks import analytics_current
    from session_lines import USAGE

    def day_totals():
        r = subprocess.run(
            [*CTXKEEP, "report", "daily", "--since", "2026-11-30", "--until", "2026-11-30"]
            + ["--timezone", "UTC", "--json"],
            env={**os.environ, "CTXKEEP_HOME": str(store)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["totals"]

    before = day_totals()
    sid, path, lines = _new_session(tmp_path, 20)
    _append(path, lines)
    p, _ = _hook(store, ["claude-code", "session-end"], {"session_id": sid, "transcript_path": str(path)})
    assert p.returncode == 0
    _settle(store)
    assert _stored(store, sid) == 20
    assert analytics_current.behind(store)  # DuckDB was left to its readers
    after = day_totals()
    assert after["responses"] - before["responses"] == 10
    assert after["input_tokens"] - before["input_tokens"] == 10 * USAGE["input_tokens"]
    assert after["output_tokens"] - before["output_tokens"] == 10 * USAGE["output_tokens"]
    assert after["cache_read_tokens"] - before["cache_read_tokens"] == 10 * USAGE["cache_read_input_tokens"]
    assert not analytics_current.behind(store)


def test_the_worker_ingests_through_the_service_and_leaves_duckdb_to_its_readers(
    store, tmp_path, monkeypatch
):
    """``worker.ingest_file`` is ``service.ingest`` of the one path (as ``ingest --path``),
    never a Prefect flow run, and never catches DuckDB up: a second request for the
    file (a torn last line, nothing new) leaves DuckDB behind, where ``ctxkeep ingest``
    would sync it in the run."""
    from ctxkeep.hooks import worker
    from ctxkeep.service import ingest as service_ingest
    from ctxkeep.sinks import analytics_current

    asked = []
    real = service_ingest.ingest
    monkeypatch.setattr(service_ingest, "ingest", lambda home, req: asked.append(req) or real(home, req))
    sid, path, lines = _new_session(tmp_path, 20)
    _append(path, lines)
    with path.open("a") as f:
        f.write('{"type": "user", "message": {"role": "us')  # torn: the watermark stops before it
    assert worker.ingest_file(store, "claude-code", path) == f"ingested 20 new entries from {path}"
    assert _stored(store, sid) == 20 and analytics_current.behind(store)
    (req,) = asked
    assert req.paths == (path,) and req.agents == ("claude-code",)
    assert req.prefect is False and req.catch_up_analytics is False
    # not "unchanged" (the torn line is past the watermark), but nothing new to plan
    assert not worker.unchanged(store, path)
    assert worker.ingest_file(store, "claude-code", path) == f"ingested 0 new entries from {path}"
    assert len(asked) == 2 and _stored(store, sid) == 20 and analytics_current.behind(store)


def test_the_worker_does_not_call_a_rewritten_file_of_the_same_size_and_mtime_unchanged(store, tmp_path):
    """ctxkeep's rewrites keep the file's mtime (newuser18 F4) and a scrub can keep its
    size (a marker as long as its value): the new inode is what tells the file changed
    (a scrub killed before its watermark moved leaves such a file)."""
    import os

    from ctxkeep.hooks import worker

    sid, path, lines = _new_session(tmp_path, 3)
    _append(path, lines)
    worker.ingest_file(store, "claude-code", path)
    assert worker.unchanged(store, path)
    st = path.stat()
    tmp = path.with_name(path.name + ".new")
    data = path.read_bytes()
    tmp.write_bytes(data.replace(b"a", b"b", 1))  # same size
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert not worker.unchanged(store, path)


def test_the_hook_process_imports_neither_typer_nor_polars_nor_duckdb(store, tmp_path):
    sid, path, lines = _new_session(tmp_path, 2)
    _append(path, lines)
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ctxkeep", "hook", "claude-code", "precompact"],
        input=json.dumps({"session_id": sid, "transcript_path": str(path)}),
        env={**os.environ, "CTXKEEP_HOME": str(store)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout == ""
    imported = {ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
    assert "ctxkeep.hooks.runtime" in imported
    assert not imported & {"typer", "rich", "polars", "duckdb", "pyarrow", "pydantic", "ctxkeep.cli"}
    _settle(store)
    assert _stored(store, sid) == 2


def test_fast_argv_takes_plain_hook_calls_only():
    from ctxkeep.hooks.runtime import fast_argv

    assert fast_argv(["hook", "claude-code", "precompact"]) == ("claude-code", "precompact", None, None, None)
    assert fast_argv(["--home", "/s", "hook", "codex", "notify", "{}", "--timeout=2"]) == (
        "codex",
        "notify",
        "{}",
        "/s",
        2.0,
    )
    assert fast_argv(["hook", "gemini-cli", "AfterAgent", "--home=/s"])[3] == "/s"
    for argv in (
        ["hook", "claude-code", "--help"],
        ["hook", "claude-code"],
        ["hook", "claude-code", "precompact", "extra"],
        ["hook", "nope", "x"],
        ["search", "hook", "claude-code"],
        ["hook", "codex", "notify", "--timeout", "soon"],
        ["hook", "codex", "notify", "--home"],
    ):
        assert fast_argv(argv) is None, argv


def test_sessions_right_after_a_hook_ingest_lists_the_new_session_from_duckdb(store, tmp_path):
    from ctxkeep.query.sessions import list_sessions
    from ctxkeep.sinks import analytics_current
    from ctxkeep.sinks import sqlite as sqlite_store
    from session_lines import USAGE

    sid, path, lines = _new_session(tmp_path, 6)
    _append(path, lines)
    p, _ = _hook(store, ["claude-code", "session-end"], {"session_id": sid, "transcript_path": str(path)})
    assert p.returncode == 0
    _settle(store)
    assert analytics_current.behind(store)
    conn = sqlite_store.connect(store, readonly=True)
    try:
        rows, source = list_sessions(conn, store)
    finally:
        conn.close()
    assert source == "duckdb" and not analytics_current.behind(store)
    (row,) = [r for r in rows if r.session_id == sid]
    assert row.tokens == 3 * sum(USAGE.values())  # its three assistant lines' usage


def test_session_start_prints_what_is_stored_while_an_ingest_holds_the_store(store):
    """newuser16 F1: during a backfill the SessionStart (compact) hook waited its whole
    5 s for the ingest it queued and printed nothing. Now, with the worker still busy
    and the store lock held by another run, it prints the stored snapshot within its
    timeout, saying it may miss the last turn (the read-only read takes no lock)."""
    import fcntl

    from ctxkeep.hooks import worker
    from ctxkeep.hooks.runtime import STALE_NOTE
    from ctxkeep.sinks.lock import hold

    if not TRANSCRIPT.exists():
        pytest.skip("corpus missing")
    payload = {
        "session_id": CLAUDE,
        "transcript_path": str(TRANSCRIPT),
        "cwd": "-experiments/worktrees",
        "hook_event_name": "SessionStart",
        "source": "compact",
    }
    fd = os.open(store / worker.WORKER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a worker "runs", waiting for the store
    try:
        with hold(store, 0, what="backfill"):  # ... which a backfill holds
            p, _ = _hook(store, ["claude-code", "session-start", "--timeout", "5"], payload)
    finally:
        os.close(fd)
    assert p.returncode == 0, p.stderr
    ctx = json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
    title, blank, note, *_ = ctx.split("\n")
    assert title == f"# Resume: claude-code session {CLAUDE}" and (blank, note) == ("", STALE_NOTE)
    assert "Well, the subagents seem to be either stuck or done... can you check?" in ctx
    # what it did is read from its log, not from a clock (a loaded machine took 8.7 s
    # of wall time for the same path: newuser18 F17): it waited 3 s for the queued
    # ingest, then printed the snapshot, and its own timeout never fired
    log = (store / "hooks.log").read_text()
    assert "session-start: snapshot:" in log and "the ingest still ran after 3 s" in log
    assert "timeout" not in log

"""What the agents' hooks run (``ctxkeep hook AGENT EVENT``): ingest the session's
transcript at the moments it matters, and hand the resume snapshot back when a
session starts again after a compaction or a resume.

Events, as the agents document them:

- Claude Code (hooks, v1.0.x–2.1; JSON on stdin with ``session_id``,
  ``transcript_path``, ``cwd``, ``hook_event_name`` and ``trigger`` (PreCompact:
  ``manual``/``auto``) or ``source`` (SessionStart: ``startup``/``resume``/``clear``/
  ``compact``)): ``precompact``, ``stop`` (Claude Code's ``Stop``, after each response:
  newuser20 F1, a long session was searchable only at its end) and ``session-end``
  ingest the transcript (their stdout is not added to the context); ``session-start`` ingests it and, for source
  ``compact`` or ``resume``, prints ``{"hookSpecificOutput": {"hookEventName":
  "SessionStart", "additionalContext": <snapshot Markdown>}}``, which Claude Code adds
  to the new context. The snapshot's session is ``hook_session``'s: this agent's
  session of that id, else its latest of the project ``cwd`` exactly, else none.
- Codex (``notify`` in ``~/.codex/config.toml``: the program gets one JSON argument,
  ``{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd", …}``, after each
  turn): ``notify`` ingests the rollout of that thread (``rollout-*-<thread-id>.jsonl``
  under ``$CODEX_HOME`` or ``~/.codex``). Codex offers no injection point.
- Gemini CLI (hooks, v0.26+; JSON on stdin like Claude Code's, SessionStart ``source``
  ``startup``/``resume``/``clear``): ``SessionStart`` (snapshot for ``resume``, same
  output shape), ``PreCompress``, ``SessionEnd`` and ``AfterAgent`` ingest; the other
  documented events (``BeforeAgent``, ``BeforeModel``, ``AfterModel``,
  ``BeforeToolSelection``, ``BeforeTool``, ``AfterTool``, ``Notification``) do nothing.

A hook never blocks or fails its agent: it checks its input, queues the ingest of
the one transcript and returns (``hooks.worker``: a detached process ingests it, one
at a time per store, never Prefect; docs/design.md "Latency budget": the hook returns
within 0.1 s). Only a SessionStart hook that prints a snapshot waits, for the
ingest it asked for, then reads the store; when that ingest still waits for the store
(a backfill or a long ingest holds it) past the timeout less ``SNAPSHOT_RESERVE``, it
reads what is stored and says in the snapshot that it may miss the last turn. The work runs under a hard timeout
(default ``DEFAULT_TIMEOUT`` s, ``$CTXKEEP_HOOK_TIMEOUT``); every error (bad JSON, a
transcript that does not exist, a busy store, a timeout) is logged to
``<home>/hooks.log`` and the hook exits 0 with nothing on stdout.

``fast_main`` runs a hook straight from the ``ctxkeep`` console entry
(``ctxkeep.__main__``) without the CLI's Typer import.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.errors import NotFound
from ctxkeep.hooks import worker
from ctxkeep.hooks.hooklog import log

DEFAULT_TIMEOUT = 5.0
SNAPSHOT_BUDGET = 1500
#: seconds of the hook's timeout kept for reading the snapshot: a SessionStart hook
#: waits for the ingest it asked for at most its timeout less this, then prints what
#: is stored (newuser16 F1: the wait took the whole 5 s while a backfill held the store,
#: and the hook printed nothing; the snapshot read 0.34 s on a 410 MB store)
SNAPSHOT_RESERVE = 2.0
#: the line a snapshot read before the ingest it asked for finished carries (under its title)
STALE_NOTE = (
    "> Note: an ingest was still running when this session started (another ctxkeep run held the "
    "store), so this snapshot is what the store held then: it may miss the last turn."
)

CLAUDE_EVENTS = ("precompact", "session-start", "stop", "session-end")
CODEX_EVENTS = ("notify",)
#: Gemini CLI's documented hook events (geminicli.com/docs/hooks/reference)
GEMINI_EVENTS = (
    "SessionStart",
    "SessionEnd",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "BeforeTool",
    "AfterTool",
    "PreCompress",
    "Notification",
)
_GEMINI_INGEST = {"SessionStart", "SessionEnd", "AfterAgent", "PreCompress"}
#: SessionStart sources after which the snapshot is printed
SNAPSHOT_SOURCES = {"claude-code": ("compact", "resume"), "gemini-cli": ("resume",)}


@dataclass
class HookResult:
    """What a hook did: ``stdout`` (the text to print; empty for most events),
    ``action`` (``queued``: an ingest for the worker, ``snapshot``, ``skipped``,
    ``error``, ``timeout``) and a one-line ``detail`` for the log (the worker logs the
    ingest's outcome as ``ingested``)."""

    stdout: str = ""
    action: str = "skipped"
    detail: str = ""


def parse_payload(raw: str) -> dict:
    """The hook's JSON payload (``{}`` for empty input). Raises ValueError when it is
    not a JSON object."""
    if not raw or not raw.strip():
        return {}
    try:
        v = json.loads(raw)
    except json.JSONDecodeError as e:  # one line, what / where / what to do (newuser20 F15)
        raise ValueError(
            f"the hook's input is not JSON ({e.msg} at character {e.pos}) - the agent's hook"
            " input may have changed: check `ctxkeep hooks status` and the agent's version"
        ) from None
    if not isinstance(v, dict):
        raise ValueError("the hook's input is not a JSON object - check `ctxkeep hooks status`")
    return v


def _queue(home: Path, agent: str, event: str, path: Path) -> tuple[str, str]:
    """Queue the ingest of ``path`` for the store's worker (``hooks.worker``) and have
    one run; nothing is queued when the store holds the file as it is (``ingested``).
    Returns ``(action, detail)`` for the log."""
    if worker.unchanged(home, path):
        return "ingested", f"{path} unchanged since the last ingest"
    worker.enqueue(home, agent, event, path)
    how = {"started": "a worker started", "running": "the running worker takes it"}.get(
        h := worker.start(home), h
    )
    return "queued", f"ingest of {path} queued ({how})"


def hook_session(conn, agent: str, session_id: str | None, cwd: str | None) -> str | None:
    """The stored session a SessionStart hook of ``agent`` resumes, or None when it
    cannot place one: the session ``session_id`` itself (exact id, not a prefix) when
    it is stored as a top-level session of ``agent``; else (a resume may start a new
    id) the latest session of ``agent`` whose project is exactly ``cwd`` (normalized);
    never a session of another agent, of another project, or of no known project."""
    from ctxkeep.paths import normalize_dir
    from ctxkeep.query.resume import latest_session

    if session_id:
        r = conn.execute(
            "SELECT 1 FROM entry_rows WHERE session_id = ? AND agent = ? AND parent_session_id IS NULL LIMIT 1",
            (str(session_id), agent),
        ).fetchone()
        if r:
            return str(session_id)
    if not cwd:
        return None
    try:
        return latest_session(conn, normalize_dir(str(cwd), "/"), agent=agent, exact=True)
    except (NotFound, ValueError):
        return None


def _snapshot(home: Path, agent: str, session_id: str | None, cwd: str | None) -> str | None:
    """The snapshot Markdown of ``hook_session``'s session, None when there is none."""
    from ctxkeep.query.resume import build_snapshot
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(home, readonly=True)
    try:
        sid = hook_session(conn, agent, session_id, cwd)
        return None if sid is None else build_snapshot(conn, sid, budget=SNAPSHOT_BUDGET).to_markdown()
    finally:
        conn.close()


def _session_start_output(md: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": md}})


#: a Codex thread id: a UUID (Codex 0.4x-0.5x name rollouts ``rollout-<time>-<uuid>.jsonl``)
_THREAD_ID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _codex_rollout(thread_id: str) -> Path | None:
    """The rollout file of exactly ``thread_id`` (a UUID), None for another string: a
    glob on a part of an id (``5e23``) or a pattern (``*``) would ingest another thread."""
    if not _THREAD_ID_RE.fullmatch(thread_id):
        return None
    root = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    for base in ("sessions", "archived_sessions"):
        for p in sorted((root / base).glob(f"**/rollout-*-{thread_id}.jsonl"), reverse=True):
            return p
    return None


def handle(
    home: Path, agent: str, event: str, payload: dict, *, wait: float = DEFAULT_TIMEOUT - SNAPSHOT_RESERVE
) -> HookResult:
    """Do what ``event`` of ``agent`` asks (see the module doc) with the agent's
    ``payload``; returns a ``HookResult``. A snapshot waits up to ``wait`` seconds for
    the ingest it asked for; past that it is read from what is stored (a read-only
    SQLite read in WAL mode: it takes no store lock and waits for no writer), with
    ``STALE_NOTE`` under its title. Raises on errors (``run`` logs them)."""
    asked = event  # (Gemini's SessionStart is handled as session-start, logged as asked)
    if agent == "codex":
        if event not in CODEX_EVENTS:
            return HookResult(detail=f"unknown Codex event {event}")
        tid = payload.get("thread-id") or payload.get("thread_id") or payload.get("session_id")
        if not tid:
            return HookResult(detail=f"no thread-id in the notification ({payload.get('type')})")
        p = _codex_rollout(str(tid))
        if p is None:
            return HookResult(detail=f"no rollout for thread {tid}")
        action, detail = _queue(home, agent, event, p)
        return HookResult(action=action, detail=detail)
    if agent == "claude-code":
        if event not in CLAUDE_EVENTS:
            return HookResult(detail=f"unknown Claude Code event {event}")
        ingest = True
    elif agent == "gemini-cli":
        if event not in GEMINI_EVENTS:
            return HookResult(detail=f"unknown Gemini CLI event {event}")
        ingest = event in _GEMINI_INGEST
        event = "session-start" if event == "SessionStart" else event
    else:
        return HookResult(detail=f"unknown agent {agent}")
    if not ingest:
        return HookResult(detail="nothing to do for this event")
    tp = payload.get("transcript_path")
    action, detail = "queued", ""
    if tp and Path(str(tp)).expanduser().is_file():
        action, detail = _queue(home, agent, asked, Path(str(tp)).expanduser())
    elif event != "session-start":
        return HookResult(detail=f"no transcript at {tp!r}: nothing ingested")
    else:
        detail = f"no transcript at {tp!r}"
    if event == "session-start" and payload.get("source") in SNAPSHOT_SOURCES[agent]:
        from ctxkeep.sinks.files import STORE_DB

        idle = worker.wait_idle(home, wait)  # the snapshot after the ingest it asked for
        if not (home / STORE_DB).exists():
            return HookResult(action=action if tp else "skipped", detail=detail + "; no store, no snapshot")
        md = _snapshot(home, agent, payload.get("session_id"), payload.get("cwd"))
        if md is None:
            return HookResult(
                action="skipped" if detail.startswith("no transcript") else action,
                detail=f"{detail}; no stored {agent} session {payload.get('session_id')!r} "
                f"and none of project {payload.get('cwd')!r}: no snapshot",
            )
        if not idle:  # an ingest still runs (a backfill holds the store): what is stored, said so
            title, _, rest = md.partition("\n")
            md = f"{title}\n\n{STALE_NOTE}\n{rest}"
            detail += f"; the ingest still ran after {wait:g} s: snapshot of what is stored"
        return HookResult(_session_start_output(md), "snapshot", f"{detail}; snapshot {len(md)} chars")
    return HookResult(action=action, detail=detail)


def run(
    agent: str, event: str, raw: str, *, home: Path | None = None, timeout: float | None = None
) -> HookResult:
    """Run one hook with its raw input under a hard ``timeout`` (seconds; default
    ``$CTXKEEP_HOOK_TIMEOUT`` or ``DEFAULT_TIMEOUT``). Never raises: an error or a
    timeout is logged and comes back as a ``HookResult`` with empty ``stdout``. The
    work runs in a daemon thread; on a timeout it is abandoned (the caller exits,
    SQLite's transactions keep the store whole)."""

    if timeout is None:
        try:
            timeout = float(os.environ.get("CTXKEEP_HOOK_TIMEOUT") or DEFAULT_TIMEOUT)
        except ValueError:
            timeout = DEFAULT_TIMEOUT
    try:
        h = cfgmod.resolve_home(home)
    except Exception as e:  # an unusable $CTXKEEP_HOME: nowhere to log, nothing to do
        return HookResult(action="error", detail=str(e))
    box: dict = {}

    def work() -> None:
        try:
            box["result"] = handle(
                h, agent, event, parse_payload(raw), wait=max(0.0, timeout - SNAPSHOT_RESERVE)
            )
        except ValueError as e:  # our own one-line messages (the payload)
            box["error"] = str(e)
        except BaseException as e:
            box["error"] = traceback.format_exception_only(type(e), e)[-1].strip()

    t = threading.Thread(target=work, name="ctxkeep-hook", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        r = HookResult(action="timeout", detail=f"gave up after {timeout:g} s")
    elif "error" in box:
        r = HookResult(action="error", detail=box["error"])
    else:
        r = box.get("result") or HookResult()
    log(h, agent, event, f"{r.action}: {r.detail}")
    return r


def read_stdin() -> str:
    """The hook's stdin ('' for a terminal or none)."""
    try:
        return "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    except Exception:
        return ""


def fast_argv(argv: list[str]) -> tuple[str, str, str | None, str | None, float | None] | None:
    """``(agent, event, payload argument or None, home or None, timeout or None)`` of a
    plain hook call, ``[--home H] hook AGENT EVENT [PAYLOAD] [--home H] [--timeout T]``
    (the commands ``hooks install`` writes; ``=`` forms too); None for any other
    argv (help, a typo: the CLI parses and answers it)."""
    pos: list[str] = []
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if name in ("--home", "--timeout"):
            if not eq:
                if i + 1 >= len(argv):
                    return None
                val = argv[i + 1]
                i += 1
            opts[name] = val
        elif a.startswith("-"):
            return None
        else:
            pos.append(a)
        i += 1
    if len(pos) not in (3, 4) or pos[0] != "hook" or pos[1] not in ("claude-code", "codex", "gemini-cli"):
        return None
    if len(pos) == 4 and pos[1] != "codex":
        return None
    try:
        timeout = float(opts["--timeout"]) if "--timeout" in opts else None
    except ValueError:
        return None
    return pos[1], pos[2], pos[3] if len(pos) == 4 else None, opts.get("--home"), timeout


def fast_main(argv: list[str]) -> None:
    """Run the hook of ``argv`` (``fast_argv``) and end the process (``main``); returns
    when ``argv`` is no plain hook call (the caller runs the CLI)."""
    got = fast_argv(argv)
    if got is None:
        return
    agent, event, payload, home, timeout = got
    os.umask(0o077)  # as the CLI: what ctxkeep creates is user-only
    raw = payload if payload is not None else read_stdin()
    main(agent, event, raw, home=Path(home) if home else None, timeout=timeout)


def main(agent: str, event: str, raw: str, *, home: Path | None = None, timeout: float | None = None) -> None:
    """``run`` the hook, print its stdout and end the process with exit code 0 at
    once (``os._exit``: a timed-out worker thread must not hold the agent)."""
    r = run(agent, event, raw, home=home, timeout=timeout)
    try:
        if r.stdout:
            sys.stdout.write(r.stdout + "\n")
        sys.stdout.flush()
    except Exception:
        pass
    os._exit(0)

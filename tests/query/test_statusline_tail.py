"""``ctxkeep statusline`` fresh without ``serve``: Claude Code's stdin payload (a
handmade one, fields as https://code.claude.com/docs/en/statusline lists them) and
the transcript's unread tail (lines after the store's watermark)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from conftest import ingest, q
from ctxkeep.query import statusline as sl
from fixtures.bad_input import SESSION, line, rec

UTC = dt.UTC
#: the DuckDB figures are of the real clock's last days: the session is 40 minutes old
NOW = dt.datetime.now(UTC).replace(microsecond=0)
T0 = NOW - dt.timedelta(minutes=40)


def _reply(i: int, mid: str, minute: int, inp: int, out: int, cr: int, cw: int) -> dict:
    """An assistant line with a Sonnet 4 response's usage (Claude Code 1.0.x shape)."""
    return rec(
        i,
        rtype="assistant",
        parent=i - 1,
        requestId=f"req_{mid}",
        timestamp=(T0 + dt.timedelta(minutes=minute)).isoformat().replace("+00:00", "Z"),
        message={
            "id": mid,
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [{"type": "text", "text": f"answer {i}"}],
            "usage": {
                "input_tokens": inp,
                "output_tokens": out,
                "cache_read_input_tokens": cr,
                "cache_creation_input_tokens": cw,
            },
        },
    )


def _usd(inp, out, cr, cw, *, long=False) -> float:
    # Sonnet 4 per MTok: $3 in, $15 out, $0.30 read, $3.75 write; above 200k input $6/$22.50/$0.60/$7.50
    if long:
        return (inp * 6 + out * 22.5 + cr * 0.6 + cw * 7.5) / 1e6
    return (inp * 3 + out * 15 + cr * 0.3 + cw * 3.75) / 1e6


def _line(store: Path, payload: dict) -> str:
    import io

    return sl.line(store, io.StringIO(json.dumps(payload)), "UTC", now=NOW)


@pytest.fixture
def claude(tmp_path):
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-bad-input"
    proj.mkdir(parents=True)
    path = proj / f"{SESSION}.jsonl"
    path.write_bytes(line(rec(1, "hello")) + line(_reply(2, "msg_a", 10, 1000, 2000, 30_000, 4000)))
    store = tmp_path / "store"
    ingest(home, store, "claude-code")
    return home, store, path


def test_statusline_adds_the_unread_tail_and_the_next_ingest_agrees(claude):
    home, store, path = claude
    payload = {
        "session_id": SESSION,
        "transcript_path": str(path),
        "model": {"id": "claude-sonnet-4-20250514", "display_name": "Sonnet 4"},
        "workspace": {"current_dir": "/tmp/bad-input", "project_dir": "/tmp/bad-input"},
        "cost": {"total_cost_usd": 99.0, "total_duration_ms": 1000},
    }
    stored = _usd(1000, 2000, 30_000, 4000)
    first = _line(store, payload)
    assert f"${stored:,.2f} session" in first and "$99.00" not in first  # ctxkeep's own figure
    # Claude Code appends: one response streamed over two lines (one message id: counted once),
    # a >200k-input one (the long-context tier), and a torn last line (not read yet)
    big = _reply(5, "msg_c", 30, 500, 1000, 210_000, 0)
    with open(path, "ab") as f:
        f.write(line(rec(3, "more")) + line(_reply(4, "msg_b", 20, 10, 50, 40_000, 100)))
        f.write(line(_reply(4, "msg_b", 20, 10, 50, 40_000, 100)) + line(big) + line(rec(6))[:20])
    tail = sl.unread_tail(store, str(path))
    assert [(t["inp"], t["cr"]) for t in tail] == [(10, 40_000), (500, 210_000)]
    want = stored + _usd(10, 50, 40_000, 100) + _usd(500, 1000, 210_000, 0, long=True)
    fresh = _line(store, payload)
    assert f"${want:,.2f} session" in fresh
    if (T0.date(), NOW.date()) == (NOW.date(), NOW.date()):  # every response today (UTC)
        assert f"${want:,.2f} today" in fresh
        assert f"block ${want:,.2f}," in fresh
    assert "ctx 210,500 (" in fresh  # the tail's last response
    # the tail priced as the store will price it: ingest, then the line is the same
    with open(path, "ab") as f:
        f.write(b"\n")  # the torn line ends (malformed: quarantined)
    ingest(home, store, "claude-code")
    assert sl.unread_tail(store, str(path)) == []
    assert _line(store, payload) == fresh


def test_statusline_uses_claudes_context_and_cost_when_ctxkeep_has_none(claude):
    _home, store, _path = claude
    payload = {
        "session_id": "11111111-2222-4333-8444-555555555555",
        "transcript_path": "/nonexistent/x.jsonl",
        "model": {"id": "claude-opus-4-1", "display_name": "Opus"},
        "cost": {"total_cost_usd": 1.25},
        "context_window": {
            "context_window_size": 200_000,
            "current_usage": {
                "input_tokens": 100,
                "cache_creation_input_tokens": 900,
                "cache_read_input_tokens": 49_000,
            },
        },
    }
    got = _line(store, payload)
    assert got.startswith("Opus | $1.25 session | ")
    assert got.endswith("ctx 50,000 (25%)")


def test_statusline_session_cost_counts_the_sub_agents_it_started(claude):
    """Claude Code writes a Task sub-agent's turns to ``<session>/subagents/agent-<id>.jsonl``
    (records with the parent's ``sessionId``, ``isSidechain`` and ``agentId``; ctxkeep
    stores it as session ``agent-<id>`` whose parent is the session): the session's cost
    on the line is its own responses' plus its sub-agents', and another session's
    sub-agent adds nothing."""
    home, store, path = claude
    proj = path.parent

    def sub_file(parent: str, agent_id: str, first: int, mid: str, usage: tuple[int, int, int, int]) -> None:
        sub = proj / parent / "subagents" / f"agent-{agent_id}.jsonl"
        sub.parent.mkdir(parents=True, exist_ok=True)
        ask = rec(first, "look this up", sidechain=True, agentId=agent_id, sessionId=parent)
        reply = _reply(first + 1, mid, 12, *usage)
        reply.update(isSidechain=True, agentId=agent_id, sessionId=parent)
        sub.write_bytes(line(ask) + line(reply))

    sub_file(SESSION, "a1b2c3d4", 101, "msg_sub", (200, 3000, 50_000, 6000))
    other = "5e551011-0000-4000-8000-000000000099"
    sub_file(other, "e5f6a7b8", 201, "msg_other", (900, 9000, 90_000, 9000))
    ingest(home, store, "claude-code")

    parents = dict(
        q(store, "SELECT DISTINCT session_id, parent_session_id FROM entries WHERE session_id LIKE 'agent-%'")
    )
    assert parents == {"agent-a1b2c3d4": SESSION, "agent-e5f6a7b8": other}  # the layout the test means
    own = _usd(1000, 2000, 30_000, 4000)
    sub = _usd(200, 3000, 50_000, 6000)
    payload = {"session_id": SESSION, "transcript_path": str(path), "cost": {"total_cost_usd": 99.0}}
    got = _line(store, payload)
    assert f"${own + sub:,.2f} session" in got, got
    assert f"${own:,.2f} session" not in got  # (the two differ at cents: the sub-agent counted)
    # the sub-agent's own line: its cost alone
    assert f"${sub:,.2f} session" in _line(store, {"session_id": "agent-a1b2c3d4"})


def test_a_judged_unended_reply_is_not_priced_twice_once_ended(claude):
    """A reply written without its newline and taken as final after the idle time
    (``sources.readers.jsonl``: stored, the watermark at its start): once Claude Code
    ends the line, the tail after the watermark starts with it, but the store holds it
    already, so the statusline does not add it again; a line after it is added."""
    home, store, path = claude
    with open(path, "ab") as f:
        f.write(line(_reply(3, "msg_j", 20, 10, 50, 40_000, 100))[:-1])
    ingest(home, store, "claude-code")  # CTXKEEP_IDLE_SECONDS=0: judged, stored
    assert sl.unread_tail(store, str(path)) == []
    with open(path, "ab") as f:
        f.write(b"\n")
    assert sl.unread_tail(store, str(path)) == []  # (before: msg_j again)
    with open(path, "ab") as f:
        f.write(line(_reply(4, "msg_k", 25, 20, 60, 41_000, 0)))
    assert [(t["inp"], t["cr"]) for t in sl.unread_tail(store, str(path))] == [(20, 41_000)]

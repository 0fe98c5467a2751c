"""Acceptance (issue 24): fake credentials planted in every place a session carries text
reach no byte of any file ctxkeep writes.

Planted (the labelled set ``fixtures.secrets.positives`` and the issue-24 formats
``fixtures.secrets.issue_formats``): a Claude Code session (user text, a Write tool's
``.env`` content as JSON-escaped text, a tool result, a thinking block, a malformed
line that goes to quarantine), a Codex rollout (user message, reasoning summary, a
``function_call``'s JSON-escaped ``arguments``, its output, the agent's message; the
line shapes of codex-rs 0.146 as in the corpus' rollouts) and a Gemini CLI chat (user
text, thoughts, a tool call's args and result; ``~/.gemini/tmp/<hash>/chats``). Then
``ingest``, ``backup``, ``export parquet --with-text``, ``compress`` (the Claude and
Codex files), ``redact --rescan``, and every byte of every file under the ctxkeep
home and the lake is scanned for each value, raw and JSON-escaped: 0 found.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from fixtures.bad_input import line, rec
from fixtures.secrets import positives
from fixtures.secrets.issue_formats import cases as issue_cases

runner = CliRunner()
CODEX_ID = "019fc8be-3658-7ca3-9e29-00000000c0de"


def _claude(env: str) -> bytes:
    tool = rec(2, parent=1, rtype="assistant")
    tool["message"] = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "the user pasted keys: " + env, "signature": "c2ln"},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Write",
                "input": {"file_path": "/app/.env", "content": env},
            },
        ],
    }
    result = rec(3, parent=2)
    result["message"] = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "cat .env\n" + env}],
    }
    malformed = (
        b'{"type":"user","uuid":"x","message":{"content":"' + env.encode("unicode_escape") + b'"},,}\n'
    )
    filler = b"".join(line(rec(i, f"message {i}", parent=i - 1)) for i in range(5, 40))
    return (
        line(rec(1, "here are my keys:\n" + env))
        + line(tool)
        + line(result)
        + malformed
        + line(rec(4, "done", parent=3))
        + filler
    )


def _codex(env: str) -> bytes:
    ts = "2026-08-03T10:48:56.000Z"
    turn = {"turn_id": "019fc8be-0000-7000-8000-000000000001"}
    out = b""

    def ln(t, payload):
        rec_ = {"timestamp": ts, "type": t, "payload": payload}
        return (json.dumps(rec_, separators=(",", ":")) + "\n").encode()  # compact, as codex-rs writes

    out += ln(
        "session_meta",
        {
            "id": CODEX_ID,
            "timestamp": ts,
            "cwd": "/tmp/repo",
            "originator": "codex_cli_rs",
            "cli_version": "0.146.0",
            "source": "cli",
            "model_provider": "openai",
        },
    )
    out += ln("event_msg", {"type": "task_started", **turn})
    out += ln("turn_context", {**turn, "cwd": "/tmp/repo", "model": "gpt-5.5"})
    out += ln("event_msg", {"type": "user_message", "message": "keys:\n" + env, "images": []})
    out += ln(
        "response_item",
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "keys:\n" + env}]},
    )
    out += ln("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": env}]})
    out += ln(
        "response_item",
        {
            "type": "function_call",
            "call_id": "call-2",
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", f"cat > .env <<'X'\n{env}\nX"]}),
        },
    )
    out += ln("response_item", {"type": "function_call_output", "call_id": "call-2", "output": env})
    out += ln("event_msg", {"type": "agent_message", "message": "stored " + env})
    out += ln("event_msg", {"type": "task_complete", **turn})
    for i in range(2, 30):  # later turns: compress keeps the last ones
        t = {"turn_id": f"019fc8be-0000-7000-8000-{i:012d}"}
        out += ln("event_msg", {"type": "task_started", **t})
        out += ln("turn_context", {**t, "cwd": "/tmp/repo", "model": "gpt-5.5"})
        out += ln("event_msg", {"type": "user_message", "message": f"step {i}", "images": []})
        msg = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"step {i}"}]}
        out += ln("response_item", msg)
        out += ln("event_msg", {"type": "agent_message", "message": f"did step {i}"})
        out += ln("event_msg", {"type": "task_complete", **t})
    return out


def _gemini(env: str) -> bytes:
    msgs = [
        {"id": "u1", "timestamp": "2025-12-03T08:30:13.880Z", "type": "user", "content": "keys:\n" + env},
        {
            "id": "g1",
            "timestamp": "2025-12-03T08:30:15.307Z",
            "type": "gemini",
            "content": "I will write them.",
            "thoughts": [{"subject": "keys", "description": env, "timestamp": "2025-12-03T08:30:15.000Z"}],
            "tokens": {"input": 10, "output": 5, "cached": 0, "thoughts": 1, "tool": 0, "total": 16},
            "model": "gemini-2.5-flash",
            "toolCalls": [
                {
                    "id": "write_file-1",
                    "name": "write_file",
                    "args": {"file_path": "/app/.env", "content": env},
                    "result": [
                        {
                            "functionResponse": {
                                "id": "write_file-1",
                                "name": "write_file",
                                "response": {"output": "wrote\n" + env},
                            }
                        }
                    ],
                    "status": "success",
                    "timestamp": "2025-12-03T08:30:16.000Z",
                }
            ],
        },
    ]
    doc = {
        "sessionId": "fc2fd534-0000-4000-8000-00000000face",
        "projectHash": "ab" * 32,
        "startTime": "2025-12-03T08:28:00.000Z",
        "lastUpdated": "2025-12-03T08:30:16.000Z",
        "messages": msgs,
    }
    return json.dumps(doc, indent=2).encode()


@pytest.mark.slow
def test_planted_credentials_reach_no_byte_of_the_home_or_the_lake(tmp_path):
    cases = positives(5) + issue_cases(5)
    env_text = "\n".join(c.text for c in cases)
    values = sorted({s for c in cases for s in c.secrets if s and len(s) >= 6})
    home = tmp_path / "home"
    claude = home / ".claude" / "projects" / "-tmp-planted" / "5e551011-0000-4000-8000-0000000000aa.jsonl"
    codex = (
        home / ".codex" / "sessions" / "2026" / "08" / "03" / f"rollout-2026-08-03T10-48-56-{CODEX_ID}.jsonl"
    )
    gemini = home / ".gemini" / "tmp" / ("ab" * 32) / "chats" / "session-2025-12-03T08-28-fc2fd534.json"
    for p, data in ((claude, _claude(env_text)), (codex, _codex(env_text)), (gemini, _gemini(env_text))):
        p.parent.mkdir(parents=True)
        p.write_bytes(data)
        old = time.time() - 7200
        os.utime(p, (old, old))
    store, lake = tmp_path / "ctxhome", tmp_path / "lake"
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0"}

    def run(*args):
        r = runner.invoke(app, list(args), env=e)
        assert r.exit_code == 0, (args, r.output)
        return r

    run("ingest")
    st = json.loads(run("stats", "--json").stdout)
    assert {"claude-code", "codex", "gemini-cli"} <= set(st["agents"]), st["agents"].keys()
    assert st["quarantine"]["skipped"] >= 1
    kinds = set(st["redactions"]["texts"])
    # the maintained table's kinds and ctxkeep's context rules' both reached the store
    assert {"digitalocean-pat", "age-secret-key", "aws-secret-key", "private-key-hex", "password"} <= kinds
    run("backup")
    run("export", "parquet", str(lake), "--with-text")
    r = run("compress", str(claude), str(codex), "--keep-messages", "3", "--force", "--no-prefect", "--json")
    assert json.loads(r.stdout)["compressed"] == 2, r.stdout
    run("redact", "--rescan")
    files = [p for root in (store, lake) for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "store.db" for p in files) and any(p.suffix == ".parquet" for p in files)
    assert any("backups" in p.parts for p in files)
    leaked = {}
    for p in files:
        blob = p.read_bytes()
        for v in values:
            for form in {v, json.dumps(v)[1:-1], json.dumps(json.dumps(v))[3:-3]}:
                if form.encode() in blob:
                    leaked.setdefault(v[:12] + "…", []).append(str(p.relative_to(tmp_path)))
    assert leaked == {}, leaked

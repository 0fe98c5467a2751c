"""Handmade Claude Code session lines (the shape of the corpus's Claude Code 2.1 files:
``type``, ``uuid``, ``parentUuid``, ``sessionId``, ``timestamp``, ``cwd``,
``message.role``/``content`` and, on assistant lines, ``message.model``/``usage``),
with fresh ids, for the hook path's tests and ``tests/bench/bench_hook.py``: lines no
store holds yet."""

from __future__ import annotations

import datetime as dt
import json
import uuid

#: usage of each assistant line (tokens)
USAGE = {
    "input_tokens": 7,
    "cache_creation_input_tokens": 120,
    "cache_read_input_tokens": 3000,
    "output_tokens": 45,
}
MODEL = "claude-sonnet-4-5-20250929"


def claude_lines(
    session_id: str, n: int, start: dt.datetime, *, cwd: str = "/tmp/hook-bench", word: str = "zebrafinch"
) -> list[str]:
    """``n`` JSONL lines of one Claude Code session, user and assistant in turn (the
    odd ones assistant, each with ``USAGE``), one second apart from ``start`` (aware),
    each text holding ``word`` and its line number (``f"{word} {i}"``)."""
    out, parent = [], None
    for i in range(n):
        u = str(uuid.uuid4())
        ts = (start + dt.timedelta(seconds=i)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        line = {
            "parentUuid": parent,
            "isSidechain": False,
            "type": "user" if i % 2 == 0 else "assistant",
            "uuid": u,
            "timestamp": ts,
            "sessionId": session_id,
            "cwd": cwd,
            "version": "2.1.0",
            "userType": "external",
        }
        text = f"{word} {i}: the hook path ingests a few new lines of one session"
        if i % 2 == 0:
            line["message"] = {"role": "user", "content": text}
        else:
            line["message"] = {
                "model": MODEL,
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "usage": dict(USAGE),
            }
            line["requestId"] = f"req_{uuid.uuid4().hex[:24]}"
        out.append(json.dumps(line))
        parent = u
    return out

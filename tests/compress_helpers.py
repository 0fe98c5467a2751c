"""Invariant checks on session files, shared by the compress tests."""

from __future__ import annotations

import json
from pathlib import Path


def records(data: bytes) -> list[dict]:
    """Every non-empty line parsed (raises on a line that does not parse)."""
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def blocks(rec: dict) -> list:
    m = rec.get("message")
    c = m.get("content") if isinstance(m, dict) else None
    return [b for b in c if isinstance(b, dict)] if isinstance(c, list) else []


def dangling_parents(recs: list[dict]) -> list[str]:
    """parentUuid values that name no record of the file."""
    uuids = {r.get("uuid") for r in recs if r.get("uuid")}
    return [r["parentUuid"] for r in recs if r.get("parentUuid") and r["parentUuid"] not in uuids]


def orphan_tool_results(recs: list[dict]) -> list[str]:
    """tool_result ids (Claude Code) with no tool_use on an earlier line."""
    seen, out = set(), []
    for r in recs:
        for b in blocks(r):
            if b.get("type") == "tool_use":
                seen.add(b.get("id"))
            elif b.get("type") == "tool_result" and b.get("tool_use_id") not in seen:
                out.append(b.get("tool_use_id"))
    return out


def orphan_codex_outputs(recs: list[dict]) -> list[str]:
    """Codex *_output call_ids with no call on an earlier line."""
    seen, out = set(), []
    for r in recs:
        p = r.get("payload") if isinstance(r.get("payload"), dict) else {}
        if r.get("type") != "response_item" or not p.get("call_id"):
            continue
        if p.get("type", "").endswith("_output"):
            if p["call_id"] not in seen:
                out.append(p["call_id"])
        else:
            seen.add(p["call_id"])
    return out


def claude_messages(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r.get("type") in ("user", "assistant") and isinstance(r.get("message"), dict)]


def is_claude(path: Path) -> bool:
    return "/.claude/" in str(path)

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


def claude_code_log_problems(path: Path) -> list[str]:
    """What claude-code-log (PyPI, an independent Claude Code transcript parser) reports
    about a transcript: lines it cannot parse (its pydantic models, printed by
    ``converter.load_transcript``) and DAG warnings (orphan parents, cycles, logged by
    ``claude_code_log.dag``). [] for a file it reads cleanly. Raises ImportError when
    claude-code-log is not installed."""
    import contextlib
    import io
    import logging

    from claude_code_log.converter import load_transcript
    from claude_code_log.dag import build_dag_from_entries

    class _Keep(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.msgs: list[str] = []

        def emit(self, record):
            self.msgs.append(record.getMessage())

    h = _Keep()
    log = logging.getLogger("claude_code_log")
    log.addHandler(h)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            entries = load_transcript(Path(path), silent=True)
            build_dag_from_entries(entries)
    finally:
        log.removeHandler(h)
    printed = [x for x in buf.getvalue().splitlines() if x.strip()]
    return printed + h.msgs


_NOT_PROMPT = ("<command-", "<local-command", "<bash-", "Caveat: The messages below", "[Request interrupted")


def conversational(recs: list[dict]) -> list[dict]:
    """User prompts the user typed and assistant replies with text (not tool results,
    meta lines, slash-command output, ``!`` shell lines or interrupts)."""
    out = []
    for r in claude_messages(recs):
        if r.get("isMeta") or r.get("isCompactSummary"):
            continue
        c = r["message"].get("content")
        bl = blocks(r)
        if r["type"] == "assistant":
            if any(b.get("type") == "text" and (b.get("text") or "").strip() for b in bl):
                out.append(r)
            continue
        if any(b.get("type") == "tool_result" for b in bl):
            continue
        text = (
            c if isinstance(c, str) else "\n".join(b.get("text") or "" for b in bl if b.get("type") == "text")
        )
        if text.strip() and not text.lstrip().startswith(_NOT_PROMPT):
            out.append(r)
    return out

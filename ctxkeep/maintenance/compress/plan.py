"""Compression plans for oversized session files: which lines to keep, which to drop,
which records to re-link, and the one marker record to insert. Pure: lines in, plan
out; no I/O (``compress.rewrite`` writes the result, ``compress.run`` orchestrates).

The rule (issue 5, after the CLI Context Manager seed): keep the first
``keep_system_lines`` system/meta lines and the most recent ``keep_messages`` messages,
cutting only where the format allows it.

Claude Code (format facts from the real transcripts in ``shared/corpus``, CC v1.0.17 –
v2.1.114, and the synthetic schema fixture there):

- a *message* is a ``user`` or ``assistant`` line with a ``message`` object; every other
  line (``system``, ``summary``, ``attachment``, ``permission-mode``, ``last-prompt``,
  ``file-history-snapshot`` …) is a system/meta line;
- a ``tool_use`` block (assistant) is answered by a ``tool_result`` block with the same
  id on a later ``user`` line; parallel calls branch the ``parentUuid`` tree;
- one API response may span several assistant lines sharing ``message.id``;
- lines form a tree through ``uuid``/``parentUuid``; Claude Code resumes by walking
  ``parentUuid`` up from the last line, so a kept line must never point at a removed one.

The cut is placed at a turn boundary: the latest main-chain user prompt (a ``user`` line
without ``tool_result`` blocks) at or before the first of the last ``keep_messages``
messages, where no ``tool_use`` before the cut has its ``tool_result`` after it and no
API response is split. When that removes nothing (a sub-agent transcript has one
prompt), the latest such safe point between exchanges is used instead. So at least
``keep_messages`` messages are always kept, and a tool call is never separated from
its result. Kept lines whose parent was removed are re-linked: main-chain lines after
the cut to the marker (a ``system`` record, subtype ``informational``, inserted just
before the cut, whose own parent is the nearest kept ancestor), other lines to their
nearest kept ancestor (or null: the root of their chain). The latest record of each
state type (``permission-mode``, ``last-prompt``, titles, …) is kept.

Codex (rollouts 0.34 – 0.70 in ``shared/corpus``): a *message* is a ``response_item``
other than the context messages (``<environment_context>``, AGENTS.md, developer
instructions), which are system lines like ``session_meta`` and ``turn_context``. Calls
(``function_call``, ``custom_tool_call``, ``local_shell_call``) pair with their
``*_output`` by ``call_id``. The cut is placed at a user prompt (else at a
``turn_context``, which Codex ≥ 0.40 writes before each model request) with no call
open across it. Every ``session_meta`` line is kept (a rollout may hold several: their
order decides which session later lines belong to) and the latest ``turn_context``
before the cut. No marker is written into rollouts: Codex replays ``response_item``
lines to the model and rejects unknown event types, so any marker would either reach the
model or risk the resume; the compress report and the store say what was removed.

Any other format is refused with a reason.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from ctxkeep.schema import entry_id
from ctxkeep.sources import SOURCES
from ctxkeep.sources._util import dict_at
from ctxkeep.sources.contract import RecordParser, SourceFile
from ctxkeep.sources.readers.jsonl import parse_line

SUPPORTED = ("claude-code", "codex")

#: Claude Code meta record types of which only the latest matters (state, not history).
CLAUDE_STATE_TYPES = frozenset(
    {
        "permission-mode",
        "mode",
        "last-prompt",
        "custom-title",
        "ai-title",
        "agent-name",
        "summary",
        "worktree-state",
        "pr-link",
        "frame-link",
        "bridge-session",
        "relocated",
        "atis-latch",
        "tag",
        "file-history-snapshot",
    }
)

_CODEX_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<permissions",
    "<INSTRUCTIONS>",
    "<user_shell_command>",
)
_CODEX_CALLS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
    "tool_search_call": "tool_search_output",
}
#: namespace of the marker uuids (uuid5), so a plan is deterministic
MARKER_NS = uuidlib.UUID("5f1d2c4e-8a7b-4c1e-9d3f-2b6a7c8d9e0f")


@dataclass
class Line:
    """One non-empty line of a session file: its position (0-based ``index`` among
    the non-empty lines, byte ``offset``), its bytes without the newline (``raw``, a
    trailing ``\\r`` kept), the parsed record (None when it does not parse to a JSON
    object) and the parser's note (``problem``: repair or failure reason)."""

    index: int
    offset: int
    raw: bytes
    rec: dict | None
    problem: str | None = None

    @property
    def obj(self) -> dict:
        """The parsed record of a line the caller knows parses (a message it selected);
        an empty dict for one that did not."""
        return self.rec if self.rec is not None else {}

    @property
    def body(self) -> bytes:
        """The line without a trailing ``\\r`` (what the sources parse and hash)."""
        return self.raw[:-1] if self.raw.endswith(b"\r") else self.raw


@dataclass
class CompressPlan:
    """What to write instead of a session file.

    ``new_lines``: the lines of the new file (bytes, no newline), in order;
    ``removed``: indices (``Line.index``) of the lines dropped (never a line that does
    not parse: such a line stays, byte for byte, in its place among the kept lines;
    ``kept_bad``: their indices; docs/design.md, "Compress");
    ``relinked``: index → new ``parentUuid``; ``marker``: the inserted record (or None);
    ``messages_before/after``, ``removed_messages``: message counts; ``cut``: index of
    the first line after the cut; ``cut_kind``: ``turn`` or ``exchange``.
    ``reason`` explains an empty plan (nothing to remove, no safe cut)."""

    agent: str
    total_lines: int
    new_lines: list[bytes] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    kept_bad: list[int] = field(default_factory=list)
    relinked: dict[int, str | None] = field(default_factory=dict)
    marker: dict | None = None
    messages_before: int = 0
    messages_after: int = 0
    removed_messages: int = 0
    conversation_before: int = 0
    conversation_after: int = 0
    cut: int | None = None
    cut_kind: str | None = None
    reason: str | None = None

    @property
    def changes(self) -> bool:
        """True when the plan removes or rewrites anything."""
        return bool(self.removed)


class Refused(Exception):
    """The file's format cannot be compressed safely; ``str(e)`` says why."""


# ---------------------------------------------------------------- lines and entries


def split_lines(data: bytes, parsed: dict[bytes, dict] | None = None) -> tuple[list[Line], bytes]:
    """The non-empty complete lines of a JSONL file's bytes, parsed, and the bytes
    after the last newline (an unterminated last line, maybe being written).

    Blank lines are skipped (they hold nothing); ``Line.offset`` is the byte offset in
    ``data``. Parsing is ``sources.contract.parse_line`` (lenient repairs allowed);
    a line whose body is a key of ``parsed`` (body → the object ``parse_line`` made of
    it, without a problem: the lines of the file a rewrite keeps) is not parsed again
    and shares that object (read it, never change it)."""
    lines: list[Line] = []
    pos = 0
    n = len(data)
    end = data.rfind(b"\n")
    complete_end = end + 1 if end >= 0 else 0
    while pos < complete_end:
        nl = data.index(b"\n", pos)
        raw = data[pos:nl]
        body = raw[:-1] if raw.endswith(b"\r") else raw
        if parsed is not None and body in parsed:
            lines.append(Line(len(lines), pos, raw, parsed[body], None))
        elif body.strip():
            rec, problem = parse_line(body)
            if rec is not None and not isinstance(rec, dict):
                rec, problem = None, f"not a JSON object ({type(rec).__name__})"
            lines.append(Line(len(lines), pos, raw, rec, problem))
        pos = nl + 1
    return lines, data[complete_end:n]


def line_entries(
    file: SourceFile, lines: list[Line], hashes: dict[bytes, str] | None = None
) -> list[list[dict]]:
    """The entry dicts the agent's source parser makes of each line (in file order,
    with the parser's carry-over state, exactly as an ingest from offset 0 would), one
    list per line; ``[]`` for unparseable lines and lines the parser skips.

    ``hashes`` (line body → its SHA-256, hex), when given, memoizes the line hashes the
    parser gets: a compress parses the lines it keeps twice (before and after the
    rewrite). Raises KeyError for an agent without a source module, TypeError for a
    source without a line parser. A parser error on
    one line gives ``[]`` for that line (ingest quarantines such lines)."""
    mod = SOURCES[file.agent]
    if not isinstance(mod, RecordParser):
        raise TypeError(f"{file.agent}: its source has no line parser (contract.RecordParser)")
    state = mod.init_state(file)
    src = str(file.path)
    out: list[list[dict]] = []
    memo = {} if hashes is None else hashes
    for ln in lines:
        if ln.rec is None:
            out.append([])
            continue
        body = ln.body
        lh = memo.get(body)
        if lh is None:
            lh = memo[body] = hashlib.sha256(body).hexdigest()
        try:
            out.append(mod.parse_record(ln.obj, ln.offset, lh, state, src))
        except Exception:
            out.append([])
    return out


def line_entry_ids(agent: str, per_line: list[list[dict]]) -> list[list[str]]:
    """``entry_id`` of every entry dict, per line (see ``schema.entry_id``)."""
    return [[entry_id(agent, e.get("record_id"), e.get("part")) for e in ents] for ents in per_line]


def entry_texts(per_line: list[list[dict]]) -> list[str]:
    """The texts of the entries (for token estimates), flattened."""
    return [e.get("text") or "" for ents in per_line for e in ents]


# ---------------------------------------------------------------- shared cut logic


def _open_across(n: int, intervals: list[tuple[int, int]]) -> list[int]:
    """For each cut position c in 0..n, how many (start, end) intervals have
    start < c <= end (a call before the cut answered after it)."""
    diff = [0] * (n + 2)
    for s, e in intervals:
        if s < e:
            diff[s + 1] += 1
            diff[e + 1] -= 1
    out, acc = [], 0
    for c in range(n + 1):
        acc += diff[c]
        out.append(acc)
    return out


def _choose_cut(
    preferred: list[int], fallback: list[int], limit: int, first_message: int
) -> tuple[int | None, str | None]:
    """The latest preferred cut ≤ ``limit`` that removes a message (> first_message),
    else the latest fallback cut; with its kind (``turn``/``exchange``)."""
    best = [c for c in preferred if first_message < c <= limit]
    if best:
        return max(best), "turn"
    best = [c for c in fallback if first_message < c <= limit]
    if best:
        return max(best), "exchange"
    return None, None


def _blocks(rec: dict) -> list:
    msg = rec.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    return content if isinstance(content, list) else []


# ---------------------------------------------------------------- Claude Code


def _is_claude_message(rec: dict | None) -> TypeGuard[dict]:
    return (
        rec is not None and rec.get("type") in ("user", "assistant") and isinstance(rec.get("message"), dict)
    )


#: how Claude Code marks user lines that are not a prompt the user typed: slash-command
#: invocations and their output, ``!`` shell mode, the local-command caveat, interrupts
_CLAUDE_NOT_PROMPT = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "Caveat: The messages below were generated by the user while running local commands",
    "[Request interrupted by user",
)


def _claude_text(rec: dict) -> str:
    c = rec["message"].get("content")
    if isinstance(c, str):
        return c
    return "\n".join(
        b["text"]
        for b in _blocks(rec)
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def claude_conversational(rec: dict | None) -> bool:
    """True for a conversational message of a Claude Code transcript: a user prompt
    (a ``user`` line with text, no ``tool_result``, not ``isMeta``/``isCompactSummary``,
    not slash-command output or ``!`` shell mode) or an assistant reply (an
    ``assistant`` line with a non-empty ``text`` block). What ``keep_messages`` counts."""
    if not _is_claude_message(rec) or rec.get("isMeta") or rec.get("isCompactSummary"):
        return False
    if rec.get("type") == "assistant":
        return any(
            isinstance(b, dict) and b.get("type") == "text" and str(b.get("text") or "").strip()
            for b in _blocks(rec)
        )
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(rec)):
        return False
    text = _claude_text(rec).lstrip()
    return bool(text) and not text.startswith(_CLAUDE_NOT_PROMPT)


def with_marker_text(plan: CompressPlan, text: str) -> CompressPlan:
    """The plan with its marker's ``content`` set to ``text`` (in ``plan.marker`` and
    in the marker's line of ``plan.new_lines``). No-op without a marker."""
    if not plan.marker:
        return plan
    old = orjson.dumps(plan.marker)
    plan.marker = dict(plan.marker, content=text)
    plan.new_lines = [orjson.dumps(plan.marker) if x == old else x for x in plan.new_lines]
    return plan


def _relink_bytes(ln: Line, new_parent: str | None) -> bytes:
    """The line with ``parentUuid`` replaced, every other byte unchanged when the key
    occurs once at the top level; else the record re-serialized (compact JSON)."""
    old = ln.obj.get("parentUuid")
    old_frag = b'"parentUuid":' + orjson.dumps(old)
    new_frag = b'"parentUuid":' + orjson.dumps(new_parent)
    body = ln.body
    if body.count(old_frag) == 1:
        cand = body.replace(old_frag, new_frag)
        try:
            parsed, _ = parse_line(cand)
        except Exception:
            parsed = None
        expect = dict(ln.obj, parentUuid=new_parent)
        if parsed == expect:
            return cand + (b"\r" if ln.raw.endswith(b"\r") else b"")
    return orjson.dumps(dict(ln.obj, parentUuid=new_parent))


def plan_claude(
    lines: list[Line],
    keep_messages: int,
    keep_system_lines: int,
    *,
    marker_note: str = "",
    marker_extra: dict | None = None,
) -> CompressPlan:
    """The compression plan of a Claude Code transcript (rules in the module doc).

    Args: ``lines`` from ``split_lines``; ``keep_messages`` ≥ 1; ``keep_system_lines``
    ≥ 0; ``marker_note``: where the full history is (appended to the marker's text);
    ``marker_extra``: JSON-able facts stored under the marker's ``ctxkeep`` key.
    Returns a CompressPlan (empty with a ``reason`` when nothing can be removed)."""
    keep_messages = max(1, keep_messages)
    plan = CompressPlan("claude-code", len(lines))
    msgs = [ln.index for ln in lines if _is_claude_message(ln.rec)]
    conv = [ln.index for ln in lines if claude_conversational(ln.rec)]
    plan.messages_before = plan.messages_after = len(msgs)
    plan.conversation_before = plan.conversation_after = len(conv)
    if len(conv) <= keep_messages:
        plan.reason = (
            f"{len(conv)} conversational messages (user prompts and assistant replies), "
            f"not more than the {keep_messages} to keep"
        )
        return _finish_identity(plan, lines)
    main_side = all(bool(lines[i].obj.get("isSidechain")) for i in msgs)
    # tool_use -> tool_result intervals, split responses
    use_line: dict[str, int] = {}
    intervals: list[tuple[int, int]] = []
    seen_mid: set[str] = set()
    split_at: set[int] = set()
    for i in msgs:
        rec = lines[i].obj
        for b in _blocks(rec):
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                use_line.setdefault(b["id"], i)
            elif b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                s = use_line.get(b["tool_use_id"])
                if s is not None:
                    intervals.append((s, i))
        if rec.get("type") == "assistant":
            mid = rec["message"].get("id")
            if isinstance(mid, str):
                if mid in seen_mid:
                    split_at.add(i)
                seen_mid.add(mid)
    open_ = _open_across(len(lines), intervals)
    safe = [i for i in msgs if open_[i] == 0 and i not in split_at]
    prompts = [
        i
        for i in safe
        if lines[i].obj.get("type") == "user"
        and bool(lines[i].obj.get("isSidechain")) == main_side
        and claude_conversational(lines[i].rec)
    ]
    limit = conv[-keep_messages]
    # between exchanges: on the main chain when possible (its first kept line then
    # hangs off the marker)
    main_safe = [i for i in safe if bool(lines[i].obj.get("isSidechain")) == main_side]
    cut, kind = _choose_cut(prompts, main_safe, limit, msgs[0])
    if cut is None:
        cut, kind = _choose_cut(prompts, safe, limit, msgs[0])
    if cut is None:
        plan.reason = "no safe cut point (a tool call or response spans every boundary)"
        return _finish_identity(plan, lines)
    plan.cut, plan.cut_kind = cut, kind
    # which lines before the cut stay
    keep: set[int] = set()
    head = [ln.index for ln in lines[:cut] if ln.rec is not None and not _is_claude_message(ln.rec)]
    keep.update(head[: max(0, keep_system_lines)])
    latest: dict[str, int] = {}
    for ln in lines:
        t = ln.rec.get("type") if ln.rec is not None else None
        if t in CLAUDE_STATE_TYPES:
            latest[t] = ln.index
    keep.update(i for i in latest.values() if i < cut)
    keep.update(ln.index for ln in lines[cut:] if ln.rec is not None)
    # a line that does not parse stays where it was (``CompressPlan``)
    plan.kept_bad = [ln.index for ln in lines if ln.rec is None]
    keep.update(plan.kept_bad)
    plan.removed = [ln.index for ln in lines if ln.index not in keep]
    plan.removed_messages = sum(1 for i in plan.removed if _is_claude_message(lines[i].rec))
    plan.messages_after = len(msgs) - plan.removed_messages
    plan.conversation_after = len(conv) - sum(1 for i in conv if i not in keep)
    # re-linking
    parent_of: dict[str, str | None] = {}
    for ln in lines:
        u = ln.rec.get("uuid") if ln.rec is not None else None
        if isinstance(u, str) and u not in parent_of:
            parent_of[u] = ln.obj.get("parentUuid")
    kept_uuids = {lines[i].obj.get("uuid") for i in keep} - {None}

    def nearest_kept(p: str | None) -> str | None:
        seen = set()
        while p is not None and p not in kept_uuids and p not in seen:
            seen.add(p)
            p = parent_of.get(p)
        return p if p in kept_uuids else None

    first = lines[cut].obj
    marker_parent = nearest_kept(first.get("parentUuid"))
    removed_bytes = sum(len(lines[i].raw) + 1 for i in plan.removed)
    marker_uuid = str(
        uuidlib.uuid5(
            MARKER_NS,
            f"{first.get('sessionId')}:{first.get('uuid')}:{plan.removed_messages}:{len(plan.removed)}",
        )
    )
    text = (
        f"ctxkeep compressed this session file: {plan.removed_messages} earlier messages "
        f"({len(plan.removed)} lines, {removed_bytes:,} bytes) were removed from it."
        + (f" {marker_note}" if marker_note else "")
    )
    marker: dict[str, Any] = {"parentUuid": marker_parent}
    for k in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "agentId", "entrypoint"):
        if k in first:
            marker[k] = first[k]
    marker.update(
        {
            "type": "system",
            "subtype": "informational",
            "content": text,
            "isMeta": False,
            "level": "info",
            "timestamp": first.get("timestamp"),
            "uuid": marker_uuid,
            "ctxkeep": {
                "compressed": dict(
                    {
                        "removed_messages": plan.removed_messages,
                        "removed_lines": len(plan.removed),
                        "removed_bytes": removed_bytes,
                    },
                    **(marker_extra or {}),
                )
            },
        }
    )
    plan.marker = marker
    out: list[bytes] = []
    for ln in lines:
        if ln.index not in keep:
            continue
        if ln.index == cut:
            out.append(orjson.dumps(marker))
        p = ln.obj.get("parentUuid")
        if ln.index == cut or (isinstance(p, str) and p not in kept_uuids):
            side = bool(ln.obj.get("isSidechain")) == main_side
            new_parent = marker_uuid if (ln.index >= cut and side) else nearest_kept(p)
            plan.relinked[ln.index] = new_parent
            out.append(_relink_bytes(ln, new_parent))
        else:
            out.append(ln.raw)
    plan.new_lines = out
    return plan


def _finish_identity(plan: CompressPlan, lines: list[Line]) -> CompressPlan:
    """An empty plan: the file stays as it is."""
    plan.new_lines = [ln.raw for ln in lines]
    plan.kept_bad = [ln.index for ln in lines if ln.rec is None]
    return plan


# ---------------------------------------------------------------- Codex


def _codex_kind(rec: dict | None) -> str:
    """``bad``, ``session_meta``, ``turn_context``, ``context`` (system messages),
    ``prompt`` (a user message), ``message`` (any other response_item) or ``event``."""
    if rec is None:
        return "bad"
    t = rec.get("type")
    if t in ("session_meta", "turn_context"):
        return t
    if t != "response_item":
        return "event"
    p = dict_at(rec, "payload")
    if p.get("type") == "message":
        role = p.get("role")
        content = p.get("content")
        text = ""
        if isinstance(content, list):
            text = "".join(
                b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
            )
        if role in ("developer", "system") or text.lstrip().startswith(_CODEX_CONTEXT_PREFIXES):
            return "context"
        if role == "user":
            return "prompt"
    return "message"


def plan_codex(lines: list[Line], keep_messages: int, keep_system_lines: int) -> CompressPlan:
    """The compression plan of a Codex rollout (rules in the module doc).

    Args as ``plan_claude`` (no marker). Returns a CompressPlan."""
    keep_messages = max(1, keep_messages)
    plan = CompressPlan("codex", len(lines))
    kinds = [_codex_kind(ln.rec) for ln in lines]
    msgs = [i for i, k in enumerate(kinds) if k in ("prompt", "message")]
    plan.messages_before = plan.messages_after = len(msgs)
    if len(msgs) <= keep_messages:
        plan.reason = f"{len(msgs)} messages, not more than the {keep_messages} to keep"
        return _finish_identity(plan, lines)
    call_line: dict[str, int] = {}
    intervals: list[tuple[int, int]] = []
    outputs = {v: k for k, v in _CODEX_CALLS.items()}
    for i, ln in enumerate(lines):
        if kinds[i] != "message":
            continue
        p = ln.obj.get("payload") or {}
        cid = p.get("call_id")
        if not isinstance(cid, str):
            continue
        if p.get("type") in _CODEX_CALLS:
            call_line.setdefault(cid, i)
        elif p.get("type") in outputs and cid in call_line:
            intervals.append((call_line[cid], i))
    open_ = _open_across(len(lines), intervals)
    prompts = [i for i in msgs if kinds[i] == "prompt" and open_[i] == 0]
    contexts = [i for i, k in enumerate(kinds) if k == "turn_context" and open_[i] == 0]
    cut, kind = _choose_cut(prompts, contexts, msgs[-keep_messages], msgs[0])
    if cut is None:
        plan.reason = "no turn boundary without an open tool call"
        return _finish_identity(plan, lines)
    plan.cut, plan.cut_kind = cut, kind
    keep: set[int] = set(range(cut, len(lines)))
    system = [i for i in range(cut) if kinds[i] in ("session_meta", "turn_context", "context")]
    keep.update(system[: max(0, keep_system_lines)])
    keep.update(i for i in range(cut) if kinds[i] == "session_meta")
    tcs = [i for i in range(cut) if kinds[i] == "turn_context"]
    if tcs:
        keep.add(tcs[-1])
    # a line that does not parse stays where it was (``CompressPlan``)
    plan.kept_bad = [i for i, k in enumerate(kinds) if k == "bad"]
    keep.update(plan.kept_bad)
    plan.removed = [i for i in range(len(lines)) if i not in keep]
    plan.removed_messages = sum(1 for i in plan.removed if kinds[i] in ("prompt", "message"))
    plan.messages_after = len(msgs) - plan.removed_messages
    plan.new_lines = [lines[i].raw for i in sorted(keep)]
    return plan


def message_lines(agent: str, lines: list[Line]) -> list[int]:
    """Indices of the message lines (Claude Code: user/assistant records; Codex:
    response items other than context messages)."""
    if agent == "claude-code":
        return [ln.index for ln in lines if _is_claude_message(ln.rec)]
    return [ln.index for ln in lines if _codex_kind(ln.rec) in ("prompt", "message")]


def plan_compression(
    agent: str, lines: list[Line], keep_messages: int, keep_system_lines: int, **marker: Any
) -> CompressPlan:
    """Dispatch to the agent's planner. Raises Refused for any other agent."""
    if agent == "claude-code":
        return plan_claude(lines, keep_messages, keep_system_lines, **marker)
    if agent == "codex":
        return plan_codex(lines, keep_messages, keep_system_lines)
    raise Refused(
        f"{agent} session files are not compressed: only Claude Code and Codex "
        "JSONL formats are understood well enough to cut safely"
    )

"""Kimi CLI (MoonshotAI/kimi-cli) and Kimi Code wire logs.

Where (every platform): Kimi CLI ``~/.kimi/sessions/<project hash>/<session id>/wire.jsonl``;
Kimi Code ``$KIMI_CODE_HOME`` else ``~/.kimi-code``, ``sessions/wd_<workdir>_<hash>/
session_<id>/agents/<agent>/wire.jsonl``. Both append. Sources: wesm/agentsview 0.46
``internal/parser/kimi.go`` (both generations, the session id from the path),
tokscale's client list (``~/.kimi/sessions/``, ``~/.kimi-code/sessions/``,
``KIMI_CODE_HOME``), TokenBuddy's notes ("``wire.jsonl`` StatusUpdate usage").

Kimi CLI records: ``{"type": "metadata", …}`` first, then ``{timestamp (epoch seconds,
float), message: {type, payload}}`` with ``type``: ``TurnBegin`` (``payload.user_input``
text parts: the prompt), ``ContentPart`` (``{type: text, text}`` or ``{type: think,
think}``), ``ToolCall`` (``{id, function: {name, arguments}}``), ``ToolResult``
(``{tool_call_id, return_value: {is_error, output}}``), ``StatusUpdate``
(``token_usage`` of the step, ``context_tokens``), ``StepBegin``, ``TurnEnd``.

Kimi Code records (top-level ``type``; ``time``/``created_at`` epoch ms):
``config.update`` (``modelAlias``, ``cwd``), ``turn.prompt``/``turn.steer`` (``input``
text parts), ``context.append_loop_event`` (``event.type`` ``content.part`` ``{part:
{type: text|think}}``, ``tool.call`` ``{toolCallId, name, args}``, ``tool.result``
``{toolCallId, result: {isError, output | message}}``, ``step.begin``, ``step.end``
``{model, finishReason, usage}``), ``usage.record`` (``model``, ``usage``).

Usage per step (``StatusUpdate.token_usage`` ``{input_other, output,
input_cache_read, input_cache_creation}``; Kimi Code ``usage`` ``{inputOther, output,
inputCacheRead, inputCacheCreation}``), each on a ``meta`` entry keyed by its line
(``usage_key`` ``kimi:<session>:<line hash>``); a ``usage.record`` right after a
``step.end`` that carried usage repeats its figures and is not counted again. The wire logs rarely name the model: ``config.update``'s ``modelAlias`` or
``step.end``'s ``model`` when they do, else none.
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources._util import as_int, compact_json, dict_at, openai_tool_calls
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers.jsonl import file_head, record_reader
from ctxkeep.timeutil import format_epoch

AGENT = "kimi"
# parser 2: tool calls through _util.openai_tool_calls (a call without arguments is "", not "null")
PARSER_VERSION = 2
MODE: Mode = "append"

_LEGACY = frozenset(
    {
        "TurnBegin",
        "ContentPart",
        "ToolCall",
        "ToolResult",
        "StatusUpdate",
        "StepBegin",
        "TurnEnd",
        "StepInterrupted",
        "CompactionBegin",
        "CompactionEnd",
        "ApprovalRequest",
        "ApprovalResponse",
    }
)
_CODE = frozenset(
    {"metadata", "config.update", "turn.prompt", "turn.steer", "context.append_loop_event", "usage.record"}
)
_EVENTS = frozenset({"content.part", "tool.call", "tool.result", "step.begin", "step.end"})


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``~/.kimi`` (Kimi CLI) and ``$KIMI_CODE_HOME`` or ``~/.kimi-code`` (Kimi Code)."""
    return [ctx.home / ".kimi", ctx.env_dir("KIMI_CODE_HOME", ctx.home / ".kimi-code")]


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``sessions/*/*/wire.jsonl`` (Kimi CLI) and
    ``sessions/*/*/agents/*/wire.jsonl`` (Kimi Code); a configured dir may be either
    home or its ``sessions`` dir."""
    d = Discovery(AGENT)
    rs = roots(ctx)
    for root in rs + list(ctx.extra_dirs):
        base = root if root.name == "sessions" else root / "sessions"
        d.add_glob(base, ["*/*/wire.jsonl", "*/*/agents/*/wire.jsonl"], MODE)
    d.explain_empty(rs[0], f"no sessions/*/*/wire.jsonl under {rs[0]} or {rs[1]}")
    return d


def matches(path: Path) -> bool:
    """True for a Kimi ``wire.jsonl`` given with ``--path``."""
    head = file_head(path, (".jsonl",), 4096)
    return path.name == "wire.jsonl" and (
        b'"message"' in head or b'"turn.prompt"' in head or b'"metadata"' in head
    )


def init_state(file: SourceFile) -> dict:
    """The session id from the path (agentsview's ``kimiSessionIDFromPath``): Kimi CLI
    ``<session dir>``; Kimi Code ``<session dir>/<agent>``, the main agent's parent-less."""
    p = file.path
    if p.parent.parent.name == "agents":
        session, agent = p.parents[2].name, p.parent.name
        sid = session if agent in ("main", "root") else f"{session}/{agent}"
        return {"sid": sid, "parent": session if sid != session else None}
    return {"sid": p.parent.name}


def _ts(rec: dict) -> str | None:
    t = rec.get("timestamp")
    if isinstance(t, int | float) and not isinstance(t, bool) and t > 0:
        return format_epoch(float(t))
    for k in ("time", "created_at"):
        ms = as_int(rec.get(k))
        if ms and ms > 0:
            return format_epoch(ms / 1000)
    return None


def _parts_text(parts) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


def _output(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(str(x.get("text") or "") for x in v if isinstance(x, dict))
    return "" if v is None else compact_json(v)


def _usage_entry(base: dict, usage: dict, model: str | None, camel: bool) -> dict:
    k = (
        ("inputOther", "output", "inputCacheRead", "inputCacheCreation")
        if camel
        else ("input_other", "output", "input_cache_read", "input_cache_creation")
    )
    inp, out, cr, cc = (as_int(usage.get(x)) or 0 for x in k)
    return dict(
        base,
        role="system",
        kind="meta",
        tool_name="usage",
        text="",
        model=model,
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=cr,
        cache_creation_tokens=cc,
        usage_key=f"kimi:{base['record_id']}",
    )


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One wire record → its entries (see the module doc)."""
    sid = state.get("sid") or Path(src).parent.name
    ts = _ts(rec) or state.get("ts")
    if ts:
        state["ts"] = ts
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": state.get("parent"),
        "project_dir": state.get("cwd"),
        "ts": ts,
        "is_sidechain": bool(state.get("parent")),
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{line_hash}",
        "part": 0,
    }
    msg = rec.get("message") if isinstance(rec.get("message"), dict) else None
    if msg is not None:  # Kimi CLI
        mtype = msg.get("type")
        p = dict_at(msg, "payload")
        if mtype not in _LEGACY:
            unknown(state, mtype)
        if mtype == "TurnBegin":
            return [dict(base, role="user", kind="message", text=_parts_text(p.get("user_input")))]
        if mtype == "ContentPart":
            if p.get("type") == "think":
                return [dict(base, role="assistant", kind="thinking", text=str(p.get("think") or ""))]
            return [dict(base, role="assistant", kind="message", text=str(p.get("text") or ""))]
        if mtype == "ToolCall":  # one OpenAI tool_calls item: {id, function {name, arguments}}
            return openai_tool_calls([p], base)
        if mtype == "ToolResult":
            rv = dict_at(p, "return_value")
            text = _output(rv.get("output"))
            return [
                dict(
                    base,
                    role="tool",
                    kind="tool_result",
                    native_id=p.get("tool_call_id"),
                    text=("[error] " + text) if rv.get("is_error") else text,
                )
            ]
        if mtype == "StatusUpdate" and isinstance(p.get("token_usage"), dict):
            return [_usage_entry(base, p["token_usage"], state.get("model"), camel=False)]
        return []  # StepBegin, TurnEnd and other UI events: nothing to keep
    rtype = rec.get("type")
    if rtype not in _CODE:
        unknown(state, rtype)
        return [dict(base, role="system", kind="meta", tool_name=str(rtype), text=compact_json(rec, 2000))]
    if rtype == "config.update":
        if isinstance(rec.get("modelAlias"), str):
            state["model"] = rec["modelAlias"]
        if isinstance(rec.get("cwd"), str):
            state["cwd"] = rec["cwd"]
        return []
    if rtype in ("turn.prompt", "turn.steer"):
        return [dict(base, role="user", kind="message", text=_parts_text(rec.get("input")))]
    if rtype == "usage.record":
        if isinstance(rec.get("model"), str):
            state["model"] = rec["model"]
        u = rec.get("usage")
        if state.pop("step_usage", False):  # the step.end before it carried these figures
            return []
        return [_usage_entry(base, u, state.get("model"), camel=True)] if isinstance(u, dict) else []
    if rtype == "metadata":
        return []
    ev = dict_at(rec, "event")
    et = ev.get("type")
    if et not in _EVENTS:
        unknown(state, f"event:{et}")
    if et == "content.part":
        part = dict_at(ev, "part")
        if part.get("type") == "think":
            return [
                dict(
                    base,
                    role="assistant",
                    kind="thinking",
                    text=str(part.get("think") or part.get("text") or ""),
                )
            ]
        return [dict(base, role="assistant", kind="message", text=str(part.get("text") or ""))]
    if et == "tool.call":
        args = ev.get("args")
        return [
            dict(
                base,
                role="assistant",
                kind="tool_call",
                tool_name=ev.get("name"),
                native_id=ev.get("toolCallId"),
                text=args if isinstance(args, str) else compact_json(args),
            )
        ]
    if et == "tool.result":
        res = dict_at(ev, "result")
        text = _output(res.get("output")) or str(res.get("message") or "")
        return [
            dict(
                base,
                role="tool",
                kind="tool_result",
                native_id=ev.get("toolCallId"),
                text=("[error] " + text) if res.get("isError") else text,
            )
        ]
    if et == "step.end":
        model = ev.get("model") if isinstance(ev.get("model"), str) else state.get("model")
        u = ev.get("usage")
        if not isinstance(u, dict):
            return []
        state["step_usage"] = True
        return [_usage_entry(base, u, model, camel=True)]
    return []


#: new lines of one wire.jsonl into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

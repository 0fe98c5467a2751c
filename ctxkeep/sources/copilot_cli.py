"""GitHub Copilot CLI session events.

Where: ``$COPILOT_HOME`` or ``~/.copilot`` (all platforms; ``%USERPROFILE%\\.copilot`` on
Windows): ``session-state/<session id>/events.jsonl`` (current) and the older flat
``session-state/<session id>.jsonl`` (as ccusage 20.0.24 documents: "Session-state
events are read from ${COPILOT_HOME:-~/.copilot}/session-state/<session-id>/events.jsonl").
Append-only JSONL.

Format facts (the agent-sessions fixture in the corpus, Copilot CLI 1.0.x, and ccusage's
Copilot adapter): each line is ``{type, data, id, parentId, timestamp}``. Types:
``session.start`` (``data.sessionId``, ``data.context.cwd``, ``selectedModel``),
``session.resume`` (``context.cwd``), ``user.message`` (``content``),
``assistant.message`` (``content``, ``toolRequests[] {toolCallId, name, arguments}``,
``messageId``, ``model``, ``outputTokens``, ``parentToolCallId`` inside sub-agents),
``assistant.reasoning`` (``content``), ``tool.execution_start`` /
``tool.execution_complete`` (``toolCallId``, ``success``, ``result.content``),
``subagent.started``/``completed``, ``session.shutdown`` (``modelMetrics{model:
{usage{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens,
reasoningTokens}}}``, ``tokenDetails``), ``session.error``, ``session.info``,
``session.truncation``, ``abort``, ``hook.*``, ``system.message`` … Unknown types are
``meta`` entries.

Usage: ``session.shutdown.modelMetrics`` (cumulative per session and model; the
latest shutdown wins, as ccusage reads it): ``input_tokens = inputTokens -
cacheReadTokens - cacheWriteTokens`` (ccusage's uncached input),
``cache_read_tokens``, ``cache_creation_tokens = cacheWriteTokens``, ``output_tokens``,
``reasoning_tokens``; ``usage_key`` = session:model. ``assistant.message.outputTokens``
is kept on the message entry but not counted (the shutdown totals include it).
Tool requests are not entries of their own: ``tool.execution_start`` is the call
(its ``arguments`` are the decoded ones).
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources._util import as_int, compact_json, dict_at
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "copilot-cli"
PARSER_VERSION = 1
MODE: Mode = "append"

_META_TEXT = ("message", "content", "reason", "infoType")


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``session-state/*/events.jsonl`` and ``session-state/*.jsonl`` under
    ``$COPILOT_HOME`` when set, else ``~/.copilot``, and in configured dirs."""
    d = Discovery(AGENT)
    root = ctx.env_dir("COPILOT_HOME", ctx.home / ".copilot")
    for base in [root / "session-state"] + list(ctx.extra_dirs):
        d.add_glob(
            base,
            ["*/events.jsonl", "*.jsonl"],
            MODE,
            lambda p: {"session": p.parent.name if p.name == "events.jsonl" else p.stem},
        )
    d.explain_empty(root, f"no session-state/*.jsonl under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a Copilot CLI events file given with ``--path``."""
    head = file_head(path, (".jsonl",), 4096)
    return b'"type":"session.start"' in head or (b'"type":"user.message"' in head and b'"data"' in head)


def init_state(file: SourceFile) -> dict:
    """The parser state at offset 0 of ``file``: the session id found at discovery,
    else the folder of an ``events.jsonl``, else the file stem."""
    return {
        "sid": file.meta.get("session")
        or (file.path.parent.name if file.path.name == "events.jsonl" else file.path.stem)
    }


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Map one event to entry dicts; ``state`` carries session id, cwd and model."""
    rtype = str(rec.get("type") or "")
    data = dict_at(rec, "data")
    if rtype in ("session.start", "session.resume"):
        if data.get("sessionId"):
            state["sid"] = str(data["sessionId"])
        ctx = dict_at(data, "context")
        if ctx.get("cwd"):
            state["cwd"] = ctx["cwd"]
        if data.get("selectedModel"):
            state["model"] = data["selectedModel"]
    if rtype == "session.model_change" and data.get("newModel"):
        state["model"] = data["newModel"]
    sid = state.get("sid") or "unknown"
    eid = rec.get("id") if isinstance(rec.get("id"), str) else None
    model = data.get("model") if isinstance(data.get("model"), str) else None
    sub = data.get("parentToolCallId")
    base = {
        "agent": AGENT,
        "session_id": sid,
        "native_id": eid,
        "parent_id": rec.get("parentId"),
        "project_dir": state.get("cwd"),
        "part": 0,
        "ts": rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None,
        "model": model or state.get("model"),
        "is_sidechain": bool(sub),
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{eid}" if eid and "trimmed" not in eid else f"{sid}:{line_hash}",
    }
    if rtype == "user.message":
        return [dict(base, role="user", kind="message", text=str(data.get("content") or ""))]
    if rtype == "assistant.message":
        e = dict(
            base,
            role="assistant",
            kind="message",
            text=str(data.get("content") or ""),
            message_id=data.get("messageId"),
            request_id=data.get("requestId"),
            output_tokens=as_int(data.get("outputTokens")),
        )
        out = [e]
        if isinstance(data.get("reasoningText"), str) and data["reasoningText"]:
            out.append(dict(base, role="assistant", kind="thinking", part=1, text=data["reasoningText"]))
        return out
    if rtype == "assistant.reasoning":
        return [dict(base, role="assistant", kind="thinking", text=str(data.get("content") or ""))]
    if rtype == "system.message":
        return [dict(base, role="system", kind="meta", tool_name=rtype, text=str(data.get("content") or ""))]
    if rtype == "tool.execution_start":
        args = data.get("arguments")
        return [
            dict(
                base,
                role="assistant",
                kind="tool_call",
                tool_name=data.get("toolName"),
                native_id=data.get("toolCallId") or eid,
                text=args if isinstance(args, str) else compact_json(args),
            )
        ]
    if rtype == "tool.execution_complete":
        res = dict_at(data, "result")
        content = res.get("content")
        text = content if isinstance(content, str) else compact_json(res) if res else ""
        if data.get("success") is False:
            text = "[error] " + text
        return [
            dict(
                base,
                role="tool",
                kind="tool_result",
                native_id=data.get("toolCallId") or eid,
                tool_name=(data.get("toolTelemetry") or {}).get("properties", {}).get("tool")
                if isinstance(data.get("toolTelemetry"), dict)
                else None,
                text=text,
            )
        ]
    if rtype == "session.shutdown":
        return _shutdown(data, base, sid)
    text = ""
    for k in _META_TEXT:
        if isinstance(data.get(k), str) and data[k]:
            text = data[k]
            break
    if not text and data:
        text = compact_json(data, 2000)
    return [dict(base, role="system", kind="meta", tool_name=rtype or "unknown", text=text)]


def _shutdown(data: dict, base: dict, sid: str) -> list[dict]:
    """A shutdown: one meta entry plus one usage row per model in ``modelMetrics``."""
    out = [
        dict(
            base,
            role="system",
            kind="meta",
            tool_name="session.shutdown",
            text=compact_json(
                {
                    k: data.get(k)
                    for k in ("shutdownType", "currentModel", "totalPremiumRequests", "tokenDetails")
                    if k in data
                },
                2000,
            ),
        )
    ]
    mm = dict_at(data, "modelMetrics")
    for i, (model, m) in enumerate(sorted(mm.items())):
        u = m.get("usage") if isinstance(m, dict) and isinstance(m.get("usage"), dict) else None
        if not u:
            continue
        inp = as_int(u.get("inputTokens")) or 0
        cr = as_int(u.get("cacheReadTokens")) or 0
        cw = as_int(u.get("cacheWriteTokens")) or 0
        out.append(
            dict(
                base,
                role="system",
                kind="meta",
                tool_name="usage",
                part=i + 1,
                model=model,
                text=f"usage {model}",
                input_tokens=max(inp - cr - cw, 0),
                output_tokens=as_int(u.get("outputTokens")) or 0,
                cache_read_tokens=cr,
                cache_creation_tokens=cw,
                reasoning_tokens=as_int(u.get("reasoningTokens")) or 0,
                usage_key=f"copilot:{sid}:{model}",
            )
        )
    return out


#: new events of one session file into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

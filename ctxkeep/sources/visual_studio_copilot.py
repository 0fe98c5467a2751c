"""GitHub Copilot in Visual Studio (the IDE on Windows, and its Mac and Linux builds'
trace folders): OpenTelemetry traces of the Copilot chat.

Where (agentsview 0.46 ``internal/parser/types.go`` AgentVSCopilot,
``visualstudio_copilot.go`` IsVisualStudioCopilotTraceFile): the trace folder
``%LOCALAPPDATA%\\Temp\\VSGitHubCopilotLogs\\traces`` (Windows; ``~/AppData/Local/
Temp/…`` under the home), ``~/Library/Caches/VSGitHubCopilotLogs/traces`` (macOS),
``~/.cache/VSGitHubCopilotLogs/traces`` (Linux); ``$VISUALSTUDIO_COPILOT_DIR`` names
the folder instead. Files ``*_VSGitHubCopilot_traces.jsonl``, appended to and rotated
(one file holds spans of several conversations). Visual Studio 2026 also writes one
extensionless file per conversation, ``<solution>/.vs/<name>/copilot-chat/<thread>/
sessions/<uuid>`` (``visualstudio_copilot_provider.go``): read when given with
``--path`` or found under a configured dir (no home scan looks for ``.vs`` folders).

Format facts (OTLP/JSON, the OpenTelemetry protocol's JSON encoding, one
``ExportTraceServiceRequest`` a line; the GenAI semantic conventions' attribute names;
agentsview 0.46 ``visualstudio_copilot.go`` and its redacted samples
``testdata/visualstudio-copilot/*_VSGitHubCopilot_traces.jsonl``, Visual Studio
18.6): ``{resourceSpans: [{resource: {attributes: [{key, value: {stringValue |
intValue | boolValue}}]}, scopeSpans: [{spans: [{traceId, spanId, parentSpanId,
name, startTimeUnixNano, endTimeUnixNano (decimal strings, ns), attributes}]}]}]}``.
The resource's ``service.version`` is the Visual Studio build (the ledger's agent
version). Spans of a conversation carry ``gen_ai.conversation.id``:

- ``invoke_agent GitHub Copilot`` (``gen_ai.operation.name`` ``invoke_agent``): one
  user turn; ``copilot_chat.root_request_id``, ``copilot_chat.mode`` (Ask/Agent),
  ``gen_ai.request.model``, ``gen_ai.response.model``;
- ``chat <model>`` (operation ``chat``): one model call; ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` JSON ``[{role, parts: [{type: text, content} | {type:
  tool_call, id, name, arguments}]}]`` (the last ``user`` message is the turn's
  prompt, repeated by every call of the turn), ``gen_ai.usage.input_tokens`` and
  ``gen_ai.usage.output_tokens``;
- ``execute_tool <name>`` (operation ``execute_tool``): ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` (JSON text),
  ``gen_ai.tool.call.result``.

Entries: the session is the conversation id (lower-cased). A turn is a ``meta`` entry
(``tool_name`` ``turn``: mode and model); a chat span gives the prompt (``record_id``
``<conversation>:prompt:<root request id>``, so a turn's repeated prompt is stored
once), the answer and its tool calls; an executed tool gives its call and
``tool_result``. A call's ``record_id`` is ``<conversation>:call:<call id>``, so a call
named by both the chat output and its execution is stored once. Usage: per span that
logs tokens (``usage_key`` ``vs-copilot:<traceId>:<spanId>``), the response model
else the request model. Times: ``startTimeUnixNano``. Spans without a conversation
id are counted as read, not stored; unknown span operations are ``meta`` entries
reported to the coverage ledger.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_int, compact_json, epoch_iso
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile, sorted_paths
from ctxkeep.sources.coverage import set_version, unknown
from ctxkeep.sources.readers.jsonl import record_reader

AGENT = "visualstudio-copilot"
PARSER_VERSION = 1
MODE: Mode = "append"

TRACE_SUFFIX = "_VSGitHubCopilot_traces.jsonl"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$VISUALSTUDIO_COPILOT_DIR`` when set, else the Linux, macOS and Windows
    trace folders under the home."""
    env = ctx.env.get("VISUALSTUDIO_COPILOT_DIR")
    if env:
        return [Path(env).expanduser()]
    tail = Path("VSGitHubCopilotLogs") / "traces"
    return [
        ctx.home / ".cache" / tail,
        ctx.home / "Library" / "Caches" / tail,
        ctx.home / "AppData" / "Local" / "Temp" / tail,
    ]


def _is_session_file(p: Path) -> bool:
    parts = p.parts
    return (
        bool(_UUID.match(p.name))
        and len(parts) >= 4
        and parts[-2].lower() == "sessions"
        and parts[-4].lower() == "copilot-chat"
    )


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find trace files in the trace folders, and trace files or VS 2026 session
    files under configured dirs."""
    d = Discovery(AGENT)
    for base in roots(ctx):
        d.add_glob(base, [f"*{TRACE_SUFFIX}"], MODE)
    for base in ctx.extra_dirs:
        d.add_glob(base, [f"*{TRACE_SUFFIX}"], MODE)
        if base.is_dir():
            for p in sorted_paths(base.glob("**/copilot-chat/*/sessions/*")):
                if _is_session_file(p):
                    d.add(p, MODE)
    d.explain_empty(roots(ctx)[0], f"no *{TRACE_SUFFIX} in the Visual Studio trace folders")
    return d


def matches(path: Path) -> bool:
    """True for a trace file, or a VS 2026 session file holding OTLP spans."""
    if path.name.endswith(TRACE_SUFFIX):
        return True
    if not _is_session_file(path):
        return False
    try:
        with open(path, "rb") as f:
            return b'"resourceSpans"' in f.read(4096)
    except OSError:
        return False


def init_state(file: SourceFile) -> dict:
    return {}


def _value(v: Any) -> Any:
    if not isinstance(v, dict):
        return None
    for k in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if k in v:
            return v[k]
    return None


def _attrs(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(items, list):
        for a in items:
            if isinstance(a, dict) and isinstance(a.get("key"), str):
                out[a["key"]] = _value(a.get("value"))
    return out


def _s(a: dict, key: str) -> str | None:
    v = a.get(key)
    return v.strip() if isinstance(v, str) and v.strip() else None


def _messages(raw: Any) -> list[dict]:
    if not isinstance(raw, str) or not raw.strip():
        return []
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return []
    return [m for m in doc if isinstance(m, dict)] if isinstance(doc, list) else []


def _parts(m: dict) -> list[dict]:
    p = m.get("parts")
    return [x for x in p if isinstance(x, dict)] if isinstance(p, list) else []


def _args_text(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else compact_json(v)


def span_entries(span: dict, base: dict, state: dict) -> list[dict]:
    """Entry dicts of one span (see the module doc); [] for a span of no conversation."""
    a = _attrs(span.get("attributes"))
    conv = _s(a, "gen_ai.conversation.id")
    if conv is None:
        return []
    sid = conv.lower() if _UUID.match(conv) else conv
    op = _s(a, "gen_ai.operation.name") or str(span.get("name") or "").split(" ", 1)[0]
    ts = epoch_iso(_int(span.get("startTimeUnixNano")), 1e-9)
    span_id = str(span.get("spanId") or "")
    trace_id = str(span.get("traceId") or "")
    model = _s(a, "gen_ai.response.model") or _s(a, "gen_ai.request.model")
    e = dict(base, session_id=sid, ts=ts or base.get("ts"), native_id=span_id or None)
    out: list[dict] = []
    root = _s(a, "copilot_chat.root_request_id")
    if op == "invoke_agent":
        mode = _s(a, "copilot_chat.mode") or ""
        out.append(
            dict(
                e,
                record_id=f"{sid}:turn:{span_id}",
                part=0,
                role="system",
                kind="meta",
                tool_name="turn",
                text=" ".join(x for x in (mode, model or "") if x) or "turn",
            )
        )
    elif op == "chat":
        prompt = None
        for m in reversed(_messages(a.get("gen_ai.input.messages"))):
            if m.get("role") == "user":
                text = "\n".join(str(p.get("content")).strip() for p in _parts(m) if p.get("content"))
                if text.strip():
                    prompt = text.strip()
                    break
        if prompt:
            key = root or f"{span_id}"
            out.append(
                dict(e, record_id=f"{sid}:prompt:{key}", part=0, role="user", kind="message", text=prompt)
            )
        texts: list[str] = []
        calls: list[dict] = []
        for m in _messages(a.get("gen_ai.output.messages")):
            if m.get("role") != "assistant":
                continue
            for p in _parts(m):
                if p.get("type") == "text" and str(p.get("content") or "").strip():
                    texts.append(str(p["content"]).strip())
                elif p.get("type") == "tool_call" and p.get("name"):
                    cid = str(p.get("id") or "") or None
                    calls.append(
                        dict(
                            e,
                            record_id=f"{sid}:call:{cid or span_id + ':' + str(len(calls))}",
                            part=0,
                            role="assistant",
                            kind="tool_call",
                            tool_name=str(p["name"]),
                            native_id=cid,
                            text=_args_text(p.get("arguments")),
                            model=model,
                        )
                    )
                elif p.get("type") not in ("text", "tool_call"):
                    unknown(state, f"part:{p.get('type')}")
        answer = dict(
            e,
            record_id=f"{sid}:chat:{span_id}",
            part=0,
            role="assistant",
            kind="message",
            text="\n\n".join(texts),
            model=model,
        )
        if texts:
            out.append(answer)
        out += calls
        _usage(a, out[-1] if texts or calls else answer, out, trace_id, span_id, model)
    elif op == "execute_tool":
        name = _s(a, "gen_ai.tool.name")
        cid = _s(a, "gen_ai.tool.call.id")
        key = cid or span_id
        out.append(
            dict(
                e,
                record_id=f"{sid}:call:{key}",
                part=0,
                role="assistant",
                kind="tool_call",
                tool_name=name,
                native_id=cid,
                text=_args_text(a.get("gen_ai.tool.call.arguments")),
            )
        )
        result = a.get("gen_ai.tool.call.result")
        out.append(
            dict(
                e,
                record_id=f"{sid}:result:{key}",
                part=0,
                role="tool",
                kind="tool_result",
                tool_name=name,
                native_id=cid,
                text=result if isinstance(result, str) else _args_text(result),
            )
        )
    else:
        unknown(state, f"operation:{op or 'none'}")
        out.append(
            dict(
                e,
                record_id=f"{sid}:span:{span_id}",
                part=0,
                role="system",
                kind="meta",
                tool_name=str(span.get("name") or op or "span"),
                text=compact_json(a, 2000),
            )
        )
    if op != "chat":
        _usage(a, out[0] if out else e, out, trace_id, span_id, model)
    return out


def _usage(a: dict, target: dict, out: list[dict], trace_id: str, span_id: str, model: str | None) -> None:
    inp = as_int(_int(a.get("gen_ai.usage.input_tokens")))
    outp = as_int(_int(a.get("gen_ai.usage.output_tokens")))
    if not inp and not outp:
        return
    usage = {
        "input_tokens": inp or 0,
        "output_tokens": outp or 0,
        "usage_key": f"vs-copilot:{trace_id}:{span_id}",
        "model": model,
    }
    if target in out and target.get("kind") in ("message", "meta") and target["role"] != "user":
        target.update(usage)
    else:
        out.append(
            dict(
                target,
                record_id=f"{target['session_id']}:usage:{span_id}",
                part=0,
                native_id=span_id or None,
                role="system",
                kind="meta",
                tool_name="usage",
                text="",
                **usage,
            )
        )


def _int(v: Any) -> int | None:
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return as_int(v)


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One OTLP line (an ``ExportTraceServiceRequest``) → the entries of its spans."""
    base = {"agent": AGENT, "source_path": src, "source_offset": offset}
    rs = rec.get("resourceSpans")
    if not isinstance(rs, list):
        unknown(state, "no-resourceSpans")
        return [
            dict(
                base,
                session_id=f"{Path(src).name}",
                record_id=f"{Path(src).name}:{line_hash}",
                part=0,
                role="system",
                kind="meta",
                tool_name="unknown",
                text=compact_json(rec, 2000),
            )
        ]
    out: list[dict] = []
    for r in rs:
        if not isinstance(r, dict):
            continue
        res = _attrs(
            (r.get("resource") or {}).get("attributes") if isinstance(r.get("resource"), dict) else None
        )
        set_version(state, _s(res, "service.version"))
        for ss in r.get("scopeSpans") or []:
            spans = ss.get("spans") if isinstance(ss, dict) else None
            for span in spans if isinstance(spans, list) else []:
                if isinstance(span, dict):
                    out += span_entries(span, base, state)
    return out


#: new lines of one trace file into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

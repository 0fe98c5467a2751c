"""Pi (badlogic/pi-mono's coding agent, ``pi``) sessions, and Oh My Pi's.

Where (every platform): ``$PI_CODING_AGENT_DIR`` else ``~/.pi/agent`` (pi-mono
packages/coding-agent ``getAgentDir``), and Oh My Pi's ``~/.omp/agent``; each with
``sessions/<encoded cwd>/<timestamp>_<id>.jsonl``, appended as the session goes.
Sources: wesm/agentsview 0.46 ``internal/parser/pi.go`` and ``pi_test.go`` (the
entries), tokscale's client list (``~/.pi/agent/sessions``, ``~/.omp/agent/sessions``),
pi-mono packages/ai ``types.ts`` ``Usage`` as pi extensions quote it (``input``,
``output``, ``cacheRead``, ``cacheWrite``, ``totalTokens``, ``cost{…}``).

Format: line 1 is the header ``{"type": "session", "version"?, "id", "timestamp", "cwd",
"branchedFrom"?}`` (v1 headers have no ``id``: the file name is the session);
then entries ``{"type", "id"?, "parentId"?, "timestamp" (ISO)}``:

- ``message``: ``message.role`` ``user`` (``content`` text or ``[{type: text}]``),
  ``assistant`` (``content`` blocks ``text``, ``thinking {thinking}``, ``toolCall {id,
  name, arguments}``; ``provider``, ``model``, ``usage``), ``toolResult``
  (``toolCallId``, ``toolName``, ``content`` blocks, ``isError``); ``message.timestamp``
  is epoch ms where the entry has none;
- ``model_change``, ``thinking_level_change``, ``compaction`` (``summary``),
  ``branch_summary`` (``summary``), ``session_info``, ``label``, ``custom``: meta (a
  compaction or branch summary as a ``summary`` entry).

The agent version in the coverage ledger is the header's session format ``version``
(the records name no CLI version). Usage per assistant message (``usage_key``
``pi:<session>:<entry id or line>``; input = ``input``, cache read/write as given,
``usage.cost.total`` the logged cost). ``branchedFrom`` (a session forked from
another file) names the parent session (that file's stem).
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources._util import as_float, as_int, compact_json, dict_at
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.coverage import set_version, unknown
from ctxkeep.sources.readers.jsonl import file_head, record_reader
from ctxkeep.timeutil import format_epoch

AGENT = "pi"
PARSER_VERSION = 1
MODE: Mode = "append"

#: entry types whose meaning is known (agentsview's pi.go, pi-mono's session manager)
KNOWN_TYPES = frozenset(
    {
        "session",
        "message",
        "model_change",
        "thinking_level_change",
        "compaction",
        "branch_summary",
        "session_info",
        "label",
        "custom",
    }
)


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$PI_CODING_AGENT_DIR`` (else ``~/.pi/agent``) and ``~/.omp/agent``."""
    return [ctx.env_dir("PI_CODING_AGENT_DIR", ctx.home / ".pi" / "agent"), ctx.home / ".omp" / "agent"]


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``sessions/*/*.jsonl`` under the Pi dirs; a configured dir may be an agent
    dir or a ``sessions`` dir."""
    d = Discovery(AGENT)
    rs = roots(ctx)
    for root in rs + list(ctx.extra_dirs):
        base = root if root.name == "sessions" else root / "sessions"
        d.add_glob(base, ["*/*.jsonl"], MODE)
    d.explain_empty(rs[0], f"no sessions/*/*.jsonl under {rs[0]} or {rs[1]}")
    return d


def matches(path: Path) -> bool:
    """True for a Pi session file (its header line) given with ``--path``."""
    head = file_head(path, (".jsonl",), 2048)
    return head.startswith(b'{"type":"session"') or head.startswith(b'{"type": "session"')


def init_state(file: SourceFile) -> dict:
    """The session id the file name implies (v1 headers name none)."""
    return {"sid": file.path.stem}


def _ts(rec: dict, msg: dict) -> str | None:
    ts = rec.get("timestamp")
    if isinstance(ts, str) and ts[:2].isdigit():
        return ts
    ms = as_int(msg.get("timestamp"))
    return format_epoch(ms / 1000) if ms and ms > 0 else None


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One Pi entry → its entries (see the module doc)."""
    rtype = rec.get("type")
    if rtype not in KNOWN_TYPES:
        unknown(state, rtype)
    if rtype == "session":
        if isinstance(rec.get("id"), str) and rec["id"]:
            state["sid"] = rec["id"]
        if isinstance(rec.get("cwd"), str):
            state["cwd"] = rec["cwd"]
        if rec.get("version") is not None:
            set_version(state, str(rec["version"]))
        bf = rec.get("branchedFrom")
        if isinstance(bf, str) and bf:
            state["parent"] = Path(bf).stem
        return []
    sid = state.get("sid") or Path(src).stem
    msg = dict_at(rec, "message")
    eid = rec.get("id") if isinstance(rec.get("id"), str) and rec["id"] else None
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": state.get("parent"),
        "native_id": eid,
        "parent_id": rec.get("parentId") if isinstance(rec.get("parentId"), str) else None,
        "project_dir": state.get("cwd"),
        "ts": _ts(rec, msg),
        "is_sidechain": False,
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{eid or line_hash}",
        "part": 0,
    }
    if rtype != "message":
        summary = rec.get("summary")
        if rtype in ("compaction", "branch_summary") and isinstance(summary, str):
            return [dict(base, role="system", kind="summary", tool_name=rtype, text=summary)]
        if rtype == "session_info" and isinstance(rec.get("name"), str):
            return [dict(base, role="system", kind="meta", tool_name="session", text=rec["name"])]
        rest = {k: v for k, v in rec.items() if k not in ("type", "id", "parentId", "timestamp")}
        return [dict(base, role="system", kind="meta", tool_name=str(rtype), text=compact_json(rest, 2000))]
    role = msg.get("role")
    if role == "user":
        return [dict(base, role="user", kind="message", text=_text(msg.get("content")))]
    if role == "toolResult":
        text = _text(msg.get("content"))
        return [
            dict(
                base,
                role="tool",
                kind="tool_result",
                native_id=msg.get("toolCallId"),
                tool_name=msg.get("toolName"),
                text=("[error] " + text) if msg.get("isError") else text,
            )
        ]
    if role != "assistant":
        unknown(state, f"message:{role}")
        return [dict(base, role="system", kind="meta", tool_name=str(role), text=compact_json(msg, 2000))]
    model = msg.get("model") if isinstance(msg.get("model"), str) else None
    out: list[dict] = []
    content = msg.get("content")
    for b in content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        e = dict(base, role="assistant", part=len(out), model=model)
        if t == "text":
            out.append(dict(e, kind="message", text=str(b.get("text") or "")))
        elif t == "thinking":
            out.append(dict(e, kind="thinking", text=str(b.get("thinking") or "")))
        elif t == "toolCall":
            out.append(
                dict(
                    e,
                    kind="tool_call",
                    tool_name=b.get("name"),
                    native_id=b.get("id"),
                    text=compact_json(b.get("arguments")),
                )
            )
        elif t == "image":
            out.append(dict(e, kind="message", text=f"[image {b.get('mimeType') or ''}]".replace(" ]", "]")))
        else:
            unknown(state, f"block:{t}")
            out.append(dict(e, role="system", kind="meta", tool_name=str(t), text=compact_json(b, 2000)))
    if not out:
        out.append(dict(base, role="assistant", kind="message", model=model, text=""))
    usage = msg.get("usage") if isinstance(msg.get("usage"), dict) else None
    if usage:
        cost = dict_at(usage, "cost")
        out[0].update(
            input_tokens=as_int(usage.get("input")) or 0,
            output_tokens=as_int(usage.get("output")) or 0,
            cache_read_tokens=as_int(usage.get("cacheRead")) or 0,
            cache_creation_tokens=as_int(usage.get("cacheWrite")) or 0,
            cost_usd=as_float(cost.get("total")),
            usage_key=f"pi:{sid}:{eid or line_hash}",
        )
    return out


#: new lines of one session file into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

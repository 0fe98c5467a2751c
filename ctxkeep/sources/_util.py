"""Small helpers shared by source modules: text rendering of common block shapes."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (e.g. ``\\x1b[1m``) from terminal output."""
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def media_placeholder(kind: str, media_type: str | None, b64_len: int) -> str:
    """A short stand-in for inline base64 media: ``[image image/png, 785,205 bytes]``.
    The size is the decoded size (3/4 of the base64 length); the data is never kept."""
    return f"[{kind} {media_type or 'unknown'}, {b64_len * 3 // 4:,} bytes]"


def compact_json(value: Any, limit: int | None = None) -> str:
    """Compact JSON text of ``value`` (non-ASCII kept), optionally cut to ``limit`` chars."""
    try:
        s = orjson.dumps(value).decode("utf-8")
    except TypeError:
        s = str(value)
    return s if limit is None or len(s) <= limit else s[:limit] + "…"


def as_float(v: Any) -> float | None:
    """``v`` as a float when it is a finite number (bool excluded), else None (a cost a
    file logs as text or NaN is not trusted)."""

    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def as_int(v: Any) -> int | None:
    """``v`` as an int when it is a number (bool excluded), else None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v)
    return None


_B64_KEYS = ("data", "base64", "image_url", "url")
_B64_MIN = 256


def drop_media(value: Any) -> Any:
    """A copy of ``value`` where inline base64 media (a string over 256 chars under a
    ``data``/``base64``/``image_url``/``url`` key that is a ``data:`` URL or has no
    spaces) is replaced by ``media_placeholder``. Used before dumping records of
    unknown shape (attachments, unknown blocks) as JSON text, so no base64 is stored."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if (
                k in _B64_KEYS
                and isinstance(v, str)
                and len(v) > _B64_MIN
                and (v.startswith("data:") or " " not in v[:_B64_MIN])
            ):
                mt = value.get("media_type") or value.get("mimeType") or value.get("mime_type")
                if v.startswith("data:"):
                    mt = mt or v[5 : v.find(";")] if ";" in v[:100] else mt
                out[k] = media_placeholder("media", mt if isinstance(mt, str) else None, len(v))
            else:
                out[k] = drop_media(v)
        return out
    if isinstance(value, list):
        return [drop_media(v) for v in value]
    return value


def block_text(b: dict, media: tuple[str, ...] = ("image",), scrub: bool = False) -> str:
    """Text of one Anthropic-style content block (Anthropic Messages API
    ``ContentBlock``, as Claude Code and the Cline family store them): a ``text``
    block's text; a block whose type is in ``media`` (``image``, ``document``) a
    ``media_placeholder`` of its base64 ``source``; any other block compact JSON cut to
    2,000 chars (with ``scrub``, its inline media first replaced by ``drop_media``)."""
    t = b.get("type")
    if t == "text":
        return str(b.get("text") or "")
    if t in media:
        src = b.get("source") or {}
        return media_placeholder(t, src.get("media_type"), len(src.get("data") or ""))
    return compact_json(drop_media(b) if scrub else b, 2000)


def blocks_text(
    content: Any,
    render: Callable[[dict], str] = block_text,
    *,
    scalar: Callable[[Any], str] = compact_json,
    skip_non_dict: bool = False,
) -> str:
    """Plain text of a message's ``content``: a string as it is; a list of blocks, each
    dict rendered by ``render`` and anything else by ``str`` (or skipped), joined by
    newlines; None as ``""``; any other value by ``scalar``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else scalar(content)
    out = []
    for b in content:
        if isinstance(b, dict):
            out.append(render(b))
        elif not skip_non_dict:
            out.append(str(b))
    return "\n".join(out)


def dict_at(obj: dict, key: Any) -> dict:
    """``obj[key]`` when it is a JSON object (a dict), else an empty dict: a record's
    field read without trusting its type."""
    v = obj.get(key)
    return v if isinstance(v, dict) else {}


def nonempty(v: Any) -> str | None:
    """``v`` when it is a non-empty string, else None (a value read from an agent's JSON
    or database column of any type)."""
    return v if isinstance(v, str) and v else None


def relabel(entries: list[dict], agent: str, drop: str = "") -> list[dict]:
    """``entries`` parsed by the parser a fork shares (Claude Code's, Codex's, Pi's) made
    ``agent``'s: its name, and each usage key ``<agent>:<key>`` (``drop``, the shared
    parser's own prefix, taken off first) so the fork's usage is counted as its own.
    Returns ``entries``, changed in place."""
    for e in entries:
        e["agent"] = agent
        if e.get("usage_key"):
            e["usage_key"] = f"{agent}:{e['usage_key'].removeprefix(drop)}"
    return entries


def tool_call_entry(base: dict, call_id: Any, name: Any, args: Any) -> dict:
    """A ``tool_call`` entry of the assistant: ``native_id`` the call's id (a tool
    result names it), ``tool_name`` its name (non-empty strings, else None), ``text``
    its arguments as compact JSON (``""`` when there are none)."""
    return dict(
        base,
        role="assistant",
        kind="tool_call",
        native_id=nonempty(call_id),
        tool_name=nonempty(name),
        text="" if args is None else compact_json(args),
    )


def openai_tool_calls(calls: Any, base: dict, start: int = 0) -> list[dict]:
    """Tool-call entries of an OpenAI chat-completions message's ``tool_calls`` list
    (OpenAI API reference, "Chat Completions: message.tool_calls"): each item ``{id,
    type: function, function {name, arguments (a JSON string)}}``, or flattened ``{id,
    name, arguments | input}`` as several agents store it (Grok CLI's current
    chat history, Hermes). One entry per item, ``part`` numbered from ``start``,
    ``native_id`` the call id (the tool result's ``tool_call_id`` names it),
    ``tool_name`` the function's name, ``text`` the arguments as the agent stored them
    (a string as it is, anything else compact JSON, none ``""``). Items that are not
    objects are passed over."""
    out: list[dict] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        fn = dict_at(call, "function")
        args = next((src[k] for src in (fn, call) for k in ("arguments", "input") if k in src), None)
        out.append(
            dict(
                base,
                part=start + len(out),
                role="assistant",
                kind="tool_call",
                native_id=nonempty(call.get("id")),
                tool_name=nonempty(fn.get("name")) or nonempty(call.get("name")),
                text=args if isinstance(args, str) else "" if args is None else compact_json(args),
            )
        )
    return out


def openai_message_entries(
    msg: dict,
    base: dict,
    text_of: Callable[[Any], str] = blocks_text,
    reasoning_keys: tuple[str, ...] = ("reasoning_content", "reasoning"),
) -> list[dict]:
    """Entries of one OpenAI-style chat message ``{role, content, tool_calls?,
    tool_call_id?, name?, reasoning_content?}`` (the loop several agents log: an
    assistant message whose ``tool_calls`` are answered by ``tool`` messages naming
    the call's id in ``tool_call_id``):

    - ``assistant``: its reasoning (the first of ``reasoning_keys`` holding text) as
      ``thinking``, its text (``text_of(content)``) as a ``message`` when not empty,
      then one ``tool_call`` per ``tool_calls`` item (``openai_tool_calls``), parts
      numbered in that order;
    - ``tool`` (and ``function``, the pre-tools name): one ``tool_result`` whose
      ``native_id`` is ``tool_call_id`` and ``tool_name`` the message's ``name``;
    - ``user``: a ``message``; ``system``/``developer`` and any other role: a ``meta``
      entry named after the role (the caller counts an unknown role for coverage).

    ``base`` holds the entry's common keys (agent, session, record id, ts, model …)."""
    role = msg.get("role") if isinstance(msg.get("role"), str) else ""
    text = text_of(msg.get("content"))
    if role == "assistant":
        out: list[dict] = []
        reasoning = next((msg[k] for k in reasoning_keys if nonempty(msg.get(k))), None)
        if reasoning:
            out.append(dict(base, part=0, role="assistant", kind="thinking", text=reasoning))
        if text:
            out.append(dict(base, part=len(out), role="assistant", kind="message", text=text))
        return out + openai_tool_calls(msg.get("tool_calls"), base, len(out))
    if role in ("tool", "function"):
        return [
            dict(
                base,
                part=0,
                role="tool",
                kind="tool_result",
                native_id=nonempty(msg.get("tool_call_id")),
                tool_name=nonempty(msg.get("name")),
                text=text,
            )
        ]
    if role == "user":
        return [dict(base, part=0, role="user", kind="message", text=text)]
    return [dict(base, part=0, role="system", kind="meta", tool_name=role or "unknown", text=text)]


@functools.lru_cache(maxsize=64)
def _json_object_cached(path: str, mtime_ns: int, size: int) -> dict:
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def json_object(path: Path) -> dict:
    """The JSON object in ``path`` (a session's companion metadata file: Kiro's
    ``<id>.json``, Grok's ``summary.json``, Vibe's ``meta.json`` …), ``{}`` when it is
    missing, unreadable or not an object; read again only when its mtime or size
    changed (64 files cached), so a parser may ask for it on every line. A path a
    reparse reads from the vault (``readers.jsonl.VIEW``: a sidecar's newest version,
    ``readers.sidecar``) is read there."""
    from ctxkeep.sources.readers.jsonl import VIEW

    path = VIEW.get(str(path), path)
    try:
        st = path.stat()
    except OSError:
        return {}
    return _json_object_cached(str(path), st.st_mtime_ns, st.st_size)


def title_entry(
    agent: str,
    session_id: str,
    title: str,
    src: str,
    *,
    ts: str | None = None,
    project_dir: str | None = None,
    offset: int = 0,
    record_id: str | None = None,
) -> dict:
    """A session's title as a ``meta`` entry (``tool_name`` ``title``); its
    ``record_id`` is ``<session>:title:<title>`` unless given (a renamed session
    gets a second title entry, the newest by time is the session's title)."""
    return {
        "agent": agent,
        "session_id": session_id,
        "project_dir": project_dir,
        "ts": ts,
        "role": "system",
        "kind": "meta",
        "tool_name": "title",
        "text": title,
        "part": 0,
        "source_path": src,
        "source_offset": offset,
        "record_id": record_id or f"{session_id}:title:{title}",
    }


def epoch_iso(v: Any, unit: float = 1.0) -> str | None:
    """``v`` (a number of ``unit`` seconds since the epoch: 1 for seconds, 0.001 for
    milliseconds) as ISO-8601 UTC text; None for a missing, non-positive or
    out-of-range value."""
    x = as_float(v)
    if x is None or x <= 0:
        return None
    from ctxkeep.timeutil import format_epoch

    try:
        return format_epoch(x * unit)
    except (OverflowError, OSError, ValueError):
        return None


def sqlite_time_iso(v: Any) -> str | None:
    """A SQLite ``TIMESTAMP`` text (``YYYY-MM-DD HH:MM:SS[.f]``, UTC, as
    ``CURRENT_TIMESTAMP`` writes it; an ISO-8601 text passes through) as ISO-8601 text
    with ``Z`` when it names no offset; None for anything else."""
    s = nonempty(v)
    if not s:
        return None
    s = s.replace(" ", "T", 1)
    return s if s.endswith("Z") or "+" in s[10:] else s + "Z"

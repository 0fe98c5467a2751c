"""Continue (continuedev/continue, VS Code / JetBrains extension and ``cn`` CLI) sessions.

Where: ``$CONTINUE_GLOBAL_DIR`` when set, else ``~/.continue`` (all platforms;
``%USERPROFILE%\\.continue`` on Windows): ``sessions/<session id>.json``, one JSON
document per session rewritten in place as the chat grows (``sessions/sessions.json``
is the index, skipped). Read whole on change (``readers.document.read_document``).

Format (``core/index.d.ts``: ``Session``/``PersistedSessionInfo``): ``{sessionId,
title, workspaceDirectory, history: ChatHistoryItem[], mode?, chatModelTitle?,
usage?}``; ``ChatHistoryItem {message: ChatMessage, contextItems[], promptLogs?,
toolCallState?, toolCallStates?, reasoning?, conversationSummary?}``;
``ChatMessage {role: user|assistant|system|thinking|tool, content: string |
MessagePart[] ({type: text, text} | {type: imageUrl}), toolCalls?[{id, function:
{name, arguments}}], toolCallId?, usage?}``. The 2024 type has only user/assistant/
system with string content; later ones add thinking/tool roles and tool calls.
Timestamps are not stored per message: every entry gets the file's mtime (UTC) unless
a ``promptLogs``/``dateCreated`` value is present (none in the published type), so
``ts`` is "last saved", not "said at".

Usage: ``message.usage {promptTokens, completionTokens, promptTokensDetails?:
{cachedTokens, cacheWriteTokens}}`` on assistant messages when Continue logged it
(newer versions): ``input_tokens = promptTokens - cachedTokens - cacheWriteTokens``.
Entry ids: ``<session>:<history index>:<SHA-256 of the message>``: stable while the
history only grows; an edited or truncated history (Continue lets the user edit an
earlier turn) gives new ids, and the turns gone from the file are marked ``rewound``.
``source_offset`` is the turn's index in ``history`` (not a byte offset: the document
is pretty-printed JSON whose turns carry no id to find them by).
The corpus has no Continue file; tests use tests/fixtures/continue/.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_int, block_text, blocks_text, dict_at, title_entry
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.readers.document import read_document, track_ids
from ctxkeep.sources.readers.jsonl import file_head, stat_of
from ctxkeep.timeutil import format_epoch

AGENT = "continue"
PARSER_VERSION = 1
MODE: Mode = "rewrite"


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``sessions/*.json`` (not ``sessions.json``) under ``$CONTINUE_GLOBAL_DIR``
    when set, else ``~/.continue``, and in configured dirs."""
    root = ctx.env_dir("CONTINUE_GLOBAL_DIR", ctx.home / ".continue")
    d = Discovery(AGENT)
    for base in [root / "sessions"] + list(ctx.extra_dirs):
        d.add_glob(base, ["*.json"], MODE, exclude=["sessions.json"])
    d.explain_empty(root, f"no sessions/*.json under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a Continue session JSON given with ``--path`` (not a Kiro IDE
    workspace session, ``<root>/workspace-sessions/<folder>/<id>.json``, whose head
    looks the same: ``sources.kiro_ide.matches`` claims it)."""
    if path.name == "sessions.json" or path.parent.parent.name == "workspace-sessions":
        return False
    head = file_head(path, (".json",), 4096)
    return b'"history"' in head and (b'"workspaceDirectory"' in head or b'"sessionId"' in head)


def _part_text(p: dict) -> str:
    """Text of one Continue ``MessagePart``: ``text``, ``imageUrl`` (a data URL's size,
    else the URL), any other part as compact JSON."""
    if p.get("type") != "imageUrl":
        return block_text(p, media=())
    url = (p.get("imageUrl") or {}).get("url") or ""
    return f"[image {len(url) * 3 // 4:,} bytes]" if url.startswith("data:") else f"[image {url}]"


def _content_text(content: Any) -> str:
    return blocks_text(content, _part_text, scalar=str, skip_non_dict=True)


def _item_hash(m: dict) -> str:
    return hashlib.sha256(
        orjson.dumps([m.get("role"), m.get("content"), m.get("toolCalls")], option=orjson.OPT_SORT_KEYS)
    ).hexdigest()[:12]


def parse_session(
    doc: Any, src: str, mtime_iso: str, state: dict | None = None, old_ids: Sequence[str] = ()
) -> list[dict]:
    """Entry dicts of one Continue session document (see module doc). Turns whose id
    was in ``old_ids`` (the previous read) but is gone now (an edited or truncated
    history) are marked ``rewound`` through ``state["_status_changes"]``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise ValueError("not a Continue session (no history list)")
    sid = str(doc.get("sessionId") or Path(src).stem)
    proj = doc.get("workspaceDirectory") if isinstance(doc.get("workspaceDirectory"), str) else None
    if proj and proj.startswith("file://"):
        proj = proj[len("file://") :]
    model = doc.get("chatModelTitle") if isinstance(doc.get("chatModelTitle"), str) else None
    out: list[dict] = []
    ids: list[str] = []
    tool_msgs = {
        it["message"].get("toolCallId")
        for it in doc["history"]
        if isinstance(it, dict)
        and isinstance(it.get("message"), dict)
        and it["message"].get("role") == "tool"
    }
    for i, item in enumerate(doc["history"]):
        if not isinstance(item, dict) or not isinstance(item.get("message"), dict):
            continue
        m = item["message"]
        role_raw = m.get("role")
        rid = f"{sid}:{i}:{_item_hash(m)}"
        ids.append(rid)
        base = {
            "agent": AGENT,
            "session_id": sid,
            "native_id": m.get("id") or str(i),
            "project_dir": proj,
            "ts": mtime_iso,
            "model": model,
            "source_path": src,
            "source_offset": i,
            "record_id": rid,
            "message_id": rid,
        }
        parts: list[dict] = []
        text = _content_text(m.get("content"))
        if role_raw == "thinking":
            parts.append(dict(base, role="assistant", kind="thinking", text=text))
        elif role_raw == "tool":
            parts.append(
                dict(base, role="tool", kind="tool_result", native_id=m.get("toolCallId"), text=text)
            )
        elif role_raw in ("user", "assistant", "system"):
            if text or not m.get("toolCalls"):
                parts.append(
                    dict(base, role=role_raw, kind="message" if role_raw != "system" else "meta", text=text)
                )
        else:
            parts.append(dict(base, role="system", kind="meta", tool_name=str(role_raw), text=text))
        reasoning = item.get("reasoning")
        if isinstance(reasoning, dict) and isinstance(reasoning.get("text"), str) and reasoning["text"]:
            parts.append(dict(base, role="assistant", kind="thinking", text=reasoning["text"]))
        for tc in m.get("toolCalls") or []:
            if isinstance(tc, dict):
                fn = dict_at(tc, "function")
                parts.append(
                    dict(
                        base,
                        role="assistant",
                        kind="tool_call",
                        tool_name=fn.get("name"),
                        native_id=tc.get("id"),
                        text=str(fn.get("arguments") or ""),
                    )
                )
        states = item.get("toolCallStates") or (
            [item["toolCallState"]] if isinstance(item.get("toolCallState"), dict) else []
        )
        for st in states:
            # the output of a tool call, unless a later ``tool`` message carries it
            if (
                isinstance(st, dict)
                and isinstance(st.get("output"), list)
                and role_raw != "tool"
                and st.get("toolCallId") not in tool_msgs
            ):
                txt = "\n".join(str(c.get("content") or "") for c in st["output"] if isinstance(c, dict))
                tcall = dict_at(st, "toolCall")
                parts.append(
                    dict(
                        base,
                        role="tool",
                        kind="tool_result",
                        native_id=st.get("toolCallId"),
                        tool_name=(tcall.get("function") or {}).get("name")
                        if isinstance(tcall.get("function"), dict)
                        else None,
                        text=txt,
                    )
                )
        for ci in item.get("contextItems") or []:
            if isinstance(ci, dict) and isinstance(ci.get("content"), str) and ci["content"]:
                parts.append(
                    dict(
                        base,
                        role="user",
                        kind="meta",
                        tool_name="context:" + str(ci.get("name") or ""),
                        text=ci["content"],
                    )
                )
        if isinstance(item.get("conversationSummary"), str) and item["conversationSummary"]:
            parts.append(dict(base, role="system", kind="summary", text=item["conversationSummary"]))
        if not parts:
            continue
        for j, e in enumerate(parts):
            e["part"] = j
        u = m.get("usage")
        if role_raw == "assistant" and isinstance(u, dict):
            det = dict_at(u, "promptTokensDetails")
            cr = as_int(det.get("cachedTokens")) or 0
            cw = as_int(det.get("cacheWriteTokens")) or 0
            parts[0].update(
                input_tokens=max((as_int(u.get("promptTokens")) or 0) - cr - cw, 0),
                output_tokens=as_int(u.get("completionTokens")) or 0,
                cache_read_tokens=cr,
                cache_creation_tokens=cw,
                usage_key=f"continue:{rid}",
            )
        out.extend(parts)
    if isinstance(doc.get("title"), str) and doc["title"]:
        out.append(title_entry(AGENT, sid, doc["title"], src, ts=mtime_iso, project_dir=proj))
    if state is not None:
        track_ids(state, AGENT, sid, old_ids, ids)
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one session document whole when it changed."""
    src = str(file.path)
    old_ids = list(
        (wm.state.get("ids") or []) if wm is not None and wm.parser_version == PARSER_VERSION else []
    )

    def parse_doc(raw, doc, state, idle):
        try:
            mt = stat_of(file.path).st_mtime
        except OSError:
            mt = 0
        iso = format_epoch(mt)
        return parse_session(doc, src, iso, state, old_ids)

    return read_document(file, wm, PARSER_VERSION, parse_doc, batch_bytes)

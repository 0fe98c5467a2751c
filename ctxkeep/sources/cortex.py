"""Snowflake Cortex Code (``cortex`` CLI) conversations.

Where: ``$CORTEX_DIR`` else ``~/.snowflake/cortex/conversations`` (all platforms, under
the user's home; agentsview 0.46 ``internal/parser/types.go`` AgentCortex, env
``CORTEX_DIR``): one ``<session uuid>.json`` per conversation, rewritten as it goes
(mode ``rewrite``); once a conversation outgrows Cortex's in-process write limit its
turns move to a companion ``<uuid>.history.jsonl`` (appended, mode ``append``) and the
``.json`` keeps only metadata. Backups ``<uuid>.back.<timestamp>.json`` are skipped
(agentsview 0.46 ``internal/parser/cortex.go`` cortexBackupRe, IsCortexSessionFile,
readCortexHistoryJSONL, and ``cortex_test.go``).

Format facts (``cortex.go`` cortexSessionJSON): ``{session_id, title, history?
[message], connection_name, working_directory, git_root, git_branch, created_at,
last_updated, history_length, session_type, permission_cache}``; a message (also one
line of ``.history.jsonl``) is ``{role, id, content [block], user_sent_time?}`` and a
block ``{type, text?, internalOnly?, is_user_prompt?, message_id?, tool_use? {tool_use_id,
name, input}, tool_result? {name, tool_use_id, content [blocks], status}}`` (tool
blocks wrap their payload under a key named as their type). Text marked
``internalOnly`` or holding ``<system-reminder>`` is context Cortex injected. No token
usage or model is logged per turn.

Entries: one per block, ``record_id`` ``<session>:<message id>`` (part = the block's
index), so a conversation whose turns move from the ``.json`` to the ``.history.jsonl``
is not doubled; injected text is ``meta`` (``tool_name`` ``injected``); a tool result's
``status`` other than ``success`` prefixes its text ``[<status>]``. Times: the message's
``user_sent_time``, else the conversation's ``created_at``. The title is a ``meta``
entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxkeep.sources._util import compact_json, dict_at, json_object, nonempty, title_entry
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    FileMode,
    Mode,
    SourceFile,
    Watermark,
    sorted_paths,
)
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers.document import read_document
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "cortex"
PARSER_VERSION = 1
MODE: Mode = "rewrite"

_ID = re.compile(r"[A-Za-z0-9_-]+")
_HISTORY = ".history.jsonl"


def mode_for(path: Path) -> FileMode:
    """``append`` for a ``.history.jsonl``, else ``rewrite``."""
    return "append" if path.name.endswith(_HISTORY) else "rewrite"


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<uuid>.json`` and ``<uuid>.history.jsonl`` under ``$CORTEX_DIR`` when set,
    else ``~/.snowflake/cortex/conversations``, and in configured dirs."""
    d = Discovery(AGENT)
    root = ctx.env_dir("CORTEX_DIR", ctx.home / ".snowflake" / "cortex" / "conversations")
    for base in [root, *ctx.extra_dirs]:
        d.searched.append(base)
        if not base.is_dir():
            continue
        for p in sorted_paths(base.glob("*.json")):
            if _ID.fullmatch(p.stem):  # a backup's stem holds dots
                d.add(p, "rewrite")
        for p in sorted_paths(base.glob(f"*{_HISTORY}")):
            if _ID.fullmatch(p.name[: -len(_HISTORY)]):
                d.add(p, "append")
    d.explain_empty(root, f"no <uuid>.json conversations under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a Cortex conversation or its history file given with ``--path``."""
    if path.name.endswith(_HISTORY):
        return (path.parent / (path.name[: -len(_HISTORY)] + ".json")).is_file()
    head = file_head(path, (".json",), 4096)
    return bool(_ID.fullmatch(path.stem)) and b'"session_id"' in head and b'"working_directory"' in head


def _blocks_text(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return "" if blocks is None else compact_json(blocks, 4000)
    return "\n".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict))


def message_entries(m: dict, sid: str, meta: dict, src: str, offset: int, state: dict) -> list[dict]:
    """One Cortex message → its entries (one per block)."""
    role = str(m.get("role") or "")
    mid = nonempty(m.get("id"))
    base = {
        "agent": AGENT,
        "session_id": sid,
        "native_id": mid,
        "project_dir": nonempty(meta.get("working_directory")) or nonempty(meta.get("git_root")),
        "ts": nonempty(m.get("user_sent_time")) or nonempty(meta.get("created_at")),
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{mid}" if mid else f"{sid}:{offset}:{role}",
    }
    if role not in ("user", "assistant"):
        unknown(state, f"role:{role}")
        return [
            dict(
                base,
                part=0,
                role="system",
                kind="meta",
                tool_name=role or "unknown",
                text=compact_json(m, 2000),
            )
        ]
    content = m.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}] if content else []
    out = []
    for i, b in enumerate(blocks):
        if not isinstance(b, dict):
            continue
        e = dict(base, part=i)
        t = b.get("type")
        if t == "text":
            text = str(b.get("text") or "")
            if b.get("internalOnly") is True or "<system-reminder>" in text:
                out.append(dict(e, role="system", kind="meta", tool_name="injected", text=text))
            else:
                out.append(dict(e, role=role, kind="message", text=text))
        elif t == "tool_use":
            tu = dict_at(b, "tool_use")
            out.append(
                dict(
                    e,
                    role="assistant",
                    kind="tool_call",
                    native_id=nonempty(tu.get("tool_use_id")),
                    tool_name=nonempty(tu.get("name")),
                    text=compact_json(tu.get("input")) if tu.get("input") is not None else "",
                )
            )
        elif t == "tool_result":
            tr = dict_at(b, "tool_result")
            text = _blocks_text(tr.get("content"))
            status = nonempty(tr.get("status"))
            if status and status != "success":
                text = f"[{status}] {text}"
            out.append(
                dict(
                    e,
                    role="tool",
                    kind="tool_result",
                    native_id=nonempty(tr.get("tool_use_id")),
                    tool_name=nonempty(tr.get("name")),
                    text=text,
                )
            )
        else:
            unknown(state, f"block:{t}")
            out.append(
                dict(e, role="system", kind="meta", tool_name=str(t or "unknown"), text=compact_json(b, 2000))
            )
    return out


def parse_document(doc: Any, src: str) -> list[dict]:
    """Entry dicts of one ``<uuid>.json`` (its ``history`` when present, and its
    title). Raises ValueError for a document that is not a Cortex conversation."""
    if not isinstance(doc, dict) or not ("session_id" in doc or "history" in doc):
        raise ValueError("not a Cortex conversation (no session_id or history)")
    sid = nonempty(doc.get("session_id")) or Path(src).stem
    history = doc.get("history")
    out: list[dict] = []
    scratch: dict = {}
    for i, m in enumerate(history if isinstance(history, list) else []):
        if isinstance(m, dict):
            out += message_entries(m, sid, doc, src, i, scratch)
    title = nonempty(doc.get("title"))
    if title:
        ts = nonempty(doc.get("last_updated")) or nonempty(doc.get("created_at"))
        out.append(
            title_entry(AGENT, sid, title, src, ts=ts, project_dir=nonempty(doc.get("working_directory")))
        )
    return out


def _meta(history: Path) -> dict:
    """The companion ``<uuid>.json`` of a history file ({} when missing or unreadable),
    read again only when it changed."""
    p = history.parent / (history.name[: -len(_HISTORY)] + ".json")
    return json_object(p)


def _init_line_state(file: SourceFile) -> dict:
    return {}


def _parse_line(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    path = Path(src)
    meta = _meta(path)
    sid = nonempty(meta.get("session_id")) or path.name[: -len(_HISTORY)]
    return message_entries(rec, sid, meta, src, offset, state)


_read_history = record_reader(PARSER_VERSION, _parse_line, _init_line_state)


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """A ``.history.jsonl`` from its byte offset; a ``.json`` whole when it changed."""
    if mode_for(file.path) == "append":
        return _read_history(file, wm, batch_bytes)
    src = str(file.path)
    return read_document(
        file, wm, PARSER_VERSION, lambda raw, doc, state, idle: parse_document(doc, src), batch_bytes
    )

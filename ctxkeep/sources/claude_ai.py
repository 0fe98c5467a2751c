"""The Claude.ai data export (Settings → Privacy → Export data): import-only.

Where: nowhere in the home; the user names the export's ``conversations.json`` (or the
unzipped export folder) with ``ctxkeep ingest --path FILE`` (``matches``); dirs
configured for ``claude-ai`` are searched for it too. (agentsview 0.46
``internal/parser/types.go`` AgentClaudeAI: ``FileBased false``, an import-only
provider streaming the file.)

Format facts (agentsview 0.46 ``internal/parser/claude_ai.go`` and
``claude_ai_test.go``; Polylogue's ``docs/providers/claude-ai.md``; the export's
TypeScript readers' ``ClaudeExport`` types): a JSON array of conversations ``{uuid,
name, summary?, created_at, updated_at (RFC 3339), account {uuid}, chat_messages:
[message]}``; a message ``{uuid, text, content: [block], sender (human | assistant),
created_at, updated_at, attachments: [{file_name, file_type, file_size,
extracted_content}], files: [{file_name}], parent_message_uuid?}``; blocks ``text
{text, citations?}``, ``thinking {thinking}``, ``tool_use {id?, name, input}``,
``tool_result {tool_use_id?, name, content: [text blocks] | string, is_error}``,
``voice_note {text?}``, ``token_budget`` (no content). Older exports carry only
``text`` (no ``content``).

Entries: the session is the conversation ``uuid``; one entry per block (``record_id``
the message ``uuid``, ``part`` the block's index; ``message_id`` the message uuid,
``parent_id`` its ``parent_message_uuid``); a message without blocks is one entry of
its ``text``. ``human`` is ``user``; tool uses and results are ``tool_call`` /
``tool_result`` (``native_id`` the block id, else the tool's name and the message);
an attachment's extracted text is a ``meta`` entry (``tool_name`` ``attachment``); a
file without text is named in one. The title (``name``) and ``summary`` are ``meta``
entries. Times: the message's ``created_at``. The export logs no model and no tokens:
no usage. ``source_offset`` is the conversation's index in the array.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxkeep.sources._util import compact_json, drop_media, nonempty
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
    import_only_discovery,
)
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers.json_array import read_json_array
from ctxkeep.sources.readers.jsonl import file_head

AGENT = "claude-ai"
PARSER_VERSION = 1
MODE: Mode = "rewrite"
IMPORT_ONLY = True

#: block types the parser understands (see the module doc)
KNOWN_BLOCKS = frozenset({"text", "thinking", "tool_use", "tool_result", "voice_note", "token_budget"})


def discover(ctx: DiscoveryContext) -> Discovery:
    """Import-only: nothing is looked for in the home; dirs configured for
    ``claude-ai`` are searched for ``conversations.json``."""
    return import_only_discovery(ctx, AGENT, MODE, matches, "Claude.ai export")


def matches(path: Path) -> bool:
    """True for a ``conversations*.json`` whose head holds ``chat_messages``."""
    return path.name.startswith("conversations") and b'"chat_messages"' in file_head(path, (".json",), 65536)


def _result_text(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(
            str(b.get("text") or "")
            if isinstance(b, dict) and b.get("type") == "text"
            else compact_json(drop_media(b), 2000)
            for b in c
        )
    return "" if c is None else compact_json(drop_media(c), 2000)


def _block(b: dict, e: dict, role: str, mid: str, state: dict) -> dict | None:
    t = b.get("type")
    if t == "text":
        return dict(e, role=role, kind="message", text=str(b.get("text") or ""))
    if t == "thinking":
        return dict(e, role="assistant", kind="thinking", text=str(b.get("thinking") or b.get("text") or ""))
    if t == "tool_use":
        name = nonempty(b.get("name"))
        return dict(
            e,
            role="assistant",
            kind="tool_call",
            tool_name=name,
            native_id=nonempty(b.get("id")) or f"{mid}:{name}",
            text=compact_json(b.get("input")) if b.get("input") is not None else "",
        )
    if t == "tool_result":
        name = nonempty(b.get("name"))
        text = _result_text(b.get("content"))
        return dict(
            e,
            role="tool",
            kind="tool_result",
            tool_name=name,
            native_id=nonempty(b.get("tool_use_id")) or f"{mid}:{name}",
            text=("[error] " + text) if b.get("is_error") else text,
        )
    if t == "voice_note":
        return dict(
            e, role=role, kind="message", text=str(b.get("text") or b.get("transcript") or "[voice note]")
        )
    if t in KNOWN_BLOCKS:  # token_budget: no content
        return None
    unknown(state, f"block:{t}")
    return dict(
        e, role="system", kind="meta", tool_name=str(t or "unknown"), text=compact_json(drop_media(b), 2000)
    )


def conversation_entries(conv: Any, index: int, state: dict, src: str) -> list[dict]:
    """Entry dicts of one conversation (see the module doc). Raises ValueError for an
    item that is not a conversation."""
    if not isinstance(conv, dict) or not isinstance(conv.get("chat_messages"), list):
        raise ValueError("not a Claude.ai conversation (no chat_messages)")
    cid = nonempty(conv.get("uuid"))
    if cid is None:
        raise ValueError("conversation without a uuid")
    if not conv["chat_messages"]:
        return []  # a conversation started and never used: no session
    start = nonempty(conv.get("created_at"))
    base = {"agent": AGENT, "session_id": cid, "source_path": src, "source_offset": index}
    out: list[dict] = []
    for i, m in enumerate(conv["chat_messages"]):
        if not isinstance(m, dict):
            continue
        mid = nonempty(m.get("uuid")) or f"{cid}:{i}"
        sender = m.get("sender")
        role = "user" if sender == "human" else "assistant" if sender == "assistant" else "system"
        e = dict(
            base,
            record_id=mid,
            message_id=mid,
            parent_id=nonempty(m.get("parent_message_uuid")),
            ts=nonempty(m.get("created_at")) or start,
            native_id=mid,
        )
        got: list[dict] = []
        blocks = m.get("content")
        if isinstance(blocks, list) and blocks:
            for b in blocks:
                if isinstance(b, dict) and (x := _block(b, e, role, mid, state)) is not None:
                    got.append(x)
        elif nonempty(m.get("text")):
            got.append(dict(e, role=role, kind="message" if role != "system" else "meta", text=m["text"]))
        for a in m.get("attachments") or []:
            if isinstance(a, dict):
                body = a.get("extracted_content") if isinstance(a.get("extracted_content"), str) else ""
                got.append(
                    dict(
                        e,
                        role="system",
                        kind="meta",
                        tool_name="attachment",
                        text=f"[attachment {a.get('file_name') or '?'}]\n{body}".rstrip(),
                    )
                )
        for f in m.get("files") or []:
            if isinstance(f, dict) and nonempty(f.get("file_name")):
                got.append(
                    dict(e, role="system", kind="meta", tool_name="file", text=f"[file {f['file_name']}]")
                )
        for j, x in enumerate(got):
            x["part"] = j
        out += got
    for key in ("name", "summary"):
        v = nonempty(conv.get(key))
        if v:
            digest = hashlib.sha256(v.encode("utf-8", "surrogatepass")).hexdigest()[:12]
            out.append(
                dict(
                    base,
                    record_id=f"{cid}:{key}:{digest}",
                    part=0,
                    ts=start,
                    role="system",
                    kind="meta",
                    tool_name="title" if key == "name" else "summary",
                    text=v,
                )
            )
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Stream the export's conversations (``readers.json_array``)."""
    src = str(file.path)
    return read_json_array(file, wm, PARSER_VERSION, lambda c, i, st: conversation_entries(c, i, st, src))

"""The ChatGPT data export (Settings → Data controls → Export data): import-only.

Where: nowhere in the home; the user names the export's ``conversations.json`` (or its
numbered shards ``conversations-000.json`` …, or the unzipped export folder) with
``ctxkeep ingest --path FILE`` (``matches``); dirs configured for ``chatgpt`` are
searched for such files too. (agentsview 0.46 ``internal/parser/types.go`` AgentChatGPT:
``FileBased false``, an import-only provider; ``chatgpt.go`` reads both file names.)

Format facts (agentsview 0.46 ``internal/parser/chatgpt.go`` and ``chatgpt_test.go``;
the export's public readers): a JSON array of conversations ``{id, conversation_id,
title, create_time, update_time (epoch seconds, float), current_node, mapping: {node
id: {id, parent, children [ids], message | null}}}``; a conversation is a tree of
nodes, ``current_node`` the leaf of the branch the user last saw (earlier edits and
regenerations are other branches). A message: ``{id, author {role (user | assistant |
system | tool), name?}, create_time, content {content_type, parts?, text?, language?,
thoughts?, result?}, status, recipient ("all", or the tool an assistant message
calls: "python", "browser", "web", "dalle.text2im", …), metadata {model_slug?,
is_visually_hidden_from_conversation?}}``. Content types: ``text`` and
``multimodal_text`` (``parts``: strings, or objects such as ``image_asset_pointer``),
``code`` (``text``, ``language``), ``execution_output`` (``text``), ``thoughts``
(``thoughts [{summary, content}]``), ``reasoning_recap`` (``content``),
``tether_quote`` / ``tether_browsing_display`` (``title``, ``url``, ``text`` /
``result``), ``user_editable_context`` (the custom instructions),
``system_error`` (``text``).

Entries: the session is the conversation (``conversation_id`` else ``id``); every node
with a message is read (``record_id`` ``<conversation>:<node id>``, ``message_id`` the
node id, ``parent_id`` the parent node) and nodes off the current branch are marked
``rewound``; hidden system messages and the custom instructions are ``meta``. An
assistant message addressed to a tool (``recipient`` not ``all``) is a ``tool_call``
(``tool_name`` the recipient, ``native_id`` the node id); a ``tool`` message is its
``tool_result`` (``native_id`` its parent node, the call); thoughts are ``thinking``.
Times: the message's ``create_time``, else the conversation's. Model: the
``model_slug``. The export logs no tokens: no usage. The title is a ``title`` ``meta``
entry. ``source_offset`` is the conversation's index in the array.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxkeep.sources._util import compact_json, dict_at, drop_media, epoch_iso, nonempty
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

AGENT = "chatgpt"
PARSER_VERSION = 1
MODE: Mode = "rewrite"
IMPORT_ONLY = True

_NAME = re.compile(r"^conversations(-\d+)?\.json$")
#: content types the parser understands (see the module doc)
KNOWN_CONTENT = frozenset(
    {
        "text",
        "multimodal_text",
        "code",
        "execution_output",
        "thoughts",
        "reasoning_recap",
        "tether_quote",
        "tether_browsing_display",
        "user_editable_context",
        "system_error",
    }
)


def discover(ctx: DiscoveryContext) -> Discovery:
    """Import-only: nothing is looked for in the home; dirs configured for ``chatgpt``
    are searched for export files."""
    return import_only_discovery(ctx, AGENT, MODE, matches, "ChatGPT export")


def matches(path: Path) -> bool:
    """True for an export file (``conversations.json`` or a numbered shard) whose head
    holds a conversation ``mapping``."""
    return bool(_NAME.match(path.name)) and b'"mapping"' in file_head(path, (".json",), 65536)


def _part_text(p: Any) -> str:
    if isinstance(p, str):
        return p
    if isinstance(p, dict):
        ct = p.get("content_type")
        if ct == "image_asset_pointer":
            w, h = p.get("width"), p.get("height")
            return f"[image {w}x{h}]" if w and h else "[image]"
        if ct == "audio_transcription" and isinstance(p.get("text"), str):
            return p["text"]
        return compact_json(drop_media(p), 2000)
    return "" if p is None else str(p)


def content_text(c: dict) -> str:
    """Plain text of a message's ``content`` (see the module doc)."""
    ct = c.get("content_type")
    if ct in ("text", "multimodal_text"):
        parts = c.get("parts")
        return "\n".join(t for t in (_part_text(p) for p in parts) if t) if isinstance(parts, list) else ""
    if ct in ("code", "execution_output", "system_error"):
        return str(c.get("text") or "")
    if ct == "thoughts":
        th = c.get("thoughts")
        items = [t for t in th if isinstance(t, dict)] if isinstance(th, list) else []
        return "\n\n".join(
            "\n".join(x for x in (nonempty(t.get("summary")), nonempty(t.get("content"))) if x) for t in items
        )
    if ct == "reasoning_recap":
        return str(c.get("content") or "")
    if ct in ("tether_quote", "tether_browsing_display"):
        bits = [
            nonempty(c.get("title")),
            nonempty(c.get("url")),
            nonempty(c.get("text")) or nonempty(c.get("result")),
        ]
        return "\n".join(b for b in bits if b)
    if ct == "user_editable_context":
        return "\n\n".join(
            b for b in (nonempty(c.get("user_profile")), nonempty(c.get("user_instructions"))) if b
        )
    return compact_json(drop_media(c), 2000)


def _active_path(mapping: dict, current: str | None) -> set[str]:
    out: set[str] = set()
    node = current
    while isinstance(node, str) and node in mapping and node not in out:
        out.add(node)
        parent = dict_at(mapping, node).get("parent")
        node = parent if isinstance(parent, str) else None
    return out


def conversation_entries(conv: Any, index: int, state: dict, src: str) -> list[dict]:
    """Entry dicts of one conversation (see the module doc). Raises ValueError for an
    item that is not a conversation."""
    if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
        raise ValueError("not a ChatGPT conversation (no mapping)")
    cid = nonempty(conv.get("conversation_id")) or nonempty(conv.get("id"))
    if cid is None:
        raise ValueError("conversation without an id")
    mapping: dict = conv["mapping"]
    active = _active_path(mapping, nonempty(conv.get("current_node")))
    start = epoch_iso(conv.get("create_time"))
    base = {"agent": AGENT, "session_id": cid, "source_path": src, "source_offset": index, "part": 0}
    out: list[dict] = []
    rewound: list[str] = []
    for nid, node in mapping.items():
        msg = node.get("message") if isinstance(node, dict) else None
        if not isinstance(msg, dict):
            continue
        author = dict_at(msg, "author")
        role = str(author.get("role") or "")
        content = dict_at(msg, "content")
        ct = str(content.get("content_type") or "")
        parent = node.get("parent") if isinstance(node.get("parent"), str) else None
        meta = dict_at(msg, "metadata")
        e = dict(
            base,
            record_id=f"{cid}:{nid}",
            message_id=str(nid),
            parent_id=parent,
            ts=epoch_iso(msg.get("create_time")) or start,
            native_id=nonempty(msg.get("id")) or str(nid),
            text=content_text(content),
        )
        if ct not in KNOWN_CONTENT:
            unknown(state, f"content:{ct}")
        hidden = bool(meta.get("is_visually_hidden_from_conversation"))
        recipient = nonempty(msg.get("recipient")) or "all"
        model = nonempty(meta.get("model_slug"))
        if ct == "user_editable_context" or (role == "system" and hidden) or (hidden and not e["text"]):
            e.update(role="system", kind="meta", tool_name=ct or role)
        elif role == "user":
            e.update(role="user", kind="message")
        elif role == "assistant" and recipient != "all":
            e.update(role="assistant", kind="tool_call", tool_name=recipient, native_id=str(nid), model=model)
        elif role == "assistant":
            kind = "thinking" if ct in ("thoughts", "reasoning_recap") else "message"
            e.update(role="assistant", kind=kind, model=model)
        elif role == "tool":
            e.update(
                role="tool", kind="tool_result", tool_name=nonempty(author.get("name")), native_id=parent
            )
        else:
            e.update(role="system", kind="meta", tool_name=role or "unknown")
        if not e["text"] and e["kind"] in ("message", "meta"):
            continue
        out.append(e)
        if str(nid) not in active:
            rewound.append(str(nid))
    title = nonempty(conv.get("title"))
    if title:
        out.append(
            dict(
                base,
                record_id=f"{cid}:title:{title}",
                ts=start,
                role="system",
                kind="meta",
                tool_name="title",
                text=title,
            )
        )
    if rewound:
        state.setdefault("_status_changes", []).append(
            {"agent": AGENT, "session_id": cid, "message_ids": sorted(rewound), "status": "rewound"}
        )
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Stream the export's conversations (``readers.json_array``)."""
    src = str(file.path)
    return read_json_array(file, wm, PARSER_VERSION, lambda c, i, st: conversation_entries(c, i, st, src))

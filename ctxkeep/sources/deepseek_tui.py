"""DeepSeek TUI (CodeWhale) saved sessions.

Where: ``$DEEPSEEK_TUI_SESSIONS_DIR`` else ``~/.codewhale/sessions`` and
``~/.deepseek/sessions`` (the older name), all platforms under the user's home
(agentsview 0.46 ``internal/parser/types.go`` AgentDeepSeekTUI): one JSON document per
session, ``<sessions>/<id>.json`` with ``id`` of letters, digits, ``-`` and ``_``;
``latest.json`` and ``offline_queue.json`` are not sessions and sub-folders
(``checkpoints/``) are not read (agentsview 0.46 ``deepseek_tui.go``
isDeepSeekTUISessionFile and ``deepseek_tui_test.go``). The document is rewritten as the
session grows: mode ``rewrite`` (``readers.document``).

Format facts (schema_version 1, as agentsview 0.46's ``deepseek_tui.go`` and
``deepseek_tui_test.go`` read it): ``{schema_version, metadata {id, title, created_at,
updated_at, model, workspace, total_tokens}, messages [{role, content, timestamp?,
model?}]}``. ``content`` is a string or Anthropic-style blocks: ``text``, ``thinking``
(``thinking`` or ``text``), ``tool_use``/``server_tool_use`` ``{id, name | tool_name,
input | parameters}`` and ``tool_result``/``tool_search_tool_result``/
``code_execution_tool_result`` ``{tool_use_id | toolUseID | id, content | result |
output}`` whose content is a string, text blocks or an object with ``output``,
``text`` or ``content``. Roles other than ``user`` and ``assistant`` are skipped by
agentsview; here they are ``meta``. Messages carry no ids.

Entries: one per block; a message's ``record_id`` is ``<session>:<index>:<hash of the
message>`` so an unchanged message re-read is the same entry and an edited history's
lost messages are marked ``rewound`` (the record id is also the ``message_id``) (``readers.document.track_ids``). Times: the
message's ``timestamp``, else ``metadata.created_at``. Usage: the format logs only
``metadata.total_tokens`` (no input/output split, no per-turn counts), so no usage row
is written; the title is a ``meta`` entry. The coverage ledger's agent version is the
document's ``schema_version`` (the format logs no app version).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import block_text, compact_json, dict_at, nonempty, title_entry
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
    sorted_paths,
)
from ctxkeep.sources.coverage import set_version
from ctxkeep.sources.readers.document import read_document, track_ids
from ctxkeep.sources.readers.jsonl import file_head

AGENT = "deepseek-tui"
PARSER_VERSION = 2  # 2: schema_version to the coverage ledger (a re-read relabels its rows)
MODE: Mode = "rewrite"

_ID = re.compile(r"[A-Za-z0-9_-]+")
_NOT_SESSIONS = {"latest.json", "offline_queue.json"}
_CALLS = ("tool_use", "server_tool_use")
_RESULTS = ("tool_result", "tool_search_tool_result", "code_execution_tool_result")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$DEEPSEEK_TUI_SESSIONS_DIR`` when set, else ``~/.codewhale/sessions`` and
    ``~/.deepseek/sessions``."""
    env = ctx.env.get("DEEPSEEK_TUI_SESSIONS_DIR")
    if env:
        return [Path(env).expanduser()]
    return [ctx.home / ".codewhale" / "sessions", ctx.home / ".deepseek" / "sessions"]


def _is_session(p: Path) -> bool:
    return p.suffix == ".json" and p.name not in _NOT_SESSIONS and bool(_ID.fullmatch(p.stem))


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<sessions>/<id>.json`` in each root and in configured dirs."""
    d = Discovery(AGENT)
    for base in [*roots(ctx), *ctx.extra_dirs]:
        d.searched.append(base)
        if base.is_dir():
            for p in sorted_paths(base.glob("*.json")):
                if _is_session(p):
                    d.add(p, MODE)
    d.explain_empty(roots(ctx)[0], "no DeepSeek TUI <id>.json sessions found")
    return d


def matches(path: Path) -> bool:
    """True for a DeepSeek TUI session document given with ``--path``."""
    head = file_head(path, (".json",), 4096)
    return _is_session(path) and b'"metadata"' in head and b'"messages"' in head


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block_text(b) for b in content if isinstance(b, dict))
    if isinstance(content, dict):
        for key in ("output", "text", "content"):
            if isinstance(content.get(key), str):
                return content[key]
        return compact_json(content, 4000)
    return "" if content is None else compact_json(content, 4000)


def _msg_hash(m: dict) -> str:
    return hashlib.sha256(
        orjson.dumps([m.get("role"), m.get("content")], option=orjson.OPT_SORT_KEYS)
    ).hexdigest()[:12]


def _block_entry(b: dict, role: str, e: dict) -> dict:
    t = b.get("type")
    if t in _CALLS:
        args = b.get("input") if "input" in b else b.get("parameters")
        return dict(
            e,
            role="assistant",
            kind="tool_call",
            native_id=nonempty(b.get("id")),
            tool_name=nonempty(b.get("name")) or nonempty(b.get("tool_name")),
            text=compact_json(args) if args is not None else "",
        )
    if t in _RESULTS:
        content = next((b[k] for k in ("content", "result", "output") if k in b), None)
        tid = nonempty(b.get("tool_use_id")) or nonempty(b.get("toolUseID")) or nonempty(b.get("id"))
        return dict(e, role="tool", kind="tool_result", native_id=tid, text=_result_text(content))
    if t == "thinking":
        return dict(
            e, role=role, kind="thinking", text=nonempty(b.get("thinking")) or nonempty(b.get("text")) or ""
        )
    return dict(e, role=role, kind="message", text=block_text(b))


def parse_session(
    doc: Any, src: str, state: dict | None = None, old_ids: list[str] | tuple[str, ...] = ()
) -> list[dict]:
    """Entry dicts of one session document (see the module doc). Raises ValueError for
    a document without a ``messages`` list (the reader quarantines it)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise ValueError("not a DeepSeek TUI session (no messages list)")
    meta = dict_at(doc, "metadata")
    mid = nonempty(meta.get("id"))
    sid = mid if mid and _ID.fullmatch(mid) else Path(src).stem
    project = nonempty(meta.get("workspace"))
    session_model = nonempty(meta.get("model"))
    start = nonempty(meta.get("created_at"))
    out: list[dict] = []
    ids: list[str] = []
    for i, m in enumerate(doc["messages"]):
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "")
        rid = f"{sid}:{i}:{_msg_hash(m)}"
        ids.append(rid)
        base = {
            "agent": AGENT,
            "session_id": sid,
            "native_id": None,
            "project_dir": project,
            "ts": nonempty(m.get("timestamp")) or start,
            "model": (nonempty(m.get("model")) or session_model) if role == "assistant" else None,
            "source_path": src,
            "source_offset": i,
            "record_id": rid,
            "message_id": rid,
        }
        content = m.get("content")
        if role not in ("user", "assistant"):
            text = content if isinstance(content, str) else compact_json(content, 2000)
            out.append(dict(base, part=0, role="system", kind="meta", tool_name=role or "unknown", text=text))
            continue
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for j, b in enumerate(blocks):
            if isinstance(b, dict):
                out.append(_block_entry(b, role, dict(base, part=j)))
    title = nonempty(meta.get("title"))
    if title:
        ts = nonempty(meta.get("updated_at")) or start
        out.append(title_entry(AGENT, sid, title, src, ts=ts, project_dir=project))
    if state is not None:
        track_ids(state, AGENT, sid, list(old_ids), ids)
        # the format's schema_version is the only version it logs (no app version)
        sv = doc.get("schema_version")
        set_version(state, str(sv) if isinstance(sv, int) and not isinstance(sv, bool) else None)
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one session document whole when it changed."""
    src = str(file.path)
    old_ids = list(
        (wm.state.get("ids") or []) if wm is not None and wm.parser_version == PARSER_VERSION else []
    )
    return read_document(
        file,
        wm,
        PARSER_VERSION,
        lambda raw, doc, state, idle: parse_session(doc, src, state, old_ids),
        batch_bytes,
    )

"""Zencoder (the Zencoder IDE agent and CLI) session logs.

Where: ``$ZENCODER_DIR`` else ``~/.zencoder/sessions`` (all platforms, under the user's
home; agentsview 0.46 ``internal/parser/types.go`` AgentZencoder, ``DefaultDirs
.zencoder/sessions``, env ``ZENCODER_DIR``): one append-only JSONL file per session,
``<sessions>/<id>.jsonl`` (``zencoder_provider.go``: any ``*.jsonl`` there).

Format facts (as agentsview 0.46's ``internal/parser/zencoder.go`` and
``zencoder_test.go`` read it): the first line is a header without ``role``: ``{id,
chatId, modelId, parentId, creationReason ("newChat" | "directContinuation" |
"summarizedContinuation"), createdAt, updatedAt, version}``. Every later line is a
message ``{role, content, createdAt?}``:

- ``system``: ``content`` a string, the prompt, naming ``Working directory: <path>``;
- ``user``: blocks ``text {text, tag?}`` (no tag or ``user-input``: typed by the user;
  another tag, e.g. ``instructions``, ``todo-reminder``: injected context) and ``skill
  {name, content}``;
- ``assistant``: blocks ``text``, ``reasoning {text}``, ``tool-call {toolCallId,
  toolName, input}``;
- ``tool``: blocks ``tool-result {toolCallId, toolName, content [text blocks, a tagged
  one being injected context], isError}``; a result whose text holds
  ``<session-id>ID</session-id>`` names the sub-agent session the call started;
- ``finish``: ``{reason}`` (the end of a turn).

No usage is logged; the header's ``modelId`` is the assistant's model.

Entries: the session id is the header's ``id`` (else the file name); ``parentId``
becomes ``parent_session_id``. Lines carry no ids: ``record_id`` is
``<session>:<line hash>`` and one entry per block (``part``). Times: the line's
``createdAt``, else the header's. Injected user text, skills, tagged tool-result parts
and ``finish`` lines are ``meta``; a sub-agent's session id is a ``meta`` entry
(``tool_name`` ``subagent``, ``native_id`` the call id, text the child's id). Unknown
roles and block types are ``meta`` and reported to the coverage ledger (version: the
header's ``version``).
"""

from __future__ import annotations

import re
from pathlib import Path

from ctxkeep.sources._util import compact_json, nonempty
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "zencoder"
PARSER_VERSION = 1
MODE: Mode = "append"

_CWD = re.compile(r"Working directory:\s+(.+)")
_CHILD = re.compile(r"<session-id>([^<]+)</session-id>")


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<sessions>/*.jsonl`` under ``$ZENCODER_DIR`` when set, else
    ``~/.zencoder/sessions``, and in configured dirs."""
    d = Discovery(AGENT)
    root = ctx.env_dir("ZENCODER_DIR", ctx.home / ".zencoder" / "sessions")
    for base in [root, *ctx.extra_dirs]:
        d.add_glob(base, ["*.jsonl"], MODE)
    d.explain_empty(root, f"no *.jsonl under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a Zencoder session (``creationReason`` or ``chatId`` in its header)
    given with ``--path``."""
    head = file_head(path, (".jsonl",), 4096)
    first = head.split(b"\n", 1)[0]
    return b'"role"' not in first and (b'"creationReason"' in first or b'"chatId"' in first)


def init_state(file: SourceFile) -> dict:
    """The session id from the file name until the header names it."""
    return {"sid": file.path.stem}


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One Zencoder line → its entries (the header → one ``meta`` entry)."""
    role = rec.get("role")
    if role is None and (offset == 0 or "creationReason" in rec):
        return _header(rec, offset, line_hash, state, src)
    role = str(role or "")
    sid = state["sid"]
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": state.get("parent"),
        "native_id": None,
        "project_dir": state.get("cwd"),
        "ts": nonempty(rec.get("createdAt")) or state.get("ts"),
        "part": 0,
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{line_hash}",
    }
    content = rec.get("content")
    if role == "system":
        text = content if isinstance(content, str) else compact_json(content, 2000)
        m = _CWD.search(text)
        if m and not state.get("cwd"):
            state["cwd"] = base["project_dir"] = m.group(1).strip()
        return [dict(base, role="system", kind="meta", tool_name="system", text=text)]
    if role == "finish":
        reason = nonempty(rec.get("reason")) or "unknown"
        return [dict(base, role="system", kind="meta", tool_name="finish", text=f"turn finished: {reason}")]
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if role == "user":
        return [_user_block(b, dict(base, part=i), state) for i, b in enumerate(blocks)]
    if role == "assistant":
        return [_assistant_block(b, dict(base, part=i), state) for i, b in enumerate(blocks)]
    if role == "tool":
        out: list[dict] = []
        for b in blocks:
            out += _tool_block(b, base, len(out), state)
        return out
    unknown(state, role or "unknown")
    return [dict(base, role="system", kind="meta", tool_name=role or "unknown", text=compact_json(rec, 2000))]


def _header(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    sid = nonempty(rec.get("id")) or state["sid"]
    state.update(sid=sid, parent=nonempty(rec.get("parentId")), ts=nonempty(rec.get("createdAt")))
    state["model"] = nonempty(rec.get("modelId"))
    if nonempty(rec.get("version")):
        state["_v"] = rec["version"]
    reason = nonempty(rec.get("creationReason")) or ""
    return [
        {
            "agent": AGENT,
            "session_id": sid,
            "parent_session_id": state["parent"],
            "part": 0,
            "ts": state["ts"],
            "role": "system",
            "kind": "meta",
            "tool_name": "session",
            "text": f"session {sid} ({reason})" if reason else f"session {sid}",
            "source_path": src,
            "source_offset": offset,
            "record_id": f"{sid}:header",
        }
    ]


def _user_block(b: dict, e: dict, state: dict) -> dict:
    t = b.get("type")
    if t == "text":
        tag = nonempty(b.get("tag"))
        if tag in (None, "user-input"):
            return dict(e, role="user", kind="message", text=nonempty(b.get("text")) or "")
        return dict(e, role="system", kind="meta", tool_name=tag, text=nonempty(b.get("text")) or "")
    if t == "skill":
        body = nonempty(b.get("content")) or ""
        return dict(e, role="system", kind="meta", tool_name="skill", text=f"[skill {b.get('name')}]\n{body}")
    unknown(state, f"block:{t}")
    return dict(e, role="system", kind="meta", tool_name=str(t or "unknown"), text=compact_json(b, 2000))


def _assistant_block(b: dict, e: dict, state: dict) -> dict:
    e = dict(e, role="assistant", model=state.get("model"))
    t = b.get("type")
    if t == "text":
        return dict(e, kind="message", text=nonempty(b.get("text")) or "")
    if t == "reasoning":
        return dict(e, kind="thinking", text=nonempty(b.get("text")) or "")
    if t == "tool-call":
        return dict(
            e,
            kind="tool_call",
            native_id=nonempty(b.get("toolCallId")),
            tool_name=nonempty(b.get("toolName")),
            text=compact_json(b.get("input")) if b.get("input") is not None else "",
        )
    unknown(state, f"block:{t}")
    return dict(e, kind="meta", tool_name=str(t or "unknown"), text=compact_json(b, 2000))


def _tool_block(b: dict, base: dict, part: int, state: dict) -> list[dict]:
    if b.get("type") != "tool-result":
        unknown(state, f"block:{b.get('type')}")
        return [
            dict(base, part=part, role="system", kind="meta", tool_name="unknown", text=compact_json(b, 2000))
        ]
    call = nonempty(b.get("toolCallId"))
    parts = b.get("content")
    items = [c for c in parts if isinstance(c, dict)] if isinstance(parts, list) else []
    plain = [str(c.get("text") or "") for c in items if not c.get("tag")]
    tagged = [str(c.get("text") or "") for c in items if c.get("tag") and c.get("type") == "text"]
    text = "\n".join(plain) if items or not isinstance(parts, str) else parts
    out = [
        dict(
            base,
            part=part,
            role="tool",
            kind="tool_result",
            native_id=call,
            tool_name=nonempty(b.get("toolName")),
            text=text,
        )
    ]
    if tagged:
        out.append(
            dict(
                base, part=part + 1, role="system", kind="meta", tool_name="injected", text="\n".join(tagged)
            )
        )
    child = next((m.group(1) for c in items if (m := _CHILD.search(str(c.get("text") or "")))), None)
    if child:
        out.append(
            dict(
                base,
                part=part + len(out),
                role="system",
                kind="meta",
                tool_name="subagent",
                native_id=call,
                text=child,
            )
        )
    return out


#: new lines of one session file into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

"""Google Gemini CLI chat recordings.

Where (all platforms): ``<home>/.gemini/tmp/<project>/chats/`` where ``<home>`` is
``$GEMINI_CLI_HOME`` when set (Gemini CLI's ``homedir()`` override, packages/core
``utils/paths.ts``), else the user's home (``%USERPROFILE%`` on Windows). ``<project>``
is the SHA-256 of the project root (before ~0.2x) or a slug registered in
``~/.gemini/projects.json`` with a ``.project_root`` marker file in the folder
(``config/projectRegistry.ts``); both give ``project_dir`` when present.

Two formats (google-gemini/gemini-cli ``services/chatRecordingService.ts``):

- ``session-<time>-<id8>.json``: one pretty-printed JSON document
  ``{sessionId, projectHash, startTime, lastUpdated, messages[], summary?}`` rewritten
  in place (no trailing newline): read whole by ``readers.document.read_document`` (content hash);
- ``session-<time>-<id8>.jsonl`` (≥ 0.40; sub-agents: ``chats/<parent id>/<id>.jsonl``):
  append-only. Line 1 is the metadata ``{sessionId, projectHash, startTime,
  lastUpdated, kind}``; then message records (a message written again with the same
  ``id`` replaces the earlier copy: tokens and tool calls are added later),
  ``{"$set": {...}}`` metadata updates (``summary``, ``directories``, ``messages``:
  a whole new message list) and ``{"$rewindTo": id}``, which removes the message
  *with* that id and every later one (``rewindTo``: "All messages from (and
  including) the specified ID onwards are removed"; an unknown id clears all). The
  removed messages' entries are marked ``rewound`` (not deleted); a message id that
  comes back later is made ``active`` again. A JSON document re-read with messages
  gone marks those ``rewound`` the same way.

Neither form records the Gemini CLI version (``ConversationRecord`` and the JSONL
metadata line have no version field; checked against ``chatRecordingService.ts``
and the corpus's files): the coverage ledger's agent version is ``""`` for Gemini.

Message ``type``: ``user``, ``gemini`` (``content``, ``thoughts[] {subject,
description}``, ``toolCalls[] {id, name, args, result[].functionResponse, status,
resultDisplay}``, ``tokens``, ``model``), ``info``, ``error``, ``warning``; other types
become ``meta`` entries.

Usage — ``tokens {input, output, cached, thoughts, tool, total}`` per ``gemini``
message (the API's promptTokenCount, candidatesTokenCount, cachedContentTokenCount,
thoughtsTokenCount, toolUsePromptTokenCount, totalTokenCount). Mapped the way
ccusage 20.0.24 reports it (checked on the corpus, 2025-12-03/-24 and 2026-04-29):
``input_tokens = input - cached`` (promptTokenCount includes the cached tokens),
``cache_read_tokens = cached``, ``output_tokens = output`` (thoughts are *not* in
ccusage's output; they only appear in its totalTokens), ``reasoning_tokens =
thoughts``, counted in every total (``schema.REASONING_OUTSIDE_OUTPUT``: as ccusage's
totalTokens, Gemini CLI's own ``total`` and agentsview's output count them) and priced
as output. ``tool`` tokens are added to ``input_tokens`` (they are prompt tokens not in
promptTokenCount); every corpus message has ``tool: 0``, so this part is not checked
against ccusage. A message's usage is counted once (``usage_key`` = session:message id;
the larger copy wins when a later line adds tokens); it is stored on a ``meta`` entry of
its own (``tool_name`` ``usage``, empty text).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_int, compact_json, media_placeholder
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    FileMode,
    Mode,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.readers.document import read_document
from ctxkeep.sources.readers.jsonl import file_head, read_jsonl

AGENT = "gemini-cli"
PARSER_VERSION = 2  # 2: messages without an id are kept
MODE: Mode = "rewrite"  # .json documents; .jsonl files are append-only (see mode_for)

_MAX_IDS = 200_000  # bound on message ids kept in a watermark's state


def mode_for(path: Path) -> FileMode:
    """``append`` for the JSONL format, ``rewrite`` for the JSON document."""
    return "append" if path.suffix == ".jsonl" else "rewrite"


def gemini_root(ctx: DiscoveryContext) -> Path:
    """``$GEMINI_CLI_HOME/.gemini`` when set, else ``~/.gemini``."""
    return ctx.env_dir("GEMINI_CLI_HOME", ctx.home) / ".gemini"


def _project_dirs(root: Path) -> dict[str, str]:
    """Folder name under ``tmp/`` → project root, from ``projects.json`` (slug and
    legacy SHA-256 names) and ``.project_root`` markers."""
    out: dict[str, str] = {}
    try:
        reg = orjson.loads((root / "projects.json").read_bytes())
        for path, slug in (reg.get("projects") or {}).items():
            if isinstance(path, str) and isinstance(slug, str):
                out[slug] = path
                out[hashlib.sha256(path.encode()).hexdigest()] = path
    except (OSError, orjson.JSONDecodeError, AttributeError):
        pass
    return out


def _project_of(chats_dir: Path, known: dict[str, str]) -> str | None:
    proj = chats_dir.parent
    marker = proj / ".project_root"
    try:
        text = marker.read_text("utf-8").strip()
        if text:
            return text
    except OSError:
        pass
    return known.get(proj.name)


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``tmp/*/chats/session-*.json[l]`` (and sub-agent ``chats/<parent>/*.jsonl``)
    under the Gemini root and configured dirs (each a ``.gemini`` root, a ``tmp`` dir or
    a ``chats`` dir)."""
    d = Discovery(AGENT)
    root = gemini_root(ctx)
    bases = [root / "tmp"] + list(ctx.extra_dirs)
    known = _project_dirs(root)
    for base in bases:
        d.searched.append(base)
        if not base.is_dir():
            continue
        if base.name == "chats":
            chat_dirs = [base]
        elif (base / "tmp").is_dir():
            chat_dirs = sorted((base / "tmp").glob("*/chats"))
        else:
            chat_dirs = sorted(base.glob("*/chats"))
        for cd in chat_dirs:
            cands = (
                sorted(cd.glob("session-*.json"))
                + sorted(cd.glob("session-*.jsonl"))
                + sorted(cd.glob("*/*.jsonl"))
            )
            # once per chats dir, not per file (a failed open of its ``.project_root``
            # per file: 1,512 at 10 GB)
            project = _project_of(cd, known) if cands else None
            for p in cands:
                meta: dict[str, Any] = {"project_dir": project}
                if p.parent != cd:
                    meta["parent_session"] = p.parent.name
                d.add(p, mode_for(p), meta)
    if not d.files:
        d.reason = (
            f"{root} does not exist"
            if not root.exists()
            else f"no chats/session-*.json[l] under {root / 'tmp'}"
        )
    return d


def matches(path: Path) -> bool:
    """True for a Gemini CLI chat file given with ``--path``."""
    head = file_head(path, (".json", ".jsonl"), 4096)
    return b'"sessionId"' in head and b'"projectHash"' in head


# ---------------------------------------------------------------- mapping


def _parts_text(content: Any) -> str:
    """Text of a Gemini ``PartListUnion``: a string, a part, or a list of parts
    (``text``, ``inlineData`` → placeholder, ``functionCall``/``functionResponse``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    out = []
    for p in content:
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, dict):
            if isinstance(p.get("text"), str):
                out.append(p["text"])
            elif isinstance(p.get("inlineData"), dict):
                inl = p["inlineData"]
                out.append(media_placeholder("media", inl.get("mimeType"), len(inl.get("data") or "")))
            elif isinstance(p.get("fileData"), dict):
                out.append(f"[file {p['fileData'].get('fileUri', '')}]")
            elif isinstance(p.get("functionResponse"), dict):
                out.append(_function_response_text(p["functionResponse"]))
            elif isinstance(p.get("functionCall"), dict):
                out.append(compact_json(p["functionCall"], 4000))
            else:
                out.append(compact_json(p, 2000))
    return "\n".join(x for x in out if x)


def _function_response_text(fr: dict) -> str:
    resp = fr.get("response")
    if isinstance(resp, dict):
        for k in ("output", "error", "content", "result"):
            v = resp.get(k)
            if isinstance(v, str):
                return ("[error] " + v) if k == "error" else v
        return compact_json(resp)
    return "" if resp is None else str(resp)


def _tool_result_text(tc: dict) -> str:
    res = tc.get("result")
    text = _parts_text(res) if res else ""
    if not text and isinstance(tc.get("resultDisplay"), str):
        text = tc["resultDisplay"]
    if tc.get("status") in ("error", "cancelled") and not text.startswith("["):
        text = f"[{tc['status']}] " + text
    return text


def is_message(m: dict) -> bool:
    """True for a message record: it has an ``id``, or a ``type`` and a ``content``,
    ``toolCalls`` or ``thoughts`` (messages written without an ``id`` are messages too:
    wesm/agentsview internal/parser/gemini.go reads every ``user``/``gemini`` message by
    its ``type`` alone)."""
    if m.get("id") is not None:
        return True
    return isinstance(m.get("type"), str) and any(k in m for k in ("content", "toolCalls", "thoughts"))


def message_id(m: dict) -> str:
    """A message's ``id``, or for one without: ``h`` and the first 16 hex characters of
    the SHA-256 of its timestamp, type and content (the same message read again, from
    a rewritten document or a ``$set``, gets the same id)."""
    if m.get("id") is not None:
        return str(m["id"])
    key = orjson.dumps([m.get("timestamp"), m.get("type"), m.get("content")], option=orjson.OPT_NON_STR_KEYS)
    return "h" + hashlib.sha256(key).hexdigest()[:16]


def message_entries(msg: dict, ctx: dict) -> list[dict]:
    """Entry dicts of one Gemini message record.

    ``ctx``: ``sid``, ``parent`` (parent session), ``project_dir``, ``src`` (path),
    ``offset`` (byte offset of the record). Every entry of the message has
    ``message_id`` = the message id (what a rewind marks). Ids: text
    ``<sid>:<id>``/0; thoughts ``<sid>:<id>:thoughts``/i; tool call
    ``<sid>:<id>:tool:<call id>`` part 0 (call) and 1 (result); usage
    ``<sid>:<id>:usage`` (a ``meta`` entry with empty text, ``tool_name`` ``usage``),
    so a message re-written with more tool calls or tokens adds only what is new.
    """
    sid, mid = ctx["sid"], message_id(msg)
    mtype = msg.get("type")
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": ctx.get("parent"),
        "native_id": mid,
        "message_id": mid,
        "project_dir": ctx.get("project_dir"),
        "ts": msg.get("timestamp") if isinstance(msg.get("timestamp"), str) else None,
        "is_sidechain": bool(ctx.get("parent")),
        "source_path": ctx["src"],
        "source_offset": ctx.get("offset", 0),
        "record_id": f"{sid}:{mid}",
        "part": 0,
        "model": msg.get("model") if isinstance(msg.get("model"), str) else None,
    }
    out: list[dict] = []
    if mtype == "user":
        out.append(dict(base, role="user", kind="message", text=_parts_text(msg.get("content"))))
    elif mtype == "gemini":
        text = _parts_text(msg.get("content"))
        if text or not (msg.get("toolCalls") or msg.get("thoughts")):
            out.append(dict(base, role="assistant", kind="message", text=text))
        for i, th in enumerate(msg.get("thoughts") or []):
            if not isinstance(th, dict):
                continue
            subj, desc = th.get("subject") or "", th.get("description") or ""
            out.append(
                dict(
                    base,
                    role="assistant",
                    kind="thinking",
                    part=i,
                    record_id=f"{sid}:{mid}:thoughts",
                    ts=th.get("timestamp") or base["ts"],
                    text=(f"**{subj}** {desc}" if subj else str(desc)).strip(),
                )
            )
        for i, tc in enumerate(msg.get("toolCalls") or []):
            if not isinstance(tc, dict):
                continue
            cid = str(tc.get("id") or i)
            rid = f"{sid}:{mid}:tool:{cid}"
            out.append(
                dict(
                    base,
                    role="assistant",
                    kind="tool_call",
                    tool_name=tc.get("name"),
                    native_id=cid,
                    parent_id=mid,
                    record_id=rid,
                    part=0,
                    ts=base["ts"],
                    text=compact_json(tc.get("args")),
                )
            )
            if (
                tc.get("result") is not None
                or tc.get("resultDisplay") is not None
                or tc.get("status") in ("error", "cancelled")
            ):
                out.append(
                    dict(
                        base,
                        role="tool",
                        kind="tool_result",
                        tool_name=tc.get("name"),
                        native_id=cid,
                        parent_id=mid,
                        record_id=rid,
                        part=1,
                        ts=tc.get("timestamp") or base["ts"],
                        text=_tool_result_text(tc),
                    )
                )
    else:
        out.append(
            dict(base, role="system", kind="meta", tool_name=str(mtype), text=_parts_text(msg.get("content")))
        )
    tok = msg.get("tokens")
    if isinstance(tok, dict) and mtype == "gemini":
        # usage rides on an entry of its own: the first copy of a message (JSONL) often
        # has no tokens yet, and within a batch the first copy of an entry id wins
        inp = as_int(tok.get("input")) or 0
        cached = as_int(tok.get("cached")) or 0
        out.append(
            dict(
                base,
                role="assistant",
                kind="meta",
                tool_name="usage",
                text="",
                record_id=f"{sid}:{mid}:usage",
                input_tokens=max(inp - cached, 0) + (as_int(tok.get("tool")) or 0),
                output_tokens=as_int(tok.get("output")) or 0,
                cache_read_tokens=cached,
                cache_creation_tokens=0,
                reasoning_tokens=as_int(tok.get("thoughts")) or 0,
                usage_key=f"{sid}:{mid}",
            )
        )
    return out


def _summary_entry(summary: str, ctx: dict, ts: str | None) -> dict:
    h = hashlib.sha256(summary.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return {
        "agent": AGENT,
        "session_id": ctx["sid"],
        "parent_session_id": ctx.get("parent"),
        "project_dir": ctx.get("project_dir"),
        "ts": ts,
        "role": "system",
        "kind": "summary",
        "text": summary,
        "source_path": ctx["src"],
        "source_offset": ctx.get("offset", 0),
        "record_id": f"{ctx['sid']}:summary:{h}",
        "part": 0,
        "is_sidechain": bool(ctx.get("parent")),
    }


def _status(state: dict, sid: str, ids: list[str], status: str) -> None:
    if ids:
        state.setdefault("_status_changes", []).append(
            {"agent": AGENT, "session_id": sid, "message_ids": ids, "status": status}
        )


# ---------------------------------------------------------------- JSON document


def _find_offsets(raw: bytes, ids: list[str]) -> list[int]:
    """Byte offset of each message's ``"id"`` in the pretty-printed document (0 when
    not found); searched forward, in document order."""
    out, pos = [], 0
    for mid in ids:
        found = -1
        for pat in (b'"id": "' + mid.encode() + b'"', b'"id":"' + mid.encode() + b'"'):
            found = raw.find(pat, pos)
            if found >= 0:
                break
        if found >= 0:
            pos = found + 1
        out.append(max(found, 0))
    return out


def parse_document(raw: bytes, doc: Any, state: dict, file: SourceFile, old_ids: list[str]) -> list[dict]:
    """Entries of a whole JSON chat document; messages present in ``old_ids`` (the
    previous read) but gone now are marked ``rewound``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise ValueError("not a Gemini chat document (no messages list)")
    sid = str(doc.get("sessionId") or file.path.stem)
    ctx = {
        "sid": sid,
        "parent": file.meta.get("parent_session"),
        "project_dir": file.meta.get("project_dir") or _first_dir(doc.get("directories")),
        "src": str(file.path),
    }
    msgs = [m for m in doc["messages"] if isinstance(m, dict) and is_message(m)]
    ids = [message_id(m) for m in msgs]
    offs = _find_offsets(raw, ids)
    out: list[dict] = []
    for m, off in zip(msgs, offs, strict=False):
        ctx["offset"] = off
        out.extend(message_entries(m, ctx))
    if isinstance(doc.get("summary"), str) and doc["summary"]:
        ctx["offset"] = 0
        out.append(_summary_entry(doc["summary"], ctx, doc.get("lastUpdated")))
    now = set(ids)
    gone = [i for i in old_ids if i not in now]
    _status(state, sid, gone, "rewound")
    state["ids"] = ids[-_MAX_IDS:]
    return out


def _first_dir(dirs: Any) -> str | None:
    return dirs[0] if isinstance(dirs, list) and dirs and isinstance(dirs[0], str) else None


# ---------------------------------------------------------------- JSONL records


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, file: SourceFile) -> list[dict]:
    """Map one JSONL line (metadata, message, ``$set``, ``$rewindTo``) to entry dicts,
    keeping the active message order in ``state["order"]`` for rewinds."""
    if "sessionId" in rec and "projectHash" in rec and "id" not in rec:
        state["sid"] = str(rec["sessionId"])
        if rec.get("kind"):
            state["kind"] = rec["kind"]
        d = _first_dir(rec.get("directories"))
        if d and not state.get("project_dir"):
            state["project_dir"] = d
        return []
    sid = state.get("sid") or file.path.stem
    ctx = {
        "sid": sid,
        "parent": file.meta.get("parent_session"),
        "project_dir": file.meta.get("project_dir") or state.get("project_dir"),
        "src": str(file.path),
        "offset": offset,
    }
    order: dict = _ordered(state, "order")
    rewound: dict = _ordered(state, "rewound")
    if isinstance(rec.get("$rewindTo"), str):
        target = rec["$rewindTo"]
        keys = list(order)
        idx = keys.index(target) if target in order else 0
        removed = keys[idx:]
        state["order"] = dict.fromkeys(keys[:idx], 1)
        _status(state, sid, removed, "rewound")
        rewound.update(dict.fromkeys(removed, 1))
        _trim(rewound)
        return []
    if isinstance(rec.get("$set"), dict):
        upd = rec["$set"]
        out: list[dict] = []
        d = _first_dir(upd.get("directories"))
        if d:
            state["project_dir"] = d
        if isinstance(upd.get("summary"), str) and upd["summary"]:
            out.append(_summary_entry(upd["summary"], ctx, upd.get("lastUpdated")))
        if isinstance(upd.get("messages"), list):
            new_order = []
            for m in upd["messages"]:
                if isinstance(m, dict) and is_message(m):
                    out.extend(_message(m, ctx, state, track=False))
                    new_order.append(message_id(m))
            state["order"] = dict.fromkeys(new_order[-_MAX_IDS:], 1)
        return out
    if is_message(rec):
        return _message(rec, ctx, state, track=True)
    return [
        {
            "agent": AGENT,
            "session_id": sid,
            "role": "system",
            "kind": "meta",
            "tool_name": "unknown-record",
            "text": compact_json(rec, 2000),
            "source_path": str(file.path),
            "source_offset": offset,
            "record_id": f"{sid}:{line_hash}",
            "part": 0,
            "parent_session_id": ctx["parent"],
            "is_sidechain": bool(ctx["parent"]),
        }
    ]


def _ordered(state: dict, key: str) -> dict:
    """``state[key]`` as an insertion-ordered dict of ids (older states held lists)."""
    v = state.get(key)
    if not isinstance(v, dict):
        v = dict.fromkeys(v or [], 1)
        state[key] = v
    return v


def _trim(d: dict) -> None:
    while len(d) > _MAX_IDS:
        del d[next(iter(d))]


def _message(m: dict, ctx: dict, state: dict, track: bool) -> list[dict]:
    mid = message_id(m)
    rewound = _ordered(state, "rewound")
    if mid in rewound:  # re-recorded after a rewind: active again
        del rewound[mid]
        _status(state, ctx["sid"], [mid], "active")
    if track:
        order = _ordered(state, "order")
        if mid not in order:
            order[mid] = 1
            _trim(order)
    return message_entries(m, ctx)


# ---------------------------------------------------------------- read


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one chat file: JSONL from its byte offset (append-only), a JSON document
    whole when its hash changed."""
    if file.path.suffix == ".jsonl":

        def parse(rec, offset, line_hash, state):
            return parse_record(rec, offset, line_hash, state, file)

        return read_jsonl(file, wm, PARSER_VERSION, parse, batch_bytes)
    old_ids = list(
        (wm.state.get("ids") or []) if wm is not None and wm.parser_version == PARSER_VERSION else []
    )

    def parse_doc(raw, doc, state, idle):
        return parse_document(raw, doc, state, file, old_ids)

    return read_document(file, wm, PARSER_VERSION, parse_doc, batch_bytes)

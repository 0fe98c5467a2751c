"""Windsurf (Codeium's VS Code fork) chat panel sessions.

Where: ``$WINDSURF_DIR`` else the editor's user dir, ``Windsurf/User`` and ``Windsurf -
Next/User`` under ``~/.config`` (Linux), ``~/Library/Application Support`` (macOS) and
``~/AppData/Roaming`` (Windows) (agentsview 0.46 ``internal/parser/types.go``
AgentWindsurf, ``DefaultDirs``, env ``WINDSURF_DIR``); in it one VS Code workspace
database per workspace, ``workspaceStorage/<workspace id>/state.vscdb``, beside a
``workspace.json`` ``{folder | workspace}`` (a ``file://`` URI) naming the project
(agentsview 0.46 ``windsurf_provider.go`` workspaceDBs, windsurfWorkspaceProject).

Format facts (``windsurf_provider.go``): the chat lives in the ``ItemTable(key, value)``
rows ``workbench.panel.aichat.view.aichat.chatdata`` and ``aiChat.chatdata``, a JSON
value of one of two shapes:

- **tabs** ``{tabs [{tabId, chatTitle, bubbles [{type, text, rawText, initText}]}]}``:
  one session per tab; a bubble whose ``type`` is ``2``, ``"ai"`` or ``"assistant"``
  is the assistant's, any other the user's; its text the first non-blank of ``text``,
  ``rawText``, ``initText`` (windsurfChatTab.toVSCodeSession, windsurfChatBubble);
- **requests** (VS Code's chat session, ``vscode_copilot.go`` vscodeCopilotSession):
  ``{version, sessionId, creationDate, lastMessageDate (Unix ms), customTitle,
  requests [{requestId, message {text}, response [item], modelId, timestamp (Unix ms),
  result {metadata {promptTokens, outputTokens, resolvedModel}}}]}``; a response item
  without ``kind`` (or of an unknown kind) is markdown ``value``,
  ``toolInvocationSerialized`` ``{toolId, toolCallId, invocationMessage,
  pastTenseMessage, toolSpecificData}`` a tool call; ``prepareToolInvocation``,
  ``undoStop``, ``codeblockUri``, ``textEditGroup`` hold no text; a session without an
  id is ``workspace-<workspace id>`` (windsurfFallbackSessionID).

Entries: tabs: ``record_id`` ``<tab>:<bubble index>``; requests:
``<session>:<requestId>`` (the prompt part 0, then the response's text and tool calls;
a tool's ``pastTenseMessage`` is its result). Times: a request's ``timestamp``, else the
session's ``creationDate``; tab bubbles carry none and take the database's mtime.
Usage: Windsurf bills in credits and logs no per-message tokens (``types.go``
``NoPerMessageTokenData``, ``AICreditsDenominated``); a request that carries
``result.metadata`` token counts gets a usage row (``usage_key``
``windsurf:<session>:<requestId>``, prompt tokens as input). The value is rewritten
whole: the database is read again when it or its ``-wal`` changed, and the stable ids
keep entries from doubling.

The vault (issue 27) keeps the chat rows of each database as one rows document
(``VAULT_TABLES``: the ``ItemTable`` rows of ``CHAT_KEYS``, session ``""``; no other key
of the editor's state is kept), and the project ``workspace.json`` named when it was
read (``read`` puts it in the file's meta, which the vault records): a reparse reads a
database rebuilt from the rows, beside which there is no ``workspace.json``, with the
project from the meta and the database's mtime set back (tab bubbles take it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at, json_object, nonempty
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
from ctxkeep.sources.readers.sqlite import DbRead, RowCollector, as_bytes, database_reader

AGENT = "windsurf"
PARSER_VERSION = 1
MODE: Mode = "sqlite"

CHAT_KEYS = ("workbench.panel.aichat.view.aichat.chatdata", "aiChat.chatdata")
_APPS = ("Windsurf", "Windsurf - Next")
_NO_TEXT = ("prepareToolInvocation", "undoStop", "codeblockUri", "textEditGroup")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$WINDSURF_DIR`` when set, else the user dirs of both editions on each platform."""
    env = ctx.env.get("WINDSURF_DIR")
    if env:
        return [Path(env).expanduser()]
    h = ctx.home
    bases = [h / ".config", h / "Library" / "Application Support", h / "AppData" / "Roaming"]
    return [b / app / "User" for b in bases for app in _APPS]


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``workspaceStorage/*/state.vscdb`` under each user dir (or a configured
    ``workspaceStorage`` dir)."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        ws = root if root.name == "workspaceStorage" else root / "workspaceStorage"
        d.searched.append(ws)
        if ws.is_dir():
            for p in sorted_paths(ws.glob("*/state.vscdb")):
                d.add(p, MODE)
    d.explain_empty(roots(ctx)[0], "no Windsurf workspaceStorage/*/state.vscdb found")
    return d


def matches(path: Path) -> bool:
    """A ``state.vscdb`` under a Windsurf ``workspaceStorage`` dir."""
    return (
        path.name == "state.vscdb"
        and path.parent.parent.name == "workspaceStorage"
        and any(part.startswith("Windsurf") for part in path.parts)
    )


def _ms(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1e14:
        return None
    return datetime.fromtimestamp(v / 1000, UTC).isoformat().replace("+00:00", "Z")


def project_of(db: Path) -> str | None:
    """The folder ``workspace.json`` beside the database names (a ``file://`` URI made
    a path), else None."""
    w = json_object(db.parent / "workspace.json")
    uri = nonempty(w.get("folder")) or nonempty(w.get("workspace"))
    if not uri:
        return None
    return urllib.parse.unquote(urllib.parse.urlparse(uri).path) if uri.startswith("file:") else uri


def _probe(conn) -> list[tuple[str, Any]]:
    cols = {r[1] for r in conn.execute("PRAGMA table_info(ItemTable)")}
    if not {"key", "value"} <= cols:
        raise ValueError("no ItemTable of VS Code's shape")
    marks = ",".join("?" * len(CHAT_KEYS))
    return conn.execute(
        f"SELECT key, value FROM ItemTable WHERE key IN ({marks}) ORDER BY key", CHAT_KEYS
    ).fetchall()


def _tab_entries(tab: dict, base: dict) -> list[dict]:
    tid = nonempty(tab.get("tabId"))
    if not tid:
        return []
    out: list[dict] = []
    title = nonempty(tab.get("chatTitle"))
    if title:
        out.append(
            dict(
                base,
                session_id=tid,
                record_id=f"{tid}:title",
                part=0,
                role="system",
                kind="meta",
                tool_name="title",
                text=title,
            )
        )
    for i, b in enumerate(tab.get("bubbles") or []):
        if not isinstance(b, dict):
            continue
        text = next(
            (
                v
                for v in (b.get(k) for k in ("text", "rawText", "initText"))
                if isinstance(v, str) and v.strip()
            ),
            "",
        )
        if not text:
            continue
        assistant = str(b.get("type") or "").strip().lower() in ("2", "ai", "assistant")
        out.append(
            dict(
                base,
                session_id=tid,
                record_id=f"{tid}:{i}",
                part=0,
                role="assistant" if assistant else "user",
                kind="message",
                text=text.strip(),
            )
        )
    return out


def _invocation_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("value"), str):
        return v["value"]
    return "" if v is None else compact_json(v, 4000)


def _request_entries(
    req: dict, sid: str, base: dict, start: str | None, unknown_types: list[str]
) -> list[dict]:
    rid = nonempty(req.get("requestId")) or hashlib.sha256(orjson.dumps(req.get("message"))).hexdigest()[:16]
    e = dict(base, session_id=sid, record_id=f"{sid}:{rid}", ts=_ms(req.get("timestamp")) or start)
    meta = dict_at(dict_at(req, "result"), "metadata")
    model = nonempty(meta.get("resolvedModel")) or nonempty(req.get("modelId"))
    out: list[dict] = []
    prompt = nonempty(dict_at(req, "message").get("text"))
    if prompt:
        out.append(dict(e, part=0, role="user", kind="message", text=prompt))
    text: list[str] = []
    calls: list[dict] = []
    for item in req.get("response") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("kind") or ""
        if kind == "toolInvocationSerialized":
            tool = nonempty(item.get("toolId"))
            cid = nonempty(item.get("toolCallId"))
            args = item.get("invocationMessage")
            spec = item.get("toolSpecificData")
            calls.append(
                dict(
                    e,
                    role="assistant",
                    kind="tool_call",
                    native_id=cid,
                    tool_name=tool,
                    model=model,
                    text=_invocation_text(args) or (compact_json(spec, 4000) if spec else ""),
                )
            )
            done = _invocation_text(item.get("pastTenseMessage"))
            if done:
                calls.append(
                    dict(e, role="tool", kind="tool_result", native_id=cid, tool_name=tool, text=done)
                )
        elif kind in _NO_TEXT:
            continue
        elif isinstance(item.get("value"), str):
            text.append(item["value"])
        elif kind:
            unknown_types.append(f"response:{kind}")
    answer = "".join(text).strip()
    if answer:
        out.append(dict(e, role="assistant", kind="message", model=model, text=answer))
    out += calls
    for j, x in enumerate(out):
        x["part"] = j
    prompt_tokens, output_tokens = as_int(meta.get("promptTokens")), as_int(meta.get("outputTokens"))
    if model and (prompt_tokens or output_tokens):
        out.append(
            dict(
                e,
                record_id=f"{sid}:{rid}:usage",
                part=0,
                role="system",
                kind="meta",
                tool_name="usage",
                model=model,
                text=f"usage {model}",
                input_tokens=prompt_tokens or 0,
                output_tokens=output_tokens or 0,
                cache_read_tokens=0,
                cache_creation_tokens=0,
                usage_key=f"windsurf:{sid}:{rid}",
            )
        )
    return out


def chat_entries(doc: Any, db: Path, base: dict, unknown_types: list[str]) -> list[dict]:
    """Entry dicts of one chat-data value (either shape; module doc). Raises ValueError
    for a value of neither shape."""
    if not isinstance(doc, dict):
        raise ValueError("chat data is not a JSON object")
    if isinstance(doc.get("requests"), list):
        sid = nonempty(doc.get("sessionId")) or f"workspace-{db.parent.name}"
        start = _ms(doc.get("creationDate"))
        out: list[dict] = []
        title = nonempty(doc.get("customTitle"))
        if title:
            out.append(
                dict(
                    base,
                    session_id=sid,
                    record_id=f"{sid}:title",
                    ts=start or base["ts"],
                    part=0,
                    role="system",
                    kind="meta",
                    tool_name="title",
                    text=title,
                )
            )
        for req in doc["requests"]:
            if isinstance(req, dict):
                out += _request_entries(req, sid, base, start or base["ts"], unknown_types)
        return out
    if isinstance(doc.get("tabs"), list):
        return [e for tab in doc["tabs"] if isinstance(tab, dict) for e in _tab_entries(tab, base)]
    raise ValueError("chat data holds neither tabs nor requests")


def _read(rd: DbRead, rows: list[tuple[str, Any]]) -> Iterator[Batch]:
    path = rd.path
    try:
        mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat().replace("+00:00", "Z")
    except OSError:
        mtime = None
    project = rd.meta["project"] if "project" in rd.meta else project_of(path)
    base = {"agent": AGENT, "project_dir": project, "ts": mtime, "source_path": str(path)}
    rows_read = RowCollector(path, reset=True)
    for i, (key, value) in enumerate(rows):
        raw = as_bytes(value)
        rows_read.add(
            i,
            raw,
            f"ItemTable {key}",
            lambda unknown_types, raw=raw, i=i: chat_entries(
                orjson.loads(raw), path, dict(base, source_offset=i), unknown_types
            ),
        )
    yield rows_read.batch(rd.watermark(dict(rd.state), rd.settled()))


#: the rows the vault keeps of a database (``readers.rows``): the chat data, as one
#: document (session ``""``)
VAULT_TABLES = (("ItemTable", f"CASE WHEN key IN ({', '.join(repr(k) for k in CHAT_KEYS)}) THEN '' END"),)

_read_db = database_reader(
    AGENT, PARSER_VERSION, _probe, _read, "cannot read state.vscdb", vault=VAULT_TABLES
)


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """The chat data of one workspace's ``state.vscdb``, read whole when the database
    changed; the project of ``workspace.json`` beside it goes in the file's meta (a
    meta that names one already, a reparse's from the vault, is kept)."""
    if "project" not in file.meta:
        file = dataclasses.replace(file, meta=dict(file.meta, project=project_of(file.path)))
    return _read_db(file, wm, batch_bytes)


read.vault_tables = VAULT_TABLES  # type: ignore[attr-defined]  # (``pipeline.plan``: a database the vault should hold)

"""Kiro IDE (the agentic IDE's chat panel, extension ``kiro.kiroagent``) sessions.

Where: ``$KIRO_IDE_DIR`` else the extension's global storage,
``User/globalStorage/kiro.kiroagent`` under ``~/.config/Kiro`` (Linux),
``~/Library/Application Support/Kiro`` (macOS) and ``~/AppData/Roaming/Kiro`` (Windows)
(agentsview 0.46 ``internal/parser/types.go`` AgentKiroIDE, env ``KIRO_IDE_DIR``;
``kiro_ide.go`` kiroIDEDefaultDirs). Two generations, both JSON documents rewritten as
the session grows (mode ``rewrite``, ``readers.document``), read as agentsview 0.46
``kiro_ide.go`` and ``kiro_ide_provider.go`` read them:

- **workspace sessions** (current): ``<root>/workspace-sessions/<base64 of the
  workspace path>/<session uuid>.json`` ``{sessionId, title, workspaceDirectory,
  history [{message {role (user|assistant|tool), content (a string or ``[{type: text,
  text}]``), id}, promptLogs [{completion}], executionId}]}``, beside a
  ``sessions.json`` index ``[{sessionId, title, dateCreated, workspaceDirectory}]``
  (one per workspace folder, rewritten as sessions start; the fixture's
  ``make_fixtures.py`` follows agentsview 0.46 ``kiro_ide.go``'s reading of it). The
  vault keeps the index as a sidecar the folder's sessions share (``INDEX``:
  ``readers.sidecar``, ``SIDECAR_OF`` the folder, ``SHARED``): each version, no
  entries, restored with any of those sessions; the readers take it through
  ``readers.jsonl.VIEW``, so a reparse with the folder gone reads the vault's newest.
  An assistant turn's output lives in an execution log
  ``<root>/<first 32 hex of SHA-256(workspace path)>/414d1636299d2b9e4ce7e17fb11f63e9/
  <file>`` ``{executionId, actions [{actionId, actionType (say | replace | create |
  readCode | …), input {file, originalContent, modifiedContent, …}, output
  {message}}]}``: ``say`` is the model's text, the others are tool actions;
  without a log the turn's text is its ``content``, else its ``promptLogs``
  completions. The vault keeps each log as a sidecar of the session whose history
  names its ``executionId`` (``exec_log_sidecars``; ``EXEC_LOG_KIND``), read through
  ``VIEW`` on a reparse.
- **chat files** (older): ``<root>/<workspace hash>/<file hash>.chat`` ``{executionId,
  actionId, chat [{role (human | bot | tool), content}], metadata {modelId, workflow,
  workflowId, startTime, endTime (Unix ms)}}``; human turns that open with ``# System
  Prompt``, ``# Identity``, ``<identity>``, ``## Included Rules`` or ``You are operating
  in a workspace`` are the IDE's context, a user's prompt may be wrapped in
  ``<kiro-ide-message>``, and the bot's ``I will follow these instructions.`` is a
  reply to that context. The project is the workspace whose hash names the folder
  (looked up in the ``sessions.json`` indexes).

No token usage is logged; the model only in ``.chat`` metadata. Entries: a message's
``record_id`` is ``<session>:<message id or index>`` (chat files: ``<session>:<index>:
<hash of the turn>``, ids ``<workspace hash>:<file hash>``), an execution's actions
are parts of its assistant turn (tool calls named by ``actionType``, ``native_id`` the
``actionId``); context turns are ``meta`` (``tool_name`` ``context``). Times: the
index's ``dateCreated`` (workspace sessions), ``metadata.startTime`` (chat files), else
the file's mtime. A live session whose execution log has not been written yet is read
again on the next run (``state["complete"] = False``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import compact_json, dict_at, json_object, nonempty, title_entry
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    REASON_OUTSIDE,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
    sorted_paths,
)
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.document import read_document
from ctxkeep.sources.readers.jsonl import VIEW, file_head

AGENT = "kiro-ide"
PARSER_VERSION = 1
MODE: Mode = "rewrite"

_STORAGE = ("User", "globalStorage", "kiro.kiroagent")
EXEC_SUBDIR = "414d1636299d2b9e4ce7e17fb11f63e9"
_CONTEXT_PREFIXES = (
    "# System Prompt",
    "# Identity",
    "<identity>",
    "## Included Rules",
    "You are operating in a workspace",
)
_WRAP = ("<kiro-ide-message>", "</kiro-ide-message>")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$KIRO_IDE_DIR`` when set, else the Linux, macOS and Windows storage dirs."""
    env = ctx.env.get("KIRO_IDE_DIR")
    if env:
        return [Path(env).expanduser()]
    h = ctx.home
    return [
        h.joinpath(".config", "Kiro", *_STORAGE),
        h.joinpath("Library", "Application Support", "Kiro", *_STORAGE),
        h.joinpath("AppData", "Roaming", "Kiro", *_STORAGE),
    ]


#: a workspace folder's session index (module doc) and its sidecar kind
INDEX = "sessions.json"
INDEX_KIND = "session-index"


def index_sidecar(path: Path) -> SourceFile:
    """The sidecar (``readers.sidecar``) of the index at ``path``: shared by the
    sessions of its folder (``SIDECAR_OF`` the folder, ``SHARED``)."""
    return SourceFile(
        AGENT, path, sidecar.MODE, sidecar.meta(INDEX_KIND, path.parent, **{sidecar.SHARED: True})
    )


def sidecars_of(path: Path) -> list[SourceFile]:
    """The sidecars of a workspace session at ``path`` on disk: its folder's index and
    its execution logs (``exec_log_sidecars``; an ``ingest --path`` of the session takes
    them in too)."""
    p = path.with_name(INDEX)
    if path.suffix != ".json" or path.name == INDEX or path.parent.parent.name != "workspace-sessions":
        return []
    return ([index_sidecar(p)] if p.is_file() else []) + exec_log_sidecars(path.parent.parent.parent, [path])


def shared_without(data: bytes, sessions: Collection[str]) -> bytes:
    """The index ``data`` (``sessions.json``: a JSON list of ``{sessionId, title,
    dateCreated, workspaceDirectory}``) without the objects of ``sessions`` (their
    ``sessionId``), written as it was (the same indent, or compact; a final newline
    kept); ``data`` itself when it names none of them or is no JSON list
    (``contract.SharedIndex``: a purge leaves no title of a purged session in the
    vault's copy, and an ingest keeps it out of a new one)."""
    want = set(sessions)
    if not want:
        return data
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
    if not isinstance(doc, list):
        return data
    kept = [x for x in doc if not (isinstance(x, dict) and x.get("sessionId") in want)]
    if len(kept) == len(doc):
        return data
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    # JSON.stringify(x, null, n) puts the first object on line 2, n spaces in
    indent = len(lines[1]) - len(lines[1].lstrip(" ")) if len(lines) > 2 else 0
    out = json.dumps(
        kept, ensure_ascii=False, indent=indent or None, separators=None if indent else (",", ":")
    )
    return (out + ("\n" if text.endswith("\n") else "")).encode("utf-8", "surrogateescape")


#: an execution log's sidecar kind (``exec_log_sidecars``)
EXEC_LOG_KIND = "execution-log"
#: the head of an execution log whose first key is its ``executionId`` (as the IDE
#: writes it): read without parsing the whole log (its actions hold whole files)
_EID_HEAD = re.compile(rb'\A\s*\{\s*"executionId"\s*:\s*("(?:[^"\\]|\\.)*")')
_HEAD_BYTES = 4096
#: path → ((size, mtime_ns), what was read of it): session documents' ties
#: (``_session_ties``) and logs' execution ids (``_log_execution``), read again only
#: when the file's size or mtime changes (a watcher's or a long process's discoveries)
_TIES: dict[str, tuple[tuple[int, int], Any]] = {}


def _cached(path: str, st: os.stat_result, fn: Callable[[str], Any]) -> Any:
    key = (st.st_size, st.st_mtime_ns)
    hit = _TIES.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    got = fn(path)
    _TIES[path] = (key, got)
    return got


def _read_ties(path: str) -> tuple[str | None, str, tuple[str, ...]]:
    try:
        with open(path, "rb") as f:
            doc = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None, Path(path).stem, ()
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        return None, Path(path).stem, ()
    eids = {nonempty(h.get("executionId")) for h in doc["history"] if isinstance(h, dict)}
    sid = nonempty(doc.get("sessionId")) or Path(path).stem
    return nonempty(doc.get("workspaceDirectory")), sid, tuple(sorted(e for e in eids if e))


def _session_ties(path: Path) -> tuple[str | None, str, tuple[str, ...]]:
    """A workspace session's ``(workspaceDirectory or None, sessionId, its history's
    executionIds)`` (``(None, stem, ())`` for a file that is no session), cached by
    the file's size and mtime (``_TIES``)."""
    try:
        st = os.stat(path)
    except OSError:
        return None, path.stem, ()
    return _cached(str(path), st, _read_ties)


def _read_execution(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
            m = _EID_HEAD.match(head)
            if m:
                got = orjson.loads(m.group(1))
                return got if isinstance(got, str) and got else None
            doc = orjson.loads(head + f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return nonempty(doc.get("executionId")) if isinstance(doc, dict) else None


def _log_execution(path: str, st: os.stat_result) -> str | None:
    """An execution log's ``executionId`` (None when it has none): from its head when
    it is the first key (one 4 KB read), else the whole JSON; cached (``_TIES``)."""
    return _cached(path, st, _read_execution)


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path`` (a symlink) resolves to a file under ``root`` (resolved too)."""
    real = os.path.realpath(root)
    return os.path.commonpath([real, os.path.realpath(path)]) == real


def exec_log_sidecars(root: Path, sessions: list[Path], d: Discovery | None = None) -> list[SourceFile]:
    """The execution logs (module doc) of the workspace ``sessions`` under ``root``,
    each a sidecar of the session whose ``history[].executionId`` names it (``SIDECAR_OF``
    the session's file, meta ``session``, ``execution``; not shared: a log holds one
    execution of one session). A session's workspace is its ``workspaceDirectory``,
    else its folder index's; its logs lie in ``root/ws_hash(workspace)/EXEC_SUBDIR``. A
    log no session names is not taken. A symlink whose target lies outside ``root`` is
    not read (counted in ``d.skipped`` as ``REASON_OUTSIDE`` when ``d`` is given).

    Cost: one read of each session document and one 4 KB head of each log, each cached
    by the file's size and mtime for the process (``_TIES``)."""
    ties: dict[str, dict[str, tuple[Path, str]]] = {}
    for p in sessions:
        ws, sid, eids = _session_ties(p)
        if not eids:
            continue
        if not ws:
            ws = next(
                (
                    nonempty(x.get("workspaceDirectory"))
                    for x in _index(p.parent)
                    if x.get("sessionId") == sid
                ),
                None,
            )
        if ws:
            mine = ties.setdefault(ws, {})
            for e in eids:
                mine.setdefault(e, (p, sid))
    out: list[SourceFile] = []
    for ws in sorted(ties):
        folder = root / ws_hash(ws) / EXEC_SUBDIR
        try:
            with os.scandir(folder) as it:
                found = sorted((e.name, e.path, e.is_symlink()) for e in it if not e.name.startswith("."))
        except OSError:
            continue
        for _name, path, link in found:
            if link and not _inside(root, Path(path)):
                if d is not None:
                    d.skip(path, REASON_OUTSIDE)
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            eid = _log_execution(path, st)
            tie = ties[ws].get(eid) if eid else None
            if tie is None:
                continue
            of, sid = tie
            meta = sidecar.meta(EXEC_LOG_KIND, of, session=sid, execution=eid)
            out.append(SourceFile(AGENT, Path(path), sidecar.MODE, meta))
    return out


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``workspace-sessions/*/<uuid>.json`` and ``<hash>/<hash>.chat`` files, and
    each workspace folder's ``sessions.json`` (a sidecar: ``index_sidecar``) and the
    sessions' execution logs (sidecars of their session: ``exec_log_sidecars``)."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        d.searched.append(root)
        if not root.is_dir():
            continue
        sessions: list[Path] = []
        for p in sorted_paths(root.glob("workspace-sessions/*/*.json")):
            if p.name != INDEX:
                if d.add(p, MODE):
                    sessions.append(p)
            else:
                side = index_sidecar(p)
                d.add(p, sidecar.MODE, side.meta)
        for side in exec_log_sidecars(root, sessions, d):
            d.add(side.path, sidecar.MODE, side.meta)
        d.add_glob(root, ["*/*.chat"], MODE)
    d.explain_empty(roots(ctx)[0], "no Kiro IDE workspace-sessions/*/<id>.json or <hash>/*.chat found")
    return d


def matches(path: Path) -> bool:
    """A Kiro IDE ``.chat`` file or workspace-session JSON given with ``--path``."""
    if path.suffix == ".chat":
        return b'"chat"' in file_head(path, (".chat",), 4096)
    head = file_head(path, (".json",), 4096)
    return path.parent.parent.name == "workspace-sessions" and b'"sessionId"' in head and b'"history"' in head


def _iso_ms(v: Any) -> str | None:
    if isinstance(v, str) and v.isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1e14:
        return v if isinstance(v, str) and v else None
    return datetime.fromtimestamp(v / 1000, UTC).isoformat().replace("+00:00", "Z")


def _mtime(path: Path) -> str | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat().replace("+00:00", "Z")
    except OSError:
        return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "").strip()
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return "" if content is None else compact_json(content, 4000)


def _index(ws_dir: Path) -> list[dict]:
    """The objects of a workspace's ``sessions.json`` index (a list; ``[]`` when
    unreadable); a reparse reads the vault's newest version (``VIEW``)."""
    p = ws_dir / INDEX
    try:
        entries = orjson.loads(VIEW.get(str(p), p).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def ws_hash(workspace: str) -> str:
    """The folder name Kiro gives a workspace's logs: SHA-256 of its path, 32 hex."""
    return hashlib.sha256(workspace.encode("utf-8")).hexdigest()[:32]


def _exec_logs(root: Path, workspace: str | None) -> dict[str, dict]:
    """executionId → execution log of a workspace (``{}`` without one): the logs on
    disk and those a reparse reads from the vault (``VIEW``: sidecars of their
    sessions, ``exec_log_sidecars``), read through ``json_object`` (``VIEW`` applies)."""
    if not workspace:
        return {}
    folder = root / ws_hash(workspace) / EXEC_SUBDIR
    out: dict[str, dict] = {}
    try:  # (a symlink out of ``root`` is not read: discovery refuses it too)
        files = {
            p
            for p in folder.iterdir()
            if not p.name.startswith(".") and p.is_file() and (not p.is_symlink() or _inside(root, p))
        }
    except OSError:
        files = set()
    # a reparse with the folder gone reads the vault's newest of each (``VIEW``)
    files |= {Path(k) for k in VIEW if os.path.dirname(k) == str(folder)}
    for p in sorted(files):
        log = json_object(p)
        eid = nonempty(log.get("executionId"))
        if eid:
            out[eid] = log
    return out


def _actions(log: dict, e: dict) -> list[dict]:
    out: list[dict] = []
    for a in log.get("actions") or []:
        if not isinstance(a, dict):
            continue
        kind = nonempty(a.get("actionType")) or "unknown"
        if kind == "say":
            msg = nonempty(dict_at(a, "output").get("message"))
            if msg:
                out.append(dict(e, part=len(out), role="assistant", kind="message", text=msg))
            continue
        inp = a.get("input")
        out.append(
            dict(
                e,
                part=len(out),
                role="assistant",
                kind="tool_call",
                native_id=nonempty(a.get("actionId")),
                tool_name=kind,
                text=compact_json(inp) if inp is not None else "",
            )
        )
        result = nonempty(dict_at(a, "output").get("message"))
        if result:
            out.append(
                dict(
                    e,
                    part=len(out),
                    role="tool",
                    kind="tool_result",
                    native_id=nonempty(a.get("actionId")),
                    tool_name=kind,
                    text=result,
                )
            )
    return out


def _user_entry(text: str, e: dict) -> dict:
    if text.startswith(_CONTEXT_PREFIXES):
        return dict(e, role="system", kind="meta", tool_name="context", text=text)
    if text.startswith(_WRAP[0]):
        text = text.removeprefix(_WRAP[0]).removesuffix(_WRAP[1]).strip()
    return dict(e, role="user", kind="message", text=text)


def parse_workspace_session(doc: Any, path: Path, state: dict, idle: bool) -> list[dict]:
    """Entry dicts of one workspace-session document (module doc). Raises ValueError
    for a document without a ``history`` list."""
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise ValueError("not a Kiro IDE session (no history list)")
    sid = nonempty(doc.get("sessionId")) or path.stem
    index = next((x for x in _index(path.parent) if x.get("sessionId") == sid), {})
    workspace = nonempty(doc.get("workspaceDirectory")) or nonempty(index.get("workspaceDirectory"))
    ts = _iso_ms(index.get("dateCreated")) or _mtime(path)
    logs = _exec_logs(path.parent.parent.parent, workspace)
    src = str(path)
    out: list[dict] = []
    waiting = False
    for i, h in enumerate(doc["history"]):
        if not isinstance(h, dict):
            continue
        msg = dict_at(h, "message")
        role = str(msg.get("role") or "")
        mid = nonempty(msg.get("id"))
        e = {
            "agent": AGENT,
            "session_id": sid,
            "native_id": mid,
            "project_dir": workspace,
            "ts": ts,
            "part": 0,
            "source_path": src,
            "source_offset": i,
            "record_id": f"{sid}:{mid or i}",
        }
        text = _text(msg.get("content"))
        if role == "user":
            out.append(_user_entry(text, e))
        elif role == "assistant":
            eid = nonempty(h.get("executionId"))
            got = _actions(logs[eid], e) if eid in logs else []
            waiting = waiting or bool(eid and eid not in logs)
            if not any(x["kind"] == "message" for x in got):
                completions = [
                    str(p.get("completion")).strip()
                    for p in h.get("promptLogs") or []
                    if isinstance(p, dict) and nonempty(p.get("completion"))
                ]
                fallback = text or "\n\n".join(completions)
                if fallback:
                    got.insert(0, dict(e, role="assistant", kind="message", text=fallback))
                    for j, x in enumerate(got):
                        x["part"] = j
            out += got
        elif role == "tool":
            out.append(dict(e, role="tool", kind="tool_result", text=text))
        else:
            out.append(dict(e, role="system", kind="meta", tool_name=role or "unknown", text=text))
    title = nonempty(doc.get("title")) or nonempty(index.get("title"))
    if title:
        out.append(title_entry(AGENT, sid, title, src, ts=ts, project_dir=workspace))
    if waiting and not idle:
        state["complete"] = False  # an execution log still to come: look again next run
    return out


def _workspace_of(root: Path, hash_: str) -> str | None:
    """The workspace whose hash names a ``.chat`` file's folder (from the indexes, on
    disk and those a reparse reads from the vault: ``VIEW``)."""
    base = root / "workspace-sessions"
    try:
        found = set(base.iterdir())
    except OSError:
        found = set()
    found |= {Path(k).parent for k in VIEW if k.endswith(INDEX) and Path(k).parent.parent == base}
    for ws in sorted(found):
        for x in _index(ws):
            w = nonempty(x.get("workspaceDirectory"))
            if w and ws_hash(w) == hash_:
                return w
    return None


def parse_chat(doc: Any, path: Path) -> list[dict]:
    """Entry dicts of one ``.chat`` document (module doc). Raises ValueError for a
    document without a ``chat`` list."""
    if not isinstance(doc, dict) or not isinstance(doc.get("chat"), list):
        raise ValueError("not a Kiro IDE chat file (no chat list)")
    sid = f"{path.parent.name}:{path.stem}"
    meta = dict_at(doc, "metadata")
    model = nonempty(meta.get("modelId"))
    ts = _iso_ms(meta.get("startTime")) or _mtime(path)
    project = _workspace_of(path.parent.parent, path.parent.name)
    src = str(path)
    out: list[dict] = []
    for i, m in enumerate(doc["chat"]):
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "")
        text = _text(m.get("content"))
        h = hashlib.sha256(orjson.dumps([role, m.get("content")])).hexdigest()[:12]
        e = {
            "agent": AGENT,
            "session_id": sid,
            "project_dir": project,
            "ts": ts,
            "part": 0,
            "source_path": src,
            "source_offset": i,
            "record_id": f"{sid}:{i}:{h}",
        }
        if role == "human":
            out.append(_user_entry(text, e))
        elif role == "bot":
            if text == "I will follow these instructions.":
                out.append(dict(e, role="system", kind="meta", tool_name="context", text=text))
            else:
                out.append(dict(e, role="assistant", kind="message", model=model, text=text))
        elif role == "tool":
            out.append(dict(e, role="tool", kind="tool_result", text=text))
        else:
            out.append(dict(e, role="system", kind="meta", tool_name=role or "unknown", text=text))
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one session document whole when it changed; the index (a sidecar) whole,
    for the vault, with no entries."""
    if sidecar.is_sidecar(file):
        return sidecar.read_sidecar(file, wm, PARSER_VERSION, batch_bytes)
    path = file.path
    if path.suffix == ".chat":
        return read_document(
            file, wm, PARSER_VERSION, lambda raw, doc, state, idle: parse_chat(doc, path), batch_bytes
        )
    return read_document(
        file,
        wm,
        PARSER_VERSION,
        lambda raw, doc, state, idle: parse_workspace_session(doc, path, state, idle),
        batch_bytes,
    )

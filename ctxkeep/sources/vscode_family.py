"""The Cline family's sources (Cline, Roo Code, Kilo Code): one factory,
``ExtensionSource``, and the shared reader of their task folders.

These VS Code extensions keep one folder per task in the editor's global storage:
``<user dir>/globalStorage/<extension id>/tasks/<task id>/`` with

- ``api_conversation_history.json``: the Anthropic ``MessageParam[]`` sent to the
  model (``{role, content: string | blocks}``; blocks ``text``, ``image``,
  ``tool_use {id, name, input}``, ``tool_result {tool_use_id, content}``; Roo/Kilo's
  ``ApiMessage`` adds ``ts`` (ms), ``isSummary``, ``id`` and role-less reasoning items
  ``{type: "reasoning", summary[], encrypted_content}``) — rewritten after each turn;
- ``ui_messages.json``: ``ClineMessage[] {ts (ms), type: ask|say, ask?, say?, text?,
  reasoning?, partial?, modelInfo?}``; a ``say: api_req_started`` message's ``text`` is
  JSON ``ClineApiReqInfo {request, tokensIn, tokensOut, cacheWrites, cacheReads, cost}``
  — one per API request (``subagent_usage``: the same counts for sub-agents);
- ``task_metadata.json`` (Cline ≥ 3.x; Roo Code and Kilo Code keep the same file):
  ``{files_in_context [{path, record_state (active | stale), record_source (read_tool |
  user_edited | cline_edited | file_mentioned), cline_read_date, cline_edit_date,
  user_edit_date}], model_usage [{ts, model_id, model_provider_id, mode}],
  environment_history [{ts, os_name, os_version, os_arch, host_name, host_version,
  cline_version}]}`` (cline/cline ``src/core/context/context-tracking/
  ContextTrackerTypes.ts``: ``TaskMetadata``), rewritten whole as the task goes on. The
  vault keeps it as a sidecar of the task's ``api_conversation_history.json``
  (``readers.sidecar``: each version, no entries; ``METADATA``), and the reader of
  ``ui_messages.json`` takes the models from it through ``_util.json_object``, so a
  reparse with the task folder gone reads the vault's newest version.

(cline/cline ``src/shared/ExtensionMessage.ts``: ``ClineMessage``,
``ClineApiReqInfo``; Roo Code and Kilo Code, forks of Cline, keep the same files.) The ``<user dir>`` is
``~/.config/<App>/User`` on Linux, ``~/Library/Application Support/<App>/User`` on
macOS and ``%APPDATA%\\<App>\\User`` on Windows, for the apps Code, Code - Insiders,
VSCodium, Cursor and Windsurf.

Mapping: the conversation comes from ``api_conversation_history.json`` (one entry per
block); ``ui_messages.json`` adds only usage (one row per ``api_req_started``,
``input_tokens = tokensIn``, ``output_tokens = tokensOut``, ``cache_creation_tokens =
cacheWrites``, ``cache_read_tokens = cacheReads``, ``cost_usd = cost`` (USD, the cost
Cline computed for the request); model from ``task_metadata.json``
when present) and errors. Entry ids are ``<task>:<index>:<SHA-256 of the message>``, so
a history that was truncated (checkpoint restore, edited message) and then grew again
never collides with the old messages; messages gone from the file are marked
``rewound``. ``ts``: the message's ``ts`` when present, else the task id (a ms
timestamp in Cline) for every message of the task. ``project_dir``: the ``Current
Working/Workspace Directory (…)`` line of the first ``environment_details``.
``source_offset`` is the message's index in the history array (its messages have no id
to find them by in the bytes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import (
    as_float,
    as_int,
    blocks_text,
    compact_json,
    dict_at,
    json_object,
    media_placeholder,
)
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.document import read_document, track_ids
from ctxkeep.timeutil import format_epoch

APPS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
_CWD_RE = re.compile(r"# Current (?:Working|Workspace) Directory \((.+?)\) Files")
HISTORY = "api_conversation_history.json"
UI = "ui_messages.json"
#: a task's metadata file (module doc), a sidecar of its history, and its kind
METADATA = "task_metadata.json"
METADATA_KIND = "task-metadata"


def task_sidecars(task: Path, agent: str) -> list[SourceFile]:
    """The sidecars on disk of the task folder ``task``: its ``METADATA``, tied to the
    task's ``api_conversation_history.json`` (else its ``ui_messages.json``; none
    without either)."""
    meta = task / METADATA
    owner = next((task / n for n in (HISTORY, UI) if (task / n).is_file()), None)
    if owner is None or not meta.is_file():
        return []
    return [SourceFile(agent, meta, sidecar.MODE, sidecar.meta(METADATA_KIND, owner, task=task.name))]


def user_dirs(ctx: DiscoveryContext) -> list[Path]:
    """Every VS Code-family ``User`` dir on Linux, macOS and Windows layouts."""
    home = ctx.home
    bases = [
        Path(ctx.env["XDG_CONFIG_HOME"]) if ctx.env.get("XDG_CONFIG_HOME") else home / ".config",
        home / "Library" / "Application Support",
    ]
    if ctx.env.get("APPDATA"):
        bases.append(Path(ctx.env["APPDATA"]))
    bases.append(home / "AppData" / "Roaming")
    out = []
    for b in bases:
        for app in APPS:
            out.append(b / app / "User")
    return out


def discover_tasks(
    agent: str, ext_ids: tuple[str, ...], ctx: DiscoveryContext, extra_roots: Sequence[Path] = ()
) -> Discovery:
    """Find ``tasks/*/api_conversation_history.json`` (and ``ui_messages.json``) of the
    extension ids under every user dir, configured dirs (a ``tasks`` dir or an
    extension storage dir) and ``extra_roots``. Searched places are the storage dirs."""
    d = Discovery(agent)
    roots = [u / "globalStorage" / e for u in user_dirs(ctx) for e in ext_ids] + list(extra_roots)
    roots += list(ctx.extra_dirs)
    for r in roots:
        tasks = r if r.name == "tasks" else r / "tasks"
        if not tasks.is_dir():
            continue
        d.searched.append(tasks)
        for t in sorted(tasks.iterdir()):
            for name in (HISTORY, UI):
                p = t / name
                d.add(p, "rewrite", {"task": t.name})
            for side in task_sidecars(t, agent):
                d.add(side.path, sidecar.MODE, side.meta)
    if not d.searched:
        d.searched = [user_dirs(ctx)[0] / "globalStorage" / ext_ids[0] / "tasks"]
        d.reason = "no " + " / ".join(ext_ids) + " task folder in any VS Code, Cursor or Windsurf user dir"
    elif not d.files:
        d.reason = f"no tasks/*/{HISTORY} found"
    return d


def matches_task_file(path: Path, ext_ids: tuple[str, ...]) -> bool:
    """True for a task file of one of ``ext_ids`` (by path) given with ``--path``."""
    if path.name not in (HISTORY, UI):
        return False
    parts = [p.lower() for p in path.parts]
    return any(e.lower() in parts for e in ext_ids)


def _ms_iso(ms: Any) -> str | None:
    v = as_int(ms)
    if v is None or v <= 0:
        return None
    if v < 10**11:  # seconds
        v *= 1000
    try:
        return format_epoch(v / 1000)
    except (OverflowError, OSError, ValueError):
        return None


def _msg_hash(m: dict) -> str:
    return hashlib.sha256(orjson.dumps(m.get("content"), option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]


def parse_history(agent: str, doc: Any, task: str, src: str, state: dict, old_ids: list[str]) -> list[dict]:
    """Entries of ``api_conversation_history.json`` (see module doc)."""
    if not isinstance(doc, list):
        raise ValueError("api_conversation_history.json is not a list of messages")
    task_ts = _ms_iso(int(task)) if task.isdigit() else None
    proj = None
    out: list[dict] = []
    ids: list[str] = []
    for i, m in enumerate(doc):
        if not isinstance(m, dict):
            continue
        mid = f"{task}:{i}:{_msg_hash(m)}"
        ids.append(mid)
        role = m.get("role") if m.get("role") in ("user", "assistant") else "system"
        content = m.get("content")
        if proj is None:
            mm = _CWD_RE.search(blocks_text(content))
            if mm:
                proj = mm.group(1).strip()
        base = {
            "agent": agent,
            "session_id": task,
            "native_id": str(i),
            "message_id": mid,
            "ts": _ms_iso(m.get("ts")) or task_ts,
            "source_path": src,
            "source_offset": i,
            "record_id": mid,
        }
        kind_msg = "summary" if m.get("isSummary") else "message"
        parts: list[dict] = []
        if m.get("type") == "reasoning" and "role" not in m:
            # Roo/Kilo keep reasoning items (OpenAI Responses style) in the history
            summ_v = m.get("summary")
            summ = summ_v if isinstance(summ_v, list) else []
            txt = "\n".join(str(x.get("text") or "") for x in summ if isinstance(x, dict)) or str(
                m.get("text") or ""
            )
            parts.append(dict(base, role="assistant", kind="thinking", text=txt))
        elif isinstance(content, str):
            parts.append(dict(base, role=role, kind=kind_msg, text=content))
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                t = b.get("type")
                if t == "text":
                    parts.append(dict(base, role=role, kind=kind_msg, text=str(b.get("text") or "")))
                elif t == "image":
                    src_ = b.get("source") or {}
                    parts.append(
                        dict(
                            base,
                            role=role,
                            kind=kind_msg,
                            text=media_placeholder(
                                "image", src_.get("media_type"), len(src_.get("data") or "")
                            ),
                        )
                    )
                elif t == "tool_use":
                    parts.append(
                        dict(
                            base,
                            role="assistant",
                            kind="tool_call",
                            tool_name=b.get("name"),
                            native_id=b.get("id"),
                            text=compact_json(b.get("input")),
                        )
                    )
                elif t == "tool_result":
                    txt = blocks_text(b.get("content"))
                    parts.append(
                        dict(
                            base,
                            role="tool",
                            kind="tool_result",
                            native_id=b.get("tool_use_id"),
                            text=("[error] " + txt) if b.get("is_error") else txt,
                        )
                    )
                elif t in ("thinking", "reasoning"):
                    parts.append(
                        dict(
                            base,
                            role="assistant",
                            kind="thinking",
                            text=str(b.get("thinking") or b.get("text") or ""),
                        )
                    )
                else:
                    parts.append(
                        dict(base, role=role, kind="meta", tool_name=str(t), text=compact_json(b, 2000))
                    )
        if not parts:
            parts.append(dict(base, role=role, kind="meta", text=""))
        for j, e in enumerate(parts):
            e["part"] = j
        out.extend(parts)
    for e in out:
        e["project_dir"] = proj
    state["project_dir"] = proj
    track_ids(state, agent, task, old_ids, ids)
    return out


def _model_at(usage_list: list, ts: int) -> str | None:
    best = None
    for u in usage_list:
        if isinstance(u, dict) and (as_int(u.get("ts")) or 0) <= ts and u.get("model_id"):
            best = u["model_id"]
    return best


def parse_ui(agent: str, doc: Any, task: str, src: str, metadata: dict | None) -> list[dict]:
    """Usage rows (``api_req_started``) and errors of ``ui_messages.json``."""
    if not isinstance(doc, list):
        raise ValueError("ui_messages.json is not a list of messages")
    usage_list = (metadata or {}).get("model_usage") or []
    out: list[dict] = []
    for m in doc:
        if not isinstance(m, dict) or m.get("partial"):
            continue
        ts_ms = as_int(m.get("ts")) or 0
        base = {
            "agent": agent,
            "session_id": task,
            "native_id": str(ts_ms),
            "ts": _ms_iso(ts_ms),
            "source_path": src,
            "source_offset": 0,
            "record_id": f"{task}:ui:{ts_ms}:{m.get('say') or m.get('ask')}",
            "part": 0,
            "role": "system",
            "kind": "meta",
        }
        say = m.get("say")
        mi = dict_at(m, "modelInfo")
        if say in ("api_req_started", "subagent_usage") and isinstance(m.get("text"), str):
            try:
                info = orjson.loads(m["text"])
            except orjson.JSONDecodeError:
                continue
            if not isinstance(info, dict) or not any(k in info for k in ("tokensIn", "tokensOut")):
                continue
            out.append(
                dict(
                    base,
                    tool_name="api_req" if say == "api_req_started" else say,
                    text="",
                    model=mi.get("modelId") or (_model_at(usage_list, ts_ms) if usage_list else None),
                    input_tokens=as_int(info.get("tokensIn")) or 0,
                    output_tokens=as_int(info.get("tokensOut")) or 0,
                    cache_creation_tokens=as_int(info.get("cacheWrites")) or 0,
                    cache_read_tokens=as_int(info.get("cacheReads")) or 0,
                    cost_usd=as_float(info.get("cost")),
                    usage_key=f"{agent}:{task}:{ts_ms}",
                )
            )
        elif say in ("error", "api_req_failed", "diff_error") or m.get("ask") == "api_req_failed":
            out.append(dict(base, tool_name=str(say or m.get("ask")), text=str(m.get("text") or "")))
    return out


def read_task_file(
    agent: str, parser_version: int, file: SourceFile, wm: Watermark | None, batch_bytes: int
) -> Iterator[Batch]:
    """Read one task file whole when its hash changed (``readers.document.read_document``);
    a sidecar (``METADATA``) whole, for the vault, with no entries."""
    if sidecar.is_sidecar(file):
        return sidecar.read_sidecar(file, wm, parser_version, batch_bytes)
    task = file.meta.get("task") or file.path.parent.name
    src = str(file.path)
    old_ids = list(
        (wm.state.get("ids") or []) if wm is not None and wm.parser_version == parser_version else []
    )

    def parse_doc(raw, doc, state, idle):
        if file.path.name == UI:
            # (``json_object``: ``{}`` when missing or not an object; a reparse reads
            # the vault's newest version, ``readers.jsonl.VIEW``)
            meta = json_object(file.path.parent / METADATA)
            return parse_ui(agent, doc, task, src, meta or None)
        return parse_history(agent, doc, task, src, state, old_ids)

    return read_document(file, wm, parser_version, parse_doc, batch_bytes)


def _no_roots(ctx: DiscoveryContext) -> list[Path]:
    return []


@dataclass(frozen=True)
class ExtensionSource:
    """A source (``contract.Source``, with ``matches``) for one extension of the Cline
    family: its task folders in every VS Code-family user dir (``discover_tasks``),
    read whole when they change (``read_task_file``).

    ``extra_roots(ctx)`` adds data dirs outside the editors (the Cline CLI's);
    ``data_dir_name`` claims ``--path`` task files under a folder of that name too.
    Fields are spelled like a source module's constants (``AGENT`` …) so that this
    object and a module satisfy the same protocol.
    """

    AGENT: str
    EXTENSION_IDS: tuple[str, ...]
    PARSER_VERSION: int = 2  # 2: the logged request cost (a re-read fills it)
    MODE: Mode = "rewrite"
    extra_roots: Callable[[DiscoveryContext], list[Path]] = _no_roots
    data_dir_name: str | None = None

    def discover(self, ctx: DiscoveryContext) -> Discovery:
        """Find this extension's task files in every VS Code-family user dir."""
        return discover_tasks(self.AGENT, self.EXTENSION_IDS, ctx, self.extra_roots(ctx))

    def matches(self, path: Path) -> bool:
        """True for an ``api_conversation_history.json``/``ui_messages.json`` under
        this extension's storage dir (or its ``data_dir_name``)."""
        return matches_task_file(path, self.EXTENSION_IDS) or (
            self.data_dir_name is not None and path.name in (HISTORY, UI) and self.data_dir_name in path.parts
        )

    def sidecars_of(self, path: Path) -> list[SourceFile]:
        """The sidecars of the task file at ``path`` (``task_sidecars``: its
        ``task_metadata.json``), for an ``ingest --path`` of it."""
        return task_sidecars(path.parent, self.AGENT) if path.name in (HISTORY, UI) else []

    def read(
        self, file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]:
        """Read one task file whole when it changed; its metadata (a sidecar) whole."""
        return read_task_file(self.AGENT, self.PARSER_VERSION, file, wm, batch_bytes)

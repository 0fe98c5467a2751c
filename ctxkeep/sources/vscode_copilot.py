"""GitHub Copilot Chat in VS Code (the editor's chat panel: Ask, Edit and Agent modes).

Where: the VS Code ``User`` dirs of Code, Code - Insiders and VSCodium
(``~/.config/<App>/User`` on Linux, ``~/Library/Application Support/<App>/User`` on
macOS, ``%APPDATA%\\<App>\\User`` on Windows; ``$VSCODE_COPILOT_DIR`` names one
``User`` dir instead; agentsview 0.46 ``internal/parser/types.go``
AgentVSCodeCopilot):

- ``workspaceStorage/<hash>/chatSessions/<session>.json`` / ``.jsonl``: the chats of a
  window with a folder open; ``workspaceStorage/<hash>/workspace.json`` ``{folder |
  workspace: "file:///…"}`` names the folder (the project);
- ``globalStorage/emptyWindowChatSessions/<session>.json`` / ``.jsonl``: chats of an
  empty window (no project).

Format facts (VS Code ``src/vs/workbench/contrib/chat/common/model/chatModel.ts``
``ISerializableChatData`` v3 and ``objectMutationLog.ts``, as public readers describe
them: agentsview 0.46 ``vscode_copilot.go``; a Copilot token importer's "Chat Session
Store — File Parsing Algorithm"; VS Code session-log readers in Swift and Rust):

- a ``.json`` file is the whole session ``{version, sessionId, creationDate (epoch
  ms), lastMessageDate, customTitle?, requests: [request]}``, rewritten in place (older
  VS Code);
- a ``.jsonl`` file (newer VS Code) is an object mutation log, one entry a line
  ``{kind, k?, v?, i?}``: ``0`` Initial (``v`` the whole state), ``1`` Set (the value at
  key path ``k``, of property names and array indexes), ``2`` Push (at the array at
  ``k``: truncate to length ``i`` when given, then append ``v``'s items), ``3`` Delete
  (``k``); VS Code rewrites it as one snapshot when the log grows (compaction);
- a request: ``{requestId, timestamp (epoch ms), modelId ("copilot/<model>"), message
  {text, parts}, response: [item], result {timings, metadata {resolvedModel,
  promptTokens, outputTokens, toolCallRounds}}, modelState {value: 0 pending, 1
  complete, 2 cancelled, 3 failed, 4 needs input}, promptTokens?, completionTokens?,
  agent {id, name}}``;
- response items: no ``kind`` (Markdown ``{value}``), ``markdownContent`` ``{content
  {value}}``, ``thinking`` ``{value}``, ``inlineReference`` ``{inlineReference {fsPath
  | path | external}}``, ``toolInvocationSerialized`` ``{toolId, toolCallId,
  invocationMessage (string or {value}), pastTenseMessage, toolSpecificData {kind,
  command | commandLine.original}, resultDetails {input, output: [{value}]}?,
  isComplete}``; ``prepareToolInvocation``, ``undoStop``, ``codeblockUri``,
  ``textEditGroup`` and the like carry no conversation text.

Usage: per request, ``promptTokens``/``completionTokens`` (newer) else
``result.metadata.promptTokens``/``outputTokens``: the prompt is the whole context of
the turn with no cache split (stored as input tokens); the model is
``result.metadata.resolvedModel`` else ``modelId`` without its ``copilot/`` prefix
(``usage_key`` ``vscode-copilot:<session>:<requestId>``; a figure that grows while the
turn streams is kept at its largest). Sub-agents (``runSubagent``) are tool calls;
their own turns are not in the session file.

Entries: the prompt is ``user``/``message`` (``record_id``
``<session>:<requestId>:prompt``); the response a Markdown ``assistant``/``message``,
``thinking`` entries, a ``tool_call`` per tool invocation (the invocation message and
command as its JSON text) and a ``tool_result`` (the result's output, else its past-
tense message). The response's entries carry ``<session>:<requestId>:<hash of the
response>`` so a turn read again after it grew is new and the shorter copy is marked
``rewound`` (``readers.document.track_ids``); a request still pending is held back
(the document is marked incomplete) unless the file is idle. Times: the request's
``timestamp`` (epoch ms). The session's ``customTitle`` is a ``meta`` entry; the
ledger's agent version is the session format's ``version``.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at, epoch_iso, nonempty
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

AGENT = "vscode-copilot"
PARSER_VERSION = 1
MODE: Mode = "rewrite"

APPS = ("Code", "Code - Insiders", "VSCodium")
#: response item kinds that carry no conversation text
SILENT_KINDS = frozenset(
    {
        "prepareToolInvocation",
        "undoStop",
        "codeblockUri",
        "textEditGroup",
        "notebookEditGroup",
        "progressTask",
    }
)


def user_dirs(ctx: DiscoveryContext) -> list[Path]:
    """``$VSCODE_COPILOT_DIR`` when set, else every ``User`` dir of ``APPS`` on the
    Linux, macOS and Windows layouts."""
    env = ctx.env.get("VSCODE_COPILOT_DIR")
    if env:
        return [Path(env).expanduser()]
    bases = [
        Path(ctx.env["XDG_CONFIG_HOME"]) if ctx.env.get("XDG_CONFIG_HOME") else ctx.home / ".config",
        ctx.home / "Library" / "Application Support",
        Path(ctx.env["APPDATA"]) if ctx.env.get("APPDATA") else ctx.home / "AppData" / "Roaming",
    ]
    return [b / app / "User" for b in bases for app in APPS]


def workspace_folder(ws_dir: Path) -> str | None:
    """The folder a ``workspaceStorage/<hash>/workspace.json`` names, as a path."""
    try:
        doc = orjson.loads((ws_dir / "workspace.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    uri = (doc.get("folder") or doc.get("workspace")) if isinstance(doc, dict) else None
    if not isinstance(uri, str) or not uri:
        return None
    if uri.startswith("file://"):
        path = urllib.parse.unquote(urllib.parse.urlparse(uri).path)
        return path[1:] if len(path) > 2 and path[0] == "/" and path[2] == ":" else path
    return uri


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find chat sessions under every ``User`` dir (and configured ``User`` dirs)."""
    d = Discovery(AGENT)
    for user in [*user_dirs(ctx), *ctx.extra_dirs]:
        ws = user / "workspaceStorage"
        d.searched.append(ws)
        if ws.is_dir():
            for chats in sorted_paths(ws.glob("*/chatSessions")):
                project = workspace_folder(chats.parent)
                for p in sorted_paths(chats.glob("*.json*")):
                    if p.suffix in (".json", ".jsonl"):
                        d.add(p, MODE, {"project": project} if project else {})
        d.add_glob(user / "globalStorage" / "emptyWindowChatSessions", ["*.json", "*.jsonl"], MODE)
    d.explain_empty(user_dirs(ctx)[0], "no Copilot chatSessions in any VS Code User dir")
    return d


def matches(path: Path) -> bool:
    """True for a session file under ``chatSessions`` or ``emptyWindowChatSessions``."""
    return path.suffix in (".json", ".jsonl") and path.parent.name in (
        "chatSessions",
        "emptyWindowChatSessions",
    )


# ---------------------------------------------------------------- the mutation log


def _child(node: Any, key: Any) -> Any:
    if isinstance(node, dict):
        return node.get(str(key)) if not isinstance(key, str) else node.get(key)
    if isinstance(node, list) and isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(node):
        return node[key]
    return None


def _parent(state: Any, keys: list) -> Any:
    node = state
    for k in keys[:-1]:
        node = _child(node, k)
        if node is None:
            return None
    return node


def replay(text: str | bytes, bad: list | None = None) -> tuple[Any, int, int]:
    """The state a mutation log describes, the number of entries applied and of lines
    skipped (not JSON, not an entry, a path that does not exist: VS Code's readers skip
    them too). A line that is not JSON is also appended to ``bad`` as ``(byte offset,
    raw bytes, reason)`` (the reader quarantines it). Raises ValueError when no Initial
    entry comes first."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    state: Any = None
    applied = skipped = 0
    pos = 0
    for line in data.split(b"\n"):
        start = pos
        pos += len(line) + 1
        if not line.strip():
            continue
        try:
            op = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            skipped += 1
            if bad is not None:
                bad.append((start, line, f"mutation log line is not JSON (skipped by the replay): {e}"))
            continue
        kind = op.get("kind") if isinstance(op, dict) else None
        if kind == 0:
            state = op.get("v")
            applied += 1
            continue
        keys = op.get("k") if isinstance(op, dict) else None
        if state is None or not isinstance(keys, list) or not keys:
            skipped += 1
            continue
        parent, last = _parent(state, keys), keys[-1]
        settable = (isinstance(parent, dict) and isinstance(last, str)) or (
            isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent)
        )
        if kind == 1 and settable:
            parent[last] = op.get("v")
        elif kind == 2 and isinstance(arr := _child(parent, last), list):
            i = op.get("i")
            if isinstance(i, int) and not isinstance(i, bool) and i >= 0:
                del arr[i:]
            if isinstance(op.get("v"), list):
                arr.extend(op["v"])
        elif kind == 3 and isinstance(parent, dict) and isinstance(last, str):
            parent.pop(last, None)
        else:
            skipped += 1
            continue
        applied += 1
    if state is None:
        raise ValueError("no Initial (kind 0) entry: not a VS Code chat session log")
    return state, applied, skipped


# ---------------------------------------------------------------- requests → entries


def _inv_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("value"), str):
        return v["value"]
    return ""


def _ref_text(item: dict) -> str:
    ref = dict_at(item, "inlineReference")
    loc = dict_at(ref, "uri") or ref  # a Location {uri, range} or a URI
    path = loc.get("fsPath") or loc.get("path") or loc.get("external") or ""
    return f"`{str(path).removeprefix('file://')}`" if path else ""


def _call_args(item: dict) -> str:
    args: dict[str, Any] = {}
    msg = _inv_text(item.get("invocationMessage"))
    if msg:
        args["message"] = msg
    data = dict_at(item, "toolSpecificData")
    cmd = data.get("command") or dict_at(data, "commandLine").get("original")
    if isinstance(cmd, str) and cmd:
        args["command"] = cmd
    details = dict_at(item, "resultDetails")
    if details.get("input") is not None:
        args["input"] = details["input"]
    return compact_json(args) if args else ""


def _result_text(item: dict) -> str:
    details = item.get("resultDetails")
    outs = details.get("output") if isinstance(details, dict) else None
    if isinstance(outs, list):
        texts = [o["value"] for o in outs if isinstance(o, dict) and isinstance(o.get("value"), str)]
        if texts:
            return "\n".join(texts)
    return _inv_text(item.get("pastTenseMessage"))


def request_entries(req: dict, sid: str, base: dict) -> list[dict]:
    """Entry dicts of one request (see the module doc)."""
    rid = nonempty(req.get("requestId")) or f"req{base['source_offset']}"
    ts = epoch_iso(req.get("timestamp"), 0.001) or base["ts"]
    b = dict(base, ts=ts)
    out: list[dict] = []
    prompt = nonempty(dict_at(req, "message").get("text"))
    if prompt:
        out.append(
            dict(
                b,
                record_id=f"{sid}:{rid}:prompt",
                message_id=f"{sid}:{rid}:prompt",
                part=0,
                role="user",
                kind="message",
                text=prompt.strip(),
            )
        )
    resp: list = req["response"] if isinstance(req.get("response"), list) else []
    meta = dict_at(dict_at(req, "result"), "metadata")
    digest = hashlib.sha256(
        orjson.dumps([resp, req.get("result"), req.get("completionTokens")], option=orjson.OPT_SORT_KEYS)
    ).hexdigest()[:12]
    arid = f"{sid}:{rid}:{digest}"
    model = (
        nonempty(meta.get("resolvedModel"))
        or (nonempty(req.get("modelId")) or "").removeprefix("copilot/")
        or None
    )
    a = dict(b, record_id=arid, message_id=arid, model=model)
    texts: list[str] = []
    tools: list[dict] = []

    def flush() -> None:
        body = "".join(texts).strip()
        if body:
            tools.append(dict(a, role="assistant", kind="message", text=body))
        texts.clear()

    for item in resp:
        if not isinstance(item, dict):
            continue
        kind = item.get("kind")
        if kind is None or kind == "markdownVuln":
            texts.append(
                _inv_text(item.get("value")) if not isinstance(item.get("value"), str) else item["value"]
            )
        elif kind == "markdownContent":
            texts.append(_inv_text(item.get("content")))
        elif kind == "inlineReference":
            texts.append(_ref_text(item))
        elif kind == "thinking":
            flush()
            value = item.get("value")
            value = (
                "".join(v for v in value if isinstance(v, str))
                if isinstance(value, list)
                else _inv_text(value)
            )
            if value.strip():
                tools.append(dict(a, role="assistant", kind="thinking", text=value))
        elif kind == "toolInvocationSerialized":
            flush()
            name, cid = nonempty(item.get("toolId")), nonempty(item.get("toolCallId"))
            tools.append(
                dict(
                    a,
                    role="assistant",
                    kind="tool_call",
                    tool_name=name,
                    native_id=cid,
                    text=_call_args(item),
                )
            )
            result = _result_text(item)
            if result or item.get("isComplete"):
                tools.append(
                    dict(a, role="tool", kind="tool_result", tool_name=name, native_id=cid, text=result)
                )
        elif kind in SILENT_KINDS:
            continue
        elif isinstance(item.get("value"), str):
            texts.append(item["value"])
    flush()
    prompt_t = as_int(req.get("promptTokens"))
    out_t = as_int(req.get("completionTokens"))
    if prompt_t is None and out_t is None:
        prompt_t, out_t = as_int(meta.get("promptTokens")), as_int(meta.get("outputTokens"))
    if (prompt_t or 0) > 0 or (out_t or 0) > 0:
        usage = {
            "input_tokens": prompt_t or 0,
            "output_tokens": out_t or 0,
            "usage_key": f"vscode-copilot:{sid}:{rid}",
        }
        target = next((e for e in tools if e["kind"] == "message"), None)
        if target is None:
            tools.append(dict(a, role="system", kind="meta", tool_name="usage", text="", **usage))
        else:
            target.update(usage)
    for i, e in enumerate(tools):
        e["part"] = i
    return out + tools


def parse_session(doc: Any, src: str, state: dict, old_ids: list[str], idle: bool) -> list[dict]:
    """Entry dicts of one session state (a ``.json`` document or a replayed log).
    Raises ValueError for a state without a ``requests`` list."""
    if not isinstance(doc, dict) or not isinstance(doc.get("requests"), list):
        raise ValueError("not a VS Code chat session (no requests list)")
    set_version(state, str(doc["version"]) if as_int(doc.get("version")) is not None else None)
    sid = nonempty(doc.get("sessionId")) or Path(src).stem
    base = {
        "agent": AGENT,
        "session_id": sid,
        "project_dir": state.get("project"),
        "ts": epoch_iso(doc.get("creationDate"), 0.001),
        "source_path": src,
    }
    out: list[dict] = []
    for i, req in enumerate(doc["requests"]):
        if not isinstance(req, dict):
            continue
        if dict_at(req, "modelState").get("value") == 0 and not idle:
            state["complete"] = False  # still streaming: read again when it settles
            continue
        out += request_entries(req, sid, dict(base, source_offset=i))
    title = nonempty(doc.get("customTitle"))
    if title:
        out.append(
            dict(
                base,
                record_id=f"{sid}:title:{title}",
                part=0,
                role="system",
                kind="meta",
                tool_name="title",
                text=title,
                source_offset=0,
            )
        )
    track_ids(
        state, AGENT, sid, old_ids, list(dict.fromkeys(e["message_id"] for e in out if e.get("message_id")))
    )
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one session file whole when it changed (a ``.jsonl`` log is replayed)."""
    src = str(file.path)
    old = wm.state if wm is not None and wm.parser_version == PARSER_VERSION else {}
    old_ids = list(old.get("ids") or [])
    project = file.meta.get("project")
    is_log = file.path.suffix == ".jsonl"

    def parse(raw: bytes, doc: Any, state: dict, idle: bool) -> list[dict]:
        if project:
            state["project"] = project
        if is_log:
            doc, _, _ = replay(raw, state.setdefault("_set_aside", []))
        out = parse_session(doc, src, state, old_ids, idle)
        state.pop("project", None)
        return out

    return read_document(file, wm, PARSER_VERSION, parse, batch_bytes, json_doc=not is_log)

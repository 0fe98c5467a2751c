"""iFlow CLI session transcripts.

Where: ``$IFLOW_DIR`` else ``~/.iflow/projects`` (all platforms, under the user's home;
agentsview 0.46 ``internal/parser/types.go`` AgentIflow, ``DefaultDirs .iflow/projects``,
env ``IFLOW_DIR``): one folder per project, ``<projects>/<project>/session-<uuid>.jsonl``,
appended as the session runs (agentsview 0.46 ``iflow_provider.go``: a transcript is a
file named ``session-*.jsonl``).

Format facts (iFlow CLI 1.0 ``version`` "1.0.0", as agentsview 0.46's
``internal/parser/iflow.go`` and its ``testdata/iflow/session-*.jsonl`` read it): each
line is a Claude Code-shaped record ``{uuid, parentUuid, sessionId ("session-<uuid>"),
timestamp (ISO-8601 UTC), type ("user" | "assistant" | others), isSidechain, userType,
cwd, gitBranch, version, message, toolUseResult?, isMeta?, isCompactSummary?}``.
``message`` is ``{role, content}`` for users (content a string or blocks) and ``{id,
type, role, content [blocks], model, stop_reason, usage {input_tokens, output_tokens}}``
for the assistant. Blocks: ``text``, ``thinking``, ``tool_use {id, name, input}`` and,
in user records, ``tool_result {tool_use_id, content}`` whose content is a string or an
object ``{callId, responseParts {functionResponse {id, name, response {output}}},
resultDisplay}``. iFlow streams the assistant turn as sliding-window snapshots: lines
milliseconds apart under one ``parentUuid`` repeat the ``tool_use`` blocks still active
(``iflow.go`` deduplicateIflowEntries). A ``sessionId`` other than the file's names the
session that spawned this one (agentsview reads it as the parent session). ``usage``
is often all zeros (the test transcript logs 0/0 on every line).

Entries: a tool call's ``record_id`` is ``<session>:tool:<tool_use id>`` so the repeats
of the snapshots are one entry; other blocks are keyed by the line's ``uuid`` and block
index. Usage: one row per assistant line with non-zero tokens (``usage_key``
``iflow:<message.id>``). ``isMeta``/``isCompactSummary`` user lines and the
continuation notices iFlow writes as user text are ``meta``; unknown record types are
``meta`` with the type as ``tool_name`` and reported to the coverage ledger (agent
version: the lines' ``version``); a line without ``cwd`` takes the last one seen.
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources._util import as_int, block_text, compact_json, dict_at, nonempty
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "iflow"
PARSER_VERSION = 1
MODE: Mode = "append"

#: user text iFlow writes itself (agentsview 0.46 ``iflow.go`` isIflowSystemMessage)
_SYSTEM_PREFIXES = (
    "This session is being continued",
    "[Request interrupted",
    "<task-notification>",
    "<command-message>",
    "<command-name>",
    "<local-command-",
)


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<projects>/*/session-*.jsonl`` under ``$IFLOW_DIR`` when set, else
    ``~/.iflow/projects``, and in configured dirs."""
    d = Discovery(AGENT)
    root = ctx.env_dir("IFLOW_DIR", ctx.home / ".iflow" / "projects")
    for base in [root, *ctx.extra_dirs]:
        d.add_glob(base, ["*/session-*.jsonl"], MODE)
    d.explain_empty(root, f"no */session-*.jsonl under {root}")
    return d


def matches(path: Path) -> bool:
    """True for an iFlow ``session-*.jsonl`` given with ``--path``."""
    head = file_head(path, (".jsonl",), 4096)
    return path.name.startswith("session-") and b'"sessionId":"session-' in head.replace(b" ", b"")


def _sid(name: str) -> str:
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    return stem.removeprefix("session-")


def init_state(file: SourceFile) -> dict:
    """The session id: the file name without ``session-`` and ``.jsonl``."""
    return {"sid": _sid(file.path.name)}


def _result_text(content) -> str:
    """A tool_result's content: a string, text blocks, or iFlow's functionResponse
    object (its ``response.output``, else ``resultDisplay``, else the object)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block_text(b) for b in content if isinstance(b, dict))
    if isinstance(content, dict):
        resp = dict_at(dict_at(dict_at(content, "responseParts"), "functionResponse"), "response")
        out = resp.get("output")
        if isinstance(out, str):
            return out
        return nonempty(content.get("resultDisplay")) or compact_json(content, 4000)
    return ""


def _result_name(content) -> str | None:
    if isinstance(content, dict):
        return nonempty(dict_at(dict_at(content, "responseParts"), "functionResponse").get("name"))
    return None


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One iFlow line → its entries (one per content block; see the module doc)."""
    sid = state["sid"]
    kind_of = str(rec.get("type") or "")
    uuid = nonempty(rec.get("uuid"))
    line_sid = nonempty(rec.get("sessionId"))
    parent = line_sid.removeprefix("session-") if line_sid else None
    msg = dict_at(rec, "message")
    if nonempty(rec.get("cwd")):
        state["cwd"] = rec["cwd"]
    if nonempty(rec.get("version")):
        state["_v"] = rec["version"]
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": parent if parent and parent != sid else None,
        "native_id": uuid,
        "parent_id": nonempty(rec.get("parentUuid")),
        "project_dir": nonempty(rec.get("cwd")) or state.get("cwd"),
        "ts": nonempty(rec.get("timestamp")),
        "is_sidechain": bool(rec.get("isSidechain")),
        "part": 0,
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{uuid or line_hash}",
    }
    if kind_of not in ("user", "assistant"):
        unknown(state, kind_of or "unknown")
        return [dict(base, role="system", kind="meta", tool_name=kind_of or "unknown", text=_meta_text(rec))]
    content = msg.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}] if content else []
    if kind_of == "user":
        return _user_entries(rec, blocks, base)
    return _assistant_entries(msg, blocks, base, state)


def _meta_text(rec: dict) -> str:
    for key in ("content", "summary", "text"):
        if isinstance(rec.get(key), str):
            return rec[key]
    return compact_json({k: v for k, v in rec.items() if k != "message"}, 2000)


def _user_entries(rec: dict, blocks: list, base: dict) -> list[dict]:
    out: list[dict] = []
    meta = bool(rec.get("isMeta") or rec.get("isCompactSummary"))
    for i, b in enumerate(blocks):
        if not isinstance(b, dict):
            continue
        e = dict(base, part=i, record_id=f"{base['record_id']}:{i}" if i else base["record_id"])
        if b.get("type") == "tool_result":
            c = b.get("content")
            out.append(
                dict(
                    e,
                    role="tool",
                    kind="tool_result",
                    native_id=nonempty(b.get("tool_use_id")),
                    tool_name=_result_name(c),
                    text=_result_text(c),
                )
            )
            continue
        text = block_text(b)
        if meta or text.lstrip("\ufeff \n\t").startswith(_SYSTEM_PREFIXES):
            summary = "compact_summary" if rec.get("isCompactSummary") else "injected"
            out.append(dict(e, role="system", kind="meta", tool_name=summary, text=text))
        else:
            out.append(dict(e, role="user", kind="message", text=text))
    return out


def _assistant_entries(msg: dict, blocks: list, base: dict, state: dict) -> list[dict]:
    sid = state["sid"]
    model = nonempty(msg.get("model"))
    out: list[dict] = []
    for i, b in enumerate(blocks):
        if not isinstance(b, dict):
            continue
        e = dict(base, role="assistant", model=model, part=i)
        e["record_id"] = f"{base['record_id']}:{i}" if i else base["record_id"]
        t = b.get("type")
        if t == "tool_use":
            tid = nonempty(b.get("id"))
            e.update(
                kind="tool_call",
                native_id=tid,
                tool_name=nonempty(b.get("name")),
                text=compact_json(b.get("input")),
            )
            if tid:  # the snapshots repeat a call: one entry per call id
                e.update(part=0, record_id=f"{sid}:tool:{tid}")
        elif t in ("thinking", "redacted_thinking"):
            e.update(kind="thinking", text=nonempty(b.get("thinking")) or "")
        else:
            if t != "text":
                unknown(state, f"block:{t}")
            e.update(kind="message", text=block_text(b))
        out.append(e)
    usage = dict_at(msg, "usage")
    tokens = {
        "input_tokens": as_int(usage.get("input_tokens")) or 0,
        "output_tokens": as_int(usage.get("output_tokens")) or 0,
        "cache_read_tokens": as_int(usage.get("cache_read_input_tokens")) or 0,
        "cache_creation_tokens": as_int(usage.get("cache_creation_input_tokens")) or 0,
    }
    if any(tokens.values()):
        mid = nonempty(msg.get("id")) or base["record_id"]
        if not out:
            out.append(dict(base, role="assistant", kind="meta", tool_name="usage", model=model, text=""))
        out[0].update(tokens, usage_key=f"iflow:{mid}", message_id=nonempty(msg.get("id")))
    return out


#: new lines of one transcript into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

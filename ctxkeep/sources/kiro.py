"""Kiro CLI (``kiro-cli``, AWS's successor to the Amazon Q Developer CLI) conversations.

Where: ``$KIRO_SESSIONS_DIR`` else ``~/.kiro/sessions/cli`` and ``~/.local/share/kiro-cli``
(agentsview 0.46 ``internal/parser/types.go`` AgentKiro, ``DefaultDirs``, env
``KIRO_SESSIONS_DIR``), and ``~/Library/Application Support/kiro-cli`` (macOS: the
platform data dir the CLI's ``data.sqlite3`` lives in, as Amazon Q's CLI keeps its own;
an inference from agentsview's Linux path, said here). Two generations:

- **current store** (``kiro_sqlite.go``): ``<root>/data.sqlite3``, table
  ``conversations_v2(key TEXT (the working directory), conversation_id TEXT, value TEXT
  (the conversation JSON), created_at INTEGER, updated_at INTEGER (Unix ms), PRIMARY
  KEY (key, conversation_id))`` (``kiro_sqlite_test.go``). A conversation row is
  rewritten whole as it grows: ``rowid`` + ``updated_at`` is the high-water mark
  (``readers.sqlite.changed_rows``) and a changed row is parsed again whole (its
  entries dedup by stable ids). ``value``: ``{conversation_id, history [turn],
  transcript}``, a turn ``{user {env_context {env_state {current_working_directory}},
  content, timestamp (RFC 3339), images?}, assistant, request_metadata
  {stream_end_timestamp_ms, …}}`` (``testdata/kiro_sqlite/standard_payload.json``).
  ``user.content`` is one of (Amazon Q Developer CLI ``crates/chat-cli/src/cli/chat/
  message.rs`` UserMessageContent, serde's externally tagged enums, which kiro-cli
  inherited): ``{"Prompt": {prompt}}``, ``{"ToolUseResults": {tool_use_results
  [{tool_use_id, content [{"Text": s} | {"Json": v}], status ("Success"|"Error")}]}}``,
  ``{"CancelledToolUses": {prompt?, tool_use_results}}``; ``assistant`` is
  ``{"Response": {message_id, content}}`` or ``{"ToolUse": {message_id, content,
  tool_uses [{id, name, args}]}}`` (``message.rs`` AssistantMessage, ``kiro_sqlite.go``).
- **legacy JSONL** (``kiro.go``): ``<root>/<session>.jsonl`` appended, a companion
  ``<session>.json`` ``{session_id, cwd, title, created_at, updated_at}`` (rewritten).
  Lines ``{kind, data {message_id?, content [{kind, data}]}}`` with ``kind``
  ``Prompt`` (``text`` blocks), ``AssistantMessage`` (``text`` and ``toolUse`` blocks,
  ``data {toolUseId, name, input}``) or ``ToolResults`` (``toolResult`` blocks, ``data
  {toolUseId, content, status?}``) (``kiro.go``; the alternation AssistantMessage →
  ToolResults also in brandontyler/clawdbot ``docs/kiro-known-issues.md``).

Neither logs token usage or the model per turn (agentsview reads none), so no usage row
is written. Entries: SQLite ``record_id`` ``<conversation>:<turn index>:user|assistant``
(a turn's place in ``history`` is stable while the row is rewritten), parts numbered
within the message; JSONL ``<session>:<byte offset>`` (append-only lines). Times: the
user turn's ``timestamp``, the assistant's ``stream_end_timestamp_ms``, else the row's
``created_at`` (SQLite) or the companion's ``created_at`` (JSONL, whose lines carry none).
The companion's ``title`` is a ``meta`` entry on the session's first line.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxkeep.sources._util import compact_json, dict_at, json_object, nonempty, tool_call_entry
from ctxkeep.sources.contract import (
    Batch,
    Discovery,
    DiscoveryContext,
    FileMode,
    Mode,
    SourceFile,
)
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.jsonl import file_head, record_reader
from ctxkeep.sources.readers.sqlite import (
    ChangedRows,
    DbRead,
    as_bytes,
    by_mode,
    database_reader,
    json_object_of,
)

AGENT = "kiro"
PARSER_VERSION = 1
MODE: Mode = "append"

DB_NAME = "data.sqlite3"
#: legacy JSONL line kinds (``kiro.go``)
KNOWN_KINDS = ("Prompt", "AssistantMessage", "ToolResults")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$KIRO_SESSIONS_DIR`` when set, else the Linux and macOS defaults (module doc)."""
    env = ctx.env.get("KIRO_SESSIONS_DIR")
    if env:
        return [Path(env).expanduser()]
    h = ctx.home
    return [
        h / ".kiro" / "sessions" / "cli",
        h / ".local" / "share" / "kiro-cli",
        h.joinpath("Library", "Application Support", "kiro-cli"),
    ]


def mode_for(path: Path) -> FileMode:
    """``sqlite`` for ``data.sqlite3``, ``rewrite`` for a legacy session's ``.json``
    (a sidecar: ``sidecars_of``), else ``append`` (a legacy ``.jsonl``)."""
    return "sqlite" if path.name == DB_NAME else sidecar.MODE if path.suffix == ".json" else "append"


def sidecars_of(path: Path) -> list[SourceFile]:
    """The sidecar of a legacy ``<session>.jsonl`` at ``path``: its ``<session>.json``
    (``session_meta``), kept by the vault with it (``readers.sidecar``)."""
    return (
        sidecar.beside(AGENT, path, {path.stem + ".json": "session-meta"}) if path.suffix == ".jsonl" else []
    )


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``data.sqlite3`` and ``<session>.jsonl`` in each root and configured dir."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        d.searched.append(root)
        if root.is_dir():
            d.add(root / DB_NAME, "sqlite")
            d.add_glob(root, ["*.jsonl"], "append")
    sidecar.add_all(d, sidecars_of)
    d.explain_empty(roots(ctx)[0], f"no Kiro CLI {DB_NAME} or <session>.jsonl found")
    return d


def matches(path: Path) -> bool:
    """A Kiro ``data.sqlite3`` (in a ``kiro-cli`` dir) or a legacy Kiro ``.jsonl``."""
    if path.name == DB_NAME:
        return "kiro" in path.parent.name.lower()
    head = file_head(path, (".jsonl",), 512).replace(b" ", b"")
    return head.startswith(b'{"kind":"') and b'"data":' in head


def _ms(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1e14:
        return None
    return datetime.fromtimestamp(v / 1000, UTC).isoformat().replace("+00:00", "Z")


# ------------------------------------------------------------------ legacy JSONL


def session_meta(jsonl: Path) -> dict:
    """The companion ``<session>.json`` ({} when missing or unreadable), read again only
    when it changed."""
    p = jsonl.with_suffix(".json")
    return json_object(p)


def init_state(file: SourceFile) -> dict:
    """Nothing: the session comes from the file and its companion ``.json``."""
    return {}


def _block_text(b: dict) -> str:
    d = b.get("data")
    return d if isinstance(d, str) else compact_json(d, 4000) if d is not None else ""


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One legacy JSONL line → its entries (one per content block)."""
    path = Path(src)
    meta = session_meta(path)
    sid = nonempty(meta.get("session_id")) or path.stem
    kind = rec.get("kind")
    data = dict_at(rec, "data")
    base = {
        "agent": AGENT,
        "session_id": sid,
        "native_id": nonempty(data.get("message_id")),
        "project_dir": nonempty(meta.get("cwd")),
        "ts": nonempty(meta.get("created_at")),
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{offset}",
    }
    blocks = data.get("content")
    blocks = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
    out: list[dict] = []
    if kind not in KNOWN_KINDS:
        unknown(state, str(kind))
        return [
            dict(base, part=0, role="system", kind="meta", tool_name=str(kind), text=compact_json(rec, 2000))
        ]
    role = {"Prompt": "user", "AssistantMessage": "assistant", "ToolResults": "tool"}[kind]
    for i, b in enumerate(blocks):
        bk, bd = b.get("kind"), dict_at(b, "data")
        e = dict(base, part=i)
        if bk == "text":
            out.append(dict(e, role="user" if role == "tool" else role, kind="message", text=_block_text(b)))
        elif bk == "toolUse":
            out.append(tool_call_entry(e, bd.get("toolUseId"), bd.get("name"), bd.get("input")))
        elif bk == "toolResult":
            out.append(_result(e, nonempty(bd.get("toolUseId")), bd.get("content"), bd.get("status")))
        else:
            unknown(state, f"block:{bk}")
            out.append(dict(e, role="system", kind="meta", tool_name=str(bk), text=compact_json(b, 2000)))
    if not out:
        out.append(dict(base, part=0, role=role if role != "tool" else "user", kind="message", text=""))
    title = nonempty(meta.get("title"))
    if offset == 0 and title:
        out.append(
            dict(
                base, part=len(out), native_id=None, role="system", kind="meta", tool_name="title", text=title
            )
        )
    return out


def _result_text(content: Any) -> str:
    """A tool result's content: ``[{"Text": s} | {"Json": v}]`` (SQLite), ``[{kind,
    data}]`` blocks (JSONL), a string, or anything else as compact JSON."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else compact_json(content, 4000)
    parts = []
    for c in content:
        if isinstance(c, dict) and isinstance(c.get("Text"), str):
            parts.append(c["Text"])
        elif isinstance(c, dict) and "Json" in c:
            parts.append(compact_json(c["Json"], 4000))
        elif isinstance(c, dict) and "data" in c:
            parts.append(_block_text(c))
        else:
            parts.append(compact_json(c, 4000))
    return "\n".join(parts)


def _result(e: dict, tid: str | None, content: Any, status: Any) -> dict:
    text = _result_text(content)
    if isinstance(status, str) and status.lower() not in ("success", ""):
        text = f"[{status.lower()}] {text}"
    return dict(e, role="tool", kind="tool_result", native_id=tid, text=text)


# ------------------------------------------------------------------ current SQLite store


def _probe(conn) -> int:
    cols = {r[1] for r in conn.execute("PRAGMA table_info(conversations_v2)")}
    if not {"key", "conversation_id", "value", "created_at", "updated_at"} <= cols:
        raise ValueError("no conversations_v2 table of Kiro's shape")
    return conn.execute("SELECT coalesce(max(rowid), 0) FROM conversations_v2").fetchone()[0]


def _unknown_variant(base: dict, part: int, name: str, body: dict, tally_unknown: list) -> dict:
    """A ``meta`` entry for a message variant this parser does not know (counted for
    the coverage ledger)."""
    tally_unknown.append(name)
    return dict(base, part=part, role="system", kind="meta", tool_name=name, text=compact_json(body, 2000))


def _user_entries(user: dict, base: dict, tally_unknown: list) -> list[dict]:
    content = dict_at(user, "content")
    out: list[dict] = []
    for variant, body in content.items():
        body = body if isinstance(body, dict) else {}
        if variant not in ("Prompt", "ToolUseResults", "CancelledToolUses"):
            out.append(_unknown_variant(base, len(out), f"user:{variant}", body, tally_unknown))
            continue
        prompt = nonempty(body.get("prompt"))
        if prompt:
            out.append(dict(base, part=len(out), role="user", kind="message", text=prompt))
        for r in body.get("tool_use_results") or []:
            if isinstance(r, dict):
                out.append(
                    _result(
                        dict(base, part=len(out)),
                        nonempty(r.get("tool_use_id")),
                        r.get("content"),
                        r.get("status"),
                    )
                )
    return out


def _assistant_entries(assistant: dict, base: dict, tally_unknown: list) -> list[dict]:
    out: list[dict] = []
    for variant, body in assistant.items():
        body = body if isinstance(body, dict) else {}
        if variant not in ("Response", "ToolUse"):
            out.append(_unknown_variant(base, len(out), f"assistant:{variant}", body, tally_unknown))
            continue
        e = dict(base, native_id=nonempty(body.get("message_id")))
        text = nonempty(body.get("content"))
        if text:
            out.append(dict(e, part=len(out), role="assistant", kind="message", text=text))
        for u in body.get("tool_uses") or []:
            if isinstance(u, dict):
                out.append(tool_call_entry(dict(e, part=len(out)), u.get("id"), u.get("name"), u.get("args")))
    return out


def conversation_entries(
    doc: dict, cid: str, key: Any, created: Any, src: str, rowid: int, tally_unknown: list
) -> list[dict]:
    """Entry dicts of one ``conversations_v2`` value (see the module doc). Raises
    ValueError for a value without a ``history`` list."""
    history = doc.get("history")
    if not isinstance(history, list):
        raise ValueError("conversation has no history list")
    out: list[dict] = []
    start = _ms(created)
    for i, turn in enumerate(history):
        if not isinstance(turn, dict):
            continue
        user, assistant = dict_at(turn, "user"), dict_at(turn, "assistant")
        cwd = nonempty(
            dict_at(dict_at(dict_at(user, "env_context"), "env_state"), "current_working_directory")
        )
        base = {
            "agent": AGENT,
            "session_id": cid,
            "project_dir": nonempty(key) or cwd,
            "source_path": src,
            "source_offset": rowid,
        }
        out += _user_entries(
            user,
            dict(base, record_id=f"{cid}:{i}:user", ts=nonempty(user.get("timestamp")) or start),
            tally_unknown,
        )
        end = _ms(dict_at(turn, "request_metadata").get("stream_end_timestamp_ms"))
        out += _assistant_entries(
            assistant,
            dict(base, record_id=f"{cid}:{i}:assistant", ts=end or nonempty(user.get("timestamp")) or start),
            tally_unknown,
        )
    return out


def _read_rows(rd: DbRead, top: int) -> Iterator[Batch]:
    got, src = ChangedRows(rd), str(rd.path)

    def conversation(rowid: int, key: Any, cid: Any, value: Any, created: Any, _updated: Any):
        raw, sid = as_bytes(value), nonempty(cid) or str(rowid)
        return raw, lambda unknown: conversation_entries(
            json_object_of(raw, "conversation value"), sid, key, created, src, rowid, unknown
        )

    got.read("conversations_v2", "key, conversation_id, value, created_at", conversation, top=top)
    yield got.batch_now()


_read_jsonl = record_reader(PARSER_VERSION, parse_record, init_state)
#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("conversations_v2", "conversation_id", "updated_at"),)
_read_db = database_reader(
    AGENT, PARSER_VERSION, _probe, _read_rows, f"cannot read {DB_NAME}", vault=VAULT_TABLES
)
#: ``data.sqlite3`` by changed rows, a legacy ``.jsonl`` by byte offset
read = sidecar.reading(by_mode(mode_for, _read_db, _read_jsonl), PARSER_VERSION)

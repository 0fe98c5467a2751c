"""Devin CLI (Cognition's terminal agent) sessions.

Where: ``$DEVIN_DIR`` else ``~/.local/share/devin`` (Linux) and ``~/Library/Application
Support/devin`` (macOS) (agentsview 0.46 ``internal/parser/types.go`` AgentDevin,
``DefaultDirs``, env ``DEVIN_DIR``); in it ``cli/sessions.db`` and
``cli/transcripts/<session id>.json`` (agentsview 0.46 ``internal/parser/devin.go``
devinDBPath, parseDevinSession).

Format facts (``devin.go``; the table shapes are agentsview's synthetic copies in
``test_helpers_test.go`` devinSyntheticSessionsSchema / MessageNodesSchema):

- ``sessions(id TEXT PRIMARY KEY, title, working_directory, model, created_at,
  last_activity_at (Unix seconds), workspace_json, metadata_json, hidden)``;
- ``message_nodes(row_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, node_id,
  parent_node_id, chat_message TEXT (JSON), created_at (Unix seconds), metadata)``: the
  conversation as a tree of nodes, appended; ``chat_message`` is an OpenAI-style chat
  message ``{role (user | assistant | agent | system | tool), content (a string or
  Anthropic-style blocks: text, thinking, tool_use {id, name, input}, tool_result
  {tool_use_id, content}), thinking?, tool_calls? [{id, function {name, arguments}}],
  tool_call_id?}`` (parseDevinDBMessageNode, devinDBRole, parseDevinDBToolCalls);
- ``transcripts/<id>.json`` (rewritten): ``{agent {model_name}, final_metrics, steps
  [{step_id, source (user | agent | system), timestamp, message, tool_use, tool_result,
  model_name?, extra {generation_model}?, metrics {prompt_tokens (cached included),
  completion_tokens, cached_tokens}}]}`` (parseDevinStep, devinTokenUsageFromMetrics).

Read here: the messages, tool calls and results from ``message_nodes`` (new rows by
``row_id``, ``readers.sqlite.changed_rows``; ``record_id`` ``<session>:<node id>``, times
the node's ``created_at``, the project the session's ``working_directory``, assistant
entries the session's ``model``; titles from ``sessions``), and the token usage from
the transcripts (mode ``rewrite``, re-read when their hash changes): one row per step
with ``metrics`` (``usage_key`` ``devin:<session>:<step id>``; input = prompt − cached,
cache read = cached, output = completion; the step's model, else the transcript's).
The transcripts' steps repeat the conversation the database holds, so their messages
are not stored again. No sub-agents are recorded in either.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxkeep.sources._util import (
    as_int,
    block_text,
    compact_json,
    dict_at,
    nonempty,
    openai_message_entries,
    title_entry,
    tool_call_entry,
)
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    FileMode,
    Mode,
    SourceFile,
    Watermark,
    sorted_paths,
)
from ctxkeep.sources.readers.document import read_document
from ctxkeep.sources.readers.jsonl import file_head
from ctxkeep.sources.readers.sqlite import (
    ChangedRows,
    DbRead,
    as_bytes,
    by_mode,
    database_reader,
    json_object_of,
)

AGENT = "devin"
PARSER_VERSION = 1
MODE: Mode = "sqlite"

DB_NAME = "sessions.db"
#: chat_message roles (``devin.go`` devinDBRole)
KNOWN_ROLES = ("user", "assistant", "agent", "system", "tool")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$DEVIN_DIR`` when set, else the Linux and macOS data dirs."""
    env = ctx.env.get("DEVIN_DIR")
    if env:
        return [Path(env).expanduser()]
    return [
        ctx.home / ".local" / "share" / "devin",
        ctx.home.joinpath("Library", "Application Support", "devin"),
    ]


def mode_for(path: Path) -> FileMode:
    """``sqlite`` for ``sessions.db``, else ``rewrite`` (a transcript)."""
    return "sqlite" if path.name == DB_NAME else "rewrite"


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``cli/sessions.db`` and ``cli/transcripts/*.json`` in each root."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        cli = root / "cli"
        d.searched.append(cli)
        if cli.is_dir():
            d.add(cli / DB_NAME, "sqlite")
            for p in sorted_paths(cli.glob("transcripts/*.json")):
                d.add(p, "rewrite")
    d.explain_empty(roots(ctx)[0], f"no Devin CLI cli/{DB_NAME} found")
    return d


def matches(path: Path) -> bool:
    """Devin's ``cli/sessions.db`` or a ``cli/transcripts/<id>.json``."""
    if path.name == DB_NAME:
        return path.parent.name == "cli" and path.parent.parent.name.lower() == "devin"
    return path.parent.name == "transcripts" and b'"steps"' in file_head(path, (".json",), 4096)


def _sec(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1e11:
        return None
    return datetime.fromtimestamp(v, UTC).isoformat().replace("+00:00", "Z")


# ------------------------------------------------------------------ sessions.db


def _probe(conn) -> tuple[dict[str, tuple], int]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"sessions", "message_nodes"} <= tables:
        raise ValueError("no sessions and message_nodes tables of Devin's shape")
    cols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    pick = [c if c in cols else "NULL" for c in ("title", "working_directory", "model", "created_at")]
    sessions = {str(r[0]): r[1:] for r in conn.execute(f"SELECT id, {', '.join(pick)} FROM sessions")}
    top = conn.execute("SELECT coalesce(max(row_id), 0) FROM message_nodes").fetchone()[0]
    return sessions, top


def _blocks(content: Any, e: dict) -> tuple[str, list[dict]]:
    """Text of a chat message's content, and entries of its non-text blocks."""
    if not isinstance(content, list):
        return (
            content if isinstance(content, str) else "" if content is None else compact_json(content, 4000)
        ), []
    text: list[str] = []
    extra: list[dict] = []
    for b in content:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "thinking":
            extra.append(
                dict(e, role="assistant", kind="thinking", text=str(b.get("thinking") or b.get("text") or ""))
            )
        elif t == "tool_use":
            extra.append(tool_call_entry(e, b.get("id"), b.get("name"), b.get("input")))
        elif t == "tool_result":
            extra.append(
                dict(
                    e,
                    role="tool",
                    kind="tool_result",
                    native_id=nonempty(b.get("tool_use_id")),
                    text=_result_text(b.get("content")),
                )
            )
        else:
            text.append(block_text(b))
    return "\n".join(x for x in text if x), extra


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(block_text(b) for b in content if isinstance(b, dict))
    return content if isinstance(content, str) else "" if content is None else compact_json(content, 4000)


def node_entries(msg: dict, base: dict, unknown_types: list[str]) -> list[dict]:
    """Entries of one ``chat_message`` (module doc)."""
    role = msg.get("role") if isinstance(msg.get("role"), str) else ""
    if role not in KNOWN_ROLES:
        unknown_types.append(f"role:{role}")
    role = "assistant" if role == "agent" else role
    if role != "assistant":
        base = dict(base, model=None)
    text, extra = _blocks(msg.get("content"), base)
    out = openai_message_entries(dict(msg, role=role, content=text), base, reasoning_keys=("thinking",))
    if role in ("user", "tool") and not text and extra:
        out = []  # a node that only carries result blocks: the results are its entries
    elif role == "assistant" and not out and not extra:
        out = [dict(base, part=0, role="assistant", kind="message", text="")]
    out += extra
    for j, x in enumerate(out):
        x["part"] = j
    return out


def _read_rows(rd: DbRead, probed: tuple) -> Iterator[Batch]:
    sessions, top = probed
    got, src = ChangedRows(rd), str(rd.path)
    for sid, (title, cwd, _model, created) in sessions.items():
        if nonempty(title):
            got.entries.append(
                title_entry(AGENT, sid, title, src, ts=_sec(created), project_dir=nonempty(cwd))
            )

    def node(rowid: int, sid: Any, node: Any, chat: Any, created: Any):
        raw, sid = as_bytes(chat), str(sid)
        _title, cwd, model, _created = sessions.get(sid, (None, None, None, None))
        base = {
            "agent": AGENT,
            "session_id": sid,
            "project_dir": nonempty(cwd),
            "ts": _sec(created),
            "model": nonempty(model),
            "source_path": src,
            "source_offset": rowid,
            "record_id": f"{sid}:{node if node is not None else f'row{rowid}'}",
        }
        return raw, lambda unknown: node_entries(json_object_of(raw, "chat_message"), base, unknown)

    got.read(
        "message_nodes", "session_id, node_id, chat_message", node, top=top, rowid="row_id", ts="created_at"
    )
    yield got.batch_now()


# ------------------------------------------------------------------ transcripts (usage)


def transcript_usage(doc: Any, path: Path) -> list[dict]:
    """Usage rows of one transcript (module doc). Raises ValueError for a document
    without a ``steps`` list."""
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise ValueError("not a Devin transcript (no steps list)")
    sid = path.stem
    default_model = nonempty(dict_at(doc, "agent").get("model_name"))
    out: list[dict] = []
    for i, step in enumerate(doc["steps"]):
        if not isinstance(step, dict):
            continue
        m = step.get("metrics")
        if not isinstance(m, dict):
            continue
        prompt, completion, cached = (
            max(as_int(m.get(k)) or 0, 0) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")
        )
        if not (prompt or completion or cached):
            continue
        step_id = step.get("step_id")
        sid_part = (
            step_id
            if isinstance(step_id, str) and step_id
            else str(step_id)
            if isinstance(step_id, int)
            else str(i)
        )
        model = (
            nonempty(dict_at(step, "extra").get("generation_model"))
            or nonempty(step.get("model_name"))
            or default_model
            or "devin-unknown"
        )
        ts = next((step[k] for k in ("timestamp", "created_at", "createdAt") if nonempty(step.get(k))), None)
        out.append(
            {
                "agent": AGENT,
                "session_id": sid,
                "ts": ts,
                "role": "system",
                "kind": "meta",
                "tool_name": "usage",
                "model": model,
                "text": f"usage {model}",
                "part": 0,
                "source_path": str(path),
                "source_offset": i,
                "record_id": f"{sid}:usage:{sid_part}",
                "input_tokens": max(prompt - cached, 0),
                "output_tokens": completion,
                "cache_read_tokens": cached,
                "cache_creation_tokens": 0,
                "usage_key": f"devin:{sid}:{sid_part}",
            }
        )
    return out


def _read_transcript(
    file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> Iterator[Batch]:
    path = file.path
    return read_document(
        file, wm, PARSER_VERSION, lambda raw, doc, state, idle: transcript_usage(doc, path), batch_bytes
    )


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("sessions", "id"), ("message_nodes", "session_id"))
_read_db = database_reader(
    AGENT, PARSER_VERSION, _probe, _read_rows, f"cannot read {DB_NAME}", vault=VAULT_TABLES
)
#: ``sessions.db`` by new message nodes, a transcript (usage) by content hash
read = by_mode(mode_for, _read_db, _read_transcript)

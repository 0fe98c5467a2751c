"""Hermes Agent (Nous Research's ``hermes`` agent and its messaging gateway) sessions.

Where: ``$HERMES_SESSIONS_DIR`` else ``~/.hermes/sessions`` (all platforms, under the
user's home; agentsview 0.46 ``internal/parser/types.go`` AgentHermes, env
``HERMES_SESSIONS_DIR``). Hermes keeps, by version (agentsview 0.46
``internal/parser/hermes.go`` hermesStatePaths, discoverHermesSessions,
discoverHermesTranscriptFiles):

- ``state.db`` beside the sessions dir (``~/.hermes/state.db``), the current store:
  ``sessions(id, source (the platform: cli, discord …), model, parent_session_id,
  started_at, ended_at (Unix seconds, REAL), message_count, input_tokens,
  output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
  estimated_cost_usd, actual_cost_usd, cost_status, title, api_call_count, …)`` and
  ``messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, role, content,
  tool_call_id, tool_calls (JSON text), tool_name, timestamp (REAL), token_count,
  finish_reason, reasoning, reasoning_content, reasoning_details, …)`` (the schema of
  ``hermes_test.go``). When it exists its messages arrive by ``id``
  (``readers.sqlite.changed_rows``), and of the transcripts only those of sessions the
  database lacks (older ones) are read, as agentsview's parseStateDB does;
- else the transcripts in the sessions dir: ``<id>.jsonl`` (appended: one OpenAI-style
  message a line, ``{role (session_meta | user | assistant | tool), content,
  reasoning?, tool_calls? [{id, function {name, arguments}}], tool_call_id?,
  timestamp}``, the ``session_meta`` line naming the ``platform`` and ``model``, the model of
  the session's assistant entries) and, for sessions
  without one, ``session_<id>.json`` (rewritten: ``{platform, session_start,
  last_updated, messages [same messages]}``).

Timestamps without an offset are the machine's local time (``hermes.go``
parseHermesTimestamp). A user message opening with ``[CONTEXT COMPACTION - REFERENCE
ONLY]`` is a compaction summary (``isHermesCompactBoundary``): a ``summary`` entry.

Entries: the OpenAI message loop (``_util.openai_message_entries``); ``record_id``
``<session>:m<id>`` (database), ``<session>:<byte offset>`` (JSONL),
``<session>:<index>:<hash>`` (JSON). Database sessions give each entry the session's
``parent_session_id`` (a sub-agent or a continued session) and model, a ``title``
``meta`` entry and one usage row of the session's totals (``usage_key``
``hermes:<session>``; cache write as cache creation; ``actual_cost_usd`` else
``estimated_cost_usd``). Transcripts log no tokens.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_float, as_int, compact_json, nonempty, openai_message_entries
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
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers.document import read_document
from ctxkeep.sources.readers.jsonl import file_head, record_reader
from ctxkeep.sources.readers.sqlite import (
    ChangedRows,
    DbRead,
    database_reader,
    open_ro,
)

AGENT = "hermes"
PARSER_VERSION = 1
MODE: Mode = "append"

DB_NAME = "state.db"
KNOWN_ROLES = ("session_meta", "user", "assistant", "tool", "system")
_COMPACTION = ("[CONTEXT COMPACTION - REFERENCE ONLY]", "[CONTEXT COMPACTION – REFERENCE ONLY]")


def sessions_dir(ctx: DiscoveryContext) -> Path:
    """``$HERMES_SESSIONS_DIR`` when set, else ``~/.hermes/sessions``."""
    return ctx.env_dir("HERMES_SESSIONS_DIR", ctx.home / ".hermes" / "sessions")


def state_db(root: Path) -> Path | None:
    """The ``state.db`` that goes with a sessions dir (in it, or beside it), or None."""
    for p in (root / DB_NAME, root.parent / DB_NAME if root.name == "sessions" else None):
        if p is not None and p.is_file():
            return p
    return None


def db_session_ids(db: Path) -> set[str]:
    """The session ids ``state.db`` holds (read-only; an empty set when it cannot be
    read: every transcript is then read)."""
    try:
        ro = open_ro(db)
    except Exception:
        return set()
    try:
        return {str(r[0]) for r in ro.conn.execute("SELECT id FROM sessions")}
    except sqlite3.Error:
        return set()
    finally:
        ro.conn.close()


def session_id(name: str) -> str:
    """A transcript's session id: its name without ``.jsonl``/``.json`` and ``session_``."""
    return name.removesuffix(".jsonl").removesuffix(".json").removeprefix("session_")


def mode_for(path: Path) -> FileMode:
    """``sqlite`` for ``state.db``, ``append`` for a ``.jsonl``, else ``rewrite``."""
    return "sqlite" if path.name == DB_NAME else "append" if path.suffix == ".jsonl" else "rewrite"


def discover(ctx: DiscoveryContext) -> Discovery:
    """``state.db`` and the transcripts of sessions it does not hold (all of them when
    there is no database; module doc)."""
    d = Discovery(AGENT)
    for root in [sessions_dir(ctx), *ctx.extra_dirs]:
        d.searched.append(root)
        db = state_db(root)
        in_db: set[str] = set()
        if db is not None:
            d.add(db, "sqlite")
            in_db = db_session_ids(db)
        if not root.is_dir():
            continue
        jsonl = [p for p in sorted_paths(root.glob("*.jsonl")) if session_id(p.name) not in in_db]
        for p in jsonl:
            d.add(p, "append")
        have = in_db | {session_id(p.name) for p in jsonl}
        for p in sorted_paths(root.glob("session_*.json")):
            if session_id(p.name) not in have:
                d.add(p, "rewrite")
    d.explain_empty(sessions_dir(ctx), "no Hermes state.db or <id>.jsonl transcripts found")
    return d


def matches(path: Path) -> bool:
    """A Hermes ``state.db`` (in a ``.hermes`` dir) or a transcript in a ``sessions`` dir."""
    if path.name == DB_NAME:
        return path.parent.name == ".hermes" or (path.parent / "sessions").is_dir()
    if path.parent.name != "sessions":
        return False
    if path.suffix == ".jsonl":
        return b'"role"' in file_head(path, (".jsonl",), 2048) and ".hermes" in path.parts
    return path.name.startswith("session_") and b'"messages"' in file_head(path, (".json",), 4096)


def iso(v: Any) -> str | None:
    """A Hermes time (ISO text, local when it has no offset; or Unix seconds) as UTC
    ISO-8601 text."""
    try:
        if isinstance(v, int | float) and not isinstance(v, bool):
            dt = datetime.fromtimestamp(v, UTC) if 0 < v < 1e11 else None
        elif isinstance(v, str) and v:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
            dt = dt if dt.tzinfo else dt.astimezone()
        else:
            dt = None
    except (ValueError, OverflowError, OSError):
        return None
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z") if dt else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
    return "" if content is None else compact_json(content, 4000)


def message_entries(msg: dict, base: dict) -> list[dict]:
    """Entries of one Hermes message (module doc)."""
    if msg.get("role") == "user" and _text(msg.get("content")).lstrip().startswith(_COMPACTION):
        return [dict(base, part=0, role="system", kind="summary", text=_text(msg.get("content")))]
    return openai_message_entries(msg, base, _text, ("reasoning", "reasoning_content"))


# ------------------------------------------------------------------ transcripts


def init_state(file: SourceFile) -> dict:
    """The session id the file name implies."""
    return {"sid": session_id(file.path.name)}


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One ``<id>.jsonl`` line → its entries."""
    sid = state.get("sid") or session_id(Path(src).name)
    role = rec.get("role")
    base = {
        "agent": AGENT,
        "session_id": sid,
        "ts": iso(rec.get("timestamp")),
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{offset}",
    }
    if role == "session_meta":
        state["model"] = nonempty(rec.get("model"))
        return [
            dict(
                base,
                part=0,
                role="system",
                kind="meta",
                tool_name="session_meta",
                text=compact_json(rec, 2000),
            )
        ]
    if role not in KNOWN_ROLES:
        unknown(state, f"role:{role}")
    if role == "assistant":
        base["model"] = nonempty(rec.get("model")) or state.get("model")
    return message_entries(rec, base)


def parse_json_session(doc: Any, path: Path) -> list[dict]:
    """Entry dicts of one ``session_<id>.json``. Raises ValueError without a
    ``messages`` list."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise ValueError("not a Hermes session (no messages list)")
    sid = session_id(path.name)
    start = iso(doc.get("session_start"))
    out: list[dict] = []
    for i, m in enumerate(doc["messages"]):
        if not isinstance(m, dict):
            continue
        h = hashlib.sha256(
            orjson.dumps([m.get("role"), m.get("content"), m.get("tool_call_id")])
        ).hexdigest()[:12]
        base = {
            "agent": AGENT,
            "session_id": sid,
            "ts": iso(m.get("timestamp")) or start,
            "source_path": str(path),
            "source_offset": i,
            "record_id": f"{sid}:{i}:{h}",
        }
        out += message_entries(m, base)
    return out


# ------------------------------------------------------------------ state.db


def _probe(conn) -> tuple[dict[str, dict], int]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"sessions", "messages"} <= tables:
        raise ValueError("no sessions and messages tables of Hermes's shape")
    cols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    want = (
        "source",
        "model",
        "parent_session_id",
        "started_at",
        "ended_at",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "estimated_cost_usd",
        "actual_cost_usd",
        "title",
    )
    pick = [c if c in cols else "NULL" for c in want]
    sessions = {
        str(r[0]): dict(zip(want, r[1:], strict=True))
        for r in conn.execute(f"SELECT id, {', '.join(pick)} FROM sessions")
    }
    top = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    return sessions, top


def _session_entries(sid: str, s: dict, src: str) -> list[dict]:
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": nonempty(s.get("parent_session_id")),
        "ts": iso(s.get("started_at")),
        "role": "system",
        "kind": "meta",
        "part": 0,
        "source_path": src,
        "source_offset": 0,
    }
    out = []
    if nonempty(s.get("title")):
        out.append(dict(base, tool_name="title", text=s["title"], record_id=f"{sid}:title:{s['title']}"))
    tokens = [
        max(as_int(s.get(k)) or 0, 0)
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        )
    ]
    cost = as_float(s.get("actual_cost_usd"))
    cost = cost if cost is not None else as_float(s.get("estimated_cost_usd"))
    model = nonempty(s.get("model")) or "hermes-unknown"
    if any(tokens) or cost:
        out.append(
            dict(
                base,
                ts=iso(s.get("ended_at")) or base["ts"],
                tool_name="usage",
                model=model,
                text=f"usage {model}",
                record_id=f"{sid}:usage:{':'.join(map(str, tokens))}",
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                cache_read_tokens=tokens[2],
                cache_creation_tokens=tokens[3],
                reasoning_tokens=tokens[4],
                cost_usd=cost,
                usage_key=f"hermes:{sid}",
            )
        )
    return out


def _read_rows(rd: DbRead, probed: tuple) -> Iterator[Batch]:
    sessions, top = probed
    got, src = ChangedRows(rd), str(rd.path)
    got.entries += [e for sid, s in sessions.items() for e in _session_entries(sid, s, src)]

    def message(
        rowid: int, sid: Any, role, content, call_id, calls, tool_name, reasoning, reasoning_content, ts
    ):
        sid = str(sid)
        s = sessions.get(sid, {})
        msg = {
            "role": role,
            "content": content,
            "tool_call_id": call_id,
            "name": tool_name,
            "reasoning": reasoning,
            "reasoning_content": reasoning_content,
        }
        base = {
            "agent": AGENT,
            "session_id": sid,
            "parent_session_id": nonempty(s.get("parent_session_id")),
            "ts": iso(ts),
            "model": nonempty(s.get("model")) if role == "assistant" else None,
            "source_path": src,
            "source_offset": rowid,
            "record_id": f"{sid}:m{rowid}",
        }
        raw = orjson.dumps([role, content, calls], default=str)
        return raw, lambda unknown: _row_entries(msg, calls, base, unknown)

    cols = "session_id, role, content, tool_call_id, tool_calls, tool_name, reasoning, reasoning_content"
    got.read("messages", cols, message, top=top, rowid="id", ts="timestamp")
    yield got.batch_now()


def _row_entries(msg: dict, calls: Any, base: dict, unknown_types: list[str]) -> list[dict]:
    """Entries of one ``messages`` row (its ``tool_calls`` JSON text parsed; raises
    on damaged JSON)."""
    if msg["role"] not in KNOWN_ROLES:
        unknown_types.append(f"role:{msg['role']}")
    if calls:
        msg = dict(msg, tool_calls=orjson.loads(calls))
    return message_entries(msg, base)


def _read_json(
    file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> Iterator[Batch]:
    path = file.path
    return read_document(
        file, wm, PARSER_VERSION, lambda raw, doc, state, idle: parse_json_session(doc, path), batch_bytes
    )


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("sessions", "id"), ("messages", "session_id"))
_read_db = database_reader(
    AGENT, PARSER_VERSION, _probe, _read_rows, f"cannot read {DB_NAME}", vault=VAULT_TABLES
)
_read_jsonl = record_reader(PARSER_VERSION, parse_record, init_state)


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """``state.db`` by new messages, a ``.jsonl`` by byte offset, a ``.json`` by hash."""
    mode = mode_for(file.path)
    fn = _read_db if mode == "sqlite" else _read_jsonl if mode == "append" else _read_json
    return fn(file, wm, batch_bytes)

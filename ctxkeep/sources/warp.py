"""Warp (the agentic terminal) Agent Mode conversations.

Where: ``$WARP_DIR`` else Warp's data dir holding ``warp.sqlite``:
``~/.local/state/warp-terminal`` (Linux), ``~/Library/Group Containers/
2BBY89MBSN.dev.warp/Library/Application Support/dev.warp.Warp-Stable`` (macOS),
``~/AppData/Local/warp/Warp/data`` (Windows) (agentsview 0.46 ``internal/parser/
warp_paths.go`` warpDefaultDirs, ``types.go`` AgentWarp, env ``WARP_DIR``).

Format facts (agentsview 0.46 ``internal/parser/warp.go`` and ``warp_test.go``, whose
schema is Warp's): ``ai_queries(id INTEGER PRIMARY KEY, exchange_id TEXT UNIQUE,
conversation_id, start_ts DATETIME (``YYYY-MM-DD HH:MM:SS[.ffffff]``, UTC), input TEXT
(JSON ``[{"Query": {text, context}}]``), working_directory, output_status, model_id,
planning_model_id, coding_model_id)``: one row per exchange, appended; and
``agent_conversations(id INTEGER PRIMARY KEY, conversation_id UNIQUE,
conversation_data TEXT (JSON), last_modified_at TIMESTAMP)``, a row rewritten as the
conversation goes: ``conversation_data.conversation_usage_metadata {token_usage
[{model_id, warp_tokens, byok_tokens}], tool_usage_metadata {run_command_stats {count,
…}, read_files_stats, grep_stats, apply_file_diff_stats {count, lines_added,
lines_removed, files_changed}, …}}``.

What Warp keeps locally is the user's side: each exchange's query (a ``user``
``message``, ``record_id`` ``<conversation>:<exchange id>``, time ``start_ts``, project
``working_directory``, the exchange's ``model_id`` as model and its
``output_status`` ``meta`` beside it when it is not a success). The agent's replies
and individual tool calls are not stored; the conversation's tool counts and token
totals are (a ``meta`` entry ``tool_usage`` with the counts per tool, updated when
the row changes). Token usage is a single total per model (Warp credits, no
input/output split), so no usage row is written; the totals are in the ``meta``
entry's text. Both tables are read by ``rowid`` + their time column
(``readers.sqlite.changed_rows``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at, nonempty, sqlite_time_iso
from ctxkeep.sources.contract import Batch, Discovery, DiscoveryContext, Mode
from ctxkeep.sources.readers.sqlite import (
    ChangedRows,
    DbRead,
    as_bytes,
    database_reader,
    json_object_of,
)

AGENT = "warp"
PARSER_VERSION = 1
MODE: Mode = "sqlite"

DB_NAME = "warp.sqlite"


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$WARP_DIR`` when set, else the Linux, macOS and Windows data dirs."""
    env = ctx.env.get("WARP_DIR")
    if env:
        return [Path(env).expanduser()]
    h = ctx.home
    return [
        h / ".local" / "state" / "warp-terminal",
        h.joinpath(
            "Library",
            "Group Containers",
            "2BBY89MBSN.dev.warp",
            "Library",
            "Application Support",
            "dev.warp.Warp-Stable",
        ),
        h.joinpath("AppData", "Local", "warp", "Warp", "data"),
    ]


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``warp.sqlite`` in each data dir and configured dir."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        d.searched.append(root / DB_NAME)
        d.add(root / DB_NAME, MODE)
    d.explain_empty(roots(ctx)[0], f"no {DB_NAME} in Warp's data dirs")
    return d


def matches(path: Path) -> bool:
    """Warp's ``warp.sqlite`` given with ``--path``."""
    return path.name == DB_NAME


def _probe(conn) -> tuple[int, int]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "ai_queries" not in tables:
        raise ValueError("no ai_queries table of Warp's shape")
    top_q = conn.execute("SELECT coalesce(max(rowid), 0) FROM ai_queries").fetchone()[0]
    top_c = (
        conn.execute("SELECT coalesce(max(rowid), 0) FROM agent_conversations").fetchone()[0]
        if "agent_conversations" in tables
        else -1
    )
    return top_q, top_c


def query_text(raw: Any) -> str:
    """The user's text of an exchange's ``input`` (``[{"Query": {text}}]``); the JSON
    as it is for any other shape. Raises ValueError for input that is not JSON."""
    items = orjson.loads(raw) if isinstance(raw, str | bytes) else raw
    texts = (
        [dict_at(x, "Query").get("text") for x in items if isinstance(x, dict)]
        if isinstance(items, list)
        else []
    )
    found = [t for t in texts if isinstance(t, str) and t.strip()]
    return "\n".join(t.strip() for t in found) if found else compact_json(items, 4000)


def usage_summary(data: dict) -> str:
    """``tool_usage`` text of a conversation: tool counts and token totals."""
    meta = dict_at(data, "conversation_usage_metadata")
    tools = {
        k.removesuffix("_stats"): as_int(v.get("count"))
        for k, v in dict_at(meta, "tool_usage_metadata").items()
        if isinstance(v, dict)
    }
    tools = {k: n for k, n in tools.items() if n}
    tokens = [
        {
            "model": nonempty(t.get("model_id")),
            "warp_tokens": as_int(t.get("warp_tokens")) or 0,
            "byok_tokens": as_int(t.get("byok_tokens")) or 0,
        }
        for t in meta.get("token_usage") or []
        if isinstance(t, dict)
    ]
    return compact_json({"tools": tools, "tokens": tokens})


def _read_rows(rd: DbRead, tops: tuple[int, int]) -> Iterator[Batch]:
    top_q, top_c = tops
    got, src = ChangedRows(rd), str(rd.path)
    project: dict[str, str] = {}

    def query(rowid: int, xid: Any, cid: Any, raw_input: Any, cwd: Any, status: Any, model: Any, ts: Any):
        cid = str(cid)
        if nonempty(cwd):
            project[cid] = cwd
        base = {
            "agent": AGENT,
            "session_id": cid,
            "native_id": nonempty(xid),
            "project_dir": nonempty(cwd),
            "ts": sqlite_time_iso(ts),
            "model": nonempty(model),
            "source_path": src,
            "source_offset": rowid,
            "record_id": f"{cid}:{xid or rowid}",
        }
        raw = as_bytes(raw_input)
        return raw, lambda _u: _exchange(raw, base, status)

    def conversation(rowid: int, cid: Any, data: Any, modified: Any):
        e = {
            "agent": AGENT,
            "session_id": str(cid),
            "project_dir": project.get(str(cid)),
            "ts": sqlite_time_iso(modified),
            "role": "system",
            "kind": "meta",
            "tool_name": "tool_usage",
            "part": 0,
            "source_path": src,
            "source_offset": rowid,
        }
        raw = as_bytes(data, "{}")
        return raw, lambda _u: _usage_entry(raw, e)

    cols = "exchange_id, conversation_id, input, working_directory, output_status, model_id"
    got.read("ai_queries", cols, query, top=top_q, ts="start_ts")
    if top_c >= 0:
        cols, ts = "conversation_id, conversation_data", "last_modified_at"
        got.read("agent_conversations", cols, conversation, top=top_c, ts=ts, key="mark_conv")
    yield got.batch_now()


def _exchange(raw: bytes, base: dict, status: Any) -> list[dict]:
    got = [dict(base, part=0, role="user", kind="message", text=query_text(raw))]
    if nonempty(status) and status.lower() not in ("success", "succeeded", "completed"):
        got.append(dict(base, part=1, role="system", kind="meta", tool_name="output_status", text=status))
    return got


def _usage_entry(raw: bytes, e: dict) -> list[dict]:
    text = usage_summary(json_object_of(raw, "conversation_data"))
    return [dict(e, text=text, record_id=f"{e['session_id']}:tool_usage:{text}")]


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("ai_queries", "conversation_id"), ("agent_conversations", "conversation_id"))

#: new exchanges and changed conversations of ``warp.sqlite``
read = database_reader(
    AGENT, PARSER_VERSION, _probe, _read_rows, f"cannot read {DB_NAME}", vault=VAULT_TABLES
)

"""Forge (antinomyhq's ``forge`` coding agent) conversations.

Where: ``$FORGE_DIR`` else ``~/.forge`` (all platforms, under the user's home; agentsview
0.46 ``internal/parser/types.go`` AgentForge, ``DefaultDirs .forge``, env ``FORGE_DIR``):
one SQLite database ``<dir>/.forge.db`` (``forge.go`` ForgeDBFilename).

Format facts (agentsview 0.46 ``internal/parser/forge.go`` and ``forge_test.go``, whose
schema is Forge's): ``conversations(conversation_id TEXT PRIMARY KEY, title TEXT,
workspace_id BIGINT, context TEXT (JSON), created_at TIMESTAMP, updated_at TIMESTAMP
(text ``YYYY-MM-DD HH:MM:SS.fffffffff``, UTC), metrics TEXT)``. A conversation's
``context`` is rewritten whole as it grows: ``rowid`` + ``COALESCE(updated_at,
created_at)`` is the high-water mark (``readers.sqlite.changed_rows``) and a changed row
is parsed again whole (entries dedup by stable ids). ``context``: ``{conversation_id,
messages [item]}``, an item ``{message {text {role (System | User | Assistant), content,
raw_content {Text}, model, timestamp (RFC 3339), tool_calls [{name, call_id,
arguments}], reasoning_details [{text}]}} | {tool {name, call_id, output {is_error,
values [{text}]}}}}, usage {prompt_tokens {actual}, completion_tokens {actual},
cached_tokens {actual}}}``. The System message carries the working directory as
``<current_working_directory>…</current_working_directory>``. A ``task`` tool call's
``arguments.session_id`` names the sub-agent's conversation (``collectForgeToolCalls``).

Entries: ``record_id`` ``<conversation>:<item index>`` (parts: reasoning, text, tool
calls); the System message is a ``meta`` entry (``tool_name`` ``system``); a tool result
whose ``output.is_error`` is true is prefixed ``[error]``. A conversation started by a
``task`` call read in the same pass gets that conversation as ``parent_session_id``.
Usage: one row per item whose ``usage`` counts any token (``usage_key``
``forge:<conversation>:<item index>``): input = ``prompt_tokens`` (the cached tokens are
counted apart, as agentsview's forgeUsageJSON does), cache read = ``cached_tokens``,
output = ``completion_tokens``; the item's ``model``. Times: the message's
``timestamp``, else (tool results, which carry none) the time of the message before,
else the row's ``created_at``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxkeep.sources._util import as_int, compact_json, dict_at, nonempty, sqlite_time_iso, title_entry
from ctxkeep.sources.contract import Batch, Discovery, DiscoveryContext, Mode
from ctxkeep.sources.readers.sqlite import (
    ChangedRows,
    DbRead,
    as_bytes,
    database_reader,
    json_object_of,
)

AGENT = "forge"
PARSER_VERSION = 1
MODE: Mode = "sqlite"

DB_NAME = ".forge.db"
_CWD = re.compile(r"<current_working_directory>\s*(.*?)\s*</current_working_directory>", re.S)


def root(ctx: DiscoveryContext) -> Path:
    """``$FORGE_DIR`` when set, else ``~/.forge``."""
    return ctx.env_dir("FORGE_DIR", ctx.home / ".forge")


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``.forge.db`` in the Forge dir and configured dirs."""
    d = Discovery(AGENT)
    for base in [root(ctx), *ctx.extra_dirs]:
        d.searched.append(base / DB_NAME)
        d.add(base / DB_NAME, MODE)
    d.explain_empty(root(ctx), f"no {DB_NAME} in {root(ctx)}")
    return d


def matches(path: Path) -> bool:
    """Forge's ``.forge.db`` given with ``--path``."""
    return path.name == DB_NAME


def _probe(conn) -> int:
    cols = {r[1] for r in conn.execute("PRAGMA table_info(conversations)")}
    if not {"conversation_id", "context", "created_at"} <= cols:
        raise ValueError("no conversations table of Forge's shape")
    return conn.execute("SELECT coalesce(max(rowid), 0) FROM conversations").fetchone()[0]


def _tool_output(output: Any) -> str:
    if not isinstance(output, dict):
        return "" if output is None else compact_json(output, 4000)
    values = [v.get("text") for v in output.get("values") or [] if isinstance(v, dict)]
    text = "".join(t for t in values if isinstance(t, str))
    if not text:
        text = nonempty(output.get("text")) or compact_json(output, 4000)
    return f"[error] {text}" if output.get("is_error") is True else text


def _usage(item: dict, e: dict, key: str, model: str | None) -> list[dict]:
    u = dict_at(item, "usage")
    prompt, out_, cached = (
        as_int(dict_at(u, k).get("actual")) or 0
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens")
    )
    if not (prompt or out_ or cached):
        return []
    m = model or "forge-unknown"
    return [
        dict(
            e,
            record_id=f"{e['record_id']}:usage",
            part=0,
            role="system",
            kind="meta",
            tool_name="usage",
            native_id=None,
            model=m,
            text=f"usage {m}",
            input_tokens=prompt,
            output_tokens=out_,
            cache_read_tokens=cached,
            cache_creation_tokens=0,
            usage_key=key,
        )
    ]


def conversation_entries(
    doc: dict, cid: str, created: str | None, src: str, rowid: int, subagents: dict[str, str]
) -> list[dict]:
    """Entry dicts of one conversation ``context`` (module doc); the sub-agent
    conversations its ``task`` calls name are added to ``subagents`` (child → parent).
    Raises ValueError for a context without a ``messages`` list."""
    items = doc.get("messages")
    if not isinstance(items, list):
        raise ValueError("conversation context has no messages list")
    cwd = None
    for item in items:
        text = dict_at(dict_at(item, "message"), "text") if isinstance(item, dict) else {}
        found = _CWD.search(text.get("content") or "") if isinstance(text.get("content"), str) else None
        if found:
            cwd = found.group(1)
            break
    out: list[dict] = []
    last = created
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        msg = dict_at(item, "message")
        e = {
            "agent": AGENT,
            "session_id": cid,
            "project_dir": cwd,
            "ts": last,
            "source_path": src,
            "source_offset": rowid,
            "record_id": f"{cid}:{i}",
        }
        if "tool" in msg:
            tool = dict_at(msg, "tool")
            out.append(
                dict(
                    e,
                    part=0,
                    role="tool",
                    kind="tool_result",
                    native_id=nonempty(tool.get("call_id")),
                    tool_name=nonempty(tool.get("name")),
                    text=_tool_output(tool.get("output")),
                )
            )
            continue
        text = dict_at(msg, "text")
        if not text:
            out.append(
                dict(
                    e, part=0, role="system", kind="meta", tool_name="unknown", text=compact_json(item, 2000)
                )
            )
            continue
        role = str(text.get("role") or "").lower()
        model = nonempty(text.get("model"))
        e["ts"] = last = nonempty(text.get("timestamp")) or last
        body = nonempty(text.get("content")) or nonempty(dict_at(text, "raw_content").get("Text")) or ""
        got: list[dict] = []
        if role == "user":
            got.append(dict(e, role="user", kind="message", text=body))
        elif role == "assistant":
            e["model"] = model
            thinking = "\n\n".join(
                d["text"].strip()
                for d in text.get("reasoning_details") or []
                if isinstance(d, dict) and nonempty(d.get("text"))
            )
            if thinking:
                got.append(dict(e, role="assistant", kind="thinking", text=thinking))
            if body:
                got.append(dict(e, role="assistant", kind="message", text=body))
            for call in text.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                args = call.get("arguments")
                name = nonempty(call.get("name"))
                got.append(
                    dict(
                        e,
                        role="assistant",
                        kind="tool_call",
                        native_id=nonempty(call.get("call_id")),
                        tool_name=name,
                        text=args
                        if isinstance(args, str)
                        else compact_json(args)
                        if args is not None
                        else "",
                    )
                )
                child = nonempty(dict_at(call, "arguments").get("session_id")) if name == "task" else None
                if child:
                    subagents[child] = cid
        else:
            got.append(dict(e, role="system", kind="meta", tool_name=role or "unknown", text=body))
        for j, x in enumerate(got):
            x["part"] = j
        out += got + _usage(item, e, f"forge:{cid}:{i}", model)
    return out


def _read_rows(rd: DbRead, top: int) -> Iterator[Batch]:
    got, src = ChangedRows(rd), str(rd.path)
    subagents: dict[str, str] = {}

    def conversation(rowid: int, cid: Any, title: Any, context: Any, created: Any, _updated: Any):
        if context is None:  # a conversation with no turns yet
            return None
        raw, sid = as_bytes(context), nonempty(cid) or str(rowid)

        def parse(_unknown: list[str]) -> list[dict]:
            out = conversation_entries(
                json_object_of(raw, "context"), sid, sqlite_time_iso(created), src, rowid, subagents
            )
            if nonempty(title):
                project = out[0]["project_dir"] if out else None
                ts = sqlite_time_iso(created)
                out.append(
                    title_entry(
                        AGENT,
                        sid,
                        title,
                        src,
                        ts=ts,
                        project_dir=project,
                        offset=rowid,
                        record_id=f"{sid}:title",
                    )
                )
            return out

        return raw, parse

    ts = "COALESCE(updated_at, created_at)"
    got.read("conversations", "conversation_id, title, context, created_at", conversation, top=top, ts=ts)
    for e in got.entries:
        parent = subagents.get(e["session_id"])
        if parent:
            e["parent_session_id"] = parent
            e["is_sidechain"] = True
    yield got.batch_now()


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("conversations", "conversation_id", "COALESCE(updated_at, created_at)"),)

#: changed conversations of ``.forge.db``
read = database_reader(
    AGENT, PARSER_VERSION, _probe, _read_rows, f"cannot read {DB_NAME}", vault=VAULT_TABLES
)

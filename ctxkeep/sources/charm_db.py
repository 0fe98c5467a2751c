"""The SQLite session database of the Go ``opencode`` (opencode-ai/opencode, 2025) and
of its successor Crush (charmbracelet/crush), which kept the schema.

Format facts (the real databases in ``shared/corpus``: ``code/noora/.opencode/
opencode.db``, Go opencode, 2025-05; ``code/dbos-transact-golang/.crush/crush.db``,
Crush, 2025-08; and opencode-ai/opencode ``internal/db/migrations``,
``internal/message/content.go``):

- ``sessions(id, parent_session_id, title, message_count, prompt_tokens,
  completion_tokens, cost, [summary, summarized_at,] updated_at, created_at
  [, summary_message_id])``: the only usage these agents store. ``cost`` (USD) is the
  session's sum, but ``prompt_tokens``/``completion_tokens`` are **not** totals: the
  agent's ``TrackUsage`` adds each response's cost to ``cost`` and *assigns* the
  response's tokens (opencode-ai/opencode ``internal/llm/agent/agent.go`` @ f0571f5,
  lines 494-507, and charmbracelet/crush the same file @ 8a8ab5c / 04500aa:
  ``sess.Cost += cost``, ``sess.PromptTokens = usage.InputTokens +
  usage.CacheCreationTokens``, ``sess.CompletionTokens = usage.OutputTokens +
  usage.CacheReadTokens``; Crush @ 37f36e9, 2026-08, ``internal/agent/agent.go``
  ``updateSessionTokenCounters``: prompt = input + cache read, completion = output, still
  assigned; a summarize sets prompt 0 and completion the summary's output). So the row
  holds the last response's context, cache reads counted as completion in the older
  versions. The ``messages`` table has no token columns in any version (migrations
  of both repositories, to 20260127). Hence a session's usage row carries the logged
  cost and **unknown tokens** (null: "tokens not recorded by the agent"; a report never
  prices nor sums them); it is counted on the day the session started and, the row
  naming no model, takes the model of its assistant ``messages`` (``session_models``).
  Known: a sub-agent (task tool) session's cost is added to its parent's as well
  (``agent-tool.go`` ``parentSession.Cost += updatedSession.Cost``); the corpus has no
  sub-agent session;
- ``messages(id, session_id, role, parts, model, created_at, updated_at,
  finished_at [, provider])``: ``role`` user/assistant/tool; ``parts`` a JSON array of
  ``{type, data}`` with type ``text`` {text}, ``reasoning`` {thinking},
  ``image_url`` {url, detail}, ``binary`` {path, mime_type, data}, ``tool_call``
  {id, name, input (a JSON string), type, finished}, ``tool_result`` {tool_call_id,
  name, content, metadata, is_error}, ``finish`` {reason, time[, message, details]};
- timestamps: Go opencode writes ISO-8601 TEXT; Crush writes INTEGER **Unix
  seconds** although its schema comments say milliseconds (both handled: a number
  above 10^11 is read as milliseconds);
- the ``updated_at`` triggers bump a row on every UPDATE; with the rowid that makes
  a per-row high-water mark (``readers.sqlite.changed_rows``; there is no index on
  ``updated_at``, so pages are keyed on the rowid). A message is rewritten while it streams: an
  assistant message without ``finished_at`` and without a ``finish`` part, updated
  in the last ``STALE_SECONDS``, is left for the next run (the mark does not pass
  it); older ones are taken as they are.
- the database has no working directory: the project is the folder that holds the
  agent's data dir (``<project>/.opencode``, ``<project>/.crush``), which is where
  both agents put it by default.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from ctxkeep.sources._util import as_float, compact_json, dict_at, media_placeholder
from ctxkeep.sources.contract import Batch, quarantine_row
from ctxkeep.sources.readers.sqlite import (
    DbRead,
    advance_mark,
    changed_rows,
    database_reader,
    db_fingerprint,
    db_watermark,
    parse_row,
    settle_fingerprint,
)
from ctxkeep.timeutil import format_epoch

STALE_SECONDS = 24 * 3600


def to_iso(v) -> str | None:
    """A Go-opencode/Crush timestamp (ISO text, Unix seconds or milliseconds) as
    ISO-8601 UTC text; None when missing or unreadable."""
    if v is None or v == "":
        return None
    if isinstance(v, (int, float)) or (isinstance(v, str) and v.isdigit()):
        x = float(v)
        if x <= 0:
            return None
        if x > 1e11:
            x /= 1000.0
        return format_epoch(x)
    return str(v)


def _epoch(v) -> float | None:
    iso = to_iso(v)
    if not iso:
        return None
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def project_of(db: Path) -> str:
    """The project dir of a project-local database: the parent of its data dir."""
    return str(db.parent.parent)


def _is_complete(role: str, parts: list, finished_at, updated_at, now: float) -> bool:
    if role != "assistant" or finished_at:
        return True
    if any(isinstance(p, dict) and p.get("type") == "finish" for p in parts):
        return True
    t = _epoch(updated_at)
    return t is not None and now - t > STALE_SECONDS


def message_entries(
    agent: str, row: dict, parts: list, project: str, src: str, parent_sid: str | None
) -> list[dict]:
    """Entry dicts (keys of ``SOURCE_SCHEMA``) of one ``messages`` row.

    One entry per part: text → message, reasoning → thinking, tool_call → tool_call,
    tool_result → tool_result (role tool), image/binary → a placeholder message; a
    ``finish`` part only when it reports an error or cancellation (meta); unknown
    part types → meta (named in ``tool_name``). ``record_id`` is the message id (for a
    row without one: ``<session>:rowid:<rowid>``), and
    ``part`` the index of the part, so a re-read row dedups.
    """
    role = row["role"] if row["role"] in ("user", "assistant", "tool", "system") else "system"
    model = row.get("model") or None
    mid = None if row["id"] in (None, "") else str(row["id"])
    # a row without an id (damaged, or written by a tool other than the agent) keeps
    # one record id per row, so its parts never merge with another such row's
    rid = mid or f"{row['session_id']}:rowid:{row['rowid']}"
    base = {
        "agent": agent,
        "session_id": row["session_id"],
        "parent_session_id": parent_sid,
        "native_id": mid,
        "project_dir": project,
        "ts": to_iso(row["created_at"]),
        "model": model if role == "assistant" else None,
        "is_sidechain": parent_sid is not None,
        "source_path": src,
        "source_offset": row["rowid"],
        "record_id": rid,
    }
    out = []
    for i, p in enumerate(parts):
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        d = dict_at(p, "data")
        e = dict(base, part=i, role=role)
        if t == "text":
            e.update(kind="message", text=str(d.get("text") or ""))
        elif t == "reasoning":
            e.update(kind="thinking", text=str(d.get("thinking") or d.get("text") or ""))
        elif t == "tool_call":
            e.update(
                kind="tool_call",
                tool_name=d.get("name"),
                native_id=d.get("id"),
                text=d.get("input") if isinstance(d.get("input"), str) else compact_json(d.get("input")),
            )
        elif t == "tool_result":
            e.update(
                role="tool",
                kind="tool_result",
                native_id=d.get("tool_call_id"),
                tool_name=d.get("name") or None,
                text=str(d.get("content") or ""),
            )
        elif t == "finish":
            reason = d.get("reason")
            if reason in (None, "end_turn", "stop", "tool_use", "max_tokens") and not d.get("message"):
                continue
            msg = " ".join(str(x) for x in (d.get("message"), d.get("details")) if x)
            e.update(role="system", kind="meta", tool_name=f"finish:{reason}", text=msg)
        elif t == "image_url":
            e.update(kind="message", text=f"[image {d.get('url', '')[:200]}]")
        elif t == "binary":
            data = d.get("data") or ""
            e.update(
                kind="message",
                text=f"{media_placeholder('binary', d.get('mime_type'), len(data))}"
                f" {d.get('path') or ''}".rstrip(),
            )
        else:
            e.update(role="system", kind="meta", tool_name=str(t), text=compact_json(d, 2000))
        out.append(e)
    return out


def session_entries(agent: str, s: dict, project: str, src: str, model: str | None = None) -> list[dict]:
    """A meta entry per ``sessions`` row carrying the session's logged ``cost`` (USD)
    as usage with unknown (null) tokens (``usage_key`` ``<agent>:<session id>``; a
    re-read replaces the tokens with null and keeps the larger cost: the agent's cost
    only grows) when a cost is logged, and
    ``model`` (the session's model from ``messages.model``: ``session_models``), and a
    summary entry when the session has a ``summary`` text (Go opencode). The row's
    ``prompt_tokens``/``completion_tokens`` are the last response's (module docstring):
    they are not booked."""
    sid = s["id"]
    ts = to_iso(s.get("created_at"))
    base = {
        "agent": agent,
        "session_id": sid,
        "parent_session_id": s.get("parent_session_id") or None,
        "project_dir": project,
        "ts": ts,
        "source_path": src,
        "source_offset": 0,
        "is_sidechain": bool(s.get("parent_session_id")),
        "role": "system",
    }
    logged = as_float(s.get("cost"))
    e = dict(
        base,
        kind="meta",
        tool_name="session",
        native_id=sid,
        record_id=f"{sid}:session",
        text=str(s.get("title") or ""),
        model=model or None,
    )
    if logged:
        # the session's cost as the agent summed it (USD); its tokens: not recorded
        e.update(
            input_tokens=None,
            output_tokens=None,
            cache_read_tokens=None,
            cache_creation_tokens=None,
            cost_usd=logged,
            usage_key=f"{agent}:{sid}",
        )
    res = [e]
    if s.get("summary"):
        res.append(
            dict(
                base,
                kind="summary",
                record_id=f"{sid}:summary",
                ts=to_iso(s.get("summarized_at")) or ts,
                text=str(s["summary"]),
            )
        )
    return res


def _probe(conn) -> tuple[set, list[dict], int, dict[str, str]]:
    """The ``messages`` columns, every ``sessions`` row, the largest message rowid and
    each session's model (``session_models``)."""
    cols = {c[1] for c in conn.execute("PRAGMA table_info(messages)")}
    sessions = [
        dict(zip([c[0] for c in cur.description], r, strict=False))
        for cur in [conn.execute("SELECT * FROM sessions")]
        for r in cur.fetchall()
    ]
    top = conn.execute("SELECT coalesce(max(rowid), 0) FROM messages").fetchone()[0]
    models = session_models(conn) if "model" in cols else {}
    return cols, sessions, top, models


def session_models(conn) -> dict[str, str]:
    """session id -> the model of its assistant ``messages`` rows (the most frequent,
    ties to the one seen first by rowid): the sessions' token totals carry no model."""
    rows = conn.execute(
        "SELECT session_id, model, count(*), min(rowid) FROM messages WHERE role = 'assistant' "
        "AND coalesce(model, '') <> '' GROUP BY session_id, model ORDER BY session_id, 3 DESC, 4"
    ).fetchall()
    out: dict[str, str] = {}
    for sid, model, _n, _first in rows:
        out.setdefault(sid, model)
    return out


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("sessions", "id", "updated_at"), ("messages", "session_id", "updated_at"))


def reader(agent: str, parser_version: int):
    """The ``read(file, wm, batch_bytes)`` of a Go-opencode/Crush source.

    Reads new and changed rows of one database. The watermark's ``state["mark"]`` is
    ``{"rowid", "ts"}``: the largest rowid and ``updated_at`` of the message rows read
    (``readers.sqlite.changed_rows``: new rows by rowid, rewritten rows by
    ``updated_at >= ts``; rows at that instant are read again and dedup);
    ``state["fp"]`` the file fingerprint. Batches before the last keep the previous
    mark (a run stopped half-way reads those rows again; entry ids dedup them). A
    database replaced by another file (new inode), or whose rowids went back, is read
    from the start. A row whose ``parts`` is not JSON is quarantined with its rowid as
    the offset. A database that cannot be opened yields one batch with a quarantine
    row (``cannot open database: …``); one that lacks a table quarantines without a
    watermark (``database read failed: …``, ``readers.sqlite.guarded``).
    """
    return database_reader(
        agent,
        parser_version,
        _probe,
        _read_rows,
        "cannot open database",
        probe_errors=False,
        vault=VAULT_TABLES,
    )


def _read_rows(rd: DbRead, probed: tuple, page_rows: int = 500) -> Iterator[Batch]:
    path, agent, parser_version, state, before = rd.path, rd.agent, rd.parser_version, rd.state, rd.before
    src = str(path)
    project = project_of(path)
    cols, sessions, top, models = probed
    mark = dict(state.get("mark") or {})
    now = time.time()
    if top < (mark.get("rowid") or 0):
        mark = {}  # rows were deleted and the table refilled: read it all again
    parents = {s.get("id"): s.get("parent_session_id") or None for s in sessions}
    quarantine: list[dict] = []
    entries = [
        e
        for s in sessions
        for e in parse_row(
            quarantine,
            path,
            0,
            orjson.dumps(s, default=str),
            f"sessions row {s.get('id')}",
            session_entries,
            agent,
            s,
            project,
            src,
            models.get(s.get("id")),
        )
    ]
    sel = [
        "rowid",
        "id",
        "session_id",
        "role",
        "parts",
        "model",
        "created_at",
        "updated_at",
        "finished_at",
    ] + (["provider"] if "provider" in cols else [])
    select = f"SELECT {', '.join(sel)} FROM messages"
    new_mark = dict(mark)
    deferred_min = None
    nrows = nbytes = 0
    for rows in changed_rows(path, select, "rowid", "updated_at", mark, page_rows):
        for r in rows:
            row = dict(zip(sel, r, strict=False))
            nrows += 1
            nbytes += len(row["parts"] or "")
            new_mark = advance_mark(new_mark, row["rowid"], row["updated_at"])
            try:
                parts = orjson.loads(row["parts"] or "[]")
                if not isinstance(parts, list):
                    raise ValueError("parts is not a JSON array")
            except (orjson.JSONDecodeError, ValueError, TypeError) as e:
                raw = (
                    (row["parts"] or "").encode("utf-8", "replace") if isinstance(row["parts"], str) else b""
                )
                quarantine.append(quarantine_row(path, row["rowid"], raw, f"messages row {row['id']}: {e}"))
                continue
            if not _is_complete(row["role"], parts, row["finished_at"], row["updated_at"], now):
                u = row["updated_at"]
                deferred_min = u if deferred_min is None or u < deferred_min else deferred_min
                continue
            entries += parse_row(
                quarantine,
                path,
                row["rowid"],
                row["parts"],
                f"messages row {row['id']}",
                message_entries,
                agent,
                row,
                parts,
                project,
                src,
                parents.get(row["session_id"]),
            )
        if len(entries) >= page_rows * 4:
            yield Batch(
                entries,
                quarantine,
                db_watermark(
                    path,
                    agent,
                    parser_version,
                    dict(state, mark=mark),
                    {"main": before["main"], "wal": "partial"},
                ),
                lines=nrows,
                bytes_read=nbytes,
            )
            entries, quarantine, nrows, nbytes = [], [], 0, 0
    if deferred_min is not None and new_mark.get("ts") is not None and deferred_min < new_mark["ts"]:
        new_mark["ts"] = deferred_min  # a message still streaming: read it again next time
    fp = settle_fingerprint(before, db_fingerprint(path))
    if deferred_min is not None:
        fp = dict(fp, wal="deferred")
    yield Batch(
        entries,
        quarantine,
        db_watermark(path, agent, parser_version, dict(state, mark=new_mark), fp),
        lines=nrows,
        bytes_read=nbytes,
    )

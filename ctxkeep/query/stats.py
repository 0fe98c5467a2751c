"""Read-only counts and sizes of a store (``ctxkeep stats``, MCP ``ctx_stats``;
per agent for ``ctxkeep sources``). Rows are read by column name (``_one``, ``_rows``)."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path

from ctxkeep.schema import REASONING_RECORDED, cache_write_shown
from ctxkeep.sinks.files import store_files


def _rows(conn: sqlite3.Connection, sql: str) -> list[dict]:
    """The rows of ``sql`` as dicts keyed by their column names."""
    cur = conn.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=False)) for r in cur.fetchall()]


def _one(conn: sqlite3.Connection, sql: str) -> dict:
    """The one row of an aggregate ``sql`` as a dict keyed by its column names."""
    return _rows(conn, sql)[0]


def _kinds(conn: sqlite3.Connection) -> list[dict]:
    """Rows ``{agent, kind, n}``: entries per agent and kind, by agent then kind."""
    return _rows(conn, "SELECT agent, kind, count(*) AS n FROM entries GROUP BY 1, 2")


#: a redaction marker, ``[REDACTED:<kind>]`` (``transforms.redact.MARKER_RE``, repeated
#: here so that stats does not import Polars with the redaction rules; a test keeps them equal)
MARKER_RE = re.compile(r"\[REDACTED(?::([a-z0-9-]+))?\]")


def _marker_counts(texts) -> Counter:
    c: Counter = Counter()
    for t in texts:
        c.update(m.group(1) or "unknown" for m in MARKER_RE.finditer(t))
    return c


def redaction_counts(conn: sqlite3.Connection) -> dict:
    """Values redacted in the store, per kind, counted from the ``[REDACTED:<kind>]``
    markers (the values themselves are gone). Texts are stored once per distinct text,
    so a text shared by several entries counts once.

    The texts holding a marker are found through ``fts_words`` (the unicode61 tokens of
    ``[REDACTED:kind]`` include ``redacted``), so the cost follows the number of such
    texts, not the store's size; each is read whole (all its chunks) so that a marker
    cut by a chunk boundary counts. Without a usable FTS index the chunks are scanned.
    A text that quotes a marker literally (a conversation about redaction) counts too.

    Returns ``{"texts": {kind: n}, "quarantine": {kind: n}, "texts_with_redactions":
    n distinct texts, "total": n}`` (plain ``[REDACTED]`` of older versions: kind
    ``unknown``)."""
    try:
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT ch.content_id FROM fts_words f JOIN chunks ch ON ch.chunk_id = f.rowid "
                "WHERE fts_words MATCH 'text : redacted'"
            )
        ]
    except sqlite3.DatabaseError:
        ids = [
            r[0]
            for r in conn.execute("SELECT DISTINCT content_id FROM chunks WHERE instr(text, '[REDACTED') > 0")
        ]
    texts: Counter = Counter()
    with_markers = 0
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows = conn.execute(
            f"SELECT content_id, text FROM chunks WHERE content_id IN ({','.join('?' * len(part))}) "
            "ORDER BY content_id, seq",
            part,
        ).fetchall()
        joined: dict[int, list[str]] = {}
        for cid, text in rows:
            joined.setdefault(cid, []).append(text)
        for parts in joined.values():
            c = _marker_counts(["".join(parts)])
            if c:
                with_markers += 1
                texts.update(c)
    quarantine = _marker_counts(
        ("" if raw is None else bytes(raw).decode("utf-8", "replace")) + "\n" + (reason or "")
        for raw, reason in conn.execute(
            "SELECT raw, reason FROM quarantine WHERE instr(raw, CAST('[REDACTED' AS BLOB)) > 0 "
            "OR instr(reason, '[REDACTED') > 0"
        )
    )
    return {
        "texts": dict(sorted(texts.items())),
        "quarantine": dict(sorted(quarantine.items())),
        "texts_with_redactions": with_markers,
        "total": sum(texts.values()) + sum(quarantine.values()),
    }


def store_stats(conn: sqlite3.Connection, home: Path) -> dict:
    """Counts per agent and kind, sessions, bytes, tokens, quarantine and file sizes.

    Returns ``{"entries": int, "sessions": int, "agents": {agent: {"entries", "sessions",
    "text_bytes", "token_estimate", "kinds": {kind: n}}}, "status": {status: n},
    "contents": {"distinct": n, "bytes": n, "token_estimate": n}, "usage": {"responses",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
    "reasoning_tokens" (of the agents that record them), "agents": {agent: the same
    figures, each None when the agent recorded none (``reasoning_tokens``: an agent not
    in ``schema.REASONING_RECORDED``; ``cache_creation_tokens``: ``schema.CACHE_WRITE_UNRECORDED``)}},
    "quarantine": {"skipped": n, "repaired": n}, "files": {name: bytes},
    "last_ingest": ISO-8601 UTC text of the last successful ingest run's end, or None
    (a run that finds nothing new records no run: the text says "last new data"),
    "redactions": ``redaction_counts``}``.
    Byte figures are bytes, token figures tokens; ``sessions`` counts (agent, session)
    pairs.
    """
    agents = {
        r.pop("agent"): {**r, "kinds": {}}
        for r in _rows(
            conn,
            "SELECT agent, count(*) AS entries, count(DISTINCT session_id) AS sessions, "
            "coalesce(sum(text_bytes),0) AS text_bytes, coalesce(sum(token_estimate),0) AS token_estimate "
            "FROM entries GROUP BY agent ORDER BY agent",
        )
    }
    for r in _kinds(conn):
        agents[r["agent"]]["kinds"][r["kind"]] = r["n"]
    totals = _one(
        conn,
        "SELECT count(*) AS entries, count(DISTINCT agent || ':' || session_id) AS sessions FROM entries",
    )
    status = {
        r["status"]: r["n"] for r in _rows(conn, "SELECT status, count(*) AS n FROM entries GROUP BY status")
    }
    contents = _one(
        conn,
        'SELECT count(*) AS "distinct", coalesce(sum(bytes),0) AS bytes, '
        "coalesce(sum(token_estimate),0) AS token_estimate FROM contents",
    )
    recorded = ", ".join(f"'{a}'" for a in sorted(REASONING_RECORDED))
    usage = _one(
        conn,
        "SELECT count(*) AS responses, coalesce(sum(input_tokens),0) AS input_tokens, "
        "coalesce(sum(output_tokens),0) AS output_tokens, "
        "coalesce(sum(cache_read_tokens),0) AS cache_read_tokens, "
        "coalesce(sum(cache_creation_tokens),0) AS cache_creation_tokens, "
        f"coalesce(sum(reasoning_tokens) FILTER (WHERE agent IN ({recorded})),0) AS reasoning_tokens FROM usage",
    )
    # per agent: a sum is null when the agent recorded none of it (Crush's tokens, Claude
    # Code's reasoning: ``schema.REASONING_RECORDED``), never 0
    usage["agents"] = {
        r.pop("agent"): r
        for r in _rows(
            conn,
            "SELECT agent, count(*) AS responses, sum(input_tokens) AS input_tokens, "
            "sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens, "
            "sum(cache_creation_tokens) AS cache_creation_tokens, "
            f"CASE WHEN agent IN ({recorded}) THEN coalesce(sum(reasoning_tokens),0) END AS reasoning_tokens "
            "FROM usage GROUP BY agent ORDER BY agent",
        )
    }
    for agent, r in usage["agents"].items():  # Codex logs no cache write: not 0
        r["cache_creation_tokens"] = cache_write_shown(agent, r["cache_creation_tokens"])
    q = {
        r["action"]: r["n"]
        for r in _rows(conn, "SELECT action, count(*) AS n FROM quarantine GROUP BY action")
    }
    last = _one(conn, "SELECT max(finished_at) AS last FROM runs WHERE flow='ingest' AND status='ok'")["last"]
    return {
        "entries": totals["entries"],
        "sessions": totals["sessions"],
        "agents": agents,
        "status": status,
        "contents": contents,
        "usage": usage,
        "quarantine": {"skipped": q.get("skipped", 0), "repaired": q.get("repaired", 0)},
        "files": store_files(home),
        "last_ingest": last,
        "redactions": redaction_counts(conn),
    }


def agent_counts(conn: sqlite3.Connection) -> dict[str, dict]:
    """Per-agent figures of the store for ``ctxkeep sources``.

    Returns ``{agent: {"entries": n, "sessions": n, "kinds": {kind: n},
    "quarantined": n (lines or rows skipped), "repaired": n, "files_ingested": n
    (files with a watermark), "last_ingest": ISO-8601 UTC text of the agent's latest
    watermark update, or None}}``. Agents absent from the store are absent here.
    """
    out: dict[str, dict] = {}

    def row(agent: str) -> dict:
        return out.setdefault(
            agent,
            {
                "entries": 0,
                "sessions": 0,
                "kinds": {},
                "quarantined": 0,
                "repaired": 0,
                "files_ingested": 0,
                "last_ingest": None,
            },
        )

    for r in _rows(
        conn,
        "SELECT agent, count(*) AS entries, count(DISTINCT session_id) AS sessions "
        "FROM entries GROUP BY agent",
    ):
        row(r.pop("agent")).update(r)
    for r in _kinds(conn):
        row(r["agent"])["kinds"][r["kind"]] = r["n"]
    for r in _rows(conn, "SELECT agent, action, count(*) AS n FROM quarantine GROUP BY 1, 2"):
        if r["agent"]:
            row(r["agent"])["quarantined" if r["action"] == "skipped" else "repaired"] += r["n"]
    for r in _rows(
        conn,
        "SELECT agent, count(*) AS files_ingested, max(updated_at) AS last_ingest "
        "FROM watermarks GROUP BY agent",
    ):
        row(r.pop("agent")).update(r)
    return out

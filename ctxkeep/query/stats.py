"""Read-only counts and sizes of a store (``ctxkeep stats``, MCP ``ctx_stats``;
per agent for ``ctxkeep sources``). Rows are read by column name (``_one``, ``_rows``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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


def store_stats(conn: sqlite3.Connection, home: Path) -> dict:
    """Counts per agent and kind, sessions, bytes, tokens, quarantine and file sizes.

    Returns ``{"entries": int, "sessions": int, "agents": {agent: {"entries", "sessions",
    "text_bytes", "token_estimate", "kinds": {kind: n}}}, "status": {status: n},
    "contents": {"distinct": n, "bytes": n, "token_estimate": n}, "usage": {"responses",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"},
    "quarantine": {"skipped": n, "repaired": n}, "files": {name: bytes},
    "last_ingest": ISO-8601 UTC text of the last successful ingest run's end, or None}``.
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
    usage = _one(
        conn,
        "SELECT count(*) AS responses, coalesce(sum(input_tokens),0) AS input_tokens, "
        "coalesce(sum(output_tokens),0) AS output_tokens, "
        "coalesce(sum(cache_read_tokens),0) AS cache_read_tokens, "
        "coalesce(sum(cache_creation_tokens),0) AS cache_creation_tokens FROM usage",
    )
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

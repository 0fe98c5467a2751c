"""Read-only counts and sizes of a store (``ctxkeep stats``, MCP ``ctx_stats``)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxkeep.sinks.files import store_files


def store_stats(conn: sqlite3.Connection, home: Path) -> dict:
    """Counts per agent and kind, sessions, bytes, tokens, quarantine and file sizes.

    Returns ``{"entries": int, "sessions": int, "agents": {agent: {"entries", "sessions",
    "text_bytes", "token_estimate", "kinds": {kind: n}}}, "status": {status: n},
    "contents": {"distinct": n, "bytes": n, "token_estimate": n}, "usage": {...tokens},
    "quarantine": {"skipped": n, "repaired": n}, "files": {name: bytes},
    "last_ingest": iso | None}``. Byte figures are bytes, token figures tokens.
    """
    agents: dict[str, dict] = {}
    for agent, n, sessions, tb, tok in conn.execute(
            "SELECT agent, count(*), count(DISTINCT session_id), coalesce(sum(text_bytes),0), "
            "coalesce(sum(token_estimate),0) FROM entries GROUP BY agent ORDER BY agent"):
        agents[agent] = {"entries": n, "sessions": sessions, "text_bytes": tb,
                         "token_estimate": tok, "kinds": {}}
    for agent, kind, n in conn.execute("SELECT agent, kind, count(*) FROM entries GROUP BY 1, 2"):
        agents[agent]["kinds"][kind] = n
    total, sessions = conn.execute(
        "SELECT count(*), count(DISTINCT agent || ':' || session_id) FROM entries").fetchone()
    status = dict(conn.execute("SELECT status, count(*) FROM entries GROUP BY status").fetchall())
    distinct, cbytes, ctok = conn.execute(
        "SELECT count(*), coalesce(sum(bytes),0), coalesce(sum(token_estimate),0) FROM contents").fetchone()
    u = conn.execute("SELECT count(*), coalesce(sum(input_tokens),0), coalesce(sum(output_tokens),0), "
                     "coalesce(sum(cache_read_tokens),0), coalesce(sum(cache_creation_tokens),0) "
                     "FROM usage").fetchone()
    q = dict(conn.execute("SELECT action, count(*) FROM quarantine GROUP BY action").fetchall())
    last = conn.execute("SELECT max(finished_at) FROM runs WHERE flow='ingest' AND status='ok'").fetchone()[0]
    return {
        "entries": total, "sessions": sessions, "agents": agents, "status": status,
        "contents": {"distinct": distinct, "bytes": cbytes, "token_estimate": ctok},
        "usage": {"responses": u[0], "input_tokens": u[1], "output_tokens": u[2],
                  "cache_read_tokens": u[3], "cache_creation_tokens": u[4]},
        "quarantine": {"skipped": q.get("skipped", 0), "repaired": q.get("repaired", 0)},
        "files": store_files(home), "last_ingest": last,
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
        return out.setdefault(agent, {"entries": 0, "sessions": 0, "kinds": {}, "quarantined": 0,
                                      "repaired": 0, "files_ingested": 0, "last_ingest": None})
    for agent, n, sessions in conn.execute(
            "SELECT agent, count(*), count(DISTINCT session_id) FROM entries GROUP BY agent"):
        row(agent).update(entries=n, sessions=sessions)
    for agent, kind, n in conn.execute("SELECT agent, kind, count(*) FROM entries GROUP BY 1, 2"):
        row(agent)["kinds"][kind] = n
    for agent, action, n in conn.execute(
            "SELECT agent, action, count(*) FROM quarantine GROUP BY 1, 2"):
        if agent:
            row(agent)["quarantined" if action == "skipped" else "repaired"] += n
    for agent, n, last in conn.execute(
            "SELECT agent, count(*), max(updated_at) FROM watermarks GROUP BY agent"):
        row(agent).update(files_ingested=n, last_ingest=last)
    return out

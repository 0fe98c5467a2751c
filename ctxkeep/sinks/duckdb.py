"""The DuckDB analytics store (``analytics.duckdb``): derived from SQLite, rebuildable.

DuckDB cannot attach SQLite offline (its sqlite extension is downloaded at run time),
so rows move through Arrow: ``sync`` copies the SQLite ``entries`` rows above the
high-water mark (SQLite rowid), replays status changes logged in SQLite ``status_log``
above its own mark (``status_seq``) and replaces ``usage`` (small: one row per API
response).
A sync that fails (e.g. a notebook holds the file) is caught up by the next one.

Views (see ``VIEWS``): ``daily_usage`` (day UTC, agent, model, project: tokens),
``sessions``, ``tool_calls``, ``context_growth`` (cumulative tokens per session).
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import duckdb
import pyarrow as pa

from ctxkeep.schema import ENTRY_SCHEMA, STORED_COLUMNS, USAGE_COLUMNS

DB_NAME = "analytics.duckdb"
SYNC_ROWS = 200_000

_DUCK_TYPES = {"String": "VARCHAR", "Int64": "BIGINT", "Int32": "INTEGER",
               "Boolean": "BOOLEAN"}


def _duck_type(col: str) -> str:
    t = ENTRY_SCHEMA[col]
    if col == "ts":
        return "TIMESTAMPTZ"
    return _DUCK_TYPES.get(type(t).__name__ if not isinstance(t, type) else t.__name__, "VARCHAR")


DDL = [
    "CREATE TABLE IF NOT EXISTS meta(key VARCHAR PRIMARY KEY, value BIGINT)",
    "CREATE TABLE IF NOT EXISTS entries(sqlite_rowid BIGINT, "
    + ", ".join(f"{c} {_duck_type(c)}" for c in STORED_COLUMNS) + ")",
    "CREATE TABLE IF NOT EXISTS usage(usage_key VARCHAR, agent VARCHAR, session_id VARCHAR, "
    "project_dir VARCHAR, ts TIMESTAMPTZ, model VARCHAR, "
    + ", ".join(f"{c} BIGINT" for c in USAGE_COLUMNS) + ", entry_id VARCHAR)",
]

VIEWS = {
    "daily_usage": """
        SELECT CAST(timezone('UTC', ts) AS DATE) AS day, agent, model, project_dir,
               count(*) AS responses,
               sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
               sum(cache_read_tokens) AS cache_read_tokens,
               sum(cache_creation_tokens) AS cache_creation_tokens,
               sum(reasoning_tokens) AS reasoning_tokens,
               sum(input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens) AS total_tokens
        FROM usage GROUP BY ALL""",
    "sessions": """
        SELECT agent, session_id, any_value(parent_session_id) AS parent_session_id,
               any_value(project_dir) AS project_dir, min(ts) AS started, max(ts) AS ended,
               count(*) AS entries, sum(token_estimate) AS token_estimate,
               sum(text_bytes) AS text_bytes, bool_or(is_sidechain) AS is_sidechain
        FROM entries GROUP BY agent, session_id""",
    "tool_calls": """
        SELECT agent, tool_name, count(*) AS calls, count(DISTINCT session_id) AS sessions,
               sum(token_estimate) AS token_estimate
        FROM entries WHERE kind = 'tool_call' GROUP BY agent, tool_name""",
    "context_growth": """
        SELECT agent, session_id, ts, kind, token_estimate,
               sum(token_estimate) OVER (PARTITION BY agent, session_id ORDER BY ts, sqlite_rowid
                                         ROWS UNBOUNDED PRECEDING) AS cumulative_tokens
        FROM entries""",
}


def connect(home: Path, *, readonly: bool = False) -> duckdb.DuckDBPyConnection:
    """Open ``<home>/analytics.duckdb`` (created 0600 with tables and views)."""
    path = Path(home) / DB_NAME
    if readonly:
        return duckdb.connect(str(path), read_only=True)
    new = not path.exists()
    old = os.umask(0o077)
    try:
        con = duckdb.connect(str(path))
    finally:
        os.umask(old)
    if new:
        os.chmod(path, 0o600)
    for stmt in DDL:
        con.execute(stmt)
    for name, sql in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    return con


def _hwm(con) -> int:
    # fetchall: DuckDB 2.x leaves a result open after fetchone(), and the connection
    # then refuses register()/execute() ("connection has an unfinished result")
    rows = con.execute("SELECT value FROM meta WHERE key='entries_rowid'").fetchall()
    return rows[0][0] if rows else 0


def _arrow(cur: sqlite3.Cursor, names: list[str]) -> pa.Table:
    rows = cur.fetchall()
    cols = list(zip(*rows)) if rows else [[] for _ in names]
    return pa.table({n: pa.array(c) if rows else pa.array([], pa.string()) for n, c in zip(names, cols)})


def sync(sqlite_conn: sqlite3.Connection, home: Path, *, rebuild: bool = False,
         con: duckdb.DuckDBPyConnection | None = None, usage: bool = True) -> dict:
    """Bring DuckDB up to date with SQLite.

    Copies ``entries`` rows with rowid above the stored high-water mark (all rows when
    ``rebuild``), in slices of ``SYNC_ROWS``, replays ``status_log`` and replaces
    ``usage`` (unless ``usage`` is False: an intermediate sync during an ingest leaves
    usage to the closing one). ``con``: an open connection from ``connect(home)`` to
    reuse (left open; repeated syncs then skip the open and DDL), else one is opened
    and closed here. Returns ``{"entries_synced": int, "usage_rows": int,
    "entries_rowid": int, "status_seq": int}`` (usage_rows 0 when ``usage`` is False;
    the last two: the SQLite entries rowid and status_log seq DuckDB now holds, for
    ``sqlite_store.mark_analytics_synced``). Raises duckdb.IOException when another process holds
    the file (the caller reports it; the next sync catches up).
    """
    own = con is None
    con = connect(home) if own else con
    try:
        if rebuild:
            con.execute("DELETE FROM entries")
            con.execute("DELETE FROM meta WHERE key IN ('entries_rowid', 'status_seq')")
        hwm = _hwm(con)
        names = ["sqlite_rowid"] + STORED_COLUMNS
        synced = 0
        while True:
            cur = sqlite_conn.execute(
                f"SELECT rowid, {', '.join(STORED_COLUMNS)} FROM entries WHERE rowid > ? "
                f"ORDER BY rowid LIMIT ?", (hwm, SYNC_ROWS))
            tbl = _arrow(cur, names)
            if tbl.num_rows == 0:
                break
            con.register("_batch", tbl)
            con.execute("BEGIN")
            con.execute(
                "INSERT INTO entries SELECT sqlite_rowid, "
                + ", ".join(f"CAST({c} AS TIMESTAMPTZ)" if c == "ts" else
                            (f"CAST({c} AS BOOLEAN)" if c == "is_sidechain" else c)
                            for c in STORED_COLUMNS) + " FROM _batch")
            hwm = max(tbl.column("sqlite_rowid").to_pylist())
            con.execute("INSERT OR REPLACE INTO meta VALUES('entries_rowid', ?)", [hwm])
            con.execute("COMMIT")
            con.unregister("_batch")
            synced += tbl.num_rows
        _replay_status(sqlite_conn, con)
        marks = {"entries_rowid": _hwm(con), "status_seq": _status_seq(con)}
        if not usage:
            return {"entries_synced": synced, "usage_rows": 0, **marks}
        ucols = ["usage_key", "agent", "session_id", "project_dir", "ts", "model",
                 *USAGE_COLUMNS, "entry_id"]
        utbl = _arrow(sqlite_conn.execute(f"SELECT {', '.join(ucols)} FROM usage"), ucols)
        con.register("_usage", utbl)
        con.execute("BEGIN")
        con.execute("DELETE FROM usage")
        if utbl.num_rows:
            con.execute("INSERT INTO usage SELECT " + ", ".join(
                f"CAST({c} AS TIMESTAMPTZ)" if c == "ts" else c for c in ucols) + " FROM _usage")
        con.execute("COMMIT")
        return {"entries_synced": synced, "usage_rows": utbl.num_rows, **marks}
    finally:
        if own:
            con.close()


def append_entries(con: duckdb.DuckDBPyConnection, first_rowid: int, table: pa.Table) -> int | None:
    """Append entries just committed to SQLite without reading them back from it.

    ``table``: the Arrow table of the rows a ``sqlite_store.load_batch`` inserted, in
    insert order, columns ``STORED_COLUMNS`` as in ``schema.ENTRY_SCHEMA`` (``ts``
    timestamp[us, UTC], ``is_sidechain`` bool), whose SQLite rowids are
    ``first_rowid`` … ``first_rowid + num_rows - 1``. Their statuses as loaded; a
    status changed later is replayed from ``status_log`` by the next ``sync``.

    Returns the number of rows appended (the high-water mark moves to the last one);
    0 when they are already synced; None when they do not follow the high-water mark
    (rows committed before them are missing: call ``sync``, which reads SQLite).
    """
    n = table.num_rows
    hwm = _hwm(con)
    if n == 0 or first_rowid + n - 1 <= hwm:
        return 0
    if first_rowid != hwm + 1:
        return None
    tbl = table.select(STORED_COLUMNS).append_column(
        "sqlite_rowid", pa.array(range(first_rowid, first_rowid + n), pa.int64()))
    con.register("_append", tbl)
    try:
        con.execute("BEGIN")
        try:
            con.execute("INSERT INTO entries SELECT sqlite_rowid, " + ", ".join(STORED_COLUMNS)
                        + " FROM _append")
            con.execute("INSERT OR REPLACE INTO meta VALUES('entries_rowid', ?)", [first_rowid + n - 1])
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.unregister("_append")
    return n


def _status_seq(con) -> int:
    rows = con.execute("SELECT value FROM meta WHERE key='status_seq'").fetchall()
    return int(rows[0][0]) if rows else 0


def _replay_status(sqlite_conn: sqlite3.Connection, con) -> int:
    """Apply SQLite ``status_log`` rows above DuckDB's ``status_seq`` mark to DuckDB
    ``entries`` (rows synced before their status changed), in order; returns rows read."""
    rows = con.execute("SELECT value FROM meta WHERE key='status_seq'").fetchall()
    seq = rows[0][0] if rows else 0
    try:
        rows = sqlite_conn.execute("SELECT seq, entry_id, status FROM status_log WHERE seq > ? "
                                   "ORDER BY seq", (seq,)).fetchall()
    except sqlite3.OperationalError:  # a store written before status_log existed
        return 0
    if not rows:
        return 0
    # the last change per entry wins (rows are in seq order)
    final = {eid: st for _, eid, st in rows}
    tbl = pa.table({"entry_id": list(final), "status": list(final.values())})
    con.register("_status", tbl)
    con.execute("BEGIN")
    con.execute("UPDATE entries SET status = s.status FROM _status s WHERE entries.entry_id = s.entry_id")
    con.execute("INSERT OR REPLACE INTO meta VALUES('status_seq', ?)", [rows[-1][0]])
    con.execute("COMMIT")
    con.unregister("_status")
    return len(rows)


def delete_where(home: Path, where_sql: str, params: list) -> None:
    """Delete rows from DuckDB ``entries`` and ``usage`` matching ``where_sql`` (used by
    purge; the SQLite store is the source of truth)."""
    path = Path(home) / DB_NAME
    if not path.exists():
        return
    con = connect(home)
    try:
        con.execute(f"DELETE FROM entries WHERE {where_sql}", params)
        con.execute(f"DELETE FROM usage WHERE {where_sql}", params)
    finally:
        con.close()

"""The DuckDB analytics store (``analytics.duckdb``): derived from SQLite, rebuildable.

DuckDB cannot attach SQLite offline (its sqlite extension is downloaded at run time),
so rows move through Arrow: ``sync`` copies the SQLite ``entries`` rows above the
high-water mark (SQLite rowid), replays status changes logged in SQLite ``status_log``
above its own mark (``status_seq``), upserts ``usage`` by usage key with its cost
(``transforms.cost``), and refreshes the texts analytics needs (session titles and
first prompts, the tool results' error flags) and the compress runs.
A sync that fails (e.g. a notebook holds the file) is caught up by the next one.

The model (tables, views and macros; columns, units and grain in ``docs/analytics.md``)
is in ``model.sql`` beside this file: ``usage``, ``sessions``, ``daily_usage(tz)``,
``tool_calls``, ``context_growth`` / ``context_turns``, ``compression``, ``archive``
(the Parquet retention archive) and ``all_entries`` / ``history`` (store + archive).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sqlite3
import zlib
from importlib.metadata import version
from pathlib import Path

import duckdb
import pyarrow as pa

from ctxkeep.schema import (
    CACHE_SPLIT_COLUMNS,
    ENTRY_TYPE_NAMES,
    STORED_COLUMNS,
    USAGE_COLUMNS,
    USAGE_ROW_COLUMNS,
    reasoning_beside_sql,
)
from ctxkeep.sinks.analytics_file import set_aside_if_damaged
from ctxkeep.sinks.files import ANALYTICS_DB as DB_NAME
from ctxkeep.sinks.files import PRICES_FILE

#: rows of SQLite ``entries`` copied to DuckDB per slice (``sync``): each slice is read
#: as Python rows, then Arrow, so its size bounds the sync's transient memory. 10 GB
#: tree, a full rebuild of 5.4 M entries: peak anonymous RSS 1.25 GB at 200,000 rows
#: a slice (with ``WRITER_MEMORY_LIMIT``: 1.12 GB), 0.66 GB at 25,000 with it
SYNC_ROWS = 25_000
#: DuckDB's memory limit on a writable connection (``SET memory_limit``; DuckDB's
#: default is 80 % of RAM): its buffer pool kept every block an ingest appended (+22 MB
#: a 200,000-row slice, never released: an ingest of a 10 GB tree peaked at 1.88 GB
#: RSS); capped, it writes blocks out and spills to ``analytics.duckdb.tmp/`` when an
#: operation needs more (a full 10 GB rebuild, usage upsert and all, runs within it)
WRITER_MEMORY_LIMIT = "256MB"

_DUCK_TYPES = {"String": "VARCHAR", "Int64": "BIGINT", "Int32": "INTEGER", "Boolean": "BOOLEAN"}


def _duck_type(col: str) -> str:
    if col == "ts":
        return "TIMESTAMPTZ"
    # by the dtype's name: no Polars import (the side process syncs DuckDB without it)
    return _DUCK_TYPES.get(ENTRY_TYPE_NAMES[col], "VARCHAR")


#: the model's version: an analytics file made by an older one has its derived tables
#: dropped at connect and refilled by the next ``sync``
MODEL_VERSION = 3

DDL = [
    "CREATE TABLE IF NOT EXISTS meta(key VARCHAR PRIMARY KEY, value BIGINT)",
    "CREATE TABLE IF NOT EXISTS entries(sqlite_rowid BIGINT, "
    + ", ".join(f"{c} {_duck_type(c)}" for c in STORED_COLUMNS)
    + ")",
    "CREATE TABLE IF NOT EXISTS usage(usage_key VARCHAR PRIMARY KEY, agent VARCHAR, "
    "session_id VARCHAR, project_dir VARCHAR, ts TIMESTAMPTZ, model VARCHAR, "
    + ", ".join(f"{c} BIGINT" for c in USAGE_COLUMNS)
    + ", entry_id VARCHAR, "
    + ", ".join(f"{c} BIGINT" for c in CACHE_SPLIT_COLUMNS)
    + ", model_source VARCHAR, logged_cost_usd DOUBLE, calculated_cost_usd DOUBLE, "
    "cost_usd DOUBLE, cost_source VARCHAR, machine VARCHAR)",
    # ``usage`` summed per 15-minute UTC bucket (``BUCKET_SECONDS``): what the period
    # reports read (``query.reports``), refilled with ``usage`` (``_refresh_buckets``)
    "CREATE TABLE IF NOT EXISTS usage_buckets(bucket TIMESTAMPTZ, agent VARCHAR, model VARCHAR, "
    "model_source VARCHAR, project_dir VARCHAR, responses BIGINT, "
    + ", ".join(f"{c} BIGINT" for c in USAGE_COLUMNS)
    + ", logged_usd DECIMAL(38, 12), calculated_usd DECIMAL(38, 12), auto_usd DECIMAL(38, 12), "
    "n_logged BIGINT, n_calculated BIGINT, n_auto BIGINT)",
    "CREATE TABLE IF NOT EXISTS session_text(agent VARCHAR, session_id VARCHAR, title VARCHAR, "
    "first_prompt VARCHAR, PRIMARY KEY(agent, session_id))",
    "CREATE TABLE IF NOT EXISTS tool_errors(entry_id VARCHAR PRIMARY KEY)",
    # ``entries`` (rewound left out) summed per (agent, session, project, parent): what
    # ``sinks.session_list`` reads instead of every entry while its marks are current
    # (``_sync_session_parts``)
    "CREATE TABLE IF NOT EXISTS session_parts(agent VARCHAR, session_id VARCHAR, project_dir VARCHAR, "
    "parent_session_id VARCHAR, n BIGINT, first_us BIGINT, last_us BIGINT, first_row BIGINT, "
    "messages BIGINT, tool_calls BIGINT, token_estimate HUGEINT)",
    "CREATE TABLE IF NOT EXISTS compress_files(run_id BIGINT, started_at TIMESTAMPTZ, "
    "finished_at TIMESTAMPTZ, status VARCHAR, path VARCHAR, agent VARCHAR, bytes_before BIGINT, "
    "bytes_after BIGINT, tokens_before BIGINT, tokens_after BIGINT, image_tokens BIGINT)",
    # (a file made before it: ``image_tokens``, the images ``inline`` moved out of the file)
    "ALTER TABLE compress_files ADD COLUMN IF NOT EXISTS image_tokens BIGINT",
]
#: tables dropped when the file's model is older than ``MODEL_VERSION`` (``usage`` had
#: no key and no cost before version 2, no cache-write split before 3)
_DERIVED = ("usage", "usage_buckets", "session_text", "tool_errors", "compress_files", "session_parts")
#: the grain of ``usage_buckets``: every IANA zone's UTC offset (since 1980) is a multiple
#: of 15 minutes, so all responses of a bucket fall on one local date in any zone
BUCKET_SECONDS = 900
#: what the archive's columns are read as: ``STORED_COLUMNS``, text, archived_at
_ARCHIVE_DIR = "archive"
_TITLE_CHARS = 200
#: ``sync_usage`` reads SQLite ``usage`` in slices of this many rows
USAGE_SLICE_ROWS = 20_000
#: the SQLite usage columns DuckDB reads (the logged cost is read as ``logged_cost_usd``)
_UCOLS = [c for c in USAGE_ROW_COLUMNS if c != "cost_usd"]
#: a usage row whose tokens the agent did not record: every token column null and a
#: logged cost (``transforms.normalize.usage_frame``)
_TOKENS_UNKNOWN = (
    "(" + " AND ".join(f"{c} IS NULL" for c in USAGE_COLUMNS) + " AND logged_cost_usd IS NOT NULL)"
)
_INTS = (*USAGE_COLUMNS, *CACHE_SPLIT_COLUMNS)


def _archive_select(home: Path) -> str:
    cols = ", ".join(f"CAST({c} AS {_duck_type(c)}) AS {c}" for c in STORED_COLUMNS)
    root = Path(home).resolve() / _ARCHIVE_DIR
    if root.is_dir() and next(root.rglob("*.parquet"), None) is not None:
        glob = str(root / "**" / "*.parquet").replace("'", "''")
        return (
            f"SELECT {cols}, CAST(text AS VARCHAR) AS text, "
            f"CAST(archived_at AS TIMESTAMPTZ) AS archived_at FROM read_parquet('{glob}', "
            "union_by_name = true, hive_partitioning = false)"
        )
    empty = ", ".join(f"CAST(NULL AS {_duck_type(c)}) AS {c}" for c in STORED_COLUMNS)
    return (
        f"SELECT {empty}, CAST(NULL AS VARCHAR) AS text, CAST(NULL AS TIMESTAMPTZ) AS archived_at WHERE false"
    )


def _model_sql(home: Path) -> list[str]:
    text = (Path(__file__).with_name("model.sql")).read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    cols = ", ".join(f"e.{c}" for c in STORED_COLUMNS)
    body = "\n".join(lines).replace("{columns}", cols).replace("{archive}", _archive_select(home))
    return [s.strip() for s in body.split("\n;") if s.strip()]


def set_memory_limit(con, current: str, want: str) -> str:
    """Set DuckDB's ``memory_limit`` on ``con`` to ``want`` unless ``current`` (the
    limit set now) is it; returns the limit now set. Lowering it makes DuckDB drop or
    write out the blocks above it; a limit it cannot take now (blocks pinned) is left
    as it was."""
    if current == want:
        return current
    try:
        con.execute(f"SET memory_limit = '{want}'")
    except Exception:  # duckdb.Error: cannot free enough now; the next group tries again
        return current
    return want


def connect(home: Path, *, readonly: bool = False) -> duckdb.DuckDBPyConnection:
    """Open ``<home>/analytics.duckdb`` (created 0600); a writable open creates the
    tables and (re)creates the views and macros of ``model.sql`` when their text changed
    since the last open (the ``archive`` view
    over the Parquet files present now: none gives an empty view). Raises
    duckdb.IOException when another process holds the file."""
    path = Path(home) / DB_NAME
    if readonly:
        return duckdb.connect(str(path), read_only=True)
    try:
        return _open_writable(home, path)
    except duckdb.Error as e:
        if not set_aside_if_damaged(home, e):
            raise
    return _open_writable(home, path)  # a new file: the caller's sync fills it from SQLite


def _open_writable(home: Path, path: Path) -> duckdb.DuckDBPyConnection:
    new = not path.exists()
    old = os.umask(0o077)
    try:
        con = duckdb.connect(str(path))
    finally:
        os.umask(old)
    if new:
        os.chmod(path, 0o600)
    try:
        _prepare(con, home)
    except BaseException:
        con.close()
        raise
    return con


def _prepare(con: duckdb.DuckDBPyConnection, home: Path) -> None:
    """Settings, tables, views and macros of a writable connection (``connect``)."""
    # DuckDB's allocator hands freed memory back after each task from 16 MB on (default
    # 128 MB) and purges in background threads: an ingest appends to DuckDB for minutes,
    # and the memory of its appends and closing sync stayed in the process (1 GB
    # ingest's closing sync: 366 -> 229 MB left after it, same peak). Process-wide.
    con.execute("SET allocator_flush_threshold = '16MB'")
    con.execute("SET allocator_background_threads = true")
    con.execute(f"SET memory_limit = '{WRITER_MEMORY_LIMIT}'")
    # one transaction: each statement on its own committed (and wrote the WAL) apart; a
    # new file's ~20 statements took 0.27-0.34 s of wall, 0.10-0.13 s in one (2026-12-05,
    # under load; the ingest's analytics thread opens it while the main thread works).
    # A failure rolls all of it back (the caller closes the connection)
    con.execute("BEGIN TRANSACTION")
    con.execute(DDL[0])
    if _meta(con, "model_version") < MODEL_VERSION:
        for t in _DERIVED:
            con.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
        con.execute(
            "DELETE FROM meta WHERE key IN ('text_rowid', 'price_version', 'model_sql', "
            "'parts_rowid', 'parts_status_seq', 'parts_count', 'usage_rowid', 'usage_log_seq', 'usage_store')"
        )
    for stmt in DDL[1:]:
        con.execute(stmt)
    con.execute("INSERT OR REPLACE INTO meta VALUES('model_version', ?)", [MODEL_VERSION])
    stmts = _model_sql(home)
    digest = zlib.crc32("\n;".join(stmts).encode())
    if _meta(con, "model_sql") != digest:  # views unchanged since the last open: kept
        for stmt in stmts:
            con.execute(stmt)
        con.execute("INSERT OR REPLACE INTO meta VALUES('model_sql', ?)", [digest])
    con.execute("COMMIT")


def _meta(con, key: str) -> int:
    rows = con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchall()
    return int(rows[0][0]) if rows else 0


def _hwm(con) -> int:
    # fetchall: DuckDB 2.x leaves a result open after fetchone(), and the connection
    # then refuses register()/execute() ("connection has an unfinished result")
    rows = con.execute("SELECT value FROM meta WHERE key='entries_rowid'").fetchall()
    return rows[0][0] if rows else 0


def _arrow(cur: sqlite3.Cursor, names: list[str]) -> pa.Table:
    rows = cur.fetchall()
    cols: list = list(zip(*rows, strict=False)) if rows else [[] for _ in names]
    return pa.table(
        {n: pa.array(c) if rows else pa.array([], pa.string()) for n, c in zip(names, cols, strict=False)}
    )


def sync(
    sqlite_conn: sqlite3.Connection,
    home: Path,
    *,
    rebuild: bool = False,
    con: duckdb.DuckDBPyConnection | None = None,
    usage: bool = True,
    usage_only: tuple[int, set[str]] | None = None,
) -> dict:
    """Bring DuckDB up to date with SQLite.

    Copies ``entries`` rows with rowid above the stored high-water mark (all rows when
    ``rebuild``), in slices of ``SYNC_ROWS``, replays ``status_log``, and (unless
    ``usage`` is False: an intermediate sync during an ingest leaves them to the
    closing one) upserts ``usage`` (``sync_usage``), the session titles and tool error
    flags of the entries above their own mark, and the compress runs. ``con``: an open
    connection from ``connect(home)`` to reuse (left open; repeated syncs then skip
    the open and DDL), else one is opened and closed here. ``usage_only``: ``(after,
    keys)`` when DuckDB's usage rows are all SQLite rows with a rowid up to ``after``
    as a ``UsageSteps`` read them, and only ``keys`` among them may have changed since
    (``UsageSteps.fresh``: an ingest that filled an empty DuckDB, the writer's
    ``usage_held``): ``sync_usage`` compares just those rows and the rows above
    ``after`` (every row when the prices changed) (a file found damaged, at
    the open or during the sync, is moved aside and this sync fills a new one:
    ``analytics_file.set_aside_if_damaged``). Returns
    ``{"entries_synced": int, "usage_rows": int, "usage_changed": int,
    "unpriced_models": [str], "entries_rowid": int, "status_seq": int}`` (usage figures
    0/[] when ``usage`` is False; the last two: the SQLite entries rowid and status_log
    seq DuckDB now holds, for ``sqlite_store.mark_analytics_synced``). Raises
    duckdb.IOException when another process holds the file (the caller reports it; the
    next sync catches up); ValueError for a bad ``<home>/prices.toml``.
    """
    if con is not None:
        return _sync(sqlite_conn, home, con, rebuild=rebuild, usage=usage, usage_only=usage_only)
    con = connect(home)
    try:
        return _sync(sqlite_conn, home, con, rebuild=rebuild, usage=usage, usage_only=usage_only)
    except duckdb.Error as e:
        con.close()
        if not set_aside_if_damaged(home, e):  # damaged past the blocks connect reads
            raise
        con = connect(home)  # a new file
        return _sync(sqlite_conn, home, con, rebuild=True, usage=usage)
    finally:
        con.close()


def _sync(
    sqlite_conn: sqlite3.Connection,
    home: Path,
    con: duckdb.DuckDBPyConnection,
    *,
    rebuild: bool,
    usage: bool,
    usage_only: tuple[int, set[str]] | None = None,
) -> dict:
    """``sync`` on an open connection (left open)."""
    if rebuild:
        con.execute("DELETE FROM entries")
        con.execute(
            "DELETE FROM meta WHERE key IN ('entries_rowid', 'status_seq', 'text_rowid', "
            "'parts_rowid', 'parts_status_seq', 'parts_count', 'usage_rowid', 'usage_log_seq', 'usage_store')"
        )
        for t in ("session_text", "tool_errors", "session_parts"):
            con.execute(f"DELETE FROM {t}")
    hwm = _hwm(con)
    names = ["sqlite_rowid"] + STORED_COLUMNS
    synced = 0
    while True:
        cur = sqlite_conn.execute(
            f"SELECT rowid, {', '.join(STORED_COLUMNS)} FROM entries WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (hwm, SYNC_ROWS),
        )
        tbl = _arrow(cur, names)
        if tbl.num_rows == 0:
            break
        con.register("_batch", tbl)
        con.execute("BEGIN")
        con.execute(
            "INSERT INTO entries SELECT sqlite_rowid, "
            + ", ".join(
                f"CAST({c} AS TIMESTAMPTZ)"
                if c == "ts"
                else (f"CAST({c} AS BOOLEAN)" if c == "is_sidechain" else c)
                for c in STORED_COLUMNS
            )
            + " FROM _batch"
        )
        hwm = max(tbl.column("sqlite_rowid").to_pylist())
        con.execute("INSERT OR REPLACE INTO meta VALUES('entries_rowid', ?)", [hwm])
        con.execute("COMMIT")
        con.unregister("_batch")
        synced += tbl.num_rows
    _replay_status(sqlite_conn, con)
    marks = {"entries_rowid": _hwm(con), "status_seq": _status_seq(con)}
    if not usage:
        return {
            "entries_synced": synced,
            "usage_rows": 0,
            "usage_compared": 0,
            "usage_changed": 0,
            "unpriced_models": [],
            **marks,
        }
    u = sync_usage(sqlite_conn, con, home, only=None if rebuild else usage_only)
    _sync_session_parts(sqlite_conn, con)
    _sync_texts(sqlite_conn, con)
    _sync_compress(sqlite_conn, con)
    return {"entries_synced": synced, **u, **marks}


def _prices(home: Path) -> tuple[dict, int, str]:
    """The ``prices.toml`` overrides of ``home``, a fingerprint of the prices in force
    (genai-prices version + the file's text) and the file's ``prices_stamp`` (the CRC-32
    of the bytes read: what ``analytics_behind`` compares). Raises ConfigError for a file
    that does not parse or holds a wrong rate (``sinks.prices_file.parse_prices``)."""

    from ctxkeep.sinks.prices_file import parse_prices
    from ctxkeep.transforms import cost

    p = Path(home) / PRICES_FILE
    raw = p.read_bytes() if p.is_file() else b""
    overrides = parse_prices(home, raw)  # (parsed once; ConfigError names the file)
    text = raw.decode("utf-8")
    fp = zlib.crc32(f"{version('genai-prices')}\0{cost.LONG_CONTEXT!r}\0{text}".encode())
    return overrides, fp, str(zlib.crc32(raw))


def _codex_versions(sqlite_conn: sqlite3.Connection, sessions: list[str]) -> dict[str, str]:
    """session id -> Codex CLI version, from the text of the session's ``session_meta``
    entry (``sources.codex``: ``... (cli <version>, <originator>)``)."""

    out: dict[str, str] = {}
    for i in range(0, len(sessions), 500):
        part = sessions[i : i + 500]
        rows = sqlite_conn.execute(
            "SELECT e.session_id, ch.text FROM entry_rows e "
            "JOIN chunks ch ON ch.content_id = e.content_id AND ch.seq = 0 "
            f"WHERE e.agent = 'codex' AND e.tool_name = 'session_meta' AND e.session_id IN "
            f"({','.join('?' * len(part))})",
            part,
        ).fetchall()
        for sid, text in rows:
            m = re.search(r"\(cli ([0-9][^,)\s]*)", text or "")
            if m:
                out.setdefault(sid, m.group(1))
    return out


def _usage_select(sqlite_conn: sqlite3.Connection) -> tuple[list[str], pa.Schema]:
    """The select list of SQLite ``usage`` that ``_upsert_slice`` takes (``_UCOLS`` +
    ``logged_cost_usd``; NULL for a column a store before schema v5 lacks) and the
    Arrow schema of its rows."""
    scols = {r[1] for r in sqlite_conn.execute("PRAGMA table_info(usage)")}
    # a store before schema v5 has neither the cache split nor logged costs
    sel = [c if c in scols else f"NULL AS {c}" for c in _UCOLS]
    sel.append("cost_usd" if "cost_usd" in scols else "NULL")
    names = _UCOLS + ["logged_cost_usd"]
    schema = pa.schema(
        [
            (n, pa.float64() if n == "logged_cost_usd" else (pa.int64() if n in _INTS else pa.string()))
            for n in names
        ]
    )
    return sel, schema


def _usage_batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    """SQLite ``usage`` rows (``_usage_select``'s columns) as an Arrow record batch."""
    cols = list(zip(*rows, strict=True))
    return pa.record_batch([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)


def sync_usage(
    sqlite_conn: sqlite3.Connection,
    con: duckdb.DuckDBPyConnection,
    home: Path,
    only: tuple[int, set[str]] | None = None,
) -> dict:
    """Upsert DuckDB ``usage`` from SQLite ``usage`` by ``usage_key``: rows new or
    changed (tokens, cache split, model, time, logged cost) since the last sync are priced
    (``transforms.cost``, each at its own ``ts``) and written; keys gone from SQLite are
    deleted; all rows are re-priced when the prices changed (another genai-prices
    version, an edited ``prices.toml``). A logged cost is taken from a SQLite
    ``usage.cost_usd`` column when the store has one (USD). A row without a model gets
    the agent version's documented default (``cost.assumed_model``) with
    ``model_source = 'assumed'``. ``machine`` is this store's machine name
    (``sinks.machine.machine_name``: config ``machine``, else the hostname). The rates are looked up once per model and UTC day and
    the arithmetic is done in DuckDB; only tiered prices are computed per response in
    Python.

    SQLite is read in slices of ``USAGE_SLICE_ROWS`` rows, each compared, priced and
    written in a DuckDB transaction of its own before the next is read
    (``_upsert_slice``); the delete of the keys gone, the ``usage_buckets`` refill and
    the price mark follow in one more. Memory grows with a slice, not with the table
    (259,034 rows, a 2 GB tree's first closing sync: +558 MB RSS when the whole table
    was read, compared and written in one transaction; DuckDB keeps a transaction's
    rows in memory until it commits). A sync that fails half way leaves the slices
    written before it, each correct: the next one writes the rest, re-prices every row
    when the price mark was not moved, and ``usage_buckets`` is not fresh
    (``buckets_fresh``) until a sync completes.

    Which rows are compared: every row, unless ``only`` (``sync``'s ``usage_only``) or
    DuckDB's usage marks say what changed (``_logged_changes``: SQLite's ``usage_marks``
    recorded by the last sync, the rows above its rowid and the keys ``usage_log`` got
    since): then those rows alone, and the logged keys SQLite no longer holds are
    deleted (10 GB store, 1.3 M usage rows, after one note was indexed: 65 slices
    compared, 9.1 s, before). A partial compare after which DuckDB's row count is not
    SQLite's compares every row. Returns ``{"usage_rows": rows in SQLite,
    "usage_compared": rows read and compared, "usage_changed": rows written,
    "unpriced_models": sorted models that had no price, "prices_stamp": the price
    file's stamp, "usage_log_seq": the ``usage_log`` seq DuckDB now holds (None: not
    recorded), for ``mark_analytics_synced``'s prune}``."""
    from ctxkeep.sinks.machine import machine_name
    from ctxkeep.transforms import cost

    overrides, fp, stamp = _prices(home)
    sel, schema = _usage_select(sqlite_conn)
    host = machine_name(home, check=False)
    reprice = _meta(con, "price_version") != fp
    prices = _SlicePrices(cost.Pricer(overrides))
    # a renamed machine (config ``machine``): its rows carry the new name
    con.execute("UPDATE usage SET machine = ? WHERE machine IS DISTINCT FROM ?", [host, host])
    marks = usage_marks(sqlite_conn)  # read first: rows committed after are compared again next time
    logged: set[str] = set()
    if only is None and not reprice and marks is not None:
        plan = _logged_changes(sqlite_conn, con, marks)
        if plan is not None:
            only, logged = plan, plan[1]
    partial = only is not None and not reprice
    if partial:
        assert only is not None
        after, held = only
        cur = sqlite_conn.execute(
            f"SELECT {', '.join(sel)} FROM usage WHERE rowid > ? "
            f"UNION ALL SELECT {', '.join(sel)} FROM usage WHERE rowid <= ? AND usage_key IN (SELECT value FROM json_each(?))",
            (after, after, json.dumps(sorted(held))),
        )
    else:
        cur = sqlite_conn.execute(f"SELECT {', '.join(sel)} FROM usage")
    keys: list[pa.Array] = []  # every SQLite key (a slice's column each): what is not gone
    n = rows = 0
    while part := cur.fetchmany(USAGE_SLICE_ROWS):
        rb = _usage_batch(part, schema)
        del part
        if not partial or logged:
            keys.append(rb.column(0))
        rows += rb.num_rows
        n += _in_transaction(con, _upsert_slice, sqlite_conn, con, rb, reprice, prices, host)
        del rb
    compared = rows
    if partial:
        rows = sqlite_conn.execute("SELECT count(*) FROM usage").fetchone()[0]
    con.register("_keys", pa.table({"usage_key": pa.chunked_array(keys, pa.string())}))
    del keys
    if logged:  # a logged key SQLite no longer holds was deleted (or re-keyed)
        con.register("_logged", pa.table({"usage_key": pa.array(sorted(logged), pa.string())}))

    def close() -> bool:
        """The deletes, buckets and marks; False when a partial compare left DuckDB's
        row count other than SQLite's (the marks then deleted)."""
        if not partial:
            gone = con.execute(
                "DELETE FROM usage WHERE usage_key NOT IN (SELECT usage_key FROM _keys)"
            ).fetchall()
        elif logged:
            gone = con.execute(
                "DELETE FROM usage WHERE usage_key IN (SELECT usage_key FROM _logged) "
                "AND usage_key NOT IN (SELECT usage_key FROM _keys)"
            ).fetchall()
        else:
            gone = [(0,)]
        if n or reprice or gone[0][0] or not buckets_fresh(con):
            _refresh_buckets(con)
        if n or reprice:  # every row now priced with these prices
            con.execute("INSERT OR REPLACE INTO meta VALUES('price_version', ?)", [fp])
        if partial and con.execute("SELECT count(*) FROM usage").fetchall()[0][0] != rows:
            # a row the marks did not show (a rowid taken again, a VACUUM that renumbered
            # rowids): no marks, and every row is compared below
            con.execute("DELETE FROM meta WHERE key IN ('usage_rowid', 'usage_log_seq', 'usage_store')")
            return False
        if marks is not None:
            con.executemany(
                "INSERT OR REPLACE INTO meta VALUES(?, ?)",
                [["usage_rowid", marks[0]], ["usage_log_seq", marks[1]], ["usage_store", marks[2]]],
            )
        return True

    try:
        agreed = _in_transaction(con, close)
    finally:
        con.unregister("_keys")
        con.unregister("_logged")
    if not agreed:
        return sync_usage(sqlite_conn, con, home)
    unpriced = sorted(
        m
        for (m,) in con.execute(
            "SELECT DISTINCT model FROM usage WHERE cost_usd IS NULL AND model IS NOT NULL"
        ).fetchall()
    )
    return {
        "usage_rows": rows,
        "usage_compared": compared,
        "usage_changed": n,
        "unpriced_models": unpriced,
        "prices_stamp": stamp,
        "usage_log_seq": None if marks is None else marks[1],
    }


def usage_marks(sqlite_conn: sqlite3.Connection) -> tuple[int, int, int] | None:
    """SQLite ``usage``'s change mark: ``(top rowid, top usage_log seq, store id)``
    (the store id: the first 15 hex digits of ``meta.store_id`` as an integer, 0
    without one; DuckDB's ``meta`` values are BIGINT). A row inserted gets a rowid
    above the top; a row updated in place or deleted adds a ``usage_log`` row
    (``ddl.USAGE_LOG_TRIGGERS``). None for a store without ``usage_log`` (not yet
    opened writable by this ctxkeep): every row is compared."""
    try:
        seq = sqlite_conn.execute("SELECT coalesce(max(seq), 0) FROM usage_log").fetchone()[0]
    except sqlite3.OperationalError:
        return None
    top = sqlite_conn.execute("SELECT coalesce(max(rowid), 0) FROM usage").fetchone()[0]
    sid = sqlite_conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    return top, seq, int(sid[0][:15], 16) if sid else 0


def _logged_changes(
    sqlite_conn: sqlite3.Connection, con: duckdb.DuckDBPyConnection, marks: tuple[int, int, int]
) -> tuple[int, set[str]] | None:
    """``(after, keys)`` for ``sync_usage``'s partial compare when DuckDB's usage marks
    (``usage_rowid``, ``usage_log_seq``, ``usage_store``: SQLite's ``usage_marks`` when
    DuckDB's usage last equalled it) still tell what changed: DuckDB holds every SQLite
    row up to rowid ``after`` except ``keys`` (logged since). None (compare every row)
    when DuckDB has no marks, the store is another one, SQLite's marks went back (a
    store replaced by an older copy) or pruned log rows DuckDB did not see, or a
    migration logged a NULL key. ``after`` is DuckDB's rowid mark, or below the lowest
    rowid deleted since when the row at the mark was deleted (a new row may then have
    taken a deleted rowid)."""
    held = dict(
        con.execute(
            "SELECT key, value FROM meta WHERE key IN ('usage_rowid', 'usage_log_seq', 'usage_store')"
        ).fetchall()
    )
    if len(held) < 3 or held["usage_store"] != marks[2]:
        return None
    top, seq = int(held["usage_rowid"]), int(held["usage_log_seq"])
    if marks[0] < top or marks[1] < seq:
        return None
    first = sqlite_conn.execute("SELECT min(seq) FROM usage_log").fetchone()[0]
    if first is not None and first > seq + 1:
        return None  # rows DuckDB did not see were pruned
    keys: set[str] = set()
    gone: list[int] = []
    for key, rowid in sqlite_conn.execute(
        "SELECT usage_key, gone_rowid FROM usage_log WHERE seq > ? AND seq <= ?", (seq, marks[1])
    ):
        if key is None:
            return None
        keys.add(key)
        if rowid is not None:
            gone.append(rowid)
    after = top
    if top in gone:
        after = min(gone) - 1
    return after, keys


def _in_transaction(con: duckdb.DuckDBPyConnection, fn, *args):
    """``fn(*args)`` in a DuckDB transaction of its own: committed, or rolled back when
    it raises (re-raised). Returns what ``fn`` returned."""
    con.execute("BEGIN")
    try:
        out = fn(*args)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return out


class _SlicePrices:
    """The flat rates of each (model, UTC day) a sync has met (``cost.Pricer.rates``;
    ``"tiered"`` or None as it gives them), asked of the pricer once per key over all
    slices."""

    def __init__(self, pricer) -> None:

        self.pricer = pricer
        self.rates: dict[tuple, object] = {}
        self.today = dt.datetime.now(dt.UTC).date()

    def of(self, keys: list[tuple]) -> list:
        new = [k for k in keys if k not in self.rates]
        if new:
            got = [self.pricer.rates(m, d or self.today) for m, d in new]
            self.rates.update(zip(new, got, strict=True))
        return [self.rates[k] for k in keys]


def _upsert_slice(
    sqlite_conn: sqlite3.Connection,
    con: duckdb.DuckDBPyConnection,
    rb: pa.RecordBatch,
    reprice: bool,
    prices: _SlicePrices,
    host: str,
) -> int:
    """Write the rows of one slice of SQLite ``usage`` (``rb``: ``_UCOLS`` +
    ``logged_cost_usd``, ``ts`` as SQLite text) that DuckDB lacks or holds otherwise
    (every row when ``reprice``), priced, in the caller's transaction (``sync_usage``).
    Returns the rows written."""
    from ctxkeep.transforms import cost

    con.register("_usage", rb)
    try:
        same = " AND ".join(
            f"d.{c} IS NOT DISTINCT FROM s.{c}"
            for c in ("agent", "session_id", "project_dir", *_INTS, "entry_id", "logged_cost_usd")
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE _changed AS SELECT s.* REPLACE (CAST(s.ts AS TIMESTAMPTZ) AS ts), "
            f"CAST(CAST(s.ts AS TIMESTAMPTZ) AT TIME ZONE 'UTC' AS DATE) AS day "
            f"FROM _usage s LEFT JOIN usage d USING (usage_key) "
            f"WHERE d.usage_key IS NULL OR ? OR NOT ({same} AND d.ts IS NOT DISTINCT FROM CAST(s.ts AS TIMESTAMPTZ) "
            f"AND (d.model_source = 'assumed' OR d.model IS NOT DISTINCT FROM s.model))",
            [reprice],
        )
        n = con.execute("SELECT count(*) FROM _changed").fetchall()[0][0]
        if n == 0:
            return 0
        # the model of rows that name none: the agent version's documented default
        bare = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT session_id FROM _changed WHERE agent = 'codex' "
                "AND coalesce(model, '') = '' AND session_id IS NOT NULL"
            ).fetchall()
        ]
        assumed = {
            sid: m
            for sid, v in _codex_versions(sqlite_conn, sorted(bare)).items()
            if (m := cost.assumed_model("codex", v))
        }
        con.register(
            "_assumed",
            pa.table(
                {
                    "session_id": pa.array(list(assumed), pa.string()),
                    "model": pa.array(list(assumed.values()), pa.string()),
                }
            ),
        )
        # the billed token counts (``transforms.cost``'s conventions): the one-hour
        # write is a part of the cache write; reasoning is output where the agent's
        # logged output leaves it out
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _attr AS SELECT c.*, "
            "coalesce(c.input_tokens, 0) AS b_in, coalesce(c.cache_read_tokens, 0) AS b_cr, "
            "coalesce(c.cache_creation_tokens, 0) AS b_cw, "
            "least(coalesce(c.cache_creation_1h_tokens, 0), coalesce(c.cache_creation_tokens, 0)) AS b_cw1h, "
            "coalesce(c.output_tokens, 0) + "
            + reasoning_beside_sql("c.agent", "c.reasoning_tokens")
            + " AS b_out, "
            "CASE WHEN coalesce(c.model, '') <> '' THEN c.model "
            "     WHEN c.agent = 'codex' THEN a.model END AS priced_model, "
            "CASE WHEN coalesce(c.model, '') <> '' THEN 'logged' "
            "     WHEN c.agent = 'codex' AND a.model IS NOT NULL THEN 'assumed' END AS msrc "
            "FROM _changed c LEFT JOIN _assumed a USING (session_id)"
        )
        con.unregister("_assumed")
        con.execute("DROP TABLE _changed")
        rates: list[tuple] = []
        tiered: list[tuple] = []
        keys = con.execute(
            "SELECT DISTINCT priced_model, day FROM _attr WHERE priced_model IS NOT NULL"
        ).fetchall()
        for (model, day), r in zip(keys, prices.of(keys), strict=True):
            if r == "tiered":
                tiered.append((model, day))
            elif r is not None:
                rates.extend((model, day, lo, hi, *rr) for lo, hi, rr in r)
        tier_cost = {}
        if tiered:
            con.register(
                "_tiered_keys",
                pa.table({"m": [m for m, _ in tiered], "d": pa.array([d for _, d in tiered], pa.date32())}),
            )
            got = con.execute(
                "SELECT usage_key, priced_model, day, b_in, b_cr, b_cw, b_cw1h, b_out FROM _attr "
                "JOIN _tiered_keys t ON t.m = priced_model AND t.d IS NOT DISTINCT FROM day"
            ).fetchall()
            items = [(m, d or prices.today, *counts) for _k, m, d, *counts in got]
            tier_cost = {g[0]: cost.genai_tiered(*it) for g, it in zip(got, items, strict=True)}
            con.unregister("_tiered_keys")
        con.register(
            "_rates",
            pa.table(
                {
                    "model": pa.array([r[0] for r in rates], pa.string()),
                    "day": pa.array([r[1] for r in rates], pa.date32()),
                    "lo": pa.array([r[2] for r in rates], pa.int64()),
                    "hi": pa.array([r[3] for r in rates], pa.int64()),
                    **{
                        k: pa.array([r[4 + i] for r in rates], pa.float64())
                        for i, k in enumerate(("r_in", "r_out", "r_cr", "r_cw", "r_cw1h"))
                    },
                }
            ),
        )
        con.register(
            "_tier_cost",
            pa.table(
                {
                    "usage_key": pa.array(list(tier_cost), pa.string()),
                    "c": pa.array(list(tier_cost.values()), pa.float64()),
                }
            ),
        )
        # the one cost formula of a flat price (USD per MTok rates; the band of the
        # request's input: long-context tiers); genai-prices' tiered price is its own
        # (``cost.genai_tiered``) over the same billed counts
        con.execute(
            "INSERT OR REPLACE INTO usage BY NAME "
            "WITH p AS (SELECT a.*, coalesce(t.c, "
            "  (b_in * r.r_in + b_cr * r.r_cr + (b_cw - b_cw1h) * r.r_cw + b_cw1h * r.r_cw1h + b_out * r.r_out"
            "  ) / 1e6) AS calc "
            "  FROM _attr a LEFT JOIN _rates r ON r.model = a.priced_model AND r.day IS NOT DISTINCT FROM a.day "
            "  AND b_in + b_cr + b_cw > r.lo AND (r.hi IS NULL OR b_in + b_cr + b_cw <= r.hi) "
            "  LEFT JOIN _tier_cost t USING (usage_key)) "
            f"SELECT {', '.join(c for c in _UCOLS if c != 'model')}, priced_model AS model, "
            "msrc AS model_source, logged_cost_usd, "
            # tokens the agent did not record (all null; Crush, Go opencode: a session's
            # cost only) cannot be priced: list prices keep the logged cost
            f"CASE WHEN {_TOKENS_UNKNOWN} THEN logged_cost_usd ELSE calc END AS calculated_cost_usd, "
            "coalesce(logged_cost_usd, calc) AS cost_usd, "
            "CASE WHEN logged_cost_usd IS NOT NULL THEN 'logged' WHEN calc IS NOT NULL THEN 'calculated' "
            "     ELSE 'none' END AS cost_source, ? AS machine FROM p",
            [host],
        )
        return n
    finally:
        for t in ("_usage", "_rates", "_tier_cost"):
            con.unregister(t)  # a name never registered is a no-op
        con.execute("DROP TABLE IF EXISTS _changed; DROP TABLE IF EXISTS _attr")


def buckets_fresh(con: duckdb.DuckDBPyConnection) -> bool:
    """True when ``usage_buckets`` counts every timed ``usage`` row (the model's
    ``buckets_fresh()`` macro; each sync that changes ``usage`` refills it). An analytics
    file from an older model, or ``usage`` rows written by hand, are not fresh: read
    ``usage`` then."""
    try:
        return bool(con.execute("SELECT buckets_fresh()").fetchall()[0][0])
    except duckdb.CatalogException:
        return False


def _refresh_buckets(con: duckdb.DuckDBPyConnection) -> None:
    """Refill ``usage_buckets`` from ``usage``, in the caller's transaction: per
    ``BUCKET_SECONDS`` UTC bucket, agent, model, model source and project, the responses,
    token sums (tokens) and, per cost mode, the exact USD sum (DECIMAL: ``usd_sum``) and
    the responses that have a cost in it (``n_logged`` / ``n_calculated`` / ``n_auto``;
    auto = logged, else calculated). Rows without ``ts`` are left out (no report counts
    them). ~30 ms per 25,000 responses."""
    dec = "CAST({} AS DECIMAL(38, 12))"
    con.execute("DELETE FROM usage_buckets")
    con.execute(
        "INSERT INTO usage_buckets SELECT "
        f"to_timestamp(floor(epoch(ts) / {BUCKET_SECONDS}) * {BUCKET_SECONDS}) AS bucket, agent, model, "
        "model_source, project_dir, count(*), "
        + ", ".join(f"sum({c})" for c in USAGE_COLUMNS)
        + f", sum({dec.format('logged_cost_usd')}), sum({dec.format('calculated_cost_usd')}), "
        f"sum({dec.format('coalesce(logged_cost_usd, calculated_cost_usd)')}), count(logged_cost_usd), "
        "count(calculated_cost_usd), count(coalesce(logged_cost_usd, calculated_cost_usd)) "
        "FROM usage WHERE ts IS NOT NULL GROUP BY ALL"
    )


#: ``session_parts``'s rows of the entries ``{where}`` selects (rewound left out): the
#: per-(agent, session, project, parent) grain ``sinks.session_list``'s ``g`` takes
_PARTS_SELECT = (
    "SELECT agent, session_id, project_dir, parent_session_id, count(*), min(epoch_us(ts)), "
    "max(epoch_us(ts)), min(coalesce(sqlite_rowid, 9223372036854775807)), "
    "count(*) FILTER (WHERE kind = 'message'), count(*) FILTER (WHERE kind = 'tool_call'), "
    "sum(token_estimate) FROM entries WHERE status IS DISTINCT FROM 'rewound' AND ({where}) GROUP BY ALL"
)


def _sync_session_parts(sqlite_conn: sqlite3.Connection, con: duckdb.DuckDBPyConnection) -> None:
    """Bring ``session_parts`` to DuckDB's ``entries`` as they now are, and set its marks
    (``parts_rowid``, ``parts_status_seq``: the ``entries_rowid`` and ``status_seq`` it
    holds; ``parts_count``: the rows of ``entries`` then). The sessions of the rows above
    ``parts_rowid`` and of the ``status_log`` rows above ``parts_status_seq`` are summed
    again whole; every session when the table was never filled or ``entries`` lost rows
    since (its count up to the mark moved). At 10 GB (5.4 M entries, 86,005 parts) the
    whole fill is ~0.45 CPU s, a page read from it ~0.02 s (rss20)."""
    mark = con.execute("SELECT value FROM meta WHERE key = 'parts_rowid'").fetchall()
    count = _meta(con, "parts_count")
    top, seq = _hwm(con), _status_seq(con)
    con.execute("BEGIN")
    try:
        if (
            not mark
            or con.execute("SELECT count(*) FROM entries WHERE sqlite_rowid <= ?", [mark[0][0]]).fetchall()[
                0
            ][0]
            != count
        ):
            con.execute("DELETE FROM session_parts")
            con.execute("INSERT INTO session_parts " + _PARTS_SELECT.format(where="true"))
        else:
            changed = []
            pseq = _meta(con, "parts_status_seq")
            if seq > pseq:
                try:
                    changed = [
                        r[0]
                        for r in sqlite_conn.execute(
                            "SELECT DISTINCT entry_id FROM status_log WHERE seq > ? AND seq <= ?", (pseq, seq)
                        )
                    ]
                except sqlite3.OperationalError:  # a store written before status_log existed
                    changed = []
            if changed:
                con.register("_changed", pa.table({"entry_id": pa.array(changed, pa.string())}))
                _resum_parts(
                    con, "sqlite_rowid > ? OR entry_id IN (SELECT entry_id FROM _changed)", [mark[0][0]]
                )
                con.unregister("_changed")
            else:  # (the rowid range alone: DuckDB skips the row groups below it, not
                # every entry's id scanned for the OR: 10 GB store, one note, ~1 s wall)
                _resum_parts(con, "sqlite_rowid > ?", [mark[0][0]])
        n = con.execute("SELECT count(*) FROM entries").fetchall()[0][0]
        con.execute(
            "INSERT OR REPLACE INTO meta VALUES ('parts_rowid', ?), ('parts_status_seq', ?), ('parts_count', ?)",
            [top, seq, n],
        )
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _resum_parts(con: duckdb.DuckDBPyConnection, where: str, params: list) -> None:
    """Sum again, whole, in ``session_parts`` every session holding an entry that
    ``where`` (SQL over ``entries``, with ``params``) selects (in the caller's
    transaction)."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _parts_of AS SELECT DISTINCT agent, session_id FROM entries WHERE {where}",
        params,
    )
    if con.execute("SELECT count(*) FROM _parts_of").fetchall()[0][0]:
        con.execute(
            "DELETE FROM session_parts x WHERE EXISTS (SELECT 1 FROM _parts_of p WHERE "
            "p.agent IS NOT DISTINCT FROM x.agent AND p.session_id IS NOT DISTINCT FROM x.session_id)"
        )
        con.execute(
            "INSERT INTO session_parts "
            + _PARTS_SELECT.format(
                where="EXISTS (SELECT 1 FROM _parts_of p WHERE p.agent IS NOT DISTINCT FROM entries.agent "
                "AND p.session_id IS NOT DISTINCT FROM entries.session_id)"
            )
        )
    con.execute("DROP TABLE _parts_of")


def resum_session_parts(con: duckdb.DuckDBPyConnection, ids: str) -> None:
    """After the statuses of the entries whose ``entry_id`` the registered table or view
    ``ids`` lists were changed in DuckDB's ``entries`` directly
    (``sinks.sqlite.status``): their sessions summed again in ``session_parts`` (when it
    was ever filled), so it stays the entries as they are. In the caller's transaction."""
    if _meta(con, "parts_count") or con.execute("SELECT count(*) FROM session_parts").fetchall()[0][0]:
        _resum_parts(con, f"entry_id IN (SELECT entry_id FROM {ids})", [])


def _sync_texts(sqlite_conn: sqlite3.Connection, con: duckdb.DuckDBPyConnection) -> None:
    """What analytics needs of the texts (DuckDB holds none), for the SQLite entries
    above the ``text_rowid`` mark: the tool results whose text carries the sources'
    error flag (a leading ``[error]``: Claude Code ``is_error``, Gemini CLI ``error``,
    Copilot CLI, Cline family) into ``tool_errors``; per session, the title (a
    ``session`` meta entry's text: Go opencode, Crush) and the first user prompt (first
    ``_TITLE_CHARS`` characters) into ``session_text``."""
    mark = _meta(con, "text_rowid")
    top = sqlite_conn.execute("SELECT coalesce(max(rowid), 0) FROM entry_rows").fetchone()[0]
    if top <= mark:
        return
    head = (
        f"SELECT e.rowid, e.agent, e.session_id, e.entry_id, e.kind, e.role, e.tool_name, "
        f"substr(ch.text, 1, {_TITLE_CHARS}) FROM entry_rows e "
        f"JOIN chunks ch ON ch.content_id = e.content_id AND ch.seq = 0 WHERE e.rowid > ? AND e.rowid <= ? AND "
    )
    # up to ``top``: rows a writer commits meanwhile (an ingest's next group) are the next call's
    errors = [
        r[3]
        for r in sqlite_conn.execute(head + "e.kind = 'tool_result' AND ch.text LIKE '[error]%'", (mark, top))
    ]
    texts = sqlite_conn.execute(
        head + "((e.kind = 'message' AND e.role = 'user') OR (e.kind = 'meta' AND e.tool_name = 'session')) "
        "ORDER BY e.rowid",
        (mark, top),
    ).fetchall()
    titles: dict[tuple[str, str], list] = {}
    for _rowid, agent, sid, _eid, kind, _role, _tool, text in texts:
        t = titles.setdefault((agent, sid), [None, None])
        text = " ".join((text or "").split())
        if not text:
            continue
        if kind == "meta":
            t[0] = t[0] or text
        else:
            t[1] = t[1] or text
    con.execute("BEGIN")
    try:
        if errors:
            con.register("_err", pa.table({"entry_id": errors}))
            con.execute("INSERT OR IGNORE INTO tool_errors SELECT entry_id FROM _err")
            con.unregister("_err")
        if titles:
            keys = list(titles)
            con.register(
                "_titles",
                pa.table(
                    {
                        "agent": [k[0] for k in keys],
                        "session_id": [k[1] for k in keys],
                        "title": pa.array([titles[k][0] for k in keys], pa.string()),
                        "first_prompt": pa.array([titles[k][1] for k in keys], pa.string()),
                    }
                ),
            )
            # a title or first prompt already known is kept (it came first)
            con.execute(
                "INSERT INTO session_text SELECT agent, session_id, title, first_prompt FROM _titles "
                "ON CONFLICT (agent, session_id) DO UPDATE SET "
                "title = coalesce(session_text.title, excluded.title), "
                "first_prompt = coalesce(session_text.first_prompt, excluded.first_prompt)"
            )
            con.unregister("_titles")
        con.execute("INSERT OR REPLACE INTO meta VALUES('text_rowid', ?)", [top])
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _sync_compress(sqlite_conn: sqlite3.Connection, con: duckdb.DuckDBPyConnection) -> None:
    """Refill ``compress_files`` from SQLite ``runs`` (flow ``compress``; a few rows):
    one row per file of ``detail.files_detail`` (path, agent, status, bytes and tokens
    before/after, ``image_tokens``: what ``inline`` moved out, not in the text tokens;
    a one-file run recorded without it: the run's), or, for a run recorded without
    it, one row with the run's totals (path and agent NULL)."""

    rows = []
    for run_id, started, finished, status, detail in sqlite_conn.execute(
        "SELECT run_id, started_at, finished_at, status, detail FROM runs WHERE flow = 'compress' "
        "ORDER BY run_id"
    ):
        try:
            d = json.loads(detail or "{}")
        except ValueError:
            d = {}
        files = d.get("files_detail")
        if files is None:
            files = [
                {
                    "path": None,
                    "agent": None,
                    **{
                        k: d.get(k)
                        for k in (
                            "bytes_before",
                            "bytes_after",
                            "tokens_before",
                            "tokens_after",
                            "image_tokens",
                        )
                    },
                }
            ]
        elif len(files) == 1 and "image_tokens" not in files[0]:  # (recorded before per-file figures)
            files = [dict(files[0], image_tokens=d.get("image_tokens"))]
        for f in files:
            rows.append(
                (
                    run_id,
                    started,
                    finished,
                    f.get("status") or status,
                    f.get("path"),
                    f.get("agent"),
                    f.get("bytes_before"),
                    f.get("bytes_after"),
                    f.get("tokens_before"),
                    f.get("tokens_after"),
                    f.get("image_tokens"),
                )
            )
    names = [
        "run_id",
        "started_at",
        "finished_at",
        "status",
        "path",
        "agent",
        "bytes_before",
        "bytes_after",
        "tokens_before",
        "tokens_after",
        "image_tokens",
    ]
    ints = {"run_id", "bytes_before", "bytes_after", "tokens_before", "tokens_after", "image_tokens"}
    tbl = pa.table(
        {
            n: pa.array([r[i] for r in rows], pa.int64() if n in ints else pa.string())
            for i, n in enumerate(names)
        }
    )
    con.register("_compress", tbl)
    con.execute("BEGIN")
    con.execute("DELETE FROM compress_files")
    con.execute(
        "INSERT INTO compress_files(run_id, started_at, finished_at, status, path, agent, bytes_before, "
        "bytes_after, tokens_before, tokens_after, image_tokens) SELECT run_id, CAST(started_at AS TIMESTAMPTZ), "
        "CAST(finished_at AS TIMESTAMPTZ), status, path, agent, bytes_before, bytes_after, "
        "tokens_before, tokens_after, image_tokens FROM _compress"
    )
    con.execute("COMMIT")
    con.unregister("_compress")


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
        "sqlite_rowid", pa.array(range(first_rowid, first_rowid + n), pa.int64())
    )
    con.register("_append", tbl)
    try:
        con.execute("BEGIN")
        try:
            con.execute(
                "INSERT INTO entries SELECT sqlite_rowid, " + ", ".join(STORED_COLUMNS) + " FROM _append"
            )
            con.execute("INSERT OR REPLACE INTO meta VALUES('entries_rowid', ?)", [first_rowid + n - 1])
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.unregister("_append")
    return n


#: rows of a DuckDB row group (DuckDB's ``DEFAULT_ROW_GROUP_SIZE``, 1.x and 2.x)
ROW_GROUP_ROWS = 122_880


class EntryAppends:
    """``append_entries`` for a run of appends (an ingest's committed groups), with the
    DuckDB checkpoints where a row group fills up.

    DuckDB starts a new row group after each checkpoint, and its automatic checkpoint
    (every ``checkpoint_threshold`` = 16 MiB of WAL) fell in the middle of one; the next
    checkpoint's vacuum then merged the partial row group with its neighbours, rewriting
    them: 2 GB tree, a transient +276 MB RSS at 726 MB; 400,000 appended rows, +196 MB,
    and 200 MB more held after it. Here the automatic checkpoint is off while the
    appends run (``checkpoint_threshold`` 1 GiB, restored by ``close``); an append that
    fills the open row group is split there and followed by a ``CHECKPOINT``, so every
    row group is written once, full, and nothing is left to merge. The rows not yet
    checkpointed (a row group at most, ~60 MB of WAL) stay in DuckDB's memory. A
    ``sync`` from SQLite between appends (``synced``) ends with a checkpoint and counts
    from 0 again.

    While the appends run, DuckDB works in the calling thread alone (``threads`` 1,
    restored by ``close``): an append is a few thousand rows, and DuckDB's worker pool
    (one thread per core) woke and spun for each, on the cores the ingest's reader
    process and writer need. 200 MB tree, vault off, fresh ingest (issue 26; 3 runs
    each way under load 20-30, ``tests/bench/profile_ingest.py``): the ingest process's
    CPU outside its Python threads 0.92-1.17 s -> 0.60-0.82 s, the analytics thread
    +0.05-0.3 s (the work the pool did), the process's total 8.05-8.34 -> 7.52-7.92 s
    (one pair: 7.65 -> 7.62, within the noise), minor faults 339-351k -> 267-304k. The
    closing sync (after ``close``) has the pool back: it is the run's tail, with the
    cores free."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        con.execute("CHECKPOINT")  # the next row appended opens a new row group
        con.execute("SET checkpoint_threshold = '1GiB'")
        con.execute("SET threads = 1")
        #: rows appended since the last checkpoint: those of the open row group
        self.open_rows = 0

    def append(self, first_rowid: int, table: pa.Table) -> int | None:
        """``append_entries(con, first_rowid, table)``, split at the row group's end."""
        done = got = 0
        while done < table.num_rows:
            k = min(table.num_rows - done, ROW_GROUP_ROWS - self.open_rows)
            n = append_entries(self.con, first_rowid + done, table.slice(done, k))
            if n is None:
                return None if got == 0 else got
            done += k
            got += n
            self.open_rows += n
            if self.open_rows >= ROW_GROUP_ROWS:
                self.synced()
        return got

    def synced(self) -> None:
        """Checkpoint (after a ``sync`` from SQLite, or a full row group)."""
        self.con.execute("CHECKPOINT")
        self.open_rows = 0

    def close(self) -> None:
        """The automatic checkpoint and the worker threads back to DuckDB's defaults (the
        connection stays open)."""
        self.con.execute("RESET checkpoint_threshold")
        self.con.execute("RESET threads")


class UsageSteps:
    """An ingest's new ``usage`` rows and texts brought into DuckDB as its groups
    commit (``pipeline.analytics_sync.AnalyticsSyncer``, after each group's entries),
    so that the closing ``sync`` finds them there and writes only what changed since:
    on the 200 MB tree's fresh ingest the closing sync priced and wrote all 25,777
    usage rows after the last commit (0.37 of its ~0.42 CPU s, issue 26: the run's
    single-core tail); now it compares them (~0.13 s) and refills ``usage_buckets``.

    ``step(sqlite_conn)``: the SQLite ``usage`` rows with a rowid above ``after``
    (rows this run inserted: a new key gets a new rowid; ``after`` is SQLite's top
    rowid before the run, ``sqlite_store.usage_top``) priced and upserted as
    ``sync_usage`` does (``_upsert_slice``, one DuckDB transaction per
    ``USAGE_SLICE_ROWS`` slice), then ``_sync_texts``. A row the run updated in place
    (its rowid at or below ``after``: a usage key stored before), keys gone, a machine
    renamed, prices changed since DuckDB's rows were priced (all re-priced) and
    ``usage_buckets`` are left to the closing ``sync``, which compares every row as
    before: the DuckDB file ends up the same. The price mark (``price_version``) is
    set here only when DuckDB held no usage row before the first step (every row it
    holds is then priced with these prices). ``fresh``: the first step found DuckDB's
    ``usage`` empty and ``after`` 0 (SQLite's was empty before the run): DuckDB then
    holds exactly the SQLite rows up to ``after`` as the steps read them, so the
    closing sync may compare only the rows above it and those the run's groups
    updated in place (``sync``'s ``usage_only``). Raises what DuckDB or SQLite raise (the
    caller's next step or the closing sync catches up)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, home: Path, after: int) -> None:
        self.con, self.home = con, Path(home)
        #: SQLite ``usage`` rowid up to which rows are in DuckDB
        self.after = after
        self._ready = False
        self._mark_prices = False
        #: DuckDB and SQLite held no usage row before the first step (``_start``)
        self.fresh = False

    def _start(self, sqlite_conn: sqlite3.Connection) -> None:
        from ctxkeep.sinks.machine import machine_name
        from ctxkeep.transforms import cost

        overrides, self.fp, _stamp = _prices(self.home)  # (the closing sync records the stamp)
        self.sel, self.schema = _usage_select(sqlite_conn)
        self.host = machine_name(self.home, check=False)
        self.prices = _SlicePrices(cost.Pricer(overrides))
        stale = _meta(self.con, "price_version") != self.fp
        empty = self.con.execute("SELECT count(*) FROM usage").fetchall()[0][0] == 0
        self._mark_prices = stale and empty
        self.fresh = empty and self.after == 0
        self._ready = True

    def step(self, sqlite_conn: sqlite3.Connection) -> int:
        """Upsert the new usage rows and sync the texts; returns the usage rows written."""
        if not self._ready:
            self._start(sqlite_conn)
        written = 0
        while True:
            part = sqlite_conn.execute(
                f"SELECT rowid, {', '.join(self.sel)} FROM usage WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (self.after, USAGE_SLICE_ROWS),
            ).fetchall()
            if not part:
                break
            top = part[-1][0]
            rb = _usage_batch([r[1:] for r in part], self.schema)
            del part

            def upsert(rb=rb) -> int:
                n = _upsert_slice(sqlite_conn, self.con, rb, False, self.prices, self.host)
                if self._mark_prices:  # every row DuckDB holds priced with these prices
                    self.con.execute("INSERT OR REPLACE INTO meta VALUES('price_version', ?)", [self.fp])
                return n

            written += _in_transaction(self.con, upsert)
            self._mark_prices = False
            self.after = top
        _sync_texts(sqlite_conn, self.con)
        return written


def _status_seq(con) -> int:
    rows = con.execute("SELECT value FROM meta WHERE key='status_seq'").fetchall()
    return int(rows[0][0]) if rows else 0


def _replay_status(sqlite_conn: sqlite3.Connection, con) -> int:
    """Apply SQLite ``status_log`` rows above DuckDB's ``status_seq`` mark to DuckDB
    ``entries`` (rows synced before their status changed), in order; returns rows read."""
    rows = con.execute("SELECT value FROM meta WHERE key='status_seq'").fetchall()
    seq = rows[0][0] if rows else 0
    try:
        rows = sqlite_conn.execute(
            "SELECT seq, entry_id, status FROM status_log WHERE seq > ? ORDER BY seq", (seq,)
        ).fetchall()
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

"""Helpers for the database-source tests: writable copies of corpus parts and
fixtures in tmp_path (never write into shared/corpus), and store queries."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import CORPUS_HOME, FIXTURES, q


def writable_copy(src: Path, dst: Path) -> Path:
    """Copy ``src`` (file or tree) to ``dst`` keeping mtimes, then make it writable
    (corpus files are 0444 in 0555 folders)."""
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    for root, _dirs, files in os.walk(dst if dst.is_dir() else dst.parent):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dst


def corpus_part(rel: str, home: Path) -> Path:
    """A writable copy of ``CORPUS_HOME/rel`` at ``home/rel``."""
    return writable_copy(CORPUS_HOME / rel, home / rel)


def fixture_home(agent: str, home: Path) -> Path:
    """A writable copy of ``tests/fixtures/<agent>/home`` merged into ``home``."""
    return writable_copy(FIXTURES / agent / "home", home)


def kinds(store: Path, agent: str) -> dict:
    """``{(role, kind): n}`` of an agent's entries."""
    return {
        (r, k): n
        for r, k, n in q(store, "SELECT role, kind, count(*) FROM entries WHERE agent=? GROUP BY 1, 2", agent)
    }


def usage_by_day(store: Path, agent: str) -> dict:
    """``{day: (input, output, cache_read, cache_creation)}`` from the usage table."""
    return {
        d: tuple(v)
        for d, *v in q(
            store,
            "SELECT substr(ts,1,10), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
            "sum(cache_creation_tokens) FROM usage WHERE agent=? GROUP BY 1 ORDER BY 1",
            agent,
        )
    }


#: SQL expression for the text of entry ``e`` (texts live once per content, in chunks)
TEXT = (
    "(SELECT group_concat(ch.text, '') FROM chunks ch JOIN contents c "
    "ON c.content_id = ch.content_id WHERE c.content_hash = e.content_hash)"
)


def priced(home: Path, rows: list[tuple], prices_toml: str | None = None) -> list[float | None]:
    """The ``calculated_cost_usd`` the DuckDB sync gives each usage row, through the
    real path (SQLite ``usage`` -> ``sinks.duckdb.sync_usage``, the one cost formula).
    A row: ``(agent, model, ts: aware datetime or None, input, output, cache_read,
    cache_creation[, reasoning[, cache_creation_1h]])``; ``prices_toml``: the text of
    ``<home>/prices.toml``."""
    import duckdb

    from ctxkeep.sinks import duckdb as duckdb_store
    from ctxkeep.sinks import sqlite as sqlite_store

    home.mkdir(parents=True, exist_ok=True)
    if prices_toml is not None:
        (home / "prices.toml").write_text(prices_toml)
    conn = sqlite_store.connect(home)
    try:
        with sqlite_store.write(conn):
            for i, (agent, model, ts, inp, out, cr, cw, *rest) in enumerate(rows):
                reasoning = rest[0] if rest else 0
                h1 = rest[1] if len(rest) > 1 else None
                conn.execute(
                    "INSERT INTO usage(usage_key, agent, session_id, ts, model, input_tokens, output_tokens, "
                    "cache_read_tokens, cache_creation_tokens, reasoning_tokens, cache_creation_1h_tokens) "
                    "VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        f"k{i:06d}",
                        agent,
                        f"s{i}",
                        ts.isoformat() if ts else None,
                        model,
                        inp,
                        out,
                        cr,
                        cw,
                        reasoning,
                        h1,
                    ),
                )
        con = duckdb_store.connect(home)
        try:
            duckdb_store.sync_usage(conn, con, home)
        finally:
            con.close()
    finally:
        conn.close()
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        got = dict(con.execute("SELECT usage_key, calculated_cost_usd FROM usage").fetchall())
    finally:
        con.close()
    return [got[f"k{i:06d}"] for i in range(len(rows))]


def synced_from_scratch(home: Path, ref: Path) -> Path:
    """``ref`` (a new folder): a copy of ``home``'s ``store.db`` whose DuckDB is synced
    from scratch (``duckdb_store.sync``): the reference an incremental sync must equal."""
    from ctxkeep.sinks import duckdb as duckdb_store
    from ctxkeep.sinks import sqlite as sqlite_store

    ref.mkdir()
    shutil.copy(home / "store.db", ref / "store.db")
    conn = sqlite_store.connect(ref)
    try:
        duckdb_store.sync(conn, ref)
    finally:
        conn.close()
    return ref

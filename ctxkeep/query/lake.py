"""Reports over a team's Parquet lake (``ctxkeep report … --lake DEST``): every
machine's partitions as the relations ``query.reports`` reads.

``open_lake(dest)`` returns an in-memory DuckDB connection on which ``usage``,
``sessions`` and ``all_entries`` are views over ``read_parquet(DEST/<table>/machine=*/
agent=*/month=*/*.parquet, hive_partitioning = true)`` (partition types pinned to
VARCHAR: a machine named ``2024`` stays a name), and ``history``, ``tool_calls``,
``daily_usage(tz)``, ``context_growth``, ``cost_in_mode`` and ``usd_sum`` are the
statements of the local model (``sinks/duckdb/model.sql``) over them. So the report
functions (``usage_report``, ``blocks_report``, ``tools_report``) run unchanged and
give the local JSON shape. ``select_machine`` narrows the views to one machine
(``--by machine`` runs a report once per machine). An fsspec lake's filesystem is
registered with DuckDB (``register_filesystem``): nothing is downloaded, DuckDB's own
httpfs extension is not needed.

Rows of different machines are never deduplicated: a response counted by two stores
(the same session files synced to two machines) counts twice, as the sum of the local
reports does.
"""

from __future__ import annotations

import re
from importlib.resources import files

import duckdb

from ctxkeep.errors import StoreError
from ctxkeep.sinks import lake as lakes

#: lake table → the view name the reports read
VIEWS = {"usage": "usage", "sessions": "sessions", "entries": "all_entries"}
#: the model statements built over the lake views (the rest need local tables)
_MODEL = {
    "history",
    "cost_in_mode",
    "usd_sum",
    "daily_usage",
    "tool_calls",
    "context_growth",
    "context_turns",
}
_HIVE_TYPES = "{'machine': VARCHAR, 'agent': VARCHAR, 'month': VARCHAR}"


def _glob(lake: lakes.Lake, table: str) -> str:
    return lake.uri(table, "machine=*", "agent=*", "month=*", "*.parquet")


def open_lake(dest: str):
    """An in-memory DuckDB connection over the lake ``dest`` (module doc). Tables the
    lake lacks are left out (a report that needs one, ``tools`` without exported
    entries, fails with a ``duckdb.CatalogException``). Raises StoreError: the lake does not exist, cannot be listed, or holds no usage;
    UsageError/StoreError from ``sinks.lake.open_lake`` (scheme, missing package)."""

    lake = lakes.open_lake(dest)
    lakes.check_readable(lake)
    present = {t for t in VIEWS if lakes.has_parts(lake, t)}
    if "usage" not in present:
        raise StoreError(
            "the lake holds no usage",
            where=lake.url,
            hint="run `ctxkeep export parquet DEST` on each machine first",
        )
    con = duckdb.connect(":memory:")
    if not lake.local:
        con.register_filesystem(lake.fsspec)
    for table in present:
        glob = _glob(lake, table).replace("'", "''")
        con.execute(
            f"CREATE VIEW lake_{table} AS SELECT * FROM read_parquet('{glob}', hive_partitioning = true, "
            f"hive_types = {_HIVE_TYPES}, union_by_name = true)"
        )
    select_machine(con, None)
    for stmt in _model_statements(_MODEL):
        if "entries" in present or not _needs_entries(stmt):
            con.execute(stmt)
    return con


def _model_statements(names: set[str]) -> list[str]:
    """The statements of the local model (``sinks/duckdb/model.sql``, read as a file:
    importing ``sinks.duckdb`` would import Polars, ~2 s) that create the views and
    macros ``names``, in file order. None of them has a placeholder of the model's
    (``{columns}``, ``{archive}``: those views need local tables)."""

    text = (files("ctxkeep.sinks") / "duckdb" / "model.sql").read_text(encoding="utf-8")
    body = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("--"))
    out = []
    for stmt in (s.strip() for s in body.split("\n;")):
        m = re.match(r"CREATE OR REPLACE (?:VIEW|MACRO) (\w+)", stmt)
        if m and m.group(1) in names:
            assert "{columns}" not in stmt and "{archive}" not in stmt, m.group(1)
            out.append(stmt)
    return out


def _needs_entries(stmt: str) -> bool:
    return any(w in stmt for w in ("all_entries", "history", "context_growth"))


def _views(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}


def select_machine(con, machine: str | None) -> None:
    """Point ``usage``, ``sessions`` and ``all_entries`` at one machine's rows (None:
    every machine)."""
    have = _views(con)
    where = "" if machine is None else " WHERE machine = '" + machine.replace("'", "''") + "'"
    for table, view in VIEWS.items():
        if f"lake_{table}" in have:
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM lake_{table}{where}")


def machines(con) -> list[str]:
    """The machines of the lake (of its usage and entries), sorted."""
    have = _views(con)
    parts = [f"SELECT DISTINCT machine FROM lake_{t}" for t in ("usage", "entries") if f"lake_{t}" in have]
    return sorted(r[0] for r in con.execute(" UNION ".join(parts)).fetchall())


__all__ = ["VIEWS", "machines", "open_lake", "select_machine"]

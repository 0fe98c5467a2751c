"""The analytics store for the notebooks and the app: the period they show
(``Window``: an IANA zone and local dates) and read-only connections to
``analytics.duckdb`` (DuckDB, the model of ``sinks/duckdb/model.sql``) and
``store.db`` (SQLite, for what only the system of record holds: quarantine, dedup).

A thin module over ``query.notebooks`` until the service layer answers these
questions itself. Raises ``UsageError`` for a bad zone or date, ``CtxkeepError``
when there is no store yet or a running ingest holds the DuckDB file.
"""

from __future__ import annotations

from ctxkeep.query.notebooks import Window, frame, open_store, window

__all__ = ["Window", "agents_of", "frame", "open_store", "window"]


def agents_of(duck) -> list[str]:
    """Every agent the store holds entries or usage of, sorted (the colour domain of
    the notebooks' charts: one colour per agent on every page), from the read-only
    DuckDB connection ``duck`` of ``open_store``."""
    rows = duck.sql(
        "SELECT DISTINCT agent FROM all_entries UNION SELECT DISTINCT agent FROM usage"
    ).fetchall()
    return sorted({a for (a,) in rows if a})

"""The analytics notebooks (``ctxkeep/notebooks/*.py``, marimo, shipped in the wheel):
their period (``Window``) and opening the store from them. Running them into HTML is
``render.report`` (``ctxkeep report html``).

The notebooks read ``<home>/analytics.duckdb`` read-only (DuckDB) and, for what only the
system of record holds (quarantine, content dedup), ``<home>/store.db`` read-only
(SQLite, ``mode=ro``). Each has a parameter cell: ``store`` (the ctxkeep home; "" =
``$CTXKEEP_HOME`` or the platform data dir), ``timezone`` (IANA name), ``since`` /
``until`` (local dates ``YYYY-MM-DD``, inclusive; "" = open).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb

from ctxkeep.errors import CtxkeepError, UsageError
from ctxkeep.sinks import analytics_current, files


@dataclass(frozen=True)
class Window:
    """The notebooks' parameters, checked: ``tz`` an IANA zone name, ``since`` /
    ``until`` local dates (inclusive) or None for an open end."""

    tz: str
    since: dt.date | None
    until: dt.date | None

    def params(self) -> dict:
        """The SQL parameters ``$tz``, ``$since``, ``$until`` (dates or None) for the
        notebooks' ``CAST(timezone($tz, ts) AS DATE) BETWEEN …`` filters."""
        return {"tz": self.tz, "since": self.since, "until": self.until}

    def label(self) -> str:
        """``2026-01-01 … 2026-01-31 (Europe/Berlin)``, ``start`` / ``today`` for open ends."""
        return f"{self.since or 'start'} … {self.until or 'today'} ({self.tz})"


def window(tz: str, since: str | dt.date | None, until: str | dt.date | None) -> Window:
    """Check the notebooks' ``timezone``, ``since`` and ``until``. Raises UsageError
    for an unknown zone, a date not ``YYYY-MM-DD`` or ``since`` after ``until``."""

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"unknown time zone {tz!r}", where="--timezone", hint="give an IANA name such as Europe/Berlin"
        ) from None

    def day(v, opt: str) -> dt.date | None:
        from ctxkeep.timeutil import when_day

        return when_day(v, tz=tz, where=opt)

    w = Window(tz, day(since, "--since"), day(until, "--until"))
    if w.since and w.until and w.since > w.until:
        raise UsageError(
            f"--since {w.since} is after --until {w.until}", where="--since", hint="swap the two dates"
        )
    return w


def open_store(store: str | Path | None):
    """Open a ctxkeep home for a notebook: ``(home, duck, lite)`` with ``home`` the
    resolved Path, ``duck`` a read-only DuckDB connection to ``analytics.duckdb`` and
    ``lite`` a read-only sqlite3 connection to ``store.db`` (``mode=ro``: a reader
    never writes, and the store's WAL is honoured). Raises CtxkeepError when the store
    has no analytics file yet, or when a running ingest holds it."""

    from ctxkeep.config import resolve_home

    home = Path(resolve_home(str(store) if store else None))
    path = home / files.ANALYTICS_DB
    if not path.exists() or not (home / files.STORE_DB).exists():
        raise CtxkeepError("no store yet", where=str(home), hint="run `ctxkeep ingest` first")
    analytics_current.bring_current(home)  # a lag left (a busy store) shows what DuckDB holds
    try:
        duck = duckdb.connect(str(path), read_only=True)
    except duckdb.IOException as e:
        raise CtxkeepError(
            f"the analytics store is held by another process: {str(e).splitlines()[0]}",
            where=str(path),
            hint="run it again when the ingest has finished",
        ) from None
    lite = sqlite3.connect(f"file:{home / files.STORE_DB}?mode=ro", uri=True)
    return home, duck, lite


def frame(con, sql: str, params: dict):
    """``con.sql(sql, params=…).pl()``: a Polars DataFrame of a DuckDB query, given only
    those of ``params`` (e.g. ``Window.params()``) that ``sql`` names as ``$name``
    (DuckDB refuses unused parameters)."""
    return con.sql(sql, params={k: v for k, v in params.items() if f"${k}" in sql}).pl()

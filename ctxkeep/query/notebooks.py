"""The analytics notebooks (``ctxkeep/notebooks/*.py``, marimo, shipped in the wheel):
their period (``Window``) and DuckDB queries as Polars frames. Opening the store is
``service.analytics.open_store``; running them into HTML, ``render.report``.

The notebooks read ``<home>/analytics.duckdb`` read-only (DuckDB) and, for what only the
system of record holds (quarantine, content dedup), ``<home>/store.db`` read-only
(SQLite, ``mode=ro``). Each has a parameter cell: ``store`` (the ctxkeep home; "" =
``$CTXKEEP_HOME`` or the platform data dir), ``timezone`` (IANA name), ``since`` /
``until`` (local dates ``YYYY-MM-DD``, inclusive; "" = open).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ctxkeep.errors import UsageError


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
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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


def frame(con, sql: str, params: dict):
    """``con.sql(sql, params=…).pl()``: a Polars DataFrame of a DuckDB query, given only
    those of ``params`` (e.g. ``Window.params()``) that ``sql`` names as ``$name``
    (DuckDB refuses unused parameters)."""
    return con.sql(sql, params={k: v for k, v in params.items() if f"${k}" in sql}).pl()

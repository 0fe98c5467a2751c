"""Usage and cost reports (``ctxkeep report daily | weekly | monthly | session |
projects | models | blocks | tools``) and Claude Code's status line: one request and
result model, ``report(home, ReportRequest) -> ReportResult`` over ``query.reports``
(DuckDB; a Parquet lake through ``query.lake``), rows as docs/analytics.md "Reports"
gives them. Days are local days of ``timezone``; tokens are counts, costs US dollars.

Raises UsageError (a bad value: ``where`` the field; an unknown time zone; a token
limit that is no number) and StoreError (no analytics store, a damaged one, a lake
without usage)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ctxkeep.errors import CtxkeepError, NothingStored, StoreError, UsageError
from ctxkeep.service.model import Names, ProjectDir, Request, Shape

REPORTS = ("daily", "weekly", "monthly", "session", "projects", "models", "blocks", "tools")
_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")


class ReportRequest(Request):
    """One report's selection. ``since``/``until``: local days, inclusive (a date, a
    datetime or an age: the day it falls on); ``project``: this directory or below."""

    report: Literal["daily", "weekly", "monthly", "session", "projects", "models", "blocks", "tools"]
    since: str | None = Field(None, description="first local day, inclusive")
    until: str | None = Field(None, description="last local day, inclusive")
    timezone: str | None = Field(None, description="IANA zone of the days (default: the local zone)")
    agents: Names = None
    project: ProjectDir = None
    mode: str = Field("auto", description="cost: auto (logged, else calculated), calculate, display")
    breakdown: bool = Field(False, description="one row per model")
    token_limit: str | None = Field(None, description="blocks: tokens per block, a number or max")
    lake: str | None = Field(None, description="report over this Parquet lake instead of the store")
    by: str | None = Field(None, description="with lake: machine (each machine's rows apart)")

    @model_validator(mode="after")
    def _fits(self) -> ReportRequest:
        from ctxkeep.query.reports import MODES

        if self.mode not in MODES:
            raise UsageError(
                f"unknown cost mode {self.mode!r}", where="mode", hint="give auto, calculate or display"
            )
        if self.by is not None and (self.by != "machine" or not self.lake):
            raise UsageError(f"--by {self.by}", where="by", hint="give --lake DEST --by machine")
        return self


class ReportResult(Shape):
    """A usage report (`ctxkeep report NAME --json`; docs/analytics.md "Reports" gives
    every row field)."""

    report: str = Field(description="daily, weekly, monthly, session, models, projects, blocks or tools")
    timezone: str = Field(description="IANA zone of the days")
    mode: str | None = Field(None, description="cost mode")
    since: str | None = Field(None, description="first day (null: none)")
    until: str | None = Field(None, description="last day (null: none)")
    agents: list[str] | None = Field(None, description="the --agent values")
    project: str | None = Field(None, description="the --project value")
    rows: list[dict[str, Any]] = Field(
        description="one per period × agent (× model with --breakdown), block, or agent × tool"
    )
    totals: dict[str, Any] | None = Field(None, description="sums of the token and cost columns")
    notes: list[str] = Field(default_factory=list, description="unpriced or assumed models, a stale store, …")


def _filters(req: ReportRequest):
    from ctxkeep.query import reports as R
    from ctxkeep.service.when import zone

    tz = zone(req.timezone)
    s = R.parse_date(req.since, "since", tz) if req.since else None
    u = R.parse_date(req.until, "until", tz) if req.until else None
    if s and u and s > u:
        raise UsageError(f"--since {s} is after --until {u}", where="since/until", hint="swap them")
    return R.Filters(tz, s, u, tuple(req.agents or ()), req.project, req.mode)


def report(home: Path, req: ReportRequest) -> ReportResult:
    """The report ``req`` asks for, over the store at ``home`` (brought current with
    SQLite first) or ``req.lake``."""
    import duckdb

    from ctxkeep.query import reports as R

    f = _filters(req)

    def one(con):
        if req.report == "blocks":
            return R.blocks_report(con, f, token_limit=req.token_limit)
        if req.report == "tools":
            return R.tools_report(con, f)
        return R.usage_report(con, req.report, f, breakdown=req.breakdown)

    stale = None
    try:
        if req.lake:
            from ctxkeep.query import lake as lakeq

            con = lakeq.open_lake(req.lake)
        else:
            try:
                con, stale = R.open_store(home)
            except NothingStored as e:  # an empty store: an empty report, rc 0
                return ReportResult(**_json(R.Report(req.report, f, []), req.breakdown, [str(e)]))
        try:
            rep = _by_machine(con, req.report, f, one) if req.by else one(con)
        finally:
            con.close()
    except CtxkeepError:
        raise
    except duckdb.Error as e:  # mid-query: a damaged or foreign file
        raise (_lake_error(req.lake, e) if req.lake else R.unreadable(home, e)) from None
    if stale:
        rep.notes.insert(0, stale)
    if not rep.rows:
        rep.notes.append("no usage in the store for this selection")
    return ReportResult(**_json(rep, req.breakdown))


def _by_machine(con, name: str, f, one):
    """``one(con)`` per machine of the lake (``query.lake``), the rows tagged with their
    machine, machine by machine (sorted by name); notes once each."""
    from ctxkeep.query import lake as lakeq
    from ctxkeep.query.reports import Report

    rows, notes = [], []
    for m in lakeq.machines(con):
        lakeq.select_machine(con, m)
        rep = one(con)
        for r in rep.rows:
            r.machine = m
        rows += rep.rows
        notes += [n for n in rep.notes if n not in notes]
    lakeq.select_machine(con, None)
    return Report(name, f, rows, notes)


def _lake_error(dest: str, e: Exception) -> StoreError:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    if "all_entries" in first or "history" in first or "tool_calls" in first:
        return StoreError(
            "the lake holds no entries", where=dest, hint="export them with --tables entries on each machine"
        )
    return StoreError(f"the lake is unreadable: {first}", where=dest, hint="export again on each machine")


def _iso(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    return t.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _row_json(name: str, r, breakdown: bool) -> dict:
    d = _row_json_local(name, r, breakdown)
    return d if r.machine is None else {"machine": r.machine, **d}


def _row_json_local(name: str, r, breakdown: bool) -> dict:
    from ctxkeep.query.reports import Block, ToolRow

    if isinstance(r, ToolRow):
        return {
            "agent": r.agent,
            "tool": r.tool_name,
            "calls": r.calls,
            "sessions": r.sessions,
            "results": r.results,
            "errors": r.errors,
            "error_rate": r.error_rate,
            "output_bytes": r.output_bytes,
            "output_tokens": r.output_tokens,
        }
    if isinstance(r, Block):
        d = {
            "period": _iso(r.start),
            "start": _iso(r.start),
            "end": _iso(r.end),
            "actual_end": _iso(r.actual_end),
            "is_active": r.is_active,
            "is_gap": r.is_gap,
            "provider": r.provider,
            "agents": r.agents,
            "models": r.models,
            "responses": r.responses,
            **{k: getattr(r, k) for k in _TOKENS},
            "cost_usd": r.cost_usd,
            "burn_rate": r.burn_rate,
            "projection": r.projection,
        }
        if r.limit_status:
            d["token_limit"] = r.limit_status
        return d
    d = {"period": r.period, "agent": r.agent}
    if breakdown or name == "models":
        d["model"] = r.model
        d["model_source"] = "assumed" if r.model in r.assumed_models else "logged"
    else:
        d["models"] = r.models
        if r.assumed_models:
            d["assumed_models"] = r.assumed_models
    d.update({k: getattr(r, k) for k in _TOKENS})
    d["reasoning_tokens"] = r.reasoning_tokens
    d["cost_usd"] = r.cost_usd
    d["responses"] = r.responses
    d["unpriced_responses"] = r.unpriced
    if name == "session":
        d["project"] = r.project
        d["last_activity"] = _iso(r.last_activity)
        d["subagent_sessions"] = r.subagent_sessions
    return d


def _json(rep, breakdown: bool, notes: list[str] | None = None) -> dict:
    from ctxkeep.query.reports import SCHEMA, ToolRow, totals

    f = rep.filters
    rows = [_row_json(rep.name, r, breakdown) for r in rep.rows]
    if rep.rows and isinstance(rep.rows[0], ToolRow):
        tot = {
            k: sum(r[k] for r in rows)
            for k in ("calls", "results", "errors", "output_bytes", "output_tokens")
        }
    else:
        tot = totals(rep.rows)
    return {
        "schema": SCHEMA,
        "report": rep.name,
        "timezone": f.timezone,
        "mode": f.mode,
        "since": f.since.isoformat() if f.since else None,
        "until": f.until.isoformat() if f.until else None,
        "agents": list(f.agents),
        "project": f.project,
        "rows": rows,
        "totals": tot,
        "notes": rep.notes if notes is None else notes,
    }


def short_ids(home: Path, ids: list[str]) -> dict[str, str]:
    """``session id → its shortest unique prefix`` in the store (as hits show ids)."""
    from ctxkeep.query.sessions import short_ids_of

    return short_ids_of(home, ids)


def statusline(home: Path, stream, timezone: str | None = None) -> str:
    """Claude Code's status line for ``home`` from the JSON it sends on ``stream``
    (``query.statusline.line``: never raises, a problem becomes the line)."""
    from ctxkeep.query import statusline as sl

    return sl.line(home, stream, timezone)

"""Usage and cost reports without pydantic: ``ReportArgs.parse`` reads ``ctxkeep
report``'s typed options by the rules ``service.report.ReportRequest`` applies
(``service.args``: NUL refused, agent names split and lower-cased, ``project`` as "this
directory or below", a known cost mode, ``--by machine`` only with a lake), and
``report_json(home, args)`` runs the report (``query.reports`` over DuckDB, a Parquet
lake through ``query.lake``) into the ``--json`` object. ``ctxkeep report`` asks it
directly (an interactive path, docs/design.md "Latency budget": pydantic's import and
first model build were ~0.2 CPU s of a 10 GB ``report daily``); ``service.report.report``
(MCP, the app, notebooks) wraps the same object in ``ReportResult``, which documents
the keys (tests hold the two equal). Days are local days of ``timezone``; tokens are
counts, costs US dollars. Never imports pydantic."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxkeep.errors import CtxkeepError, NothingStored, StoreError, UsageError
from ctxkeep.service.args import names, project_dir, refuse_nul

REPORTS = ("daily", "weekly", "monthly", "session", "projects", "models", "blocks", "tools")
_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")


@dataclass(frozen=True)
class ReportArgs:
    """One report's selection, the fields of ``service.report.ReportRequest``:
    ``since``/``until`` local days, inclusive (a date, a datetime or an age: the day it
    falls on); ``project``: this directory or below; ``mode``: auto, calculate or
    display. Made by ``parse``."""

    report: str
    since: str | None = None
    until: str | None = None
    timezone: str | None = None
    agents: list[str] | None = None
    project: str | None = None
    mode: str = "auto"
    breakdown: bool = False
    token_limit: str | None = None
    lake: str | None = None
    by: str | None = None

    @classmethod
    def parse(cls, *, report: str, cwd: str | os.PathLike | None = None, **kw: Any) -> ReportArgs:
        """The arguments read as ``ReportRequest.parse`` reads them (None values take
        the defaults; each field's error in the model's order, then the mode and
        ``--by``). Raises UsageError naming the field."""
        from ctxkeep.query.reports import MODES

        values = {k: v for k, v in {"report": report, **kw}.items() if v is not None}
        refuse_nul(values)
        if values["report"] not in REPORTS:
            expected = " or ".join(", ".join(f"'{r}'" for r in REPORTS).rsplit(", ", 1))
            raise UsageError(f"unknown report {report!r}", where="report", hint=f"use {expected}")
        values["agents"] = names("agents", values.get("agents"))
        values["project"] = project_dir(values.get("project"), cwd or os.getcwd())
        args = cls(**values)
        if args.mode not in MODES:
            raise UsageError(
                f"unknown cost mode {args.mode!r}", where="mode", hint="give auto, calculate or display"
            )
        check_by(args.by, args.lake)
        return args


def check_by(by: str | None, lake: str | None) -> None:
    """Raise UsageError unless ``by`` is None or ``machine`` with a lake: the lake's one
    team dimension is its ``machine=`` partition (``sinks.lake``). An unknown value is
    named as such (``--by person`` said only "give --lake DEST --by machine": newuser20 F7)."""
    if by is None:
        return
    if by != "machine":
        raise UsageError(f"unknown --by value {by!r}", hint="--by machine is the lake's one dimension")
    if not lake:
        raise UsageError("--by machine needs --lake", where="by", hint="give --lake DEST --by machine")


def _filters(req: ReportArgs):
    from ctxkeep.query import reports as R
    from ctxkeep.service.when import zone

    tz = zone(req.timezone)
    s = R.parse_date(req.since, "since", tz) if req.since else None
    u = R.parse_date(req.until, "until", tz) if req.until else None
    if s and u and s > u:
        raise UsageError(f"--since {s} is after --until {u}", where="since/until", hint="swap them")
    return R.Filters(tz, s, u, tuple(req.agents or ()), req.project, req.mode)


def report_json(home: Path, req: ReportArgs) -> dict[str, Any]:
    """The report ``req`` asks for, over the store at ``home`` (brought current with
    SQLite first) or ``req.lake``: the ``--json`` object (``ReportResult.as_json()``'s:
    ``schema`` first, then the model's keys in its order). Raises UsageError,
    StoreError."""
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
                return {**_json(R.Report(req.report, f, []), req.breakdown, [str(e)]), "warnings": []}
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
    d = _json(rep, req.breakdown)
    d["warnings"] = [stale] if stale else []
    return d


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

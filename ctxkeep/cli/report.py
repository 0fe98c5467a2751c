"""``ctxkeep report …`` (usage and cost reports over DuckDB) and ``ctxkeep statusline``.

The queries are ``query/reports.py``; this module parses options and renders Rich
tables (thousands separators, a totals row, dollars), ``--json`` (schema 1,
docs/analytics.md "Reports") or ``--csv``. Reports read the store, never session files.
``report html`` (notebooks) registers itself on ``report_app`` from ``report_html.py``.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import sys
from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, _fail, _home, _print_json, app, err, out, table
from ctxkeep.cli.options import agent_option, since_option, split_values, store_agents, until_option
from ctxkeep.errors import CtxkeepError, UsageError
from ctxkeep.paths import normalize_dir

report_app = typer.Typer(
    no_args_is_help=True,
    help="Usage and cost reports: where the tokens and the money went (reads the analytics store).",
)
app.add_typer(report_app, name="report")

SinceOpt = since_option("First local day, inclusive (a datetime or an age: the day it falls on)", "-s")
UntilOpt = until_option("Last local day, inclusive", "-u")
TzOpt = typer.Option(None, "--timezone", "-z", help="IANA time zone of the days (default: the local zone).")
AgentOpt = agent_option(store_agents)
ProjectOpt = typer.Option(
    None, "--project", "-p", help="Only this project directory and those below it (. is the current one)."
)
BreakdownOpt = typer.Option(False, "--breakdown", "-b", help="One row per model.")
ModeOpt = typer.Option(
    "auto",
    "--mode",
    "-m",
    help="Cost: auto (logged, else calculated), calculate (list prices), display (logged).",
)
JsonOpt = typer.Option(False, "--json", "-j", help="Print JSON (schema 1, docs/analytics.md).")
CsvOpt = typer.Option(False, "--csv", help="Print CSV.")
LakeOpt = typer.Option(
    None, "--lake", help="Report over a Parquet lake (every machine's export) instead of this store."
)
ByOpt = typer.Option(None, "--by", help="With --lake: machine (the rows of each machine apart).")

_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")


def _filters(since, until, timezone, agent, project, mode):
    from ctxkeep.query import reports as R

    tz = R.check_timezone(timezone or R.local_timezone())
    s = R.parse_date(since, "--since", tz) if since else None
    u = R.parse_date(until, "--until", tz) if until else None
    if s and u and s > u:
        raise UsageError(f"--since {s} is after --until {u}", where="--since/--until", hint="swap them")
    agents = tuple(split_values(agent))  # checked by the option (``agent_option``)
    if mode not in R.MODES:
        raise UsageError(
            f"unknown cost mode {mode!r}", where="--mode", hint="give auto, calculate or display"
        )
    pdir = normalize_dir(project, os.getcwd()) if project else None
    return R.Filters(tz, s, u, agents, pdir, mode)


def _run(name: str, home, since, until, timezone, agent, project, mode, as_json, as_csv, **kw) -> None:
    from ctxkeep.query import reports as R

    if as_json and as_csv:
        _fail(UsageError("--json and --csv exclude each other", where="ctxkeep report", hint="give one"), 2)
    try:
        f = _filters(since, until, timezone, agent, project, mode)
    except UsageError as e:
        _fail(e, 2)
    lake, by = kw.get("lake"), kw.get("by")
    if by is not None and (by != "machine" or not lake):
        _fail(UsageError(f"--by {by}", where="--by", hint="give --lake DEST --by machine"), 2)
    h = _home(home)

    def one(con):
        if name == "blocks":
            return R.blocks_report(con, f, token_limit=kw.get("token_limit"))
        if name == "tools":
            return R.tools_report(con, f)
        return R.usage_report(con, name, f, breakdown=kw.get("breakdown", False))

    try:
        if lake:
            con, stale = _open_lake(lake), None
        else:
            con, stale = R.open_store(h)
        try:
            rep = _by_machine(con, name, f, one) if by else one(con)
        finally:
            con.close()
    except UsageError as e:
        _fail(e, 2)
    except CtxkeepError as e:
        _fail(e)
    except Exception as e:  # a DuckDB error mid-query: a damaged or foreign file
        import duckdb

        if not isinstance(e, duckdb.Error):
            raise
        if lake:
            _fail(_lake_error(lake, e))
        _fail(R.unreadable(h, e))
    if stale:
        rep.notes.insert(0, stale)
    if not rep.rows:
        rep.notes.append("no usage in the store for this selection")
    if as_json:
        _print_json(_json(rep, kw.get("breakdown", False)))
    elif as_csv:
        _csv(rep, kw.get("breakdown", False))
    elif by:
        for m in dict.fromkeys(r.machine for r in rep.rows):
            part = R.Report(rep.name, f, [r for r in rep.rows if r.machine == m])
            _table(part, kw.get("breakdown", False), h, m)
    else:
        _table(rep, kw.get("breakdown", False), h)
    for n in rep.notes:
        if as_json or as_csv:  # plain lines for scripts: no Rich import (~50 ms) on their path
            sys.stderr.write(f"note: {n}\n")
        else:
            err.print(f"[yellow]note:[/yellow] {n}", highlight=False, soft_wrap=True)


def _open_lake(dest: str):
    from ctxkeep.query import lake as lakeq

    return lakeq.open_lake(dest)


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


def _lake_error(dest: str, e: Exception):
    from ctxkeep.errors import StoreError

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


def _json(rep, breakdown: bool) -> dict:
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
        "notes": rep.notes,
    }


def _csv(rep, breakdown: bool) -> None:
    rows = [_row_json(rep.name, r, breakdown) for r in rep.rows]
    if not rows:
        return
    flat = [
        {k: ("|".join(v) if isinstance(v, list) else v) for k, v in r.items() if not isinstance(v, dict)}
        for r in rows
    ]
    w = csv.DictWriter(sys.stdout, fieldnames=list(flat[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(flat)


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _local(t: dt.datetime | None, tz: str) -> str:
    from zoneinfo import ZoneInfo

    return "" if t is None else t.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M")


def _table(rep, breakdown: bool, home: Path, machine: str | None = None) -> None:
    from rich import box

    from ctxkeep.query.reports import Block, ToolRow, totals

    f = rep.filters
    title = f"ctxkeep {rep.name} report ({f.timezone}, cost mode {f.mode})"
    if machine:
        title += f" - machine {machine}"
    t = table(title=title, box=box.SIMPLE_HEAD, show_footer=bool(rep.rows), pad_edge=False)
    if rep.rows and isinstance(rep.rows[0], ToolRow):
        tot = {
            k: sum(getattr(r, k) for r in rep.rows) for k in ("calls", "results", "errors", "output_tokens")
        }
        for c, foot in (("agent", "Total"), ("tool", ""), ("calls", f"{tot['calls']:,}"), ("sessions", "")):
            t.add_column(c, footer=foot, justify="left" if c in ("agent", "tool") else "right")
        t.add_column("results", footer=f"{tot['results']:,}", justify="right")
        t.add_column("errors", footer=f"{tot['errors']:,}", justify="right")
        t.add_column("error rate", justify="right")
        t.add_column("output tokens", footer=f"{tot['output_tokens']:,}", justify="right")
        for r in rep.rows:
            rate = "" if r.error_rate is None else f"{r.error_rate:.1%}"
            t.add_row(
                r.agent, r.tool_name or "(none)", f"{r.calls:,}", f"{r.sessions:,}", f"{r.results:,}",
                f"{r.errors:,}", rate, f"{r.output_tokens:,}",
            )  # fmt: skip
        out.print(t)
        return
    tot = totals(rep.rows)
    blocks = bool(rep.rows) and isinstance(rep.rows[0], Block)
    first = {
        "daily": "date",
        "weekly": "week",
        "monthly": "month",
        "session": "session",
        "projects": "project",
        "models": "agent",  # then the model column: one row per agent and model
        "blocks": "block start",
    }[rep.name]
    t.add_column(first, footer="Total", no_wrap=rep.name != "projects")
    if blocks:
        t.add_column("status")
        t.add_column("agents")
    elif rep.name != "models":
        t.add_column("agent")
    t.add_column("models" if not (breakdown or rep.name == "models") or blocks else "model")
    for k, label in zip(_TOKENS, ("input", "output", "cache read", "cache write", "total"), strict=True):
        t.add_column(label, footer=f"{tot[k]:,}", justify="right")
    t.add_column("cost", footer=_usd(tot["cost_usd"]), justify="right")
    if rep.name == "session":  # ids as hits show them: the shortest unique prefix
        from ctxkeep.query.sessions import short_ids_of

        shown = short_ids_of(home, [r.period for r in rep.rows])
    for r in rep.rows:
        nums = [f"{getattr(r, k):,}" for k in _TOKENS] + [_usd(r.cost_usd)]
        if blocks:
            if r.is_gap:
                hours = (r.end - r.start).total_seconds() / 3600
                t.add_row(_local(r.start, f.timezone), f"gap {hours:,.1f} h", "", "", *[""] * 6, style="dim")
                continue
            status = "active" if r.is_active else f"{(r.actual_end - r.start).total_seconds() / 3600:.1f} h"
            if r.is_active and r.projection:
                p = r.projection
                status = f"active, {p['remaining_minutes'] // 60}h {p['remaining_minutes'] % 60}m left"
            who = f"{r.provider}: {', '.join(r.agents)}" if r.provider else ", ".join(r.agents)
            t.add_row(_local(r.start, f.timezone), status, who, "\n".join(r.models), *nums)
            if r.is_active and r.projection:
                p, b = r.projection, r.burn_rate
                lim = ""
                if r.limit_status:
                    lim = f" ({r.limit_status['percent']:.0f}% of {r.limit_status['limit']:,}: {r.limit_status['status']})"
                t.add_row(
                    "", "projected", f"{b['tokens_per_minute']:,.0f} tok/min", f"{_usd(b['cost_per_hour'])}/h",
                    "", "", "", "", f"{p['total_tokens']:,}{lim}", _usd(p["cost_usd"]), style="italic",
                )  # fmt: skip
            continue
        model = r.model if (breakdown or rep.name == "models") else "\n".join(r.models)
        if r.assumed_models and (breakdown or rep.name == "models") and r.model in r.assumed_models:
            model = f"{model} (assumed)"
        if rep.name == "models":
            t.add_row(f"{r.agent}", model, *nums)
        else:
            period = r.period or ""
            if rep.name == "session":
                period = shown.get(period, period)
            if rep.name == "session" and r.last_activity is not None:
                period = f"{period}\n{_local(r.last_activity, f.timezone)}"
            if rep.name == "session" and r.subagent_sessions:
                period = f"{period}\n+{len(r.subagent_sessions)} sub-agent session(s)"
            t.add_row(period, r.agent, model, *nums)
    out.print(t)


_doc = {
    "daily": "Tokens and cost per local day and agent.",
    "weekly": "Tokens and cost per week (from Monday) and agent.",
    "monthly": "Tokens and cost per month and agent.",
    "session": "Tokens and cost per session (sub-agents rolled into their parent), the costliest first.",
    "models": "Tokens and cost per agent and model.",
    "projects": "Tokens and cost per project (working directory) and agent.",
}


def _usage_command(name: str):
    def cmd(
        since: str | None = SinceOpt,
        until: str | None = UntilOpt,
        timezone: str | None = TzOpt,
        agent: list[str] = AgentOpt,
        project: str | None = ProjectOpt,
        breakdown: bool = BreakdownOpt,
        mode: str = ModeOpt,
        as_json: bool = JsonOpt,
        as_csv: bool = CsvOpt,
        home: Path | None = HomeOpt,
        lake: str | None = LakeOpt,
        by: str | None = ByOpt,
    ):
        _run(
            name, home, since, until, timezone, agent, project, mode, as_json, as_csv,
            breakdown=breakdown, lake=lake, by=by,
        )  # fmt: skip

    cmd.__doc__ = _doc[name]
    report_app.command(name)(cmd)


for _name in _doc:
    _usage_command(_name)


@report_app.command("blocks")
def blocks(
    since: str | None = SinceOpt,
    until: str | None = UntilOpt,
    timezone: str | None = TzOpt,
    agent: list[str] = AgentOpt,
    project: str | None = ProjectOpt,
    token_limit: str | None = typer.Option(
        None,
        "--token-limit",
        "-t",
        help="Tokens per block to project against: a number or max (largest block).",
    ),
    mode: str = ModeOpt,
    as_json: bool = JsonOpt,
    as_csv: bool = CsvOpt,
    home: Path | None = HomeOpt,
    lake: str | None = LakeOpt,
    by: str | None = ByOpt,
):
    """5-hour usage windows across all agents; the active one with burn rate and projection."""
    _run(
        "blocks", home, since, until, timezone, agent, project, mode, as_json, as_csv,
        token_limit=token_limit, lake=lake, by=by,
    )  # fmt: skip


@report_app.command("tools")
def tools(
    since: str | None = SinceOpt,
    until: str | None = UntilOpt,
    timezone: str | None = TzOpt,
    agent: list[str] = AgentOpt,
    project: str | None = ProjectOpt,
    as_json: bool = JsonOpt,
    as_csv: bool = CsvOpt,
    home: Path | None = HomeOpt,
    lake: str | None = LakeOpt,
    by: str | None = ByOpt,
):
    """Tool calls per agent and tool: calls, sessions, error rate, output size."""
    _run("tools", home, since, until, timezone, agent, project, "auto", as_json, as_csv, lake=lake, by=by)


@app.command()
def statusline(
    home: Path | None = HomeOpt,
    timezone: str | None = TzOpt,
):
    """One line for Claude Code's statusLine: today's cost, the active block, the session's context.

    Reads the JSON Claude Code sends on stdin."""
    from ctxkeep.query import statusline as sl

    sys.stdout.write(sl.line(_home(home), sys.stdin, timezone) + "\n")

"""``ctxkeep report …`` (usage and cost reports over DuckDB) and ``ctxkeep statusline``.

The queries are ``query/reports.py``; this module parses options and renders Rich
tables (thousands separators, a totals row, dollars), ``--json`` (schema 1,
docs/analytics.md "Reports") or ``--csv``. Reports read the store, never session files.
``report html`` (notebooks) registers itself on ``report_app`` from ``report_html.py``.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
import sys
from pathlib import Path

import typer

from ctxkeep.cli import (
    HomeOpt,
    _fail,
    _home,
    _print_json,
    app,
    failing,
    note,
    out,
    short_path,
    table,
)
from ctxkeep.cli.long_table import print_long, proxy_rows
from ctxkeep.cli.options import agent_option, since_option, store_agents, timezone_option, until_option
from ctxkeep.errors import UsageError

report_app = typer.Typer(
    no_args_is_help=True,
    help="Usage and cost reports: where the tokens and the money went (reads the analytics store).",
)
app.add_typer(report_app, name="report")

SinceOpt = since_option("First local day, inclusive (a datetime or an age: the day it falls on)", "-s")
UntilOpt = until_option("Last local day, inclusive", "-u")
TzOpt = timezone_option()
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


def _run(name: str, home, since, until, timezone, agent, project, mode, as_json, as_csv, **kw) -> None:
    # no pydantic on this interactive path: the options read by the request model's
    # rules (``service.report_core``; MCP, the app and notebooks ask ``service.report``)
    from ctxkeep.service.report_core import ReportArgs, report_json

    if as_json and as_csv:
        _fail(UsageError("--json and --csv exclude each other", where="ctxkeep report", hint="give one"), 2)
    breakdown = kw.get("breakdown", False)
    with failing():
        req = ReportArgs.parse(
            report=name, since=since, until=until, timezone=timezone, agents=agent or None,
            project=project, mode=mode, breakdown=breakdown, token_limit=kw.get("token_limit"),
            lake=kw.get("lake"), by=kw.get("by"),
        )  # fmt: skip
        h = _home(home)
        rep = report_json(h, req)
    notes = rep["notes"]
    if as_json:
        _print_json(rep)
    elif as_csv:
        _csv(rep["rows"])
    elif not rep["rows"]:  # an empty result: one line on stdout, rc 0 (as `sessions`)
        empty = next(
            (n for n in notes if n.startswith("no usage")), "no usage in the store for this selection"
        )
        out.print(empty, highlight=False, soft_wrap=True)
        notes = [n for n in notes if n != empty]
    elif req.by:
        for m in dict.fromkeys(r["machine"] for r in rep["rows"]):
            _table(rep, [r for r in rep["rows"] if r["machine"] == m], breakdown, h, m)
    else:
        _table(rep, rep["rows"], breakdown, h)
    if as_json:
        # the notes are in the JSON (newuser21 N5: printed on stderr as well, so `2>&1`
        # no longer parsed); stderr only says what concerns the run itself
        notes = rep.get("warnings") or []
    for n in notes:
        note(n, plain=as_json or as_csv)  # plain lines for scripts: no Rich import on their path


def _csv(rows: list[dict]) -> None:
    if not rows:
        return
    flat = [
        {k: ("|".join(v) if isinstance(v, list) else v) for k, v in r.items() if not isinstance(v, dict)}
        for r in rows
    ]
    # the header is every row's keys in first-seen order: a key only later rows have
    # (`assumed_models` on an assumed-price row) is a column, empty where absent (newuser17 F2:
    # the first row's keys alone raised ValueError mid-export)
    fields = list(dict.fromkeys(k for r in flat for k in r))
    w = csv.DictWriter(sys.stdout, fieldnames=fields, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(flat)


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _time(iso: str | None) -> dt.datetime | None:
    return None if iso is None else dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _local(iso: str | None, tz: str, stack: bool = False) -> str:
    """``2025-06-08 11:00`` local; ``stack``: the time under the date (60 columns)."""
    from zoneinfo import ZoneInfo

    t = _time(iso)
    return (
        ""
        if t is None
        else t.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d\n%H:%M" if stack else "%Y-%m-%d %H:%M")
    )


def _hours(a: str, b: str) -> float:
    return (_time(b) - _time(a)).total_seconds() / 3600  # type: ignore[operator]


def _span(hours: float) -> str:
    """A block's or a gap's length as one word, the figure and its unit never split by
    a wrap (newuser23 F10: "gap 1,416.0" / "h" at 80 columns): ``0.9h``, ``47.5h``;
    from 48 h in days, ``59.0d``."""
    return f"{hours / 24:,.1f}d" if hours >= 48 else f"{hours:,.1f}h"


def _table(rep: dict, rows: list[dict], breakdown: bool, home: Path, machine: str | None = None) -> None:
    from rich import box

    name, tz = rep["report"], rep["timezone"]
    title = f"ctxkeep {name} report ({tz}, cost mode {rep['mode']})"
    if machine:
        title += f" - machine {machine}"
    t = table(title=title, box=box.SIMPLE_HEAD, show_footer=bool(rows), pad_edge=False)
    if name == "tools":
        tot = {k: sum(r[k] for r in rows) for k in ("calls", "results", "errors", "output_tokens")}
        t.add_column("agent", footer="Total", no_wrap=True)
        t.add_column("tool", no_wrap=True)
        t.add_column("calls", footer=f"{tot['calls']:,}", justify="right")
        # below 80 columns: results (≈ calls) and sessions go first (--json has them)
        t.add_column("sessions", justify="right", drop=2)
        t.add_column("results", footer=f"{tot['results']:,}", justify="right", drop=1)
        # below 62 columns: the error count (the rate beside it says as much)
        t.add_column("errors", footer=f"{tot['errors']:,}", justify="right", drop=3)
        t.add_column("error\nrate", justify="right")
        t.add_column("output\ntokens", footer=f"{tot['output_tokens']:,}", justify="right")
        from rich.markup import escape  # a tool name is text, not markup ("[trimmed]")

        for r in rows:
            rate = "" if r["error_rate"] is None else f"{r['error_rate']:.1%}"
            t.add_row(
                r["agent"], escape(r["tool"] or "(none)"), f"{r['calls']:,}", f"{r['sessions']:,}", f"{r['results']:,}",
                f"{r['errors']:,}", rate, f"{r['output_tokens']:,}",
            )  # fmt: skip
        out.print(t)
        return
    width = out.get().width
    names = [_model_cell(r, name, breakdown) for r in rows]
    ids = _short_ids(home, rows) if name == "session" else None

    room_cap: list[int | None] = [None]  # a project's path: at most this wide (projects)
    stacked = [False]  # a local time's date over its time (a 60-column terminal)

    def layout(folded: bool, models: list[list[str]] | None):
        """``(table, its rows' cells, the rows in the table)``: a usage table holds
        only the rows that set its columns' widths (``long_table.proxy_rows``: Rich
        lays out and measures ~20 rows, not ~7,000); blocks (styled rows) all rows."""
        if name in ("blocks", "models"):  # styled rows; markup cells
            return (
                _usage_table(rep, rows, breakdown, home, title, folded, models, stack=stacked[0]),
                None,
                None,
            )
        cells = _usage_cells(rep, rows, folded, models, ids, room_cap[0], stack=stacked[0])
        picked = proxy_rows(cells)
        return (
            _usage_table(
                rep, rows, breakdown, home, title, folded, models, cells=cells, pick=picked, stack=stacked[0]
            ),
            cells,
            picked,
        )

    t, cells, picked, need = None, None, None, 0
    models: list[list[str]] | None = [[n] for n in names]
    # a model per row (``models``, a breakdown): the names are what the table is about
    per_model = (breakdown or name == "models") and name != "blocks"
    for stack in (False, True):  # 60 columns: a time under its date (session, blocks)
        stacked[0] = stack
        for folded in (False, True):  # all columns if they fit, else the token pairs stacked
            models = [[n] for n in names]
            t, cells, picked = layout(folded, models)
            need = _natural_width(t)
            if need <= width:
                break
            if not folded:
                continue  # the token pairs stacked first: the names stay whole if that fits
            # the models column gets what the others leave
            rest = _natural_width(layout(folded, [[""] for _ in names])[0])
            header = "model" if per_model else "models"
            room = max(width - rest + len(header), 8)
            if per_model:
                # a name is never folded (`claude-` / `sonnet-4-` / `20250514`: newuser14 F6,
                # newuser15 F1, newuser16 F5): whole when it fits once the table has left
                # out its total column (the sum of the four others, in --json), else cut in
                # its middle with "…" (both ends tell models apart: `claude-so…-20250929`)
                spare = max(len(_tok(r["total_tokens"])) for r in rows) + 1
                spare = max(spare, len(_tok(_tokens_sum(r["total_tokens"] for r in rows))) + 1)
                models = [[_cut_name(x, room + spare) for x in n.split("\n")] for n in names]
            elif any(len(x) > room for n in names for x in n.split("\n")):
                # a name would be folded (`claude-` / `sonnet-` / `4-` / `20250514`, a row
                # of 10 lines: newuser15 F1): the column goes, named under the table
                models = None
            t, cells, picked = layout(folded, models)
            need = _natural_width(t)
            if need <= width:
                break
            if per_model and models is not None:
                # 60 columns: the names cut shorter (down to 8) until the table fits once it
                # has left out its total column (a fresh table: printing one drops columns)
                cut = max(len(x) for n in models for x in n)
                while cut > 8:
                    over = _printed_width(layout(folded, models)[0]) - width
                    if over <= 0:
                        break
                    cut = max(8, cut - over)
                    models = [[_cut_name(x, cut) for x in n.split("\n")] for n in names]
                t, cells, picked = layout(folded, models)
            if name == "projects" and cells is not None:
                # a path is never folded: cut shorter from the left until the table fits
                # (the total column left out first, as the table does by itself)
                while room_cap[0] is None or room_cap[0] > 8:
                    over = _printed_width(layout(folded, models)[0]) - width  # a fresh table
                    if over <= 0:
                        break
                    now = max(len(line) for c in cells for line in c[0].split("\n"))
                    room_cap[0] = max(8, now - over)
                    t, cells, picked = layout(folded, models)
        # rendered (a fresh table) only when its measure says it may not fit: a wide
        # terminal renders nothing more
        if name not in ("session", "blocks") or _natural_width(t) <= width:
            break
        if _printed_width(layout(folded, models)[0]) <= width:
            break

    # still too wide: the table leaves out the total column (the sum of the four token
    # columns), then prints as wide as it needs (the terminal wraps); no figure is cut
    if cells is None or picked is None:
        out.get().print(t)
        return
    every = cells  # the fallback: Rich draws the table with every row
    fold = folded
    print_long(
        out.get(), t, cells, picked,
        lambda: _usage_table(rep, rows, breakdown, home, title, fold, models, cells=every, stack=stacked[0]),
    )  # fmt: skip


def _natural_width(t) -> int:
    """The width ``t`` takes with all the room it wants (its widest line, trailing
    blanks left out): Rich's measure of the table (its columns' widest cells, padding
    and edges), less the blank right edge of a box like ``SIMPLE_HEAD``'s. Measured,
    not rendered: rendering a 1,294-day ``report daily`` up to four times to take its
    width was ~80 % of the command's CPU (2.5 GB store: 2.0 CPU s). The same figures
    as the rendered lines' for every report table of the corpus and 2.5 GB stores,
    folded or not (``tests/cli/test_report_width.py``)."""
    import io

    from rich.console import Console
    from rich.measure import Measurement

    c = Console(width=10_000, file=io.StringIO(), color_system=None)
    width = Measurement.get(c, c.options, t).maximum
    blank_edge = t.show_edge and t.box is not None and not t.box.head_row_right.strip()
    return width - 1 if blank_edge else width


def _printed_width(t) -> int:
    """The widest line ``t`` prints on the terminal's console (the columns it leaves out
    to fit: left out), rendered: for the few-row tables of ``report projects``. Printing
    changes a ``table()`` (the columns it leaves out): pass a table made for this."""
    import io

    from rich.console import Console

    c = Console(width=10_000, file=io.StringIO(), color_system=None)  # never cropped
    with c.capture() as cap:
        c.print(t, width=out.get().width)
    return max((len(x.rstrip()) for x in cap.get().splitlines()), default=0)


def _cut_name(name: str, width: int) -> str:
    """``name`` on one line of at most ``width`` characters (at least 8): whole, or its
    start and end with "…" between (``claude-so…-20250929``): a model id is never
    folded over lines (newuser16 F5)."""
    width = max(width, 8)
    if len(name) <= width:
        return name
    tail = (width - 1) // 2
    return f"{name[: width - 1 - tail]}…{name[len(name) - tail :]}"


def _model_cell(r: dict, name: str, breakdown: bool) -> str:
    if name == "blocks":
        return "\n".join(r["models"])
    if breakdown or name == "models":
        return r["model"] + (" (assumed)" if r["model_source"] == "assumed" else "")
    return "\n".join(r["models"])


def _nums(values: list[str], folded: bool) -> list[str]:
    """The four token columns and total and cost; ``folded``: input over output and
    cache read over cache write, one cell each."""
    if not folded:
        return values
    i, o, cr, cw, *rest = values
    return [f"{i}\n{o}" if i or o else "", f"{cr}\n{cw}" if cr or cw else "", *rest]


#: the characters a project's path gets in a narrow terminal (``report projects``), or
#: its last folder's name and "…/" when that is longer
PROJECT_ROOM = 26


def _usage_table(
    rep,
    rows,
    breakdown,
    home,
    title,
    folded: bool,
    models: list[list[str]] | None,
    *,
    cells=None,
    pick=None,
    stack: bool = False,
):
    """The table of a usage report or blocks; ``models``: each row's model lines (None:
    no models column, named under the table: a narrow terminal would fold them). A
    period row's cells are ``Text``: literal (a model name is no markup) and not parsed
    as markup at each measure and render (~15 % of a 1,294-day ``report daily``)."""
    from rich import box
    from rich.text import Text

    name, tz = rep["report"], rep["timezone"]
    # folded (a narrow terminal): no outer edge, one space of padding between columns
    tight = {"show_edge": False, "collapse_padding": True} if folded else {}
    t = table(title=title, box=box.SIMPLE_HEAD, show_footer=bool(rows), pad_edge=False, **tight)
    # a gap block (no response) adds to no token sum (its 0 is not a recorded 0)
    tot = {k: _tokens_sum(r[k] for r in rows if not r.get("is_gap")) for k in _TOKENS}
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    cost = sum(costs) if costs else None
    blocks = name == "blocks"
    per_model = (breakdown or name == "models") and not blocks
    first = {
        "daily": "date",
        "weekly": "week",
        "monthly": "month",
        "session": "session\nlast response",  # under the id: its last API response's local time
        "projects": "project",
        "models": "agent",  # then the model column: one row per agent and model
        "blocks": "block start",
    }[name]
    if stack:  # 60 columns: no header wider than the date under it
        first = {"session": "session\nlast\nresponse", "blocks": "block\nstart"}.get(name, first)
    # a project's path is never folded: shortened from the left when narrow (below)
    t.add_column(first, footer="Total", no_wrap=name != "projects" or folded)
    if blocks:
        # a narrow terminal wraps these at their blanks, and cuts a word with "…" rather
        # than fold it (`opencode-g` / `o`: newuser16 F5)
        t.add_column("length", overflow="ellipsis")  # a span, "gap 2.0d" or "active" (newuser24 F12)
        t.add_column("agents", overflow="ellipsis")
    elif name != "models":
        t.add_column("agent", no_wrap=True)
    if models is not None:
        t.add_column("model" if per_model else "models", no_wrap=True)  # wrapped at separators
    else:
        t.caption = f"not shown at {out.get().width} columns: models (--json has them)"
        t.caption_justify, t.caption_style = "left", "dim"
    labels = ["input", "output", "cache read", "cache write", "total"]
    foots = [_tok(tot[k]) for k in _TOKENS]
    if folded:
        labels = ["input\noutput", "cache read\ncache write", "total"]
        foots = _nums(foots, True)
    for label, foot in zip(labels, foots, strict=True):
        t.add_column(label, footer=foot, justify="right", drop=1 if label == "total" else None)
    t.add_column("cost", footer=_usd(cost), justify="right")
    if name not in ("blocks", "models"):
        if cells is None:
            ids = _short_ids(home, rows) if name == "session" else None
            cells = _usage_cells(rep, rows, folded, models, ids)
        for i in range(len(cells)) if pick is None else pick:
            t.add_row(*map(Text, cells[i]))
        return t
    gap = [""] * (len(labels) + 1)
    for r, lines in zip(rows, models if models is not None else [None] * len(rows), strict=True):
        model = [] if lines is None else ["\n".join(lines)]
        nums = _nums([_tok(r[k]) for k in _TOKENS], folded) + [_usd(r["cost_usd"])]
        if name == "models":
            t.add_row(r["agent"], *model, *nums)
            continue
        if r["is_gap"]:
            # stacked (60 columns): the row has two lines already (date / time), so the
            # span goes under "gap" at no cost (on one line the table is 61 wide)
            sep = "\n" if stack else " "
            t.add_row(
                _local(r["start"], tz, stack),
                f"gap{sep}{_span(_hours(r['start'], r['end']))}",
                r["provider"] or "",  # whose quota window was idle (blocks are per provider)
                *([""] if model else []),
                *gap,
                style="dim",
            )
            continue
        status = "active" if r["is_active"] else _span(_hours(r["start"], r["actual_end"]))
        p, b, lim = r["projection"], r["burn_rate"], r.get("token_limit")
        if r["is_active"] and p:
            status = f"active, {p['remaining_minutes'] // 60}h {p['remaining_minutes'] % 60}m left"
        who = f"{r['provider']}: {', '.join(r['agents'])}" if r["provider"] else ", ".join(r["agents"])
        t.add_row(_local(r["start"], tz, stack), status, who, *model, *nums)
        if r["is_active"] and p:
            lim = f" ({lim['percent']:.0f}% of {lim['limit']:,}: {lim['status']})" if lim else ""
            t.add_row(
                "", "projected", f"{b['tokens_per_minute']:,.0f} tok/min", f"{_usd(b['cost_per_hour'])}/h",
                *gap[2 if model else 3 :], f"{p['total_tokens']:,}{lim}", _usd(p["cost_usd"]), style="italic",
            )  # fmt: skip
    return t


def _tok(v: int | None) -> str:
    """A token count as printed: ``12,345``; None (the agent recorded no tokens, only a
    cost: the report's note says whose) ``-``, as ``sessions`` shows it."""
    return "-" if v is None else f"{v:,}"


def _tokens_sum(values) -> int | None:
    """The sum of a token column's recorded counts; None when none is recorded (and
    there is at least one row)."""
    vs = list(values)
    known = [v for v in vs if v is not None]
    return sum(known) if known or not vs else None


def _short_ids(home: Path, rows: list[dict]) -> dict[str, str]:
    """Session ids as hits show them: the shortest unique prefix in the store."""
    from ctxkeep.service.report_core import short_ids

    return short_ids(home, [r["period"] for r in rows])


def _usage_cells(
    rep,
    rows,
    folded: bool,
    models: list[list[str]] | None,
    ids: dict | None,
    cap: int | None = None,
    *,
    stack: bool = False,
) -> list[tuple[str, ...]]:
    """The cells of a period report's rows (daily, weekly, monthly, session,
    projects), as printed: period, agent, models, the token columns (``folded``: in
    pairs) and cost; ``ids``: a session id's shortest unique prefix (``session``);
    ``cap``: a project's path at most this wide (a terminal too narrow for the room
    below); ``stack``: a session's last response time under its date."""
    name, tz = rep["report"], rep["timezone"]
    # a project's last folder whole when it can be (up to PROJECT_ROOM + 4 characters)
    room = PROJECT_ROOM
    if name == "projects" and folded:
        room = max(
            [PROJECT_ROOM]
            + [min(len(re.split(r"[/\\]", r["period"] or "")[-1]) + 2, PROJECT_ROOM + 4) for r in rows]
        )
        if cap is not None:
            room = min(room, cap)
    cells = []
    for r, lines in zip(rows, models if models is not None else [None] * len(rows), strict=True):
        nums = _nums([_tok(r[k]) for k in _TOKENS], folded)
        period = r["period"] or ("(none)" if name == "projects" else "")  # --json: null
        if name == "projects" and folded and r["period"]:  # narrow: ~, then cut from the left
            period = short_path(period, room)
        if name == "session":
            period = (ids or {}).get(period, period)
            if r["last_activity"] is not None:
                period = f"{period}\n{_local(r['last_activity'], tz, stack)}"
            if r["subagent_sessions"]:
                n = len(r["subagent_sessions"])
                # stacked (60 columns): folded at its hyphen, no wider than the date
                period = f"{period}\n+{n} sub-{chr(10) if stack else ''}agent{'s' if n > 1 else ''}"
        model = () if lines is None else ("\n".join(lines),)
        cells.append((period, r["agent"], *model, *nums, _usd(r["cost_usd"])))
    return cells


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
    """5-hour usage windows per provider (a subscription's quota: Anthropic, OpenAI, Google), in order of start; the active one with burn rate and projection."""
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
    timezone: str | None = timezone_option(check=False),
):
    """One line for Claude Code's statusLine: today's cost, the active block, the session's context.

    Reads the JSON Claude Code sends on stdin."""
    from ctxkeep.service.report import statusline as ask

    sys.stdout.write(ask(_home(home), sys.stdin, timezone) + "\n")

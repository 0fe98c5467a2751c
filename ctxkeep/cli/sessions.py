"""Session commands: ``sessions`` (the list) and ``resume`` (a resume snapshot).
Both read the store only and never import Prefect or Polars."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from ctxkeep.cli import (
    HomeOpt,
    JsonOpt,
    _count,
    _fail,
    _home,
    _print_json,
    app,
    failing,
    fold,
    line_width,
    note,
    out,
    safe_text,
    wrap_cells,
)
from ctxkeep.cli.options import agent_option, since_option, store_agents, until_option
from ctxkeep.errors import CtxkeepError, UsageError
from ctxkeep.schema import family_cost_notes, tokens_unrecorded_note


@app.command()
def sessions(
    agent: list[str] = agent_option(store_agents),
    project: str | None = typer.Option(
        None,
        metavar="DIR",
        help="Only sessions whose project dir is this path or below it (., ~ and relative paths work).",
    ),
    since: str | None = since_option("Sessions active from this UTC time on, inclusive"),
    until: str | None = until_option(
        "Sessions started up to this UTC time, inclusive (a date: that whole day)"
    ),
    limit: int | None = typer.Option(
        None, "--limit", "-n", metavar="N", help="At most this many sessions, newest first (default 50)."
    ),
    offset: int | None = typer.Option(
        None,
        "--offset",
        metavar="N",
        help="Skip the first N sessions of the list (the next page: --json's next_offset).",
    ),
    every: bool = typer.Option(False, "--all", help="Every matching session (no page)."),
    empty: bool = typer.Option(
        False,
        "--empty",
        help="Also list the empty sessions (no time, no message: summary-only files); "
        "without it they are counted apart (--json: empty).",
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """List stored sessions, newest first, sub-agents under their parent (ids: the shortest unique prefix)."""
    # no pydantic on this interactive path: the options read by the request model's
    # rules (``service.sessions_core``; MCP and the app ask ``service.sessions``)
    from ctxkeep.service.sessions_core import SessionsArgs, session_list

    if every and (limit is not None or offset):  # `--all --limit 3` printed all, silently
        from ctxkeep.cli import _fail
        from ctxkeep.errors import UsageError

        given = "--limit" if limit is not None else "--offset"
        _fail(UsageError(f"--all and {given} exclude each other", hint="give one"), 2)
    with failing():
        for name, value in (("--limit", limit), ("--offset", offset)):
            if every and value is not None:  # (a page of "every session": the page was ignored)
                raise UsageError(
                    f"--all and {name} exclude each other", where="ctxkeep sessions", hint="give one"
                )
        req = SessionsArgs.parse(
            agent=agent,
            project=project,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
            all=every or None,
            empty=empty,  # --json as the text: empties left out and counted (newuser17 F22)
        )
        res = session_list(_home(home), req)
    if as_json:
        _print_json(res.as_json())
        return
    rows, source = res.rows, res.source
    if not rows:
        past = f" past --offset {res.offset:,} ({res.total:,} match)" if res.total else ""
        out.print(f"no sessions{past}", highlight=False)
        if res.empty:
            out.print(_empty_line(res.empty), highlight=False, style="dim")
        return
    heads = ("agent", "id", "project", "started", "ended", "msgs", "tools", "tokens", "cost", "title")
    cells = [
        (
            ("└ " if r.depth else "") + r.agent,
            r.short_id,
            _short_dir(r.project_dir),
            _when(r.started),
            _when(r.ended, r.started),
            f"{r.messages:,}",
            f"{r.tool_calls:,}",
            "-" if r.tokens is None else f"{r.tokens:,}",
            cost,
            r.title or "",
        )
        for r, cost in zip(rows, _shown_costs(rows), strict=True)
    ]
    # plain aligned columns: every cell but the title whole (ids must stay usable); the
    # title takes what is left of the line (at least 20 characters). A narrow terminal
    # leaves out ended, tools, msgs and project, in that order, until the line fits
    # (at least 12 characters of title); a note names them
    widths = [max([len(x[i]) for x in cells] + [len(c)]) for i, c in enumerate(heads[:-1])]
    if widths[1] > _ID_ROOM and sum(widths) + 2 * len(widths) + 20 > out.width:
        # a few long ids (`copilot_stage0_small-c41`, `52da/sidechain-c`) made the id
        # column 26 wide: rows of 86 columns at 80, titles of 11 (newuser16 F2)
        # at least as wide as keeps every id shown apart (newuser23 F19: two ids that
        # differ past the 17th character were both `99999999-9999-499…`)
        widths[1] = _apart([x[1] for x in cells], _ID_ROOM, _cut)
        cells = [(x[0], _cut(x[1], widths[1]), *x[2:]) for x in cells]
    shown = list(range(len(heads) - 1))
    for i in _NARROW_DROPS:
        if sum(widths[j] + 2 for j in shown) + 20 <= out.width:
            break
        shown.remove(i)
    # still too wide for 20 characters of title (12 before: `List the fi…`, newuser16 F2):
    # the start's date only
    if sum(widths[j] + 2 for j in shown) + 20 > out.width:
        cells = [(*x[:3], x[3][:10], *x[4:]) for x in cells]
        widths[3] = max(len(heads[3]), *(len(x[3]) for x in cells))
    # still under 20 characters of title (80 columns with sub-agent ids: 11, `List the
    # fi…`, newuser19 F5): the tokens go too (the cost stays; the lead's option (a)).
    # 60 columns (session 17: rows of 79): then the id column is cut to what is left
    # (at least 8: most ids are 4 characters) in its middle, so sub-agents stay apart
    # (`fe5e/…ain-60`, not five `fe5e/sidec…`)
    if sum(widths[j] + 2 for j in shown) + 20 > out.width and 7 in shown:
        shown.remove(7)
    over = sum(widths[j] + 2 for j in shown) + 12 - out.width
    if over > 0 and widths[1] > 8:
        room = max(8, widths[1] - over, len(heads[1]))
        widths[1] = _apart([x[1] for x in cells], room, _cut_middle)
        cells = [(x[0], _cut_middle(x[1], widths[1]), *x[2:]) for x in cells]
    room = max(20 if len(shown) == len(heads) - 1 else 12, out.width - sum(widths[j] + 2 for j in shown) - 1)

    def line(x) -> str:
        cols = [x[i].rjust(widths[i]) if i >= 5 else x[i].ljust(widths[i]) for i in shown]
        title = x[-1] if len(x[-1]) <= room else x[-1][: room - 1] + "…"
        return "  ".join(cols + [title]).rstrip()

    # one Text, one print: a print per line was half of `--all`'s CPU at 36,305 sessions
    from rich.text import Text

    text = Text(line(heads), style="bold", end="")
    for r, x in zip(rows, cells, strict=True):
        text.append("\n")
        text.append(line(x), style="dim" if r.depth else None)
    out.print(text, highlight=False, soft_wrap=True)
    if len(shown) < len(heads) - 1:
        hidden = ", ".join(heads[i] for i in (*_NARROW_DROPS, 7) if i not in shown)
        # ("… (see --json or a wider terminal)" was 81 wide at 80 columns: newuser15 F15)
        for part in fold(f"not shown at {out.width} columns: {hidden} (--json has them)"):
            out.print(part, style="dim", highlight=False, soft_wrap=True)
    if res.ingest_running:  # tokens without a cost: the ingest prices them when it ends
        note("an ingest is running: the cost of what it stores shows when it ends")
    elif source == "sqlite" and res.lag:  # why, not "run ingest" (a read-only store: newuser17 F7)
        for part in fold(f"(no cost shown: {res.lag})"):
            out.print(part, highlight=False, markup=False, style="dim", soft_wrap=True)
    elif source == "sqlite":
        out.print("(cost needs the analytics store: run `ctxkeep ingest`)", highlight=False, style="dim")
    for n in unrecorded_notes(rows) + logged_cost_notes(rows) + family_cost_notes(rows):
        note(n)
    # a last line saying how many match, also when all fit (README; newuser15 F16 list),
    # folded at the width (106 columns at 80: newuser16 F2)
    for part in fold(_page_line(res)):
        out.print(part, highlight=False, markup=False, style="dim", soft_wrap=True)
    if res.empty:  # folded at the width (73 columns at 60: session 17)
        for part in fold(_empty_line(res.empty)):
            out.print(part, highlight=False, markup=False, style="dim", soft_wrap=True)


#: the id column's width at most when a row would not fit (the id cut with "…")
_ID_ROOM = 18


def _cut(s: str, room: int) -> str:
    return s if len(s) <= room else s[: room - 1] + "…"


def _apart(ids: list[str], room: int, cut) -> int:
    """The least width from ``room`` up at which ``cut(id, width)`` keeps the ``ids``
    shown apart (distinct ids stay distinct; their whole width at most): an id cut to
    the same text as another's cannot be told apart nor pasted (newuser23 F19)."""
    whole = max((len(i) for i in ids), default=room)
    distinct = len(set(ids))
    for width in range(room, whole):
        if len({cut(i, width) for i in ids}) == distinct:
            return width
    return max(room, whole)


def _cut_middle(s: str, room: int) -> str:
    """``s`` in ``room`` characters: its start and end around "…" (both ends tell ids
    apart: `fe5e/sid…ain-60`)."""
    if len(s) <= room:
        return s
    tail = (room - 1) // 2
    return f"{s[: room - 1 - tail]}…{s[len(s) - tail :]}"


def _shown_costs(rows) -> list[str]:
    """Each row's cost as shown (``$1,234.56``; ``""`` without one): its exact cost
    rounded once, to the cent, as every other page shows the same session
    (``export html``'s index, ``render.transcript``): newuser21 N3 saw ef95 (exact
    $1.965285) as $1.96 here, where its cents had been moved to its sub-agent so the
    two added up to ``report session``'s $3.18, and $1.97 in the export. A total
    (``report session``) is the exact sum rounded once; ``--json`` keeps them exact."""
    return ["" if r.cost_usd is None else f"${r.cost_usd:,.2f}" for r in rows]


def _empty_line(n: int) -> str:
    """The line under the list naming the empty sessions it leaves out."""
    were = "session was" if n == 1 else "sessions were"
    return f"+{n:,} empty {were} left out (no time, no message): --empty lists them"


def unrecorded_notes(rows) -> list[str]:
    """One note per agent whose listed sessions' tokens the agent did not record (``tokens``
    None, shown "-": Crush, Go opencode and Codebuff log a session's cost, not its tokens:
    ``schema.TOKENS_UNRECORDED_WHY``), in ``report``'s words (``schema.tokens_unrecorded_note``)."""
    by_agent: dict[str, int] = {}
    for r in rows:
        if r.tokens is None:
            by_agent[r.agent] = by_agent.get(r.agent, 0) + 1
    return [tokens_unrecorded_note(agent, n) for agent, n in sorted(by_agent.items())]


def logged_cost_notes(rows) -> list[str]:
    """One note per agent whose listed sessions' cost holds the agent's own logged figure
    (``cost_logged`` responses), worded as ``report``'s (``query.reports``: in its auto
    mode a logged cost wins over list prices, as in this list): newuser14 saw Crush's
    ``$3.20`` unmarked here while ``report`` said whose figure it was. Not for a session
    whose tokens were not recorded (``unrecorded_notes`` says how its cost reads)."""
    by_agent: dict[str, int] = {}
    for r in rows:
        if r.cost_logged and r.cost_usd is not None and r.tokens is not None:
            by_agent[r.agent] = by_agent.get(r.agent, 0) + r.cost_logged
    return [
        f"{agent}: the cost of {n:,} response{'' if n == 1 else 's'} is the agent's own logged figure, "
        "not list prices (`ctxkeep report session --mode calculate` prices them)"
        for agent, n in sorted(by_agent.items())
    ]


def _page_line(res) -> str:
    """``showing 50 of 36,305 sessions, newest first - --limit N or --all for more`` (a
    page's range when it does not start at the newest)."""
    n = len(res.rows)
    if not res.offset and res.next_offset is None:  # every one that matches
        return f"{_count(res.total, 'session')}, newest first"
    shown = f"{res.offset + 1:,}-{res.offset + n:,}" if res.offset else f"{n:,}"
    line = f"showing {shown} of {res.total:,} sessions, newest first"
    if res.next_offset is None:
        return line
    if not res.offset:
        return line + " - --limit N or --all for more"
    return line + f" - --offset {res.next_offset} for the next page, --all for every one"


#: the columns (indexes of ``heads``) a narrow terminal leaves out, first to last:
#: ended, tools, msgs, project
_NARROW_DROPS = (4, 6, 5, 2)


def _when(ts: str | None, same_day_as: str | None = None) -> str:
    """``2025-06-01 12:00`` (UTC); just ``12:30`` when on the day of ``same_day_as``."""
    if not ts:
        return ""
    if same_day_as and ts[:10] == same_day_as[:10]:
        return ts[11:16]
    return ts[:16].replace("T", " ")


def _short_dir(p: str | None) -> str:
    if not p:
        return "(none)"  # as the reports spell a missing project (newuser16 F14)
    home = os.path.expanduser("~")
    if p.startswith(home + os.sep):
        p = "~" + p[len(home) :]
    return p if len(p) <= 28 else "…" + p[-27:]


@app.command()
def resume(
    session: str | None = typer.Argument(
        None,
        metavar="[SESSION]",
        help="A session id or unique prefix (default: the latest session of --project or here).",
    ),
    project: str | None = typer.Option(
        None, metavar="DIR", help="The project whose latest session to resume (default: .)."
    ),
    budget: int = typer.Option(
        1500, "--budget", "-b", metavar="TOKENS", help="Token budget of the snapshot."
    ),
    fmt: str = typer.Option("md", "--format", "-f", metavar="FORMAT", help="md or json (--json: json)."),
    as_json: bool = JsonOpt,
    home: Path | None = HomeOpt,
):
    """Print a resume snapshot of a session: prompts, open tasks, files, last failure, the user's rules, where to fetch more."""
    from ctxkeep.service.resume import ResumeRequest
    from ctxkeep.service.resume import resume as ask

    try:
        if fmt not in ("md", "json"):
            raise UsageError(f"unknown format {fmt!r}", where="--format", hint="use md or json")
        snap = ask(_home(home), ResumeRequest.parse(session=session, project=project, budget=budget))
    except CtxkeepError as e:  # SESSION is an argument; --project only when typed
        _fail(e, words={"session": "SESSION", **({} if project else {"project": None})})
    if fmt == "json" or as_json:
        _print_json(snap.as_json())
    else:
        # sys.stdout, not click.echo: click writes UTF-8 to an ASCII terminal; this degrades.
        # Folded at the width in a terminal (116 columns at 80); piped (an agent's hook,
        # a file) as the snapshot is. (COLUMNS read here, not the console's width: stdout
        # is written without Rich, and a console made earlier in the process keeps its own)
        cols = os.environ.get("COLUMNS", "")
        width = int(cols) if cols.isdigit() else line_width() if sys.stdout.isatty() else None
        md = snap.markdown if width is None else fold_markdown(snap.markdown, width)
        sys.stdout.write(safe_text(md))
        if snap.note:  # on stderr: stdout is the snapshot an agent's hook reads (as search's notes)
            note(snap.note)


def fold_markdown(md: str, width: int) -> str:
    """``md`` (a resume snapshot) with each line wider than ``width`` terminal cells
    folded between words: a quote's lines after the first start ``> ``, a list item's
    and any other line's ``  ``; a code span that fits a line is kept whole (a command
    to copy), a word wider than the line is cut; lines inside a ``` fence are cut as
    they are. Widths are cells (Rich's ``cell_len``: a CJK character takes two;
    ``cli.wrap_cells``). Every line fits ``width`` (at least 20)."""
    import re
    import textwrap

    from rich.cells import cell_len

    width = max(width, 20)
    lines, fenced = [], False
    for line in md.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if cell_len(line) <= width or line.startswith("```"):
            lines.append(line)
            continue
        if fenced:
            lines.extend(_cut_cells(line, width))
            continue
        lead, rest = ("> ", line[2:]) if line.startswith("> ") else ("", line)
        more = "> " if lead else "  "
        room = width - len(more)

        # a code span one piece (its blanks held: U+E000, one cell, no blank) where it fits
        def hold(m: re.Match[str], room: int = room) -> str:
            return m[0].replace(" ", HELD_BLANK) if cell_len(m[0]) <= room else m[0]

        rest = re.sub(r"`[^`]+`", hold, rest)
        if cell_len(rest) == len(rest):
            wrapped = textwrap.wrap(
                rest,
                width=width,
                initial_indent=lead,
                subsequent_indent=more,
                break_long_words=True,
                break_on_hyphens=False,
            )
        else:  # wide characters: by cells (every line given the room of a folded one)
            parts = wrap_cells(rest, room)
            wrapped = [(lead if i == 0 else more) + x for i, x in enumerate(parts)]
        lines.extend(x.replace(HELD_BLANK, " ") for x in wrapped)
    return "\n".join(lines)


#: ``fold_markdown``'s stand-in for a blank inside a code span kept whole (a private-use
#: character: one cell, not a blank to ``textwrap`` or ``str.split``)
HELD_BLANK = "\ue000"


def _cut_cells(line: str, width: int) -> list[str]:
    """``line`` cut between characters into pieces of at most ``width`` cells."""
    from rich.cells import cell_len

    out, cur, w = [], "", 0
    for ch in line:
        cw = cell_len(ch)
        if cur and w + cw > width:
            out.append(cur)
            cur, w = "", 0
        cur, w = cur + ch, w + cw
    return [*out, cur] if cur else out

"""Core commands: ingest (the main job), search, show, stats."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import (
    Caught,
    HomeOpt,
    JsonOpt,
    _count,
    _fail,
    _home,
    _print_json,
    _size,
    app,
    err,
    failing,
    fold,
    line_width,
    note,
    out,
    said_at_once,
    say,
    say_dim,
    say_folded,
    short_path,
    stopped_with,
    table,
    text_arg,
    tilde,
    warn,
    wrap_cells,
)
from ctxkeep.cli.options import (
    PrefectOpt,
    agent_option,
    choice_option,
    require_paths,
    since_option,
    store_agents,
    until_option,
)
from ctxkeep.cli.sources import fail_config
from ctxkeep.errors import CtxkeepError, NotFound, UsageError


@app.command()
def ingest(
    agent: list[str] = agent_option(),
    path: list[Path] = typer.Option(
        None,
        "--path",
        "-p",
        metavar="PATH",
        help="Ingest this file or directory instead of discovering (repeatable).",
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
    prefect: bool | None = PrefectOpt,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    task_runner: str | None = typer.Option(
        None,
        "--task-runner",
        metavar="dask[=ADDRESS|N]",
        help="Run the extract + transform of the parts on a Dask cluster (a local one of N "
        "worker processes, default one per core, or the scheduler at ADDRESS); one writer "
        "loads SQLite here. Needs the dask extra.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Only say what would be read, per agent (files, bytes); write nothing."
    ),
):
    """Ingest new session bytes of every agent into the store (the main job)."""
    from ctxkeep.service import ingest as svc

    h = _home(home)
    req = svc.IngestRequest(tuple(agent or ()), tuple(path or ()), prefect, task_runner)
    if dry_run:
        _ingest_dry_run(h, req, as_json)
        return
    try:
        req.check()
    except UsageError as e:
        _fail(e, 2)
    except CtxkeepError as e:
        fail_config(e)
    bar: list = []  # the progress bar, drawn once the run has work (no Rich otherwise)
    # with --path, the plan's problems (a path of no agent) are said after the run:
    # as the one error line when no path held a session file, else as warnings
    held_problems: list[str] = []
    shows = svc.IngestProgress(
        on_problem=held_problems.append if path else warn,
        on_wait=lambda where: err.print(
            f"waiting for another ctxkeep run on this store to finish ({where})…",
            highlight=False,
            style="dim",
        ),
        on_server=(
            lambda: err.print(
                "starting Prefect's temporary local server for the flow run "
                "(15-50 s; `ctxkeep serve` keeps one running; without --prefect ingest runs in-process)",
                highlight=False,
                style="dim",
            )
        )
        if progress and not as_json
        else None,
    )
    if progress and not as_json:

        def on_plan(total: int) -> None:
            prog, task_id = _ingest_progress(True)
            if prog is not None:
                prog.start()
                prog.update(task_id, total=total)
                bar.append((prog, task_id))

        def on_bytes(n: int) -> None:
            if bar:
                bar[0][0].advance(bar[0][1], n)

        def on_phase(name: str) -> None:  # the tail: the bar at its total says what runs
            if bar:
                bar[0][0].update(bar[0][1], description=f"ingest: {name}")

        shows.on_plan = on_plan
        shows.on_bytes = on_bytes
        shows.on_phase = on_phase
    kept: list[svc.Interrupted | None] = []  # Ctrl-C stopped it: what the store kept
    caught = Caught()  # the signal that stopped it (its exit code: 130 SIGINT, 143 SIGTERM)
    res: svc.IngestOutcome | None = None
    try:
        require_paths(path or [])
        with said_at_once(
            "stopping the ingest (a few seconds; what it stored so far stays)", term=True, caught=caught
        ):
            res = svc.ingest(h, req, shows)
    except CtxkeepError as e:
        for prob in held_problems:
            warn(prob)
        fail_config(e)
    except KeyboardInterrupt as e:
        kept.append(e if isinstance(e, svc.Interrupted) else None)
    finally:
        for prog, _ in bar:
            prog.stop()
    late = bool(kept) and kept[0] is None and res is not None  # the stop came as the run ended
    if kept and not late:  # it said "what was stored stays stored" after runs that stored nothing
        stop = kept[0]
        stopped_with(
            "interrupted before anything was stored; run the command again to go on"
            if stop is None or not stop.stored
            else f"interrupted: the store holds what {stop.stored:,} of {stop.todo:,} files gave so far "
            "(in whole or in part); run the command again to go on",
            caught.exit_code,
        )
    assert res is not None  # the run ended (a stop before its end left above)
    nothing = bool(path) and not res.summary["files"] and bool(held_problems)
    if as_json:
        _print_json(res.as_json())
    for prob in held_problems[:-1] if nothing else held_problems:
        warn(prob)
    if nothing:  # every --path was skipped: one error line, not an empty summary
        last = held_problems[-1]
        where, _, what = last.rpartition(": ")
        many = len(held_problems) > 1
        _fail(
            NotFound(
                ("no --path held a session file; " if many else "") + what,
                where=where,
                hint="give a session file or a folder that holds them "
                "(`ctxkeep sources` shows where each agent keeps them)",
            )
        )
    if not as_json:
        _print_summary(res.summary, res.held_note)
        if res.rekey_note:
            say_dim("  " + res.rekey_note)
    if late:  # said "stopping", so never exit 0 (newuser23 F3)
        stopped_with("interrupted as the run ended: it had stored what the summary says", caught.exit_code)


def _ingest_dry_run(h: Path, req, as_json: bool) -> None:
    """``ingest --dry-run``: the plan's files and new bytes per agent
    (``service.ingest.dry_run``)."""
    from ctxkeep.service import ingest as svc

    try:
        require_paths(list(req.paths))
        rep = svc.dry_run(h, req).summary
    except CtxkeepError as e:
        fail_config(e)
    if as_json:
        _print_json(rep)
        return
    for prob in rep["problems"]:
        warn(prob)
    if not rep["files"]:
        out.print(
            f"nothing to read: {_count(rep['unchanged'], 'file')} unchanged since the last ingest"
            + ("" if rep["unchanged"] else " (see `ctxkeep sources` for where ctxkeep looks)"),
            highlight=False,
        )
        return
    t = table(
        title=f"ingest --dry-run: would read {_count(rep['files'], 'file')}, {_size(rep['bytes'])} on disk"
    )
    t.add_column("agent")
    t.add_column("files", justify="right")
    t.add_column("new bytes", justify="right")
    for a in rep["agents"]:
        t.add_row(a["agent"], f"{a['files']:,}", f"{a['bytes']:,}")
    out.print(t)
    out.print(
        f"{_count(rep['unchanged'], 'file')} unchanged; nothing was written"
        + ("" if rep["store"] else " (no store exists yet at " + str(h) + ")"),
        highlight=False,
    )
    # two measures, each named (newuser17 F19: 8.8 MB here, 8.0 MB in ingest's line)
    say_folded(
        "(new bytes on disk: ingest counts the bytes of the records it reads - a database's "
        "rows, not its file; a JSONL's complete lines - so its figure may be smaller)"
    )


def _ingest_progress(show: bool):
    """The ingest's progress bar (a transient Rich ``Progress`` on stderr, its task
    id), or ``(None, None)`` when ``show`` is False or stderr is no terminal: Rich
    draws nothing there, and ``rich.progress`` is not imported (~0.05 s of a first
    ingest)."""
    if not (show and err.get().is_terminal):
        return None, None
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err.get(),
        transient=True,
    )
    return prog, prog.add_task("ingest", total=None)


def _print_summary(s: dict, held: str | None) -> None:
    # ``lines`` counts records: a JSONL line, a database row, a whole JSON or Markdown
    # document (an Aider history file is one): "records", not "lines" (2 Aider files
    # read as "2 lines")
    line = (
        f"ingested {_count(s['entries_new'], 'new entry', 'new entries')} from {s['files_read']:,} of "
        f"{_count(s['files'], 'file')} ({_size(s['bytes'])}, {_count(s['lines'], 'record')}) in "
        f"{s['seconds']:.1f} s; {_count(s['quarantined'], 'bad line')}"
        # the bad lines read in this run: a file read again (rewritten, shrunk and
        # regrown) holds lines quarantined before, stored once, so not "newly quarantined"
        + (" (in quarantine, each stored once: `ctxkeep quarantine`)" if s["quarantined"] else "")
    )
    say_folded(line)  # at the terminal's width (without Rich: a no-op run imports none)
    if s.get("per_agent"):
        say_folded("  " + ", ".join(f"{a}: {n:,}" for a, n in sorted(s["per_agent"].items())), indent="    ")
    if not s["files"] and not s["entries_new"]:  # nothing found at all: say where to look
        say(
            "  no session files found: `ctxkeep sources` shows where each agent was looked for "
            "(and --path FILE reads one file)"
        )
    if s.get("files_vanished"):
        say(f"  {_count(s['files_vanished'], 'file')} vanished before they could be read")
    if s.get("analytics") and "not updated" in s["analytics"]:
        warn(s["analytics"])
    if held:
        say("  " + held)
    if s.get("files_unreadable"):
        n = s["files_unreadable"]
        shown = s.get("unreadable") or []
        say(
            f"  {_count(n, 'file')} unreadable (quarantined): not in {'their' if n != 1 else 'its'} "
            f"agent's format; `ctxkeep quarantine` shows the lines"
            + (
                f": {', '.join(shown)}" + (f", +{n - len(shown)} more" if n > len(shown) else "")
                if shown
                else ""
            )
        )
    if s.get("lines_unended"):
        n, shown = s["lines_unended"], s.get("unended") or []
        say_folded(
            f"  {_count(n, 'unended last line')} quarantined (no newline, the file idle past "
            f"CTXKEEP_IDLE_SECONDS, not a whole record; read again if the agent writes on): "
            f"{', '.join(shown)}" + (f", +{n - len(shown)} more" if n > len(shown) else ""),
            indent="    ",
        )
    for t in tombstone_lines(s.get("tombstoned") or []):
        say_folded("  " + t, indent="    ")
    rows = s.get("not_understood") or []  # transforms.drift.run_not_understood
    records = sum(sum(r["unknown"].values()) for r in rows)
    types = len({(r["agent"], k) for r in rows for k in r["unknown"]})
    if records:
        say_folded(
            f"  {_count(records, 'record')} of {_count(types, 'type')} not understood, kept as meta: "
            "`ctxkeep sources --coverage`",
            indent="    ",
        )
    alerts = s.get("coverage_alerts") or []
    for a in alerts:
        say_folded(f"  format drift: {a['message']}", indent="    ")
    if alerts:
        say_folded(
            "  (`ctxkeep sources --coverage` shows the coverage ledger; the records are kept as meta entries)",
            indent="    ",
        )


@app.command()
def search(
    query: list[str] = typer.Argument(
        ...,
        metavar="QUERY",
        help='Words, "phrases", identifiers, paths, error messages; CJK works. '
        "Unquoted words are one query (joined by spaces); entries holding them side by side, "
        "in order, rank first. The shell drops plain quotes: an exact phrase alone is "
        "'\"no such file\"'.",
    ),
    agent: list[str] = agent_option(store_agents),
    project: str | None = typer.Option(
        None, help="Only entries whose project dir is this path or below it (., ~ and relative paths work)."
    ),
    session: str | None = typer.Option(
        None, help="Only this session (an id or its first characters, as hits show it; sub-agents included)."
    ),
    kind: list[str] = choice_option(
        "--kind",
        "KINDS",
        "message, tool_call, tool_result, thinking, summary, meta (repeatable, or a,b).",
    ),
    role: list[str] = choice_option("--role", "ROLES", "user, assistant, system, tool (repeatable, or a,b)."),
    tool: list[str] = typer.Option(
        None,
        "--tool",
        metavar="NAME",
        help="Only calls/results of this tool name (case-insensitive; repeatable, or a,b).",
    ),
    since: str | None = since_option("From this UTC time on, inclusive"),
    until: str | None = until_option("Up to this UTC time, inclusive (a date: that whole day)"),
    status: list[str] = choice_option(
        "--status", "STATUSES", "active, archived, consumed, rewound (repeatable, or a,b)."
    ),
    limit: int = typer.Option(10, "--limit", "-n", metavar="N", help="At most this many hits (1-200)."),
    budget: int | None = typer.Option(
        None, "--budget", "-b", metavar="TOKENS", help="Token budget for the listed hits."
    ),
    raw: bool = typer.Option(False, "--raw", help="Pass FTS5 query syntax through (word index only)."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Search the store: ranked hits (tier 1: id, agent, session, time, kind, title, snippet); `ctxkeep show ID` prints one in full."""
    from ctxkeep.service.search_core import SearchArgs, did_you_mean, hits_json, render_hit, search_args

    with failing():
        req = SearchArgs.parse(
            [text_arg(" ".join(query))],
            limit=limit,
            budget=budget,
            raw=raw,
            filters={
                "agent": agent,
                "project": project,
                "session": session,
                "kind": kind,
                "role": role,
                "tool": tool,
                "since": since,
                "until": until,
                "status": status,
            },
        )
        res = search_args(_home(home), req)
    hits = res.results[0]
    if as_json:
        _print_json(hits_json(hits))
        return
    for n in res.notes:
        err.print(f"[yellow]note:[/yellow] {n}", highlight=False)
    if not hits.hits:
        out.print("no matches" if not hits.omitted else hits.note, highlight=False)
        _no_such_project(_home(home), project)
        if hits.suggestions:
            say_folded(did_you_mean(hits.suggestions))
        return
    from rich.cells import cell_len

    style = {"head": "bold", "title": "", "snippet": "dim"}
    width = line_width()
    for h in hits.hits:
        for part, line in render_hit(h):
            # at the terminal's width: the head (its id whole) folded between its fields,
            # a title's or snippet's text wrapped (a long word of text may be cut)
            if part == "head":  # broken between its fields (two spaces apart) only: a
                # date stays with its time, a size with "tok" (newuser15 F4)
                lines = _fold_fields(line, width, "   ")
            elif width is not None and cell_len(line) + 3 > width:  # cells: CJK takes two
                lines = wrap_cells(line, width, indent="   ")
            else:
                lines = ["   " + line]
            for x in lines:
                out.print(x, highlight=False, markup=False, style=style[part], soft_wrap=True)
    if hits.note:
        err.print(f"[yellow]note:[/yellow] {hits.note}", highlight=False)
    if hits.suggestions:  # at the width, broken between the suggestions' words
        say_folded(did_you_mean(hits.suggestions))


def _fold_fields(line: str, width: int | None, indent: str) -> list[str]:
    """``line``, whose fields are two spaces apart, folded at ``width`` between fields
    only (the lines after the first indented by ``indent``); a field wider than the
    line stays whole on a line of its own. Unfolded when ``width`` is None."""
    if width is None or len(line) <= width:
        return [line]
    one = " ".join(line.split("  "))  # fields one space apart, when that fits: no line
    if len(one) <= width:  # of `~13 tok` alone (newuser16 F9)
        return [one]
    out: list[str] = []
    cur = ""
    for f in line.split("  "):
        cand = f"{cur}  {f}" if cur else (indent if out else "") + f
        if cur and len(cand) > width:
            out.append(cur)
            cand = indent + f
        cur = cand
    return [*out, cur] if cur else out


def _no_such_project(h: Path, project: str | None) -> None:
    """A note when ``--project`` names no stored project (a new user's bare project name
    was read as a folder below the current one, and matched nothing, without a word)."""
    from ctxkeep.service.args import project_dir
    from ctxkeep.service.sessions_core import has_project

    d = project_dir(project)
    if d is not None and not has_project(h, d):
        for x in fold(
            f"note: no stored session's project is {d} or below it (--project is a folder; "
            "a relative one is read from the current folder); `ctxkeep report projects` lists them"
        ):
            err.print(x, highlight=False, markup=False)


@app.command()
def show(
    entry_ids: list[str] = typer.Argument(
        None,
        metavar="[ENTRY_ID]...",
        help="Entry ids (or unique prefixes of 6+ characters) from `ctxkeep search`.",
    ),
    session: str | None = typer.Option(
        None,
        "--session",
        "-s",
        help="Print this session's conversation in order instead (an id or unique prefix, as `ctxkeep sessions` shows).",
    ),
    budget: int | None = typer.Option(
        None,
        "--budget",
        "-b",
        metavar="TOKENS",
        help="Token budget for all texts together (cut texts keep head and tail).",
    ),
    max_bytes: int | None = typer.Option(
        None,
        "--max-bytes",
        metavar="BYTES",
        help="Cap on each text, in bytes (the elision marker comes on top).",
    ),
    offset: int = typer.Option(
        0,
        "--offset",
        metavar="BYTES",
        help="Continue from this byte offset (one id; offsets come from the elision markers).",
    ),
    media_dir: Path | None = typer.Option(
        None,
        "--media-dir",
        help="Write the images and outputs compress moved to the store to files in this directory.",
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Print entries in full (tier 2 of a search), or with --session one session's conversation.

    Within a budget (cut texts keep head and tail around a marker that says how to
    fetch the rest); with --json also the images and outputs compress moved to the
    store (base64)."""
    if session is not None or not entry_ids:
        if entry_ids or session is None:
            _fail(
                UsageError(
                    "give entry ids or --session, not both" if entry_ids else "nothing to show",
                    hint="`ctxkeep show ID…` or `ctxkeep show --session SESSION`",
                ),
            )
        _show_session(session, budget, home, as_json)
        return
    from rich.markup import escape

    from ctxkeep.service.fetch import ShowRequest
    from ctxkeep.service.fetch import fetch as ask

    with failing():
        req = ShowRequest.parse(
            ids=entry_ids, budget=budget, max_bytes=max_bytes, offset=offset, media=True, media_dir=media_dir
        )
        res = ask(_home(home), req)
    for p in res.notes:
        warn(p)
    if as_json:
        _print_json(res.as_json())
        return
    for d in res.entries:
        head, _, rest = d.header().partition(" ")
        out.print(f"[bold]{head}[/bold] " + escape(rest), highlight=False)
        out.print("  " + d.origin(), highlight=False, markup=False, soft_wrap=True)
        out.print(d.text, highlight=False, markup=False, soft_wrap=True)
        for m in d.media:
            out.print(
                f"  media #{m.seq}: {m.media_type}, {m.bytes:,} bytes (sha256 {m.sha256[:12]}…)"
                + (
                    f" written to {m.path}"
                    if m.path
                    else "; --media-dir DIR writes it to a file, --json returns it"
                ),
                highlight=False,
                markup=False,
                soft_wrap=True,
            )


def _show_session(session: str, budget: int | None, home: Path | None, as_json: bool) -> None:
    """``show --session``: the conversation of ``session`` in order."""
    from rich.markup import escape

    from ctxkeep.service.conversation_core import EMPTY_THINKING, conversation_json, conversation_of

    with failing():
        conv, short = conversation_of(_home(home), session, budget)
    if as_json:
        _print_json(conversation_json(conv, short))
        return
    days = sorted({t.ts[:10] for t in conv.turns if t.ts})
    # the date in the header (newuser16 F3: only HH:MM:SS anywhere), UTC as the times
    span = "" if not days else days[0] if days[0] == days[-1] else f"{days[0]} - {days[-1]}"
    width = line_width()
    head = f"{conv.agent} session {short}" + (f" ({conv.session_id})" if short != conv.session_id else "")
    head += f"  {span} UTC" if span else ""
    where = tilde(conv.project_dir) if conv.project_dir else ""
    gap = "\n  " if width is not None and len(f"{head}  {where}") > width else "  "  # the project below
    if width is not None and gap != "  ":  # its end, from a folder, when wider still (60 columns)
        where = short_path(where, width - 2)
    # the full id, then the dates, on lines of their own where the head is too wide (60 columns)
    first = f"{conv.agent} session {short}"
    id_gap = " " if width is None or len(f"{first} ({conv.session_id})") <= width else "\n  "
    day_gap = "  " if width is None or len(head.rsplit("\n", 1)[-1]) <= width else "\n  "
    if width is not None and id_gap != " " and span:
        day_gap = "  " if len(f"  ({conv.session_id})  {span} UTC") <= width else "\n  "
    out.print(
        f"[bold]{conv.agent} session {escape(short)}[/bold]"  # ids are data: "[trimmed…]" is no markup
        + (f"{id_gap}[dim]({escape(conv.session_id)})[/dim]" if short != conv.session_id else "")
        + (f"{day_gap}{span} UTC" if span else "")
        + (f"{gap}{escape(where)}" if where else ""),
        highlight=False,
    )
    # texts folded at the width between words (a long word cut) when the width is known;
    # piped, each line whole (one record per line for grep)
    fit: dict = {"soft_wrap": True} if width is None else {"soft_wrap": False, "overflow": "fold"}
    day = days[0] if days else ""
    hidden = 0  # encrypted reasoning: nothing to read, counted (104 lines of it: newuser16 F3)
    for t in conv.turns:
        if t.kind == "thinking" and t.text == EMPTY_THINKING:
            hidden += 1
            continue
        if t.ts and t.ts[:10] != day:  # where the day changes: a line saying so
            day = t.ts[:10]
            out.print(f"[dim]── {day} ──[/dim]", highlight=False)
        when = (t.ts or "")[11:19]
        if t.kind == "tool_call":
            res = (
                "no result"
                if t.result_bytes is None
                else f"→ {t.result_bytes:,} bytes" + (" ERROR" if t.result_error else "")
            )
            tool, tail = t.tool_name or "?", f"  {res}  {t.entry_id[:12]}"
            args = t.text
            if width is not None:  # cut to the width, as the summaries (the id stays in view)
                room = width - len(f"{when} ⚙ {tool} ") - len(tail)
                if room < 8:  # a long tool name: the result and the id on the next line
                    tail = "\n" + " " * 9 + tail.lstrip()
                    room = width - len(f"{when} ⚙ {tool} ")
                if len(args) > room:
                    args = args[: max(room - 1, 0)] + "…" if room >= 2 else ""
            out.print(
                f"{when} [cyan]⚙ {escape(tool)}[/cyan] {escape(args)}[dim]{escape(tail)}[/dim]",
                highlight=False,
                **fit,
            )
        elif t.kind == "compaction":
            out.print(f"{when} [yellow]{escape(t.text)}[/yellow]", highlight=False, **fit)
        elif t.kind in ("thinking", "summary", "tool_result"):
            out.print(f"{when} [dim]{t.kind}: {escape(t.text)}[/dim]", highlight=False, **fit)
        elif t.kind == "meta":
            out.print(
                f"{when} [dim]{escape(t.tool_name or 'meta')}:[/dim] {escape(t.text)}  [dim]{t.entry_id[:12]}[/dim]",
                highlight=False,
                **fit,
            )
        else:
            out.print(f"\n{when} [bold]{t.role}[/bold] [dim]{t.entry_id[:12]}[/dim]", highlight=False)
            out.print(t.text, highlight=False, markup=False, **fit)
    if hidden:
        n = f"{hidden:,} reasoning item{'s' if hidden > 1 else ''}"
        note(f"{n} not shown: the agent stores its reasoning encrypted (nothing to read)")
    if conv.note:
        note(conv.note)  # folded at the width (170 columns: newuser15 F4)


def _usage_table(agents: dict[str, dict]) -> None:
    """``stats``' API tokens per agent: the four components and the thoughts (reasoning
    tokens), ``-`` where the agent does not record a figure (Crush's tokens, Claude
    Code's thoughts: ``schema.REASONING_RECORDED``); in a narrow terminal input over
    output and cache read over cache write (as ``report``'s tables)."""
    from ctxkeep.cli.report import _natural_width

    def fig(v: int | None) -> str:
        return "-" if v is None else f"{v:,}"

    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens")
    heads = ("input", "output", "cache\nread", "cache\nwrite", "thoughts")
    import textwrap

    why = textwrap.fill(  # folded here: the console soft-wraps what it prints
        "thoughts: reasoning tokens (inside the output for Codex and Copilot CLI, beside it "
        "for the others: in their totals); -: not recorded by the agent",
        out.get().width,
        break_on_hyphens=False,
    )
    for folded in (False, True):
        t = table(title="API tokens per agent", caption=why, caption_justify="left")
        t.add_column("agent", no_wrap=True)
        t.add_column("responses", justify="right", drop=1)
        cols = heads if not folded else ("input\noutput", "cache read\ncache write", "thoughts")
        for h in cols:
            t.add_column(h, justify="right")
        for a, d in agents.items():
            v = [fig(d[k]) for k in keys]
            if folded:
                v = [f"{v[0]}\n{v[1]}", f"{v[2]}\n{v[3]}", v[4]]
            t.add_row(a, f"{d['responses']:,}", *v)
        if _natural_width(t) - len("responses") - 1 <= out.get().width:
            break
    out.print(t)


@app.command()
def stats(home: Path | None = HomeOpt, as_json: bool = JsonOpt):
    """Counts and sizes of the store (read-only)."""
    from ctxkeep.service.stats_core import figures, redactions_line, stats_json

    with failing():
        h = _home(home)
        res = figures(h)
    if as_json:
        _print_json(stats_json(res))
        return
    from rich import box

    rows = [
        (
            a,
            f"{d['sessions']:,}",
            f"{d['entries']:,}",
            f"{d['kinds'].get('message', 0):,}",
            f"{d['kinds'].get('tool_call', 0):,}",
            f"{d['kinds'].get('tool_result', 0):,}",
            _size(d["text_bytes"]),
            f"{d['token_estimate']:,}",
        )
        for a, d in res["agents"].items()
    ]
    # fits 80 columns: headers on two lines, one space between columns, cells never cut
    t = table(title=f"ctxkeep store {tilde(h)}", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for i, c in enumerate(
        # tokens of the stored text, estimated from its bytes: not the API tokens of `usage`
        # below (nor of `sessions` and the reports), which the agents logged per response
        (
            "agent",
            "sessions",
            "entries",
            "messages",
            "tool\ncalls",
            "tool\nresults",
            "text",
            "text\ntokens\n(est.)",
        )
    ):
        t.add_column(
            c,
            justify="right" if i else "left",
            no_wrap=True,
            min_width=max([len(r[i]) for r in rows] + [max(map(len, c.split()))]),
            # below 69 columns: tool results (about the calls), then entries (--json has them)
            drop={5: 1, 2: 2}.get(i),
        )
    for r in rows:
        t.add_row(*r)
    out.print(t)
    cs, q = res["contents"], res["quarantine"]
    # plain lines folded at the terminal's width (after a comma), never inside a figure
    say_folded(
        f"distinct contents {cs['distinct']:,} ({_size(cs['bytes'])}, {cs['token_estimate']:,} text tokens "
        f"(est.)); quarantined lines {q.get('skipped', 0):,} skipped, {q.get('repaired', 0):,} repaired"
    )
    u = res["usage"]
    say_folded(
        f"usage: {u['responses']:,} responses, input {u['input_tokens']:,}, output {u['output_tokens']:,}, "
        f"cache read {u['cache_read_tokens']:,}, cache write {u['cache_creation_tokens']:,}, "
        f"thoughts {u['reasoning_tokens']:,} API tokens (as the agents logged them)"
    )
    if u["agents"]:
        _usage_table(u["agents"])
    say_folded(
        "files: "
        + ", ".join(f"{k} {_size(v)}" for k, v in res["files"].items())
        + f"; last new data {res['last_ingest'] or 'never'}"  # (no-op ingests record no run: newuser19 F10)
    )
    say_folded(redactions_line(res["redactions"]))


def tombstone_lines(rows: list[dict]) -> list[str]:
    """The ingest summary's lines for ``Summary.tombstoned``, one per tombstone:
    ``skipped 150,000 records of 1 session under /tmp/big: purged on 2026-12-06
    (`ctxkeep purge --reingest --project /tmp/big` lifts it)``."""
    out = []
    for r in rows:
        n, k = r["records"], r["sessions"]
        if r["scope"] == "project":
            where = f"of {k:,} session{'s' * (k != 1)} under {r['value']}"
        else:  # the session and its sub-agents
            where = f"of session {r['value']}" + (f" and {k - 1:,} sub-agent session(s)" if k > 1 else "")
        lift = f"--project {r['value']}" if r["scope"] == "project" else f"--session {r['value']}"
        day = (r.get("purged_at") or "")[:10] or "an earlier run"
        out.append(
            f"skipped {n:,} record{'s' * (n != 1)} {where}: purged on {day} "
            f"(`ctxkeep purge --reingest {lift}` lifts it)"
        )
    return out

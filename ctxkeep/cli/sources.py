"""``ctxkeep sources``: what was found per agent, and why not.

Read-only and fast (``service.sources``: every source's discovery, no file parsed, and
the store's per-agent counts). Never imports Prefect.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import (
    HomeOpt,
    JsonOpt,
    _count,
    _fail,
    _home,
    _print_json,
    _size,
    app,
    failing,
    line_width,
    out,
    say_folded,
    short_path,
    table,
    warn,
)
from ctxkeep.errors import CtxkeepError, UsageError


def fail_config(e: Exception):
    """``_fail`` for a command that reads ``config.toml``: a ConfigError with several
    ``problems`` prints one ``error:`` line per problem (file, key, value, what is
    wrong); exit 1. The file's unknown keys found in the same check come first, as
    ``warning:`` lines."""
    from ctxkeep.errors import ConfigError

    if isinstance(e, ConfigError):
        for w in e.warnings:
            warn(w)
    if isinstance(e, ConfigError) and len(e.problems) > 1:
        for p in e.problems:
            typer.echo(f"error: {p} - fix config.toml", err=True)
        raise typer.Exit(1)
    _fail(e)


def _rate(r: float | None) -> str:
    return "-" if r is None else f"{r:.1%}"


def _render_coverage(h: Path, agents: list[str], as_json: bool) -> None:
    """``sources --coverage``: the coverage ledger (``service.coverage``), rendered."""
    from ctxkeep.service.coverage import CoverageRequest, coverage

    with failing():
        res = coverage(h, CoverageRequest.parse(agent=agents or None))
    if as_json:
        _print_json(res.as_json())
        return
    if not res.store:
        out.print(f"no store at {h} yet: run `ctxkeep ingest`", highlight=False)
        return
    if not res.rows:
        out.print(
            "the coverage ledger is empty: files are counted when an ingest reads them", highlight=False
        )
        return
    t = table(title="ctxkeep coverage ledger", title_justify="left")
    t.add_column("agent", no_wrap=True)
    t.add_column("version", no_wrap=True)
    t.add_column("parser", justify="right", no_wrap=True, drop=2)
    # in a narrow terminal: parsed (records × rate) and the parser version go first
    for col in ("files", "records", "parsed", "rate", "entries", "quarant."):
        t.add_column(col, justify="right", no_wrap=True, drop={"parsed": 1, "files": 3}.get(col))
    # how many record types were not understood; the types, whole, under the table (a
    # column of 15 folded `inter_agent_com` / `munication_meta`: newuser15 F1); the
    # column goes last in a narrow terminal (60 columns): those lines name them all
    t.add_column("not underst.", justify="right", no_wrap=True, drop=4)
    from rich.markup import escape

    for r in res.rows:
        t.add_row(
            r.agent,
            escape(r.agent_version or "?"),
            f"v{r.parser_version}",
            f"{r.files:,}",
            f"{r.records:,}",
            f"{r.parsed:,}",
            _rate(r.parse_rate),
            f"{r.entries:,}",
            f"{r.quarantined:,}",
            _count(len(r.unknown), "type") if r.unknown else "",
        )
    out.print(t)
    drift = [f"drift: {a.message}" for a in res.alerts]
    for r in res.rows:  # (a drift line names the types of its version already)
        head = f"{r.agent} {r.agent_version or '?'}: "
        if r.unknown and not any(head in d for d in drift):
            say_folded(
                f"not understood, {head}" + ", ".join(f"{k} ({u.count:,})" for k, u in r.unknown.items())
            )
    for d in drift:  # at the width, between words
        say_folded(d)
    if any(r.unknown for r in res.rows):
        say_folded(
            "a sample line of each type not understood (redacted): `ctxkeep sources --coverage --json`"
        )


#: searched places named per agent in the text output at most
_LOOKED_MAX = 4


def _where(r: dict, path=str) -> str:
    """The "where / why" of a ``sources_report`` row: the folder holding its files
    (and the note, if any), or why nothing was found and every place it looked;
    each path written by ``path`` (``tilde``: ``~/.claude/projects``)."""
    home = str(Path.home())
    where = path(r["where"]) if r["where"] else r["reason"] or ""
    if path is not str and home not in ("", "/"):  # the reason names paths too
        where = where.replace(home + "/", "~/")
    if r["where"] and r["reason"]:
        where += f" ({r['reason']})"
    if not r["files"] and r["searched"]:
        looked = [path(x) for x in r["searched"][:_LOOKED_MAX]]
        more = len(r["searched"]) - len(looked)
        where += (
            ("; " if where else "") + "looked in " + ", ".join(looked) + (f" and {more} more" if more else "")
        )
    return where


@app.command()
def sources(
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
    coverage: bool = typer.Option(
        False,
        "--coverage",
        help="The coverage ledger: per agent version, records read, parsed, quarantined, types not understood.",
    ),
    agent: list[str] = typer.Option(None, "--agent", help="Only this agent (repeatable)."),
    every: bool = typer.Option(
        False, "--all", help="List every supported agent, also those with nothing found here."
    ),
):
    """What was found per agent (where it looked, files, store counts), and why not: the agents found, most sessions first; --all lists every supported agent."""
    from ctxkeep.service.sources import SourcesRequest
    from ctxkeep.service.sources import sources as ask

    h = _home(home)
    if coverage:
        _render_coverage(h, agent or [], as_json)
        return
    from ctxkeep import schema
    from ctxkeep.service.args import names

    try:
        # --agent filters here too, an unknown name is wrong usage (it was ignored without
        # --coverage, rc 0: newuser15 F15)
        only = set(names("agent", agent or None, schema.AGENTS) or ())
        res = ask(h, SourcesRequest.parse())
    except CtxkeepError as e:
        if isinstance(e, UsageError):
            _fail(e)
        fail_config(e)
    if only:
        res.rows = [r for r in res.rows if r.agent in only]
    for w in res.warnings:
        typer.echo(f"warning: {res.config_file}: {w}", err=True)
    if as_json:
        _print_json(res.as_json())
        return
    rows = [r.model_dump(mode="json") for r in res.rows if every or only or r.listed]
    hidden = len(res.rows) - len(rows)
    if not rows:
        out.print(
            f"none of the {hidden:,} supported agents found here (--all lists where each looked)",
            highlight=False,
        )
        return
    if out.width < 110:  # too narrow for the table: two lines per agent, folded at the width
        for r in rows:
            off = "" if r["enabled"] else " (off)"
            if r["files"] or r["sessions"]:
                head = (
                    f"{r['agent']}{off}: {_count(r['files'], 'file')}, {_size(r['bytes'])}, "
                    f"{_count(r['sessions'], 'session')}, {_count(r['entries'], 'entry', 'entries')}, "
                    f"{r['quarantined']:,} quarantined, last new data "
                    f"{(r['last_ingest'] or 'never')[:16].replace('T', ' ')}"
                )
            else:
                head = f"{r['agent']}{off}: nothing found"
            say_folded(head)
            say_folded(
                "  " + _where(r, lambda p: short_path(p, (line_width() or 1_000_000) - 5)), indent="    "
            )
    else:
        _table(rows)
    if hidden:
        out.print(
            f"{hidden:,} more agent{'' if hidden == 1 else 's'} supported, none found here (--all lists "
            + ("it)" if hidden == 1 else "them)"),
            highlight=False,
        )
    for line in _tombstone_lines(res.tombstones):
        say_folded(line, indent="    ")


def _tombstone_lines(tombs: list[dict]) -> list[str]:
    """The standing tombstones, each on its own line: a project with the day it was
    purged and the sessions its purge tombstoned, a session purged alone by its id;
    then how to lift one (newuser23 F1; newuser24 F4: a session tombstone was counted
    into the project's)."""
    if not tombs:
        return []
    lines = ["tombstones (every ingest skips their records, new sessions of a project too):"]
    for t in tombs:
        day = (t.get("purged_at") or "")[:10] or "date not recorded"
        if t["scope"] == "project":
            n = len(t.get("sessions") or [])
            lines.append(
                f"  project {t['value']} (purged on {day}" + (f", {_count(n, 'session')})" if n else ")")
            )
        elif not t.get("project"):
            lines.append(f"  session {t['value']} (purged on {day})")
    lines.append("  (`ctxkeep purge --reingest --project DIR` or `--session ID` lifts one)")
    return lines


def _table(rows: list[dict]) -> None:
    """The rows of ``sources`` as one table (a terminal of 110+ columns)."""
    t = table(title="ctxkeep sources", title_justify="left")
    t.add_column("agent", no_wrap=True)
    for col in ("files", "size", "sessions", "entries", "quarant."):
        t.add_column(col, justify="right", no_wrap=True)
    # "last new data", not "last ingest": a run that finds nothing new records no run and
    # moves no watermark (newuser19 F10: read as "the schedule is not running")
    t.add_column("last new data", no_wrap=True, min_width=10)
    t.add_column("where / why", overflow="fold", min_width=24, ratio=1)
    from rich.markup import escape

    for r in rows:
        where = escape(_where(r))
        t.add_row(
            r["agent"] + ("" if r["enabled"] else " (off)"),
            f"{r['files']:,}",
            _size(r["bytes"]),
            f"{r['sessions']:,}",
            f"{r['entries']:,}",
            f"{r['quarantined']:,}",
            (r["last_ingest"] or "never")[:16].replace("T", " "),
            where,
        )
    out.print(t)

"""``ctxkeep sources``: what was found per agent, and why not.

Read-only and fast (``service.sources``: every source's discovery, no file parsed, and
the store's per-agent counts). Never imports Prefect.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, JsonOpt, _count, _fail, _home, _print_json, _size, app, out, table
from ctxkeep.errors import CtxkeepError


def fail_config(e: Exception):
    """``_fail`` for a command that reads ``config.toml``: a ConfigError with several
    ``problems`` prints one ``error:`` line per problem (file, key, value, what is
    wrong); exit 1."""
    from ctxkeep.errors import ConfigError

    if isinstance(e, ConfigError) and len(e.problems) > 1:
        for p in e.problems:
            typer.echo(f"error: {p} - fix config.toml", err=True)
        raise typer.Exit(1)
    _fail(e)


@app.command()
def sources(home: Path | None = HomeOpt, as_json: bool = JsonOpt):
    """What was found per agent (where it looked, files, store counts), and why not."""
    from ctxkeep.service.sources import SourcesRequest
    from ctxkeep.service.sources import sources as ask

    h = _home(home)
    try:
        res = ask(h, SourcesRequest.parse())
    except CtxkeepError as e:
        fail_config(e)
    for w in res.warnings:
        typer.echo(f"warning: {res.config_file}: {w}", err=True)
    if as_json:
        _print_json([r.model_dump(mode="json", exclude_unset=True) for r in res.rows])
        return
    rows = [r.model_dump(mode="json") for r in res.rows]
    if out.width < 110:  # too narrow for the table: two lines per agent
        for r in rows:
            where = r["where"] or r["reason"] or ""
            if r["where"] and r["reason"]:
                where += f" ({r['reason']})"
            out.print(
                f"[bold]{r['agent']}[/bold]{'' if r['enabled'] else ' (off)'}: {_count(r['files'], 'file')}, "
                f"{_size(r['bytes'])}, {_count(r['sessions'], 'session')}, "
                f"{_count(r['entries'], 'entry', 'entries')}, "
                f"{r['quarantined']:,} quarantined, last ingest "
                f"{(r['last_ingest'] or 'never')[:16].replace('T', ' ')}",
                highlight=False,
            )
            out.print(f"  {where}", highlight=False, markup=False)
        return
    t = table(title="ctxkeep sources", title_justify="left")
    t.add_column("agent", no_wrap=True)
    for col in ("files", "size", "sessions", "entries", "quarant."):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("last ingest", no_wrap=True, min_width=10)
    t.add_column("where / why", overflow="fold", min_width=24, ratio=1)
    for r in rows:
        where = r["where"] or r["reason"] or ""
        if r["where"] and r["reason"]:
            where += f" ({r['reason']})"
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

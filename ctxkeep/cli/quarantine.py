"""``ctxkeep quarantine [list | show ID]``: the lines ingest could not read, as stored
(redacted), without opening the database by hand (``query.quarantine``)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ctxkeep.cli import (
    HomeOpt,
    JsonOpt,
    _count,
    _home,
    _print_json,
    app,
    failing,
    fold,
    line_width,
    out,
    safe_bytes,
    say,
    say_folded,
    tilde,
)
from ctxkeep.cli.options import agent_option, store_agents

quarantine_app = typer.Typer(
    invoke_without_command=True,
    help="The lines ingest could not read: list them (default) or show one as stored (redacted).",
)
app.add_typer(quarantine_app, name="quarantine")

AgentOpt = agent_option(store_agents)


@quarantine_app.callback()
def quarantine(
    ctx: typer.Context,
    agent: list[str] | None = AgentOpt,
    limit: int = typer.Option(100, "--limit", "-n", help="At most this many lines."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """List quarantined lines (as `quarantine list`)."""
    if ctx.invoked_subcommand is None:
        list_(agent=agent, action=None, limit=limit, home=home, as_json=as_json)


@quarantine_app.command("list")
def list_(
    agent: list[str] | None = AgentOpt,
    action: str | None = typer.Option(
        None, "--action", help="skipped (nothing read) or repaired (read leniently)."
    ),
    limit: int = typer.Option(100, "--limit", "-n", help="At most this many lines."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Quarantined lines, newest first: id, agent, file, offset, reason, when, size, SHA-256 of the raw line."""
    from ctxkeep.service.quarantine import QuarantineRequest, quarantine

    with failing():
        res = quarantine(_home(home), QuarantineRequest.parse(agent=agent, action=action, limit=limit))
    if as_json:
        _print_json(res.as_json())
        return
    rows, total = res.lines, res.total
    if not rows:
        out.print("no quarantined lines", highlight=False)
        return
    # one entry per line, not a table: at 80 columns a table gave the path and the
    # reason an 11-character column, folded mid-word over 10 lines (newuser15 F3).
    # The head holds what is short (id, agent, when, size, hash); the file (``~``) and
    # the reason follow on lines of their own, folded between words only
    say(
        f"ctxkeep quarantine: {_count(total, 'line')}"
        + (f", newest {len(rows)}" if total > len(rows) else "")
    )
    width = max(len(str(r.id)) for r in rows)
    for r in rows:
        say(
            f"{r.id:>{width}}  {r.agent}  {(r.first_seen or '')[:16].replace('T', ' ')}  "
            f"{r.length or 0:,} B  raw sha256 {(r.raw_sha256 or '-')[:16]}"
        )
        pad = " " * (width + 2)
        # the path broken after a "/" only where it must be (--json has it whole)
        room = line_width()
        where = f"{tilde(r.path or '?')} @ {r.offset or 0:,}".replace("/", "/ ")
        for x in fold(where, indent="", width=None if room is None else max(20, room - len(pad))):
            say(pad + x.replace("/ ", "/"))
        say_folded(pad + r.reason + ("" if r.action == "skipped" else f" ({r.action})"), indent=pad)
    out.print(
        "`ctxkeep quarantine show ID` prints a line as stored (secrets redacted)",
        style="dim",
        highlight=False,
    )


@quarantine_app.command("show")
def show(
    line_id: int = typer.Argument(
        ..., metavar="ID", help="A quarantined line's id (from `quarantine list`)."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """One quarantined line: where it was, why, and its bytes as stored (secrets redacted)."""
    from ctxkeep.service.quarantine import LineRequest, quarantined_line

    with failing(words={"id": "ID"}):  # an argument here (0 or below names no line: exit 2)
        line, raw = quarantined_line(_home(home), LineRequest.parse(id=line_id))
    if as_json:
        _print_json(line.as_json())
        return
    head = (
        f"# quarantined line {line.id}: {line.agent} {tilde(line.path or '?')} @ {line.offset:,} "
        f"({line.length:,} bytes), {line.reason} ({line.action}), first seen {line.first_seen}, "
        f"raw sha256 {line.raw_sha256 or '-'}; {line.stored_bytes:,} bytes stored, secrets redacted"
    )
    for x in fold(head, indent="#   "):  # at the width, between words (a 372-column line: newuser15 F3)
        typer.echo(x, err=True)
    # its bytes as stored, but control bytes escaped (``safe_bytes``): a raw line may hold
    # terminal escape sequences; ``--json`` gives them exact
    raw = safe_bytes(raw)
    sys.stdout.buffer.write(raw if raw.endswith(b"\n") else raw + b"\n")
    sys.stdout.flush()

"""``ctxkeep reparse``: derive entries, usage, FTS and DuckDB again from the vault
(``service.vault.reparse``)."""

from __future__ import annotations

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
    out,
    say,
    say_folded,
    table,
)


@app.command()
def reparse(
    agent: list[str] | None = typer.Option(None, "--agent", "-a", help="Only this agent (repeatable)."),
    since: str | None = typer.Option(
        None, "--since", help="Only files the agent last changed on or after D (a date, datetime or age: 7d)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show the diff; change nothing."),
    rekey: bool = typer.Option(
        False,
        "--rekey",
        help="Key the Claude Code files an older ctxkeep read by session and uuid, so a fork holds "
        "its whole history (their old entry ids still resolve).",
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Derive entries, usage, FTS and DuckDB again from the vault with today's parsers (no agent file needed); prints the diff."""
    from ctxkeep.service.vault import ReparseRequest
    from ctxkeep.service.vault import reparse as run

    with failing():
        req = ReparseRequest.parse(
            home=_home(home), agents=list(agent) if agent else None, since=since, dry_run=dry_run, rekey=rekey
        )
        r = run(req).as_json()
    if as_json:
        _print_json(r)
        return
    d = r["diff"]
    # the agents' files, as `vault status` counts them; a database's sessions are one vault
    # document each, so the vault files read can be more
    files = _count(r["agent_files"], "file")
    if r["files"] != r["agent_files"]:
        files += f" ({r['files']:,} in the vault: a database's sessions are one document each)"
    say_folded(
        f"ctxkeep reparse{' --dry-run' if r['dry_run'] else ''}: {files}, "
        f"{_count(r['generations'], 'generation')} from the vault"
    )
    t = table()
    for col in ("agent", "kind", "added", "removed", "changed", "same"):
        t.add_column(col, justify="left" if col in ("agent", "kind") else "right")
    for row in d["entries"]:
        t.add_row(
            row["agent"], row["kind"], *(f"{row[k]:,}" for k in ("added", "removed", "changed", "same"))
        )
    out.print(t)
    for a, u in d["usage"].items():
        delta = u["delta"]
        if any(delta.values()):
            say(
                f"{a}: usage input {delta['input_tokens']:+,}, output {delta['output_tokens']:+,}, "
                f"cache read {delta['cache_read_tokens']:+,}, cache write {delta['cache_creation_tokens']:+,}, "
                f"cost {delta['cost_usd']:+.4f} USD"
            )
        else:
            say(f"{a}: usage unchanged")
    for n in r["notes"]:
        say_folded(f"note: {n}")
    if r["dry_run"]:
        say("dry run: nothing changed")

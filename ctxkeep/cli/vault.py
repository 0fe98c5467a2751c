"""``ctxkeep vault status | verify | restore``: the vault of every byte ingest read
(``maintenance.vault`` over ``sinks.vault``)."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, JsonOpt, _count, _fail, _home, _print_json, _size, app, out, say, table, warn
from ctxkeep.errors import CtxkeepError

vault_app = typer.Typer(
    no_args_is_help=True,
    help="The vault: every byte ingest read from the agents' files, redacted and compressed: "
    "what it holds, whether it reads back, and sessions restored from it.",
)
app.add_typer(vault_app, name="vault")


@vault_app.command("status")
def status(home: Path | None = HomeOpt, as_json: bool = JsonOpt):
    """Per agent: files, sessions, generations, bytes raw and stored; when the agent deletes sessions and which are not in the vault yet."""
    from ctxkeep.maintenance.vault import vault_status

    try:
        r = vault_status(_home(home))
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(r)
        return
    t = table(title=f"ctxkeep vault ({r['vault_dir']}, {_size(r['pack_bytes'])} on disk)")
    for col in (
        "agent",
        "files",
        "sessions",
        "generations",
        "raw",
        "stored",
        "redacted",
        "agent deletes",
        "next",
    ):
        t.add_column(
            col, justify="right" if col in ("files", "sessions", "generations", "raw", "stored") else "left"
        )
    for a in r["agents"]:
        t.add_row(
            a["agent"],
            f"{a['files']:,}",
            f"{a['sessions']:,}",
            f"{a['generations']:,}",
            _size(a["raw_bytes"]),
            _size(a["stored_bytes"]),
            ", ".join(f"{k} {n}" for k, n in sorted(a["redactions"].items())) or "-",
            a["deletes"] or "-",
            a["next_deletion"] or "-",
        )
    out.print(t)
    for a in r["agents"]:
        for x in a["at_risk"][:20]:
            warn(
                f"{x['agent']} deletes {x['path']} at {x['due']}: the vault holds {x['vaulted_bytes']:,} of its {x['size']:,} bytes - run `ctxkeep ingest`"
            )
    if not r["at_risk"]:
        say("no session at risk: the vault holds every file the agents will delete")


@vault_app.command("verify")
def verify(
    full: bool = typer.Option(False, "--full", help="Also hash every pack whole and list orphan packs."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Check every generation against its objects (sequence, sizes, SHA-256); exit 1 naming what is damaged."""
    from ctxkeep.maintenance.vault import vault_verify

    try:
        r = vault_verify(_home(home), full=full)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(r)
    elif r["ok"]:
        say(
            f"vault ok: {_count(r['generations'], 'generation')}, {_count(r['objects'], 'object')} read back and checked"
        )
    else:
        for line in r["problems"]:
            typer.echo(f"error: vault damaged: {line}", err=True)
    if not r["ok"]:
        raise typer.Exit(1)


@vault_app.command("restore")
def restore(
    session: str | None = typer.Argument(
        None, help="The session: its id or first characters, as hits show them."
    ),
    to: Path | None = typer.Option(
        None,
        "--to",
        help="Write under DIR (same layout relative to your home) instead of the original paths.",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite files that exist."),
    all_missing: bool = typer.Option(
        False, "--all-missing", help="Every file the vault holds that is missing on disk."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Write a session's native files back from the vault (original paths and mtimes), so the agent can resume it."""
    from ctxkeep.errors import UsageError
    from ctxkeep.maintenance.vault import vault_restore

    try:
        if (session is None) == (not all_missing):
            raise UsageError("give a SESSION or --all-missing (not both)", where="vault restore")
        r = vault_restore(_home(home), session, to=to, force=force, all_missing=all_missing)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(r)
        return
    for f in r["files"]:
        red = sum(f["redactions"].values())
        say(f"restored {f['to']} ({_size(f['bytes'])}" + (f", {red} secret(s) redacted" if red else "") + ")")
    if not r["files"]:
        say("nothing to restore")


@app.command()
def reparse(
    agent: list[str] | None = typer.Option(None, "--agent", "-a", help="Only this agent (repeatable)."),
    since: str | None = typer.Option(
        None, "--since", help="Only files the agent last changed on or after D (a date, datetime or age: 7d)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show the diff; change nothing."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Derive entries, usage, FTS and DuckDB again from the vault with today's parsers (no agent file needed); prints the diff."""
    from ctxkeep.maintenance.reparse import reparse as run

    try:
        since_ns = None
        if since:
            from ctxkeep.timeutil import when_bound

            since_ns = int(when_bound(since, where="--since").timestamp() * 1e9)
        r = run(_home(home), agents=list(agent) if agent else None, since_ns=since_ns, dry_run=dry_run)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(r)
        return
    d = r["diff"]
    t = table(
        title=f"ctxkeep reparse{' --dry-run' if r['dry_run'] else ''}: {_count(r['files'], 'file')}, "
        f"{_count(r['generations'], 'generation')} from the vault"
    )
    for col in ("agent", "kind", "added", "removed", "changed", "same"):
        t.add_column(col, justify="left" if col in ("agent", "kind") else "right")
    for e in d["entries"]:
        t.add_row(e["agent"], e["kind"], *(f"{e[k]:,}" for k in ("added", "removed", "changed", "same")))
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
        say(f"note: {n}")
    if r["dry_run"]:
        say("dry run: nothing changed")

"""``ctxkeep hooks install | uninstall | status``: ctxkeep's hooks in the agents' settings
(``service.hooks`` over ``hooks.install``). Each change is shown (``--dry-run``: as a diff, nothing
written), backed up and written atomically; a settings file that does not parse is left
untouched with one error line (exit 1)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ctxkeep.cli import JsonOpt, _given_home, _print_json, app, err, failing, fold
from ctxkeep.cli.options import agent_option

hooks_app = typer.Typer(
    no_args_is_help=True,
    help="Install ctxkeep's hooks into Claude Code, Codex and Gemini CLI (ingest on compaction and at"
    " session end; the resume snapshot after a compaction or a resume).",
)
app.add_typer(hooks_app, name="hooks")


def hook_agents() -> tuple[str, ...]:
    """The agents ctxkeep installs hooks for (``service.hooks.hook_agents``)."""
    from ctxkeep.service.hooks import hook_agents as agents

    return agents()


AgentOpt = agent_option(
    hook_agents,
    help="claude-code, codex or gemini-cli (repeatable, or a,b; default: the agents found in your home).",
)
ScopeOpt = typer.Option("user", "--scope", help="user (your home's settings) or project (the project's).")
ProjectOpt = typer.Option(None, "--project", help="The project directory for --scope project (default: .).")
DryRunOpt = typer.Option(False, "--dry-run", "-n", help="Show the change as a diff; write nothing.")


def settings_request(agent, scope: str, project: Path | None, dry_run: bool = False, **kw):
    """The ``service.hooks.SettingsRequest`` of a command's options (exit 2 for an
    unknown scope)."""
    from ctxkeep.service.hooks import SettingsRequest

    _scope(scope)
    with failing():
        return SettingsRequest.parse(
            agents=agent or None, scope=scope, project=project, dry_run=dry_run, **kw
        )


def run_changes(ask, req, as_json: bool) -> None:
    """Ask ``ask(req)`` (a ``service.hooks`` question: one change per agent), print a
    line per agent (or ``--json`` one object); exit 1 when any agent's file could not be
    planned or written (the others are still done)."""
    with failing():
        done = ask(req)
    for o in done:
        if o.error is not None:
            typer.echo(f"error: {o.agent}: {o.error}", err=True)
            continue
        if as_json:
            continue
        row = o.row
        line = f"{o.agent}: {_verb(row['action'], req.dry_run)} {o.shown}"
        if row.get("backup") and not req.dry_run:
            line += f" ({'from' if row['action'] == 'restored' else 'backup'} {Path(row['backup']).name})"
        line += _pruned(row)
        typer.echo(line)
        if o.diff:
            typer.echo(o.diff, nl=False)
        for note in [*(row.get("notes") or []), *o.hints]:
            typer.echo(f"  {note}")
    if as_json:
        from ctxkeep.service.shapes import SettingsChanges

        _print_json(SettingsChanges(agents=[o.row for o in done]).as_json())
    if any(o.error is not None for o in done):
        raise typer.Exit(1)


def _pruned(row: dict) -> str:
    """What an uninstall did with the file's backups, in words (empty: it deleted none)."""
    n = len(row.get("backups_removed") or [])
    if not n:
        return ""
    what = f"{n} backup{'s' if n != 1 else ''}"
    if row["action"] == "removed":
        return f"; deleted {n} older {what.split(' ', 1)[1]}, kept the newest"
    why = "the file is back byte for byte" if row["action"] == "restored" else "the file is gone"
    return f"; deleted its {what}: {why}"


def _verb(action: str, dry_run: bool) -> str:
    verbs = {
        "created": ("created", "would create"),
        "updated": ("updated", "would update"),
        "removed": ("removed ctxkeep's entries from", "would remove ctxkeep's entries from"),
        "restored": ("restored", "would restore"),
        "deleted": (
            "deleted (it held only ctxkeep's entries)",
            "would delete (it holds only ctxkeep's entries)",
        ),
        "unchanged": ("unchanged", "unchanged"),
        "absent": ("nothing to remove: no", "nothing to remove: no"),
    }
    return verbs[action][1 if dry_run else 0]


def _hook_home() -> Path | None:
    """The store the hooks run against: ``ctxkeep --home DIR hooks …``, else
    ``$CTXKEEP_HOME`` when set (the agent runs its hooks without it), absolute; None:
    the default store."""
    store = _given_home()
    if store is None and os.environ.get("CTXKEEP_HOME"):
        store = Path(os.environ["CTXKEEP_HOME"])
    return store.expanduser().absolute() if store else None


@hooks_app.command("install")
def install(
    agent: list[str] | None = AgentOpt,
    scope: str = ScopeOpt,
    project: Path | None = ProjectOpt,
    dry_run: bool = DryRunOpt,
    force: bool = typer.Option(
        False, "--force", help="Codex: replace a notify program that is not ctxkeep's (kept in the backup)."
    ),
    timeout: int = typer.Option(
        10, "--timeout", min=1, help="Seconds the agent lets a hook run before killing it."
    ),
    as_json: bool = JsonOpt,
):
    """Install ctxkeep's hooks (merged into the existing settings; a second install changes nothing)."""
    from ctxkeep.service.hooks import hooks_install

    req = settings_request(agent, scope, project, dry_run, force=force, timeout=timeout, home=_hook_home())
    run_changes(hooks_install, req, as_json)


@hooks_app.command("uninstall")
def uninstall(
    agent: list[str] | None = AgentOpt,
    scope: str = ScopeOpt,
    project: Path | None = ProjectOpt,
    dry_run: bool = DryRunOpt,
    as_json: bool = JsonOpt,
):
    """Remove ctxkeep's hooks, and only them (the file comes back byte for byte when nothing else changed)."""
    from ctxkeep.service.hooks import hooks_uninstall

    run_changes(hooks_uninstall, settings_request(agent, scope, project, dry_run), as_json)


_STATE = {"installed": "ok", "outdated": "outdated", "missing": "missing", "foreign": "other program"}


@hooks_app.command("status")
def status(
    agent: list[str] | None = AgentOpt,
    scope: str = ScopeOpt,
    project: Path | None = ProjectOpt,
    as_json: bool = JsonOpt,
):
    """Show, per agent, which of ctxkeep's hooks are installed and where the agent adds the snapshot."""
    from ctxkeep.service.hooks import hooks_status
    from ctxkeep.service.shapes import HooksStatus

    with failing():
        shown = hooks_status(settings_request(agent, scope, project, home=_hook_home()))
    if as_json:
        _print_json(HooksStatus(agents=[r for r, _ in shown]).as_json())
    else:
        for r, where in shown:
            path = where + ("" if r["exists"] else " (no file)")
            typer.echo(f"{r['agent']}: {path}")
            if r["error"]:
                typer.echo(f"  error: {r['error']}")
            # each line at the width, folded between words (up to 223 columns: newuser15 F9)
            for h in r["hooks"]:
                matcher = f" [{h['matcher']}]" if h["matcher"] else ""
                _echo(f"  {_STATE[h['state']]:<8} {h['event']}{matcher}: {h['does']}", "           ")
                if h["state"] in ("outdated", "foreign"):
                    _echo(f"           found: {h['found']}", "             ")
                last, failed = h.get("last"), h.get("last_error")
                if last:  # a hook exits 0 whatever happens: its log says how it went
                    _echo(f"           last run {_at(last['at'])}: {last['outcome']}", "             ")
                if failed and last and last["outcome"] in ("error", "timeout"):  # failing now
                    _echo(f"           failed {_at(failed['at'])}: {failed['detail']}", "             ")
            _echo(f"  snapshot injection: {r['injection']}", "    ")
            for note in r["notes"]:
                _echo(f"  note: {note}", "    ")
        todo = [
            r["agent"] for r, _ in shown if any(h["state"] in ("missing", "outdated") for h in r["hooks"])
        ]
        if todo:  # --agent comma-separated, folded at the width (83 columns at 80: newuser19 F17)
            line = f"install: ctxkeep hooks install --agent {','.join(todo)}"
            for part in fold(line + ("" if scope == "user" else " --scope " + scope), indent="  "):
                err.print(part, style="dim", highlight=False, markup=False)
    if any(r["error"] for r, _ in shown):
        raise typer.Exit(1)


def _at(iso: str) -> str:
    """``2026-12-06T07:22:06Z`` as ``2026-12-06 07:22 UTC``."""
    return iso[:16].replace("T", " ") + " UTC"


def _echo(line: str, indent: str) -> None:
    """``line`` on stdout folded at the terminal's width (``fold``: between words,
    the lines after the first indented by ``indent``)."""
    for x in fold(line, indent=indent):
        typer.echo(x)


def _scope(scope: str) -> None:
    if scope not in ("user", "project"):
        typer.echo(f"error: unknown scope {scope!r} - use user or project", err=True)
        raise typer.Exit(2)

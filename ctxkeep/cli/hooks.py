"""``ctxkeep hooks install | uninstall | status``: ctxkeep's hooks in the agents' settings
(``ctxkeep.hooks.install``). Each change is shown (``--dry-run``: as a diff, nothing
written), backed up and written atomically; a settings file that does not parse is left
untouched with one error line (exit 1)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ctxkeep.cli import JsonOpt, _given_home, _print_json, app, err
from ctxkeep.cli.options import agent_option
from ctxkeep.errors import ConfigError, UsageError

hooks_app = typer.Typer(
    no_args_is_help=True,
    help="Install ctxkeep's hooks into Claude Code, Codex and Gemini CLI (ingest on compaction and at"
    " session end; the resume snapshot after a compaction or a resume).",
)
app.add_typer(hooks_app, name="hooks")


def hook_agents() -> tuple[str, ...]:
    """The agents ctxkeep installs hooks for (``hooks.install.HOOK_AGENTS``)."""
    from ctxkeep.hooks.install import HOOK_AGENTS

    return tuple(HOOK_AGENTS)


AgentOpt = agent_option(
    hook_agents,
    help="claude-code, codex or gemini-cli (repeatable, or a,b; default: the agents found in your home).",
)
ScopeOpt = typer.Option("user", "--scope", help="user (your home's settings) or project (the project's).")
ProjectOpt = typer.Option(None, "--project", help="The project directory for --scope project (default: .).")
DryRunOpt = typer.Option(False, "--dry-run", "-n", help="Show the change as a diff; write nothing.")


def _where(project: Path | None):
    from ctxkeep.hooks.install import Where

    return Where.current(project)


def _agents(agents: list[str] | None, w, allowed: tuple[str, ...], detect: bool) -> list[str]:
    from ctxkeep.hooks.install import detected_agents

    if agents:  # checked against ``allowed`` by the option (``agent_option``)
        return list(dict.fromkeys(agents))
    if not detect:
        return list(allowed)
    found = detected_agents(w, allowed)
    if not found:
        typer.echo(
            f"error: no agent found in your home (looked for {', '.join(allowed)}) - pass --agent",
            err=True,
        )
        raise typer.Exit(1)
    return found


def run_changes(plan, agents: list[str], dry_run: bool, as_json: bool, w, extra=None) -> None:
    """Plan (``plan(agent) -> Change``), show and apply one change per agent; print a
    line (or ``--json`` a list) per agent; exit 1 when any agent's file could not be
    planned or written (the others are still done)."""
    from ctxkeep.hooks.install import apply, display_path

    failed = False
    rows = []
    for agent in agents:
        try:
            change = plan(agent)
            if not dry_run:
                apply(change)
        except (ConfigError, UsageError, OSError) as e:
            failed = True
            typer.echo(f"error: {agent}: {e}", err=True)
            rows.append({"agent": agent, "action": "error", "error": str(e)})
            continue
        row = change.as_dict()
        if extra:
            row.update(extra(agent, change))
        hints = row.pop("hint_lines", [])
        row["dry_run"] = dry_run
        rows.append(row)
        if as_json:
            continue
        verb = _verb(change.action, dry_run)
        line = f"{agent}: {verb} {display_path(change.path, w)}"
        if change.backup and not dry_run:
            line += f" ({'from' if change.action == 'restored' else 'backup'} {change.backup.name})"
        typer.echo(line)
        if dry_run and change.changes:
            typer.echo(change.diff(), nl=False)
        for note in change.notes + hints:
            typer.echo(f"  {note}")
    if as_json:
        _print_json(rows)
    if failed:
        raise typer.Exit(1)


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
    from ctxkeep.hooks.install import HOOK_AGENTS, ctxkeep_argv, plan_hooks_install

    _scope(scope)
    w = _where(project)
    exe = ctxkeep_argv()
    home = _hook_home()
    agents = _agents(agent, w, HOOK_AGENTS, detect=True)
    run_changes(
        lambda a: plan_hooks_install(a, scope, w, exe, timeout, force, home), agents, dry_run, as_json, w
    )


@hooks_app.command("uninstall")
def uninstall(
    agent: list[str] | None = AgentOpt,
    scope: str = ScopeOpt,
    project: Path | None = ProjectOpt,
    dry_run: bool = DryRunOpt,
    as_json: bool = JsonOpt,
):
    """Remove ctxkeep's hooks, and only them (the file comes back byte for byte when nothing else changed)."""
    from ctxkeep.hooks.install import HOOK_AGENTS, plan_hooks_uninstall

    _scope(scope)
    w = _where(project)
    agents = _agents(agent, w, HOOK_AGENTS, detect=False)
    run_changes(lambda a: plan_hooks_uninstall(a, scope, w), agents, dry_run, as_json, w)


_STATE = {"installed": "ok", "outdated": "outdated", "missing": "missing", "foreign": "other program"}


@hooks_app.command("status")
def status(
    agent: list[str] | None = AgentOpt,
    scope: str = ScopeOpt,
    project: Path | None = ProjectOpt,
    as_json: bool = JsonOpt,
):
    """Show, per agent, which of ctxkeep's hooks are installed and where the agent adds the snapshot."""
    from ctxkeep.hooks.install import HOOK_AGENTS, ctxkeep_argv, display_path, hooks_status

    _scope(scope)
    w = _where(project)
    exe = ctxkeep_argv()
    home = _hook_home()
    rows = [hooks_status(a, scope, w, exe, home) for a in _agents(agent, w, HOOK_AGENTS, detect=False)]
    if as_json:
        _print_json(rows)
    else:
        for r in rows:
            path = display_path(Path(r["path"]), w) + ("" if r["exists"] else " (no file)")
            typer.echo(f"{r['agent']}: {path}")
            if r["error"]:
                typer.echo(f"  error: {r['error']}")
            for h in r["hooks"]:
                matcher = f" [{h['matcher']}]" if h["matcher"] else ""
                typer.echo(f"  {_STATE[h['state']]:<8} {h['event']}{matcher}: {h['does']}")
                if h["state"] in ("outdated", "foreign"):
                    typer.echo(f"           found: {h['found']}")
            typer.echo(f"  snapshot injection: {r['injection']}")
            for note in r["notes"]:
                typer.echo(f"  note: {note}")
        todo = [r["agent"] for r in rows if any(h["state"] in ("missing", "outdated") for h in r["hooks"])]
        if todo:
            err.print(
                f"[dim]install: ctxkeep hooks install {' '.join('--agent ' + a for a in todo)}"
                f"{'' if scope == 'user' else ' --scope ' + scope}[/dim]"
            )
    if any(r["error"] for r in rows):
        raise typer.Exit(1)


def _scope(scope: str) -> None:
    if scope not in ("user", "project"):
        typer.echo(f"error: unknown scope {scope!r} - use user or project", err=True)
        raise typer.Exit(2)

"""ctxkeep in the agents' settings (``ctxkeep hooks install | uninstall | status``,
``ctxkeep mcp install | uninstall``): one request model and a function per question
over ``hooks.install``. Each change is planned per agent, backed up and written
atomically (not with ``dry_run``); a settings file that does not parse is left
untouched and reported on its agent's ``Outcome`` (the other agents are still done).
Raises NotFound when no agent was named and none is found in the user's home."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ctxkeep.errors import ConfigError, NotFound, UsageError
from ctxkeep.service.model import Names, Request, UserPath


class SettingsRequest(Request):
    """Which agents' settings (None: the agents found in the user's home for an install,
    every agent otherwise), where (``scope`` user: the home's settings; project: those
    of ``project``, default the caller's directory), the store the hooks and the MCP
    server run against (``home``; None: the default store)."""

    agents: Names = None
    scope: Literal["user", "project"] = "user"
    project: UserPath | None = Field(None, description="the project directory for scope project")
    dry_run: bool = Field(False, description="show each change as a diff; write nothing")
    force: bool = Field(False, description="replace an entry that runs another program (kept in the backup)")
    timeout: int = Field(10, ge=1, description="seconds the agent lets a hook run before killing it")
    home: Path | None = Field(None, description="the store (absolute) the agent's entries name with --home")


@dataclass
class Outcome:
    """One agent's change: ``row`` (its ``--json`` item: agent, path, action, backup,
    notes, dry_run; ``action`` error with ``error``), ``shown`` (the path as the user
    knows it), ``diff`` (with a dry run), ``hints`` (lines after the notes)."""

    agent: str
    row: dict[str, Any]
    shown: str = ""
    diff: str = ""
    hints: list[str] = field(default_factory=list)
    error: str | None = None


def _where(req: SettingsRequest):
    from ctxkeep.hooks.install import Where

    return Where.current(req.project)


def _agents(req: SettingsRequest, w, allowed, detect: bool) -> list[str]:
    from ctxkeep.hooks.install import detected_agents

    if req.agents:
        return list(dict.fromkeys(req.agents))
    if not detect:
        return list(allowed)
    found = detected_agents(w, allowed)
    if not found:
        raise NotFound(f"no agent found in your home (looked for {', '.join(allowed)})", hint="pass --agent")
    return found


def _run(
    req: SettingsRequest, agents: list[str], w, plan: Callable, extra: Callable | None = None
) -> list[Outcome]:
    from ctxkeep.hooks.install import apply, display_path

    done = []
    for agent in agents:
        try:
            change = plan(agent)
            if not req.dry_run:
                apply(change)
        except (ConfigError, UsageError, OSError) as e:
            done.append(Outcome(agent, {"agent": agent, "action": "error", "error": str(e)}, error=str(e)))
            continue
        row = change.as_dict()
        if extra:
            row.update(extra(agent))
        hints = row.pop("hint_lines", [])
        row["dry_run"] = req.dry_run
        diff = change.diff() if req.dry_run and change.changes else ""
        done.append(Outcome(agent, row, display_path(change.path, w), diff, hints))
    return done


def hooks_install(req: SettingsRequest) -> list[Outcome]:
    """Merge ctxkeep's hooks into each agent's settings (a second install changes nothing)."""
    from ctxkeep.hooks.install import HOOK_AGENTS, ctxkeep_argv, plan_hooks_install

    w, exe = _where(req), ctxkeep_argv()
    agents = _agents(req, w, HOOK_AGENTS, detect=True)
    return _run(
        req, agents, w, lambda a: plan_hooks_install(a, req.scope, w, exe, req.timeout, req.force, req.home)
    )


def hooks_uninstall(req: SettingsRequest) -> list[Outcome]:
    """Remove ctxkeep's hooks, and only them."""
    from ctxkeep.hooks.install import HOOK_AGENTS, plan_hooks_uninstall

    w = _where(req)
    return _run(
        req, _agents(req, w, HOOK_AGENTS, detect=False), w, lambda a: plan_hooks_uninstall(a, req.scope, w)
    )


def hooks_status(req: SettingsRequest) -> list[tuple[dict, str]]:
    """Per agent: which hooks are installed (``hooks.install.hooks_status``'s row) and
    its settings path as shown."""
    from ctxkeep.hooks.install import HOOK_AGENTS, ctxkeep_argv, display_path
    from ctxkeep.hooks.install import hooks_status as status

    w, exe = _where(req), ctxkeep_argv()
    rows = [status(a, req.scope, w, exe, req.home) for a in _agents(req, w, HOOK_AGENTS, detect=False)]
    _with_last_runs(rows, req.home)
    return [(r, display_path(Path(r["path"]), w)) for r in rows]


def _with_last_runs(rows: list[dict], home: Path | None) -> None:
    """Each hook row gets ``last`` (its newest line in the store's ``hooks.log``: at,
    outcome, detail; None: never ran) and ``last_error`` (the newest error or timeout:
    the same, or None): a hook exits 0 whatever happens, so this is where a failing one
    shows (newuser20 F15)."""
    from ctxkeep import config as cfgmod
    from ctxkeep.hooks.hooklog import last_runs
    from ctxkeep.hooks.install import HOOKS

    try:
        runs = last_runs(cfgmod.resolve_home(home))
    except Exception:  # an unusable home: the settings are still worth showing
        runs = {}
    for r in rows:
        called = {(spec.event, spec.matcher): spec.args[-1] for spec in HOOKS[r["agent"]]}
        for h in r["hooks"]:
            got = runs.get((r["agent"], called.get((h["event"], h["matcher"]), "")))
            h["last"] = {k: got[k] for k in ("at", "outcome", "detail")} if got else None
            h["last_error"] = got["error"] if got else None


def hook_agents() -> tuple[str, ...]:
    """The agents ctxkeep installs hooks for."""
    from ctxkeep.hooks.install import HOOK_AGENTS

    return tuple(HOOK_AGENTS)


def mcp_agents() -> tuple[str, ...]:
    """The agents ctxkeep registers its MCP server with."""
    from ctxkeep.hooks.install import MCP_AGENTS

    return tuple(MCP_AGENTS)


def mcp_install(req: SettingsRequest) -> list[Outcome]:
    """Register ctxkeep's MCP server in each agent's config; each row also carries the
    agent's own command for it (``agent_command``)."""
    from ctxkeep.hooks.install import MCP_AGENTS, agent_mcp_command, ctxkeep_argv, plan_mcp_install

    w, exe = _where(req), ctxkeep_argv()
    agents = _agents(req, w, MCP_AGENTS, detect=True)

    def extra(a: str) -> dict:
        cmd = agent_mcp_command(a, req.scope, exe, req.home)
        return {"agent_command": cmd, "hint_lines": [f"or with {a}'s own command: {cmd}"] if cmd else []}

    return _run(req, agents, w, lambda a: plan_mcp_install(a, req.scope, w, exe, req.home, req.force), extra)


def mcp_uninstall(req: SettingsRequest) -> list[Outcome]:
    """Remove ctxkeep's MCP server entry (and only it)."""
    from ctxkeep.hooks.install import MCP_AGENTS, plan_mcp_uninstall

    w = _where(req)
    return _run(
        req, _agents(req, w, MCP_AGENTS, detect=False), w, lambda a: plan_mcp_uninstall(a, req.scope, w)
    )

"""``ctxkeep mcp``: the stdio MCP server for agents (``ctxkeep.mcp.server``), and
``ctxkeep mcp install | uninstall``, which register it in an agent's MCP config
(``service.hooks``) the same safe way as ``ctxkeep hooks``."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, JsonOpt, _given_home, _home, app
from ctxkeep.cli.hooks import DryRunOpt, ProjectOpt, ScopeOpt, run_changes, settings_request
from ctxkeep.cli.options import agent_option

mcp_app = typer.Typer(
    invoke_without_command=True,
    help="Run the stdio MCP server (no subcommand), or register it with an agent (install, uninstall).",
)
app.add_typer(mcp_app, name="mcp")


def mcp_agents() -> tuple[str, ...]:
    """The agents whose MCP config ctxkeep can register its server in
    (``service.hooks.mcp_agents``)."""
    from ctxkeep.service.hooks import mcp_agents as agents

    return agents()


McpAgentOpt = agent_option(
    mcp_agents,
    help="claude-code, codex, gemini-cli or cursor (repeatable, or a,b; default: the agents found in your home).",
)


@mcp_app.callback()
def mcp(ctx: typer.Context, home: Path | None = HomeOpt):
    """Run the stdio MCP server (tools ctx_search, ctx_fetch, ctx_stats, ctx_index, ctx_purge)."""
    if ctx.invoked_subcommand is not None:
        return
    from ctxkeep.mcp.server import serve_stdio
    from ctxkeep.service.store import ensure_home

    h = _home(home)
    ensure_home(h)
    serve_stdio(h)


@mcp_app.command("install")
def install(
    agent: list[str] | None = McpAgentOpt,
    scope: str = ScopeOpt,
    project: Path | None = ProjectOpt,
    store: Path | None = typer.Option(
        None,
        "--home",
        help="A store directory the server should use (written into the entry as --home; default: $CTXKEEP_HOME when set).",
    ),
    dry_run: bool = DryRunOpt,
    force: bool = typer.Option(
        False, "--force", help="Replace an MCP server named ctxkeep that runs another program."
    ),
    as_json: bool = JsonOpt,
):
    """Register ctxkeep's MCP server in the agent's config (also prints the agent's own command for it)."""
    from ctxkeep.service.hooks import mcp_install

    store = _given_home(store)  # `ctxkeep --home DIR mcp install`: that store
    if store is None and os.environ.get("CTXKEEP_HOME"):
        store = Path(os.environ["CTXKEEP_HOME"])  # the agent starts the server without it
    store = store.expanduser().absolute() if store else None
    run_changes(
        mcp_install, settings_request(agent, scope, project, dry_run, force=force, home=store), as_json
    )


@mcp_app.command("uninstall")
def uninstall(
    agent: list[str] | None = McpAgentOpt,
    scope: str = ScopeOpt,
    project: Path | None = ProjectOpt,
    dry_run: bool = DryRunOpt,
    as_json: bool = JsonOpt,
):
    """Remove ctxkeep's MCP server entry (and only it) from the agent's config."""
    from ctxkeep.service.hooks import mcp_uninstall

    run_changes(mcp_uninstall, settings_request(agent, scope, project, dry_run), as_json)

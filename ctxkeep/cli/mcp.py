"""``ctxkeep mcp``: the stdio MCP server for agents (``ctxkeep.mcp.server``)."""

from __future__ import annotations

from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.cli import HomeOpt, _home, app


@app.command()
def mcp(home: Path | None = HomeOpt):
    """Run the stdio MCP server (tools ctx_search, ctx_fetch, ctx_stats, ctx_index, ctx_purge)."""
    from ctxkeep.mcp.server import serve_stdio

    h = _home(home)
    cfgmod.ensure_home(h)
    serve_stdio(h)

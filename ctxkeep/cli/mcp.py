"""``ctxkeep mcp``: the stdio MCP server for agents (``ctxkeep.mcp_server``)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .. import config as cfgmod
from . import HomeOpt, _home, app


@app.command()
def mcp(home: Optional[Path] = HomeOpt):
    """Run the stdio MCP server (tools ctx_search, ctx_fetch, ctx_stats, ctx_index, ctx_purge)."""
    from ..mcp_server import serve_stdio

    h = _home(home)
    cfgmod.ensure_home(h)
    serve_stdio(h)

"""newuser24's MCP findings, in-process (``mcp.server.Handlers``, no server spawned):
F3 one agent suggestion for the CLI and MCP, no 49-name list; F15 every error a
"- what to do"; F16 one "not confirmed" shape."""

from __future__ import annotations

import pytest

from ctxkeep import schema
from ctxkeep.errors import UsageError


def test_a_typo_agent_gets_the_same_suggestion_on_mcp_and_the_cli(tmp_path):
    from ctxkeep.cli.options import unknown_value as cli_line
    from ctxkeep.mcp.server import Handlers

    with pytest.raises(UsageError) as e:
        Handlers(tmp_path).ctx_search({"queries": "x", "filters": {"agent": "claud"}})
    assert str(e.value) == "unknown agent 'claud' - did you mean 'claude-code'? (agent)"
    assert "codex" not in str(e.value)  # not the 49 names, into an agent's context
    assert cli_line("agent", "claud", schema.AGENTS, "--agent") == (
        "unknown agent 'claud' (--agent) - did you mean 'claude-code'?"
    )
    with pytest.raises(UsageError) as e:
        Handlers(tmp_path).ctx_search({"queries": "x", "filters": {"agent": "zzzzzz"}})
    assert str(e.value) == "unknown agent 'zzzzzz' - ctx_stats lists the agents the store holds (agent)"


def test_the_agents_a_store_holds_come_first():
    from ctxkeep.service.args import closest

    assert closest("claud", schema.AGENTS) == "claude-code"
    assert closest("claud", schema.AGENTS, prefer=["claude-ai", "codex"]) == "claude-ai"
    assert closest("codx", schema.AGENTS) == "codex"

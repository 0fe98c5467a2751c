"""An agent typo gets the same suggestion from the CLI and MCP, without the 49-name
list (newuser24 F3: MCP said 'claude-ai' and listed every agent, the CLI 'claude-code')."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.errors import UsageError
from ctxkeep.service.search import AgentSearchRequest


def test_mcp_and_cli_suggest_the_same_agent(tmp_path):
    with pytest.raises(UsageError) as e:
        AgentSearchRequest.parse({"queries": "x", "filters": {"agent": "claud"}})
    assert e.value.message == "unknown agent 'claud' - did you mean 'claude-code'?"
    assert "codex" not in str(e.value)  # no list of names in an agent's context
    r = CliRunner().invoke(app, ["search", "foo", "--agent", "claud", "--home", str(tmp_path)])
    assert r.exit_code == 2
    assert "unknown agent 'claud' (--agent) - did you mean 'claude-code'?" in r.stderr

"""newuser23's findings (session 23): the fixes, each held by a test that fails without it."""

from __future__ import annotations

from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.cli.options import source_agents, store_agents, unknown_value


def test_the_agent_count_is_the_same_in_every_message():
    """F8: `ingest --agent nosuch` said "lists all 48", `search x --agent nosuch` "lists
    all 49" (its choices hold ``note``): the count is what `sources --all` lists."""
    n = len(source_agents())
    assert "note" in store_agents() and len(store_agents()) == n + 1
    want = f"unknown agent 'nosuchagent' (--agent) - `ctxkeep sources --all` lists all {n}"
    assert unknown_value("agent", "nosuchagent", store_agents(), "--agent") == want
    assert unknown_value("agent", "nosuchagent", source_agents(), "--agent") == want


def test_ingest_and_search_name_the_same_count(tmp_path):
    home = tmp_path / "store"
    a = CliRunner().invoke(app, ["ingest", "--agent", "nosuchagent", "--home", str(home)])
    b = CliRunner().invoke(app, ["search", "x", "--agent", "nosuchagent", "--home", str(home)])
    assert a.exit_code == b.exit_code == 2
    n = len(source_agents())
    for r in (a, b):
        assert f"`ctxkeep sources --all` lists all {n}" in " ".join(r.stderr.split()), r.stderr

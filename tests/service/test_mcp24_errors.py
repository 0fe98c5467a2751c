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


def test_not_confirmed_is_one_shape_and_yes_is_not_a_boolean(tmp_path):
    from ctxkeep.mcp.server import Handlers

    h = Handlers(tmp_path / "home", tmp_path)
    missing_text, missing = h.ctx_purge({"sessionId": "abcdef"})
    false_text, false = h.ctx_purge({"sessionId": "abcdef", "confirm": "false"})
    assert missing["cancelled"] is True and false["cancelled"] is True  # no isError for either
    assert missing_text.startswith("Purge cancelled: no confirm was given. Preview with dryRun: true")
    assert false_text == "Purge cancelled. Pass confirm: true to proceed."
    for bad in ("yes", 1, "y"):
        with pytest.raises(UsageError, match=f"confirm must be a boolean, got {bad!r}"):
            h.ctx_purge({"sessionId": "abcdef", "confirm": bad})


@pytest.mark.parametrize(
    "tool,args,line",
    [
        (
            "ctx_search",
            {"queries": "x", "limit": "abc"},
            "limit must be a whole number, got 'abc' (limit) - give digits only, e.g. 10",
        ),
        (
            "ctx_search",
            {"queries": "x", "raw": "maybe"},
            "raw must be true or false, got 'maybe' (raw) - give true or false",
        ),
        ("ctx_index", {"path": "/nonexistent/file"}, "label is required (label) - give label"),
    ],
)
def test_argument_errors_say_what_to_do(tmp_path, tool, args, line):
    from ctxkeep.mcp.server import Handlers

    with pytest.raises(UsageError) as e:
        getattr(Handlers(tmp_path), tool)(args)
    assert str(e.value) == line


def test_index_of_a_missing_file_says_what_to_do(tmp_path):
    from ctxkeep.mcp.server import Handlers

    with pytest.raises(UsageError) as e:
        Handlers(tmp_path / "home", tmp_path).ctx_index({"path": "/nonexistent/file", "label": "x"})
    assert str(e.value) == (
        f"cannot read /nonexistent/file: No such file or directory (path) - give an existing file "
        f"(a relative path is read from {tmp_path})"
    )


CLAUDE = "ef958aa1-0e93-49f0-bb71-150f63befcd1"


def test_replies_read_as_english(store):
    """F17: no ctx_fetch hint after 0 hits; F18: ``1 session``, ``tombstone would be
    added``, a second purge of a session says its tombstone was there already."""
    import re

    from ctxkeep.mcp.server import Handlers

    h = Handlers(store, store)
    none, _ = h.ctx_search({"queries": "zqxjvwkpf"})
    some, _ = h.ctx_search({"queries": "error", "limit": 1})
    assert "ctx_fetch" not in none and "(fetch full texts with ctx_fetch" in some
    stats, data = h.ctx_stats({})
    assert not re.search(r"\b1 (sessions|entries)\b", stats)
    ones = [a for a, d in data["agents"].items() if d["sessions"] == 1]
    assert ones and all(f"- {a}: " in stats and "1 session " in stats for a in ones)
    preview, _ = h.ctx_purge({"sessionId": CLAUDE, "dryRun": True})
    assert "tombstone would be added" in preview and "would add" not in preview
    first, r1 = h.ctx_purge({"sessionId": CLAUDE, "confirm": True})
    again, r2 = h.ctx_purge({"sessionId": CLAUDE, "confirm": True})
    assert r1["tombstone"] == "added" and "tombstone added" in first
    assert r2["tombstone"] == "already there" and "tombstone already there" in again
    assert r2["removed"]["entries"] == 0

"""`ctxkeep sessions`, `ctxkeep show --session` and `ctxkeep resume` (Typer CliRunner
over the corpus store). Expected values read from the corpus JSONL by hand."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()
CLAUDE = "ef958aa1-0e93-49f0-bb71-150f63befcd1"


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def test_sessions_json_and_table(home):
    r = runner.invoke(app, ["sessions", "--home", home, "--json", "--agent", "claude-code"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["source"] == "duckdb" and {s["agent"] for s in d["sessions"]} == {"claude-code"}
    ids = [s["session_id"] for s in d["sessions"]]
    assert ids[ids.index(CLAUDE) + 1] == "agent-a4ca7529859c158c2"
    # projects/-path-to-Demo: fe5e1c67-….jsonl, its five Task sidechains written as
    # "<id>/sidechain-…" sessions: the parent shows as its 4 first characters (no other
    # session id starts with "fe5"), its sidechains as "fe5e/sidechain-<rest>"
    r = runner.invoke(app, ["sessions", "--home", home, "--project", "/path/to/Demo"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split()[:5] == ["agent", "id", "project", "started", "ended"]
    assert lines[1].split()[:2] == ["claude-code", "fe5e"]
    assert len(lines) == 7 and all(x.startswith("└ claude-code  fe5e/sidechain-") for x in lines[2:])
    for x in lines[2:]:  # each shown sidechain id names its session
        shown = x.split()[2]
        r = runner.invoke(app, ["show", "--session", shown, "--home", home, "--json"])
        assert r.exit_code == 0 and json.loads(r.stdout)["session_id"].startswith(
            "fe5e1c67-53e7-4862-81ae-d0e013e3270b/" + shown.split("/")[1]
        )
    r = runner.invoke(app, ["sessions", "--home", home, "--agent", "nope"])
    assert r.exit_code == 2 and r.stderr.startswith(
        "error: unknown agent 'nope' (--agent) - did you mean 'note'?"
    )


def test_show_session(home):
    r = runner.invoke(app, ["show", "--session", "ef958aa1", "--home", home, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["session_id"] == CLAUDE and d["turns"][0]["text"].startswith("OK, we're going to make")
    # 40 tool_use blocks in the main file
    assert sum(t["kind"] == "tool_call" for t in d["turns"]) == 40
    r = runner.invoke(app, ["show", "--session", "ef958aa1", "--home", home, "--budget", "300"])
    assert r.exit_code == 0 and "older turns" in r.stderr
    r = runner.invoke(app, ["show", "--session", "ef958aa1", "abcdef123", "--home", home])
    assert r.exit_code == 2 and "not both" in r.stderr
    r = runner.invoke(app, ["show", "--home", home])
    assert r.exit_code == 2


def test_show_entry_ids_still_work(home):
    first = json.loads(runner.invoke(app, ["show", "--session", "c61729d4", "--home", home, "--json"]).stdout)
    eid = first["turns"][0]["entry_id"]
    r = runner.invoke(app, ["show", eid[:10], "--home", home, "--json"])
    assert (
        r.exit_code == 0
        and json.loads(r.stdout)["entries"][0]["text"] == "Can we continue from where we left off?"
    )


def test_resume(home):
    r = runner.invoke(app, ["resume", "c61729d4", "--home", home, "--budget", "1500"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("# Resume: codex session c61729d4") and "update_plan" in r.stdout
    r = runner.invoke(app, ["resume", "ef958aa1", "--home", home, "--format", "json"])
    assert json.loads(r.stdout)["session_id"] == CLAUDE
    r = runner.invoke(app, ["resume", "zzzzzz", "--home", home])
    assert (
        r.exit_code == 1
        and r.stderr.count("\n") == 1
        and r.stderr.startswith("error: no such session zzzzzz")
    )
    r = runner.invoke(app, ["resume", "c617", "--home", home, "--format", "xml"])
    assert r.exit_code == 2

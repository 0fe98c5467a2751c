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
    # the last line says how many match, also when all fit (README)
    assert lines[-1] == "6 sessions, newest first"
    lines = lines[:-1]
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


def test_sessions_pages(home):
    """A page of --limit N sessions of the list (sub-agents under their parent count),
    the last line saying how many match and how to see more; --json's total and
    next_offset name the next page; --all lists every one."""
    every = json.loads(runner.invoke(app, ["sessions", "--home", home, "--json", "--all", "--empty"]).stdout)
    total = len(every["sessions"])
    assert every["total"] == total > 6 and every["next_offset"] is None and every["limit"] is None
    default = json.loads(runner.invoke(app, ["sessions", "--home", home, "--json", "--empty"]).stdout)
    # the default page is 50 sessions: the corpus's 38 all on it; the last line counts them
    assert total < 50 and default["limit"] == 50 and default["sessions"] == every["sessions"]
    assert default["next_offset"] is None
    # (--empty: the 3 empty sessions listed too, as --json --empty lists them)
    text = runner.invoke(app, ["sessions", "--home", home, "--empty"]).stdout
    assert "showing" not in text and text.splitlines()[-1] == f"{total} sessions, newest first"
    r = runner.invoke(app, ["sessions", "--home", home, "--empty", "--limit", "10"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[-1] == f"showing 10 of {total} sessions, newest first - --limit N or --all for more"
    assert len(lines) == 1 + 10 + 1  # header, rows, the page line
    nxt = json.loads(
        runner.invoke(
            app, ["sessions", "--home", home, "--json", "--empty", "-n", "3", "--offset", "3"]
        ).stdout
    )
    assert nxt["sessions"] == every["sessions"][3:6] and nxt["next_offset"] == 6
    r = runner.invoke(app, ["sessions", "--home", home, "--empty", "-n", "3", "--offset", "3"])
    assert r.stdout.splitlines()[-1] == (
        f"showing 4-6 of {total} sessions, newest first - --offset 6 for the next page, --all for every one"
    )
    last = runner.invoke(app, ["sessions", "--home", home, "--empty", "-n", "3", "--offset", str(total - 2)])
    assert last.stdout.splitlines()[-1] == f"showing {total - 1}-{total} of {total} sessions, newest first"
    r = runner.invoke(app, ["sessions", "--home", home, "--all", "--empty"])
    assert r.exit_code == 0 and "showing" not in r.stdout
    assert r.stdout.splitlines()[-1] == f"{total} sessions, newest first"
    assert len(r.stdout.splitlines()) == 1 + total + 1  # header, rows, the count
    r = runner.invoke(app, ["sessions", "--home", home, "--empty", "--offset", "1000"])
    assert r.exit_code == 0 and r.stdout == f"no sessions past --offset 1,000 ({total} match)\n"
    r = runner.invoke(app, ["sessions", "--home", home, "--limit", "0"])
    assert r.exit_code == 2 and r.stderr.startswith("error: limit 0 is out of range (--limit)")


def test_show_session(home):
    r = runner.invoke(app, ["show", "--session", "ef958aa1", "--home", home, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["session_id"] == CLAUDE and d["turns"][0]["text"].startswith("OK, we're going to make")
    # 40 tool_use blocks in the main file
    assert sum(t["kind"] == "tool_call" for t in d["turns"]) == 40
    r = runner.invoke(app, ["show", "--session", "ef958aa1", "--home", home, "--budget", "300"])
    assert r.exit_code == 0 and "older turns" in r.stderr
    # the command to print them names the session as `sessions` does (its short id; the
    # full one was 36 characters where 4 work: newuser16 F16)
    said = " ".join(r.stderr.split())
    assert "`ctxkeep show --session ef95` without --budget prints them" in said and CLAUDE not in said
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


def test_a_cost_the_agent_logged_is_marked_as_report_marks_it(home):
    """newuser14: ``sessions`` showed Crush's a20c at $3.20 for 127k gpt-5 tokens (its
    own logged figure: list prices give $0.16) without saying so, where ``report``
    notes whose figure it is. Each row counts its responses with a logged cost
    (``cost_logged``), and the table is followed by ``report``'s note per agent."""
    r = runner.invoke(app, ["sessions", "--home", home, "--json", "--agent", "crush"])
    rows = {s["short_id"]: s for s in json.loads(r.stdout)["sessions"]}
    assert rows["a20c"]["cost_logged"] == 1 and round(rows["a20c"]["cost_usd"], 2) == 3.20
    assert sum(s["cost_logged"] for s in rows.values()) == 2
    r = runner.invoke(app, ["sessions", "--home", home, "--json", "--agent", "claude-code"])
    assert {s["cost_logged"] for s in json.loads(r.stdout)["sessions"]} == {0}
    r = runner.invoke(app, ["sessions", "--home", home, "--agent", "crush", "--agent", "claude-code"])
    assert r.exit_code == 0, r.output
    said = " ".join(r.stderr.split())
    # Crush logs a session's cost and only its last response's tokens (newuser15 F14): its
    # note says so, as report's does, and no mode prices it
    crush = (
        "crush: tokens not recorded by the agent (2 sessions: it logs each session's cost, and only "
        "its last response's tokens): not in the token totals; every mode shows the logged cost"
    )
    # (and claude-code's ef95, whose rows miss its total by a cent: left24's note)
    family = (
        "ef95 with its 1 sub-agent: $3.18 in all, as `report session` shows it (the rows, each rounded "
        "to the cent, add up to $3.19)"
    )
    assert said == f"note: {crush} note: {family}", r.stderr
    r = runner.invoke(app, ["report", "session", "--home", home, "--agent", "crush"])
    assert crush in " ".join(r.stderr.split())
    # OpenCode logs a cost per response beside its tokens: marked as report marks it
    r = runner.invoke(app, ["sessions", "--home", home, "--agent", "opencode"])
    logged = "opencode: the cost of 1 response is the agent's own logged figure"
    assert logged in " ".join(r.stderr.split()), r.stderr
    r = runner.invoke(app, ["report", "session", "--home", home, "--agent", "opencode"])
    assert logged in " ".join(r.stderr.split()), r.stderr


@pytest.mark.parametrize("where", ["~", "/"])
def test_resume_from_the_home_or_the_root_asks_for_a_session(home, where):
    """newuser15 F20: ``resume`` (and MCP ``ctx_resume``) with no session, from ``/`` or
    ``~`` (an MCP server started in the home), took the newest session of any project
    below: another project's state. It asks for a session, as ``purge --project ~``
    refuses."""
    r = runner.invoke(app, ["resume", "--project", where, "--home", home])
    assert r.exit_code == 1, r.output  # no session here: a failure, not a usage error
    assert "resume needs a session here" in r.stderr and "holds every project" in r.stderr
    said = {"~": "your home directory", "/": "the filesystem root"}[where]
    assert f"is {said}, which holds every project" in " ".join(r.stderr.split()), r.stderr
    # a session named still resumes
    r = runner.invoke(app, ["resume", CLAUDE[:8], "--project", where, "--home", home, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["session_id"] == CLAUDE


def test_resume_above_the_home_says_so(home, tmp_path, monkeypatch):
    """newuser16 F3: ``resume`` in /tmp with HOME=/tmp/nu16/home said "/tmp is the
    filesystem root or your home directory" (neither) and exited 2."""
    user = tmp_path / "u" / "home"
    user.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user))
    r = runner.invoke(app, ["resume", "--project", str(tmp_path), "--home", home])
    assert r.exit_code == 1, r.output
    said = " ".join(r.stderr.split())
    assert f"{tmp_path} is above your home directory (~ is {user}), which holds every project" in said
    assert "filesystem root" not in said

"""``ctxkeep sources`` as a new user reads it: it listed all 45 supported agents, most
of them absent, in the registry's order. Now the agents found come first (most
sessions first), then one line counts the others ("N more agents supported, none found
here (--all lists them)"); ``--all`` lists every agent, and ``--json`` keeps every agent
with its ``found`` state."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app
from ctxkeep.sources import SOURCES

#: the agents the corpus home holds sessions of (shared/corpus/SOURCES.md)
CORPUS_AGENTS = {
    "aider",
    "claude-code",
    "codex",
    "copilot-cli",
    "crush",
    "gemini-cli",
    "opencode",
    "opencode-go",
    "specstory",
}


def _run(*args: str, store, width: int = 200):
    r = CliRunner().invoke(
        app, ["sources", *args, "--home", str(store)], env={"HOME": str(CORPUS_HOME), "COLUMNS": str(width)}
    )
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture(autouse=True)
def _fresh_console(monkeypatch):
    """Each command's console made afresh, at its width (an earlier one may be wider)."""
    from ctxkeep.cli import out

    monkeypatch.setattr(out, "_console", None)


def test_json_keeps_every_agent_found_first(corpus_store):
    rows = json.loads(_run("--json", store=corpus_store[0]))["rows"]
    assert sorted(r["agent"] for r in rows) == sorted(SOURCES)
    found = [r for r in rows if r["found"]]
    assert {r["agent"] for r in found} == CORPUS_AGENTS
    # found first, most sessions first; then the others in the registry's order
    assert rows[: len(found)] == found
    assert [r["sessions"] for r in found] == sorted((r["sessions"] for r in found), reverse=True)
    assert found[0]["agent"] == "claude-code" and found[0]["sessions"] > found[-1]["sessions"]
    rest = [r["agent"] for r in rows[len(found) :]]
    assert rest == [a for a in SOURCES if a not in CORPUS_AGENTS]
    assert all(r["files"] == 0 and r["sessions"] == 0 and not r["listed"] for r in rows[len(found) :])


@pytest.mark.parametrize("width", [200, 100], ids=["table", "narrow"])
def test_text_lists_the_agents_found_then_one_line(corpus_store, width):
    text = _run(store=corpus_store[0], width=width)
    flat = " ".join(text.split())
    for a in CORPUS_AGENTS:
        assert a in flat, a
    absent = [a for a in SOURCES if a not in CORPUS_AGENTS]
    for a in absent:  # none of the absent agents is named ...
        assert f" {a} " not in f" {flat} " and f"{a}:" not in flat, a
    # ... one line counts them
    assert text.rstrip().splitlines()[-1] == (
        f"{len(absent)} more agents supported, none found here (--all lists them)"
    )
    # in order: claude-code (most sessions) before an agent of one session
    assert flat.index("claude-code") < flat.index("opencode-go")


def test_all_lists_every_agent(corpus_store):
    flat = " ".join(_run("--all", store=corpus_store[0]).split())
    for a in SOURCES:
        assert a in flat, a
    assert "more agents supported" not in flat


def test_an_empty_home_says_so_in_one_line(tmp_path):
    (tmp_path / "home").mkdir()
    r = CliRunner().invoke(
        app,
        ["sources", "--home", str(tmp_path / "ck")],
        env={"HOME": str(tmp_path / "home"), "COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    assert (
        r.stdout.strip()
        == f"none of the {len(SOURCES)} supported agents found here (--all lists where each looked)"
    )


def test_a_configured_agent_is_listed_though_absent(tmp_path):
    """An agent named in config.toml (here turned off) is shown: the user asked about it."""
    (tmp_path / "home").mkdir()
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.toml").write_text("[agents.codex]\nenabled = false\n")
    r = CliRunner().invoke(
        app,
        ["sources", "--home", str(tmp_path / "ck")],
        env={"HOME": str(tmp_path / "home"), "COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    assert "codex (off)" in r.stdout and "disabled in config" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1] == (
        f"{len(SOURCES) - 1} more agents supported, none found here (--all lists them)"
    )

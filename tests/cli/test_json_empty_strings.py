""" "None" has one spelling in every ``--json`` output: null, never ``""`` (session 17's
closing note: ``sessions --json`` gave an untitled session's ``title`` as ``""``; the
same held for ``sources --coverage``'s ``agent_version``, ``search``'s and ``show
--session``'s ``note`` and a no-op ingest's ``analytics``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import CORPUS_HOME, child_env

#: every command with a ``--json`` output the corpus store answers without writing
JSON_COMMANDS = [
    ["sessions", "--all"],
    ["sessions"],
    ["sources", "--coverage"],
    ["search", "hello"],
    ["search", "world", "--agent", "codex"],
    ["show", "--session", "ef958aa1"],
    ["stats"],
    ["vault", "status"],
    ["secrets"],
    ["quarantine", "list"],
    *(["report", r] for r in ("daily", "session", "projects", "models", "blocks", "tools")),
]


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _run(home: str, *args: str) -> str:
    env = dict(os.environ, COLUMNS="200", CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", home],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return r.stdout


def _empty(x, path="") -> list[str]:
    """The paths of the ``""`` values in ``x``."""
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _empty(v, f"{path}.{k}")]
    if isinstance(x, list):
        return [p for v in x for p in _empty(v, f"{path}[]")]
    return [path] if x == "" else []


@pytest.mark.parametrize("cmd", JSON_COMMANDS, ids=" ".join)
def test_no_empty_string_stands_for_none(home, cmd):
    got = json.loads(_run(home, *cmd, "--json"))
    assert _empty(got) == [], cmd


def test_an_untitled_session_has_a_null_title_and_a_blank_cell(home):
    rows = json.loads(_run(home, "sessions", "--all", "--json"))["sessions"]
    untitled = [r for r in rows if r["title"] is None]
    # the corpus's sessions without a title or a typed first prompt (gemini-cli 9fae,
    # codex fa1a, three of aider's, the claude-code `ses_` parent)
    assert len(untitled) == 6
    assert all(isinstance(r["title"], str) and r["title"] for r in rows if r not in untitled)
    table = _run(home, "sessions", "--all")
    line = next(x for x in table.splitlines() if " 9fae " in f" {x} ")
    assert "None" not in line and line.split()[-1] != "None"


def test_the_versions_the_records_do_not_name_are_null_and_shown_as_a_question_mark(home):
    rows = json.loads(_run(home, "sources", "--coverage", "--json"))["rows"]
    unnamed = [r for r in rows if r["agent_version"] is None]
    assert {r["agent"] for r in unnamed} == {
        "aider", "claude-code", "copilot-cli", "crush", "gemini-cli", "opencode", "opencode-go", "specstory",
    }  # fmt: skip
    assert any(x.split()[:2] == ["crush", "?"] for x in _run(home, "sources", "--coverage").splitlines())


def test_a_note_is_null_only_when_there_is_none(home):
    cut = json.loads(_run(home, "search", "hello", "--budget", "50", "--json"))
    assert cut["note"] and "budget" in cut["note"]
    assert json.loads(_run(home, "search", "hello", "--json"))["note"] is None


def test_a_noop_ingest_has_a_null_analytics(store):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "ingest", "--json", "--home", str(store)],
        capture_output=True, text=True, env=child_env(HOME=str(CORPUS_HOME)), timeout=300, check=True,
    )  # fmt: skip
    got = json.loads(r.stdout)
    assert got["entries_new"] == 0
    assert got["analytics"] is None

"""No project has one spelling in every ``--json`` output: null (``sessions --json``'s
``project_dir``, ``report session --json``'s ``project``); ``report projects --json``
spelled it ``"(none)"`` (session 16's closing note). The tables print ``(none)``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: every command with a ``--json`` output that a project can appear in
JSON_COMMANDS = [
    *(
        ["report", r]
        for r in ("daily", "weekly", "monthly", "session", "projects", "models", "blocks", "tools")
    ),
    ["stats"],
    ["sessions", "--all"],
]


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _run(home: str, *args: str, columns: int = 200) -> str:
    env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", home],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return r.stdout


def _strings(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)
    elif isinstance(x, str):
        yield x


@pytest.mark.parametrize("cmd", JSON_COMMANDS, ids=" ".join)
def test_no_placeholder_in_json(home, cmd):
    got = json.loads(_run(home, *cmd, "--json"))
    assert "(none)" not in set(_strings(got)), cmd


def test_projects_json_has_null_for_no_project_and_the_table_none(home):
    rows = json.loads(_run(home, "report", "projects", "--json"))["rows"]
    none = [r for r in rows if r["period"] is None]
    # the corpus's sessions without a project (Gemini CLI's, Copilot's fixtures) report
    # under null, the same sessions `report session --json` gives a null project
    sessions = json.loads(_run(home, "report", "session", "--json"))["rows"]
    lost = [r for r in sessions if r["project"] is None]
    assert none and lost
    assert {r["agent"] for r in none} == {r["agent"] for r in lost}
    for agent in {r["agent"] for r in none}:
        want = sum(r["responses"] for r in lost if r["agent"] == agent)
        assert sum(r["responses"] for r in none if r["agent"] == agent) == want, agent
    for columns in (200, 80):  # whole and folded (a narrow terminal)
        table = _run(home, "report", "projects", columns=columns)
        assert any(line.split()[:2] == ["(none)", none[0]["agent"]] for line in table.splitlines()), table

"""A cache write the agent does not record is "not recorded" (``-``, null in
``--json``), not 0: Codex's ``token_count`` logs input, cached input, output,
reasoning output and total tokens and no cache write (0.34.0 to 0.70.0-alpha.4 in the
corpus; ``schema.CACHE_WRITE_UNRECORDED``), nor does Gemini CLI. Session 17's closing
note: ``stats`` showed Codex's cache write as 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


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


def test_stats_per_agent_cache_write_is_null_where_not_recorded(home):
    agents = json.loads(_run(home, "stats", "--json"))["usage"]["agents"]
    assert agents["codex"]["cache_creation_tokens"] is None
    assert agents["gemini-cli"]["cache_creation_tokens"] is None
    assert agents["claude-code"]["cache_creation_tokens"] == 644_095  # recorded
    assert agents["opencode"]["cache_creation_tokens"] == 0  # OpenCode logs tokens.cache.write: 0
    assert agents["codex"]["cache_read_tokens"] == 61_294_208  # the other figures stay
    for width in (80, 60):
        lines = _run(home, "stats", columns=width).splitlines()
        codex = [x.split() for x in lines if x.startswith("codex ")]
        assert codex, width
        if width == 80:  # agent, responses, input, output, cache read, cache write, thoughts
            assert codex[0] == ["codex", "563", "3,609,297", "281,069", "61,294,208", "-", "92,223"]


def test_report_rows_give_null_and_the_table_a_dash(home):
    d = json.loads(_run(home, "report", "daily", "--json"))
    codex = [r for r in d["rows"] if r["agent"] == "codex"]
    assert codex and all(r["cache_creation_tokens"] is None for r in codex)
    for r in codex:  # the total is unchanged: input + output + cache read
        assert r["total_tokens"] == r["input_tokens"] + r["output_tokens"] + r["cache_read_tokens"]
    claude = [r for r in d["rows"] if r["agent"] == "claude-code"]
    assert sum(r["cache_creation_tokens"] for r in claude) == 644_095
    assert d["totals"]["cache_creation_tokens"] == 644_095
    assert d["totals"]["total_tokens"] == 75_678_572  # as before, as `stats`
    table = _run(
        home, "report", "daily", "--agent", "codex", "--since", "2025-11-01", "--until", "2025-11-01"
    )
    row = next(x.split() for x in table.splitlines() if x.strip().startswith("2025-11-01"))
    # date, agent, model, input, output, cache read, cache write, total, cost
    assert row == [
        "2025-11-01",
        "codex",
        "gpt-5",
        "3,402,915",
        "223,050",
        "59,491,328",
        "-",
        "63,117,293",
        "$13.92",
    ]
    s = json.loads(_run(home, "report", "session", "--json", "--agent", "codex"))
    assert s["rows"] and all(r["cache_creation_tokens"] is None for r in s["rows"])
    assert s["totals"]["cache_creation_tokens"] is None


def test_a_nonzero_sum_is_shown_as_it_is():
    from ctxkeep.schema import CACHE_WRITE_UNRECORDED, cache_write_shown

    assert "codex" in CACHE_WRITE_UNRECORDED and "claude-code" not in CACHE_WRITE_UNRECORDED
    assert cache_write_shown("codex", 0) is None
    assert cache_write_shown("codex", 1_200) == 1_200  # a version whose field is read
    assert cache_write_shown("claude-code", 0) == 0


def test_blocks_give_null_and_the_table_a_dash(home):
    """newuser21 N4: `report blocks` said 0 where `report daily` said -."""
    rows = json.loads(_run(home, "report", "blocks", "--json"))["rows"]
    codex = [r for r in rows if not r["is_gap"] and r["agents"] == ["codex"]]
    claude = [r for r in rows if not r["is_gap"] and r["agents"] == ["claude-code"]]
    assert len(codex) >= 5 and all(r["cache_creation_tokens"] is None for r in codex)
    assert sum(r["cache_creation_tokens"] for r in claude) == 644_095
    line = next(
        x for x in _run(home, "report", "blocks").splitlines() if x.strip().startswith("2025-09-26 11:00")
    )
    # start, status, agents, model, input, output, cache read, cache write, total, cost
    assert line.split()[-6:] == ["61,978", "10,409", "278,272", "-", "350,659", "$0.22"], line

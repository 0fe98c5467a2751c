"""`stats` shows the thought (reasoning) tokens beside its four components (session 16's
closing note: Gemini CLI's, OpenCode's and Qwen Code's are in every total, Codex's inside
its output, and `stats` showed none): in the usage line, per agent in a table, and in
--json; `-` / null where the agent does not record them (Claude Code, Crush), never 0."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from rich.cells import cell_len


@pytest.fixture(scope="module")
def home(corpus_store):
    return corpus_store[0]


def _run(home, *args: str, columns: int = 80) -> str:
    env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    return subprocess.run(
        [sys.executable, "-m", "ctxkeep", "stats", *args, "--home", str(home)],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    ).stdout  # fmt: skip


def _logged(home) -> dict[str, int]:
    """Each agent's reasoning tokens as the store's usage rows hold them."""
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        return dict(c.execute("SELECT agent, coalesce(sum(reasoning_tokens), 0) FROM usage GROUP BY agent"))
    finally:
        c.close()


def test_stats_json_counts_thoughts_per_agent_and_null_where_unrecorded(home):
    logged = _logged(home)
    u = json.loads(_run(home, "--json"))["usage"]
    per = {a: d["reasoning_tokens"] for a, d in u["agents"].items()}
    assert per["codex"] == logged["codex"] > 0
    assert per["gemini-cli"] == logged["gemini-cli"] > 0
    assert per["opencode"] == logged["opencode"] > 0
    assert per["claude-code"] is None and per["crush"] is None  # not recorded, not 0
    assert u["reasoning_tokens"] == logged["codex"] + logged["gemini-cli"] + logged["opencode"]
    assert u["agents"]["crush"]["input_tokens"] is None  # Crush logs a cost, no tokens
    assert sum(d["responses"] for d in u["agents"].values()) == u["responses"]


@pytest.mark.parametrize("columns", [80, 60])
def test_stats_table_shows_thoughts_beside_the_four_components(home, columns):
    u = json.loads(_run(home, "--json"))["usage"]
    text = _run(home, columns=columns)
    assert all(cell_len(x) <= columns for x in text.splitlines()), text
    flat = " ".join(text.split())
    assert f"thoughts {u['reasoning_tokens']:,} API tokens" in flat
    lines = text.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("API tokens per agent"))
    rows = {x.split()[0]: x.split() for x in lines[head:] if x.split()[:1] and x.split()[0] in u["agents"]}
    fig = {
        a: "-" if d["reasoning_tokens"] is None else f"{d['reasoning_tokens']:,}"
        for a, d in u["agents"].items()
    }
    for agent, want in fig.items():
        assert rows[agent][-1] == want, (agent, rows[agent])
    assert (
        rows["claude-code"][-1] == "-"
        and rows["gemini-cli"][-1] == f"{u['agents']['gemini-cli']['reasoning_tokens']:,}"
    )

"""What a new user sees (issue 22 item 6): the ``report models`` header names each
column once, figures are never cut in a narrow terminal, ``show --session`` gives
dates when a session spans days."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from ctxkeep import cli
from ctxkeep.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


@pytest.fixture
def columns(monkeypatch):
    """Run commands as in a terminal ``n`` columns wide (the consoles are made again)."""

    def set_to(n: int) -> None:
        monkeypatch.setenv("COLUMNS", str(n))
        cli.out._console = None
        cli.err._console = None

    yield set_to
    cli.out._console = None
    cli.err._console = None


def _text(*args) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_report_models_names_agent_then_model(home):
    head = next(line for line in _text("report", "models", "--home", home).splitlines() if "input" in line)
    assert head.split()[:3] == ["agent", "model", "input"]


@pytest.mark.parametrize("report", ["daily", "models", "session", "tools"])
def test_no_figure_is_cut_at_60_columns(home, columns, report):
    data = json.loads(_text("report", report, "--home", home, "--json"))
    columns(60)
    text = _text("report", report, "--home", home)
    # "…" only inside a model id cut in its middle (newuser16 F5), never in a figure
    assert all(re.search(r"[a-z]", w) for w in re.findall(r"\S*…\S*", text)), text
    keys = ["output_tokens"] if report == "tools" else ["total_tokens"]
    # the total left out (the sum of the four token columns): those four whole
    if re.search(r"not shown at 60 columns: [^\n]*\btotal\b", text):  # (one note: "models, total")
        keys = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"]
    # (null: tokens not recorded by the agent, shown "-": test_cli_report checks those rows)
    figures = [f"{r[k]:,}" for r in data["rows"] for k in keys if r[k] is not None]
    assert figures and all(re.search(rf"(?<![\d,]){re.escape(f)}(?![\d,])", text) for f in figures)
    if report != "tools":
        assert all(f"${r['cost_usd']:,.2f}" in text for r in data["rows"] if r.get("cost_usd") is not None)


def test_stats_figures_whole_at_60_columns(home, columns):
    data = json.loads(_text("stats", "--home", home, "--json"))
    columns(60)
    text = _text("stats", "--home", home)
    assert "…" not in text
    for a, d in data["agents"].items():
        line = next(x for x in text.splitlines() if x.strip().startswith(a + " "))
        assert f"{d['entries']:,}" in line.split() and f"{d['token_estimate']:,}" in line.split()


def test_show_session_gives_dates_when_it_spans_days(home, tmp_path):
    import datetime as dt

    from session_lines import claude_lines

    turn = re.compile(r"^(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2} ")
    # a handmade Claude Code session over midnight: 23:59:58, 23:59:59, 00:00:00, 00:00:01
    f = tmp_path / "projects" / "-tmp-x" / "0a1b2c3d-1111-2222-3333-444455556666.jsonl"
    f.parent.mkdir(parents=True)
    start = dt.datetime(2025, 6, 1, 23, 59, 58, tzinfo=dt.UTC)
    f.write_text("\n".join(claude_lines("0a1b2c3d-1111-2222-3333-444455556666", 4, start)) + "\n")
    store = str(tmp_path / "home")
    _text("ingest", "--path", str(f), "--home", store, "--no-prefect", "--no-progress")
    text = _text("show", "--session", "0a1b2c3d", "--home", store)
    # the date in the header, the times of day on the turns, a line where the day
    # changes (newuser16 F3: no date anywhere)
    assert "2025-06-01 - 2025-06-02 UTC" in text.splitlines()[0]
    lines = [x.strip() for x in text.splitlines()]
    lines = [x for x in lines if turn.match(x) or x.startswith("── ")]
    assert [" ".join(x.split()[:2]) for x in lines] == [
        "23:59:58 user",
        "23:59:59 assistant",
        "── 2025-06-02",
        "00:00:00 user",
        "00:00:01 assistant",
    ]
    # one day (019a802a: 2025-11-14): times of day only
    lines = [x.strip() for x in _text("show", "--session", "019a802a", "--home", home).splitlines()]
    lines = [x for x in lines if turn.match(x)]
    assert lines and not any(re.match(r"^\d{4}-", x) for x in lines)


def test_show_session_cuts_tool_lines_and_folds_encrypted_reasoning(home):
    """newuser16 F3: `show --session c617` (Codex 0.34) at 80 columns printed tool lines
    up to 551 columns (the entry id lost off screen) and 104 lines of
    `thinking: (thinking, ~0 tokens)` (encrypted reasoning: nothing to read)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, COLUMNS="80", CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "show", "--session", "c61729d4", "--home", home],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    lines = r.stdout.splitlines()
    assert "2025-11-01 UTC" in lines[0]
    tools = [x for x in lines if " ⚙ " in x]
    assert len(tools) > 100 and all(len(x) <= 80 for x in tools)
    assert all(re.search(r"  [0-9a-f]{12}$", x) for x in tools)  # the entry id stays in view
    assert any("…  →" in x for x in tools)  # some were cut
    assert "(thinking, ~0 tokens)" not in r.stdout
    said = " ".join(r.stderr.split())
    assert re.search(r"note: \d+ reasoning items not shown: the agent stores its reasoning encrypted", said)

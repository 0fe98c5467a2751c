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
    assert "…" not in text
    keys = ["output_tokens"] if report == "tools" else ["total_tokens"]
    # the total left out (the sum of the four token columns): those four whole
    if "not shown at 60 columns: total" in text:
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
    lines = [x.strip() for x in _text("show", "--session", "0a1b2c3d", "--home", store).splitlines()]
    lines = [x for x in lines if turn.match(x)]
    assert [x[:19] for x in lines] == [
        "2025-06-01 23:59:58",
        "2025-06-01 23:59:59",
        "2025-06-02 00:00:00",
        "2025-06-02 00:00:01",
    ]
    # one day (019a802a: 2025-11-14): times of day only
    lines = [x.strip() for x in _text("show", "--session", "019a802a", "--home", home).splitlines()]
    lines = [x for x in lines if turn.match(x)]
    assert lines and not any(re.match(r"^\d{4}-", x) for x in lines)

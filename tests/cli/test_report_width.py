"""`report daily` in an 80-column terminal (new-user trial: it printed a 120-column
table and broke model names mid-word): the table fits 80 columns by stacking the token
pairs and wrapping model names at their separators, and no figure is cut. Run as a
whole process (the console reads COLUMNS once per process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest


def _fig(v: int | None) -> str:
    """A token figure as the table prints it: ``12,345``; null (tokens not recorded by
    the agent: Crush, Go opencode) ``-``."""
    return "-" if v is None else f"{v:,}"


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _report(home: str, *args: str, columns: int) -> str:
    env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "report", "daily", "--home", home, "-z", "UTC", *args],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return r.stdout


@pytest.mark.parametrize("columns", [80, 100])
def test_daily_fits_the_terminal_and_cuts_no_figure_or_name(home, columns):
    rep = json.loads(_report(home, "--json", columns=columns))
    assert rep["rows"], "the corpus has usage"
    text = _report(home, columns=columns)
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= columns
    assert len(text.split("─")) > 1 and "…" not in text
    words = re.findall(r"\S+", text)
    for r in rep["rows"]:
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_creation_tokens",
            "total_tokens",
        ):
            assert _fig(r[k]) in words
        assert f"${r['cost_usd']:,.2f}" in words
        # each model name whole, or the column left out and named (a name folded at its
        # separators, `claude-` / `sonnet-` / `4-` / `20250514`: newuser15 F1)
        if f"not shown at {columns} columns: models" not in text:
            for m in r["models"]:
                assert m in words, m
    assert f"${rep['totals']['cost_usd']:,.2f}" in words and _fig(rep["totals"]["total_tokens"]) in words


def test_a_wide_terminal_keeps_one_line_per_row(home):
    rep = json.loads(_report(home, "--json", columns=200))
    text = _report(home, columns=200)
    one_model = [r for r in rep["rows"] if len(r["models"]) == 1]
    for r in one_model:
        assert any(
            r["period"] in x and r["models"][0] in x and _fig(r["total_tokens"]) in x
            for x in text.splitlines()
        )


def test_the_measured_width_is_the_rendered_width(corpus_store):
    """``cli.report._natural_width`` measures a table instead of rendering it (four
    renders were ~80 % of a 1,294-day `report daily`): the same width as the widest
    rendered line, for every usage report's table of the corpus, folded or not, with
    model names whole, wrapped or left out (the tables ``_table`` tries)."""
    import io

    from rich.console import Console

    from ctxkeep.cli import report as R
    from ctxkeep.service.report import ReportRequest, report

    def rendered(t) -> int:
        c = Console(width=10_000, file=io.StringIO(), color_system=None)
        with c.capture() as cap:
            c.print(t)
        return max(len(x.rstrip()) for x in cap.get().splitlines())

    home = corpus_store[0]
    n = 0
    for name in ("daily", "weekly", "monthly", "session", "projects", "models", "blocks"):
        for breakdown in (False, True):
            rep = report(
                home, ReportRequest.parse(report=name, breakdown=breakdown, timezone="UTC")
            ).as_json()
            rows = rep["rows"]
            names = [R._model_cell(r, name, breakdown) for r in rows]
            variants = (
                [[x] for x in names],
                [[""] for _ in names],
                [[R._cut_name(y, 12) for y in x.split("\n")] for x in names],
            )
            for folded in (False, True):
                for models in variants:
                    args = (rep, rows, breakdown, home, "a title", folded, models)
                    assert R._natural_width(R._usage_table(*args)) == rendered(R._usage_table(*args))
                    n += 1
    assert n == 84


@pytest.mark.parametrize("columns", [60, 80, 120])
@pytest.mark.parametrize("args", [("models",), ("daily", "--breakdown"), ("projects", "--breakdown")])
def test_model_ids_are_never_folded(home, columns, args):
    """newuser14 F6, newuser15 F1, newuser16 F5: `report models` at 80 columns folded
    `claude-sonnet-4-` / `20250514` over two lines. Each model id is on one line: whole,
    or its two ends with "…" between (never a fragment on a line of its own)."""
    name, *rest = args
    env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    run = [sys.executable, "-m", "ctxkeep", "report", name, "--home", home, "-z", "UTC", *rest]
    rep = json.loads(
        subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, check=True).stdout
    )
    text = subprocess.run(run, capture_output=True, text=True, env=env, check=True).stdout
    models = {r["model"] for r in rep["rows"]}
    assert "claude-sonnet-4-20250514" in models  # the name folded before
    words = re.findall(r"\S+", text)
    for m in models:
        whole = m in words
        cut = [w for w in words if "…" in w and m.startswith(w.split("…")[0]) and m.endswith(w.split("…")[1])]
        assert whole or cut, (m, text)
    # no line holds a piece of an id alone (`20250514`, `sonnet-4-`)
    for w in words:
        assert not re.fullmatch(r"\d{8}|[a-z]+-[\d.-]*-", w), (w, text)
    if columns >= 80 and name == "models":
        assert all(m in words for m in models)  # 80 columns: every id whole

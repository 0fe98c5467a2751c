"""A usage report's table printed through ``cli.long_table`` (Rich lays out a proxy of
the widest rows, every row formatted as plain lines) is byte-identical to Rich drawing
every row, at 60-200 columns, plain and in colour: the corpus's period reports, and a
10,000-row daily report with multi-model days, assumed models, unpriced rows and
figures of every width (issue 26: a 10 GB `report daily` drew ~7,000 rows with Rich,
4.3 s)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from ctxkeep.cli import _safe_console, out
from ctxkeep.cli import long_table as L
from ctxkeep.cli import report as R

COLUMNS = (60, 80, 100, 120, 160, 200)


def _print(monkeypatch, rep, width: int, *, fast: bool, colour: bool = False, home=None) -> tuple[str, list]:
    """``report``'s table of ``rep`` on a console ``width`` wide: through the proxy
    (``fast``) or with every row drawn by Rich; (output, what each print_long
    returned)."""
    buf = io.StringIO()
    kw = {"force_terminal": True, "color_system": "truecolor"} if colour else {"color_system": None}
    monkeypatch.setattr(out, "_console", _safe_console(width=width, file=buf, soft_wrap=True, **kw))
    took: list = []

    def rich_only(console, proxy, cells, picked, whole):
        console.print(whole())
        took.append(False)
        return False

    def spy(*a):
        took.append(L.print_long(*a))
        return took[-1]

    monkeypatch.setattr(R, "print_long", spy if fast else rich_only)
    R._table(rep, rep["rows"], rep.get("_breakdown", False), home or Path("/nonexistent"))
    return buf.getvalue(), took


def _rows(n: int, seed: int = 26) -> list[dict]:
    rnd = random.Random(seed)
    models = ["gpt-5", "gpt-5-codex", "claude-sonnet-4-20250514", "claude-opus-4-1-20250805", "o3", "glm-4.6"]
    agents = ["claude-code", "codex", "opencode", "gemini", "crush"]
    rows = []
    for i in range(n):
        k = rnd.choice([1, 1, 1, 2, 3])
        toks = [
            rnd.choice([0, rnd.randrange(10), rnd.randrange(10 ** rnd.randrange(1, 11))]) for _ in range(4)
        ]
        rows.append(
            {
                "period": f"{2020 + i // 4000}-{1 + i // 330 % 12:02d}-{1 + i % 28:02d}",
                "agent": rnd.choice(agents),
                "models": rnd.sample(models, k),
                "input_tokens": toks[0],
                "output_tokens": toks[1],
                "cache_read_tokens": toks[2],
                "cache_creation_tokens": toks[3],
                "total_tokens": sum(toks),
                "cost_usd": None if rnd.random() < 0.05 else rnd.random() * 10 ** rnd.randrange(0, 5),
            }
        )
    return rows


def _rep(rows: list[dict]) -> dict:
    return {"report": "daily", "timezone": "UTC", "mode": "auto", "rows": rows, "notes": []}


@pytest.mark.parametrize(("width", "n"), [(80, 10_000), (200, 10_000), (60, 2_000), (120, 2_000)])
def test_ten_thousand_rows_as_rich_draws_them(monkeypatch, width, n):
    rep = _rep(_rows(n))
    fast, took = _print(monkeypatch, rep, width, fast=True)
    assert took == [True], "the proxy path printed"
    rich, _ = _print(monkeypatch, rep, width, fast=False)
    assert fast == rich
    assert fast.count("\n") > n  # every row is there (multi-model rows take more lines)


@pytest.mark.parametrize("width", [60, 160])
def test_colour_terminal_as_rich_draws_it(monkeypatch, width):
    rep = _rep(_rows(500, seed=7))
    fast, took = _print(monkeypatch, rep, width, fast=True, colour=True)
    assert took == [True] and "\x1b[" in fast  # styled header and footer, plain rows
    assert fast == _print(monkeypatch, rep, width, fast=False, colour=True)[0]


def test_the_corpus_reports_as_rich_draws_them(monkeypatch, corpus_store):
    from ctxkeep.service.report import ReportRequest, report

    home = corpus_store[0]
    n = 0
    for name in ("daily", "weekly", "monthly", "session", "projects"):
        for breakdown in (False, True):
            rep = report(
                home, ReportRequest.parse(report=name, breakdown=breakdown, timezone="UTC")
            ).as_json()
            rep["_breakdown"] = breakdown
            assert rep["rows"]
            for width in COLUMNS:
                fast, took = _print(monkeypatch, rep, width, fast=True, home=home)
                # a project path wider than its column wraps: Rich draws that table
                assert took == [True] or name == "projects", (name, breakdown, width)
                assert fast == _print(monkeypatch, rep, width, fast=False, home=home)[0], (
                    name,
                    breakdown,
                    width,
                )
                n += 1
    assert n == 60


def test_a_cell_it_cannot_format_falls_back_to_rich(monkeypatch):
    """A tab or a control character in a cell, a blank before a line's end: Rich draws
    the whole table (it expands, strips or escapes them), the same bytes as before."""
    for odd in ("gpt\t5", "gpt-5 ", "gpt\x1b[2J", "a\u2028b"):
        rows = _rows(50, seed=3)
        rows[17]["models"] = [odd]
        rep = _rep(rows)
        fast, took = _print(monkeypatch, rep, 120, fast=True)
        assert took == [False], odd
        assert fast == _print(monkeypatch, rep, 120, fast=False)[0]


def test_the_proxy_holds_each_columns_widest_line_and_word():
    cells = [("a", "x y", "1\n22"), ("bbb", "longword z", "333"), ("cc", "wide wide wide", "4")]
    assert L.proxy_rows(cells) == [1, 2]
    assert L.proxy_rows([]) == []

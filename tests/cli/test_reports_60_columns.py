"""Every report in a 60-column terminal (session 16's closing note: "at 60 columns some
reports are still wider than the screen": `report blocks` 67, `tools` 61, a breakdown
(`-b`) 68-77, `stats` 68). Each is run as a whole process with COLUMNS=60 on the corpus
store: no line of stdout or stderr may pass 60 cells, and the figures a person reads the
table for (from the command's own --json) stay on screen whole: a model name may be cut
in its middle with "…", a column left out is named under the table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len

COLUMNS = 60

REPORTS = [
    *(
        ["report", r]
        for r in ("daily", "weekly", "monthly", "session", "projects", "models", "blocks", "tools")
    ),
    *(["report", r, "-b"] for r in ("daily", "weekly", "monthly", "session", "projects")),
]


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _run(home: str, *args: str, columns: int = COLUMNS) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    return subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", home],
        capture_output=True, text=True, env=env, timeout=180, check=True,
    )  # fmt: skip


def _fits(text: str) -> None:
    wide = [x for x in text.splitlines() if cell_len(x) > COLUMNS]
    assert not wide, f"{len(wide)} lines wider than {COLUMNS}: {wide[:2]}"


def _fig(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


@pytest.mark.parametrize("cmd", REPORTS, ids=" ".join)
def test_report_fits_60_columns_with_its_figures(home, cmd):
    rows = [r for r in json.loads(_run(home, *cmd, "--json").stdout)["rows"] if not r.get("is_gap")]
    assert rows
    r = _run(home, *cmd)
    _fits(r.stdout)
    _fits(r.stderr)
    words = set(re.findall(r"\S+", r.stdout))
    for row in rows:
        if cmd[1] == "tools":
            assert f"{row['calls']:,}" in words and f"{row['output_tokens']:,}" in words, row
            continue
        for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
            assert _fig(row[k]) in words, (cmd, k, row)
        if row["cost_usd"] is not None:
            assert f"${row['cost_usd']:,.2f}" in words, (cmd, row)
    if cmd[1] in ("session", "blocks"):  # a local time under its date: both whole
        assert re.search(r"^\S*20\d\d-\d\d-\d\d\s", r.stdout, re.M), r.stdout


def test_stats_fits_60_columns_and_names_what_it_left_out(home):
    got = json.loads(_run(home, "stats", "--json").stdout)
    r = _run(home, "stats")
    _fits(r.stdout)
    assert "not shown at 60 columns: tool results (--json has them)" in r.stdout
    lines = r.stdout.splitlines()
    for agent, d in got["agents"].items():
        row = next(x for x in lines if x.split()[:1] == [agent]).split()
        assert row[1:4] == [f"{d['sessions']:,}", f"{d['entries']:,}", f"{d['kinds'].get('message', 0):,}"], (
            row
        )


def test_a_cut_model_name_keeps_both_ends(home):
    """`report session -b` at 60: the models column is 8 wide; the names keep their
    first and last characters around "…" (`clau…514`), never folded over lines."""
    text = _run(home, "report", "session", "-b").stdout
    cut = re.findall(r"\b(clau…\S+)", text)
    assert cut and all(len(c) <= 8 for c in cut), text
    assert "claude-" not in text.replace("claude-code", "")  # no name folded at a hyphen


def test_sessions_fit_60_columns_with_their_costs(home):
    """`sessions` at 60 (rows of 79 before, and the empty sessions' line 73): the tokens
    column goes after ended, tools, msgs and project (the cost stays), the id column
    is cut to what is left, each line folded at the width."""
    got = json.loads(_run(home, "sessions", "--all", "--json").stdout)["sessions"]
    got = [x for x in got if x["started"] is not None or x["messages"]]  # the list leaves the empty out
    r = _run(home, "sessions", "--all")
    _fits(r.stdout)
    flat = " ".join(r.stdout.split())
    assert "not shown at 60 columns: ended, tools, msgs, project, tokens (--json has them)" in flat
    # every session's cost on its row (the ids of sub-agents repeat their parent's start)
    # (a session and its sub-agents are rounded together, so each shown cost is within a
    # cent of its own: newuser17 F20)
    shown = sorted(float(c.replace(",", "")) for c in re.findall(r"\d{4}-\d\d-\d\d +\$([\d,.]+)", r.stdout))
    exact = sorted(x["cost_usd"] for x in got if x["cost_usd"] is not None)
    assert len(shown) == len(exact) and all(
        abs(a - b) <= 0.01 + 1e-9 for a, b in zip(shown, exact, strict=True)
    )
    # each id whole or cut in its middle: the sub-agents' ids stay apart
    ids = [x.removeprefix("└ ").split()[1] for x in r.stdout.splitlines()[1 : len(got) + 1]]
    for i, x in zip(ids, got, strict=True):
        if " " not in x["short_id"]:  # (a fixture's id with blanks is cut at them)
            a, _, b = i.partition("…")
            assert i == x["short_id"] or (x["short_id"].startswith(a) and x["short_id"].endswith(b)), (i, x)
    subs = [i for i, x in zip(ids, got, strict=True) if x["short_id"].startswith("fe5e/")]
    assert len(subs) == len(set(subs)) == 5, subs

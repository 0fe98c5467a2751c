"""`sessions` at 80 columns with long ids, its paging footer, and the empty sessions
(newuser16 F2): rows of 86 columns at 80 (an id column 26 wide for a few long ids, titles
of 11 characters), a 106-column footer, and 17 % of a heavy home's rows empty (no time,
no message, no title) listed and counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.query.sessions import SessionRow

runner = CliRunner()


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _run(home: str, *args: str, columns: int = 80) -> str:
    env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "sessions", "--home", home, *args],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return r.stdout


def test_empty_sessions_are_counted_apart_and_listed_on_request(home):
    every = json.loads(_run(home, "--all", "--json", "--empty"))["sessions"]
    empty = [s for s in every if s["started"] is None and s["messages"] == 0]
    assert len(empty) == 3  # the summary-only, file-history-only and 0-byte files
    text = _run(home, "--all")
    lines = text.splitlines()
    shown = len(every) - len(empty)
    assert f"{shown} sessions, newest first" in lines
    assert f"+{len(empty)} empty sessions were left out (no time, no message): --empty lists them" in lines
    for s in empty:  # none of them is a row (their short ids: ``--empty``)
        assert not any(x.split()[:1] == [s["agent"]] and x.split()[1:2] == [s["short_id"]] for x in lines)
    wide = _run(home, "--all", "--empty").splitlines()
    assert f"{len(every)} sessions, newest first" in wide and not any("empty" in x for x in wide)
    assert len(wide) - len(lines) == len(empty) - 1  # the rows in, the "+3" line out


def test_the_paging_footer_is_folded_at_the_width(home):
    lines = _run(home, "--offset", "5", "--limit", "3").splitlines()
    assert max(map(len, lines)) <= 80
    i = next(i for i, x in enumerate(lines) if x.startswith("showing 6-8 of "))
    assert lines[i + 1].strip() == "--all for every one"


def test_long_ids_are_cut_so_a_row_fits_and_the_title_keeps_its_room(monkeypatch, tmp_path):
    from ctxkeep.service import sessions_core

    def row(agent, sid, title, depth=0):
        return SessionRow(
            agent=agent, session_id=sid, short_id=sid, parent_session_id=None, project_dir="/p",
            started="2026-10-02T10:00:00Z", ended="2026-10-02T11:00:00Z", messages=4, tool_calls=1,
            tokens=16_422, token_estimate=0, cost_usd=0.0, cost_logged=0, title=title, depth=depth,
        )  # fmt: skip

    rows = [
        row("codex", "ea1d", "List the files of the project and describe each one"),
        row("copilot-cli", "copilot_stage0_small-c41", "Create the fixture for the stage"),
        row("claude-code", "52da/sidechain-c", "OK, we're going to write the tests", depth=1),
    ]
    page = sessions_core.SessionList("duckdb", 3, 0, None, None, rows)
    monkeypatch.setattr(sessions_core, "session_list", lambda home, args: page)
    monkeypatch.setenv("COLUMNS", "80")
    from ctxkeep import cli

    monkeypatch.setattr(cli.out, "_console", None)  # made again at 80 columns, put back after
    r = runner.invoke(app, ["sessions", "--home", str(tmp_path), "--all"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 80, r.stdout
    assert "copilot_stage0_sm…" in r.stdout and "copilot_stage0_small-c41" not in r.stdout
    # (11 before: `List the fi…`; 16 with the tokens kept: newuser19 F5 drops them, the cost stays)
    assert "ea1d" in lines[1] and "List the files of the pr…" in lines[1] and "16,422" not in r.stdout
    assert "$0.00" in lines[1] and "tokens" in r.stdout.splitlines()[-2] + r.stdout.splitlines()[-1]


def test_no_project_is_spelled_as_the_reports_spell_it(home):
    """newuser16 F14: a session without a project was blank in `sessions` and `(none)`
    in the reports."""
    every = json.loads(_run(home, "--all", "--json"))["sessions"]
    gem = [s for s in every if s["project_dir"] is None and s["started"]]
    assert gem
    lines = _run(home, "--all", columns=200).splitlines()
    for s in gem:
        row = next(x for x in lines if x.split()[:2] == [s["agent"], s["short_id"]])
        assert row.split()[2] == "(none)", row
    rep = json.loads(
        subprocess.run(
            [sys.executable, "-m", "ctxkeep", "report", "projects", "--home", home, "--json"],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, CTXKEEP_IDLE_SECONDS="0"),
        ).stdout  # fmt: skip
    )
    assert None in {r["period"] for r in rep["rows"]}  # null in --json, as `sessions`


def test_tokens_without_a_cost_during_an_ingest_say_why(store):
    """newuser16 F16: during an ingest, `sessions` showed tokens and an empty cost, with
    no note (`search` and `report` have one). The analytics store gone and the store
    lock held (an ingest running): the rows come from SQLite, without cost."""
    from pathlib import Path

    from ctxkeep.sinks.lock import StoreLock

    (Path(store) / "analytics.duckdb").unlink()
    lock = StoreLock(Path(store)).acquire(timeout=0)
    try:
        r = runner.invoke(app, ["sessions", "--home", str(store)])
    finally:
        lock.release()
    assert r.exit_code == 0, r.output
    assert any(x.split()[-1:] != ["$0.00"] and "," in x for x in r.stdout.splitlines()[1:])  # tokens shown
    said = " ".join(r.stderr.split())
    assert "note: an ingest is running: the cost of what it stores shows when it ends" in said, r.output


def test_json_counts_as_the_text_does(home):
    """newuser17 F22: text said 35 sessions (+3 empty left out), ``--json`` 38 with the 3
    empty rows: a script counted 38, the reader 35. Now ``--json`` leaves them out as the
    text does and says how many (``empty``); ``--empty`` lists them in both."""
    got = json.loads(_run(home, "--all", "--json"))
    text = _run(home, "--all").splitlines()
    assert f"{got['total']} sessions, newest first" in text and got["empty"] == 3
    assert len(got["sessions"]) == got["total"] and not any(
        s["started"] is None and s["messages"] == 0 for s in got["sessions"]
    )
    every = json.loads(_run(home, "--all", "--json", "--empty"))
    assert (
        every["total"] == got["total"] + 3
        and every["empty"] == 0
        and len(every["sessions"]) == every["total"]
    )

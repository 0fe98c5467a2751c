"""Reports over a team's lake (``ctxkeep report … --lake DEST [--by machine]``,
query/lake.py): three stores built from overlapping corpus subsets, three machine
names, exported to one lake. The lake's ``report daily --json`` equals, field by field,
the sum of the three local ``report daily --json``; ``--by machine`` gives each
machine's local rows back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME, ingest
from ctxkeep.cli import app
from ctxkeep.maintenance.export import export_parquet
from report_sums import TOKENS, summed

runner = CliRunner()

#: machine → the agents of its store (Codex and Claude Code on two machines each, so the
#: lake sums rows of the same day and agent from different machines)
MACHINES = {
    "laptop": ["claude-code", "codex"],
    "workstation": ["codex", "gemini-cli"],
    "ci-runner-3": ["claude-code", "crush", "opencode-go", "opencode"],
}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    root = tmp_path_factory.mktemp("team")
    lake = root / "lake"
    homes = {}
    for name, agents in MACHINES.items():
        h = root / name
        h.mkdir()
        (h / "config.toml").write_text(f'machine = "{name}"\n', encoding="utf-8")
        ingest(CORPUS_HOME, h, agents)
        export_parquet(h, str(lake))
        homes[name] = h
    return homes, lake


def report(*args) -> dict:
    r = runner.invoke(app, ["report", *map(str, args), "--json", "-z", "UTC"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_lake_daily_equals_the_sum_of_the_local_reports(team):
    homes, lake = team
    local = [report("daily", "--home", h) for h in homes.values()]
    got = report("daily", "--lake", lake)
    want = summed(local)
    assert len(got["rows"]) == len(want)
    overlap = 0
    for row in got["rows"]:
        w = want[(row["period"], row["agent"])]
        for f in TOKENS:
            assert row[f] == w[f], (row["period"], row["agent"], f)
        assert sorted(row["models"]) == sorted(w["models"])
        if w["cost_usd"] is None:
            assert row["cost_usd"] is None
        else:  # the lake sums exactly in DECIMAL; the local rows are doubles
            assert row["cost_usd"] == pytest.approx(w["cost_usd"], abs=1e-9)
        overlap += row["agent"] in ("codex", "claude-code")
    assert overlap > 5  # days of the agents that two machines share are summed
    for f in TOKENS[:5]:
        assert got["totals"][f] == sum(r["totals"][f] or 0 for r in local)
    assert got["totals"]["responses"] == sum(r["totals"]["responses"] for r in local)
    assert got["totals"]["cost_usd"] == pytest.approx(sum(r["totals"]["cost_usd"] for r in local), abs=1e-9)
    # the same shape as a local report: the same keys, in the same order
    assert list(got) == list(local[0]) and list(got["rows"][0]) == list(local[0]["rows"][0])


def test_codex_rows_count_twice_as_two_machines_hold_them(team):
    homes, lake = team
    solo = report("daily", "--home", homes["laptop"], "--agent", "codex")
    both = report("daily", "--lake", lake, "--agent", "codex")
    assert both["totals"]["total_tokens"] == 2 * solo["totals"]["total_tokens"] > 0


def test_by_machine_gives_each_machines_local_rows(team):
    homes, lake = team
    got = report("monthly", "--lake", lake, "--by", "machine", "--breakdown")
    assert [r["machine"] for r in got["rows"]] == sorted(r["machine"] for r in got["rows"])
    for name, h in homes.items():
        local = report("monthly", "--home", h, "--breakdown")["rows"]
        mine = [{k: v for k, v in r.items() if k != "machine"} for r in got["rows"] if r["machine"] == name]
        assert mine == local, name


def test_tools_and_blocks_over_the_lake(team):
    homes, lake = team
    tools = report("tools", "--lake", lake)
    calls = {}
    for h in homes.values():
        for r in report("tools", "--home", h)["rows"]:
            calls[(r["agent"], r["tool"])] = calls.get((r["agent"], r["tool"]), 0) + r["calls"]
    assert {(r["agent"], r["tool"]): r["calls"] for r in tools["rows"]} == calls
    blocks = report("blocks", "--lake", lake, "--by", "machine")
    assert {r["machine"] for r in blocks["rows"]} == set(MACHINES)
    for name, h in homes.items():
        local = report("blocks", "--home", h)["rows"]
        mine = [r for r in blocks["rows"] if r["machine"] == name]
        assert [(b["start"], b["total_tokens"]) for b in mine] == [
            (b["start"], b["total_tokens"]) for b in local
        ]


def test_terminal_table_per_machine(team):
    _, lake = team
    r = runner.invoke(app, ["report", "daily", "--lake", str(lake), "--by", "machine", "-z", "UTC"])
    assert r.exit_code == 0, r.output
    for name in MACHINES:
        assert f"machine {name}" in r.stdout


def one_error_line(r, code: int, *needles: str) -> None:
    assert r.exit_code == code, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_lake_input(team, tmp_path: Path):
    _, lake = team
    one_error_line(
        runner.invoke(app, ["report", "daily", "--lake", str(tmp_path / "none")]), 1, "no lake here"
    )
    one_error_line(runner.invoke(app, ["report", "daily", "--by", "machine"]), 2, "--by machine needs --lake")
    # newuser20 F7: `--by person` said `--by person (--by) - give --lake DEST --by machine`,
    # not that person is no dimension of the lake
    for by in ("agent", "person"):
        r = runner.invoke(app, ["report", "daily", "--lake", str(lake), "--by", by])
        one_error_line(r, 2, f"unknown --by value '{by}'", "--by machine is the lake's one dimension")
    # a lake of usage only: the tools report names what is missing
    only = tmp_path / "usage-only"
    export_parquet(team[0]["laptop"], str(only), tables=("usage",))
    one_error_line(
        runner.invoke(app, ["report", "tools", "--lake", str(only)]), 1, "no entries", "--tables entries"
    )

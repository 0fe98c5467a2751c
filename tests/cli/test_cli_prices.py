"""Reports and ``prices.toml`` on the command line (newuser17 F1, F2, F3, F7): a CSV
export holds every row and column; an edited price file re-prices the next report
without ``reindex``; a broken one is one error line naming it (reports, reindex),
a warning in ``doctor``, and the reason ``sessions`` shows no cost, never an empty
report with exit 0; a DuckDB that cannot be brought current says why."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def home(corpus_store, tmp_path):
    h = tmp_path / "store"
    shutil.copytree(corpus_store[0], h)
    return h


def _gpt5(home) -> float:
    r = run("report", "models", "--home", home, "--json", "--agent", "codex")
    assert r.exit_code == 0, r.output
    return sum(x["cost_usd"] or 0 for x in json.loads(r.stdout)["rows"] if x["model"] == "gpt-5")


def test_csv_holds_every_row_and_a_column_only_later_rows_have(home):
    # the corpus's Codex gpt-5 rows are priced as the assumed model: their rows carry
    # `assumed_models`, the first rows (Claude Code, 2025-05) do not
    js = json.loads(run("report", "daily", "--home", home, "-z", "UTC", "--json").stdout)["rows"]
    r = run("report", "daily", "--home", home, "-z", "UTC", "--csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == len(js) > 8
    assert "assumed_models" in rows[0]  # a column, empty where the row has none
    assert rows[0]["assumed_models"] == "" and any(x["assumed_models"] for x in rows)
    assert sum(float(x["cost_usd"] or 0) for x in rows) == pytest.approx(
        sum(x["cost_usd"] or 0 for x in js), abs=1e-6
    )


def test_an_edited_prices_toml_reprices_the_next_report(home):
    before = _gpt5(home)
    assert before > 1  # the corpus's Codex sessions at gpt-5's list price
    # half gpt-5's list price (input 1.25, output 10, cache read 0.125 USD/MTok)
    (home / "prices.toml").write_text(
        '[models."gpt-5"]\ninput_mtok = 0.625\noutput_mtok = 5\ncache_read_mtok = 0.0625\n'
    )
    assert _gpt5(home) == pytest.approx(before / 2, rel=1e-9)
    (home / "prices.toml").unlink()
    assert _gpt5(home) == pytest.approx(before, rel=1e-9)


def test_a_broken_prices_toml_is_an_error_not_an_empty_report(home):
    before = _gpt5(home)
    duck = (home / "analytics.duckdb").read_bytes()
    (home / "prices.toml").write_text('[models."gpt-5"]\ninput_mtok = "cheap"\n')
    for args in (("report", "daily"), ("report", "monthly", "--json"), ("reindex",)):
        r = run(*args, "--home", home)
        assert r.exit_code == 1, (args, r.output)
        assert "Traceback" not in r.output
        err = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(err) == 1 and err[0].startswith("error: prices.toml: model 'gpt-5' has a non-numeric rate")
        assert str(home / "prices.toml") in err[0]
    assert (home / "analytics.duckdb").read_bytes() == duck  # reindex deleted nothing
    r = run("doctor", "--home", home)
    assert "prices" in r.stdout and "non-numeric rate" in r.stdout, r.stdout
    r = run("sessions", "--home", home, "-n", "3")
    assert r.exit_code == 0, r.output
    assert "no cost shown" in r.stdout and "non-numeric rate" in r.stdout
    assert "run `ctxkeep ingest`" not in r.stdout
    (home / "prices.toml").write_text("")  # fixed (an empty file: no overrides)
    assert _gpt5(home) == pytest.approx(before, rel=1e-9)

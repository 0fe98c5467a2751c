"""One rounding of a cost (newuser21 N3): ``sessions`` showed ef95 (exact $1.965285)
as $1.96, rounding it together with its sub-agent so the two added up to ``report
session``'s $3.18 (newuser17 F20), and ``export html`` showed $1.97: one session, two
prices. Each shown figure is now its exact cost rounded once, as every page shows it;
a total is the exact sum rounded once (``report session``); ``--json`` keeps them exact."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace as NS

from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.cli.sessions import _shown_costs


def test_each_cost_is_rounded_once_on_its_own():
    rows = [NS(depth=0, cost_usd=1.965285), NS(depth=1, cost_usd=1.2159), NS(depth=0, cost_usd=0.004)]
    assert _shown_costs(rows) == ["$1.97", "$1.22", "$0.00"]
    assert _shown_costs([NS(depth=0, cost_usd=None), NS(depth=0, cost_usd=1234.5)]) == ["", "$1,234.50"]


def test_ef95_has_one_price_in_sessions_and_export_html(store, tmp_path):
    """The corpus's ef95: $1.97 in `sessions` and in `export html`'s index (on a copy of
    the corpus store: an export records its run in the store); with its sub-agent the
    exact sum rounded once is `report session`'s figure."""
    home = str(store)
    r = CliRunner()
    text = r.invoke(app, ["sessions", "--all", "--home", home], env={"COLUMNS": "200"}).stdout.splitlines()
    listed = json.loads(r.invoke(app, ["sessions", "--all", "--home", home, "--json"]).stdout)["sessions"]
    ef95 = next(s for s in listed if s["session_id"].startswith("ef95"))
    assert round(ef95["cost_usd"], 6) == 1.965285
    line = next(x for x in text if " ef95 " in f" {x} ")
    assert re.search(r"\$1\.97\b", line), line
    subs = [s for s in listed if s.get("parent_session_id") == ef95["session_id"]]
    assert len(subs) == 1
    rep = json.loads(r.invoke(app, ["report", "session", "--home", home, "--json"]).stdout)["rows"]
    whole = next(x for x in rep if x["period"] == ef95["session_id"])
    assert f"${whole['cost_usd']:,.2f}" == f"${ef95['cost_usd'] + subs[0]['cost_usd']:,.2f}" == "$3.18"
    site = tmp_path / "site"
    assert r.invoke(app, ["export", "html", str(site), "--home", home, "--no-progress"]).exit_code == 0
    index = (site / "index.html").read_text()
    at = index.index(ef95["session_id"][:8])
    assert "$1.97" in index[at : at + 2000] and "$1.96" not in index[at : at + 2000]
    # the index says what `sessions` says of the family whose rows miss its total (left24)
    assert "ef95 with its 1 sub-agent: $3.18 in all" in index


def test_a_family_whose_rounded_rows_miss_its_total_gets_a_note(store):
    """left24 (N3 again): ef95's rows, each rounded once, add up to $3.19 where `report
    session` shows the session with its sub-agent as $3.18 (the exact sum rounded once):
    `sessions` says so under the list, and nothing for a family whose rows add up."""
    from ctxkeep.schema import family_cost_notes

    a = NS(depth=0, cost_usd=1.965285, session_id="ef95", short_id="ef95", parent_session_id=None)
    b = NS(depth=1, cost_usd=1.21920325, session_id="s1", short_id="ef95/s1", parent_session_id="ef95")
    c = NS(depth=0, cost_usd=0.5, session_id="0d3a", short_id="0d3a", parent_session_id=None)
    assert family_cost_notes([a, b, c]) == [
        "ef95 with its 1 sub-agent: $3.18 in all, as `report session` shows it "
        "(the rows, each rounded to the cent, add up to $3.19)"
    ]
    assert family_cost_notes([a, NS(**{**b.__dict__, "cost_usd": 1.2}), c]) == []  # $3.17 both ways
    r = CliRunner().invoke(app, ["sessions", "--all", "--home", str(store)], env={"COLUMNS": "200"})
    notes = [x.strip() for x in " ".join(r.stderr.split()).split("note: ") if x.startswith("ef95 with")]
    assert notes == ["ef95 with its 1 sub-agent: $3.18 in all, as `report session` shows it (the rows, "
                     "each rounded to the cent, add up to $3.19)"], r.stderr  # fmt: skip

"""``sessions`` shows a parent's and its sub-agents' costs so that they add up to the
session's cost in ``report session`` (newuser17 F20: ef95 $1.97 + its sub-agent $1.22 =
$3.19 beside report session's $3.18: each rounded alone). Each shown figure is within a
cent of its exact value (``--json`` keeps them exact)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace as NS

from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.cli.sessions import _shown_costs


def test_a_group_adds_up_to_its_rounded_total():
    rows = [NS(depth=0, cost_usd=1.966), NS(depth=1, cost_usd=1.216), NS(depth=0, cost_usd=0.004)]
    shown = _shown_costs(rows)
    assert shown[2] == "$0.00"
    cents = [int(s.replace("$", "").replace(".", "")) for s in shown[:2]]
    assert sum(cents) == 318 and abs(cents[0] - 196.6) < 1 and abs(cents[1] - 121.6) < 1, shown
    assert _shown_costs([NS(depth=0, cost_usd=None), NS(depth=0, cost_usd=1234.5)]) == ["", "$1,234.50"]


def test_the_corpus_sessions_add_up_to_report_session(corpus_store):
    home = str(corpus_store[0])
    r = CliRunner()
    text = r.invoke(app, ["sessions", "--all", "--home", home], env={"COLUMNS": "200"}).stdout.splitlines()
    rep = json.loads(r.invoke(app, ["report", "session", "--home", home, "--json"]).stdout)
    # the parents with sub-agents: their shown figures add up to report session's, to the cent
    groups: dict[str, int] = {}
    parent = None
    for line in text[1:]:
        m = re.search(r"\$([\d,]+\.\d\d)", line)
        if not m:
            continue
        cents = int(m.group(1).replace(",", "").replace(".", ""))
        if line.startswith("└"):
            groups[parent] += cents
        else:
            parent = line.split()[1]
            groups[parent] = cents
    rows = rep["rows"]
    checked = with_subs = 0
    for row in rows:
        for short, cents in groups.items():
            if row["period"].startswith(short) and row.get("cost_usd") is not None:
                assert cents == round(row["cost_usd"] * 100), (short, cents, row["cost_usd"])
                checked += 1
                with_subs += bool(row["subagent_sessions"])
    assert checked >= 5 and with_subs >= 1, (checked, with_subs)

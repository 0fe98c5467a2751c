"""Scheduled purge policies (issue 11): ``[purge]`` rules in config.toml, previewed by
``ctxkeep purge --policy --dry-run``, applied by ``--policy`` (and by the purge-policy
deployment of ``serve``), each run recorded with what it removed. Expected figures are
read from the store's rows with Python, independently of the policy's SQL."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess

import duckdb
import pytest

from conftest import CORPUS_HOME, ROOT
from ctxkeep.maintenance import purge_policy
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources.contract import DiscoveryContext

CTXKEEP = str(ROOT / ".venv" / "bin" / "ctxkeep")
DEMO = "/path/to/Demo"  # sample-project (fe5e1c67…), with sidechains
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CONFIG = """
[purge]
projects = ["/path/to/Demo"]
agents = ["aider"]
older_than_days = 200
"""


def rows(store):
    c = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        return c.execute(
            "SELECT entry_id, agent, session_id, parent_session_id, project_dir, ts, ingested_at FROM entries"
        ).fetchall()
    finally:
        c.close()


def expected(store) -> dict[str, set[str]]:
    """Entry ids each rule should remove, worked out in Python from the rows."""
    rs = rows(store)
    root = lambda r: r[3] or r[2]  # noqa: E731
    newest: dict[str, str] = {}
    ingested: dict[str, str] = {}
    for r in rs:
        if r[5]:
            newest[root(r)] = max(newest.get(root(r), ""), r[5])
        ingested[root(r)] = max(ingested.get(root(r), ""), r[6])
    cut = (NOW - dt.timedelta(days=200)).strftime("%Y-%m-%dT%H:%M:%S")
    old = {s for s in ingested if (newest.get(s) or ingested[s]) < cut}
    aider_roots = {root(r) for r in rs if r[1] == "aider"}
    return {
        "agent aider": {r[0] for r in rs if root(r) in aider_roots},
        "older than 200 days": {r[0] for r in rs if root(r) in old},
        "project": {r[0] for r in rs if r[4] and (r[4] == DEMO or r[4].startswith(DEMO + "/"))},
    }


def cli(*args, home):
    env = dict(os.environ, HOME=str(CORPUS_HOME), CTXKEEP_IDLE_SECONDS="0", COLUMNS="200")
    return subprocess.run(
        [CTXKEEP, *args, "--home", str(home)], capture_output=True, text=True, env=env, timeout=600
    )


def test_policy_dry_run_then_run_removes_what_the_rules_name(store):
    (store / "config.toml").write_text(CONFIG)
    exp = expected(store)
    assert len(exp["agent aider"]) == 32  # the corpus's aider history (5 sessions)
    assert exp["older than 200 days"] and exp["project"]
    rows_before = rows(store)
    n_before = len(rows_before)

    plan = purge_policy.plan_policy(store, now=NOW)
    per = plan["per_rule"]
    # rules run in order (projects, agents, age); a scope counts under the first rule
    project = exp["project"] | _demo_dirless(store)
    assert per[f"project {DEMO}"]["entries"] == len(project)
    assert per["agent aider"]["entries"] == 32 and per["agent aider"]["scopes"] == 5
    assert per["older than 200 days"]["entries"] == len(
        exp["older than 200 days"] - project - exp["agent aider"]
    )
    gone = project | exp["agent aider"] | exp["older than 200 days"]
    assert plan["totals"]["entries"] == len(gone)
    assert len(rows(store)) == n_before  # a plan changes nothing

    purged_sessions = {r[2] for r in rows(store) if r[0] in gone}
    rep = purge_policy.run_policy(store, now=NOW)
    assert rep["totals"]["entries"] == len(gone)
    left = {r[0] for r in rows(store)}
    assert not left & gone and len(left) == n_before - len(gone)
    assert not [r for r in rows(store) if r[1] == "aider"]
    # the run record says what each rule removed, and names no session
    c = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    (detail,) = c.execute("SELECT detail FROM runs WHERE flow='purge-policy' AND status='ok'").fetchone()
    tombs = {v for (v,) in c.execute("SELECT value FROM tombstones")}
    c.close()
    d = json.loads(detail)
    assert d["per_rule"]["agent aider"]["entries"] == 32
    assert d["totals"]["entries"] == len(gone)
    assert not [sid for sid in purged_sessions if sid in detail]
    assert DEMO in tombs and {r[2] for r in rows_before if r[1] == "aider"} <= tombs
    # DuckDB follows SQLite
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM entries").fetchall()[0][0] == len(left)
    con.close()
    # tombstones keep it out: an ingest of the agents' files brings nothing back
    s = run_ingest(store, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
    assert s.entries_new == 0
    # a second run removes nothing
    again = purge_policy.run_policy(store, now=NOW)
    assert again["totals"]["entries"] == 0


def _demo_dirless(store) -> set[str]:
    """The project rule also takes the dir-less records of sessions wholly in it."""
    rs = rows(store)
    located: dict[str, list[bool]] = {}
    for r in rs:
        if r[4]:
            located.setdefault(r[2], []).append(r[4] == DEMO or r[4].startswith(DEMO + "/"))
    whole = {s for s, v in located.items() if all(v)}
    return {r[0] for r in rs if not r[4] and (r[2] in whole or r[3] in whole)}


def test_cli_policy_dry_run_and_confirmation(store):
    (store / "config.toml").write_text('[purge]\nagents = ["aider"]\n')
    r = cli("purge", "--policy", "--dry-run", "--json", home=store)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["dry_run"] is True and p["per_rule"]["agent aider"]["entries"] == 32
    assert len(rows(store)) == 3890  # nothing removed by the preview (corpus: 3,890 entries)
    r = cli("purge", "--policy", home=store)  # not interactive, no --yes: refused
    assert r.returncode == 2 and "without --yes" in r.stderr  # wrong usage (the CLI contract)
    r = cli("purge", "--policy", "--yes", home=store)
    assert r.returncode == 0, r.stderr
    assert "32 entries of 5 sessions" in r.stdout
    assert len(rows(store)) == 3890 - 32
    r = cli("purge", "--policy", "--session", "x", home=store)
    assert r.returncode == 2 and r.stderr.startswith("error: ")


def test_no_rules_is_one_error_line(store):
    r = cli("purge", "--policy", "--dry-run", home=store)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"error: no [purge] rules in config.toml ({store / 'config.toml'}) - add projects, agents or "
        "older_than_days under [purge]"
    ]


def test_serve_deploys_the_policy_only_with_rules(store_home):
    pytest.importorskip("prefect")
    from ctxkeep.flows.serve import policy_schedules

    assert policy_schedules(store_home) == []
    (store_home / "config.toml").write_text("[purge]\nevery_hours = 6\n")
    assert policy_schedules(store_home) == []  # a section without a rule
    (store_home / "config.toml").write_text('[purge]\nagents = ["aider"]\n')
    (s,) = policy_schedules(store_home)
    assert s.name == "ctxkeep-purge-policy" and s.interval == dt.timedelta(hours=24)
    assert s.entrypoint == "ctxkeep.flows.maintenance:purge_policy_flow"
    (store_home / "config.toml").write_text('[purge]\nagents = ["aider"]\nevery_hours = 6\n')
    assert policy_schedules(store_home)[0].interval == dt.timedelta(hours=6)

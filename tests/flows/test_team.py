"""Prefect across machines (issue 13's acceptance): one ``prefect server start`` on
loopback, three simulated machines - three HOMEs built from copies of corpus subsets,
three stores with three machine names, three ``ctxkeep serve --work-pool team --lake
LAKE`` processes (each registers its deployments in its own work queue and runs its
own process worker) - the six deployments ``ingest-<machine>`` and
``export-<machine>`` triggered through the API, and then:

- every run completed, run by the machine's own worker: each store holds the agents
  of its own HOME only;
- each machine's partitions landed in the one shared lake;
- ``report daily --lake LAKE --json`` equals, field by field, the sum of the three
  machines' local ``report daily --json``.

Slow (a Prefect server: 20-30 s on an idle 2-core machine, over 100 s under load,
then 3 workers and 6 flow runs); runs with CTXKEEP_RUN_SERVE=1, as in CI:
``CTXKEEP_RUN_SERVE=1 uv run pytest -q tests/flows/test_team.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME, ROOT, child_env
from ctxkeep.cli import app
from report_sums import TOKENS, summed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("CTXKEEP_RUN_SERVE") != "1",
        reason="starts a Prefect server and three workers (2-3 min); set CTXKEEP_RUN_SERVE=1",
    ),
]

#: machine → the corpus folders copied into its HOME (Claude Code and Codex on two
#: machines each, so the lake sums rows of one day and agent from two machines), and the
#: agents its store must hold then
MACHINES = {
    "laptop": ([".claude", ".codex"], {"claude-code", "codex"}),
    "workstation": ([".codex", ".gemini"], {"codex", "gemini-cli"}),
    "ci-runner-3": (
        [".claude", ".local", "code"],
        {"claude-code", "aider", "specstory", "opencode", "opencode-go", "crush"},
    ),
}
POOL = "team"

#: runs in a subprocess against the team server: waits for the deployments, triggers
#: the ingest of every machine, waits, then the export of every machine, waits
CLIENT = r"""
import json, sys, time
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment

machines = sys.argv[1].split(",")
t0 = time.monotonic()
deadline = t0 + 600
deps, times, runs = {}, {}, {}
with get_client(sync_client=True) as c:
    want = [f"{f}/{f}-{m}" for m in machines for f in ("ingest", "export")]
    while time.monotonic() < deadline and len(deps) < len(want):
        for n in want:
            if n in deps:
                continue
            try:
                d = c.read_deployment_by_name(n)
            except Exception:
                continue
            deps[n] = {"pool": d.work_pool_name, "queue": d.work_queue_name, "parameters": d.parameters,
                       "interval": [s.schedule.interval.total_seconds() for s in d.schedules]}
        time.sleep(0.5)
    times["deployments"] = time.monotonic() - t0
    # each machine: its ingest, then (once that is done) its export
    ids = {f"ingest-{m}": run_deployment(f"ingest/ingest-{m}", timeout=0).id for m in machines}
    while time.monotonic() < deadline and len(runs) < 2 * len(machines):
        for key, i in list(ids.items()):
            if key in runs:
                continue
            fr = c.read_flow_run(i)
            if fr.state.is_final():
                runs[key] = {"state": fr.state.type.value, "queue": fr.work_queue_name, "pool": fr.work_pool_name}
                times[key] = time.monotonic() - t0
                flow, m = key.split("-", 1)
                if flow == "ingest":
                    ids[f"export-{m}"] = run_deployment(f"export/export-{m}", timeout=0).id
        time.sleep(0.5)
print(json.dumps({"deployments": deps, "runs": runs, "times": times}))
"""


def _env(**extra) -> dict:
    return child_env(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", **extra)


def _report(*args) -> dict:
    r = CliRunner().invoke(app, ["report", *map(str, args), "--json", "-z", "UTC"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_one_team_server_drives_three_machines_into_one_lake(tmp_path):
    from ctxkeep.flows.serve import free_port, healthy, prefect_cli

    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    lake = tmp_path / "lake"
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    t0 = time.monotonic()
    server_log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - written until the server stops
    server = subprocess.Popen(
        [*prefect_cli(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=_env(PREFECT_HOME=str(tmp_path / "server"), PREFECT_UI_ENABLED="false"),
        stdout=server_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    serves: dict[str, subprocess.Popen] = {}
    logs = {}
    stores = {}
    try:
        for name, (dirs, _) in MACHINES.items():
            user = tmp_path / name / "home"
            for d in dirs:
                shutil.copytree(CORPUS_HOME / d, user / d)
            store = tmp_path / name / "store"
            store.mkdir(parents=True)
            (store / "config.toml").write_text(f'machine = "{name}"\n', encoding="utf-8")
            stores[name] = store
        deadline = time.monotonic() + 300
        while not healthy(api) and time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            time.sleep(1)
        assert healthy(api), (tmp_path / "server.log").read_text()
        t_server = time.monotonic() - t0
        exe = Path(sys.executable).with_name("ctxkeep")
        for name in MACHINES:
            logs[name] = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115
            serves[name] = subprocess.Popen(
                [str(exe), "serve", "--work-pool", POOL, "--lake", str(lake), "--home", str(stores[name])],
                env=_env(
                    HOME=str(tmp_path / name / "home"),
                    PREFECT_API_URL=api,
                    PREFECT_HOME=str(tmp_path / name / "prefect"),
                    PREFECT_WORKER_QUERY_SECONDS="1",  # poll the queue every second (default 10)
                ),
                stdout=logs[name],
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=tmp_path,
            )
        r = subprocess.run(
            [sys.executable, "-c", CLIENT, ",".join(MACHINES)],
            env=_env(PREFECT_API_URL=api, PREFECT_HOME=str(tmp_path / "client")),
            capture_output=True,
            text=True,
            timeout=900,
            cwd=ROOT,
        )
        outputs = {n: (tmp_path / f"{n}.log").read_text(errors="replace")[-3000:] for n in MACHINES}
        assert r.returncode == 0, r.stderr[-3000:] + json.dumps(outputs, indent=1)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        print(
            f"\nserver healthy after {t_server:.1f} s; then (s from the client's start) "
            + ", ".join(f"{k} {v:.1f}" for k, v in got["times"].items())
        )
    finally:
        for p in serves.values():
            _stop(p)
        for f in logs.values():
            f.close()
        _stop(server)
        server_log.close()

    # the deployments: named after the machine, in the machine's queue of the team pool
    for name in MACHINES:
        ing, exp = got["deployments"][f"ingest/ingest-{name}"], got["deployments"][f"export/export-{name}"]
        assert (ing["pool"], ing["queue"], exp["pool"], exp["queue"]) == (POOL, name, POOL, name)
        assert ing["parameters"] == {"home": str(stores[name])} and ing["interval"] == [900.0]
        assert exp["parameters"] == {"home": str(stores[name]), "dest": str(lake)} and exp["interval"] == [
            3600.0
        ]
    assert len(got["deployments"]) == 6
    for key, run in got["runs"].items():
        name = key.split("-", 1)[1]
        assert run == {"state": "COMPLETED", "queue": name, "pool": POOL}, (key, outputs[name])
    # each ingest ran on its machine's worker, with that machine's HOME
    for name, (_, agents) in MACHINES.items():
        conn = sqlite3.connect(f"file:{stores[name] / 'store.db'}?mode=ro", uri=True)
        try:
            held = {a for (a,) in conn.execute("SELECT DISTINCT agent FROM entries")}
            flows = conn.execute("SELECT flow, status FROM runs ORDER BY run_id").fetchall()
        finally:
            conn.close()
        assert held == agents, name
        assert flows == [("ingest", "ok"), ("export", "ok")], name
    # each machine's partitions in the one lake
    for table in ("usage", "sessions", "entries"):
        assert sorted(p.name for p in (lake / table).iterdir()) == sorted(f"machine={m}" for m in MACHINES)
        for name in MACHINES:
            assert list((lake / table / f"machine={name}").rglob("*.parquet")), (table, name)
    # the lake's daily report is the sum of the three local ones, field by field
    local = [_report("daily", "--home", stores[n]) for n in MACHINES]
    team = _report("daily", "--lake", lake)
    want = summed(local)
    assert len(team["rows"]) == len(want) > 0
    shared = 0
    for row in team["rows"]:
        w = want[(row["period"], row["agent"])]
        for f in TOKENS:
            assert row[f] == w[f], (row["period"], row["agent"], f)
        assert sorted(row["models"]) == sorted(w["models"])
        if w["cost_usd"] is None:
            assert row["cost_usd"] is None
        else:
            assert row["cost_usd"] == pytest.approx(w["cost_usd"], abs=1e-9)
        shared += row["agent"] in ("codex", "claude-code")
    assert shared > 5  # days of agents that two machines hold are summed across machines
    for f in [*TOKENS[:5], "responses"]:  # the figures a report's totals carry
        # null where a machine's agents record none (a cache write Codex never logs)
        held = [rep["totals"][f] for rep in local if rep["totals"][f] is not None]
        assert team["totals"][f] == (sum(held) if held else None), f
    assert team["totals"]["cost_usd"] == pytest.approx(
        sum(rep["totals"]["cost_usd"] for rep in local), abs=1e-9
    )
    assert team["totals"]["total_tokens"] > 0

"""`ctxkeep serve` against a real Prefect server on loopback (acceptance: schedules).

Starts `ctxkeep serve` as a process (it starts `prefect server start` on 127.0.0.1),
checks the registered deployments and their intervals through the API, triggers one
ingest run through the API, sees it complete and the store filled, then stops serve
with SIGTERM and checks the server went down with it.

Slow: the Prefect server needs 20-30 s to start on an idle 2-core machine (over 100 s
under load), and the run another ~30 s. It runs when CTXKEEP_RUN_SERVE=1 is set:
``CTXKEEP_RUN_SERVE=1 uv run pytest -q tests/flows/test_serve.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import corpus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("CTXKEEP_RUN_SERVE") != "1",
        reason="starts a Prefect server (1-3 min); set CTXKEEP_RUN_SERVE=1",
    ),
]

SESSION = "fa1ac8bf-348e-4b9a-a06d-767050fa1e10"
CODEX_SMALL = (
    ".codex/sessions/2025/10/31/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"
)

CLIENT = r"""
import json, sys, time
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment

names = sys.argv[1].split(",")
deadline = time.monotonic() + 240
found = {}
with get_client(sync_client=True) as c:
    while time.monotonic() < deadline and len(found) < len(names):
        for n in names:
            try:
                d = c.read_deployment_by_name(n)
            except Exception:
                continue
            found[n] = {"interval": [s.schedule.interval.total_seconds() for s in d.schedules],
                        "parameters": d.parameters}
        time.sleep(0.25)
fr = run_deployment("ingest/ctxkeep-ingest", timeout=300, poll_interval=0.5)
# the on-demand maintenance flows, run by this process against the same server
from ctxkeep.flows.maintenance import backfill_flow, purge_flow, reindex_flow, retention_flow
home = sys.argv[2]
flows = {
    "reindex": reindex_flow(home)["chunks"],
    "retention": retention_flow(home, dry_run=True)["entries_to_archive"],
    "backfill": backfill_flow(home, dry_run=True)["files"],
    "purge": purge_flow(home, session_id=sys.argv[3], confirm="true")["removed"]["entries"],
}
print(json.dumps({"deployments": found, "state": fr.state.type.value, "flows": flows}))
"""


def test_serve_registers_deployments_and_runs_ingest(tmp_path):
    from ctxkeep.flows.serve import free_port, healthy

    user = tmp_path / "user"
    src = corpus(CODEX_SMALL)
    dst = user / CODEX_SMALL
    dst.parent.mkdir(parents=True)
    dst.write_bytes(src.read_bytes())
    store = tmp_path / "store"
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(HOME=str(user), PREFECT_HOME=str(tmp_path / "prefect"), CTXKEEP_HOME=str(store))
    # serve's runner looks for scheduled runs every second (Prefect's default: 10 s, a
    # wait of ~5 s on average before it takes the ingest run)
    env["PREFECT_RUNNER_POLL_FREQUENCY"] = "1"
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - the server writes it until the test ends
    exe = Path(sys.executable).with_name("ctxkeep")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [str(exe), "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not healthy(api) and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            time.sleep(0.25)
        assert healthy(api), (tmp_path / "serve.log").read_text()
        t_server = time.monotonic() - t0
        names = [
            "ingest/ctxkeep-ingest",
            "retention/ctxkeep-retention",
            "compress/ctxkeep-compress",
            "backup/ctxkeep-backup",
        ]
        r = subprocess.run(
            [sys.executable, "-c", CLIENT, ",".join(names), str(store), SESSION],
            env=dict(env, PREFECT_API_URL=api),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        got = json.loads(r.stdout.strip().splitlines()[-1])
        t_run = time.monotonic() - t0 - t_server
        print(f"\nserver healthy after {t_server:.1f} s; deployments + one ingest run {t_run:.1f} s")
        assert sorted(got["deployments"]) == sorted(names)
        assert got["deployments"]["ingest/ctxkeep-ingest"]["interval"] == [900.0]
        assert got["deployments"]["retention/ctxkeep-retention"]["interval"] == [86400.0]
        assert got["deployments"]["compress/ctxkeep-compress"]["interval"] == [3600.0]
        assert got["deployments"]["backup/ctxkeep-backup"]["interval"] == [86400.0]
        assert got["deployments"]["ingest/ctxkeep-ingest"]["parameters"] == {"home": str(store)}
        assert got["state"] == "COMPLETED"
        assert got["flows"]["reindex"] == 2  # the ingested entries' 2 chunks
        assert got["flows"]["retention"] == 0
        assert got["flows"]["backfill"] == [str(dst)]
        assert got["flows"]["purge"] == 2
        conn = sqlite3.connect(store / "store.db")
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
        assert conn.execute("SELECT flow, status FROM runs ORDER BY run_id").fetchall() == [
            ("ingest", "ok"),
            ("purge", "ok"),
        ]
        conn.close()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()
    # the run's line, printed by its subprocess into serve's output as it ended: a user
    # watching serve sees it work (newuser19 F8: nothing after the start line in 240 s)
    said = (tmp_path / "serve.log").read_text()
    assert re.search(
        r"^ctxkeep serve: ingest \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, [\d.]+ s: ok, "
        r"[1-9][\d,]* new entr(y|ies) from 1 file read$",
        said,
        re.M,
    ), said[-3000:]
    deadline = time.monotonic() + 30
    while healthy(api, timeout=1) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not healthy(api, timeout=1)  # serve stopped the server it started

"""The Prefect ingest flow runs the engine the CLI runs: the same store (table
digests, not only figures), per-part extract + transform tasks retried on a
transient error, the summary as a table artifact; whole process, no Prefect server
configured (Prefect starts its temporary local server), no network: summary figures
and a quiet output."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

from conftest import CORPUS_HOME, KEEP, ROOT, child_env
from ctxkeep.errors import StoreBusy, StoreError
from ctxkeep.pipeline import engine
from ctxkeep.sources.contract import DiscoveryContext
from store_digest import store_digest

NOISE = re.compile(
    r"telemetry|analytics|Traceback|ERROR|Error|WARNING|warning|"
    r"Failed|ConnectError|httpx",
    re.I,
)


def _tree(root) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.slow
def test_prefect_flow_ingests_corpus_quietly(home_copy, tmp_path, corpus_store):
    _, reference = corpus_store  # the same corpus through the plain pipeline
    store = tmp_path / "store"
    env = child_env(HOME=str(home_copy))  # idle at once: home_copy was just written
    before = _tree(home_copy)
    r = subprocess.run(
        # --prefect: this test is of the flow run (without a server, ingest runs in-process)
        [sys.executable, "-m", "ctxkeep", "ingest", "--prefect", "--home", str(store), "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert (s["files"], s["files_read"], s["entries_new"], s["quarantined"], s["lines"]) == (
        reference.files,
        reference.files_read,
        reference.entries_new,
        reference.quarantined,
        reference.lines,
    )
    assert s["per_agent"] == reference.per_agent
    assert s["per_agent"]["claude-code"] == 986 and s["per_agent"]["codex"] == 2229
    assert s["analytics"] == f"analytics: {reference.entries_new} entries synced"
    noisy = [ln for ln in r.stderr.splitlines() if NOISE.search(ln)]
    assert noisy == []
    # the temporary server's database lives beside the store, not in the user's home
    # and nothing in the user's home (session files included) was written
    assert (store / "prefect").is_dir()
    assert _tree(home_copy) == before
    conn_runs = (
        sqlite3.connect(store / "store.db").execute("SELECT flow, status, entries_new FROM runs").fetchall()
    )
    assert conn_runs == [("ingest", "ok", reference.entries_new)]
    # the store is the one the CLI's in-process run makes of the same files
    plain = tmp_path / "plain"
    engine.run_ingest(plain, ctx=DiscoveryContext(home=home_copy, env={}))
    digest = store_digest(store)
    assert digest == store_digest(plain)
    assert digest["entries"][0] == reference.entries_new and digest["chunks"][0] > 0


def test_transient_errors_are_the_retried_ones():
    from ctxkeep.flows.ingest import transient

    assert transient(StoreBusy("held")) is True
    assert transient(sqlite3.OperationalError("database is locked")) is True
    assert transient(sqlite3.OperationalError("no such table: entries")) is False
    assert transient(StoreError("unknown schema version")) is False
    assert transient(ValueError("bad")) is False and transient(None) is False


def test_the_summary_artifact_holds_every_figure():
    from ctxkeep.flows.ingest import summary_table

    s = engine.Summary(
        files=3,
        files_read=2,
        bytes=1200,
        lines=10,
        entries_new=7,
        seconds=0.5,
        per_agent={"codex": 4, "claude-code": 3},
        analytics="analytics: 7 entries synced",
        problems=["no such file: /x"],
    ).as_dict()
    rows = {r["figure"]: r["value"] for r in summary_table(s)}
    assert rows == {
        "files": 3,
        "files_read": 2,
        "files_vanished": 0,
        "bytes": 1200,
        "lines": 10,
        "entries_new": 7,
        "quarantined": 0,
        "status_changed": 0,
        "seconds": 0.5,
        "analytics": "analytics: 7 entries synced",
        "entries_new claude-code": 3,
        "entries_new codex": 4,
        "problem": "no such file: /x",
    }


@pytest.fixture(scope="module")
def prefect_server():
    """Prefect's test harness: a temporary server for this module's flow runs."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def _corpus_env(monkeypatch) -> None:
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    for k in list(os.environ):  # the scratch caches stay (KEEP): HOME is the corpus
        if k.startswith(("CTXKEEP_", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_")) and k not in KEEP:
            monkeypatch.delenv(k)
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    monkeypatch.setenv("HOME", str(CORPUS_HOME))


@pytest.mark.slow
def test_the_flow_stores_what_the_engine_stores_with_a_task_per_part(prefect_server, tmp_path, monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
    )

    from ctxkeep.flows import ingest as flow_mod
    from ctxkeep.pipeline.plan import plan, split_parts
    from ctxkeep.sinks import sqlite as sqlite_store

    _corpus_env(monkeypatch)
    conn = sqlite_store.connect(tmp_path / "fresh")
    try:  # the corpus fits one part per agent
        names = [p.name for p in split_parts(plan(tmp_path / "fresh", conn).todo)]
    finally:
        conn.close()
    plain = engine.run_ingest(tmp_path / "plain")  # discovers as the flow does (HOME)
    # a transient error on the first attempt of the codex part: the task is retried
    monkeypatch.setattr(
        flow_mod, "extract_transform", flow_mod.extract_transform.with_options(retry_delay_seconds=0)
    )
    real = engine.extract_transform_part
    failed = []

    def flaky(home, part, tombs):
        if part.agent == "codex" and not failed:
            failed.append(part.name)
            raise StoreBusy("the store is locked by another writer (test)")
        return real(home, part, tombs)

    monkeypatch.setattr(engine, "extract_transform_part", flaky)
    state = flow_mod.ingest_flow(str(tmp_path / "flow"), return_state=True)
    s = state.result()
    assert failed == ["codex"]
    want = plain.as_dict()
    for k in (
        "files",
        "files_read",
        "files_vanished",
        "bytes",
        "lines",
        "entries_new",
        "quarantined",
        "status_changed",
        "per_agent",
        "analytics",
        "problems",
    ):
        assert s[k] == want[k], k
    assert s["entries_new"] == 3890
    assert store_digest(tmp_path / "flow") == store_digest(tmp_path / "plain")
    run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
        arts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
        )
    by_name = {t.name.rsplit("-", 1)[0]: t for t in tasks}  # Prefect adds a "-<3 hex>" suffix
    assert sorted(by_name) == sorted(f"extract-transform-{n}" for n in names) and len(names) >= 5
    assert len(tasks) == len(names)
    assert all(t.state.is_completed() for t in tasks)
    assert by_name["extract-transform-codex"].run_count == 2
    assert [a.key for a in arts] == ["ingest-summary"] and arts[0].type == "table"
    table = json.loads(arts[0].data) if isinstance(arts[0].data, str) else arts[0].data
    rows = {r["figure"]: r["value"] for r in table}
    assert rows["entries_new"] == 3890 and rows["entries_new codex"] == want["per_agent"]["codex"]


@pytest.mark.slow
def test_the_flow_on_a_dask_task_runner_stores_what_the_engine_stores(prefect_server, tmp_path, monkeypatch):
    """``ingest_on_dask``: prefect-dask's DaskTaskRunner on a LocalCluster of 2 worker
    processes started for the run; the part tasks run there (not in this process) and
    report to the same Prefect API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    from ctxkeep.flows.ingest import ingest_on_dask
    from ctxkeep.pipeline.cluster import DaskRunner

    _corpus_env(monkeypatch)
    plain = engine.run_ingest(tmp_path / "plain")
    here = []  # a part run in this process would land here and fail the run
    monkeypatch.setattr(engine, "extract_transform_part", lambda *a: here.append(a) or 1 / 0)
    s = ingest_on_dask(str(tmp_path / "dask"), DaskRunner(workers=2))
    assert here == []
    assert s["entries_new"] == plain.entries_new == 3890 and s["per_agent"] == plain.per_agent
    assert store_digest(tmp_path / "dask") == store_digest(tmp_path / "plain")
    with get_client(sync_client=True) as client:
        run = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)[0]
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
    assert run.state.is_completed() and run.parameters["parts_ahead"] == 2
    assert len(tasks) >= 5 and all(t.state.is_completed() for t in tasks)
    assert all(t.name.startswith("extract-transform-") for t in tasks)

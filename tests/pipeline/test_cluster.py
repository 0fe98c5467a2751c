"""``ingest --task-runner dask``: the parts' extract + transform on a Dask cluster, one
writer in the ingest process (``pipeline.cluster``). The option's values and errors;
a whole-process ingest of the corpus on a LocalCluster of 2 worker processes stores
exactly what the default run stores (table digests), with one Dask task per part
run on the cluster's workers. The flow run on prefect-dask's DaskTaskRunner is in
tests/flows/test_ingest_flow.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import CORPUS_HOME, ROOT, child_env
from ctxkeep.errors import CtxkeepError, UsageError
from ctxkeep.pipeline import cluster
from ctxkeep.pipeline.cluster import DaskRunner, parse_task_runner
from store_digest import store_digest


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, None),
        ("default", None),
        ("dask", DaskRunner()),
        ("dask=2", DaskRunner(workers=2)),
        ("dask=tcp://10.0.0.5:8786", DaskRunner(address="tcp://10.0.0.5:8786")),
        ("dask=sched.lan:8786", DaskRunner(address="tcp://sched.lan:8786")),
        ("dask=tls://sched:8786", DaskRunner(address="tls://sched:8786")),
    ],
)
def test_task_runner_values(value, want):
    assert parse_task_runner(value) == want


@pytest.mark.parametrize("value", ["spark", "dask=", "dask=0", "dask=sched", "dask=http//x", "ray=2"])
def test_bad_task_runner_values_are_usage_errors(value):
    with pytest.raises(UsageError) as e:
        parse_task_runner(value)
    assert e.value.where == "--task-runner" and "\n" not in str(e.value)


def test_without_the_extra_one_line_says_how_to_add_it(monkeypatch, store_home):
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(CtxkeepError) as e:
        cluster.require_dask()
    assert "pip install 'ctxkeep[dask]'" in str(e.value)
    monkeypatch.setenv("HOME", str(CORPUS_HOME))
    r = CliRunner().invoke(app, ["ingest", "--home", str(store_home), "--task-runner", "dask"])
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [f"error: {e.value}"]
    assert not (store_home / "store.db").exists()  # stopped before anything was written


def test_a_local_cluster_has_one_single_threaded_worker_process_per_core():
    kw = cluster.local_cluster_kwargs(None)
    assert kw["n_workers"] == os.cpu_count() and kw["threads_per_worker"] == 1 and kw["processes"]
    assert cluster.local_cluster_kwargs(3)["n_workers"] == 3
    assert kw["host"] == "127.0.0.1" and kw["dashboard_address"] is None


@pytest.mark.slow
def test_ingest_on_a_local_cluster_stores_what_the_default_run_stores(corpus_store, tmp_path):
    from distributed import Client, LocalCluster, get_task_stream

    from ctxkeep.pipeline.plan import plan, split_parts
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources.contract import DiscoveryContext

    reference, summary = corpus_store  # the default run (engine.run_ingest) of the corpus
    conn = sqlite_store.connect(tmp_path / "fresh")
    try:
        todo = plan(tmp_path / "fresh", conn, ctx=DiscoveryContext(home=CORPUS_HOME, env={})).todo
        parts = [p.name for p in split_parts(todo)]
    finally:
        conn.close()
    env = child_env(HOME=str(CORPUS_HOME))
    store = tmp_path / "dask"
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc,
        Client(lc) as client,
    ):
        workers = set(lc.scheduler_info["workers"])
        with get_task_stream(client) as ts:
            r = subprocess.run(
                [sys.executable, "-m", "ctxkeep", "ingest", "--home", str(store), "--json", "--no-prefect"]
                + ["--task-runner", f"dask={lc.scheduler_address}"],
                env=env,
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=300,
            )
        assert r.returncode == 0, r.stderr[-3000:]
        tasks = [t for t in ts.data if t["key"].startswith("extract-transform-")]
    s = json.loads(r.stdout)
    assert s["entries_new"] == summary.entries_new == 3890
    assert s["per_agent"] == summary.per_agent
    # one Dask task per part, each run once, by the cluster's two worker processes
    assert sorted(t["key"].rsplit("-", 1)[0] for t in tasks) == sorted(
        f"extract-transform-{n}" for n in parts
    )
    assert len(parts) >= 5 and {t["worker"] for t in tasks} == workers and len(workers) == 2
    digest = store_digest(store)
    assert digest == store_digest(reference)
    assert digest["entries"][0] == 3890 and digest["usage"][0] > 0 and digest["chunks"][0] > 0

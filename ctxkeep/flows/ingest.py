"""The ingest flow (Prefect) over the plain engine (``pipeline.engine.run_ingest``, the
run the CLI's ``--no-prefect`` and backfill make): the same lock, plan, writer, DuckDB
sync and run record. What Prefect adds: each part's extract + transform (one agent's
files, ``pipeline.plan.Part``) is a task submitted to the flow's task runner (so a
distributed runner can spread them) and retried on a transient failure; the one
writer stores their groups in plan order; the run summary is published as a table
artifact (key ``ingest-summary``).

Runs with no Prefect server configured (Prefect starts its temporary local server) or
against ``PREFECT_API_URL``. ``ingest_on_dask`` runs it with prefect-dask's
``DaskTaskRunner``: the part tasks on a Dask cluster (``pipeline.cluster``), the
writer in the flow's process.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from ctxkeep.errors import CtxkeepError
from ctxkeep.flows.serve_lines import announced
from ctxkeep.pipeline import cluster, engine
from ctxkeep.pipeline.plan import Part, Plan

#: key of the table artifact each flow run publishes (Prefect: lowercase, digits, dashes)
SUMMARY_ARTIFACT = "ingest-summary"


def transient(exc: BaseException | None) -> bool:
    """True for an error the same task may not meet again: a ``CtxkeepError`` marked
    transient (StoreBusy), or SQLite reporting the database locked or busy."""
    if isinstance(exc, CtxkeepError):
        return exc.transient
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in ("locked", "busy"))


def _retry_transient(task_, task_run, state) -> bool:
    return transient(state.result(raise_on_failure=False))


@task(
    name="extract-transform",
    retries=2,
    retry_delay_seconds=5,
    cache_policy=NO_CACHE,
    persist_result=False,
    retry_condition_fn=_retry_transient,
)
def extract_transform(home: str, part: Part, tombs: dict) -> list:
    """One part's extract + transform (``engine.extract_transform_part``): its groups
    (``pipeline.writer.Group``), ready for the flow's writer. Writes nothing, so a
    retry repeats nothing."""
    return engine.extract_transform_part(Path(home), part, tombs)


def summary_table(summary: dict) -> list[dict]:
    """The rows of the summary artifact: ``{"figure", "value"}`` per figure of
    ``engine.Summary.as_dict()`` (bytes: raw bytes; seconds: wall time), then the new
    entries of each agent, then each problem."""
    rows = [
        {"figure": k, "value": summary[k]}
        for k in (
            "files",
            "files_read",
            "files_vanished",
            "bytes",
            "lines",
            "entries_new",
            "quarantined",
            "status_changed",
            "seconds",
            "analytics",
        )
    ]
    rows += [{"figure": f"entries_new {a}", "value": n} for a, n in sorted(summary["per_agent"].items())]
    rows += [{"figure": "problem", "value": p} for p in summary["problems"]]
    return rows


@flow(name="ingest", log_prints=False, persist_result=False)
@announced("ingest")
def ingest_flow(
    home: str,
    agents: list[str] | None = None,
    paths: list[str] | None = None,
    force: bool = False,
    parts_ahead: int = engine.PARTS_AHEAD,
) -> dict:
    """Ingest every enabled agent's new session bytes into the store at ``home``.

    ``parts_ahead``: part tasks submitted ahead of the one being stored (one per
    worker of a Dask task runner). Returns the run summary
    (``engine.Summary.as_dict()``), also published as the table artifact
    ``ingest-summary``.
    """
    log = get_run_logger()

    def on_plan(p: Plan) -> None:
        log.info("%d files to read (%d unchanged), %.1f MB", len(p.todo), p.unchanged, p.pending_bytes / 1e6)
        if engine.hooks.on_plan:
            engine.hooks.on_plan(p)

    def submit(part: Part, tombs: dict):
        return extract_transform.with_options(name=f"extract-transform-{part.name}").submit(home, part, tombs)

    s = engine.run_ingest(
        Path(home),
        agents=agents,
        paths=[Path(x) for x in paths or []],
        force=force,
        on_plan=on_plan,
        submit=submit,
        parts_ahead=parts_ahead,
    ).as_dict()
    create_table_artifact(
        key=SUMMARY_ARTIFACT, table=summary_table(s), description=f"ctxkeep ingest into {home}"
    )
    log.info("ingest done: %s", s)
    return s


def ingest_on_dask(
    home: str,
    runner: cluster.DaskRunner,
    agents: list[str] | None = None,
    paths: list[str] | None = None,
    force: bool = False,
) -> dict:
    """``ingest_flow`` with prefect-dask's ``DaskTaskRunner`` on the cluster
    ``runner`` names (``pipeline.cluster.cluster``: a LocalCluster started and stopped
    here, or a running scheduler): each part's ``extract-transform`` task runs on a
    Dask worker (which reports its task run to the same Prefect API), as many at a
    time as the cluster has worker threads. Returns the flow's summary. Raises
    CtxkeepError when the dask extra is missing or the scheduler does not answer."""
    cluster.require_dask()
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise CtxkeepError(
            "--task-runner dask in a flow run needs prefect-dask", hint=cluster.INSTALL_HINT
        ) from None

    with cluster.cluster(runner) as (address, threads):
        # prefect-dask's runner is a TaskRunner[PrefectDaskFuture]; with_options is typed
        # for TaskRunner[PrefectFuture] (invariant), though Prefect accepts any runner
        fl = ingest_flow.with_options(task_runner=DaskTaskRunner(address=address))  # type: ignore[arg-type]
        return fl(home, agents=agents, paths=paths, force=force, parts_ahead=max(engine.PARTS_AHEAD, threads))

"""Prefect across machines: one team Prefect server drives every machine's ingest and
export (``ctxkeep serve --work-pool NAME``; docs/team.md "Prefect across machines").

Prefect's own model, nothing home-made: a **work pool** of type ``process`` on the
team server (created by the first machine that needs it), and in it one **work queue
per machine**, named after the machine (``sinks.machine.machine_name``: config
``machine``, else the hostname). Each machine registers its **deployments** in its
queue, named after it, with its store as parameter:

- ``ingest/ingest-<machine>``, ``compress/compress-<machine>``,
  ``retention/retention-<machine>``, ``backup/backup-<machine>`` (``serve.schedules``'
  intervals);
- ``export/export-<machine>`` (with ``--lake DEST``: the store into the team's
  Parquet lake, flows/export.py).

and runs a Prefect **process worker** that polls only its own queue, so a run of
``ingest-laptop`` runs on the laptop, against the laptop's store, whoever triggered
it (a schedule, the UI, ``prefect deployment run``, the API). The worker runs each
flow run as a subprocess (``python -m prefect.engine`` of this interpreter) with the
worker's environment; the flows are imported by module path from the installed
ctxkeep, so no code storage or pull steps are involved.

The same, with Prefect's CLI for the worker (e.g. under a process manager of its own):
``ctxkeep serve --work-pool NAME --deploy-only`` registers the deployments and exits,
then ``prefect worker start --pool NAME --work-queue <machine>`` (``worker_command``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.types.entrypoint import EntrypointType
from prefect.workers.process import ProcessWorker

from ctxkeep.errors import CtxkeepError
from ctxkeep.flows.serve import EXPORT_ENTRYPOINT as EXPORT_ENTRYPOINT
from ctxkeep.flows.serve import Schedule, load_flow
from ctxkeep.flows.serve import export_schedule as export_schedule

#: the work pool type of a team pool: flow runs as subprocesses of the machine's worker
POOL_TYPE = "process"


def deployment_name(flow_name: str, machine: str) -> str:
    """``<flow>-<machine>``: a machine's deployment of a flow on the team server
    (``ingest-laptop``; its full name is ``ingest/ingest-laptop``)."""
    return f"{flow_name}-{machine}"


def worker_command(pool: str, machine: str) -> list[str]:
    """Prefect's CLI for this machine's worker: ``prefect worker start --pool POOL
    --work-queue MACHINE --type process --name ctxkeep-MACHINE`` (with this
    interpreter's ``prefect``)."""
    from ctxkeep.flows.serve import prefect_cli

    return [
        *prefect_cli(),
        "worker",
        "start",
        "--pool",
        pool,
        "--work-queue",
        machine,
        "--type",
        POOL_TYPE,
        "--name",
        f"ctxkeep-{machine}",
    ]


def ensure_pool(pool: str, machine: str) -> None:
    """Create the work pool ``pool`` (type ``process``, Prefect's default job template
    for it) and its work queue ``machine`` on the server of ``PREFECT_API_URL`` when
    they do not exist (several machines may race: the loser reads the winner's).
    Raises CtxkeepError when ``pool`` exists with another type."""

    with get_client(sync_client=True) as client:
        try:
            wp = client.read_work_pool(pool)
        except ObjectNotFound:
            try:
                wp = client.create_work_pool(
                    WorkPoolCreate(
                        name=pool,
                        type=POOL_TYPE,
                        description="ctxkeep: one work queue and one process worker per machine",
                        base_job_template=ProcessWorker.get_default_base_job_template(),
                    )
                )
            except ObjectAlreadyExists:
                wp = client.read_work_pool(pool)
        if wp.type != POOL_TYPE:
            raise CtxkeepError(
                f"work pool {pool!r} is of type {wp.type!r}, not {POOL_TYPE!r}",
                where="--work-pool",
                hint="name another pool; ctxkeep runs its flows as processes on each machine",
            )
        try:
            client.read_work_queue_by_name(machine, work_pool_name=pool)
        except ObjectNotFound:
            try:
                client.create_work_queue(
                    name=machine, work_pool_name=pool, description=f"ctxkeep runs of machine {machine}"
                )
            except ObjectAlreadyExists:
                pass


def register(home: Path, pool: str, machine: str, scheds: list[Schedule]) -> list[str]:
    """Register ``scheds`` as this machine's deployments in ``pool`` (queue
    ``machine``), each named ``deployment_name(flow, machine)``, with ``home`` (and
    the schedule's parameters) as parameters, on the server of ``PREFECT_API_URL``;
    a second registration updates them. Returns their full names
    (``flow/deployment``). Raises CtxkeepError when a flow cannot be imported."""

    names = []
    for s in scheds:
        fl = load_flow(s.entrypoint)
        if fl is None:
            raise CtxkeepError(f"flow {s.entrypoint} not found", hint="reinstall ctxkeep")
        name = deployment_name(fl.name, machine)
        dep = fl.to_deployment(
            name,
            interval=s.interval,
            parameters={"home": str(home), **s.parameters},
            entrypoint_type=EntrypointType.MODULE_PATH,
            work_pool_name=pool,
            work_queue_name=machine,
            description=f"ctxkeep {fl.name} of machine {machine} (store {home})",
            tags=["ctxkeep", f"machine:{machine}"],
        )
        dep.apply()
        names.append(f"{fl.name}/{name}")
    return names


def run_worker(pool: str, machine: str, limit: int = 2) -> None:
    """Run this machine's Prefect process worker (``ProcessWorker``) on ``pool``,
    polling only the queue ``machine``, at most ``limit`` flow runs at a time, until
    interrupted (KeyboardInterrupt: ``serve`` turns SIGTERM into one)."""

    async def _work() -> None:
        worker = ProcessWorker(
            work_pool_name=pool,
            work_queues=[machine],
            name=f"ctxkeep-{machine}",
            limit=limit,
            create_pool_if_not_found=False,
        )
        await worker.start(printer=lambda *a, **k: None)

    asyncio.run(_work())


def work(
    home: Path,
    pool: str,
    scheds: list[Schedule],
    *,
    limit: int = 2,
    deploy_only: bool = False,
    on_ready=None,
) -> list[str]:
    """``serve``'s team mode, against the server of ``PREFECT_API_URL``: the pool and
    this machine's queue (``ensure_pool``), its deployments (``register``), then
    ``on_ready(names)`` and, unless ``deploy_only``, its worker until interrupted.
    Returns the deployments' full names. Raises ConfigError for a machine name that
    cannot name a lake partition, CtxkeepError for a pool of another type."""
    from ctxkeep.sinks.machine import machine_name

    machine = machine_name(home)
    ensure_pool(pool, machine)
    names = register(home, pool, machine, scheds)
    if on_ready:
        on_ready(names)
    if not deploy_only:
        run_worker(pool, machine, limit)
    return names

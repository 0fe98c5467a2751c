"""Dask for big backfills: the parts' extract + transform on a Dask cluster while the
one writer of this process loads SQLite (``ingest --task-runner dask[=ADDRESS]``).

A part (``plan.Part``: one agent's consecutive files, at most 64 MiB of new bytes) is
the unit of work: ``engine.extract_transform_part(home, part, tombs)`` reads its
files, normalizes, deduplicates against the store (a read-only connection of its
own), counts tokens and cuts chunks, and returns its groups (``writer.Group``: Polars
frames and plain lists, picklable). Dask runs those calls on its workers
(``distributed.Client.submit``); ``engine.ingest_files`` takes their results in plan
order, drops what earlier parts stored, and stores them on its one connection. The
store is the one the default run makes (tests/pipeline/test_cluster.py compares table
digests).

Without an address, ``cluster`` starts a ``distributed.LocalCluster`` of worker
*processes* (one thread each: the work holds the GIL) on 127.0.0.1, no dashboard,
and stops it at the end. With ``ADDRESS`` (``tcp://host:8786``, a ``dask scheduler``
started by the user) the workers run wherever that cluster runs: they must see the
session files and the store at the same paths as this process (a shared or
identical file system), and have ctxkeep installed.

``distributed`` comes with the ``dask`` extra (``pip install 'ctxkeep[dask]'``, which
brings prefect-dask for the flow run's ``DaskTaskRunner``); this module imports it
only inside ``cluster`` and ``dask_submit`` (and the engine, with Polars, only there
and in ``run_ingest``: parsing ``--task-runner`` costs nothing).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ctxkeep.errors import CtxkeepError, UsageError

if TYPE_CHECKING:  # the engine imports Polars: not for parsing an option
    from ctxkeep.pipeline.engine import Submit
    from ctxkeep.pipeline.plan import Part
    from ctxkeep.pipeline.summary import Summary

#: how to install what ``--task-runner dask`` needs (the one line printed without it)
INSTALL_HINT = "install the dask extra: pip install 'ctxkeep[dask]' (in a clone: uv sync --extra dask)"
_ADDRESS = re.compile(r"^(tcp|tls|inproc|ucx|ws|wss)://\S+$")


@dataclass(frozen=True)
class DaskRunner:
    """Where the parts run: a scheduler ``address`` (``tcp://host:port``), or, with
    None, a ``LocalCluster`` of ``workers`` processes (None: one per CPU core)."""

    address: str | None = None
    workers: int | None = None

    @property
    def label(self) -> str:
        """``dask`` / ``dask=<address>`` / ``dask=<workers>``, as given on the command line."""
        if self.address:
            return f"dask={self.address}"
        return f"dask={self.workers}" if self.workers else "dask"


def parse_task_runner(value: str | None) -> DaskRunner | None:
    """``--task-runner``'s value: None or ``"default"`` (the engine's own threads,
    or Prefect's thread pool in a flow run) gives None; ``"dask"`` a LocalCluster
    with one worker process per core; ``"dask=N"`` one of N worker processes;
    ``"dask=tcp://host:port"`` (any scheme Dask's comms know: tcp, tls, ucx, ws,
    wss, inproc) that scheduler. ``host:port`` alone means ``tcp://host:port``.
    Raises UsageError for anything else."""
    if value is None or value.strip() in ("", "default"):
        return None
    kind, sep, arg = value.strip().partition("=")
    if kind != "dask" or (sep and not arg):
        raise UsageError(
            f"unknown task runner {value!r}",
            where="--task-runner",
            hint="use default, dask, dask=N (local worker processes) or dask=tcp://HOST:PORT",
        )
    if not sep:
        return DaskRunner()
    if arg.isdigit():
        if int(arg) < 1:
            raise UsageError("dask=N needs at least 1 worker", where="--task-runner", hint="e.g. dask=2")
        return DaskRunner(workers=int(arg))
    if "://" not in arg and re.fullmatch(r"[\w.\-\[\]:]+:\d+", arg):
        arg = f"tcp://{arg}"
    if not _ADDRESS.match(arg):
        raise UsageError(
            f"not a Dask scheduler address: {arg!r}",
            where="--task-runner",
            hint="give it as dask=tcp://HOST:PORT (what `dask scheduler` prints)",
        )
    return DaskRunner(address=arg)


def require_dask() -> None:
    """Raise CtxkeepError (one line: what is missing and ``INSTALL_HINT``) unless
    ``distributed`` can be imported."""
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        raise CtxkeepError(
            f"--task-runner dask needs the dask extra ({e.name or 'distributed'} is not installed)",
            hint=INSTALL_HINT,
        ) from None


def local_cluster_kwargs(workers: int | None) -> dict:
    """``LocalCluster`` keyword arguments for ``workers`` processes (None: one per
    core), one thread each, on loopback, no dashboard, Dask's own logs from ERROR."""
    return {
        "n_workers": workers or os.cpu_count() or 1,
        "threads_per_worker": 1,
        "processes": True,
        "host": "127.0.0.1",
        "dashboard_address": None,
        "silence_logs": logging.ERROR,
    }


@contextmanager
def cluster(runner: DaskRunner, timeout: float = 10.0) -> Iterator[tuple[str, int]]:
    """Yield ``(scheduler address, worker threads)`` of the cluster ``runner``
    names: a LocalCluster started here (and closed on exit, its worker processes with
    it), or the scheduler at ``runner.address`` (left running). Raises CtxkeepError
    when ``distributed`` is missing (``require_dask``) or the scheduler does not
    answer within ``timeout`` seconds."""
    require_dask()
    from distributed import Client, LocalCluster

    if runner.address is None:
        lc = LocalCluster(**local_cluster_kwargs(runner.workers))
        try:
            yield lc.scheduler_address, runner.workers or local_cluster_kwargs(None)["n_workers"]
        finally:
            lc.close()
        return
    try:
        client = Client(runner.address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise CtxkeepError(
            f"no Dask scheduler answers at {runner.address} within {timeout:.0f} s ({type(e).__name__})",
            where="--task-runner",
            hint="start it (`dask scheduler`, then `dask worker ADDRESS` on each machine) or drop the address",
        ) from None
    try:
        threads = sum(client.nthreads().values())
    finally:
        client.close()
    if threads == 0:
        raise CtxkeepError(
            f"the Dask scheduler at {runner.address} has no workers",
            where="--task-runner",
            hint="start one: dask worker " + runner.address,
        )
    yield runner.address, threads


@contextmanager
def dask_submit(home: Path, address: str) -> Iterator[Submit]:
    """An ``engine.Submit`` that runs each part's ``engine.extract_transform_part``
    on the Dask cluster at ``address`` (a ``distributed`` future per part; its
    ``result()`` re-raises what the part raised). The tombstones go to the cluster
    once per run, not once per part."""
    from distributed import Client

    from ctxkeep.pipeline import engine

    client = Client(address, set_as_default=False)
    sent: list = []  # [(tombstones, their future on the cluster)]: a run passes one dict

    try:

        def submit(part: Part, tombs: dict):
            if not sent or sent[0][0] is not tombs:
                sent[:] = [(tombs, client.scatter(tombs, broadcast=True))]
            return client.submit(
                engine.extract_transform_part,
                Path(home),
                part,
                sent[0][1],
                key=f"extract-transform-{part.name}-{os.urandom(4).hex()}",
                pure=False,
            )

        yield submit
    finally:
        client.close()


def run_ingest(home: Path, runner: DaskRunner, **kwargs) -> Summary:
    """``engine.run_ingest(home, **kwargs)`` with every part's extract + transform on
    the cluster ``runner`` names (``cluster``), as many parts in flight as it has
    worker threads (at least ``engine.PARTS_AHEAD`` + 1). Same return and errors as
    ``engine.run_ingest``, and ``cluster``'s."""
    from ctxkeep.pipeline import engine

    with cluster(runner) as (address, threads), dask_submit(home, address) as submit:
        return engine.run_ingest(home, submit=submit, parts_ahead=max(engine.PARTS_AHEAD, threads), **kwargs)

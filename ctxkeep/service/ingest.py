"""Ingest: ``ingest(home, IngestRequest, IngestProgress) -> IngestOutcome`` and
``dry_run(home, IngestRequest) -> IngestOutcome`` (``ctxkeep ingest``, the hooks'
detached worker: ``hooks.worker.ingest_file``).

What is decided here, once for every front end:

- what to read: ``pipeline.plan.plan`` of the request's agents and paths (a path is
  claimed by the agent whose layout it matches, ``sources.files_for_paths``; a file
  changed within the idle window, ``CTXKEEP_IDLE_SECONDS``, keeps its last turn for a
  later run, reported as ``held_back``), planned on a read-only connection when the
  store exists at this version's schema (a run with nothing new writes nothing);
- what runs: nothing new and DuckDB current → no engine (no Polars, no DuckDB); nothing
  new but DuckDB behind or gone, or an intent a killed command left (``sinks.recovery``:
  a compress or a scrub killed after its file was replaced) → the engine catches it up
  (completes it) in-process; new bytes → the
  engine in-process (DuckDB deferred to its readers for a few new bytes, the hook
  path), as a Prefect flow run (``flows.prefect_env.run_as_flow``), or with a Dask task
  runner (``pipeline.cluster``);
- the plan's problems (unreadable paths, a reparse due: ``pipeline.plan.reparse_due``)
  as warnings, and the summary's shape: ``shapes.IngestResult`` documents every key.

The request and outcome are dataclasses, not pydantic models as in the other
questions: ``ingest --path FILE`` is the hook path, whose budget (docs/design.md,
"Latency budget") cannot pay pydantic's import (~0.05-0.19 s and 17 MB RSS measured on
this machine kind, 2026-12-05); ``shapes.IngestResult`` (pydantic) validates the
``--json`` output in tests and generates its documentation.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ctxkeep.errors import CtxkeepError
from ctxkeep.pipeline import prestart
from ctxkeep.service.store import reading

#: a run of at most this many new bytes (the hook path's few lines; the engine's
#: ``DEFER_ANALYTICS_BYTES``) builds the token counter before the engine loads Polars:
#: the counter's build reads ~33 MB of its extension's pages, which it then gives back
#: (``transforms.tokens.release_clean_pages``), so the process's peak is lower when the
#: build comes first (docs/design.md, "Latency budget")
EARLY_COUNTER_BYTES = 1024 * 1024

#: an in-process run of at most this many new bytes (a first ingest of a new user's
#: corpus, the hook path) runs with Python's cyclic garbage collector paused
#: (``_gc_paused``): the engine's imports and the entries' dicts, tuples and lists
#: made ~170 collections (~0.06 CPU s of the corpus's first ingest, one of them a full
#: one over every module loaded) that found ~500 objects, and what a run this small
#: leaves in cycles is bounded by its size; a bigger run collects as usual (its memory
#: has a ceiling: issue 26); ``CTXKEEP_GC_PAUSE_MB`` overrides (MiB; 0: never paused)
GC_PAUSE_BYTES = int(float(os.environ.get("CTXKEEP_GC_PAUSE_MB", "64")) * 1024 * 1024)


@dataclass(frozen=True)
class IngestRequest:
    """What to ingest: ``agents`` (names from ``schema.AGENTS``; empty: every agent),
    ``paths`` (files or folders instead of discovery, made absolute: ``paths.absolute_file``;
    empty: discover), ``prefect``
    (``--prefect/--no-prefect``; None: a flow run when a Prefect server is found),
    ``task_runner`` (``pipeline.cluster.parse_task_runner``'s syntax; None: threads),
    ``catch_up_analytics`` (False: a run with nothing new leaves a DuckDB that is behind
    to its readers, as the hooks' worker wants; True: it syncs it).
    ``check()`` raises UsageError for a bad task runner."""

    agents: tuple[str, ...] = ()
    paths: tuple[Path, ...] = ()
    prefect: bool | None = None
    task_runner: str | None = None
    catch_up_analytics: bool = True

    def __post_init__(self) -> None:
        from ctxkeep.paths import absolute_file

        # a relative --path is taken from the caller's directory, as discovery stores
        # absolute paths: stored as typed it was a second name of the file (newuser24 F1)
        object.__setattr__(self, "paths", tuple(Path(absolute_file(p)) for p in self.paths))

    def check(self):
        """The parsed task runner (None for the engine's own threads). Raises
        UsageError (exit 2) for an unknown runner, CtxkeepError when Dask is missing."""
        from ctxkeep.pipeline import cluster  # no Polars import: the engine loads when used

        runner = cluster.parse_task_runner(self.task_runner)
        if runner:
            cluster.require_dask()
        return runner


@dataclass
class IngestProgress:
    """What a front end shows while an ingest runs (each None: nothing):
    ``on_plan(total_bytes)`` once the plan is known, ``on_bytes(n)`` as raw bytes are
    read, ``on_phase(name)`` when the run's tail begins (``"analytics"``: every byte
    read, the closing DuckDB sync), ``on_wait(where)`` while another run holds the store's lock, and
    ``on_server()`` before a Prefect flow run starts a temporary local server
    (``PREFECT_API_URL`` unset: 15-50 s), ``on_problem(line)`` for each of the plan's
    problems (before the run: a run that fails has said them)."""

    on_plan: Callable[[int], None] | None = None
    on_bytes: Callable[[int], None] | None = None
    on_wait: Callable[[str], None] | None = None
    on_phase: Callable[[str], None] | None = None
    on_server: Callable[[], None] | None = None
    on_problem: Callable[[str], None] | None = None


@dataclass
class IngestOutcome:
    """An ingest's result: ``summary`` (the keys of ``shapes.IngestResult``, without
    ``"schema"``; its ``problems`` are the plan's) and ``held_note`` (one line on what
    the store holds back for a later run, or None) and ``rekey_note``."""

    summary: dict
    held_note: str | None = None
    #: one line when the store holds Claude Code files keyed by uuid alone
    #: (``pipeline.summary.rekey_line``; doctor says more), else None
    rekey_note: str | None = None

    def as_json(self) -> dict:
        """The ``--json`` object: ``"schema": 1`` first, then the summary (``analytics``
        null when the run did nothing to DuckDB, as ``shapes.IngestResult`` says)."""
        d = {"schema": 1, **self.summary}
        if "analytics" in d and not d["analytics"]:
            d["analytics"] = None
        return d


def ingest(home: Path, req: IngestRequest, progress: IngestProgress | None = None) -> IngestOutcome:
    """Ingest what ``req`` selects into the store at ``home`` (created when missing).
    Raises UsageError for a bad request, CtxkeepError (StoreDamaged, StoreBusy, a
    config error…) when the run cannot go on, ``Interrupted`` (a KeyboardInterrupt)
    when Ctrl-C stopped the run, saying how many files the store kept.

    Python's cyclic collector is off while the plan is made: the
    plan's objects (a ``SourceFile``, its path, meta and ``stat`` per file: ~100,000
    at 25,728 files) set off three full collections over every object of the process,
    ~0.12 CPU s of a no-op ingest's ~1 s at 10 GB, that found nothing to free; it is on
    again before the engine runs, or once the plan is freed when nothing is new."""
    paused = [gc.isenabled()]
    if paused[0]:
        gc.disable()
    try:
        return _ingest(home, req, progress or IngestProgress(), paused)
    finally:
        if paused[0]:
            gc.enable()


def _ingest(home: Path, req: IngestRequest, progress: IngestProgress, paused: list[bool]) -> IngestOutcome:
    """``ingest``'s run; ``paused[0]``: the collector was turned off for the plan, and is
    turned on here before the engine runs (``paused[0]`` then False: the engine's own
    pause, ``_gc_paused``, may leave it off at a first ingest's end)."""
    from ctxkeep import config as cfgmod
    from ctxkeep.pipeline.plan import plan
    from ctxkeep.pipeline.summary import Summary
    from ctxkeep.sinks import sqlite as sqlite_store

    home = Path(home)
    runner = req.check()
    agents, paths = list(req.agents) or None, list(req.paths) or None
    cfgmod.ensure_home(home)
    conn = _plan_connection(home)
    try:
        p = plan(home, conn, agents=agents, paths=paths)
        if conn is None and not p.todo:  # a new store with nothing to read: created here
            conn = sqlite_store.connect(home)
            p = plan(home, conn, agents=agents, paths=paths)
        prestart.trace("ingest", "planned")
        # nothing new, but DuckDB is behind (a failed or deferred sync) or gone (deleted): catch up
        behind = req.catch_up_analytics and not p.todo and sqlite_store.analytics_behind(conn, home)
        if not p.todo and not behind:  # an operation a killed process left: the engine completes it
            from ctxkeep.sinks.sqlite.intents import pending

            behind = bool(pending(conn))
        held = None if p.todo or behind else _held_back(home, conn)  # nothing will change it
        # one search of a partial index; a new store keys nothing by uuid
        uuid_keyed = sqlite_store.uuid_keyed_files(conn) if conn is not None else (0, 0)
    finally:
        if conn is not None:
            conn.close()
    if paused[0] and (p.todo or behind):
        paused[0] = False
        gc.enable()  # the engine's run (a big one's memory has a ceiling: issue 26)
    if progress.on_problem is not None:
        for prob in p.problems:
            progress.on_problem(prob)
    if behind:  # catch DuckDB up, no Prefect
        from ctxkeep.pipeline import engine

        summary = engine.run_ingest(home, agents=agents, paths=paths).as_dict()
    elif not p.todo:  # nothing new: neither the engine (Polars) nor DuckDB nor Prefect
        summary = Summary(files=p.unchanged, problems=p.problems).as_dict()
        prestart.ran_small()  # every connection is closed: the process may end without teardown
    else:
        from ctxkeep.flows.prefect_env import run_as_flow

        as_flow = run_as_flow(home, req.prefect)
        if not as_flow and not runner and p.pending_bytes <= prestart.AHEAD_MAX_BYTES and prestart.waiting():
            # a first ingest: the reader started with the command reads its files while
            # the engine (Polars) loads and plans again under the store's lock
            from ctxkeep.sinks import vault

            prestart.send_ahead(p.todo, vault.enabled())
        if not as_flow and not runner and p.pending_bytes <= EARLY_COUNTER_BYTES:
            from ctxkeep.transforms.tokens import release_counter_pages

            release_counter_pages()
            # the hook path: Polars' import would load it (~8-15 ms of CPU) for nothing
            prestart.defer_metadata()
        small = not as_flow and not runner and p.pending_bytes <= GC_PAUSE_BYTES
        from ctxkeep.timeutil import now_iso

        began = now_iso()
        try:
            with _gc_paused(small):
                summary = _run(home, agents, paths, as_flow, runner, progress)
            if not as_flow and not runner and p.pending_bytes <= EARLY_COUNTER_BYTES:
                prestart.ran_small()  # the hook path: its process may end without teardown
        except Interrupted:
            raise
        except KeyboardInterrupt as e:  # Ctrl-C: what the store kept (newuser19 F6)
            raise Interrupted(_files_stored_since(home, began), len(p.todo)) from e
    summary["held_back"] = held if held is not None else _held_back(home)
    from ctxkeep.pipeline.summary import held_back_line

    note = None
    if uuid_keyed[0]:
        from ctxkeep.pipeline.summary import rekey_line

        note = rekey_line(*uuid_keyed)
    return IngestOutcome(summary, held_back_line(summary["held_back"]), note)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped an ingest's run: ``stored`` of the ``todo`` files it had
    to read were read into the store, in whole or in part (each file's watermark is
    committed with its entries: the store holds exactly what those gave), the rest
    waits for the next run. A KeyboardInterrupt, so a caller that knows only that still
    stops."""

    def __init__(self, stored: int, todo: int):
        super().__init__(stored, todo)
        self.stored, self.todo = stored, todo


def _files_stored_since(home: Path, since: str) -> int:
    """``sinks.sqlite.runs.files_stored_since`` of the store at ``home``; 0 when it
    cannot be read (none was made before the signal)."""
    import sqlite3

    from ctxkeep.sinks.sqlite.runs import files_stored_since

    try:
        with reading(home) as conn:
            return files_stored_since(conn, since)
    except (CtxkeepError, sqlite3.Error):
        return 0


@contextmanager
def _gc_paused(pause: bool) -> Iterator[None]:
    """Python's cyclic garbage collector off within the block when ``pause`` (and on
    before it), then on again: what the block left in cycles is collected as later
    allocations trigger collections (no full collection here: it would cost what the
    pause saved, in a process that mostly exits next). Left off when the block's run
    took the reader started with the command (``prestart.taken``, False before it):
    that first ingest's process ends next (``prestart.exit_now``), and the young
    collection its next allocation ran walked every object of the run for nothing
    (~2-3 ms of CPU, none freed, on the corpus's critical path; issue 26)."""
    if not pause or not gc.isenabled():
        yield
        return
    before = prestart.taken()
    gc.disable()
    try:
        yield
    finally:
        if before or not prestart.taken():
            gc.enable()


def _run(home: Path, agents, paths, as_flow: bool, runner, progress: IngestProgress) -> dict:
    """The engine's run of the plan's work: in-process (``runner``: on Dask) or as a
    Prefect flow run; returns the summary dict."""
    from ctxkeep.pipeline import engine

    if progress.on_plan is not None:
        on_plan = progress.on_plan
        engine.hooks.on_plan = lambda p: on_plan(p.pending_bytes or 1)
    engine.hooks.on_bytes = progress.on_bytes
    engine.hooks.on_wait = progress.on_wait
    engine.hooks.on_phase = progress.on_phase
    try:
        if not as_flow and runner:
            from ctxkeep.pipeline import cluster

            return cluster.run_ingest(home, runner, agents=agents, paths=paths).as_dict()
        if not as_flow:
            # a few new lines (the hook path): DuckDB is left to its readers
            # (``pipeline.engine.DEFER_ANALYTICS_BYTES``)
            return engine.run_ingest(home, agents=agents, paths=paths, defer_analytics=None).as_dict()
        from ctxkeep.flows.prefect_env import configure_prefect

        configure_prefect(home)
        if progress.on_server is not None and not os.environ.get("PREFECT_API_URL"):
            progress.on_server()
        str_paths = [str(x) for x in paths or []]
        if runner:
            from ctxkeep.flows.ingest import ingest_on_dask

            return ingest_on_dask(str(home), runner, agents=agents, paths=str_paths)
        from ctxkeep.flows.ingest import ingest_flow

        return ingest_flow(str(home), agents=agents, paths=str_paths)
    finally:  # run_ingest falls back to the hooks: none outlives this call
        engine.hooks.on_plan = engine.hooks.on_bytes = engine.hooks.on_wait = engine.hooks.on_phase = None


def dry_run(home: Path, req: IngestRequest) -> IngestOutcome:
    """What ``ingest`` would read, per agent (files, new bytes; ``pipeline.plan.
    dry_run_report``), plus ``store`` (the store's path, None when there is none yet).
    Opens an existing store read-only and never creates one; reads only file sizes."""
    from ctxkeep.pipeline.plan import dry_run_report, plan
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.files import STORE_DB

    home = Path(home)
    conn = sqlite_store.connect(home, readonly=True) if (home / STORE_DB).exists() else None
    try:
        rep = dry_run_report(plan(home, conn, agents=list(req.agents) or None, paths=list(req.paths) or None))
    finally:
        if conn is not None:
            conn.close()
    rep["store"] = str(home / STORE_DB) if (home / STORE_DB).exists() else None
    return IngestOutcome(rep)


def _plan_connection(home: Path):
    """The connection ``ingest`` plans with: read-only when the store exists at this
    version's schema (an ingest with nothing new then writes nothing: a writable open
    commits its schema check, a WAL write, a checkpoint and three fsyncs, ~25 ms),
    else writable (it migrates the store, or reports it damaged). None when there is no
    store yet (``plan`` reads every file from byte 0): the engine's open creates it, once.
    A plan connection that created it committed the schema, then its close checkpointed
    the WAL and deleted it, and the engine's open made it again: 8 of a first ingest's
    10 fsyncs and ~5 ms of CPU, before the early reader got its files (issue 26). Raises
    StoreDamaged when ``store.db`` is missing from a home that held data, as the writable
    open does (``store_safety.check_file``)."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.sinks.sqlite import store_safety

    if not (home / STORE_DB).exists():
        store_safety.check_file(home)
        return None
    try:
        conn = sqlite_store.connect(home, readonly=True)
    except CtxkeepError:  # the writable open says what is wrong, or repairs it
        conn = None
    if conn is not None:
        if sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION:
            return conn
        conn.close()
    return sqlite_store.connect(home)


def _held_back(home: Path, conn=None) -> list[dict]:
    """``pipeline.summary.held_back`` of the store at ``home`` (what a later ingest
    reads), through ``conn`` when given; none when there is no store (a run that
    created none: the plan saw no store, ``_plan_connection``)."""
    from ctxkeep.pipeline.summary import held_back
    from ctxkeep.sinks.files import STORE_DB

    if conn is not None:
        return held_back(conn)
    if not (home / STORE_DB).exists():
        return []
    with reading(home) as conn:
        return held_back(conn)

"""The ingest flow (Prefect): discover → read new bytes in bounded batches → transform →
load SQLite → sync DuckDB. The work is done by ``flows.pipeline``; this module adds the
orchestration: a task per agent (retried on a transient store lock), logging, and the
run record.

Runs with no Prefect server configured (Prefect starts its temporary local server) or
against ``PREFECT_API_URL``.
"""
from __future__ import annotations

from pathlib import Path  # noqa: E402

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from ctxkeep.errors import StoreBusy  # noqa: E402
from ctxkeep.sinks import sqlite as sqlite_store  # noqa: E402
from ctxkeep.sinks.files import ANALYTICS_DB  # noqa: E402
from ctxkeep.sinks.lock import hold  # noqa: E402
from ctxkeep.pipeline import engine as pipeline  # noqa: E402


@task(name="ingest-agent", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE,
      persist_result=False,
      retry_condition_fn=lambda t, r, s: isinstance(s.result(raise_on_failure=False), StoreBusy))
def ingest_agent_files(home: str, agent: str, todo: list, tombs: dict) -> dict:
    """Ingest one agent's changed files; returns summed figures."""
    conn = sqlite_store.connect(Path(home))
    try:
        return pipeline.ingest_files(conn, todo, tombs, pipeline.hooks.on_bytes)
    finally:
        conn.close()


def _analytics_behind(home: Path) -> bool:
    conn = sqlite_store.connect(home, readonly=True)
    try:
        return sqlite_store.analytics_behind(conn)
    finally:
        conn.close()


@task(name="sync-analytics", cache_policy=NO_CACHE, persist_result=False)
def sync_analytics(home: str) -> str:
    conn = sqlite_store.connect(Path(home))
    try:
        return pipeline.sync_analytics(conn, Path(home))
    finally:
        conn.close()


@flow(name="ingest", log_prints=False, persist_result=False)
def ingest_flow(home: str, agents: list[str] | None = None, paths: list[str] | None = None,
                force: bool = False) -> dict:
    """Ingest every enabled agent's new session bytes into the store at ``home``.

    Returns the run summary (``pipeline.Summary.as_dict()``).
    """
    import time

    log = get_run_logger()
    t0 = time.perf_counter()
    h = Path(home)
    with hold(h, what="ingest", on_wait=pipeline.hooks.on_wait):
        conn = sqlite_store.connect(h)
        try:
            p = pipeline.plan(h, conn, agents=agents, paths=[Path(x) for x in paths or []], force=force)
            tombs = sqlite_store.tombstoned(conn)
        finally:
            conn.close()
        if pipeline.hooks.on_plan:
            pipeline.hooks.on_plan(p)
        log.info("%d files to read (%d unchanged), %.1f MB", len(p.todo), p.unchanged,
                 p.pending_bytes / 1e6)
        s = pipeline.Summary(files=len(p.todo) + p.unchanged, problems=list(p.problems))
        with sqlite_store.recorded_run(h, "ingest", t0=t0) as run:
            run.summary = s.as_dict
            by_agent: dict[str, list] = {}
            for f, wm in p.todo:
                by_agent.setdefault(f.agent, []).append((f, wm))
            for agent, todo in by_agent.items():
                r = ingest_agent_files.with_options(name=f"ingest-{agent}")(home, agent, todo, tombs)
                s.files_read += r["files_read"]
                s.files_vanished += r["vanished"]
                s.bytes += r["bytes"]
                s.lines += r["lines"]
                s.entries_new += r["entries_new"]
                s.quarantined += r["quarantined"]
                s.status_changed += r["status_changed"]
                s.per_agent[agent] = r["entries_new"]
            if (s.entries_new or s.status_changed or not (h / ANALYTICS_DB).exists()
                    or _analytics_behind(h)):
                s.analytics = sync_analytics(home)
        s.seconds = run.seconds
    log.info("ingest done: %s", s.as_dict())
    return s.as_dict()

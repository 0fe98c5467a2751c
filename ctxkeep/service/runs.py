"""The store's run records (ingest, compress, purge, retention, backfill: by hand or
on ``serve``'s schedules): ``recent_runs(RunsRequest) -> RunsResult``, the newest
first (``sinks.sqlite.runs.recent_runs``). Read-only; raises StoreError when the home
holds no readable store."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ctxkeep.service.model import Item, Request, Result
from ctxkeep.service.store import reading


class RunsRequest(Request):
    """``home``: the store; ``limit``: how many runs, newest first."""

    home: Path
    limit: int = Field(20, ge=1, le=1000)


class Run(Item):
    """One run: its flow, when (ISO-8601 UTC), how it ended (``running``, ``ok``,
    ``failed``, ``interrupted``), wall seconds and what it did (None: not recorded)."""

    run_id: int
    flow: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    status: str | None = None
    seconds: float | None = None
    files: int | None = None
    bytes: int | None = None
    entries_new: int | None = None
    quarantined: int | None = None


class RunsResult(Result):
    runs: list[Run] = Field(description="the newest first")


def recent_runs(req: RunsRequest) -> RunsResult:
    """The last ``req.limit`` runs of the store at ``req.home``."""
    from ctxkeep.sinks.sqlite.runs import recent_runs as read

    with reading(req.home) as conn:
        return RunsResult(runs=[Run(**r) for r in read(conn, req.limit)])

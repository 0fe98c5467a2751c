"""The coverage ledger: ``coverage(home, CoverageRequest) -> CoverageResult``
(``ctxkeep sources --coverage``). Per agent, agent version and parser version, the
records read, parsed, quarantined and the record types not understood (a count and a
redacted sample line each), with the drift the ledger shows
(``transforms.drift.ledger_alerts``: the warnings ``doctor`` gives). The rows:
``sinks.sqlite.coverage``. Read-only; never imports Prefect, Polars or DuckDB."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ctxkeep.service.model import AgentNames, Item, Request, Result
from ctxkeep.service.store import reading


class CoverageRequest(Request):
    """Which agents (none: all)."""

    agent: AgentNames | None = Field(None, description="only these agents")


class UnknownType(Item):
    """A record type the parser did not understand."""

    count: int = Field(description="records of the type")
    sample: str = Field(description="the first one met, ≤ 600 characters, secrets redacted")


class CoverageRow(Item):
    """One agent version read by one parser version."""

    agent: str
    agent_version: str | None = Field(description="the version the records name (null: none)")
    parser_version: int | None = Field(description="the ctxkeep parser's version that read them")
    files: int = Field(
        description="session files whose newest records are of the version (a file holding several versions "
        "is counted once, at its newest)"
    )
    records: int = Field(description="records (lines, rows) seen")
    parsed: int = Field(description="records the parser understood")
    entries: int = Field(description="entries made of them")
    quarantined: int = Field(description="records set aside in the quarantine")
    parse_rate: float | None = Field(description="parsed / records, a fraction (None: no records)")
    unknown: dict[str, UnknownType] = Field(description="record type → count and sample")
    updated_at: str | None = Field(description="the last read, ISO-8601 UTC")


class CoverageAlert(Item):
    """Format drift the ledger shows."""

    agent: str
    agent_version: str | None
    kind: str = Field(description="new_unknown_types or parse_rate_dropped")
    message: str
    parse_rate: float | None
    previous_rate: float | None = Field(description="the previous version's rate (parse_rate_dropped)")
    unknown: list[str] = Field(description="the types not understood")


class CoverageResult(Result):
    """The ledger's rows (by agent, then version in numeric order) and its alerts."""

    store: bool = Field(description="False when no store exists yet (then both lists are empty)")
    rows: list[CoverageRow]
    alerts: list[CoverageAlert]


def coverage(home: Path, req: CoverageRequest) -> CoverageResult:
    """The coverage ledger of the store at ``home`` (read-only). Raises StoreError
    for a store that cannot be opened."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.transforms.drift import ledger_alerts

    if not (Path(home) / STORE_DB).exists():
        return CoverageResult(store=False, rows=[], alerts=[])
    with reading(home) as conn:
        rows = sqlite_store.coverage_ledger(conn, req.agent or None)
    return CoverageResult(
        store=True,
        # the ledger keys a version the records do not name as "": null here
        rows=[CoverageRow(**{**r, "agent_version": r["agent_version"] or None}) for r in rows],
        alerts=[
            CoverageAlert(**{**a, "agent_version": a["agent_version"] or None}) for a in ledger_alerts(rows)
        ],
    )

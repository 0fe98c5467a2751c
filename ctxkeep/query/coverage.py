"""The coverage ledger as a report (``ctxkeep sources --coverage``): per agent, agent
version and parser version, the records read, parsed, quarantined, the record types
not understood (count and a redacted sample line each), and the drift the ledger
shows (``transforms.drift.ledger_alerts``: the same warnings as ``doctor``).

Request and result are pydantic models; front ends only render the result.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class CoverageRequest(BaseModel):
    """``home``: the store's home; ``agents``: only these agents (empty: all)."""

    home: Path
    agents: list[str] = Field(default_factory=list)


class UnknownType(BaseModel):
    """A record type the parser did not understand: how many records had it, and the
    first one met (≤ 600 characters, secrets redacted)."""

    count: int
    sample: str


class CoverageRow(BaseModel):
    """One agent version read by one parser version: ``files`` holding its records,
    ``records`` seen, ``parsed`` (understood), ``entries`` made, ``quarantined``,
    ``parse_rate`` (parsed / records, a fraction; None for no records), ``unknown``
    (type → ``UnknownType``), ``updated_at`` (ISO-8601 UTC of the last read).
    ``agent_version`` is ``""`` when the records name none."""

    agent: str
    agent_version: str
    parser_version: int | None
    files: int
    records: int
    parsed: int
    entries: int
    quarantined: int
    parse_rate: float | None
    unknown: dict[str, UnknownType]
    updated_at: str | None


class CoverageAlert(BaseModel):
    """Drift the ledger shows (``transforms.drift``): ``kind`` is
    ``new_unknown_types`` or ``parse_rate_dropped``."""

    agent: str
    agent_version: str
    kind: str
    message: str
    parse_rate: float | None
    previous_rate: float | None
    unknown: list[str]


class CoverageResult(BaseModel):
    """The ledger's rows (by agent, then version in numeric order) and its alerts;
    ``store`` False when no store exists yet (then both are empty)."""

    schema_: int = Field(1, alias="schema")
    store: bool
    rows: list[CoverageRow]
    alerts: list[CoverageAlert]

    model_config = {"populate_by_name": True}


def coverage(req: CoverageRequest) -> CoverageResult:
    """Read the ledger of the store at ``req.home`` (read-only). Raises StoreError for
    a store that cannot be opened."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.transforms.drift import ledger_alerts

    if not (Path(req.home) / STORE_DB).exists():
        return CoverageResult(store=False, rows=[], alerts=[])
    conn = sqlite_store.connect(Path(req.home), readonly=True)
    try:
        rows = sqlite_store.coverage_ledger(conn, req.agents or None)
    finally:
        conn.close()
    return CoverageResult(
        store=True,
        rows=[CoverageRow(**r) for r in rows],
        alerts=[CoverageAlert(**a) for a in ledger_alerts(rows)],
    )

"""Usage and cost reports (``ctxkeep report daily | weekly | monthly | session |
projects | models | blocks | tools``) and Claude Code's status line: one request and
result model, ``report(home, ReportRequest) -> ReportResult`` over ``query.reports``
(DuckDB; a Parquet lake through ``query.lake``), rows as docs/analytics.md "Reports"
gives them. Days are local days of ``timezone``; tokens are counts, costs US dollars.

Raises UsageError (a bad value: ``where`` the field; an unknown time zone; a token
limit that is no number) and StoreError (no analytics store, a damaged one, a lake
without usage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ctxkeep.errors import UsageError
from ctxkeep.service.model import Names, ProjectDir, Request, Shape
from ctxkeep.service.report_core import REPORTS  # noqa: F401 - the reports' names, here too


class ReportRequest(Request):
    """One report's selection. ``since``/``until``: local days, inclusive (a date, a
    datetime or an age: the day it falls on); ``project``: this directory or below."""

    report: Literal["daily", "weekly", "monthly", "session", "projects", "models", "blocks", "tools"]
    since: str | None = Field(None, description="first local day, inclusive")
    until: str | None = Field(None, description="last local day, inclusive")
    timezone: str | None = Field(None, description="IANA zone of the days (default: the local zone)")
    agents: Names = None
    project: ProjectDir = None
    mode: str = Field("auto", description="cost: auto (logged, else calculated), calculate, display")
    breakdown: bool = Field(False, description="one row per model")
    token_limit: str | None = Field(None, description="blocks: tokens per block, a number or max")
    lake: str | None = Field(None, description="report over this Parquet lake instead of the store")
    by: str | None = Field(None, description="with lake: machine (each machine's rows apart)")

    @model_validator(mode="after")
    def _fits(self) -> ReportRequest:
        from ctxkeep.query.reports import MODES

        if self.mode not in MODES:
            raise UsageError(
                f"unknown cost mode {self.mode!r}", where="mode", hint="give auto, calculate or display"
            )
        from ctxkeep.service.report_core import check_by

        check_by(self.by, self.lake)
        return self


class ReportResult(Shape):
    """A usage report (`ctxkeep report NAME --json`; docs/analytics.md "Reports" gives
    every row field)."""

    report: str = Field(description="daily, weekly, monthly, session, models, projects, blocks or tools")
    timezone: str = Field(description="IANA zone of the days")
    mode: str | None = Field(None, description="cost mode")
    since: str | None = Field(None, description="first day (null: none)")
    until: str | None = Field(None, description="last day (null: none)")
    agents: list[str] | None = Field(None, description="the --agent values")
    project: str | None = Field(None, description="the --project value")
    rows: list[dict[str, Any]] = Field(
        description="one per period × agent (× model with --breakdown), block, or agent × tool"
    )
    totals: dict[str, Any] | None = Field(None, description="sums of the token and cost columns")
    notes: list[str] = Field(default_factory=list, description="unpriced or assumed models, a stale store, …")
    warnings: list[str] = Field(
        default_factory=list,
        description="what is said of the run itself (a store held by a writer: its last synced state is "
        "shown), also in notes; `--json` prints only these on stderr (its notes are in the JSON)",
    )


def report(home: Path, req: ReportRequest) -> ReportResult:
    """The report ``req`` asks for, over the store at ``home`` (brought current with
    SQLite first) or ``req.lake`` (``report_core.report_json``, which ``ctxkeep report``
    asks without pydantic)."""
    from ctxkeep.service.report_core import ReportArgs, report_json

    args = ReportArgs(**{k: getattr(req, k) for k in ReportArgs.__dataclass_fields__})
    return ReportResult(**report_json(home, args))


def short_ids(home: Path, ids: list[str]) -> dict[str, str]:
    """``session id → its shortest unique prefix`` in the store (as hits show ids)."""
    from ctxkeep.service.report_core import short_ids as ask

    return ask(home, ids)


def statusline(home: Path, stream, timezone: str | None = None) -> str:
    """Claude Code's status line for ``home`` from the JSON it sends on ``stream``
    (``query.statusline.line``: never raises, a problem becomes the line)."""
    from ctxkeep.query import statusline as sl

    return sl.line(home, stream, timezone)

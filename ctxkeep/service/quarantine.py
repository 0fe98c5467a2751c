"""Quarantined lines: ``quarantine(home, QuarantineRequest) -> QuarantineList`` (the
list, ``ctxkeep quarantine [list]``) and ``quarantined_line(home, LineRequest) ->
QuarantineShow`` (one line as stored, redacted: ``quarantine show``). The SQL:
``query.quarantine``."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Literal

from pydantic import Field

from ctxkeep.service.model import AgentNames, Request, Row, Shape
from ctxkeep.service.store import reading

#: lines listed when no limit is given
DEFAULT_QUARANTINE_LIMIT = 100


class QuarantineRequest(Request):
    """Which lines, newest first."""

    agent: AgentNames | None = Field(None, description="only these agents")
    action: Literal["skipped", "repaired"] | None = Field(
        None, description="skipped (nothing read) or repaired (read leniently)"
    )
    limit: int = Field(DEFAULT_QUARANTINE_LIMIT, ge=1, description="at most this many lines")


class LineRequest(Request):
    """One line by its id."""

    id: int = Field(ge=1, description="a quarantined line's id (from the list; 1 and up)")


class QuarantineLine(Row):
    id: int = Field(description="the line's id")
    agent: str | None = Field(description="agent name")
    path: str | None = Field(description="the session file")
    offset: int | None = Field(description="byte offset in it")
    length: int | None = Field(description="bytes of the raw line")
    reason: str = Field(description="why it was quarantined")
    action: str = Field(description="skipped or repaired")
    first_seen: str | None = Field(description="ISO-8601 UTC")
    raw_sha256: str | None = Field(
        description="SHA-256 of the raw line; null when unknown (a line that held a secret, rebuilt from "
        "the vault's redacted bytes after the store was lost)"
    )
    stored_bytes: int | None = Field(None, description="bytes of the redacted copy")
    preview: str | None = Field(None, description="the line's start, redacted")


class QuarantineList(Shape):
    """Quarantined lines (`ctxkeep quarantine [list] --json`)."""

    total: int = Field(description="quarantined lines matching")
    lines: list[QuarantineLine] = Field(description="the lines, newest first")


class QuarantineShow(QuarantineLine, Shape):
    """One quarantined line in full (`ctxkeep quarantine show --json`)."""

    raw_text: str | None = Field(None, description="the redacted copy as UTF-8")
    raw_base64: str | None = Field(None, description="the redacted copy, exact")


def quarantine(home: Path, req: QuarantineRequest) -> QuarantineList:
    """The quarantined lines of ``req``, newest first. Raises StoreError."""
    from ctxkeep.query.quarantine import list_quarantine

    with reading(home) as conn:
        rows, total = list_quarantine(conn, agents=req.agent, action=req.action, limit=req.limit)
    return QuarantineList(total=total, lines=[r.as_dict() for r in rows])


def quarantined_line(home: Path, req: LineRequest) -> tuple[QuarantineShow, bytes]:
    """One line and its bytes as stored (redacted). Raises NotFound, StoreError."""
    from ctxkeep.query.quarantine import get_quarantined

    with reading(home) as conn:
        line, raw = get_quarantined(conn, req.id)
    d = line.as_dict()
    d.pop("preview")
    shown = QuarantineShow(
        **d, raw_text=raw.decode("utf-8", "replace"), raw_base64=base64.b64encode(raw).decode("ascii")
    )
    return shown, raw

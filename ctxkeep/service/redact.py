"""Redaction on request: ``redact_text(home, RedactTextRequest) -> RedactTextResult``
(a text with its secrets redacted by the store's rules, counted per kind; ``ctxkeep
redact`` on standard input) and ``rescan(home, RescanRequest) -> RescanResult`` (the
stored texts, quarantined lines, text media and Parquet archive re-redacted with
today's rules: ``redact --rescan``). The rules: ``transforms.redact``; the rescan:
``maintenance.redact_rescan``. Values are never returned, only counted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from ctxkeep.service.model import Request, Shape


class RedactTextRequest(Request):
    text: str = Field(description="the text to redact (any characters, NUL included)")

    nul_allowed = True


class RedactTextResult(Shape):
    """Standard input, redacted (`ctxkeep redact --json`)."""

    text: str = Field(description="standard input, redacted")
    kinds: dict[str, int] = Field(description="kind → values redacted (counts, never the values)")


def redact_text(home: Path, req: RedactTextRequest) -> RedactTextResult:
    """``req.text`` with its secrets redacted (``transforms.redact.redact_counts``)."""
    from ctxkeep.transforms.redact import redact_counts

    new, counts = redact_counts(req.text)
    return RedactTextResult(text=new, kinds=dict(sorted(counts.items())))


class RescanRequest(Request):
    dry_run: bool = Field(False, description="count what the rescan would change; write nothing")


class RescanResult(Shape):
    """What a rescan changed, or would (`ctxkeep redact --rescan --json`)."""

    dry_run: bool = Field(description="true: nothing was written")
    kinds: dict[str, int] = Field(description="kind → values redacted (counts, never the values)")
    areas: dict[str, Any] = Field(
        description="area (contents, quarantine, media, archive) → changed rows and kinds"
    )
    merged: int | None = Field(None, description="texts that became identical and were merged")
    chunks: dict[str, Any] | None = Field(None, description="FTS chunks deleted and added")
    analytics: str | None = Field(None, description="what the DuckDB rebuild did")
    seconds: float | None = Field(None, description="wall time")


def rescan(
    home: Path, req: RescanRequest, *, progress: Callable[[int, int], None] | None = None
) -> RescanResult:
    """Re-redact the store at ``home`` (``progress(done, total)`` texts as it goes).
    Raises StoreError, StoreBusy."""
    from ctxkeep.maintenance.redact_rescan import run_rescan

    kw: dict[str, Any] = {} if progress is None else {"progress": progress}
    return RescanResult(**run_rescan(Path(home), dry_run=req.dry_run, **kw))

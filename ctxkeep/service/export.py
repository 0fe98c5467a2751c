"""Export the store to a team's Parquet lake (``ctxkeep export parquet DEST``):
``export_parquet(home, ExportParquetRequest) -> ExportParquetResult`` over
``maintenance.export`` (layout in ``sinks.lake``, docs/team.md). Raises UsageError (an
unknown table), StoreError (no store), StoreBusy, and what the lake's file system
raises (``sinks.lake``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ctxkeep.service.model import Request, Shape


class ExportParquetRequest(Request):
    """``dest``: a directory or an fsspec URL (s3://, gs://, abfs://); ``tables``: a
    subset of usage, sessions, entries (comma-separated; default all, in that order)."""

    dest: str = Field(description="the lake: a directory or an fsspec URL")
    tables: tuple[str, ...] = Field(
        ("usage", "sessions", "entries"), description="a subset of usage,sessions,entries"
    )
    with_text: bool = Field(
        False, description="also export texts (entries, session titles; redacted as stored)"
    )
    dry_run: bool = Field(False, description="only say what would be written or removed")

    @field_validator("tables", mode="before")
    @classmethod
    def _tables(cls, v: Any) -> tuple[str, ...]:
        from ctxkeep.maintenance.export import parse_tables

        return parse_tables(v if isinstance(v, str) or v is None else ",".join(v))


class ExportParquetResult(Shape):
    """The lake written (`ctxkeep export parquet --json`; docs/team.md "The lake")."""

    dest: str = Field(description="the lake (a directory or fsspec URL)")
    machine: str | None = Field(
        None, description="this store's machine name (the `machine=` partition value)"
    )
    machine_id: str | None = Field(None, description="this store's stable machine id (uuid)")
    with_text: bool | None = Field(None, description="texts exported too (--with-text)")
    dry_run: bool | None = Field(None, description="nothing was written (--dry-run)")
    seconds: float | None = Field(None, description="wall time")
    store_bytes: int | None = Field(None, description="bytes of store.db + analytics.duckdb")
    tables: dict[str, Any] | None = Field(
        None,
        description="table → partitions, written [{agent, month, rows}], removed, rows_written, files_written, "
        "bytes_written",
    )


def export_parquet(
    home: Path,
    req: ExportParquetRequest,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> ExportParquetResult:
    """Write this machine's changed partitions of ``req.dest`` (``progress(table, done,
    total)`` per partition; ``on_wait(where)`` while another run holds the store)."""
    from ctxkeep.maintenance import export as engine

    rep = engine.export_parquet(
        Path(home), req.dest, tables=req.tables, with_text=req.with_text, dry_run=req.dry_run,
        progress=progress, on_wait=on_wait,
    )  # fmt: skip
    return ExportParquetResult(**rep)


def record_site(home: Path, dest: Path, fmt: str, pages: int) -> bool:
    """Record an HTML/Markdown export of the store at ``home`` into ``dest`` as a run
    (flow ``maintenance.exports_held.SITE_FLOW``, detail ``{"dest": absolute path,
    "format", "files": pages written}``), so a later purge names the pages it leaves
    there (newuser18 F15). Returns False when the store could not record it (read-only,
    busy past its timeout): the pages are written all the same."""
    import sqlite3

    from ctxkeep.errors import CtxkeepError
    from ctxkeep.maintenance.exports_held import SITE_FLOW
    from ctxkeep.sinks import sqlite as sqlite_store

    try:
        with sqlite_store.recorded_run(Path(home), SITE_FLOW) as run:
            run.summary = {"dest": str(Path(dest).absolute()), "format": fmt, "files": pages}
    except (sqlite3.Error, CtxkeepError, OSError):
        return False
    return True

"""The store's health and its backups: ``doctor(home, DoctorRequest) ->
DoctorResult`` (check, and with ``repair`` rebuild what is damaged and check again),
``backup(home, BackupRequest) -> BackupResult``, ``restore(home, RestoreRequest) ->
RestoreResult``. The checks and repairs: ``maintenance.doctor``; the copies:
``maintenance.backup``. None starts Prefect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ctxkeep.service.model import Item, Request, Shape


class DoctorRequest(Request):
    """What to check, and whether to repair."""

    repair: bool = Field(False, description="rebuild what is damaged (damaged files are moved aside)")
    full: bool = Field(False, description="PRAGMA integrity_check instead of quick_check")


class Finding(Item):
    check: str = Field(description="the check's name")
    file: str = Field(description="the file it concerns")
    status: str = Field(description="ok, damaged, warning or skipped")
    detail: str = Field(description="one line")


class DoctorResult(Shape):
    """The store's health (exit 1 when `damaged` is not empty)."""

    home: str = Field(description="the store")
    findings: list[Finding] = Field(description="per check")
    damaged: list[str] = Field(description="the damaged files (exit 1 when not empty)")
    repair: dict[str, Any] | None = Field(None, description="(--repair) actions and not_recovered")
    after: list[Finding] | None = Field(None, description="(--repair) the findings after the repair")


def doctor(home: Path, req: DoctorRequest) -> DoctorResult:
    """Check the store at ``home``; with ``req.repair`` and damage found, repair and
    check again (``damaged`` then lists what is still damaged). Raises CtxkeepError
    ``no store yet`` when ``home`` holds no ``store.db`` and nothing showing that it held
    one (a home that does not exist, or one never ingested into: nothing was checked, so the store is not called sound;
    the command exits 1), StoreBusy when a repair cannot take the store lock."""
    from ctxkeep.errors import CtxkeepError
    from ctxkeep.maintenance import doctor as doc
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.sinks.sqlite.store_safety import held_data

    if not (Path(home) / STORE_DB).exists() and not held_data(Path(home)):
        raise CtxkeepError(
            "no store yet", where=str(Path(home) / STORE_DB), hint="run `ctxkeep ingest` first"
        )
    findings = doc.check(Path(home), full=req.full)
    out: dict[str, Any] = {
        "home": str(home),
        "findings": doc.as_dicts(findings),
        "damaged": doc.damaged_files(findings),
    }
    if req.repair and out["damaged"]:
        out["repair"] = doc.repair(Path(home), findings)
        after = doc.check(Path(home), full=req.full)
        out["after"] = doc.as_dicts(after)
        out["damaged"] = doc.damaged_files(after)
    return DoctorResult(**out)


class BackupRequest(Request):
    keep: int | None = Field(None, ge=1, description="copies to keep (config [backup] keep, 7)")


class BackupResult(Shape):
    """The backup written."""

    path: str = Field(description="the backup written")
    bytes: int = Field(description="its bytes")
    seconds: float | None = Field(None, description="wall time")
    removed: list[str] | None = Field(None, description="older backups removed")


def backup(home: Path, req: BackupRequest) -> BackupResult:
    """A consistent copy of the store in ``<home>/backups``. Raises StoreError."""
    from ctxkeep.maintenance.backup import run_backup

    return BackupResult(**run_backup(Path(home), keep=req.keep))


class RestoreRequest(Request):
    file: Path = Field(description="a store backup (<home>/backups/store-<UTC>.db)")


class RestoreResult(Shape):
    """The backup installed."""

    restored: str = Field(description="the backup installed")
    moved_aside: list[str] | None = Field(None, description="the store files moved aside")
    analytics: str | None = Field(None, description="what the DuckDB rebuild did")
    vault: list[str] | None = Field(
        None, description="what the rebuild from the vault did (manifest replayed, files derived)"
    )


def restore(home: Path, req: RestoreRequest) -> RestoreResult:
    """Install ``req.file`` as the store (the current one moved aside), derive every
    file the vault holds from it again, rebuild DuckDB. Raises NotFound, StoreError,
    StoreBusy, VaultDamaged."""
    from ctxkeep.maintenance.backup import restore as run_restore

    return RestoreResult(**run_restore(Path(home), req.file))

"""Compression of oversized session files: ``compress(home,
CompressRequest) -> CompressResult`` (a Prefect flow run when a Prefect server is there
to record it or ``prefect`` asks, in-process otherwise: decided here), and
``compress_restore(home, RestoreFileRequest) -> CompressRestore``. What to cut and the
safe rewrite: ``maintenance.compress``. The health report (``compress --check``) is
``service.compress_check`` (without pydantic); ``CompressCheck`` here documents its
``--json`` keys. The check, a dry run and a restore never import Prefect."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from ctxkeep.service.model import Request, Shape, UserPath

PROBLEMS = "one line per problem (warnings; also printed on stderr without --json)"


class CompressRequest(Request):
    files: list[UserPath] | None = Field(
        None, description="session files to compress (default: every file over max_size_kb or max_lines)"
    )
    keep_messages: int | None = Field(None, ge=1, description="keep at least this many recent messages")
    dry_run: bool = Field(False, description="say what would be cut; write nothing")
    force: bool = Field(False, description="also compress files modified within active_minutes")
    prefect: bool | None = Field(
        None, description="true: a Prefect flow run; false: in-process; null: decide"
    )


class RestoreFileRequest(Request):
    file: UserPath = Field(description="the session file whose .backup to put back")
    force: bool = Field(False, description="restore over entries newer than the backup")


class CompressResult(Shape):
    """What compress did to each file (`ctxkeep compress --json`)."""

    dry_run: bool = Field(description="true for --dry-run")
    files: list[dict[str, Any]] = Field(
        description="per file: path, agent, status, reason, bytes/tokens/messages before and after, backup, "
        "savings per strategy, notes, still_exceeds and still_over (thresholds still crossed afterwards)"
    )
    compressed: int | None = Field(None, description="files compressed")
    would_compress: int | None = Field(None, description="files --dry-run would compress")
    refused: int | None = Field(
        None,
        description="files refused, each file's reason says why (modified within active_minutes, the store "
        "does not hold every line, the compressed file would not validate, the file changed meanwhile); the "
        "run goes on and exits 0, as ingest with quarantined lines",
    )
    failed: int | None = Field(None, description="files that failed (exit 1)")
    bytes_before: int | None = Field(None, description="bytes before")
    bytes_after: int | None = Field(None, description="bytes after")
    tokens_before: int | None = Field(
        None, description="estimated tokens of the entries' texts before (images: image_tokens)"
    )
    tokens_after: int | None = Field(None, description="estimated tokens of the entries' texts after")
    image_tokens: int | None = Field(
        None, description="estimated tokens of the images and documents moved out to the store"
    )
    still_exceeding: int | None = Field(
        None, description="files still over max_size_kb or max_lines afterwards (per file: still_over)"
    )
    seconds: float | None = Field(None, description="wall time")
    problems: list[str] | None = Field(None, description=PROBLEMS)
    analytics: str | None = Field(None, description="what the DuckDB sync did")
    interrupted: str | None = Field(
        None,
        description="SIGINT or SIGTERM when one stopped the run after the file in hand (exit 130 or 143), "
        "else null",
    )
    not_started: int | None = Field(None, description="files an interrupted run left untouched")
    backup_bytes: int | None = Field(
        None,
        description="bytes the backups keep beside the files (the originals of the files compressed; "
        "a dry run: would keep)",
    )
    backups_until: str | None = Field(
        None, description="UTC date (YYYY-MM-DD) until which they stay: today + backup_max_age_days"
    )
    backup_max_age_days: int | None = Field(None, description="the setting: retention removes older backups")


# made by ``service.compress_check`` (no pydantic there): this model documents its keys
class CompressCheck(Shape):
    """Which files are over a threshold (`ctxkeep compress --check --json`)."""

    thresholds: dict[str, Any] = Field(description="max_size_kb, max_lines, …")
    files: list[dict[str, Any]] = Field(
        description="every file (the text lists those over a threshold unless --all): path, agent, bytes, "
        "lines, status, exceeds, active, modified, backups (what a compress would cut: `compress --dry-run --json`)"
    )
    exceeding: int = Field(description="files over a threshold")
    problems: list[str] = Field(description=PROBLEMS)


class CompressRestore(Shape):
    """The backup put back (`ctxkeep compress --restore --json`)."""

    path: str = Field(description="the session file")
    backup: str = Field(description="the backup put back")
    bytes: int = Field(description="its bytes")
    reactivated: int = Field(description="archived entries active again")
    saved_aside: str | None = Field(
        default=None,
        description="with --force: where the file as it was (lines the backup lacks) was kept, else null",
    )


def compress_restore(home: Path, req: RestoreFileRequest) -> CompressRestore:
    """Put ``req.file``'s backup back (the store keeps every entry). Raises NotFound,
    UsageError (entries newer than the backup without ``force``), StoreBusy."""
    from ctxkeep.maintenance import compress as ops

    return CompressRestore(**ops.restore_file(Path(home), req.file, force=req.force))


def compress(
    home: Path,
    req: CompressRequest,
    *,
    on_files: Callable[[int], None] | None = None,
    on_file: Callable[[Any], None] | None = None,
    on_stop: Callable[[Any], None] | None = None,
) -> CompressResult:
    """Compress ``req.files`` (or every file over a threshold): in-process for a dry
    run, ``prefect`` false, nothing to do, or no Prefect server to record it; else as
    the compress flow. ``on_files(n)`` and ``on_file(result)`` report progress,
    ``on_stop(stop)`` the first Ctrl-C at once (in-process runs).
    Raises StoreBusy, StoreError."""
    from ctxkeep.maintenance import compress as ops

    h, files = Path(home), req.files or None
    if on_files is not None:
        ops.hooks.on_files = on_files
    if on_file is not None:
        ops.hooks.on_file = on_file
    if on_stop is not None:
        ops.hooks.on_stop = on_stop
    kw: dict[str, Any] = {"paths": files, "keep_messages": req.keep_messages, "force": req.force}
    if req.dry_run or req.prefect is False:
        return CompressResult(**ops.run_compress(h, dry_run=req.dry_run, **kw))
    todo, _ = ops.files_to_compress(h, paths=files)
    if not todo:  # nothing over a threshold: no need to start Prefect
        return CompressResult(**ops.run_compress(h, **kw))
    from ctxkeep import config as cfgmod
    from ctxkeep.flows.prefect_env import configure_prefect, run_as_flow

    if not run_as_flow(h, req.prefect):
        return CompressResult(**ops.run_compress(h, **kw))
    cfgmod.ensure_home(h)
    configure_prefect(h)
    from ctxkeep.flows.compress import compress_flow

    return CompressResult(
        **compress_flow(
            str(h),
            paths=[str(p) for p in files or []] or None,
            keep_messages=req.keep_messages,
            force=req.force,
        )
    )

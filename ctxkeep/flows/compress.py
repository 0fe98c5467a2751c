"""The compress flow (Prefect): shrink every session file over a threshold after
verifying that the store holds every line. The work (and the run record) is done by
``maintenance.compress``; this module adds the orchestration: one task per file
(retried while the store is locked by another writer) and logging.

Scheduled hourly by ``ctxkeep serve``; ``ctxkeep compress`` runs it on demand
(``--check``, ``--dry-run``, ``--no-prefect`` and ``--restore`` call
``maintenance.compress`` without Prefect).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ctxkeep import config as cfgmod
from ctxkeep.errors import StoreBusy
from ctxkeep.flows.serve_lines import announced
from ctxkeep.maintenance import compress
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import SourceFile


@task(
    name="compress-file",
    retries=2,
    retry_delay_seconds=5,
    cache_policy=NO_CACHE,
    persist_result=False,
    retry_condition_fn=lambda t, r, s: isinstance(s.result(raise_on_failure=False), StoreBusy),
)
def compress_file_task(
    home: str, file: SourceFile, keep_messages: int | None, force: bool
) -> compress.FileResult:
    """Compress one file (``compress.compress_file``); returns its FileResult."""
    h = Path(home)
    cc = cfgmod.load_config(h).compress
    conn = sqlite_store.connect(h)
    try:
        return compress.compress_file(conn, h, file, cc, keep_messages=keep_messages, force=force)
    finally:
        conn.close()


@flow(name="compress", log_prints=False, persist_result=False)
@announced("compress")
def compress_flow(
    home: str, paths: list[str] | None = None, keep_messages: int | None = None, force: bool = False
) -> dict:
    """Compress the given session files, or every enabled agent's Claude Code/Codex
    file over ``max_size_kb``/``max_lines``, in the store at ``home``.

    Returns the run summary of ``compress.run_compress`` (bytes and tokens before
    and after, one FileResult dict per file)."""
    log = get_run_logger()

    def runner(h: Path, file: SourceFile, keep, dry_run: bool, frc: bool):
        res = compress_file_task.with_options(name=f"compress-{file.path.name[:40]}")(str(h), file, keep, frc)
        log.info("%s: %s %s", file.path, res.status, res.reason)
        return res

    summary = compress.run_compress(
        Path(home),
        paths=[Path(p) for p in paths or []] or None,
        keep_messages=keep_messages,
        force=force,
        runner=runner,
    )
    log.info(
        "compress done: %d compressed, %d refused, %d → %d bytes",
        summary["compressed"],
        summary["refused"],
        summary["bytes_before"],
        summary["bytes_after"],
    )
    return summary

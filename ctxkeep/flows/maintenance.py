"""Prefect flows for purge, retention, reindex and backfill.

Thin wrappers: the work is done by the plain functions of ``flows.maintenance`` (which
take the store lock themselves; the lock is reentrant within a process). The flows add
Prefect's run records, logging and retries on a transient store lock, and are what
``ctxkeep serve`` deploys on schedules (retention daily) or runs on demand through the
Prefect API.
"""

from __future__ import annotations

import os
from pathlib import Path

from prefect import flow, get_run_logger

from ctxkeep.flows.serve_lines import announced
from ctxkeep.maintenance import backfill, backup, purge_policy, retention
from ctxkeep.maintenance.purge import run_purge
from ctxkeep.maintenance.purge_request import PurgeRequest, check_confirm, parse_purge_request
from ctxkeep.maintenance.reindex import run_reindex


@flow(name="purge", persist_result=False)
def purge_flow(
    home: str,
    session_id: str | None = None,
    scope: str | None = None,
    project_dir: str | None = None,
    confirm: bool | str | None = None,
    cwd: str | None = None,
    all_: bool = False,
    dry_run: bool = False,
    reingest: bool = False,
) -> dict:
    """Purge a session, a project or (``all_``) the whole store at ``home``.

    Arguments as ``purge_request.parse_purge_request`` (``cwd`` defaults to the process's
    working directory); returns the ``purge.run_purge`` report. Raises PurgeCancelled
    or UsageError (the contract), StoreBusy.
    """
    log = get_run_logger()
    if all_:
        check_confirm(confirm)  # the contract's confirm rules
        req = PurgeRequest("all")
    else:
        req = parse_purge_request(
            session_id=session_id,
            scope=scope,
            project_dir=project_dir,
            confirm=confirm,
            cwd=cwd or os.getcwd(),
        )
    rep = run_purge(Path(home), req, dry_run=dry_run, reingest=reingest)
    log.info("purge %s: %s", rep["resolved"], rep.get("removed"))
    return rep


@flow(name="retention", persist_result=False)
@announced("retention")
def retention_flow(home: str, dry_run: bool = False) -> dict:
    """Archive old consumed/archived entries to Parquet, drop old archives and compress
    backups, prune the vault's older generations by its ``[vault]`` policy
    (``maintenance.retention.run_retention``; thresholds and policy from config)."""
    log = get_run_logger()
    rep = retention.run_retention(Path(home), dry_run=dry_run)
    v = rep.get("vault") or {}
    log.info(
        "retention: %s entries archived, %s archives and %s backups removed, %s vault generations "
        "pruned (%s held back, %s bytes of packs freed)",
        (rep.get("archived") or {}).get("entries", 0),
        rep.get("archives_removed", 0),
        rep.get("backups_removed", 0),
        (v.get("pruned") or {}).get("generations", len(v.get("generations") or [])),
        len(v.get("held") or []),
        v.get("bytes_freed", 0),
    )
    return rep


@flow(name="reindex", persist_result=False)
def reindex_flow(home: str, fts: bool = True, analytics: bool = True) -> dict:
    """Rebuild the FTS indexes and DuckDB from SQLite (``reindex.run_reindex``)."""
    rep = run_reindex(Path(home), fts=fts, analytics=analytics)
    get_run_logger().info("reindex: %s", rep)
    return rep


@flow(name="backfill", persist_result=False)
def backfill_flow(
    home: str,
    paths: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    agents: list[str] | None = None,
    dry_run: bool = False,
) -> dict:
    """Re-ingest paths or a date range from byte 0 (``maintenance.backfill.run_backfill``)."""
    rep = backfill.run_backfill(
        Path(home),
        paths=[Path(p) for p in paths or []] or None,
        since=since,
        until=until,
        agents=agents,
        dry_run=dry_run,
    )
    get_run_logger().info("backfill: %d files, %s", len(rep["files"]), rep.get("ingest"))
    return rep


@flow(name="backup", persist_result=False)
@announced("backup")
def backup_flow(home: str, keep: int | None = None) -> dict:
    """Write a consistent copy of the store to ``<home>/backups`` and keep the newest
    ``keep`` (config ``[backup] keep``; ``maintenance.backup.run_backup``)."""
    rep = backup.run_backup(Path(home), keep=keep)
    get_run_logger().info(
        "backup: %s (%d bytes), %d old copies removed", rep["path"], rep["bytes"], len(rep["removed"])
    )
    return rep


@flow(name="purge-policy", persist_result=False, retries=2, retry_delay_seconds=30)
@announced("purge-policy")
def purge_policy_flow(home: str, dry_run: bool = False) -> dict:
    """Apply the ``[purge]`` rules of the store at ``home``
    (``maintenance.purge_policy.run_policy``; recorded in ``runs`` as ``purge-policy``
    with what each rule removed). Retried when the store lock is taken."""
    rep = purge_policy.run_policy(Path(home), dry_run=dry_run)
    get_run_logger().info(
        "purge policy: %d scopes, %d entries removed", len(rep["scopes"]), rep["totals"]["entries"]
    )
    return rep

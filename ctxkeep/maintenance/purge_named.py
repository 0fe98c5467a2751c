"""A purge as the user names it, for ``ctxkeep purge`` and MCP ``ctx_purge`` alike.

The request (``purge_request.parse_purge_request``) is resolved against the store: a
session id prefix as hits show it becomes the full id (an ambiguous one lists the
candidates), a project dir is also matched through symlinks (both sides resolved,
``purge_request.project_spellings``); then every spelling is previewed
(``purge.run_purge(dry_run=True)``) and a purge that would remove nothing is refused
with "no such session" (exit 1) before anything is written: no tombstone is added for a
typo. Only then does ``purge.run_purge`` run, once per spelling.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxkeep.maintenance import purge
from ctxkeep.maintenance.exports_held import exports_holding
from ctxkeep.maintenance.purge_request import (
    PurgeRequest,
    project_spellings,
    require_match,
    resolve_session_request,
)
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.sqlite import tombstones


def resolve_named(home: Path, request: PurgeRequest) -> tuple[list[PurgeRequest], dict]:
    """The purge requests that ``request`` names in the store at ``home`` and their
    preview (``run_purge(dry_run=True)`` per spelling, merged by ``merge_reports``).

    Raises ``SessionNotFound`` / ``NotFound`` (exit 1) when nothing would be removed
    and no tombstone of the scope exists (purging a purged scope again is a no-op that
    reports zeros, and ``reingest`` lifts its tombstone), ``AmbiguousSession`` (exit 2) for a prefix naming several sessions,
    ``UsageError`` for a symlink that resolves to a too broad directory.
    ``scope="all"`` is previewed as it is."""
    if request.scope == "all":
        preview = _with_backups(home, [request], purge.run_purge(home, request, dry_run=True))
        return [request], _with_exports(preview, exports_holding(home, [request]))
    reqs = [request]
    if (Path(home) / STORE_DB).exists():
        conn = sqlite_store.connect(Path(home), readonly=True)
        try:
            request = resolve_session_request(conn, request)
            reqs = project_spellings(conn, request)
        finally:
            conn.close()
    previews = [purge.run_purge(home, r, dry_run=True) for r in reqs]
    if not has_tombstone(home, request):  # purged before: idempotent, zeros
        require_match(request, previews)
    return reqs, _with_exports(
        _with_backups(home, reqs, merge_reports(previews)), exports_holding(home, reqs)
    )


def purge_named(
    home: Path,
    request: PurgeRequest,
    *,
    dry_run: bool = False,
    reingest: bool = False,
    timeout: float = -1,
    resolved: list[PurgeRequest] | None = None,
) -> dict:
    """Purge what ``request`` names (``resolve_named``), or with ``dry_run`` return the
    preview. ``resolved``: the requests a previous ``resolve_named`` returned (the CLI
    previews, asks, then purges those).

    Returns ``run_purge``'s report (merged over the spellings by ``merge_reports``).
    Raises as ``resolve_named``, and StoreBusy as ``run_purge``."""
    if resolved is None:
        resolved, preview = resolve_named(home, request)
        if dry_run:
            return preview
    held = exports_holding(home, resolved)  # before: the purge removes the rows that name them
    report = merge_reports([purge.run_purge(home, r, reingest=reingest, timeout=timeout) for r in resolved])
    return _with_exports(_with_backups(home, resolved, report), held)


def _with_exports(report: dict, held: list[dict]) -> dict:
    """``report`` with ``exports``: the exports written from the store that hold the
    scope's rows (``exports_held.exports_holding``, taken before the purge; a purge
    never changes one) and, when there are any, ``exports_note``: how to refresh them."""
    report["exports"] = held
    if held:
        report["exports_note"] = (
            f"{len(held)} export{'s' if len(held) != 1 else ''} written from this store still "
            f"hold{'s' if len(held) == 1 else ''} this data (a purge never changes an export): refresh "
            f"{'them' if len(held) != 1 else 'it'}: " + "; ".join(h["refresh"] for h in held)
        )
    return report


def _with_backups(home: Path, requests: list[PurgeRequest], report: dict) -> dict:
    """``report`` with ``backups``: the store backups that still hold the scope's rows
    (``purge.backups_holding``; a purge leaves them as they are) and, when there are
    any, ``backups_note``: what that means and how to remove them."""
    held = purge.backups_holding(home, requests)
    report["backups"] = held
    if held:
        report["backups_note"] = (
            f"{len(held)} store backup{'s' if len(held) != 1 else ''} in {Path(home) / 'backups'} still "
            f"hold{'s' if len(held) == 1 else ''} this data (a purge never changes a backup; `ctxkeep restore` of one brings the data "
            "back): delete them to remove it everywhere: rm " + " ".join(h["path"] for h in held)
        )
    return report


def has_tombstone(home: Path, request: PurgeRequest) -> bool:
    """True when the store at ``home`` holds a tombstone of ``request``'s scope."""
    if not (Path(home) / STORE_DB).exists():
        return False
    conn = sqlite_store.connect(Path(home), readonly=True)
    try:
        return tombstones.has(conn, request.scope, request.value)
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def merge_reports(reports: list[dict]) -> dict:
    """One purge report from the reports of the spellings of one request: the first
    report with the integer ``removed`` counts summed, ``files`` joined, ``resolved``
    naming every spelling and ``project_dirs`` listing them (a single report is
    returned as it is)."""
    if len(reports) == 1:
        return reports[0]
    out = dict(reports[0])
    removed: dict = {}
    for r in reports:
        for k, v in (r.get("removed") or {}).items():
            removed[k] = removed.get(k, 0) + v if isinstance(v, int) else v
    out["removed"] = removed
    out["files"] = sorted({f for r in reports for f in r.get("files", [])})
    out["resolved"] = " + ".join(r["resolved"] for r in reports)
    out["project_dirs"] = [r.get("project_dir") for r in reports]
    tombs = [t for r in reports for t in r.get("tombstones", [])]
    if tombs:
        out["tombstones"] = tombs
    if any(r.get("analytics") for r in reports):
        out["analytics"] = reports[-1].get("analytics")
    return out

"""Purge and reindex runs as plain functions (no Prefect), for ``flows.maintenance``
and the CLI. Retention lives in ``maintenance.retention``, backfill in
``maintenance.backfill``; these two wrappers move to ``maintenance.purge`` and
``maintenance.reindex`` (then this module goes).
"""
from __future__ import annotations

from pathlib import Path

from ctxkeep.maintenance import purge as purge_mod
from ctxkeep.maintenance import reindex as reindex_mod


def run_purge(home: Path, request: purge_mod.PurgeRequest, *, dry_run: bool = False,
              reingest: bool = False, timeout: float = -1) -> dict:
    """``sinks.purge.purge`` (the one implementation; see there for the report shape)."""
    return purge_mod.purge(Path(home), request, dry_run=dry_run, reingest=reingest, timeout=timeout)


def run_reindex(home: Path, *, fts: bool = True, analytics: bool = True, timeout: float = -1) -> dict:
    """``sinks.reindex.reindex``: rebuild the FTS indexes and DuckDB from SQLite."""
    return reindex_mod.reindex(Path(home), fts=fts, analytics=analytics, timeout=timeout)

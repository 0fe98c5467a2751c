"""Helpers for the per-agent source tests: ingest a home into a fresh store, count."""
from __future__ import annotations

import shutil
from pathlib import Path

from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext


def ingest_home(home: Path, store: Path, env: dict | None = None, agents=None, paths=None):
    """Run the plain pipeline with HOME=``home``; returns the run Summary."""
    return run_ingest(store, agents=agents, paths=paths, ctx=DiscoveryContext(home=home, env=env or {}))


def q(store: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def kinds(store: Path, agent: str) -> dict[str, int]:
    """``{"role/kind": n}`` of an agent's entries."""
    return {f"{r}/{k}": n for r, k, n in q(
        store, "SELECT role, kind, count(*) FROM entries WHERE agent=? GROUP BY 1, 2", (agent,))}


def copy_fixture_home(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst

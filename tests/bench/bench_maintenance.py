"""Benchmark of the maintenance runs on a scaled corpus (prints figures; not a test).

Usage: uv run python tests/bench/bench_maintenance.py [--mb 50] [--work DIR]

Builds a session tree of ``--mb`` MB with /work/shared/tools/scale_corpus.py
(``--unique-text``), ingests it in-process, then times: a purge preview and purge of one
session, a purge of one project, retention of ~10 % of the entries (marked archived and
old), reindex (both FTS indexes + DuckDB) and a backfill of every file (nothing new).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCALE = ROOT.parent / "shared" / "tools" / "scale_corpus.py"


def timed(label: str, fn):
    t0 = time.perf_counter()
    r = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<44} {dt:8.2f} s")
    return r, dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ctxkeep-bench-maint"))
    a = ap.parse_args()
    from ctxkeep.maintenance.backfill import run_backfill
    from ctxkeep.maintenance.purge import run_purge as purge
    from ctxkeep.maintenance.purge_request import PurgeRequest
    from ctxkeep.maintenance.reindex import run_reindex
    from ctxkeep.maintenance.retention import run_retention
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    tree = a.work / f"home-{a.mb}mb"
    if not tree.exists():
        subprocess.run(
            [sys.executable, str(SCALE), str(tree), "--mb", str(a.mb), "--unique-text"], check=True
        )
    store = a.work / "store"
    shutil.rmtree(store, ignore_errors=True)
    ctx = DiscoveryContext(home=tree, env={})
    s, t = timed(f"ingest {a.mb} MB tree", lambda: run_ingest(store, ctx=ctx))
    print(
        f"  {s.entries_new:,} entries from {s.files_read:,} files ({s.bytes / 1e6:.1f} MB, "
        f"{s.bytes / 1e6 / t:.1f} MB/s)"
    )
    db = sqlite3.connect(store / "store.db")
    sid, n = db.execute(
        "SELECT session_id, count(*) FROM entries GROUP BY 1 ORDER BY 2 DESC LIMIT 1"
    ).fetchone()
    proj, pn = db.execute(
        "SELECT project_dir, count(*) FROM entries WHERE project_dir IS NOT NULL "
        "GROUP BY 1 ORDER BY 2 DESC LIMIT 1 OFFSET 1"
    ).fetchone()
    total = db.execute("SELECT count(*) FROM entries").fetchone()[0]
    size0 = (store / "store.db").stat().st_size
    req = PurgeRequest("session", session_id=sid)
    timed(f"purge preview (session, {n:,} entries)", lambda: purge(store, req, dry_run=True))
    r, _ = timed(f"purge session ({n:,} entries)", lambda: purge(store, req))
    print(
        f"  removed {r['removed']['entries']:,} entries, {r['removed']['contents']:,} texts; {r['analytics']}"
    )
    r, _ = timed(
        f"purge project ({pn:,} entries)", lambda: purge(store, PurgeRequest("project", project_dir=proj))
    )
    print(f"  removed {r['removed']['entries']:,} entries of {r['removed']['sessions']:,} sessions")
    with db:
        db.execute("UPDATE entries SET status='archived' WHERE rowid % 10 = 0")
    marked = db.execute("SELECT count(*) FROM entries WHERE status='archived'").fetchone()[0]
    r, t = timed(f"retention ({marked:,} archived entries)", lambda: run_retention(store, ctx=ctx))
    arch = sum(p.stat().st_size for p in (store / "archive").rglob("*.parquet"))
    print(
        f"  archived {r['archived']['entries']:,} entries into {len(r['archived']['files'])} files "
        f"({arch / 1e6:.1f} MB Parquet)"
    )
    r, _ = timed("reindex (FTS + DuckDB)", lambda: run_reindex(store))
    print(f"  {r['chunks']:,} chunks, {r['grams_rows']:,} grams rows; {r['analytics']}")
    r, t = timed("backfill every file (nothing new)", lambda: run_backfill(store, ctx=ctx))
    print(f"  {r['ingest']['files_read']:,} files, {r['ingest']['entries_new']:,} new entries")
    print(
        f"store.db {size0 / 1e6:.1f} MB before, {(store / 'store.db').stat().st_size / 1e6:.1f} MB after; "
        f"{total:,} entries before"
    )


if __name__ == "__main__":
    main()

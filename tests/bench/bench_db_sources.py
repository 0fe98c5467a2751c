"""Benchmark: reading an agent SQLite database (Crush schema) and planning over it.

Builds a copy of the corpus Crush database in a temp dir, multiplies its 82 messages
to ``N`` rows (new ids, same parts), then measures: a first full ingest, an unchanged
re-plan (``sources.file_unchanged``: two stats), and an incremental ingest after 1,000 new
rows. Each run twice, side by side: with the vault off (``CTXKEEP_VAULT=0``, the
baseline) and on (each changed session's rows document taken: ``readers.rows``).
Prints figures; asserts nothing about speed. Run:
``uv run python tests/bench/bench_db_sources.py [N]``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.pipeline.plan import plan
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext

CORPUS_DB = (
    Path(__file__).resolve().parents[3] / "shared/corpus/home/code/dbos-transact-golang/.crush/crush.db"
)


def grow(db: Path, n: int) -> None:
    c = sqlite3.connect(db)
    rows = c.execute(
        "SELECT session_id, role, parts, model, created_at, updated_at, finished_at, provider FROM messages"
    ).fetchall()
    have = len(rows)
    batch = []
    for i in range(n - have):
        r = rows[i % have]
        batch.append((str(uuid.uuid4()), *r[:4], r[4] + i, r[5] + i, r[6], r[7]))
    c.executemany(
        "INSERT INTO messages(id, session_id, role, parts, model, created_at, updated_at, finished_at, "
        "provider) VALUES (?,?,?,?,?,?,?,?,?)",
        batch,
    )
    c.commit()
    c.close()


def main(n: int = 20000) -> None:
    for flag, name in (("0", "vault off"), ("1", "vault on")):
        os.environ["CTXKEEP_VAULT"] = flag
        print(f"-- {name}")
        run(n)


def run(n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-"))
    try:
        home = tmp / "home"
        db = home / "proj/.crush/crush.db"
        db.parent.mkdir(parents=True)
        shutil.copyfile(CORPUS_DB, db)
        grow(db, n)
        size = db.stat().st_size
        ctx = DiscoveryContext(home=home, env={})
        store = tmp / "store"
        t = time.perf_counter()
        s = run_ingest(store, agents=["crush"], ctx=ctx)
        first = time.perf_counter() - t
        conn = sqlite_store.connect(store)
        t = time.perf_counter()
        p = plan(store, conn, agents=["crush"], ctx=ctx)
        replan = time.perf_counter() - t
        conn.close()
        grow(db, n + 1000)
        t = time.perf_counter()
        s2 = run_ingest(store, agents=["crush"], ctx=ctx)
        incr = time.perf_counter() - t
        print(
            f"crush.db {n:,} messages, {size / 1e6:.1f} MB: first ingest {first:.2f} s "
            f"({s.entries_new:,} new entries, {n / first:,.0f} rows/s, {s.bytes / first / 1e6:.1f} MB/s of parts JSON)"
        )
        print(f"unchanged plan {replan * 1000:.1f} ms (todo {len(p.todo)}, unchanged {p.unchanged})")
        print(f"+1,000 rows: incremental ingest {incr:.2f} s ({s2.entries_new:,} new entries)")
        vault = sum(f.stat().st_size for f in (store / "vault").rglob("*") if f.is_file())
        print(f"vault {vault / 1e6:.2f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)

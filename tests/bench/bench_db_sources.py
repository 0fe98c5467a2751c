"""Benchmark: reading an agent SQLite database (Crush schema) and planning over it.

Builds a copy of the corpus Crush database in a temp dir, multiplies its 82 messages
to ``N`` rows (new ids, same parts), then measures: a first full ingest, an unchanged
re-plan (``sources.file_unchanged``: two stats), and an incremental ingest after 1,000 new
rows, then one old row edited. Each run twice, side by side: with the vault off
(``CTXKEEP_VAULT=0``, the baseline) and on (each changed session's rows document
taken, built on the version held: ``sinks.vault.rows_capture``), then a table of CPU
seconds (this process and its children) and walls, with the ratio on / off and the
load average. The issue's case is ``N = 3000`` (40 MB, 2 sessions; target: +1,000
rows on <= 1.15x off). Prints figures; asserts nothing about speed. Run:
``uv run python tests/bench/bench_db_sources.py [N]``.
"""

from __future__ import annotations

import os
import resource
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


def _cpu() -> float:
    """CPU seconds of this process and its children (reader processes) so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(n: int = 20000, edit: bool = True) -> None:
    load0 = os.getloadavg()
    got = {}
    for flag, name in (("0", "vault off"), ("1", "vault on")):
        os.environ["CTXKEEP_VAULT"] = flag
        print(f"-- {name}")
        got[name] = run(n, edit)
    off, on = got["vault off"], got["vault on"]
    print(f"\n{'':24}{'vault off':>18}{'vault on':>18}{'on / off':>10}")
    for key, label in (
        ("first", "first ingest"),
        ("incr", "+1,000 rows"),
        ("edit", "an old row edited"),
    ):
        if key not in off:
            continue
        (w0, c0), (w1, c1) = off[key], on[key]
        print(f"{label:24}{c0:9.2f} CPU {w0:5.2f} s{c1:9.2f} CPU {w1:5.2f} s{c1 / c0 if c0 else 0:9.2f}x")
    print("(CPU: seconds of this process and its children; target +1,000 rows on <= 1.15x off)")
    print(f"load average {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}")


def _timed(fn):
    t, c = time.perf_counter(), _cpu()
    out = fn()
    return out, (time.perf_counter() - t, _cpu() - c)


def run(n: int, edit: bool = True) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-"))
    figures = {}
    try:
        home = tmp / "home"
        db = home / "proj/.crush/crush.db"
        db.parent.mkdir(parents=True)
        shutil.copyfile(CORPUS_DB, db)
        grow(db, n)
        size = db.stat().st_size
        ctx = DiscoveryContext(home=home, env={})
        store = tmp / "store"
        s, figures["first"] = _timed(lambda: run_ingest(store, agents=["crush"], ctx=ctx))
        conn = sqlite_store.connect(store)
        t = time.perf_counter()
        p = plan(store, conn, agents=["crush"], ctx=ctx)
        replan = time.perf_counter() - t
        conn.close()
        grow(db, n + 1000)
        s2, figures["incr"] = _timed(lambda: run_ingest(store, agents=["crush"], ctx=ctx))
        first, incr = figures["first"][0], figures["incr"][0]
        print(
            f"crush.db {n:,} messages, {size / 1e6:.1f} MB: first ingest {first:.2f} s "
            f"({s.entries_new:,} new entries, {n / first:,.0f} rows/s, {s.bytes / first / 1e6:.1f} MB/s of parts JSON)"
        )
        print(f"unchanged plan {replan * 1000:.1f} ms (todo {len(p.todo)}, unchanged {p.unchanged})")
        print(f"+1,000 rows: incremental ingest {incr:.2f} s ({s2.entries_new:,} new entries)")
        if edit:  # an old message rewritten (its ``updated_at`` moved by Crush's trigger)
            c = sqlite3.connect(db)
            c.execute(
                "UPDATE messages SET model = model WHERE rowid = (SELECT min(rowid) + 10 FROM messages)"
            )
            c.commit()
            c.close()
            _, figures["edit"] = _timed(lambda: run_ingest(store, agents=["crush"], ctx=ctx))
            print(f"an old row edited: ingest {figures['edit'][0]:.2f} s")
        vault = sum(f.stat().st_size for f in (store / "vault").rglob("*") if f.is_file())
        print(f"vault {vault / 1e6:.2f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return figures


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)

"""Why a group's load costs more the bigger the store (issue 26, target 2; session 22): a
script that prints figures, not a test.

Copies the first N rows of ``entry_rows`` of a store (``--store``, e.g. a 2 GB ingest
kept by ``profile_ingest.py --store``) with its indexes into a scratch database of page
size ``--page-size``, then stores groups of 8,000 rows there (one transaction each, as
the ingest's writer does), their ``entry_id`` random (a fresh uuid's hex, as the parsers'
hashes are) or ascending (past every stored key), every other key new and ascending (new
sessions, contents and files), and prints the CPU seconds (``time.thread_time``, so it
holds under load) of the ``INSERT OR IGNORE`` and of the ``COMMIT``, the minimum of
``--reps``. The WAL is checkpointed between groups (outside the timing).

A random key dirties one leaf of the unique index per row until every leaf is dirty, and
the COMMIT writes every dirty page to the WAL (a frame each: its header, the page, the
checksums over both): at 985,969 rows (the 2 GB tree, an ``entry_id`` index of ~44 MB)
the COMMIT of a random group costs ~25x an ascending one.

    uv run python tests/bench/bench_index_growth.py --store /tmp/me-2g --rows 100000,985969
    uv run python tests/bench/bench_index_growth.py --store /tmp/me-2g --page-size 4096
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

#: rows per group (a 2 GB ingest's groups hold ~8,000 entries)
GROUP_ROWS = 8000


def _scratch(src: Path, rows: int, page_size: int, path: Path) -> sqlite3.Connection:
    """A database at ``path`` holding ``entry_rows`` (its DDL and indexes from ``src``)
    with the first ``rows`` rows of ``src``'s, in WAL mode, checkpointed."""
    c = sqlite3.connect(path, isolation_level=None)
    c.execute(f"PRAGMA page_size={page_size}")
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")
    c.execute("ATTACH ? AS src", (f"file:{src}?mode=ro",))
    for (sql,) in c.execute(
        "SELECT sql FROM src.sqlite_master WHERE tbl_name='entry_rows' AND sql IS NOT NULL "
        "AND type IN ('table', 'index') ORDER BY type DESC"
    ).fetchall():
        c.execute(sql)
    c.execute(f"INSERT INTO main.entry_rows SELECT * FROM src.entry_rows ORDER BY rowid LIMIT {rows}")
    c.execute("DETACH src")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.execute(f"PRAGMA cache_size=-{64 * 1024}")  # the writer's (connection.CACHE_KIB)
    return c


def _group(sample: list[tuple], cols: list[str], random_ids: bool, n: int) -> list[tuple]:
    """``sample``'s rows as group ``n``: new ``entry_id`` (random or ascending), new
    session, content and file ids, ascending."""
    at = {c: i for i, c in enumerate(cols)}
    out = []
    for i, r in enumerate(sample):
        row = list(r)
        row[at["entry_id"]] = uuid.uuid4().hex if random_ids else f"zz{n:06d}{i:08d}"
        row[at["session_id"]] = f"new-session-{n}-{i // 500}"
        row[at["content_id"]] = 10**9 + n * 10**5 + i
        row[at["file_id"]] = 10**6 + n * 100 + i // 1000
        row[at["source_offset"]] = i * 1000
        out.append(tuple(row))
    return out


def measure(src: Path, rows: int, page_size: int, reps: int) -> dict[str, float]:
    """``{"random", "random commit", "ascending", "ascending commit"}``: CPU s of one
    group's insert and its COMMIT on a store of ``rows`` rows, the minimum of ``reps``."""
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    cur = s.execute("SELECT * FROM entry_rows WHERE rowid % 97 = 0 LIMIT ?", (GROUP_ROWS,))
    cols = [d[0] for d in cur.description]
    sample = cur.fetchall()
    s.close()
    cols_sql = ",".join(cols[1:])  # without the rowid (the table's INTEGER PRIMARY KEY)
    q = f"INSERT OR IGNORE INTO entry_rows({cols_sql}) VALUES({','.join('?' * (len(cols) - 1))})"
    got: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ctxkeep-index-growth-") as work:
        c = _scratch(src, rows, page_size, Path(work) / "s.db")
        try:
            for rep in range(reps):
                for random_ids in (True, False):
                    kind = "random" if random_ids else "ascending"
                    group = [r[1:] for r in _group(sample, cols, random_ids, 2 * rep + random_ids)]
                    c.execute("BEGIN IMMEDIATE")
                    t0 = time.thread_time()
                    c.executemany(q, group)
                    t1 = time.thread_time()
                    c.execute("COMMIT")
                    t2 = time.thread_time()
                    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    got.setdefault(kind, []).append(t1 - t0)
                    got.setdefault(f"{kind} commit", []).append(t2 - t1)
        finally:
            c.close()
    return {k: min(v) for k, v in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True, help="a ctxkeep home whose entry_rows to copy")
    ap.add_argument("--rows", default="100000,985969", help="store sizes in rows, comma-separated")
    ap.add_argument("--page-size", type=int, default=16384)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print(f"page size {a.page_size}; groups of {GROUP_ROWS:,} rows; CPU s, min of {a.reps}")
    for rows in [int(x) for x in a.rows.split(",")]:
        m = measure(a.store / "store.db", rows, a.page_size, a.reps)
        print(
            f"  store of {rows:>9,} rows: insert random {m['random']:.4f} ascending {m['ascending']:.4f}; "
            f"COMMIT random {m['random commit']:.4f} ascending {m['ascending commit']:.4f}  "
            f"(load {os.getloadavg()[0]:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    main()

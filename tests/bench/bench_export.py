"""Benchmark of ``ctxkeep export parquet`` on a scaled corpus (prints figures; not a test).

Usage: uv run python tests/bench/bench_export.py [--mb 100] [--work DIR]

Builds a session tree of ``--mb`` MB with /work/shared/tools/scale_corpus.py
(``--unique-text``) under ``--work`` (default /tmp), ingests it in-process, then times
side by side in one run:

- the export of usage, sessions and entries (no text) to a fresh local lake, and the
  same with ``--with-text``;
- a baseline: the same rows read from DuckDB as Arrow and written by plain
  ``pyarrow.parquet.write_table`` (ZSTD), one file per table, no partitions, no
  digests, no state (what export costs beyond writing Parquet);
- a second export (nothing changed: the watermark check alone).

Throughput is given in MB of store (store.db + analytics.duckdb) per second and rows
per second.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCALE = ROOT.parent / "shared" / "tools" / "scale_corpus.py"


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


def baseline(home: Path, out: Path, with_text: bool) -> tuple[int, int]:
    """Rows and bytes of a plain pyarrow write of the export's rows (one file a table)."""
    import sqlite3

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True)
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    rows = size = 0
    for table, rel in (("usage", "usage"), ("sessions", "sessions"), ("entries", "all_entries")):
        t = con.sql(f"SELECT * FROM {rel}").to_arrow_table()
        if with_text and table == "entries":
            db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
            texts: dict[str, list[str]] = {}
            for h, chunk in db.execute(
                "SELECT c.content_hash, ch.text FROM contents c JOIN chunks ch ON ch.content_id = c.content_id "
                "ORDER BY c.content_hash, ch.seq"
            ):
                texts.setdefault(h, []).append(chunk)
            db.close()
            joined = {h: "".join(v) for h, v in texts.items()}
            t = t.append_column(
                "text", pa.array([joined.get(h) for h in t.column("content_hash").to_pylist()])
            )
        pq.write_table(t, out / f"{table}.parquet", compression="zstd")
        rows += t.num_rows
        size += (out / f"{table}.parquet").stat().st_size
    con.close()
    return rows, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ctxkeep-bench-export"))
    a = ap.parse_args()
    from ctxkeep.maintenance.export import export_parquet
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    tree = a.work / f"home-{a.mb}mb"
    if not tree.exists():
        subprocess.run(
            [sys.executable, str(SCALE), str(tree), "--mb", str(a.mb), "--unique-text"], check=True
        )
    store = a.work / f"store-{a.mb}mb"
    if not (store / "store.db").exists():
        s, t = timed(lambda: run_ingest(store, ctx=DiscoveryContext(home=tree, env={})))
        print(f"ingest {a.mb} MB tree: {s.entries_new:,} entries in {t:.1f} s (setup)")
    mb = sum((store / n).stat().st_size for n in ("store.db", "analytics.duckdb")) / 1e6
    print(f"store: {mb:,.1f} MB (store.db + analytics.duckdb); load {os.getloadavg()[0]:.1f}")
    print(f"{'':<34}{'seconds':>9}{'rows':>11}{'rows/s':>11}{'store MB/s':>12}{'Parquet MB':>12}")

    def line(label: str, secs: float, rows: int, size: int) -> None:
        print(f"{label:<34}{secs:9.2f}{rows:11,}{rows / secs:11,.0f}{mb / secs:12.1f}{size / 1e6:12.1f}")

    for with_text in (False, True):
        tag = " --with-text" if with_text else ""
        lake = a.work / "lake"
        shutil.rmtree(lake, ignore_errors=True)
        # the export syncs DuckDB first (a no-op here: ingest synced it)
        rep, t = timed(lambda: export_parquet(store, str(lake), with_text=with_text))  # noqa: B023
        rows = sum(x["rows_written"] for x in rep["tables"].values())
        size = sum(x["bytes_written"] for x in rep["tables"].values())
        parts = sum(len(x["written"]) for x in rep["tables"].values())
        line(f"export{tag} ({parts} partitions)", t, rows, size)
        base = a.work / "baseline"
        shutil.rmtree(base, ignore_errors=True)
        (brows, bsize), bt = timed(lambda: baseline(store, base, with_text))  # noqa: B023
        line(f"baseline pyarrow write{tag}", bt, brows, bsize)
        print(f"{'  ratio export / baseline':<34}{t / bt:9.2f}")
        again, t2 = timed(lambda: export_parquet(store, str(lake), with_text=with_text))  # noqa: B023
        assert sum(x["rows_written"] for x in again["tables"].values()) == 0
        print(f"{'second export' + tag + ' (no change)':<34}{t2:9.2f}")
    # the state left behind: none of it in the repo
    shutil.rmtree(a.work / "lake", ignore_errors=True)
    shutil.rmtree(a.work / "baseline", ignore_errors=True)


if __name__ == "__main__":
    main()

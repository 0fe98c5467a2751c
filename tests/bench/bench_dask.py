"""Dask benchmark (a script that prints figures; not a test, not collected by pytest).

``ctxkeep ingest --task-runner dask=N`` (issue 13: "Dask for big backfills") beside
the default run, side by side in one run, each a whole process (``ctxkeep ingest
--no-prefect --json``) into a fresh store, on the scaled tree
(``shared/tools/scale_corpus.py OUT --mb 500 --unique-text``: fresh ids and a copy
tag on every text, so dedup cannot collapse the copies):

- default: the engine's own read-ahead thread and reader process, the writer thread;
- ``dask=1``, ``dask=2``: a LocalCluster of 1 or 2 worker processes started by the
  command (its start-up is in the figure), the parts' extract + transform there, the
  writer in the command's process.

``--repeat R`` runs the three R times, interleaved (the machine is shared: compare
figures of the same round). Prints wall seconds, CPU seconds of the command and its
children (user + sys, ``getrusage(RUSAGE_CHILDREN)``: the Dask workers are the
command's children), MB/s of the tree's session bytes, new entries, and whether each
store's table digest (tests/store_digest.py) equals the default run's.

Usage::

    uv run python tests/bench/bench_dask.py [--mb 500] [--tree DIR] [--repeat 1] [--keep]

``--tree`` reuses a tree built before (it is built there if missing).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCALE = (ROOT.parent / "shared" / "tools" / "scale_corpus.py").resolve()
sys.path.insert(0, str(ROOT / "tests"))

from store_digest import store_digest  # noqa: E402 - tests/ is not a package on sys.path

RUNS = [("default", None), ("dask=1", "dask=1"), ("dask=2", "dask=2")]


def cpu_children() -> float:
    """User + system CPU seconds of this process's waited children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_cli(store: Path, tree: Path, task_runner: str | None) -> tuple[float, float, dict]:
    """One whole-process ingest of ``tree`` into ``store``: (wall s, CPU s, summary)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXKEEP_", "PREFECT_API_URL"))}
    env.update(HOME=str(tree), CTXKEEP_HOME=str(store))
    env.pop("CLAUDE_CONFIG_DIR", None)
    env.pop("CODEX_HOME", None)
    cmd = [sys.executable, "-m", "ctxkeep", "ingest", "--no-prefect", "--json", "--no-progress"]
    if task_runner:
        cmd += ["--task-runner", task_runner]
    c0 = cpu_children()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"ctxkeep ingest {task_runner or ''} failed ({r.returncode}): {r.stderr[-2000:]}")
    return secs, cpu_children() - c0, json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--tree", type=Path, help="reuse/build the scaled tree here")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (stores)")
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-dask-"))
    tree = a.tree or work / "home"
    try:
        if not tree.exists():
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, str(SCALE), str(tree), "--mb", str(a.mb), "--unique-text"], check=True
            )
            print(f"built tree {tree} in {time.perf_counter() - t0:.1f} s")
        files = [p for p in tree.rglob("*") if p.is_file()]
        raw = sum(p.stat().st_size for p in files)
        for p in files:  # page-cache warm-up so no run pays the first read
            p.read_bytes()
        print(f"tree {tree}: {len(files)} files, {raw / 1e6:.1f} MB; {os.cpu_count()} cores")
        rows = []
        for rnd in range(a.repeat):
            ref = None
            for label, tr in RUNS:
                store = work / f"store-{label}-{rnd}"
                secs, cpu, s = run_cli(store, tree, tr)
                d = store_digest(store)
                ref = ref or d
                rows.append((rnd, label, secs, cpu, s, d == ref))
                print(
                    f"  round {rnd + 1} {label:8s} {secs:7.1f} s wall, {cpu:7.1f} s CPU, "
                    f"{s['entries_new']:,} entries, same store as default: {d == ref}",
                    flush=True,
                )
                shutil.rmtree(store, ignore_errors=True)
        print()
        print("| run | wall s | CPU s | MB/s | entries | store = default |")
        print("|---|---|---|---|---|---|")
        for rnd, label, secs, cpu, s, same in rows:
            tag = f"{label} (round {rnd + 1})" if a.repeat > 1 else label
            print(
                f"| {tag} | {secs:.1f} | {cpu:.1f} | {raw / 1e6 / secs:.1f} | {s['entries_new']:,} | "
                f"{'yes' if same else 'NO'} |"
            )
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Read commands at scale: ``ctxkeep sessions`` and ``ctxkeep report daily`` (issue 26,
target 2: at 2.5 GB and 10 GB ``sessions`` <= 0.5 s, ``report daily`` <= 1 s, whole
process) and, with ``--tree``, an ingest with nothing new (<= 1 s at 10 GB), this
checkout side by side with a baseline checkout, in one run, on the same store.

    uv run python tests/bench/bench_reads.py --store /tmp/big-store \\
        --tree /tmp/tree-big2500 --baseline /work/main
    uv run python tests/bench/bench_reads.py --store /tmp/store10k2 --no-copy \\
        --tree /tmp/tree10000 --baseline /work/main

``--tree`` must be the tree the store was built from (the no-op ingest discovers the
sessions under it: another tree would be ingested into the store). Bytecode is
compiled once per checkout into a scratch cache (``PYTHONPYCACHEPREFIX``), as an
installed ctxkeep has it (``PYTHONDONTWRITEBYTECODE`` would compile every module of
every run: ~0.1-0.3 s of each).

The store is copied once into a scratch directory first (a read command brings DuckDB
current and may write; ``--no-copy`` reads DIR itself). Each command runs ``--runs``
times per checkout (alternating, after one warm-up run each), as
``<checkout>/.venv/bin/python -P -m ctxkeep ... --home STORE`` (in the checkout) with ``HOME=TREE`` and
``COLUMNS=120``; printed: median and best wall seconds, median CPU seconds (user +
system of the process and its children), output lines, the ratio to the baseline, and
the 1-minute load average at the start and end. Asserts nothing (figures only).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYCACHE = Path(tempfile.gettempdir()) / "ctxkeep-bench-pycache"
#: (label, arguments after ``ctxkeep``, the baseline's arguments (None: the same), target
#: seconds or None: for information). A baseline without pages lists every session.
COMMANDS = [
    ("sessions", ["sessions"], None, 0.5),
    ("sessions --json", ["sessions", "--json"], None, 0.5),
    ("report daily", ["report", "daily"], None, 1.0),
    ("report daily --json", ["report", "daily", "--json"], None, 1.0),
    ("sessions --all", ["sessions", "--all"], ["sessions"], None),
]
#: with ``--tree``: the no-op re-ingest of the tree the store was built from
NOOP = ("ingest, nothing new", ["ingest", "--no-prefect", "--json", "--no-progress"], None, 1.0)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(python: Path, args: list[str], store: Path, env: dict) -> tuple[float, float, int, int, str]:
    """``(wall s, CPU s, output lines, exit code, first line of stderr)`` of one
    whole-process run."""
    env = {**env, "PYTHONPYCACHEPREFIX": str(PYCACHE / python.parents[2].name)}
    c0, t0 = _cpu(), time.perf_counter()
    # -P and the checkout as the working directory: ``-m`` would import ctxkeep from
    # the caller's directory (a baseline run from this checkout ran this code)
    p = subprocess.run(
        [str(python), "-P", "-m", "ctxkeep", *args, "--home", str(store)],
        env=env,
        capture_output=True,
        check=False,
        cwd=python.parents[2],
    )
    first = (p.stderr.decode(errors="replace").strip().splitlines() or [""])[0]
    return time.perf_counter() - t0, _cpu() - c0, p.stdout.count(b"\n"), p.returncode, first


def _python(checkout: Path) -> Path:
    py = checkout / ".venv" / "bin" / "python"
    if not py.exists():
        sys.exit(f"error: no {py} - run `uv sync --all-extras` in {checkout}")
    return py


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True, help="the ctxkeep home (store.db, analytics.duckdb)")
    ap.add_argument("--tree", type=Path, help="HOME of the runs (the scaled tree the store was built from)")
    ap.add_argument(
        "--baseline",
        type=Path,
        default=Path("/work/main"),
        help="the baseline checkout (c7b628a cannot open a store of the current schema: main)",
    )
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-copy", action="store_true", help="read --store itself (it may be written)")
    ap.add_argument("--only", action="append", help="only the commands with this label (repeatable)")
    a = ap.parse_args()
    sides = [("this", _python(ROOT)), ("baseline", _python(a.baseline))]
    scratch = None
    store = a.store
    if not a.no_copy:
        scratch = Path(tempfile.mkdtemp(prefix="bench-reads-"))
        store = scratch / "store"
        t = time.perf_counter()
        shutil.copytree(a.store, store, ignore=shutil.ignore_patterns("*.lock"))
        print(f"store copied to {store} in {time.perf_counter() - t:.1f} s", flush=True)
    env = {**os.environ, "COLUMNS": "120", "CTXKEEP_IDLE_SECONDS": "0"}
    env.pop("PREFECT_API_URL", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    commands = list(COMMANDS)
    if a.tree:
        env["HOME"] = str(a.tree)
        for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):  # the tree's own folders
            env.pop(var, None)
        commands.append(NOOP)
    size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) / 1e9
    print(f"store {a.store} ({size:.2f} GB); this {ROOT}; baseline {a.baseline}; {a.runs} runs each")
    load0 = os.getloadavg()[0]
    print(f"load average at start: {load0:.2f}", flush=True)
    print(
        f"{'command':<22}{'side':<10}{'wall med':>9}{'best':>8}{'CPU med':>9}{'lines':>8}"
        f"{'rc':>4}{'target':>8}{'x base':>8}"
    )
    try:
        for label, args, base_args, target in commands:
            if a.only and label not in a.only:
                continue
            argv = {"this": args, "baseline": base_args or args}
            for name, py in sides:  # warm-up: page cache, DuckDB brought current
                _run(py, argv[name], store, env)
            got: dict[str, list[tuple[float, float, int, int, str]]] = {n: [] for n, _ in sides}
            for _ in range(a.runs):
                for name, py in sides:
                    got[name].append(_run(py, argv[name], store, env))
            base = statistics.median(w for w, *_ in got["baseline"])
            for name, _py in sides:
                runs = got[name]
                wall = statistics.median(w for w, *_ in runs)
                cpu = statistics.median(c for _, c, *_ in runs)
                lines, rc, why = runs[-1][2], runs[-1][3], runs[-1][4]
                mark = "-" if target is None else (f"{target:.1f}" + (" ok" if wall <= target else " !"))
                ratio = f"{wall / base:.2f}" if name == "this" and base else ""
                print(
                    f"{label:<22}{name:<10}{wall:>9.3f}{min(w for w, *_ in runs):>8.3f}{cpu:>9.3f}"
                    f"{lines:>8,}{rc:>4}{mark:>8}{ratio:>8}" + (f"  ({why})" if rc else ""),
                    flush=True,
                )
    finally:
        print(f"load average at end: {os.getloadavg()[0]:.2f} (start {load0:.2f})")
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

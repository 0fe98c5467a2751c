"""Timeline of a first ingest of the corpus, every process (issue 14 target 2; a script
that prints figures, not a test, not collected by pytest).

Copies a checkout's ``ctxkeep`` package to a temp dir, adds ``perf_counter`` stamps
(wall, and the process's CPU seconds) at the phase boundaries of the ingest process,
its side processes and its threads (the CLI's plan, the engine's imports and setup,
each group's transform and commit, each request to a side process and its answer,
the side processes' imports, encoder build and idle steps, the closing DuckDB sync),
runs ``ctxkeep ingest --no-progress`` into a fresh store from that copy (this
checkout's ``.venv``; the corpus home as ``HOME``, read only; derived caches in a temp
dir, warmed by one run first), and prints per run: the wall seconds, when the engine
was ready (imports done), the ingest process's CPU, its side processes' CPU, how long
the ingest waited for token counts and for the closing DuckDB sync, and the side
process's CPU seconds in that sync. ``--baseline DIR``
runs another checkout the same way, alternating run by run. ``--show`` prints the last
run's whole timeline (``Pn``: process n in order of its first stamp).

The stamps are text anchors in the sources: an anchor a later change removed is
reported (``missing stamp``) and that stamp left out, never a failure.

Usage::

    .venv/bin/python tests/bench/bench_timeline.py [--runs 3] [--baseline DIR] [--show]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("CTXKEEP_CORPUS") or (ROOT.parent / "shared" / "corpus")).resolve()

_TL = """import os
import threading
import time

_TL = os.environ.get("CTXKEEP_TIMELINE")


def tl(label: str) -> None:
    if _TL:
        with open(_TL, "a") as f:
            f.write(
                f"{time.perf_counter():.4f} {os.getpid()}:{time.process_time():.3f} "
                f"{threading.current_thread().name.replace(' ', '_')} {label}\\n"
            )
"""

#: (file, anchor, replacement): the stamps
STAMPS = [
    (
        "cli/core.py",
        '    """Ingest new session bytes of every agent into the store (the main job)."""\n',
        '    """Ingest new session bytes of every agent into the store (the main job)."""\n'
        '    from ctxkeep._tl import tl\n    tl("cli ingest")\n',
    ),
    (
        "pipeline/engine.py",
        "from ctxkeep.transforms.normalize import normalized_rows, unique_entries\n",
        "from ctxkeep.transforms.normalize import normalized_rows, unique_entries\n"
        "from ctxkeep._tl import tl\ntl('engine imported')\n",
    ),
    (
        "pipeline/engine.py",
        "    def flush() -> Group:\n        nonlocal group, size, count, files_read, vanished\n",
        "    def flush() -> Group:\n        nonlocal group, size, count, files_read, vanished\n"
        '        tl(f"transform start {len(group)} items")\n',
    ),
    (
        "pipeline/engine.py",
        "        group, size, count, files_read, vanished = [], 0, 0, 0, 0\n        return g\n",
        '        group, size, count, files_read, vanished = [], 0, 0, 0, 0\n        tl("transform end")\n'
        "        return g\n",
    ),
    (
        "pipeline/engine.py",
        "        tombs = sqlite_store.tombstoned(conn)\n        syncer = _syncer(home, conn, p)\n",
        "        tombs = sqlite_store.tombstoned(conn)\n        syncer = _syncer(home, conn, p)\n"
        '        tl("engine ready")\n',
    ),
    (
        "pipeline/engine.py",
        "        finally:  # the groups committed before an error are synced too\n"
        "            s.analytics = syncer.finish()\n",
        "        finally:  # the groups committed before an error are synced too\n"
        '            tl("finish start")\n            s.analytics = syncer.finish()\n            tl("finish end")\n',
    ),
    (
        "pipeline/writer.py",
        '    """Load one group in one transaction and add its figures to ``tot``."""\n',
        '    """Load one group in one transaction and add its figures to ``tot``."""\n'
        '    from ctxkeep._tl import tl\n    tl("store start")\n',
    ),
    (
        "pipeline/writer.py",
        "    if on_commit and (n or g.changes):\n        first",
        '    tl("store committed")\n    if on_commit and (n or g.changes):\n        first',
    ),
]

_RUN = """
import atexit, sys
from ctxkeep._tl import tl
tl("python up")
atexit.register(lambda: tl("exit"))
sys.argv = ["ctxkeep", "ingest", "--no-progress"]
from ctxkeep.cli import main
main()
"""


def instrumented(src: Path, dst: Path) -> list[str]:
    """``src/ctxkeep`` copied to ``dst/ctxkeep`` with the stamps; the anchors missing."""
    shutil.copytree(src / "ctxkeep", dst / "ctxkeep", ignore=shutil.ignore_patterns("__pycache__"))
    (dst / "ctxkeep" / "_tl.py").write_text(_TL)
    missing = []
    for rel, anchor, repl in STAMPS:
        p = dst / "ctxkeep" / rel
        text = p.read_text()
        if anchor not in text:
            missing.append(f"{rel}: {anchor.strip().splitlines()[0][:60]}")
            continue
        p.write_text(text.replace(anchor, repl, 1))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(dst / "ctxkeep")], check=True)
    return missing


def run(copy: Path, tmp: Path, out: Path) -> list[tuple[float, str, float | None, str, str]]:
    """One first ingest from ``copy``: its stamps (wall s, pid, CPU s, thread, label)."""
    store = tmp / "store"
    shutil.rmtree(store, ignore_errors=True)
    out.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        HOME=str(CORPUS / "home"),
        CTXKEEP_HOME=str(store),
        CTXKEEP_CACHE_DIR=str(tmp / "cache"),
        CTXKEEP_IDLE_SECONDS="0",
        CTXKEEP_TIMELINE=str(out),
        PYTHONPATH=str(copy),
    )
    env.pop("CLAUDE_CONFIG_DIR", None)
    env.pop("CODEX_HOME", None)
    import time

    t0 = time.perf_counter()
    # cwd: not a checkout (the side processes run ``python -m``, which puts it first on sys.path)
    r = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "-P", "-c", _RUN], env=env, capture_output=True, cwd=tmp
    )
    if r.returncode != 0:
        raise SystemExit(f"ingest failed ({r.returncode}): {r.stderr.decode()[-1500:]}")
    rows = [(t0, "launch", None, "-", "spawn")]
    for line in out.read_text().splitlines():
        t, pc, th, label = line.split(" ", 3)
        pid, _, cpu = pc.partition(":")
        rows.append((float(t), pid, float(cpu), th, label))
    return rows


def summary(rows) -> dict:
    """The run's figures from its stamps (see the module doc)."""
    t0 = rows[0][0]
    main_pid = rows[1][1]
    cpu: dict[str, float] = {}
    asked: dict[tuple[str, str], float] = {}
    waits: dict[str, float] = {}
    marks: dict[str, float] = {}
    sync_cpu = 0.0  # the side process's CPU in its closing DuckDB sync (the finish's work)
    for t, pid, c, th, label in rows[1:]:
        if pid != main_pid and label == "side op analytics_sync":
            sync_cpu -= c
        elif pid != main_pid and label == "side op done analytics_sync":
            sync_cpu += c
        cpu[pid] = c
        if pid == main_pid and label.startswith("ask "):
            asked[(th, label[4:])] = t
        elif pid == main_pid and label.startswith("answered "):
            start = asked.pop((th, label[9:]), None)
            if start is not None:
                waits[label[9:]] = waits.get(label[9:], 0.0) + t - start
        elif pid == main_pid and label in ("engine ready", "finish start", "finish end", "exit"):
            marks[label] = t - t0
    return {
        "wall": marks.get("exit", float("nan")),
        "ready": marks.get("engine ready", float("nan")),
        "own cpu": cpu.get(main_pid, float("nan")),
        "side cpu": sum(v for k, v in cpu.items() if k != main_pid),
        "count wait": waits.get("count", 0.0),
        "finish wait": marks.get("finish end", 0.0) - marks.get("finish start", 0.0),
        "sync cpu": sync_cpu,
    }


def show(rows) -> None:
    t0 = rows[0][0]
    names: dict[str, str] = {}
    for t, pid, c, th, label in rows:
        names.setdefault(pid, f"P{len(names) - 1}" if pid != "launch" else "--")
        cpu = f"{c:6.3f}" if c is not None else "     -"
        print(f"  {t - t0:7.3f} {names[pid]:>3s} cpu {cpu} {th[:22]:22s} {label}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another checkout to run alternately")
    ap.add_argument("--show", action="store_true", help="print the last run's whole timeline")
    a = ap.parse_args()
    if not (CORPUS / "home").is_dir():
        raise SystemExit(f"error: no corpus at {CORPUS} - set CTXKEEP_CORPUS")
    with tempfile.TemporaryDirectory(prefix="ctxkeep-timeline-") as td:
        tmp = Path(td)
        checkouts = {"this": ROOT, **({"baseline": a.baseline.resolve()} if a.baseline else {})}
        copies = {}
        for label, src in checkouts.items():
            copies[label] = tmp / label
            for m in instrumented(src, copies[label]):
                print(f"[{label}] missing stamp: {m}")
        run(copies["this"], tmp, tmp / "warm.txt")  # warms the rank-table cache
        got: dict[str, list] = {k: [] for k in copies}
        last = {}
        for _ in range(a.runs):
            for label, copy in copies.items():
                last[label] = run(copy, tmp, tmp / f"{label}.txt")
                got[label].append(summary(last[label]))
        print(f"first ingest of {CORPUS / 'home'}, {a.runs} runs each, load {os.getloadavg()[0]:.1f}")
        keys = list(got["this"][0])
        print(f"{'':10s}" + "".join(f"{k:>13s}" for k in keys) + "   (medians, s)")
        for label, runs in got.items():
            print(f"{label:10s}" + "".join(f"{statistics.median(r[k] for r in runs):13.3f}" for k in keys))
        if a.show:
            for label, rows in last.items():
                print(f"\n[{label}] last run:")
                show(rows)


if __name__ == "__main__":
    main()

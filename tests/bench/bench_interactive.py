"""Interactive-command benchmark (issue 14 target 2; a script that prints figures, not a
test, not collected by pytest).

Whole processes on the corpus (``$CTXKEEP_CORPUS`` or ``../shared/corpus``; its
``home`` as ``HOME``, read only), warm page cache, no Prefect server
(``PREFECT_*`` removed from the environment, so ctxkeep runs in-process), each
command run ``--runs`` times (median and best printed), side by side in one run:

- ``python -c pass``: the interpreter's own start, the floor of any Python CLI;
- ``ctxkeep --version``: the CLI's import floor (Typer; the command modules load only
  when their command runs);
- ``ctxkeep ingest`` into a fresh store (target ≤ 1.2 s), then ``ctxkeep ingest``
  with nothing new (target ≤ 0.3 s), and ``ctxkeep compress --check`` (target
  ≤ 0.5 s);
- the read paths on that store: ``ctxkeep search`` (``--json`` and text), ``show
  --session`` and ``stats`` (no pydantic on these paths since the plain read path,
  ``service/args.py`` and ``service/*_core.py``: its import and first model builds were
  ~0.06-0.08 s of CPU of each), and ``report daily``;
- ``report daily`` on a store a first ingest just made (the ingest untimed): where the
  first ingest leaves DuckDB's first build to its first reader
  (``engine.FIRST_BUILD_DEFER_BYTES``), that report pays it: first ingest + this row
  is what a new user waits for until the first report;
- agentsview (``/tmp/peers/venv/bin/agentsview`` or ``$AGENTSVIEW``):
  ``AGENTSVIEW_NO_DAEMON=1 agentsview sync`` of a copy of the same tree into a fresh
  data dir, then again with nothing new. Its HOME is a temp dir holding the copy;
  telemetry and the update check are off and its host is 127.0.0.1 (it is never
  pointed anywhere else; the machine has no network anyway).

``--baseline DIR`` (a checkout of another revision with its own ``.venv``, e.g.
``git worktree add /tmp/base main && (cd /tmp/base && uv sync)``) runs the same ctxkeep
rows with that checkout too, alternating run by run, so before and after are measured
side by side under the same load.

Derived caches (``$CTXKEEP_CACHE_DIR``: a baseline's BPE rank table; this checkout
keeps none) live in the bench's temp dir, never under the corpus HOME: warmed by one
run first (as any earlier ctxkeep run on a machine warms them), plus one row with the
cache emptied before each run.

The package's bytecode is compiled first (``compileall``), as an installed ctxkeep has
it: with ``PYTHONDONTWRITEBYTECODE=1`` (set on this machine) an editable checkout
would otherwise compile ~60 modules on every start (~0.1 s of a no-op ingest).
Besides the wall seconds, each row gives the CPU seconds (user + sys) of the process
with its children (a baseline's side process, the reader process) and, for ctxkeep, of
the process alone ("own CPU": its critical path when the other core is free; ctxkeep
runs as ``python -c`` calling ``ctxkeep.__main__.main``, as its console script does): on a shared
machine the CPU figures are the steadier ones.

Then the imports of a no-op ingest and of a first ingest's own process (``python -X
importtime``): the biggest top-level modules, and whether Polars, DuckDB, Prefect, Rich,
tiktoken, pyarrow or pydantic were imported.

Usage::

    .venv/bin/python tests/bench/bench_interactive.py [--runs 5] [--baseline DIR] [--only compress]
"""

from __future__ import annotations

import argparse
import compileall
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
CORPUS = Path(os.environ.get("CTXKEEP_CORPUS") or (ROOT.parent / "shared" / "corpus")).resolve()
CTXKEEP = ROOT / ".venv" / "bin" / "ctxkeep"
AGENTSVIEW = Path(os.environ.get("AGENTSVIEW", "/tmp/peers/venv/bin/agentsview"))
#: the derived-cache dir of every ctxkeep run here (set in main: a temp dir)
CACHE = Path(tempfile.gettempdir()) / "ctxkeep-bench-cache"
HEAVY = ("polars", "duckdb", "prefect", "rich", "tiktoken", "pyarrow", "pydantic")


def clean_env(**extra: str) -> dict:
    """This environment without Prefect settings or agent-dir overrides, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PREFECT_") and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "CTXKEEP_HOME")
    }
    # every cache in the bench's temp dir: HOME is the corpus, which nothing may write
    env.update(
        {
            "CTXKEEP_IDLE_SECONDS": "0",
            "CTXKEEP_CACHE_DIR": str(CACHE),
            "XDG_CACHE_HOME": str(CACHE / "xdg"),
            **extra,
        }
    )
    return env


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: runs the ctxkeep CLI as its console script does (``ctxkeep.__main__.main``: a first
#: ingest's reader starts there) and writes the process's own CPU seconds (without its
#: side and reader processes) to stderr at exit
_OWN = """
import resource, sys
sys.argv = ["ctxkeep", *sys.argv[1:]]
try:
    try:
        from ctxkeep.__main__ import main
    except ImportError:  # a checkout from before the console script's own module
        from ctxkeep.cli import main
    main()
finally:
    r = resource.getrusage(resource.RUSAGE_SELF)
    sys.stderr.write(f"\\nOWN-CPU {r.ru_utime + r.ru_stime:.4f}\\n")
"""


def ctxkeep_cmd(root: Path, *args: str) -> list[str]:
    """``ctxkeep ARGS`` of the checkout ``root``, reporting its own CPU (``_OWN``)."""
    # -P: no current directory on sys.path (a baseline must import its own ctxkeep)
    return [str(root / ".venv" / "bin" / "python"), "-P", "-c", _OWN, *args]


def timed(cmd: list[str], env: dict, cwd: Path | None = None) -> tuple[float, float, float | None]:
    """(wall seconds, CPU seconds of the process and its children, CPU seconds of the
    process alone or None) of one whole process; raises SystemExit when it fails."""
    c0 = _children_cpu()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-1500:]}")
    own = [ln for ln in r.stderr.splitlines() if ln.startswith("OWN-CPU ")]
    return secs, _children_cpu() - c0, float(own[-1].split()[1]) if own else None


def series(runs: int, make) -> list[tuple[float, float]]:
    """``runs`` timings; ``make()`` returns ``(cmd, env)`` for each run (fresh stores)."""
    return [timed(*make()) for _ in range(runs)]


def warm(tree: Path) -> int:
    """Read every file below ``tree`` once (page cache); returns their bytes."""
    n = 0
    for p in tree.rglob("*"):
        if p.is_file():
            n += len(p.read_bytes())
    return n


def import_report(home: Path, store: Path) -> tuple[list[tuple[str, float]], list[str]]:
    """An ingest into ``store`` under ``-X importtime`` (a no-op when it holds the tree,
    a first ingest when it is new): the 8 biggest top-level imports (name, cumulative
    ms) and which of ``HEAVY`` were imported."""
    r = subprocess.run(
        [str(CTXKEEP.with_name("python")), "-X", "importtime", "-m", "ctxkeep", "ingest", "--json"],
        env=clean_env(HOME=str(home), CTXKEEP_HOME=str(store)),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    top, names = [], set()
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum, name = line.split("|")
        names.add(name.strip())
        if not name.startswith("  "):  # imported by no other module: a top-level import
            top.append((name.strip(), int(cum) / 1000))
    top.sort(key=lambda x: -x[1])
    return top[:8], [m for m in HEAVY if m in names]


def ctxkeep_rows(
    checkouts: list[tuple[str, Path, dict]], runs: int, home: Path, work: Path, only: list[str] | None = None
) -> list[tuple[str, list[tuple[float, float, float | None]], str]]:
    """The ctxkeep rows for each ``(label, checkout root, extra environment)``: the
    runs of the checkouts alternate (run 1 of each, run 2 of each, ...), so a load
    change hits them alike. ``only``: the rows whose name holds one of these strings
    (all when None)."""
    stores = iter(range(10**6))
    out: list[tuple[str, list[tuple[float, float, float | None]], str]] = []

    def env(extra: dict, **kw: str) -> dict:
        return clean_env(**extra, **kw)

    def fresh(root: Path, extra: dict) -> tuple[list[str], dict]:
        s = work / f"store-{next(stores)}"
        return ctxkeep_cmd(root, "ingest", "--no-progress"), env(extra, HOME=str(home), CTXKEEP_HOME=str(s))

    def cold(root: Path, extra: dict) -> tuple[list[str], dict]:
        shutil.rmtree(CACHE, ignore_errors=True)
        return fresh(root, extra)

    last = {}
    for label, root, extra in checkouts:  # a store per checkout for the no-op rows; warms the cache
        last[label] = work / f"store-last-{next(stores)}"
        timed(
            ctxkeep_cmd(root, "ingest", "--no-progress"),
            env(extra, HOME=str(home), CTXKEEP_HOME=str(last[label])),
        )
        # DuckDB current (a first ingest may leave its first build to the first reader,
        # which a no-op ingest catches up too): the rows below measure the steady state;
        # the first build has its own row ("report daily, right after a first ingest")
        timed(
            ctxkeep_cmd(root, "report", "daily"),
            env(extra, HOME=str(home), CTXKEEP_HOME=str(last[label])),
        )

    def noop(root, extra, label):
        return ctxkeep_cmd(root, "ingest"), env(extra, HOME=str(home), CTXKEEP_HOME=str(last[label]))

    def check(root, extra, label):
        return ctxkeep_cmd(root, "compress", "--check"), env(
            extra, HOME=str(home), CTXKEEP_HOME=str(last[label])
        )

    def report_after_first(root, extra, label):
        """``report daily`` on a store a first ingest (untimed) just made: it builds
        DuckDB first where that ingest left it to its first reader
        (``engine.FIRST_BUILD_DEFER_BYTES``)."""
        s = work / f"store-{next(stores)}"
        timed(ctxkeep_cmd(root, "ingest", "--no-progress"), env(extra, HOME=str(home), CTXKEEP_HOME=str(s)))
        return ctxkeep_cmd(root, "report", "daily"), env(extra, HOME=str(home), CTXKEEP_HOME=str(s))

    def version(root, extra, label):
        return ctxkeep_cmd(root, "--version"), env(extra)

    def read(*args: str):
        """A read-only command on the store of the no-op rows (the interactive path)."""

        def make(root, extra, label):
            return ctxkeep_cmd(root, *args), env(extra, HOME=str(home), CTXKEEP_HOME=str(last[label]))

        return make

    specs = [
        ("--version", version, ""),
        ("ingest (first)", lambda r, e, _: fresh(r, e), "≤ 1.2 s"),
        ("ingest (first, cold cache)", lambda r, e, _: cold(r, e), ""),
        ("ingest (nothing new)", noop, "≤ 0.3 s"),
        ("compress --check", check, "≤ 0.5 s"),
        ("search QUERY --json", read("search", "python: command not found", "--json"), ""),
        ("search QUERY (text)", read("search", "orchestrator", "--agent", "codex"), ""),
        ("show --session", read("show", "--session", "019a802a"), ""),
        ("stats", read("stats"), ""),
        ("report daily (DuckDB current)", read("report", "daily"), ""),
        ("report daily, right after a first ingest", report_after_first, ""),
    ]
    for name, make, target in specs:
        if only and not any(o in name for o in only):
            continue
        got: dict[str, list[tuple[float, float, float | None]]] = {c[0]: [] for c in checkouts}
        for _ in range(runs):
            for label, root, extra in checkouts:
                got[label].append(timed(*make(root, extra, label)))
        if "cold" in name:  # leave the cache warm for the next rows
            timed(*fresh(checkouts[0][1], checkouts[0][2]))
        for label, _, _ in checkouts:
            out.append((f"ctxkeep {name} [{label}]", got[label], target))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", type=Path, help="another checkout (with .venv) to run side by side")
    ap.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="only the ctxkeep rows whose name holds TEXT (repeatable; e.g. 'compress'), no agentsview rows",
    )
    a = ap.parse_args()
    home = CORPUS / "home"
    if not home.is_dir():
        raise SystemExit(f"no corpus at {home}: set CTXKEEP_CORPUS")
    if not CTXKEEP.exists():
        raise SystemExit(f"no {CTXKEEP}: run `uv sync` first")
    checkouts = [("this", ROOT, {})]
    if a.baseline:
        base = a.baseline.resolve()
        if not (base / ".venv" / "bin" / "ctxkeep").exists():
            raise SystemExit(f"no {base}/.venv/bin/ctxkeep: run `uv sync` in the baseline checkout")
        checkouts.append(("baseline", base, {}))
    work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-interactive-"))
    global CACHE
    CACHE = work / "cache"
    rows: list[tuple[str, list[tuple[float, float, float | None]], str]] = []
    for root in {c[1] for c in checkouts}:
        compileall.compile_dir(root / "ctxkeep", quiet=1)
    try:
        mb = warm(home) / 1e6
        print(f"corpus {home}: {mb:.1f} MB; {a.runs} runs each; load average {os.getloadavg()[0]:.1f}")
        py = [sys.executable, "-c", "pass"]
        rows.append(("python -c pass", series(a.runs, lambda: (py, clean_env())), ""))
        rows += ctxkeep_rows(checkouts, a.runs, home, work, a.only)
        last = work / "store-last-0"
        if a.only:
            pass
        elif AGENTSVIEW.exists():
            av_home = work / "av-home"
            shutil.copytree(home, av_home, symlinks=True)
            dirs = iter(range(10**6))
            base = {
                "HOME": str(av_home),
                "AGENTSVIEW_NO_DAEMON": "1",
                "AGENTSVIEW_TELEMETRY_ENABLED": "false",
                "AGENTSVIEW_DISABLE_UPDATE_CHECK": "1",
                "AGENTSVIEW_NO_BROWSER": "1",
                "AGENTSVIEW_HOST": "127.0.0.1",
            }

            def av_first():
                d = work / f"av-data-{next(dirs)}"
                return [str(AGENTSVIEW), "sync"], clean_env(**base, AGENTSVIEW_DATA_DIR=str(d))

            rows.append(("agentsview sync (first)", series(a.runs, av_first), ""))
            av_env = clean_env(**base, AGENTSVIEW_DATA_DIR=str(work / "av-data-0"))
            rows.append(
                (
                    "agentsview sync (nothing new)",
                    series(a.runs, lambda: ([str(AGENTSVIEW), "sync"], av_env)),
                    "",
                )
            )
        else:
            print(f"agentsview: not found at {AGENTSVIEW} (set $AGENTSVIEW); its rows are left out")

        floor = statistics.median(t[0] for t in rows[0][1])
        print(
            f"\n{'command':<58}{'median s':>9}{'best s':>8}{'- python':>10}{'CPU s':>8}{'own CPU':>9}  target"
        )
        for name, ts, target in rows:
            walls = [t[0] for t in ts]
            med = statistics.median(walls)
            cpu = statistics.median(t[1] for t in ts)
            owns = [t[2] for t in ts if len(t) > 2 and t[2] is not None]
            own = f"{statistics.median(owns):>9.3f}" if owns else f"{'':>9}"
            print(f"{name:<58}{med:>9.3f}{min(walls):>8.3f}{med - floor:>10.3f}{cpu:>8.3f}{own}  {target}")
        print(f"load average at the end {os.getloadavg()[0]:.1f} (2 cores)")

        top, heavy = import_report(home, last)
        print("\nno-op ingest, biggest top-level imports (-X importtime, cumulative ms):")
        for name, ms in top:
            print(f"  {name:<40}{ms:>8.1f}")
        print(f"  of {', '.join(HEAVY)}: imported {', '.join(heavy) or 'none'}")
        top, heavy = import_report(home, work / "store-imports-first")
        print("\nfirst ingest (the ingest process), biggest top-level imports:")
        for name, ms in top:
            print(f"  {name:<40}{ms:>8.1f}")
        print(f"  of {', '.join(HEAVY)}: imported {', '.join(heavy) or 'none'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

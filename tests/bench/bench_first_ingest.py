"""The first ingest of the corpus, side by side with other checkouts (issue 26, target 3:
≤ 1.0 s wall on a quiet machine; a script that prints figures, not a test).

Each run is a whole ``ctxkeep ingest --no-progress`` process into a fresh store
(``--home``), with a copy of the corpus's ``home`` as ``HOME`` (``$CTXKEEP_CORPUS`` or
``../shared/corpus``; copied once into the bench's temp dir, page cache warm), run as
its console script does (``python -P -c`` calling ``ctxkeep.__main__.main``, which starts
a first ingest's reader before the CLI's imports; the package's bytecode compiled first,
as an installed ctxkeep has it). The checkouts alternate run by run
(run 1 of each, run 2 of each, ...), so a change of load hits them alike. Printed per
checkout: the wall (median, best), the CPU seconds (user + sys) of the process with its
children, and of its main thread and its other threads (``CTXKEEP_BENCH_THREADS``: the
process writes each Python thread's CPU seconds at exit), with the load average at the
start and the end. On a shared machine walls are noise and CPU seconds the steadier
figures; the target is a quiet machine's wall.

Each run's ``CTXKEEP_TRACE=1`` lines (``pipeline.prestart.trace``) give its timeline
(the last run's is printed: each process's CPU seconds and the wall at the engine's
start, the todo sent to the reader started with the command, each chunk sent and taken,
each group, the last group read and written) and its **critical path** (``crit``:
``critical_path``): the ingest process's own CPU plus what it would wait for its reader
with each process on a core of its own, the figure by which a two-process first ingest
can be judged under load (a loaded machine's wall is not; a quiet machine's wall is
below it: Polars, SQLite and zstd release the GIL). ``reader`` is the CPU of the
ingest's child processes. ``CTXKEEP_EARLY_READER=0`` (a ``--variant``) takes the early
reader back.

``--compare`` then checks that each checkout's store equals this one's: every row of
entries, usage, chunks, contents, the FTS5 tables' contents, projects, files,
watermarks (their offsets and hashes), the vault's files, generations, segments and
objects (ids, lengths, digests), and the vault's pack bytes (decompressed content by
digest). A difference is printed and the script exits 1.

    .venv/bin/python tests/bench/bench_first_ingest.py --runs 7 --baseline /work/wt-int --compare \
        --variant apart:CTXKEEP_PART_GROUP_MB=0 --variant gc-on:CTXKEEP_GC_PAUSE_MB=0

``--variant`` runs this checkout again with environment settings, alternating with the
rest: each cut of the first ingest can be taken back alone (``CTXKEEP_PART_GROUP_MB=0``:
a group per agent's part; ``CTXKEEP_GC_PAUSE_MB=0``: the cyclic collector not paused)
to see its own figure on a quiet machine, where walls count.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("CTXKEEP_CORPUS", ROOT.parent / "shared" / "corpus"))

#: runs the CLI as its console script does and, at exit (an atexit handler: a first
#: ingest ends with ``os._exit`` after running them, ``prestart.exit_now``), writes the
#: process's own CPU and each Python thread's CPU seconds (threads counted when they
#: end) to stderr
_OWN = """
import atexit, resource, sys, threading, time
_t = {}
_run = threading.Thread.run
def _counted(self):
    try:
        _run(self)
    finally:
        n = self.name.split("_")[0].rstrip("-0123456789") or self.name
        _t[n] = _t.get(n, 0.0) + time.thread_time()
threading.Thread.run = _counted
def _report():
    r = resource.getrusage(resource.RUSAGE_SELF)
    _t["main"] = time.thread_time()
    sys.stderr.write(f"\\nCTXKEEP-TRACE ingest exit {time.process_time():.4f} {time.perf_counter():.4f}\\n")
    sys.stderr.write(f"\\nOWN-CPU {r.ru_utime + r.ru_stime:.4f}\\n")
    sys.stderr.write("THREADS " + " ".join(f"{k}={v:.4f}" for k, v in _t.items()) + "\\n")
atexit.register(_report)
sys.argv = ["ctxkeep", *sys.argv[1:]]
try:
    from ctxkeep.__main__ import main
except ImportError:  # a checkout from before the console script's own module
    from ctxkeep.cli import main
main()
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _env(home: Path, store: Path, cache: Path, extra: dict) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PREFECT_") and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "CTXKEEP_HOME")
    }
    env.update(
        HOME=str(home),
        CTXKEEP_HOME=str(store),
        CTXKEEP_IDLE_SECONDS="0",
        CTXKEEP_CACHE_DIR=str(cache),
        CTXKEEP_TRACE="1",
        XDG_CACHE_HOME=str(cache / "xdg"),
        **extra,
    )
    return env


def one_run(root: Path, home: Path, store: Path, cache: Path, extra: dict) -> dict:
    """One first ingest by checkout ``root`` (with ``extra`` environment) into
    ``store``: wall, CPU, threads."""
    cmd = [str(root / ".venv" / "bin" / "python"), "-P", "-c", _OWN, "ingest", "--no-progress"]
    c0 = _children_cpu()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=_env(home, store, cache, extra), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{root}: ingest failed ({r.returncode}): {r.stderr[-1500:]}")
    out = {"wall": wall, "cpu": _children_cpu() - c0, "trace": []}
    for ln in r.stderr.splitlines():
        if ln.startswith("CTXKEEP-TRACE "):  # role event cpu wall (prestart.trace)
            _, role, ev, cpu, at = ln.split()
            out["trace"].append((role, ev, float(cpu), float(at) - t0))
        if ln.startswith("OWN-CPU "):
            out["own"] = float(ln.split()[1])
        elif ln.startswith("THREADS "):
            for kv in ln.split()[1:]:
                k, v = kv.split("=")
                out["t:" + k] = float(v)
    return out


def critical_path(r: dict) -> float:
    """The run's critical path in CPU seconds, as a quiet machine of 2 cores would run
    it with each process on a core of its own and each process's threads serialized
    (what a loaded machine's wall cannot show): the ingest process's own CPU plus the
    time it would wait for its reader process's chunks. The reader (``prestart.trace``
    events) starts at the ingest's ``spawn``, is ``ready`` after its imports, reads
    from when the ingest sent its ``todo``, and sends chunk k at its start plus the
    CPU it used from the todo to that ``sent``; the ingest gets chunk k at its CPU at
    that ``got`` plus the waits before, or when the chunk was sent, whichever is later.
    A ``got`` before the ingest's ``need`` (its main thread turning to the reader's
    files, ``reader_process.MergedReads``; a checkout without it: none) counts at the
    ``need``: the read-ahead thread took the chunk while the main thread still worked
    on its own files (the reader sending its batches before it seals their bytes,
    ``--seal-late``), no wait of the run. The reader's sealed captures (its last
    ``sent``), when the writer traces ``pack`` (a group sealed late,
    ``writer.Group.pack_late``: where it needs that group's pack, at its manifest rows),
    count at that ``pack``, whenever they came: the thread that takes them
    (``reader_process._take_sealed``) logs its ``got`` at the process's CPU at arrival,
    behind the reader's mapped clock under load while the process is busy, no wait.
    Without a reader process: its own CPU. (A quiet machine runs the ingest's threads
    partly at once, Polars and SQLite outside the GIL: its wall is below this.)"""
    own = r.get("own", r["cpu"])
    ing = [(ev, cpu) for role, ev, cpu, _ in r["trace"] if role == "ingest"]
    rd = [(ev, cpu) for role, ev, cpu, _ in r["trace"] if role == "reader"]
    spawn = next((c for ev, c in ing if ev == "spawn"), None)
    todo = next((c for ev, c in ing if ev == "todo"), None)
    ready = next((c for ev, c in rd if ev == "ready"), None)
    got_todo = next((c for ev, c in rd if ev == "todo"), None)
    if spawn is None or todo is None or ready is None or got_todo is None:
        return own
    start = max(spawn + ready, todo)  # no ingest wait can come before its todo
    sent = [start + c - got_todo for ev, c in rd if ev == "sent"]
    need = next((c for ev, c in ing if ev == "need"), 0.0)
    pack = next((c for ev, c in ing if ev == "pack"), None)
    waited = 0.0
    k = 0
    for ev, c in ing:
        if ev == "got" and sent:
            j = min(k, len(sent) - 1)
            if pack is not None and j == len(sent) - 1:  # the sealed captures: needed at ``pack``
                waited = max(waited, sent[j] - pack)
            else:
                waited = max(waited, sent[j] - max(c, need))
            k += 1
    return own + waited


def timeline(r: dict) -> str:
    """One run's trace as ``role event +wall(cpu)`` steps (the wall from the bench's
    start of the process, the CPU the process had used then)."""
    return "  ".join(f"{role[0]}:{ev} +{at:.3f}({cpu:.3f})" for role, ev, cpu, at in r["trace"])


# ---------------------------------------------------------------- store equality

#: (table, the columns to compare, ORDER BY); None: every column
_TABLES = [
    # interned ids (files, projects, vocabulary terms) are numbered in the order a group
    # meets their values: compared by value (the rows' order is the entries')
    (
        "entry_rows e JOIN files USING (file_id) LEFT JOIN projects USING (project_id)",
        "e.rowid, e.*, files.path, projects.project_dir",
        "1",
    ),
    ("files", "path", "1"),
    ("projects", "project_dir", "1"),
    ("vocab", "term", "1"),
    ("contents", None, "1"),
    ("chunk_rows", None, "1"),
    ("usage", None, "1, 2"),
    ("coverage", None, "1, 2, 3"),
    ("quarantine", None, "1"),
    ("media", None, "1"),
    ("vault_files", None, "1"),
    ("vault_generations", None, "1"),
    ("vault_segments", None, "1, 2"),
    ("vault_objects", "sha, stored, raw", "1"),
    ("vault_media", None, "1"),
    ("fts_words", "rowid, *", "1"),
    ("fts_grams", "rowid, *", "1"),
    ("fts_symbols", "rowid, *", "1"),
    ("fts_vocab", "term", "1"),
]
#: columns that hold a time of the run (an entry's ``ingest_id`` names its group's load
#: stamp, a time: ``ingests``), differing between any two runs
_VOLATILE = {"ingest_id", "created_at", "updated_at", "file_id", "project_id"}


def _rows(db: Path, table: str, cols: str | None, order: str) -> tuple[list[str], list[tuple]] | None:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        try:
            name = table if " " in table else f'"{table}"'
            cur = c.execute(f"SELECT {cols or '*'} FROM {name} ORDER BY {order}")
        except sqlite3.OperationalError as e:  # a table this checkout's schema lacks
            return ["error"], [(str(e),)]
        names = [d[0] for d in cur.description]
        keep = [i for i, n in enumerate(names) if n not in _VOLATILE]
        return [names[i] for i in keep], [tuple(r[i] for i in keep) for r in cur]


#: the watermark columns a checkout decides (not the file's dev/inode/time)
_WATERMARK_COLUMNS = ("path", "agent", "size", "offset", "head_len", "head_hash", "parser_version", "state")


def _watermarks(db: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        cur = c.execute("SELECT * FROM watermarks ORDER BY 1")
        names = [d[0] for d in cur.description]
        keep = [i for i, n in enumerate(names) if n in _WATERMARK_COLUMNS]
        return [tuple(r[i] for i in keep) for r in cur]


def _vault_bytes(store: Path) -> dict[bytes, bytes]:
    """Each vault object's bytes (read from its pack, checked against its digest) by
    SHA-256: the content, whichever pack (one per group) holds it."""
    from ctxkeep.sinks.vault.packs import read_object

    with sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True) as c:
        if not c.execute("SELECT 1 FROM sqlite_master WHERE name = 'vault_objects'").fetchone():
            return {}  # a checkout without the vault
        rows = c.execute(
            "SELECT o.sha, p.name, o.offset, o.stored, o.raw FROM vault_objects o JOIN vault_packs p USING (pack_id)"
        ).fetchall()
    return {sha: read_object(store, name, off, stored, raw, sha) for sha, name, off, stored, raw in rows}


def compare(a: Path, b: Path) -> list[str]:
    """The differences between stores ``a`` and ``b`` (empty when they are equal)."""
    diffs = []
    for table, cols, order in _TABLES:
        ra, rb = _rows(a / "store.db", table, cols, order), _rows(b / "store.db", table, cols, order)
        if ra != rb:
            na = len(ra[1]) if ra else None
            nb = len(rb[1]) if rb else None
            diffs.append(f"{table}: {na} rows vs {nb}")
    if _watermarks(a / "store.db") != _watermarks(b / "store.db"):
        diffs.append("watermarks differ")
    if _vault_bytes(a) != _vault_bytes(b):
        diffs.append("vault objects' bytes differ")
    return diffs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--baseline", type=Path, action="append", default=[], help="another checkout with .venv (repeatable)"
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL:VAR=VALUE[,VAR=VALUE]",
        help="this checkout again with these environment settings (repeatable), e.g. "
        "'apart:CTXKEEP_PART_GROUP_MB=0' (a group per agent) or 'gc:CTXKEEP_GC_PAUSE_MB=0'",
    )
    ap.add_argument("--compare", action="store_true", help="check each checkout's store equals this one's")
    a = ap.parse_args()
    src = CORPUS / "home"
    if not src.is_dir():
        raise SystemExit(f"no corpus at {src}: set CTXKEEP_CORPUS")
    checkouts: list[tuple[str, Path, dict]] = [("this", ROOT, {})]
    for v in a.variant:
        label, _, sets = v.partition(":")
        checkouts.append((label, ROOT, dict(kv.split("=", 1) for kv in sets.split(",") if kv)))
    checkouts += [(f"base{i + 1}", p.resolve(), {}) for i, p in enumerate(a.baseline)]
    for _, root, _ in checkouts:
        if not (root / ".venv" / "bin" / "python").exists():
            raise SystemExit(f"no {root}/.venv: run `uv sync` there")
        compileall.compile_dir(root / "ctxkeep", quiet=1)
    work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-first-"))
    try:
        home = work / "home"
        shutil.copytree(src, home, symlinks=True)
        for p in home.rglob("*"):
            if p.is_file():
                p.read_bytes()
        load0 = os.getloadavg()
        res: dict[str, list[dict]] = {label: [] for label, _, _ in checkouts}
        last: dict[str, Path] = {}
        n = 0
        for label, root, extra in checkouts:  # one untimed run each: caches, page cache
            last[label] = work / f"warm-{label}"
            one_run(root, home, last[label], work / f"cache-{label}", extra)
        for _ in range(a.runs):
            for label, root, extra in checkouts:
                n += 1
                store = work / f"store-{n}"
                res[label].append(one_run(root, home, store, work / f"cache-{label}", extra))
                shutil.rmtree(store, ignore_errors=True)
        load1 = os.getloadavg()
        print(f"corpus {src}; {a.runs} alternating runs each")
        print(
            f"load average at the start {load0[0]:.2f} {load0[1]:.2f}, at the end {load1[0]:.2f} {load1[1]:.2f} (2 cores)"
        )
        keys = sorted({k for rs in res.values() for r in rs for k in r if k.startswith("t:")})
        head = f"{'checkout':<34}{'wall med':>9}{'best':>7}{'CPU med':>9}{'best':>7}{'own CPU':>9}"
        head += f"{'reader':>8}{'crit med':>9}{'best':>7}"
        head += "".join(f"{k[2:][:14]:>15}" for k in keys)
        print(head)
        for label, root, extra in checkouts:
            rs = res[label]
            w = [r["wall"] for r in rs]
            c = [r["cpu"] for r in rs]
            name = f"{label} {root.name}" + (
                " " + " ".join(f"{k}={v}" for k, v in extra.items()) if extra else ""
            )
            line = f"{name[:33]:<34}{statistics.median(w):>9.3f}{min(w):>7.3f}"
            line += f"{statistics.median(c):>9.3f}{min(c):>7.3f}"
            line += f"{statistics.median(r.get('own', 0.0) for r in rs):>9.3f}"
            line += f"{statistics.median(r['cpu'] - r.get('own', r['cpu']) for r in rs):>8.3f}"
            crit = [critical_path(r) for r in rs]
            line += f"{statistics.median(crit):>9.3f}{min(crit):>7.3f}"
            line += "".join(f"{statistics.median(r.get(k, 0.0) for r in rs):>15.3f}" for k in keys)
            print(line)
        print(
            "(thread columns: median CPU s of each Python thread; the rest of the CPU is Polars' pool and C threads;"
            " reader: the CPU s of the ingest's child processes; crit: the critical path in CPU s, each process"
            " on a core and its threads serialized: bench_first_ingest.critical_path)"
        )
        for label, _, _ in checkouts:
            if any(r["trace"] for r in res[label]):
                print(
                    f"timeline of {label}'s last run (i: ingest, r: reader; +wall s (CPU s of that process)):"
                )
                print("  " + timeline(res[label][-1]))
        if a.compare:
            bad = False
            for label, _, _ in checkouts[1:]:
                d = compare(last["this"], last[label])
                print(f"store of this vs {label}: {'equal' if not d else '; '.join(d)}")
                bad = bad or bool(d)
            if bad:
                raise SystemExit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

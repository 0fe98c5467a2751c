"""Ingest benchmark (a script that prints figures; not a test, not collected by pytest).

Builds a large tree with ``shared/tools/scale_corpus.py OUT --mb N --unique-text``
(every copy gets fresh ids and a copy tag on every text, so dedup cannot collapse
copies), then measures, in this order and in the same run:

1. baseline: parse every line of the tree's Claude Code and Codex JSONL files with
   orjson and insert the extracted texts (the string values of text-bearing keys, see
   ``TEXT_KEYS``; base64 ``data`` and ``encrypted_content`` excluded) into a bare FTS5
   ``porter unicode61`` table in one transaction;
2. ctxkeep ingest in-process (``pipeline.engine.run_ingest``, no Prefect);
3. ctxkeep ingest as a whole process (``ctxkeep ingest --no-prefect``) into a fresh
   store, then a no-op re-ingest of the same tree (whole process).

Prints MB/s of raw JSONL (bytes of the Claude Code + Codex files), wall seconds, CPU
seconds (user + sys, from ``getrusage``: the machine has 2 cores, the baseline uses
one), peak RSS (``ru_maxrss`` of this process, and of the child processes), and store
sizes.
Targets (issue 14, target 1): ingest wall ≤ 1.5× baseline, in-process and whole
process; peak RSS ≤ 600 MB (issue 2's no-op re-ingest ≤ 5 s still printed).

Target 3 (``--mb 1000`` and more, or ``--target3``): the in-process run is left out
(one ingest of a tree that size takes minutes); a whole-process ingest of a 200 MB
reference tree (``--ref-tree``, built if missing) runs in the same run, and the
figures printed are MB/s of both side by side (target: within 20 %), peak RSS (≤ 1 GB),
store.db / raw JSONL (≤ 0.7×) and the no-op re-ingest (≤ 1 s). Every run prints what
takes the space of store.db, per table and index (SQLite's ``dbstat``).

Usage::

    uv run python tests/bench/bench_ingest.py [--mb 200] [--tree DIR] [--keep]
    uv run python tests/bench/bench_ingest.py --mb 2000 --tree DIR [--ref-tree DIR200]

Issue 26, target 2 (``--mb 5000`` and more, or ``--target2``): a heavy user's tree.
One Claude Code session file of ``--single-mb`` (2000) MB is added to the tree (built if
missing from the corpus's Claude Code lines, with fresh ids per copy: ``single_session_at``;
single sessions of several GB exist, anthropics/claude-code#88983), then target 3's run
(the 200 MB reference tree's MB/s side by side, peak RSS, no-op re-ingest), the store's
files *including the vault* against the bytes the ingest read (target ≤ 1.0×), and
``ctxkeep report daily`` (≤ 1 s) and ``ctxkeep sessions`` (≤ 0.5 s) as whole processes;
it closes with the ``bench_search.py`` command for the store (search p95 ≤ 25 ms,
whole process ≤ 0.3 s). ``--store DIR`` keeps the big store there. Trees must be real
copies: ingest skips hard-linked files (``sources.confine``)::

    python3 shared/tools/scale_corpus.py /tmp/tree10000 --mb 10000 --unique-text
    uv run python tests/bench/bench_ingest.py --mb 10000 --tree /tmp/tree10000 \
        --ref-tree /tmp/tree200 --store /tmp/big-store

``--peer agentsview`` (issue 26, target 3) runs ``AGENTSVIEW_NO_DAEMON=1 agentsview sync``
(PyPI ``agentsview``; ``$AGENTSVIEW`` or ``/tmp/peers/venv/bin/agentsview``) over the same
tree into a fresh data dir right after ctxkeep's whole-process ingest, and prints both
walls, peak RSS and the ratio (target: ctxkeep ≥ 1.5x faster at 200 MB, ≥ 3x at 2 GB).
The load average is printed at the start and end of every run.

``--tree`` reuses a tree built before (it is built there if missing). ``--baseline
CHECKOUT`` (target 3) ingests the big tree with that checkout's ctxkeep too and
alternates the no-op re-ingests of both on the same store (``--noop-runs``, median).
Whole-process runs use compiled bytecode (``PYCACHE``), as an installed ctxkeep does.

``--rss-trees T1,T2`` (issue 26, target 2's memory) only ingests each tree as a whole
process and prints each process's peak apart (the ingest process and its reader
process: ``VmHWM`` and the largest anonymous RSS seen), wall and CPU seconds, side by
side with ``--baseline``'s checkout in the same run, and the ratios::

    uv run python tests/bench/bench_ingest.py --rss-trees /tmp/tree200,/tmp/tree2000 \
        --baseline /path/to/main-checkout
The machine is shared: run it a few times at most.

``--ab TREE`` (issue 26, target 3, session 15: the two reader processes) runs fresh
whole-process ingests of TREE by this checkout and ``--baseline``'s alternately
(``--runs`` each), with ``--peer agentsview``'s sync after each pair, and prints per
run the wall, CPU (user, sys) and each process's CPU seconds and peak RSS; then the
medians side by side and the ratios; ``--check`` compares the two checkouts' stores
(every table by rowid, FTS rows, the vault's restored bytes: ``store_identity``)::

    uv run python tests/bench/bench_ingest.py --ab /tmp/tree200 --baseline /work/wt-int \
        --runs 3 --peer agentsview --check
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
SCALE = (ROOT.parent / "shared" / "tools" / "scale_corpus.py").resolve()
TEXT_KEYS = {
    "text",
    "content",
    "output",
    "message",
    "summary",
    "thinking",
    "arguments",
    "input",
    "command",
    "stdout",
    "stderr",
}
SKIP_KEYS = {"data", "encrypted_content", "signature"}


def jsonl_files(home: Path) -> list[Path]:
    """The Claude Code and Codex session files of a tree (what ctxkeep ingests)."""
    out = sorted((home / ".claude" / "projects").rglob("*.jsonl"))
    out += sorted((home / ".codex").rglob("rollout-*.jsonl"))
    return out


def _texts(obj, key: str, out: list[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k not in SKIP_KEYS:
                _texts(v, k, out)
    elif isinstance(obj, list):
        for v in obj:
            _texts(v, key, out)
    elif isinstance(obj, str) and key in TEXT_KEYS and obj:
        out.append(obj)


def baseline(files: list[Path], db: Path) -> dict:
    """orjson-parse every line and insert the extracted texts into a bare FTS5 table."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    conn.execute("BEGIN")
    nbytes = ntext = lines = bad = 0
    for p in files:
        rows: list[str] = []
        with open(p, "rb") as f:
            for line in f:
                nbytes += len(line)
                if not line.strip():
                    continue
                lines += 1
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    bad += 1
                    continue
                _texts(rec, "", rows)
        ntext += sum(len(r) for r in rows)
        conn.executemany("INSERT INTO t(text) VALUES(?)", ((r,) for r in rows))
    conn.execute("COMMIT")
    conn.close()
    secs = time.perf_counter() - t0
    return {
        "seconds": secs,
        "bytes": nbytes,
        "lines": lines,
        "bad": bad,
        "text_chars": ntext,
        "db_bytes": sum(x.stat().st_size for x in db.parent.glob(db.name + "*")),
    }


def store_sizes(home: Path) -> dict:
    return {p.name: p.stat().st_size for p in sorted(home.iterdir()) if p.is_file()}


class Cpu(float):
    """CPU seconds (user + system, a float) keeping the split: ``user``, ``sys``
    (issue 26 asks for the profile of user against system time)."""

    user: float
    sys: float

    def __new__(cls, user: float, sys_: float) -> Cpu:
        c = super().__new__(cls, user + sys_)
        c.user, c.sys = user, sys_
        return c

    def split(self) -> str:
        return f"user {self.user:.2f} + sys {self.sys:.2f}"


def cpu_seconds(who=resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds used so far by this process (or its waited children)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


#: bytecode of the ctxkeep under test (and of a ``--baseline`` checkout) is cached here
#: for the whole-process runs: with ``PYTHONDONTWRITEBYTECODE`` set (as in this
#: project's shells) every run compiled ~75 modules again (~0.3 s of a no-op's CPU),
#: which an installed ctxkeep never does
PYCACHE = Path(tempfile.gettempdir()) / "ctxkeep-bench-pycache"


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (``/proc/PID/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out.append(q)
        for t in Path(f"/proc/{q}/task").glob("*/children"):
            try:
                todo += [int(c) for c in t.read_text().split()]
            except OSError:
                pass
    return out


def _role(pid: int, root: int) -> str:
    """``ingest`` for the process the bench started, ``reader`` for an ingest's reader
    process (``ctxkeep.pipeline.reader_process``), else the program's name."""
    if pid == root:
        return "ingest"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    if b"ctxkeep.pipeline.reader_process" in cmd:
        return "reader"
    return Path(cmd[0].decode(errors="replace")).name if cmd and cmd[0] else "?"


def _role_of(roles: dict[int, str], pid: int, root: int) -> str:
    """``_role`` of ``pid``, kept once it is ``ingest`` or ``reader`` (a process seen
    between its fork and its exec still shows its parent's command line)."""
    role = roles.get(pid) or _role(pid, root)
    if role in ("ingest", "reader"):
        roles[pid] = role
    return role


#: the largest sum of the resident sets (VmRSS, KiB) of ``p`` and its descendants at one poll of
#: the last ``wait_with_peak``: what the machine held for the whole run at its peak (a user with
#: two reader processes beside the ingest process feels the sum, not the largest one)
LAST_TOTAL_PEAK = 0


def wait_with_peak(p: subprocess.Popen, peaks: dict | None = None) -> tuple[int, int, Cpu]:
    """Wait for ``p``: (exit code, peak RSS in KiB, its CPU seconds: those of the
    children reaped while waiting, ``p`` and what it waited for). The peak is the
    largest ``VmHWM`` (the high-water mark of a process's own memory since its exec)
    of ``p`` and its descendants, polled every 10 ms. ``ru_maxrss`` from ``wait4``
    cannot serve: on Linux a child's counts the memory of the parent it was forked from
    (this bench holds an in-process ingest's 300+ MB), so every child looked as big.

    ``peaks`` (a dict, filled): per process role (``_role``: ``ingest``, ``reader``),
    ``[VmHWM KiB, largest RssAnon KiB seen]`` (anonymous memory: the heap, without the
    mapped libraries and files VmHWM also counts); and ``peaks["cpu"]``: {(role, pid):
    CPU seconds} (``/proc/PID/stat``'s utime + stime, last seen: up to 10 ms short)."""
    global LAST_TOTAL_PEAK
    peak = 0
    total_peak = 0
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    roles: dict[int, str] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    while p.poll() is None:
        total = 0
        for q in _descendants(p.pid):
            try:
                if peaks is not None:  # the process's CPU so far (utime + stime), by pid
                    stat = Path(f"/proc/{q}/stat").read_text().rsplit(")", 1)[1].split()
                    role = _role_of(roles, q, p.pid)
                    peaks.setdefault("cpu", {})[(role, q)] = (int(stat[11]) + int(stat[12])) / ticks
                for line in Path(f"/proc/{q}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                    if line.startswith(("VmHWM:", "RssAnon:")):
                        kib = int(line.split()[1])
                        if line.startswith("VmHWM:"):
                            peak = max(peak, kib)
                        if peaks is not None:
                            role = _role_of(roles, q, p.pid)
                            cell = peaks.setdefault(role, [0, 0])
                            i = 0 if line.startswith("VmHWM:") else 1
                            cell[i] = max(cell[i], kib)
            except (OSError, ValueError):
                pass
        total_peak = max(total_peak, total)
        time.sleep(0.01)
    LAST_TOTAL_PEAK = total_peak
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p.returncode, peak, Cpu(ru.ru_utime - r0.ru_utime, ru.ru_stime - r0.ru_stime)


def run_cli(
    home: Path, tree: Path, checkout: Path = ROOT, peaks: dict | None = None
) -> tuple[float, dict, int, Cpu]:
    """``ctxkeep ingest --no-prefect --json`` as a whole process (of ``checkout``'s
    ctxkeep and virtualenv): (seconds, summary, child peak RSS in KiB, child CPU
    seconds); ``peaks``: ``wait_with_peak``'s, per process."""
    env = dict(os.environ, HOME=str(tree), CTXKEEP_HOME=str(home))
    env.pop("CLAUDE_CONFIG_DIR", None)
    env.pop("CODEX_HOME", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE / checkout.name)
    python = checkout / ".venv" / "bin" / "python" if checkout != ROOT else Path(sys.executable)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(
            [str(python), "-m", "ctxkeep", "ingest", "--no-prefect", "--json", "--no-progress"],
            env=env,
            stdout=out,
            stderr=err,
            cwd=checkout,
        )
        _, peak, cpu = wait_with_peak(p, peaks)
        secs = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode(errors="replace")
    if p.returncode != 0:
        raise SystemExit(f"ctxkeep ingest failed ({p.returncode}): {stderr[-2000:]}")
    return secs, json.loads(stdout), peak, cpu


def space(db: Path) -> list[tuple[str, int]]:
    """``(table or index, bytes)`` of ``db`` from SQLite's ``dbstat`` (pages × page
    size), largest first; FTS5 shadow tables (``fts_words_data``, ...) and
    autoindexes (``sqlite_autoindex_entries_1``: ``entry_id UNIQUE``) by their names.
    Opened read-only and immutable (the ingest is over)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    finally:
        conn.close()


def print_space(db: Path, raw: int) -> None:
    """The ``dbstat`` table of ``db``: bytes per table and index, share of the file
    and the ratio to the ``raw`` JSONL bytes."""
    rows = space(db)
    total = sum(b for _, b in rows)
    print(f"  store.db by table/index (dbstat): {total / 1e6:.1f} MB = {total / raw:.2f}x raw JSONL")
    for name, b in rows:
        if b >= total * 0.002:
            print(f"    {name:32s} {b / 1e6:8.1f} MB {b / total:6.1%} {b / raw:5.2f}x raw")


def print_store(store: Path, raw: int) -> dict:
    """Print the store's file sizes and its ``dbstat`` table; returns ``store_sizes``."""
    sizes = store_sizes(store)
    print("  store: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items()))
    print_space(store / "store.db", raw)
    return sizes


def tree_at(path: Path, mb: int) -> Path:
    """``path``, built with ``scale_corpus.py --mb mb --unique-text`` when missing."""
    if not path.exists():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(SCALE), str(path), "--mb", str(mb), "--unique-text"], check=True)
        print(f"built tree {path} in {time.perf_counter() - t0:.1f} s")
    return path


#: the project folder of target 2's single big session (a heavy user's monorepo)
SINGLE_PROJECT = "-Users-heavy-user-monorepo"


def _scale_module():
    """``scale_corpus.py`` as a module (its id remapping and timestamp shift)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("scale_corpus", SCALE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def single_session_at(tree: Path, mb: int, corpus: Path | None = None) -> Path:
    """One Claude Code session file of ``mb`` megabytes in ``tree`` (issue 26, target 2:
    a heavy user's single session of several GB exists, anthropics/claude-code#88983),
    built when missing from the corpus's Claude Code lines as ``scale_corpus.py`` builds
    its copies: copy ``k`` of every line gets fresh ids (every UUID remapped with the
    copy tag ``single{k}``, so no id repeats the tree's copies), timestamps shifted by
    ``k`` hours (the session runs on for weeks, in order), a ``[single k]`` tag on every
    text (so dedup cannot collapse the copies), and every ``sessionId`` set to the one
    session's id (the file's name, as Claude Code names it). Unparseable lines are left
    out. Built to ``NAME.partial`` and renamed, so a killed build is not taken for a
    whole file."""
    sc = _scale_module()
    sid = str(sc.uuid.uuid5(sc.uuid.NAMESPACE_URL, f"ctxkeep-bench-single-{mb}"))
    out = tree / ".claude" / "projects" / SINGLE_PROJECT / f"{sid}.jsonl"
    if out.exists():
        return out
    src = sorted(((corpus or SCALE.parents[1] / "corpus" / "home") / ".claude" / "projects").rglob("*.jsonl"))
    lines = []
    for p in src:
        for raw in p.read_bytes().splitlines():
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                lines.append(rec)

    def walk(obj, k: int, key: str = ""):
        if isinstance(obj, dict):
            return {kk: walk(v, k, kk) for kk, v in obj.items()}
        if isinstance(obj, list):
            return [walk(v, k, key) for v in obj]
        if isinstance(obj, str):
            if key == "sessionId":
                return sid
            if key in sc.TS_KEYS:
                return _shift_hours(obj, k)
            s = sc.UUID_RE.sub(lambda m: sc.remap_uuid(m.group(0), f"single{k}"), obj)
            if key in sc.TEXT_KEYS and s:
                s = f"{s} [single {k}]"
            return s
        return obj

    t0 = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".partial")
    target, written, k = mb * 1_000_000, 0, 0
    with part.open("wb") as f:
        while written < target:
            k += 1
            for rec in lines:
                b = orjson.dumps(walk(rec, k)) + b"\n"
                f.write(b)
                written += len(b)
    part.rename(out)
    print(
        f"built single session {out} ({written / 1e6:.0f} MB, {k} copies) in {time.perf_counter() - t0:.1f} s"
    )
    return out


def _shift_hours(value: str, hours: int) -> str:
    """``value`` (ISO 8601) ``hours`` later, in the same form; unparsable as is."""
    import datetime as dt

    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    s = (t + dt.timedelta(hours=hours)).isoformat()
    return s.replace("+00:00", "Z") if value.endswith("Z") else s


AGENTSVIEW = Path(os.environ.get("AGENTSVIEW", "/tmp/peers/venv/bin/agentsview"))


def run_agentsview(tree: Path, data: Path) -> tuple[float, int, Cpu]:
    """``agentsview sync`` of ``tree`` (its HOME) into the fresh data dir ``data``, as a
    whole process: (seconds, peak RSS in KiB, CPU seconds). Telemetry and the update
    check are off, its host is loopback and no daemon starts (``AGENTSVIEW_NO_DAEMON``)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "CTXKEEP_HOME") and not k.startswith("PREFECT_")
    }
    env.update(
        HOME=str(tree),
        AGENTSVIEW_DATA_DIR=str(data),
        AGENTSVIEW_NO_DAEMON="1",
        AGENTSVIEW_TELEMETRY_ENABLED="false",
        AGENTSVIEW_DISABLE_UPDATE_CHECK="1",
        AGENTSVIEW_NO_BROWSER="1",
        AGENTSVIEW_HOST="127.0.0.1",
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([str(AGENTSVIEW), "sync"], env=env, stdout=subprocess.DEVNULL, stderr=err)
        code, peak, cpu = wait_with_peak(p)
        secs = time.perf_counter() - t0
        if code != 0:
            err.seek(0)
            raise SystemExit(f"agentsview sync failed: {err.read().decode(errors='replace')[-2000:]}")
    return secs, peak, cpu


def peer_row(tree: Path, work: Path, raw: int, t_ctx: float, rss_ctx: int, c_ctx: Cpu) -> None:
    """agentsview's sync of the same tree, side by side with ctxkeep's whole-process
    ingest (``t_ctx`` seconds, ``rss_ctx`` KiB, ``c_ctx`` CPU) taken in this run: wall,
    CPU split into user and system time, peak RSS."""
    if not AGENTSVIEW.exists():
        print(f"agentsview: not found at {AGENTSVIEW} (set $AGENTSVIEW); its row is left out")
        return
    t_a, rss_a, c_a = run_agentsview(tree, work / "av-data")
    need = 1.5 if raw < 1e9 else 3.0
    print(
        f"agentsview sync, same tree: {t_a:.2f} s, CPU {c_a:.2f} s ({c_a.split()}), "
        f"{raw / 1e6 / t_a:.1f} MB/s, peak RSS {rss_a / 1024:.0f} MB; load {_load()}"
    )
    print(f"  {'':12} {'wall s':>8} {'CPU s':>8} {'user s':>8} {'sys s':>8} {'peak RSS MB':>12}")
    for who, t, c, r in (("ctxkeep", t_ctx, c_ctx, rss_ctx), ("agentsview", t_a, c_a, rss_a)):
        print(f"  {who:12} {t:8.2f} {c:8.2f} {c.user:8.2f} {c.sys:8.2f} {r / 1024:12.0f}")
    print(
        f"  side by side: ctxkeep {t_a / t_ctx:.2f}x faster in wall (target ≥ {need}x: "
        f"{'OK' if t_a / t_ctx >= need else 'MISSED'}), {c_a / c_ctx:.2f}x less CPU"
    )


def _load() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared: wall-clock MB/s
    follows them, MB per CPU second much less)."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def warm(files: list[Path]) -> None:
    """Read ``files`` once (into the page cache as far as it holds them), 16 MiB at a
    time: a 2 GB session file is never held whole by this process."""
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while f.read(16 << 20):
                pass


def target3(a, work: Path, tree: Path, files: list[Path], raw: int) -> dict:
    """Target 3: the big tree and a 200 MB reference tree ingested as whole processes in
    this run, MB/s side by side, peak RSS, store / raw, the no-op re-ingest. The big
    store goes to ``a.store`` when given (kept; it must not exist), else into ``work``.
    Returns the figures: ``store``, ``mbs``, ``mbs_ref``, ``rss_kib``, ``cpu``,
    ``cpu_ref``, ``noop_s``, ``summary`` (the ingest's ``--json``)."""
    ref = tree_at(a.ref_tree or work / "ref200", 200)
    ref_raw = sum(p.stat().st_size for p in jsonl_files(ref))
    warm(jsonl_files(ref))
    t_r, _, rss_r, c_r = run_cli(work / "store-ref", ref)
    mbs_r = ref_raw / 1e6 / t_r
    print(
        f"reference {ref_raw / 1e6:.0f} MB tree, whole process: {t_r:.2f} s, CPU {c_r:.2f} s, "
        f"{mbs_r:.1f} MB/s, peak RSS {rss_r / 1024:.0f} MB (all processes at once {LAST_TOTAL_PEAK / 1024:.0f} MB); "
        f"load {_load()}"
    )
    warm(files)  # as much of the big tree in the page cache as fits
    store = a.store or work / "store-big"
    if a.store and a.store.exists():
        raise SystemExit(f"error: the store {a.store} exists - remove it or name a new one")
    t_b, s_b, rss_b, c_b = run_cli(store, tree)
    mbs_b = raw / 1e6 / t_b
    print(
        f"{raw / 1e6:.0f} MB tree, whole process: {t_b:.2f} s, CPU {c_b:.2f} s, {mbs_b:.1f} MB/s "
        f"({mbs_b / mbs_r:.2f}x the reference's MB/s; per CPU second "
        f"{(raw / c_b) / (ref_raw / c_r):.2f}x), {s_b['entries_new']:,} entries; "
        f"peak RSS {rss_b / 1024:.0f} MB (the largest of the ingest process and its children; all of them "
        f"at once {LAST_TOTAL_PEAK / 1024:.0f} MB); load {_load()}"
    )
    if a.peer:
        peer_row(tree, work, raw, t_b, rss_b, c_b)
    if a.baseline and not a.no_baseline_ingest:
        t_o, s_o, rss_o, c_o = run_cli(work / "store-baseline", tree, a.baseline)
        print(
            f"  baseline ({a.baseline}), same tree, whole process: {t_o:.2f} s, CPU {c_o:.2f} s, "
            f"{raw / 1e6 / t_o:.1f} MB/s, {s_o['entries_new']:,} entries; peak RSS {rss_o / 1024:.0f} MB"
        )
    sizes = print_store(store, raw)
    base_store = work / "store-baseline" if a.baseline and not a.no_baseline_ingest else store
    t_n, s_n = noop(a, store, tree, base_store)
    ratio = sizes["store.db"] / raw
    ok = (mbs_b >= 0.8 * mbs_r, rss_b <= 1024 * 1024, ratio <= 0.7, t_n <= 1.0)
    print(
        f"targets (issue 14, target 3): MB/s within 20 % of the 200 MB figure "
        f"{'OK' if ok[0] else 'MISSED'}; peak RSS ≤ 1 GB {'OK' if ok[1] else 'MISSED'}; "
        f"store.db ≤ 0.7x raw ({ratio:.2f}x) {'OK' if ok[2] else 'MISSED'}; "
        f"no-op ≤ 1 s {'OK' if ok[3] else 'MISSED'}"
    )
    return {
        "store": store,
        "mbs": mbs_b,
        "mbs_ref": mbs_r,
        "rss_kib": rss_b,
        "cpu": c_b,
        "cpu_ref": c_r,
        "noop_s": t_n,
        "summary": s_b,
    }


def du(path: Path) -> int:
    """Bytes of every file under ``path`` (symlinks not followed)."""
    return sum(
        (Path(d) / f).lstat().st_size
        for d, _, fs in os.walk(path)
        for f in fs
        if not (Path(d) / f).is_symlink()
    )


def timed_cli(
    home: Path, tree: Path, args: list[str], runs: int = 3
) -> tuple[list[float], list[int], list[Cpu]]:
    """``ctxkeep ARGS`` on the store ``home`` as a whole process, ``runs`` times (compiled
    bytecode, as ``run_cli``): (wall seconds, peak RSS KiB, CPU seconds) per run. A failing run
    stops the bench with its error."""
    env = dict(os.environ, HOME=str(tree), CTXKEEP_HOME=str(home), COLUMNS="100")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE / ROOT.name)
    walls, peaks, cpus = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        with tempfile.TemporaryFile() as err:
            p = subprocess.Popen(
                [sys.executable, "-m", "ctxkeep", *args],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=ROOT,
            )
            code, peak, cpu = wait_with_peak(p)
            walls.append(time.perf_counter() - t0)
            peaks.append(peak)
            cpus.append(cpu)
            if code != 0:
                err.seek(0)
                raise SystemExit(f"ctxkeep {' '.join(args)} failed ({code}): {err.read().decode()[-2000:]}")
    return walls, peaks, cpus


def target2(a, work: Path, tree: Path, files: list[Path], raw: int) -> None:
    """Issue 26, target 2 (a heavy user's 10 GB, one ~2 GB session file in it): target
    3's run (``target3``: the 200 MB reference tree's MB/s side by side, peak RSS, the
    no-op re-ingest), then the store's files including the vault against the raw bytes
    the ingest read, and ``report daily`` and ``sessions`` as whole processes; the
    command for ``bench_search.py`` on the store closes it."""
    single = [p for p in files if p.parent.name == SINGLE_PROJECT]
    if single:
        print(f"single session file: {single[0].name}, {single[0].stat().st_size / 1e6:.0f} MB")
    r = target3(a, work, tree, files, raw)
    store, read = r["store"], r["summary"]["bytes"]
    total = du(store)
    vault = du(store / "vault") if (store / "vault").exists() else 0
    print(
        f"store files (all, vault included): {total / 1e6:.0f} MB = {total / read:.2f}x the {read / 1e6:.0f} MB "
        f"the ingest read ({total / raw:.2f}x the Claude Code + Codex JSONL); vault {vault / 1e6:.0f} MB; load {_load()}"
    )
    figures = {}
    for name, args, limit in (
        ("report daily", ["report", "daily"], 1.0),
        ("sessions", ["sessions"], 0.5),
    ):
        walls, peaks, cpus = timed_cli(store, tree, args)
        med = sorted(walls)[len(walls) // 2]
        figures[name] = (med, limit)
        print(
            f"ctxkeep {name}, whole process: {med:.2f} s median of {len(walls)} "
            f"({', '.join(f'{w:.2f}' for w in walls)} s; the first may bring DuckDB current), "
            f"CPU {', '.join(f'{c:.2f}' for c in cpus)} s, peak RSS {max(peaks) / 1024:.0f} MB; load {_load()}"
        )
    ok = {
        "MB/s within 20 % of the 200 MB figure": r["mbs"] >= 0.8 * r["mbs_ref"],
        "peak RSS ≤ 1 GB": r["rss_kib"] <= 1024 * 1024,
        f"store files incl. the vault ≤ 1.0x raw ({total / read:.2f}x)": total <= read,
        f"nothing new ≤ 1 s ({r['noop_s']:.2f} s)": r["noop_s"] <= 1.0,
        **{f"{n} ≤ {lim:g} s ({t:.2f} s)": t <= lim for n, (t, lim) in figures.items()},
    }
    print(
        "targets (issue 26, target 2): " + "; ".join(f"{k} {'OK' if v else 'MISSED'}" for k, v in ok.items())
    )
    print(
        f"search (target 2's p95 ≤ 25 ms, whole process ≤ 0.3 s): uv run python tests/bench/bench_search.py {store}"
    )


def noop(a, store: Path, tree: Path, base_store: Path | None = None) -> tuple[float, dict]:
    """The no-op re-ingest of ``tree`` into ``store`` (whole process), ``a.noop_runs``
    times, alternating with ``a.baseline``'s ctxkeep when given, on ``base_store`` (the
    store the baseline built itself: an older ctxkeep refuses a store of a newer schema;
    by default the same store);
    prints the median and best wall and the median CPU of each, returns (median wall
    seconds, the last summary) of ctxkeep's."""
    runs: dict[str, list[tuple[float, float]]] = {"ctxkeep": [], "baseline": []}
    s_n: dict = {}
    for _ in range(a.noop_runs):
        sides = [("ctxkeep", ROOT, store)] + (
            [("baseline", a.baseline, base_store or store)] if a.baseline else []
        )
        for who, checkout, st in sides:
            t, s, _, c = run_cli(st, tree, checkout)
            runs[who].append((t, c))
            if who == "ctxkeep":
                s_n = s
    for who, rs in runs.items():
        if rs:
            walls, cpus = sorted(t for t, _ in rs), sorted(c for _, c in rs)
            print(
                f"no-op re-ingest, whole process{'' if who == 'ctxkeep' else ' (baseline)'}: "
                f"{walls[len(walls) // 2]:.2f} s median, {walls[0]:.2f} s best, CPU "
                f"{cpus[len(cpus) // 2]:.2f} s median ({len(rs)} runs), {s_n.get('files', 0):,} files, "
                f"{s_n.get('entries_new', 0)} new entries"
            )
    walls = sorted(t for t, _ in runs["ctxkeep"])
    return walls[len(walls) // 2], s_n


#: ``store_identity``: every table an ingest writes, by rowid where rows have one
#: (entry ids in the order stored), times left out (``ingested_at``, the vault's capture
#: times, the watermarks' read times)
IDENTITY = {
    "entries": "SELECT * FROM entries ORDER BY rowid",
    "contents": "SELECT * FROM contents ORDER BY rowid",
    "chunks": "SELECT * FROM chunks ORDER BY rowid",
    "usage": "SELECT * FROM usage ORDER BY rowid",
    "watermarks": "SELECT path, size, offset, head_hash, parser_version FROM watermarks ORDER BY path",
    "quarantine": "SELECT path, offset, reason FROM quarantine ORDER BY rowid",
    "fts_words": "SELECT rowid, * FROM fts_words ORDER BY rowid",
    "fts_grams": "SELECT rowid, * FROM fts_grams ORDER BY rowid",
    "fts_symbols": "SELECT rowid, * FROM fts_symbols ORDER BY rowid",
    # the vocabulary by term id (each group adds its new terms sorted): the reader
    # processes compute it per chunk since session 16, the ingest process before
    "vocab": "SELECT term_id, term FROM vocab ORDER BY term_id",
}
#: columns of those tables that hold a time of the run, not of the sessions
TIME_COLUMNS = {"ingested_at", "captured_at", "read_at", "updated_at", "created_at", "mtime"}


def store_identity(home: Path) -> dict:
    """``{table: (rows, sha256)}`` of ``IDENTITY``'s tables (their time columns left out)
    and of the vault: every generation's bytes as restored (``manifest.gen_bytes``),
    by path and generation. Two fresh ingests of one tree by two checkouts must agree."""
    import hashlib

    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    out: dict = {}
    try:
        for name, q in IDENTITY.items():
            try:
                cur = conn.execute(q)
            except sqlite3.OperationalError as e:  # a table this version does not have
                out[name] = str(e)
                continue
            keep = [i for i, d in enumerate(cur.description) if d[0] not in TIME_COLUMNS]
            h = hashlib.sha256()
            n = 0
            for row in cur:
                h.update(repr([row[i] for i in keep]).encode())
                n += 1
            out[name] = (n, h.hexdigest()[:16])
    finally:
        conn.close()
    sys.path.insert(0, str(ROOT))
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.vault import manifest

    conn = sqlite_store.connect(home, readonly=True)
    try:
        h = hashlib.sha256()
        gens = sorted(manifest.generations(conn), key=lambda g: (g.path, g.gen))
        for g in gens:
            h.update(f"{g.path}\0{g.gen}\0".encode())
            h.update(hashlib.sha256(manifest.gen_bytes(conn, home, g)).digest())
        out["vault"] = (len(gens), h.hexdigest()[:16])
    finally:
        conn.close()
    return out


def ab_runs(a, work: Path) -> None:
    """Issue 26, target 3 (``--ab TREE``): whole-process fresh ingests of ``TREE`` by
    this checkout and ``--baseline``'s, alternating (``--runs`` each: this, baseline,
    this, ...), with ``--peer agentsview``'s sync after each pair; per run the wall and
    CPU seconds of the whole process tree, each process's CPU (the ingest process and
    each reader process), peak RSS per role, and the load average; then the medians
    side by side and, with ``--check``, whether the two checkouts' stores are identical
    (``store_identity``: entries by rowid, contents, chunks, usage, FTS rows,
    watermarks, the vault's restored bytes)."""
    tree = a.ab
    files = jsonl_files(tree)
    raw = sum(f.stat().st_size for f in files)
    warm(files)
    sides = [("this", ROOT)] + ([("baseline", a.baseline)] if a.baseline else [])
    peer = a.peer == "agentsview" and AGENTSVIEW.exists()
    if a.peer and not peer:
        print(f"agentsview: not found at {AGENTSVIEW} (set $AGENTSVIEW); its runs are left out")
    print(f"tree {tree}: {raw / 1e6:.0f} MB of JSONL; {a.runs} run(s) each, alternating")
    print(
        f"  {'run':>3} {'who':>10} {'wall s':>7} {'CPU s':>7} {'user':>6} {'sys':>5}  per process CPU s (peak RSS MB)  load"
    )
    got: dict[str, list] = {who: [] for who, _ in sides + ([("agentsview", None)] if peer else [])}
    kept: dict[str, Path] = {}
    for i in range(a.runs):
        for who, checkout in sides:
            peaks: dict = {}
            store = work / f"ab-{who}-{i}"
            t, s_, _, c = run_cli(store, tree, checkout, peaks)
            procs = sorted(peaks.get("cpu", {}).items(), key=lambda kv: (kv[0][0] != "ingest", kv[0][1]))
            per = " + ".join(f"{r} {v:.2f}" for (r, _), v in procs)
            rss = ", ".join(f"{r} {v[0] / 1024:.0f}" for r, v in peaks.items() if r != "cpu")
            got[who].append((t, c, [v for _, v in procs]))
            print(
                f"  {i + 1:>3} {who:>10} {t:7.2f} {c:7.2f} {c.user:6.2f} {c.sys:5.2f}  {per} ({rss})  {_load()}",
                flush=True,
            )
            if a.check and who not in kept:
                kept[who] = store
            else:
                shutil.rmtree(store, ignore_errors=True)
        if peer:
            t_a, rss_a, c_a = run_agentsview(tree, work / f"av-{i}")
            shutil.rmtree(work / f"av-{i}", ignore_errors=True)
            got["agentsview"].append((t_a, c_a, []))
            print(
                f"  {i + 1:>3} {'agentsview':>10} {t_a:7.2f} {c_a:7.2f} {c_a.user:6.2f} {c_a.sys:5.2f}  "
                f"(peak RSS {rss_a / 1024:.0f})  {_load()}",
                flush=True,
            )
    med = {
        who: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
        for who, rs in got.items()
    }
    print("medians: " + ", ".join(f"{who} wall {w:.2f} s CPU {c:.2f} s" for who, (w, c) in med.items()))
    if "baseline" in med:
        (w1, c1), (w0, c0) = med["this"], med["baseline"]
        print(f"  this/baseline: wall {w1 / w0:.2f}x, CPU {c1 / c0:.2f}x")
    if "agentsview" in med:
        need = 1.5 if raw < 1e9 else 3.0
        for who in [w for w, _ in sides]:
            r = med["agentsview"][0] / med[who][0]
            print(
                f"  agentsview/{who}: ctxkeep {r:.2f}x faster in wall (target ≥ {need}x: {'OK' if r >= need else 'MISSED'})"
            )
    if a.check and len(kept) == 2:
        this, base = store_identity(kept["this"]), store_identity(kept["baseline"])
        diff = [k for k in sorted(set(this) | set(base)) if this.get(k) != base.get(k)]
        for k in sorted(this):
            print(f"  store {k:<12} this {this[k]}  baseline {base.get(k)}")
        print("stores identical: " + ("yes" if not diff else f"NO ({', '.join(diff)})"))


def rss_runs(a, work: Path) -> None:
    """Issue 26, target 2's memory (``--rss-trees``): a whole-process ingest of each
    tree into a fresh store, by this checkout and ``--baseline``'s side by side in this
    run, each process's peak printed apart: the ingest process and its reader process
    (``VmHWM``, and the largest anonymous RSS seen: ``wait_with_peak``), with wall and
    CPU seconds (the bound must not cost speed) and the load average. Each store is
    removed once measured (a 2 GB tree's is ~2 GB)."""
    sides = [("this", ROOT)] + ([("baseline", a.baseline)] if a.baseline else [])
    print(
        f"  {'tree MB':>8} {'ctxkeep':>9} {'wall s':>8} {'CPU s':>8} {'entries':>10} "
        f"{'ingest peak/anon MB':>20} {'reader peak/anon MB':>20}  load"
    )
    for tree in a.rss_trees:
        files = jsonl_files(tree)
        raw = sum(f.stat().st_size for f in files)
        warm(files)
        got: dict[str, tuple] = {}
        for who, checkout in sides:
            peaks: dict = {}
            store = work / f"rss-{who}-{tree.name}"
            t, s_, _, c = run_cli(store, tree, checkout, peaks)
            shutil.rmtree(store, ignore_errors=True)
            got[who] = (t, c, peaks)
            cell = {r: f"{v[0] / 1024:.0f}/{v[1] / 1024:.0f}" for r, v in peaks.items() if r != "cpu"}
            print(
                f"  {raw / 1e6:8.0f} {who:>9} {t:8.1f} {c:8.1f} {s_['entries_new']:10,} "
                f"{cell.get('ingest', '-'):>20} {cell.get('reader', '-'):>20}  {_load()}",
                flush=True,
            )
        if len(got) == 2:
            (t1, c1, p1), (t0, c0, p0) = got["this"], got["baseline"]
            ratio = {r: p1[r][0] / p0[r][0] for r in ("ingest", "reader") if r in p1 and r in p0 and p0[r][0]}
            print(
                f"  {raw / 1e6:8.0f} this/baseline: wall {t1 / t0:.2f}x, CPU {c1 / c0:.2f}x, peak RSS "
                + ", ".join(f"{r} {v:.2f}x" for r, v in ratio.items())
            )
    print("target (issue 26, target 2): peak RSS ≤ 1 GB (1,024 MB) at 10 GB, every process")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--tree", type=Path, help="reuse/build the scaled tree here")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument(
        "--target3", action="store_true", help="target 3's figures (the default from --mb 1000 on)"
    )
    ap.add_argument("--ref-tree", type=Path, help="the 200 MB reference tree of target 3 (built if missing)")
    ap.add_argument(
        "--target2",
        action="store_true",
        help="issue 26's target 2 (the default from --mb 5000 on): one big session file in the tree, "
        "the store with its vault against raw, report daily, sessions",
    )
    ap.add_argument(
        "--single-mb",
        type=int,
        default=2000,
        help="target 2: the single session file's size (built if missing)",
    )
    ap.add_argument(
        "--store", type=Path, help="targets 2 and 3: put (and keep) the big store here (must not exist)"
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="target 3: a checkout of ctxkeep (with its .venv) whose ingest of the big tree "
        "and no-op re-ingest run in the same run, side by side (with --rss-trees: its ingest of each tree)",
    )
    ap.add_argument(
        "--no-baseline-ingest",
        action="store_true",
        help="with --baseline: only the no-op re-ingests side by side (a 2 GB ingest takes ~10 min each)",
    )
    ap.add_argument("--noop-runs", type=int, default=3, help="no-op re-ingests to take the median of")
    ap.add_argument(
        "--peer", choices=["agentsview"], help="also run this peer's sync over the same tree, side by side"
    )
    ap.add_argument(
        "--rss-trees",
        type=lambda v: [Path(x) for x in v.split(",")],
        help="comma-separated trees (e.g. /tmp/tree200,/tmp/tree2000): only the peak RSS of each "
        "process of a whole-process ingest of each, with --baseline's side by side (rss_runs)",
    )
    ap.add_argument(
        "--ab",
        type=Path,
        metavar="TREE",
        help="target 3 A/B: whole-process fresh ingests of TREE by this checkout and --baseline's, "
        "alternating (--runs), with --peer's sync after each pair (ab_runs)",
    )
    ap.add_argument("--runs", type=int, default=3, help="with --ab: runs of each side")
    ap.add_argument(
        "--check", action="store_true", help="with --ab: compare the two checkouts' stores (store_identity)"
    )
    a = ap.parse_args()
    print(f"load average at the start {_load()} (2 cores)")
    if a.ab:
        work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-"))
        try:
            ab_runs(a, work)
        finally:
            print(f"load average at the end {_load()} (2 cores)")
            shutil.rmtree(work, ignore_errors=True)
        return
    if a.rss_trees:
        work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-"))
        try:
            rss_runs(a, work)
        finally:
            print(f"load average at the end {_load()} (2 cores)")
            shutil.rmtree(work, ignore_errors=True)
        return

    work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-"))
    tree = a.tree or work / "home"
    try:
        tree_at(tree, a.mb)
        t2 = a.target2 or a.mb >= 5000
        if t2 and a.single_mb > 0:
            single_session_at(tree, a.single_mb)
        files = jsonl_files(tree)
        raw = sum(p.stat().st_size for p in files)
        mb = raw / 1e6
        print(f"tree: {len(files)} Claude Code + Codex JSONL files, {mb:.1f} MB raw")
        if t2:
            target2(a, work, tree, files, raw)
            return
        if a.target3 or a.mb >= 1000:
            target3(a, work, tree, files, raw)
            return

        # page-cache warm-up so neither side pays the first read
        for p in files:
            p.read_bytes()

        c0 = cpu_seconds()
        b = baseline(files, work / "baseline.db")
        c_b = cpu_seconds() - c0
        print(
            f"baseline (orjson + FTS5 porter unicode61): {b['seconds']:.2f} s, CPU {c_b:.2f} s, "
            f"{mb / b['seconds']:.1f} MB/s, {b['lines']:,} lines, "
            f"{b['text_chars'] / 1e6:.1f} M text chars, index {b['db_bytes'] / 1e6:.1f} MB"
        )

        from ctxkeep.pipeline.engine import run_ingest
        from ctxkeep.sources.contract import DiscoveryContext

        store = work / "store-inproc"
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        c0 = cpu_seconds() + cpu_seconds(resource.RUSAGE_CHILDREN)  # + its reader process
        t0 = time.perf_counter()
        s = run_ingest(store, ctx=DiscoveryContext(home=tree, env={}))
        t_in = time.perf_counter() - t0
        c_in = cpu_seconds() + cpu_seconds(resource.RUSAGE_CHILDREN) - c0
        rss_in = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(
            f"ctxkeep in-process: {t_in:.2f} s, CPU {c_in:.2f} s ({c_in / t_in:.0%} of wall), "
            f"{mb / t_in:.1f} MB/s, "
            f"{t_in / b['seconds']:.2f}x baseline, {s.entries_new:,} entries, "
            f"{s.quarantined} quarantined; peak RSS {rss_in / 1024:.0f} MB "
            f"(before ingest {rss0 / 1024:.0f} MB)"
        )
        print_store(store, raw)

        store2 = work / "store-proc"
        t_p, s_p, rss_p, c_p = run_cli(store2, tree)
        print(
            f"ctxkeep whole process: {t_p:.2f} s, CPU {c_p:.2f} s ({c_p.split()}; {c_p / t_p:.0%} of wall), "
            f"{mb / t_p:.1f} MB/s, "
            f"{t_p / b['seconds']:.2f}x baseline, {s_p['entries_new']:,} entries; "
            f"peak RSS (children) {rss_p / 1024:.0f} MB"
        )
        if a.peer:
            peer_row(tree, work, raw, t_p, rss_p, c_p)
        t_n, s_n, _, _ = run_cli(store2, tree)
        print(
            f"no-op re-ingest, whole process: {t_n:.2f} s, {s_n['entries_new']} new entries, "
            f"{s_n['bytes']} bytes read"
        )
        ok = (max(t_in, t_p) <= 1.5 * b["seconds"], max(rss_in, rss_p) <= 600 * 1024, t_n <= 5.0)
        print(
            f"targets (issue 14): wall (in-process and whole process) ≤ 1.5x baseline "
            f"{'OK' if ok[0] else 'MISSED'}; peak RSS ≤ 600 MB {'OK' if ok[1] else 'MISSED'}; "
            f"no-op ≤ 5 s {'OK' if ok[2] else 'MISSED'}"
        )
    finally:
        print(f"load average at the end {_load()} (2 cores)")
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

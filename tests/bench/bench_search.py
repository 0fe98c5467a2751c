"""Search benchmark: p50/p95/p99 of 200 mixed queries in-process, by query kind, the
relevance set's recall@3 and MRR, and the whole-process time of `ctxkeep search`, for
this checkout and (``--baseline``) another one side by side in the same run.

Build the store once (~3-8 min for 500 MB on 2 busy cores):

    python3 /work/shared/tools/scale_corpus.py /tmp/bench/home --mb 500 --unique-text
    HOME=/tmp/bench/home CTXKEEP_HOME=/tmp/bench/store .venv/bin/ctxkeep ingest --no-prefect

then run:  uv run python tests/bench/bench_search.py /tmp/bench/store

``--serial`` adds this checkout searching on one connection (``search(parallel=False)``)
as a third side; ``--fresh`` adds this checkout with ``ck_bm25``'s phrase counts and the kept
filter answers (``retrieve.kept_passed``) emptied before each query (``sinks.sqlite.native_rank``: what one ``ctxkeep search`` process
gets; "this" keeps them across queries, as the MCP server and the app do); ``--read-only`` never writes the store (a shared 10 GB store).
Every query's hits (every field, note, suggestions) are compared across the sides
and rounds ("same hits"); the ``--slowest`` queries of this side are run once more on
one connection by each side with their lists' times and their ``bm25()`` statements.

Issue 26, both stores, side by side with main (``git worktree add --detach /work/wt-base main``):

    uv run python tests/bench/bench_search.py /tmp/big-store --baseline /work/wt-base --serial --read-only
    uv run python tests/bench/bench_search.py /tmp/store10k2 --baseline /work/wt-base --serial --read-only

Side by side with a baseline checkout (``git worktree add /tmp/base main --detach``,
``uv sync`` there) and a store of its own schema (a copy of the store opened by the
newer code migrates; the baseline must not open a store of a newer schema):

    uv run python tests/bench/bench_search.py /tmp/bench/store-new \
        --baseline /tmp/base --baseline-store /tmp/bench/store-old

Each side runs in a worker process of its own checkout's interpreter (the same
worker code, this file), which times each query in-process; the queries alternate
between the two workers, so load hits both alike. The relevance set
(tests/query/relevance/queries.json) is ranked by each side on a fresh store of the
corpus ingested by that side's code.

The two Markdown sessions of the corpus (Aider history with CJK text, a SpecStory
export) are indexed as notes first, as in the relevance set, so CJK queries have
something to find. Prints figures; asserts nothing (issue 14 target: p95 ≤ 12 ms
in-process at 500 MB, recall@3 and MRR unchanged or better).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"
NOTES = {
    "aider": "code/zen-mcp-server/.aider.chat.history.md",
    "specstory": "code/minsky/.specstory/history/2025-04-28_16-22-backlog-task-inquiry.md",
}

WORDS = [
    "error",
    "test",
    "file",
    "timeline filtering",
    "embedding",
    "printer",
    "gcode",
    "speckit",
    "constitution",
    "branch",
    "commit",
    "install",
    "notebook",
    "music",
    "worktree",
    "teammate",
    "LinuxCNC",
    "OpenPrintTag",
    "filament",
    "README",
    "requirements",
    "docs update",
    "gui tab",
    "macro",
    "sandbox denied",
    "exit code",
    "the",
    "it's",
    "c++",
    "foo AND",
    "NOT",
    "(x",
]
PHRASES = [
    '"command not found"',
    '"Not on a feature branch"',
    '"No MCP servers configured"',
    '"active high"',
    '"step by step"',
    '"update CLAUDE.md"',
    '"multi-color nozzles"',
    '"Outside diff range comments"',
]
IDENTS = [
    "useTodos",
    "PLACEHOLDER_RE",
    "validateUs",
    "QT_QPA_PLATFORM=xcb",
    "005-orchestrator-architecture",
    "orchestrator.openapi.yaml",
    "/Users/chip/dev/ai-music/diverse_musical_ai.py",
    "TodoWrite",
    "apply_patch",
    "extract-coderabbit-feedback.py",
    "AutoTokenizer",
    "QTableWidgetItem",
    "create-next-app",
    "main_window",
    "OPK_DEBUG",
]
CJK = ["调研", "图片", "处理", "分析一下", "東京", "字段", "问题", "的"]
FILTERS = [
    {},
    {"agent": "codex"},
    {"agent": "claude-code", "kind": "tool_call"},
    {"kind": "message"},
    {"role": "user"},
    {"tool": "Bash"},
    {"since": "2025-11-01"},
    {"since": "2025-09-01", "until": "2025-12-01"},
    {"project": "/path/to/Demo"},
    {"kind": "tool_result", "agent": "codex"},
]


#: misspelled words (two inner letters swapped; a letter dropped): the "did you mean"
#: path (``query.search.suggest``), run after the ``n`` mixed queries, reported as their
#: own kind and left out of "all" (so "all" stays the 200 queries it always was)
MISSPELLED = ["embeddign", "printre", "constituiton", "notebok", "worktre", "teammte", "instlal", "comit"]


def queries(n: int = 200, seed: int = 4) -> list[tuple[str, dict]]:
    """``n`` (query, filters) pairs: words 40 %, phrases 15 %, identifiers 25 %, CJK
    10 %, and a filter on every third query; deterministic. Then each of
    ``MISSPELLED`` once, without filters."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        r = rnd.random()
        pool = WORDS if r < 0.4 else PHRASES if r < 0.55 else IDENTS if r < 0.8 else CJK if r < 0.9 else WORDS
        q = rnd.choice(pool)
        if r >= 0.9:  # two-word mixes
            q = f"{rnd.choice(WORDS)} {rnd.choice(IDENTS)}"
        out.append((q, rnd.choice(FILTERS[1:]) if i % 3 == 0 else {}))
    return out + [(q, {}) for q in MISSPELLED]


def kind_of(q: str, f: dict) -> str:
    """The query's kind for the figures: its pool (words, phrase, ident, cjk, mix),
    ``+filter`` when it has filters."""
    if q in MISSPELLED:
        k = "misspelled"
    elif " " in q and not q.startswith('"') and any(q.endswith(i) for i in IDENTS):
        k = "mix"
    elif q in PHRASES:
        k = "phrase"
    elif q in IDENTS:
        k = "ident"
    elif q in CJK:
        k = "cjk"
    else:
        k = "words"
    return k + ("+filter" if f else "")


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


# ---------------------------------------------------------------- worker (either checkout)


#: VM instructions of the running query, in thousands (``_count_steps``)
_STEPS = [0]


def _count_steps() -> int:
    _STEPS[0] += 1
    return 0  # go on


def _worker() -> None:
    """JSON lines on stdin → JSON lines on stdout, with whatever ``ctxkeep`` this
    interpreter imports: ``open`` a store (notes indexed first), ``q`` one timed query
    (ms in-process), ``relevance`` (recall@3 and MRR on a fresh corpus store)."""
    conn = None
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write to the protocol
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "open":
            from ctxkeep.pipeline.notes import index_note
            from ctxkeep.sinks import sqlite as sqlite_store

            home = Path(req["store"])
            # the store is written only when a note is missing (a store shared read-only
            # by several benches is left as it is once its notes are in; never with
            # ``--read-only``)
            r = sqlite_store.connect(home, readonly=True)
            missing = [
                label
                for label, rel in NOTES.items()
                if (CORPUS_HOME / rel).exists()
                and not r.execute(
                    "SELECT 1 FROM entry_rows WHERE session_id = ? LIMIT 1", (label,)
                ).fetchone()
            ]
            if missing and req.get("read_only"):
                missing, absent = [], missing
            else:
                absent = []
            if missing:
                w = sqlite_store.connect(home)
                for label in missing:
                    index_note(w, label, path=CORPUS_HOME / NOTES[label])
                w.close()
            info = {
                "schema": sqlite_store.schema_version(r),
                "entries": r.execute("SELECT max(rowid) FROM entry_rows").fetchone()[0],
                "chunks": r.execute("SELECT max(rowid) FROM chunk_rows").fetchone()[0],
                "mb": (home / "store.db").stat().st_size / 1e6,
                "notes": "indexed " + ", ".join(missing)
                if missing
                else "NOT in the store (--read-only): " + ", ".join(absent)
                if absent
                else "in the store",
            }
            r.close()
            # as `ctxkeep search` opens it (a checkout from before mmap=True: without)
            kw = {"mmap": True} if "mmap" in inspect.signature(sqlite_store.connect).parameters else {}
            conn = sqlite_store.connect(home, readonly=True, **kw)
            # SQLite VM instructions of each query, in thousands (the progress handler
            # runs every 1,000): a measure of the plan that load does not change (the work
            # FTS5 does inside one instruction, such as BM25's IDF walk, is not counted)
            conn.set_progress_handler(_count_steps, 1000)
            # ``serial``: this checkout's search on one connection (``parallel=False``)
            kw_search.clear()
            if "parallel" in inspect.signature(search_fn()).parameters:
                if req.get("serial"):
                    kw_search["parallel"] = False
                elif req.get("ahead") == "always":
                    kw_search["parallel"] = True
                _count_ahead()
            info["serial"] = kw_search.get("parallel") is False
            res = info
        elif op == "q":
            from ctxkeep.query.search import Filters, search

            if req.get("fresh"):  # no phrase counts from earlier searches (``native_rank``)
                from ctxkeep.query.search import retrieve
                from ctxkeep.sinks.sqlite import native_rank

                native_rank.clear()
                # nor filter answers (``retrieve.kept_passed``; a checkout before them: none)
                getattr(retrieve, "forget_kept", lambda: None)()
            _STEPS[0] = 0
            _WAITED[0] = 0.0
            t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
            found = search(
                conn, req["q"], filters=Filters(**req["f"]), limit=10, budget_tokens=4000, **kw_search
            )
            res = {
                "ms": (time.perf_counter() - t0) * 1000,
                "cpu_ms": (time.process_time() - c0) * 1000,
                "path_ms": (time.thread_time() - m0 + _WAITED[0]) * 1000,
                "ksteps": _STEPS[0],
                "hits": _digest(found),
                "ahead": _AHEAD[0],
                "split": _SPLIT[0],
            }
            _AHEAD[0] = 0
            _SPLIT[0] = 0
        elif op == "profile":
            res = _profile(conn, req["q"], req["f"])
        elif op == "relevance":
            res = _relevance()
        else:
            break
        out.write(json.dumps(res) + "\n")
        out.flush()


#: searches that ran lists ahead on a second connection since the last answer
_AHEAD = [0]


#: CPU seconds the thread of a search spent while the search waited for it
_WAITED = [0.0]

#: window statements split in two rowid ranges since the last answer
_SPLIT = [0]


def _count_ahead() -> None:
    """Count the searches that run lists ahead (``query.search.ahead.Ahead.start``
    returning True), where the checkout has them, and measure the critical path of
    each: the search thread's own CPU plus the CPU the list thread spent while the
    search waited for it (``take``, ``close``), read from the thread's CPU clock. On an
    idle second core that is the wall time, whatever the load during the bench."""
    from ctxkeep.query.search import ahead

    start, run, take, close = ahead.Ahead.start, ahead.Ahead._run, ahead.Ahead.take, ahead.Ahead.close
    if getattr(start, "counted", False):
        return

    def counted(self, conn):
        ok = start(self, conn)
        _AHEAD[0] += ok
        return ok

    def run_timed(self):
        try:
            run(self)
        finally:
            self.cpu_at_end = time.thread_time()

    def thread_cpu(self) -> float:
        t = self.thread
        if t is not None and t.is_alive():
            try:
                return time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except OSError:  # it ended meanwhile
                pass
        return getattr(self, "cpu_at_end", 0.0)

    def waited(fn):
        def wrapper(self, *a):
            before = thread_cpu(self)
            try:
                return fn(self, *a)
            finally:
                _WAITED[0] += max(0.0, thread_cpu(self) - before)

        return wrapper

    counted.counted = True  # type: ignore[attr-defined]
    ahead.Ahead.start = counted
    ahead.Ahead._run = run_timed
    ahead.Ahead.take = waited(take)
    ahead.Ahead.close = waited(close)
    try:  # a heavy window statement split in two rowid ranges (``query.search.split``)
        from ctxkeep.query.search import split
    except ImportError:  # a checkout before it
        return
    lower_start, lower_run, lower_wait = split.Lower.start, split.Lower._run, split.Lower.wait

    def split_counted(self):
        _SPLIT[0] += 1
        lower_start(self)

    def lower_timed(self):
        try:
            lower_run(self)
        finally:
            self.cpu_at_end = time.thread_time()

    split.Lower.start = split_counted
    split.Lower._run = lower_timed
    split.Lower.wait = waited(lower_wait)


#: keyword arguments of this worker's ``search`` calls (``parallel=False`` for a serial side)
kw_search: dict = {}


def search_fn():
    from ctxkeep.query.search import search

    return search


def _digest(res) -> str:
    """Everything a search returns (every field of every hit, the note, the
    suggestions, the budget figures) as a short hash: two sides agree on a query when
    their digests are equal."""
    import hashlib

    text = json.dumps(
        [
            res.query,
            res.note,
            list(res.suggestions),
            res.used_tokens,
            res.omitted,
            [vars(h) for h in res.hits],
        ],
        default=str,
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _profile(conn, q: str, f: dict) -> dict:
    """One query on one connection (``parallel=False`` where the checkout has it): the
    CPU ms (this thread's: one connection, one thread) of each candidate list's FTS statements (``retrieve.fts_ids``, named by its
    table and MATCH), of loading candidates, and the statements that call ``bm25()``
    (each walks every phrase's posting list for its IDF) out of all statements."""
    from ctxkeep.query.search import Filters, retrieve, search

    parts: list[tuple[str, float]] = []
    saved = {}

    def timed(name, fn, label):
        def wrapper(*a, **k):
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                parts.append((label(a), (time.thread_time() - t0) * 1000))

        saved[name] = fn
        setattr(retrieve, name, wrapper)

    timed("fts_ids", retrieve.fts_ids, lambda a: f"{a[1]} {a[2][:48]}")
    timed("load_candidates", retrieve.load_candidates, lambda a: "load")
    timed("phrase_among", retrieve.phrase_among, lambda a: "phrase among words")
    sql: list[str] = []
    conn.set_trace_callback(sql.append)
    kw = {"parallel": False} if "parallel" in inspect.signature(search).parameters else {}
    try:
        t0 = time.thread_time()
        search(conn, q, filters=Filters(**f), limit=10, budget_tokens=4000, **kw)
        ms = (time.thread_time() - t0) * 1000
    finally:
        conn.set_trace_callback(None)
        for name, fn in saved.items():
            setattr(retrieve, name, fn)
    merged: dict[str, float] = {}
    for label, t in parts:
        merged[label] = merged.get(label, 0.0) + t
    return {
        "ms": ms,
        "parts": merged,
        "bm25": sum(1 for x in sql if ("bm25(" in x or "bm25_top(" in x) and not x.startswith("--")),
        "statements": sum(1 for x in sql if not x.startswith("--")),
    }


def _relevance() -> dict:
    """recall@3 and MRR of the relevance set, ranked by this interpreter's ctxkeep on
    a fresh store of the whole corpus (the test's own ranking, ``_rank``)."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "tests" / "query" / "relevance"))
    from test_relevance import QUERIES, _rank

    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources.contract import DiscoveryContext

    with tempfile.TemporaryDirectory() as d:
        run_ingest(Path(d), ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
        conn = sqlite_store.connect(Path(d))
        ranks = {q["q"]: _rank(conn, q) for q in QUERIES}
        conn.close()
    return {
        "recall3": sum(1 for r in ranks.values() if r and r <= 3) / len(ranks),
        "mrr": sum(1 / r for r in ranks.values() if r) / len(ranks),
        "ranks": ranks,
    }


class Side:
    """One checkout's worker process (``python bench_search.py --worker``)."""

    def __init__(self, name: str, checkout: Path, store: Path, serial: bool = False, fresh: bool = False):
        self.name, self.checkout, self.store, self.serial = name, checkout, store, serial
        self.fresh = fresh
        self.proc = subprocess.Popen(
            [str(checkout / ".venv" / "bin" / "python"), str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(checkout),
        )

    def ask(self, **req) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(
                f"error: the {self.name} worker stopped ({self.checkout}) - see its stderr above"
            )
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


PROCESS_QUERIES = ("timeline filtering", "调研", "useTodos", '"command not found"')


def _process_time(checkout: Path, home: Path, q: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, from ``wait4``) of one ``ctxkeep search
    --json`` process."""
    exe = checkout / ".venv" / "bin" / "ctxkeep"
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(exe), "search", q, "--home", str(home), "--json"], stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"error: `ctxkeep search {q!r}` exited {proc.returncode} ({checkout})")
    return wall, ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="ctxkeep home of the store this checkout searches")
    ap.add_argument("--baseline", type=Path, help="a baseline checkout (with its .venv)")
    ap.add_argument("--baseline-store", type=Path, help="the baseline's store (default: the same store)")
    ap.add_argument("--rounds", type=int, default=2, help="timed passes over the 200 queries")
    ap.add_argument("--no-relevance", action="store_true")
    ap.add_argument(
        "--serial",
        action="store_true",
        help="also this checkout on one connection (search(parallel=False)) as a third side",
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="also this checkout with ck_bm25's phrase counts emptied before each query (what one "
        "`ctxkeep search` process gets; the 'this' side keeps them, as the MCP server and the app do)",
    )
    ap.add_argument(
        "--read-only", action="store_true", help="never write the store (notes are not indexed if missing)"
    )
    ap.add_argument(
        "--slowest", type=int, default=10, help="queries profiled per list (slowest of this side)"
    )
    ap.add_argument(
        "--ahead",
        choices=("auto", "always"),
        default="auto",
        help="this side's lists ahead on a second connection: when a core is free (the default, "
        "as users run it) or always",
    )
    ap.add_argument(
        "--over",
        type=float,
        default=0.0,
        help="list the queries above this many critical-path CPU ms, per side and round (0: none)",
    )
    ap.add_argument(
        "--process-rounds", type=int, default=3, help="passes over the 4 whole-process queries per side"
    )
    a = ap.parse_args(argv)
    sides = [Side("this", ROOT, a.store)]
    if a.serial:
        sides.append(Side("serial", ROOT, a.store, serial=True))
    if a.fresh:
        sides.append(Side("fresh", ROOT, a.store, fresh=True))
    if a.baseline:
        sides.insert(0, Side("baseline", a.baseline.resolve(), a.baseline_store or a.store))
    for s in sides:
        info = s.ask(op="open", store=str(s.store), read_only=a.read_only, serial=s.serial, ahead=a.ahead)
        print(
            f"{s.name:8s} {s.checkout} (git {_git_head(s.checkout)}): store {s.store}, schema v{info['schema']}, "
            f"{info['mb']:.0f} MB store.db, ~{info['entries']:,} entries, ~{info['chunks']:,} chunks "
            f"(highest ids), notes {info.get('notes', '?')}"
            + (", one connection" if info.get("serial") else "")
        )
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    qs = queries()
    for q, f in qs[:20]:  # warm the page cache and the statements
        for s in sides:
            s.ask(op="q", q=q, f=f)
    times: dict[str, list[tuple[float, str, dict]]] = {s.name: [] for s in sides}
    cpu: dict[str, list[float]] = {s.name: [] for s in sides}
    # per side and kind: CPU ms and thousands of VM instructions of each query
    per_kind: dict[str, dict[str, list[tuple[float, int]]]] = {s.name: {} for s in sides}
    loads = [os.getloadavg()[0]]
    digests: dict[str, dict[tuple[str, str], set[str]]] = {s.name: {} for s in sides}
    ahead = {s.name: 0 for s in sides}
    splits = {s.name: 0 for s in sides}
    path: dict[str, list[float]] = {s.name: [] for s in sides}  # critical-path CPU ms
    crit: dict[str, dict[tuple[str, str], float]] = {s.name: {} for s in sides}  # per query, worst round
    over: dict[str, list[list[tuple[float, str, dict]]]] = {
        s.name: [[] for _ in range(a.rounds)] for s in sides
    }
    for rnd in range(a.rounds):
        for i, (q, f) in enumerate(qs):
            order = sides if (i + rnd) % 2 == 0 else sides[::-1]  # alternate who goes first
            for s in order:
                r = s.ask(op="q", q=q, f=f, fresh=s.fresh)
                digests[s.name].setdefault((q, json.dumps(f)), set()).add(r.get("hits", "?"))
                ahead[s.name] += r.get("ahead", 0)
                splits[s.name] += r.get("split", 0)
                times[s.name].append((r["ms"], q, f))
                cell = (r["cpu_ms"], r.get("ksteps", -1))
                if kind_of(q, f) != "misspelled":  # as "all"
                    path[s.name].append(r.get("path_ms", r["cpu_ms"]))
                key = (q, json.dumps(f))
                crit[s.name][key] = max(crit[s.name].get(key, 0.0), r.get("path_ms", r["cpu_ms"]))
                if a.over and r.get("path_ms", r["cpu_ms"]) > a.over:
                    over[s.name][rnd].append((r.get("path_ms", r["cpu_ms"]), q, f))
                per_kind[s.name].setdefault(kind_of(q, f), []).append(cell)
                if kind_of(q, f) != "misspelled":
                    per_kind[s.name].setdefault("all", []).append(cell)
                if kind_of(q, f) != "misspelled":  # "all" as it always was
                    cpu[s.name].append(r["cpu_ms"])
        loads.append(os.getloadavg()[0])
    names = [s.name for s in sides]
    print(
        f"\nin-process ms, {len(qs)} queries x {a.rounds} rounds, alternating; load average "
        f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    )
    print(
        "searches that ran lists ahead on a second connection: "
        + ", ".join(f"{n} {ahead[n]} of {len(times[n])}" for n in names)
        + f" (this side: --ahead {a.ahead}; auto = when the load average leaves a core free)"
    )
    print(
        "window statements split in two rowid ranges (query.search.split): "
        + ", ".join(f"{n} {splits[n]}" for n in names)
    )
    kinds = ["all"] + sorted({kind_of(q, f) for q, f in qs})
    print(f"{'kind':16s} {'n':>4s}  " + "  ".join(f"{n + ' p50/p95/p99':>26s}" for n in names))
    for k in kinds:
        cells, n = [], 0
        for name in names:
            xs = [
                ms
                for ms, q, f in times[name]
                if kind_of(q, f) == k or (k == "all" and kind_of(q, f) != "misspelled")
            ]
            n = len(xs)
            cells.append(f"{pct(xs, 0.5):7.1f} {pct(xs, 0.95):7.1f} {pct(xs, 0.99):7.1f}".rjust(26))
        print(f"{k:16s} {n:4d}  " + "  ".join(cells))
    cells = [
        f"{pct(cpu[n], 0.5):7.1f} {pct(cpu[n], 0.95):7.1f} {pct(cpu[n], 0.99):7.1f}".rjust(26) for n in names
    ]
    print(
        f"{'all, CPU ms':16s} {len(cpu[names[0]]):4d}  "
        + "  ".join(cells)
        + "  (the worker's CPU: less load-bound)"
    )
    cells = [
        f"{pct(path[n], 0.5):7.1f} {pct(path[n], 0.95):7.1f} {pct(path[n], 0.99):7.1f}".rjust(26)
        for n in names
    ]
    print(
        f"{'critical path':16s} {len(path[names[0]]):4d}  "
        + "  ".join(cells)
        + "  (CPU ms of the search thread + of the list thread while it waited: the wall on an idle 2nd core)"
    )
    print(
        f"\nby kind, CPU ms of the worker and thousands of SQLite VM instructions (p50 / p95; "
        f"instructions do not vary with load; those of lists run on a second connection are not "
        f"counted)\n{'kind':16s} {'n':>4s}  "
        + "  ".join(f"{n + ' CPU p50/p95  kVM p50/p95':>40s}" for n in names)
    )
    for k in kinds:
        cells = []
        for name in names:
            xs = per_kind[name].get(k, [])
            c, v = [x[0] for x in xs] or [0.0], [x[1] for x in xs] or [0]
            cells.append(
                f"{pct(c, 0.5):7.1f} {pct(c, 0.95):7.1f}   {pct(v, 0.5):6d} {pct(v, 0.95):6d}".rjust(40)
            )
        print(f"{k:16s} {len(per_kind[names[0]].get(k, [])):4d}  " + "  ".join(cells))
    for name in names:
        worst: dict[tuple, float] = {}
        for ms, q, f in times[name]:
            key = (q, json.dumps(f))
            worst[key] = max(worst.get(key, 0.0), ms)
        print(
            f"  slowest ({name}): "
            + "; ".join(
                f"{ms:.0f} {q!r} {f}" for (q, f), ms in sorted(worst.items(), key=lambda x: -x[1])[:6]
            )
        )
    if a.over:
        print(f"\nqueries above {a.over:g} ms critical-path CPU, per side and round (most first)")
        for name in names:
            for rnd, xs in enumerate(over[name], 1):
                print(
                    f"  {name} round {rnd}: {len(xs)}: "
                    + "; ".join(
                        f"{ms:.0f} {q!r} {json.dumps(f)}" for ms, q, f in sorted(xs, key=lambda x: -x[0])
                    )
                )
    _same_hits(names, digests)
    _profile_slowest(sides, crit, a.slowest)
    if not a.no_relevance:
        print("\nrelevance set (fresh corpus store per side):")
        rel = {s.name: s.ask(op="relevance") for s in sides}
        for name in names:
            r = rel[name]
            misses = {q: v for q, v in r["ranks"].items() if not v or v > 3}
            print(f"  {name:8s} recall@3 {r['recall3']:.3f}  MRR {r['mrr']:.3f}  outside the top 3: {misses}")
        if len(names) == 2:
            a_r, b_r = (rel[n]["ranks"] for n in names)
            moved = {q: (a_r[q], b_r.get(q)) for q in a_r if a_r[q] != b_r.get(q)}
            print(f"  rank changes ({names[0]} -> {names[1]}): {moved or 'none'}")
    for s in sides:
        s.close()
    print()
    runs: dict[str, list[tuple[float, float]]] = {s.name: [] for s in sides}
    for s in sides:  # PYTHONDONTWRITEBYTECODE=1 and a fresh worktree: every process compiles
        if not any((s.checkout / "ctxkeep" / "__pycache__").glob("*.pyc")):
            print(
                f"note: {s.checkout}/ctxkeep has no compiled bytecode: each `ctxkeep search` process "
                f"compiles the modules it imports (~+0.05 CPU s); `python -m compileall -q ctxkeep` "
                f"there first to compare processes"
            )
    procs = [s for s in sides if not s.serial and not s.fresh]  # a process of the serial side is this side's
    for rnd in range(a.process_rounds):  # the sides alternate, as the queries above
        for i, q in enumerate(PROCESS_QUERIES):
            for s in procs if (i + rnd) % 2 == 0 else procs[::-1]:
                runs[s.name].append(_process_time(s.checkout, s.store, q))
    for name in [s.name for s in procs if runs[s.name]]:
        wall, cpu_s = [r[0] for r in runs[name]], [r[1] for r in runs[name]]
        print(
            f"whole process `ctxkeep search` ({name}, {len(wall)} runs): median {statistics.median(wall):.2f} s, "
            f"max {max(wall):.2f} s; CPU median {statistics.median(cpu_s):.2f} s"
        )
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"  (bare python start: {time.perf_counter() - t0:.2f} s)")
    summary = {
        n: {
            "p50_ms": round(pct([x[0] for x in times[n]], 0.5), 1),
            "p95_ms": round(pct([x[0] for x in times[n]], 0.95), 1),
            "p99_ms": round(pct([x[0] for x in times[n]], 0.99), 1),
            "cpu_p95_ms": round(pct(cpu[n], 0.95), 1),
            "critical_path_p95_ms": round(pct(path[n], 0.95), 1),
        }
        for n in names
    }
    print(json.dumps(summary))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _same_hits(names: list[str], digests: dict) -> None:
    """The correctness check: every query's hits (every field, note, suggestions) the
    same on every side and in every round."""
    keys = list(digests[names[0]])
    unstable = {n: [k for k in keys if len(digests[n].get(k, ())) > 1] for n in names}
    print(f"\nsame hits ({len(keys)} distinct queries, every field of every hit, the note, the suggestions):")
    for n in names:
        if unstable[n]:
            print(f"  {n}: {len(unstable[n])} queries changed between rounds: {unstable[n][:5]}")
    for n in names[1:]:
        diff = [k for k in keys if digests[n].get(k) != digests[names[0]].get(k)]
        verdict = (
            "identical"
            if not diff
            else f"DIFFERENT on {len(diff)}: " + "; ".join(f"{q!r} {f}" for q, f in diff[:8])
        )
        print(f"  {names[0]} vs {n}: {verdict}")


def _profile_slowest(sides: list, times: dict, k: int) -> None:
    """The ``k`` slowest queries of this side (by their critical path, worst round), each run once
    more on one connection by every side: its CPU ms, its lists' FTS statements and
    candidate loading (CPU ms), and its statements calling ``bm25()``; then the bm25
    statements of all the queries per side."""
    if k <= 0:
        return
    worst = times["this"]  # (query, filters JSON) -> critical-path CPU ms, worst round
    top = sorted(worst, key=lambda x: -worst[x])[:k]
    print(
        f"\nthe {k} slowest queries of this side, once more on one connection each (CPU ms; bm25 statements / all)"
    )
    for q, f in top:
        print(f"  {q!r} {f}  (critical path, worst round: {worst[(q, f)]:.1f} ms)")
        for s in sides:
            if s.serial:
                continue
            r = s.ask(op="profile", q=q, f=json.loads(f))
            parts = ", ".join(f"{lab} {t:.1f}" for lab, t in sorted(r["parts"].items(), key=lambda x: -x[1]))
            print(f"    {s.name:8s} {r['ms']:6.1f} ms  bm25 {r['bm25']}/{r['statements']}: {parts}")
    for s in sides:
        if s.serial:
            continue
        b = st = 0
        for q, f in queries():
            r = s.ask(op="profile", q=q, f=f)
            b, st = b + r["bm25"], st + r["statements"]
        print(
            f"  {s.name:8s} all {len(queries())} queries on one connection: {b} statements call bm25() of {st}"
        )


def _git_head(checkout: Path) -> str:
    r = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return r.stdout.strip() or "?"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _worker()
    else:
        main()

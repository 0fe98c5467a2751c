"""CPU-second accounting of a fresh ingest, per process, thread and stage (issue 26,
target 3: where the 200 MB ingest's time goes; a script that prints figures, not a
test).

A fresh ``run_ingest`` of a tree (``--tree``, e.g. the 200 MB scaled tree
``/tmp/tree200``) into a new store in this process, with the vault off, on, or both
(``--vault off,on``). Each stage function is wrapped and charged the CPU time of the
thread that runs it (``time.thread_time`` around each call: one clock read per call,
no profiler, so the figures hold under load, where wall time does not); the reader
process (``pipeline.reader_process``) is this script started as its module, so its
stages are charged the same way and sent back in a file. Printed:

- both processes' user and system CPU seconds, minor page faults, the load average;
- the ingest process's threads (main: plan, transform, index terms, the vault's
  capture; ``ctxkeep-writer``: the SQLite load; ``ctxkeep-analytics``: DuckDB;
  ``ctxkeep-read-ahead``: unpickling the reader's chunks) and what no Python thread
  ran (Polars' and DuckDB's worker pools, their spinning included);
- each stage's CPU seconds and calls (a stage nested in another is counted in both:
  ``_insert_chunks`` within ``load_batch``).

A stage that runs in a Polars expression (the entries' redaction in
``normalized_rows``: ``transforms.redact.redact_expr``) runs mostly in Polars' pool,
which ``thread_time`` does not see: it shows in the process's "pools and the rest".

    uv run python tests/bench/profile_ingest.py --tree /tmp/tree200 --vault off,on
    uv run python tests/bench/profile_ingest.py --mb 2          # a check that it works
    uv run python tests/bench/profile_ingest.py --tree /tmp/tree200 --vault on \\
        --record /tmp/me-rekey     # also the readers' redaction inputs, for
                                   # bench_redact_raw.py --replay /tmp/me-rekey
    uv run python tests/bench/profile_ingest.py --tree /tmp/tree2000 --vault on --sql
        # also load_batch's CPU per SQL statement (by table), the first third of the
        # groups against the last: which step's cost grows with the store
    uv run python tests/bench/profile_ingest.py --tree /tmp/tree2000 --vault on --sql \
        --store /tmp/me-a --writer-pragma secure_delete=FAST
        # an A/B of one checkout (session 22): run beside a plain one; --page-size,
        # --cache-mib, --writer-mmap-mib and --writer-pragma change only the writing
        # connections' SQLite settings; --store keeps the store (to compare, search)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: the checkout profiled: this one, or ``CTXKEEP_PROFILE_ROOT`` (another checkout's
#: ctxkeep run under this script's instruments, with that checkout's virtualenv's python,
#: e.g. a baseline without ``--sql``)
ROOT = Path(os.environ.get("CTXKEEP_PROFILE_ROOT") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(ROOT))
SCALE = ROOT.parent / "shared" / "tools" / "scale_corpus.py"
#: where the reader process writes its figures (set by the ingest side)
_OUT_ENV = "CTXKEEP_PROFILE_READER_OUT"

_cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
_calls: collections.Counter[str] = collections.Counter()


#: (wall time at its end, label, CPU s, wall time at its start) of each stage call:
#: what the run's tail spends, and the groups' timeline (``--groups``)
_stamps: list[tuple[float, str, float, float]] = []


def _charge(label: str, t0: float, w0: float | None = None) -> None:
    d = time.thread_time() - t0
    _cpu[label] += d
    _calls[label] += 1
    now = time.time()
    _stamps.append((now, label, d, now if w0 is None else w0))


def _wrap(owner, name: str, label: str) -> None:
    """Charge each call of ``owner.name`` to ``label`` (the calling thread's CPU)."""
    f = getattr(owner, name)

    def timed(*a, **k):
        w0, t0 = time.time(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            _charge(label, t0, w0)

    setattr(owner, name, timed)


def _wrap_gen(owner, name: str, label: str) -> None:
    """Charge the work of each step of the generator ``owner.name`` to ``label``."""
    f = getattr(owner, name)

    def timed(*a, **k):
        it = f(*a, **k)
        while True:
            t0 = time.thread_time()
            try:
                x = next(it)
            except StopIteration:
                _charge(label, t0)
                return
            _charge(label, t0)
            yield x

    setattr(owner, name, timed)


_threads: dict[str, float] = {}

#: (kind, start, end) wall times (``time.time``: the processes' clocks agree) of the
#: waits between the processes and threads: who waits on whom, over the run
_events: list[tuple[str, float, float]] = []

#: the kinds of waits ``_timeline`` prints, in its columns' order
WAITS = (
    ("reader blocked sending", "readers blocked"),  # the ingest process is behind
    ("transform waits on readers", "transform waits readers"),  # the readers are behind
    ("transform waits on writer", "transform waits writer"),
    ("writer idle", "writer idle"),  # waits on the transform
)


class _TimedPickle:
    """``pickle`` for the reader process, its ``dump`` timed with the flush after it: the
    time a send blocks on the full pipe (the ingest not reading)."""

    def __getattr__(self, name):
        import pickle

        return getattr(pickle, name)

    def dump(self, obj, f, protocol=None):
        import pickle

        t0 = time.time()
        pickle.dump(obj, f, protocol=protocol)
        f.flush()
        _events.append(("reader blocked sending", t0, time.time()))


def _timed_queue(label_put: str | None, label_get: str | None):
    """A ``queue`` module stand-in whose ``Queue`` records the wall time of blocking
    ``put`` s and ``get`` s as ``_events``."""
    import queue
    import types

    class Queue(queue.Queue):
        def put(self, item, block=True, timeout=None):
            t0 = time.time()
            try:
                return super().put(item, block, timeout)
            finally:
                if label_put:
                    _events.append((label_put, t0, time.time()))

        def get(self, block=True, timeout=None):
            t0 = time.time()
            try:
                return super().get(block, timeout)
            finally:
                if label_get:
                    _events.append((label_get, t0, time.time()))

    return types.SimpleNamespace(Queue=Queue, Full=queue.Full, Empty=queue.Empty)


class _CpuSampler:
    """Each process's CPU seconds (user + system, ``/proc/PID/stat``, clock ticks) every
    ``every`` s of wall, in a thread of the ingest process: this process and the reader
    processes it started (``pids``, added by ``child``). ``busy(start, end, bins)`` gives
    per slice of the run the CPU seconds of the ingest process and of the readers: their
    sum over the slice's length is how many of the 2 cores worked (2.0: none idle)."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.pids: list[int] = []
        self.samples: list[tuple[float, dict[int, float]]] = []
        self._stop = threading.Event()
        self._t: threading.Thread | None = None
        self._tick = os.sysconf("SC_CLK_TCK")
        self._last: dict[int, float] = {}

    def _cpu(self, pid: int) -> float | None:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self._tick  # utime, stime

    def _sample(self) -> None:
        now = {}
        for pid in [os.getpid(), *self.pids]:
            v = self._cpu(pid)
            now[pid] = v if v is not None else self._last.get(pid, 0.0)  # reaped: its last figure
        self._last = now
        self.samples.append((time.time(), now))

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def start(self) -> None:
        self.pids.clear()
        self.samples.clear()
        self._last = {}
        self._stop.clear()
        self._sample()
        self._t = threading.Thread(target=self._run, name="profile-sampler", daemon=True)
        self._t.start()

    def stop(self) -> None:
        self._stop.set()
        if self._t is not None:
            self._t.join()
        self._sample()

    def tail(self, end: float) -> tuple[float, float]:
        """The run's tail: ``(wall s from the readers' last CPU tick to ``end``, the
        ingest process's CPU s in it)``: the time one core idles while the ingest process
        finishes alone (0, 0 without readers)."""
        me = os.getpid()
        last = None
        for (_, a), (t, b) in zip(self.samples, self.samples[1:], strict=False):
            if any(v > a.get(pid, 0.0) for pid, v in b.items() if pid != me):
                last = (t, b[me])
        if last is None:
            return 0.0, 0.0
        return max(0.0, end - last[0]), self.samples[-1][1][me] - last[1]

    def last_ticks(self) -> dict[int, float]:
        """Each process's last sample whose CPU grew: when it last worked (wall)."""
        out: dict[int, float] = {}
        for (_, a), (t, b) in zip(self.samples, self.samples[1:], strict=False):
            for pid, v in b.items():
                if v > a.get(pid, 0.0):
                    out[pid] = t
        return out

    def busy(self, start: float, end: float, bins: int) -> list[tuple[float, float]]:
        """``(ingest process CPU s, readers' CPU s)`` per slice (each CPU delta between
        two samples charged to the slice holding the later sample)."""
        step = max((end - start) / bins, 1e-9)
        out = [[0.0, 0.0] for _ in range(bins)]
        me = os.getpid()
        for (_, a), (t, b) in zip(self.samples, self.samples[1:], strict=False):
            i = min(bins - 1, max(0, int((t - start) / step)))
            for pid, v in b.items():
                d = v - a.get(pid, 0.0)
                out[i][0 if pid == me else 1] += d
        return [(x, y) for x, y in out]


_sampler = _CpuSampler()


def _count_threads() -> None:
    """Record each Python thread's CPU seconds when it ends (by name, summed)."""
    run = threading.Thread.run

    def counted(self):
        try:
            run(self)
        finally:
            _threads[self.name] = _threads.get(self.name, 0.0) + time.thread_time()

    threading.Thread.run = counted  # type: ignore[method-assign]


def _usage(who) -> dict:
    r = resource.getrusage(who)
    return {"user": r.ru_utime, "sys": r.ru_stime, "minflt": r.ru_minflt}


# ---------------------------------------------------------------- the reader process


def _reader_main() -> None:
    """``pipeline.reader_process`` with its stages charged; figures to ``$_OUT_ENV``."""
    from ctxkeep.pipeline import readahead, reader_process, stable_ids
    from ctxkeep.transforms import chunk, grams, normalize, tokens

    _count_threads()
    _wrap_gen(readahead, "read_files", "read + parse (+ raw-line redaction: rekey)")
    reader_process.read_files = readahead.read_files
    _wrap(stable_ids, "rekey", "  rekey (raw-line redaction for the vault)")
    readahead.rekey = stable_ids.rekey
    _wrap(normalize, "normalized_rows", "normalized_rows (calling thread; redaction runs in the pool)")
    _wrap(reader_process, "_precompute", "precompute (tokens + chunks)")
    _wrap(tokens, "estimate_tokens", "  estimate_tokens (BPE)")
    _wrap(chunk, "chunks_frame", "  chunks_frame")
    _wrap(grams, "grams_batch", "    grams_batch (substring index terms)")
    _wrap(reader_process, "_ipc", "Arrow IPC out")
    if "--seal" in sys.argv[2:]:
        from ctxkeep.sinks.vault import capture

        _wrap(capture, "seal", "vault seal (redaction, SHA-256, zstd)")
    reader_process.pickle = _TimedPickle()
    if os.environ.get(_RECORD_ENV):
        _record_rekey(Path(os.environ[_RECORD_ENV]))
    try:
        reader_process._main()
    finally:
        _threads["main"] = time.thread_time()
        Path(f"{os.environ[_OUT_ENV]}.{os.getpid()}").write_text(
            json.dumps(
                {
                    "usage": _usage(resource.RUSAGE_SELF),
                    "threads": _threads,
                    "stages": _stage_rows(),
                    "events": _events,
                }
            )
        )


#: ``--record DIR``: each reader's ``vault.redact_raw_and_texts`` inputs are pickled there
_RECORD_ENV = "CTXKEEP_PROFILE_RECORD"


def _record_rekey(into: Path) -> None:
    """Pickle each ``vault.redact_raw_and_texts(datas, texts)`` call's inputs of this
    reader into ``into`` (``<pid>-<n>.pkl``), for ``bench_redact_raw.py --replay``: the
    readers' redaction on the very lines and entry texts an ingest gives it."""
    import itertools
    import pickle

    from ctxkeep.sinks import vault

    real, n = vault.redact_raw_and_texts, itertools.count()

    def recorded(datas, texts):
        with open(into / f"{os.getpid()}-{next(n):04d}.pkl", "wb") as f:
            pickle.dump((datas, texts), f)
        return real(datas, texts)

    vault.redact_raw_and_texts = recorded


def _stage_rows() -> list:
    return [[k, round(v, 3), _calls[k]] for k, v in _cpu.items()]


# ---------------------------------------------------------------- the ingest process


#: set (by ``--sql``): charge each SQL statement of ``load_batch`` per group
_SQL_ENV = "CTXKEEP_PROFILE_SQL"
#: per ``load_batch`` call: {statement head: CPU s}
_sql_groups: list[dict[str, float]] = []


class _TimedConn:
    """A connection whose ``execute``/``executemany`` are charged (the calling
    thread's CPU) to the statement's first words, in the current group's dict."""

    def __init__(self, conn, into: dict[str, float]) -> None:
        self._conn, self._into = conn, into

    def _key(self, sql: str) -> str:
        """The statement's words up to its table (the word after INTO/FROM/UPDATE)."""
        words = sql.split()
        for i, w in enumerate(words[:8]):
            if w.upper() in ("INTO", "FROM", "UPDATE") and i + 1 < len(words):
                return " ".join(words[: i + 2]).split("(")[0][:48]
        return " ".join(words[:4])[:48]

    def execute(self, sql, *a):
        t0 = time.thread_time()
        try:
            return self._conn.execute(sql, *a)
        finally:
            k = self._key(sql)
            self._into[k] = self._into.get(k, 0.0) + time.thread_time() - t0

    def executemany(self, sql, rows):
        t0 = time.thread_time()
        try:
            return self._conn.executemany(sql, rows)
        finally:
            k = self._key(sql)
            self._into[k] = self._into.get(k, 0.0) + time.thread_time() - t0

    def __getattr__(self, name):
        return getattr(self._conn, name)


def _sql_proxy(sqlite_store) -> None:
    real = sqlite_store.load_batch

    def timed(conn, *a, **k):
        d: dict[str, float] = {}
        _sql_groups.append(d)
        t0 = time.thread_time()
        try:
            return real(_TimedConn(conn, d), *a, **k)
        finally:
            d["(load_batch total)"] = time.thread_time() - t0

    sqlite_store.load_batch = timed
    from ctxkeep.pipeline import writer

    real_commit = getattr(writer.Writer, "_commit", None)
    if real_commit is not None:  # several groups a transaction: the COMMIT is the writer's

        def commit(self, conn):
            t0 = time.thread_time()
            try:
                return real_commit(self, conn)
            finally:  # charged to the group that made it (the last one of the transaction)
                dt = time.thread_time() - t0
                if _sql_groups:
                    d = _sql_groups[-1]
                    d["COMMIT (writer)"] = d.get("COMMIT (writer)", 0.0) + dt
                    d["(load_batch total)"] = d.get("(load_batch total)", 0.0) + dt

        writer.Writer._commit = commit  # type: ignore[method-assign]


def _print_sql() -> None:
    """Per statement: CPU s summed over the first and the last third of the groups."""
    n = len(_sql_groups)
    if not n:
        return
    third = max(n // 3, 1)
    first, last = _sql_groups[:third], _sql_groups[-third:]
    keys = sorted({k for g in _sql_groups for k in g}, key=lambda k: -sum(g.get(k, 0) for g in _sql_groups))
    print(
        f"load_batch SQL by statement, {n} groups: first {third} vs last {third} groups (CPU s; "
        "a COMMIT of several groups is charged to its last group, and counted in the total)"
    )
    for k in keys:
        a, b = sum(g.get(k, 0) for g in first), sum(g.get(k, 0) for g in last)
        tot = sum(g.get(k, 0) for g in _sql_groups)
        print(f"  {k:<50} all {tot:7.2f}  first {a:6.2f}  last {b:6.2f}  x{b / a if a else 0:5.2f}")


def _instrument_ingest() -> None:
    from ctxkeep.pipeline import engine, reader_process, transform, writer
    from ctxkeep.sinks import duckdb as duckdb_store
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.sqlite import load, store_safety
    from ctxkeep.sinks.vault import capture

    _count_threads()
    _wrap(engine, "plan", "plan (walk, stat, watermarks)")
    _wrap(store_safety, "check_integrity", "check_integrity")
    _wrap(sqlite_store, "merge_segments", "merge_segments (FTS5 'optimize' at the run's end)")
    if "settle_segments" in getattr(sqlite_store, "_MODULE_OF", {}):  # a checkout that has it
        _wrap(sqlite_store, "settle_segments", "settle_segments (FTS5 'merge' after a bulk load)")
    _wrap(transform, "transform_batch", "transform_batch (dedup, contents, tokens taken)")
    _wrap(engine, "unique_entries", "unique_entries")
    _wrap(sqlite_store, "with_index_terms", "with_index_terms (symbols, vocabulary)")
    _wrap(capture.Capturer, "prepare", "vault capture (packs)")
    if os.environ.get(_SQL_ENV):
        _sql_proxy(sqlite_store)
    _wrap(sqlite_store, "load_batch", "load_batch (SQLite, one transaction a group)")
    _wrap(load, "_insert_chunks", "  _insert_chunks (chunks, FTS5 words/grams/symbols, vocab)")
    _wrap(load.fx, "facets_by_content", "  facets_by_content")
    _wrap(duckdb_store.EntryAppends, "append", "DuckDB appends (per group)")
    _wrap(duckdb_store, "sync", "DuckDB sync (closing: usage, status)")
    _wrap(duckdb_store, "sync_usage", "  sync_usage (compare, price, buckets)")
    _wrap(duckdb_store, "_refresh_buckets", "    usage_buckets refill")
    _wrap(duckdb_store, "_sync_texts", "  texts (titles, error flags)")
    _wrap(duckdb_store.UsageSteps, "step", "DuckDB usage step (new usage rows, texts)")
    _wrap_gen(reader_process, "read_in_process", "reader's chunks in (unpickle, Arrow IPC)")
    from ctxkeep.pipeline import readahead

    # the transform's waits for items (the read-ahead queues) and for the writer's queue
    readahead.queue = _timed_queue(None, "transform waits on readers")  # type: ignore[assignment]
    writer.queue = _timed_queue("transform waits on writer", "writer idle")  # type: ignore[assignment]
    assert writer.sqlite_store is sqlite_store
    root = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    start = reader_process.start_child

    def child(module: str, *args: str):
        if module == "ctxkeep.pipeline.reader_process":
            module = Path(__file__).stem
        proc, out = start(module, *args)
        _sampler.pids.append(proc.pid)
        return proc, out

    reader_process.start_child = child


def _fmt_usage(u: dict) -> str:
    return f"user {u['user']:6.2f}  sys {u['sys']:5.2f}  = {u['user'] + u['sys']:6.2f} s  ({u['minflt']:,} minor faults)"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def profile(
    tree: Path, vault_on: bool, readers: int | None = None, groups: bool = False, keep: Path | None = None
) -> None:
    work = Path(tempfile.mkdtemp(prefix="ctxkeep-profile-"))
    store = keep if keep is not None else work / "store"
    out = work / "reader.json"
    os.environ[_OUT_ENV] = str(out)
    os.environ["CTXKEEP_VAULT"] = "1" if vault_on else "0"
    try:
        from ctxkeep.pipeline import reader_process
        from ctxkeep.pipeline.engine import run_ingest
        from ctxkeep.sources.contract import DiscoveryContext

        if readers is not None:
            reader_process.READERS = readers

        _cpu.clear()
        _calls.clear()
        _threads.clear()
        self0, main0 = _usage(resource.RUSAGE_SELF), time.thread_time()
        load0 = _load()
        _events.clear()
        _stamps.clear()
        t0, t_start = time.perf_counter(), time.time()
        _sampler.start()
        try:
            s = run_ingest(store, ctx=DiscoveryContext(home=tree, env={}))
        finally:
            _sampler.stop()
        wall = time.perf_counter() - t0
        _threads["main"] = time.thread_time() - main0
        me = {k: v - self0[k] for k, v in _usage(resource.RUSAGE_SELF).items()}
        rdrs = [json.loads(f.read_text()) for f in sorted(work.glob("reader.json.*"))]
        print(
            f"\n== vault {'on' if vault_on else 'off'}, readers {readers or 'default'}: {s.entries_new:,} entries, {s.bytes / 1e6:.1f} MB, "
            f"wall {wall:.2f} s (load {load0} -> {_load()}; wall is noise under load, CPU is not)"
        )
        total = me["user"] + me["sys"] + sum(r["usage"]["user"] + r["usage"]["sys"] for r in rdrs)
        print(f"CPU total {total:.2f} s ({len(rdrs)} reader process(es))")
        print(f"ingest process  {_fmt_usage(me)}")
        named = sum(_threads.values())
        for name, v in sorted(_threads.items(), key=lambda kv: -kv[1]):
            print(f"  thread {name:<22} {v:6.2f} s")
        print(f"  {'pools (Polars, DuckDB) and the rest':<29} {me['user'] + me['sys'] - named:6.2f} s")
        for k, v in sorted(_cpu.items(), key=lambda kv: -kv[1]):
            print(f"    {k:<62} {v:6.2f} s  {_calls[k]:>6} calls")
        for i, reader in enumerate(rdrs):
            print(f"reader process {i + 1}  {_fmt_usage(reader['usage'])}")
            rn = sum(reader["threads"].values())
            for name, v in sorted(reader["threads"].items(), key=lambda kv: -kv[1]):
                print(f"  thread {name:<22} {v:6.2f} s")
            rt = reader["usage"]["user"] + reader["usage"]["sys"]
            print(f"  {'pools (Polars) and the rest':<29} {rt - rn:6.2f} s")
            for k, v, n in sorted(reader["stages"], key=lambda r: -r[1]):
                print(f"    {k:<62} {v:6.2f} s  {n:>6} calls")
        if not rdrs:
            print("reader process: none (below the reader process's threshold: read in this process)")
        events = [tuple(e) for e in _events] + [tuple(e) for r in rdrs for e in r["events"]]
        _timeline(events, t_start, t_start + wall)
        if groups:
            _groups(t_start, t_start + wall)
        _print_sql()
        _print_segments(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _print_segments(store: Path) -> None:
    """Each FTS table's segments after the run (the shape a search walks): count, leaf
    pages, the largest's share, and the persisted ``automerge`` (none: FTS5's default)."""
    import sqlite3

    from ctxkeep.sinks.sqlite.ddl import FTS_TABLES

    c = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        for t in FTS_TABLES:
            leaves = [
                r[0] for r in c.execute(f"SELECT max(pgno) n FROM {t}_idx GROUP BY segid ORDER BY n DESC")
            ]
            am = c.execute(f"SELECT v FROM {t}_config WHERE k='automerge'").fetchone()
            share = leaves[0] / sum(leaves) if leaves else 0.0
            print(
                f"segments {t:<12} {len(leaves):>3}  leaves {sum(leaves):>8,}  largest {share:5.1%}  "
                f"automerge {am[0] if am else 'default'}"
            )
    finally:
        c.close()


def _timeline(events: list, start: float, end: float, bins: int = 16) -> None:
    """Who waits on whom over the run: per slice of the run's wall time, the seconds of
    each kind of wait (``WAITS``; readers' blocked sends summed over the readers), and
    the totals. A slice where the readers block is one where the ingest process is the
    critical path; where the transform waits on the readers, the readers are."""
    step = max((end - start) / bins, 1e-9)
    per = {k: [0.0] * bins for k, _ in WAITS}
    for kind, a, b in events:
        if kind not in per:
            continue
        for i in range(bins):
            lo, hi = start + i * step, start + (i + 1) * step
            per[kind][i] += max(0.0, min(b, hi) - max(a, lo))
    busy = _sampler.busy(start, end, bins)
    print(
        f"who waits on whom (wall s per {step:.2f} s slice of the run), and the CPU s each side used "
        "in it (cores busy: their sum over the slice; 2.0 = no core idle on 2 cores):"
    )
    heads = [h[:24] for _, h in WAITS]
    print(
        "  "
        + f"{'slice':>11}"
        + "".join(f" {h:>24}" for h in heads)
        + f" {'ingest':>7} {'readers':>7} {'cores':>5}"
    )
    for i in range(bins):
        t = f"{i * step:5.1f}-{(i + 1) * step:5.1f}"
        ing, rd = busy[i]
        print(
            f"  {t:>11}"
            + "".join(f" {per[k][i]:24.2f}" for k, _ in WAITS)
            + f" {ing:7.2f} {rd:7.2f} {(ing + rd) / step:5.2f}"
        )
    ing, rd = sum(b[0] for b in busy), sum(b[1] for b in busy)
    print(
        f"  {'total':>11}"
        + "".join(f" {sum(per[k]):24.2f}" for k, _ in WAITS)
        + f" {ing:7.2f} {rd:7.2f} {(ing + rd) / max(end - start, 1e-9):5.2f}"
    )
    tail_wall, tail_cpu = _sampler.tail(end)
    print(
        f"tail: the ingest process alone for the last {tail_wall:.2f} s of the run "
        f"(after the readers' last CPU tick), using {tail_cpu:.2f} CPU s in it"
    )
    spent: collections.Counter[str] = collections.Counter()
    for t, label, d, _w0 in _stamps:
        if t >= end - tail_wall:  # a call that ended in the tail (charged whole)
            spent[label] += d
    for label, d in spent.most_common(8):
        print(f"    in the tail: {label:<62} {d:6.2f} s")


#: the stages ``_groups`` prints per call, with their short names
GROUP_STAGES = {
    "transform_batch (dedup, contents, tokens taken)": "transform",
    "load_batch (SQLite, one transaction a group)": "load_batch",
    "DuckDB appends (per group)": "duckdb",
    "vault capture (packs)": "vault",
    "DuckDB sync (closing: usage, status)": "sync",
    "  sync_usage (compare, price, buckets)": "  usage",
    "  texts (titles, error flags)": "  texts",
    "DuckDB usage step (new usage rows, texts)": "step",
}


def _groups(start: float, end: float) -> None:
    """The run's end, group by group: when each of the last calls of the per-group
    stages started and ended (s from the run's start) and its CPU s, and when each
    reader process last worked: what the ingest process still does after the readers'
    end, and why (``--groups``)."""
    me = os.getpid()
    ticks = _sampler.last_ticks()
    ends = sorted(t - start for pid, t in ticks.items() if pid != me)
    print(f"run end {end - start:.2f} s; readers last worked at " + ", ".join(f"{t:.2f}" for t in ends))
    rows = sorted((w0, t, GROUP_STAGES[label], d) for t, label, d, w0 in _stamps if label in GROUP_STAGES)
    cut = 0.0
    for w0, t, name, d in rows:
        if t - start >= cut:
            print(f"    {name:<10} {w0 - start:7.2f} -> {t - start:7.2f}  CPU {d:5.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, help="a HOME holding agents' session files (e.g. /tmp/tree200)")
    ap.add_argument("--mb", type=int, default=200, help="without --tree: scale the corpus to this many MB")
    ap.add_argument("--vault", default="off,on", help="off, on, or off,on")
    ap.add_argument(
        "--readers",
        default="",
        help="reader processes of a big ingest, one run each, e.g. 1,2 (default: READERS)",
    )
    ap.add_argument(
        "--record",
        type=Path,
        help="pickle the readers' redaction inputs into this folder (bench_redact_raw.py --replay)",
    )
    ap.add_argument("--groups", action="store_true", help="print the run's end group by group")
    ap.add_argument(
        "--page-size",
        type=int,
        help="the new store's page size, bytes (connection.PAGE_SIZE; an A/B of one checkout)",
    )
    ap.add_argument(
        "--cache-mib", type=int, help="the writing connections' page cache, MiB (connection.CACHE_KIB)"
    )
    ap.add_argument(
        "--writer-mmap-mib",
        type=int,
        help="also map this much of the store into the writing connections (PRAGMA mmap_size)",
    )
    ap.add_argument(
        "--writer-pragma",
        action="append",
        default=[],
        help="also run PRAGMA this (e.g. secure_delete=FAST) on the writing connections; repeatable",
    )
    ap.add_argument(
        "--fts-automerge",
        type=int,
        help="set FTS5's 'automerge' of the store's FTS tables to this before the load (persistent in "
        "the store; FTS5's default 4, 0: no merge but the crisis merge at 16 segments a level)",
    )
    ap.add_argument(
        "--store", type=Path, help="ingest into (and keep) this store (must not exist; one run only)"
    )
    ap.add_argument(
        "--sql",
        action="store_true",
        help="charge load_batch's SQL per statement: first vs last third of the groups",
    )
    ap.add_argument(
        "--fts-bulk-mib",
        type=float,
        help="engine.FTS_BULK_BYTES in MiB: a run above it is a bulk load (FTS5 automerge off in its "
        "transactions, settled at the end); e.g. 1 with --store of a bigger store: the settle path",
    )
    a = ap.parse_args()
    if a.fts_bulk_mib is not None:
        from ctxkeep.pipeline import engine

        engine.FTS_BULK_BYTES = int(a.fts_bulk_mib * 1024 * 1024)
    if a.sql:
        os.environ[_SQL_ENV] = "1"
    if a.record:
        a.record.mkdir(parents=True, exist_ok=True)
        os.environ[_RECORD_ENV] = str(a.record.resolve())
    tree = a.tree
    tmp = None
    if tree is None:
        tmp = Path(tempfile.mkdtemp(prefix="ctxkeep-profile-tree-"))
        tree = tmp / "home"
        subprocess.run(
            [sys.executable, str(SCALE), str(tree), "--mb", str(a.mb), "--unique-text"], check=True
        )
    if a.page_size:
        from ctxkeep.sinks.sqlite import connection

        connection.PAGE_SIZE = a.page_size
    if a.cache_mib:
        from ctxkeep.sinks.sqlite import connection

        connection.CACHE_KIB = a.cache_mib * 1024
    extra = list(a.writer_pragma) + (
        [f"mmap_size={a.writer_mmap_mib * 1024 * 1024}"] if a.writer_mmap_mib else []
    )
    if extra:
        from ctxkeep.sinks.sqlite import connection

        pragmas = connection._load_pragmas

        def more(conn):
            pragmas(conn)
            for p in extra:
                conn.execute(f"PRAGMA {p}")

        connection._load_pragmas = more
    if a.fts_automerge is not None:
        from ctxkeep.sinks import sqlite as sqlite_store
        from ctxkeep.sinks.sqlite.ddl import FTS_TABLES

        sibling = sqlite_store.sibling

        def configured(conn, *args, **kw):
            c = sibling(conn, *args, **kw)
            for t in FTS_TABLES if c is not None else ():
                if c.execute("SELECT 1 FROM sqlite_master WHERE name=?", (t,)).fetchone():
                    c.execute(f"INSERT INTO {t}({t}, rank) VALUES('automerge', ?)", (a.fts_automerge,))
            return c

        sqlite_store.sibling = configured
    print(
        f"load average at the start {_load()} (2 cores); tree {tree}; page size {a.page_size or 'default'}, "
        f"cache {a.cache_mib or 'default'} MiB, writer pragmas {extra}, FTS automerge {a.fts_automerge}"
    )
    _instrument_ingest()
    try:
        for v in a.vault.split(","):
            for n in [int(x) for x in a.readers.split(",") if x.strip()] or [None]:
                profile(tree, v.strip() == "on", n, a.groups, a.store)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].isdigit():  # started as the reader process (FD first)
        _reader_main()
    else:
        main()

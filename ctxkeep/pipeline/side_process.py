"""The ingest's side process: BPE token counts and genai-prices prices computed in a
process of their own, on the other core, off the ingest's critical path.

An interactive first ingest of a small tree (the 8.8 MB corpus) spends CPU building its
BPE counter (``transforms.tokens.prepare``: bpe-openai's, ~0.1 s; without it tiktoken's
``o200k_base`` encoder, ~0.35-0.45 s, whose ``CoreBPE`` construction holds the GIL, so a
thread does not overlap it) and ~0.3 s
importing genai-prices for the closing DuckDB sync (``transforms.cost``; its import
pulls pydantic and httpx). Both are independent of what the ingest reads: the side
process starts before the ingest imports Polars and DuckDB, builds the encoder while
the ingest imports, plans and parses, then imports genai-prices between the ingest's
requests (``_Idle``); the ingest asks it for the counts of its new texts and the prices
of its usage rows. It runs the same code (``tokens.count_here``, ``cost.genai_rates``,
``cost.genai_tiered``), so every count and price is the one the ingest would compute
itself; when the process cannot start or dies, the ingest computes them itself
(``tokens.use_counter`` and ``cost.use_remote`` fall back).

The process is ``python -m ctxkeep.pipeline.side_process FD PRICES ANALYTICS``
(``prices``/``analytics`` or ``-``: what it prepares while idle): requests are pickles
``(op, args)`` on its stdin, replies ``("ok", value)`` or ``("err", text)`` pickles on
the pipe ``FD`` (its own, as ``reader_process``'s: its stdout is the ingest's stderr).
It imports no Polars and touches no file but the rank-table cache
(``tokens.cached_ranks``), except for a small ingest's DuckDB sync
(``analytics_sync.SideAnalytics``): it then opens ``analytics.duckdb`` while the
ingest runs and syncs it from a read-only SQLite connection at the end, so the
ingest process never imports DuckDB and pyarrow. ``CTXKEEP_SIDE_PROCESS=0`` turns it
off. ``compress --dry-run`` uses it too (its token figures), without the prices;
``compress --check`` does not (it counts a few texts: ``tokens.count_here``'s
pure-Python BPE is done before a side process would have built its encoder).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

#: ``CTXKEEP_SIDE_PROCESS=0``: count and price in the ingest process
ENABLED = os.environ.get("CTXKEEP_SIDE_PROCESS", "1") != "0"
#: an ingest of at most this many new bytes beside a side process syncs DuckDB there,
#: once, from SQLite (``analytics_sync.SideAnalytics``): the ingest process then never
#: imports DuckDB, pyarrow and numpy (~0.4-0.6 s of CPU under its GIL on a first
#: ingest of the 12 MB corpus). Bigger ingests append each group from Arrow in a
#: thread (``AnalyticsSyncer``): no re-read of SQLite, and DuckDB keeps pace.
SIDE_SYNC_MAX_BYTES = 64 * 1024 * 1024


class SideProcess:
    """A running side process. ``count(texts)`` is ``tokens.count_here(texts)``,
    ``rates(keys)`` ``[cost.genai_rates(*k) for k in keys]``, ``tiered(items)``
    ``[cost.genai_tiered(*i) for i in items]``, each computed there (one round trip,
    thread-safe). Each raises RuntimeError when the process failed or is gone (then it
    stays gone: the callers compute locally). Raises OSError when it cannot start."""

    def __init__(self, prices: bool = True, analytics: bool = False) -> None:
        self._proc, self._replies = start_child(
            "ctxkeep.pipeline.side_process", "prices" if prices else "-", "analytics" if analytics else "-"
        )
        self._lock = threading.Lock()
        self._dead = False

    def _ask(self, op: str, args, reply: bool = True):
        """Send the request ``(op, args)`` and return its reply's value; with ``reply``
        False a request that has none (``_main``'s one-way ops: nothing waits for the
        process to read it)."""
        with self._lock:
            if self._dead:
                raise RuntimeError("the side process is gone")
            try:
                pickle.dump((op, args), self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self._proc.stdin.flush()
                if not reply:
                    return None
                status, value = pickle.load(self._replies)
            except (OSError, EOFError, pickle.UnpicklingError) as e:
                self._dead = True
                raise RuntimeError(f"the side process is gone ({type(e).__name__})") from None
            if status != "ok":
                raise RuntimeError(value)
            return value

    def count(self, texts: list[str]) -> tuple[list[int], list[str]]:
        return self._ask("count", texts)

    def rates(self, keys: list[tuple]) -> list:
        return self._ask("rates", keys)

    def tiered(self, items: list[tuple]) -> list[float]:
        return self._ask("tiered", items)

    def analytics_open(self, home: str) -> None:
        """Have ``<home>/analytics.duckdb`` opened there (``duckdb_store.connect``) as
        an idle step after those queued (``_Idle``). One way: this returns once the
        request is written (before, its reply waited for the idle step under way there,
        up to ~0.4 s, and held back the counts asked meanwhile). Raises RuntimeError
        when the process is gone."""
        self._ask("analytics_open", home, reply=False)

    def analytics_append(self, home: str, first_rowid: int, ipc: bytes) -> None:
        """Hand over entries just committed to the store at ``home`` (one way): the
        closing ``analytics_sync`` appends them to DuckDB from this Arrow instead of
        reading them back from SQLite. ``ipc`` is an Arrow IPC file of their
        ``STORED_COLUMNS`` (``duckdb_store.append_entries``' table), whose SQLite rowids
        run from ``first_rowid`` on. Raises RuntimeError when the process is gone."""
        self._ask("analytics_append", (home, first_rowid, ipc), reply=False)

    def analytics_sync(self, home: str) -> dict:
        """The closing ``duckdb_store.sync`` of the store at ``home``, there, on the
        connection ``analytics_open`` opened (then closed): ``{"entries_synced"
        (appended or read from SQLite), "entries_appended" (of those, appended by
        ``analytics_append``), "entries_rowid", "status_seq"}``. Raises RuntimeError when it failed (the text
        of the error) or the process is gone; the file is closed either way."""
        return self._ask("analytics_sync", home)

    def analytics_close(self, home: str) -> None:
        """Close what ``analytics_open`` opened, without a sync."""
        self._ask("analytics_close", home)

    def close(self) -> None:
        """End the process (EOF on its stdin; killed when it does not exit at once)."""
        with self._lock:
            self._dead = True
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=0.01)  # it exits at once when idle
            except subprocess.TimeoutExpired:
                self._proc.kill()  # still building: it holds nothing (the cache write is atomic)
                self._proc.wait()
            self._replies.close()


@contextlib.contextmanager
def started(prices: bool = True, analytics: bool = False) -> Iterator[SideProcess | None]:
    """Start a side process and route ``tokens.estimate_tokens`` and genai-prices
    through it for the block (``tokens.use_counter``, ``cost.use_remote``); yields None
    (everything computed in this process) when it is turned off or cannot start.
    ``prices``: it imports genai-prices once the encoder is built, before any price is
    asked for (False for work that prices nothing: ``compress --dry-run``);
    ``analytics``: it imports DuckDB and pyarrow too, for a small ingest's DuckDB sync
    there (``SIDE_SYNC_MAX_BYTES``)."""
    from ctxkeep.transforms import cost, tokens

    global _current
    side = None
    if ENABLED:
        with contextlib.suppress(OSError):
            side = SideProcess(prices, analytics)
    if side is None:
        yield None
        return
    before, _current = _current, side
    try:
        with tokens.use_counter(side.count), cost.use_remote(side):
            yield side
    finally:
        _current = before
        side.close()


#: the side process of the running ``started`` block, if any
_current: SideProcess | None = None


def current() -> SideProcess | None:
    """The side process ``started`` runs now (None outside its block or when off)."""
    return _current


def start_child(module: str, *args: str) -> tuple[subprocess.Popen, BinaryIO]:
    """``python -P -m module FD ARGS`` (this interpreter, ctxkeep importable from this
    checkout): stdin a pipe, stdout this process's stderr (DEVNULL when it has no
    descriptor, e.g. under pytest's capture), and a pipe of its own whose write end
    is the inherited descriptor FD. Returns the process and the read end (EOF when
    the process ends). Raises OSError when it cannot start. Shared by this module and
    ``reader_process``."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        stdout = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        stdout = subprocess.DEVNULL
    rfd, wfd = os.pipe()
    try:
        proc = subprocess.Popen(
            # -P: the working directory is not put first on sys.path (Python 3.11+): run
            # from a folder holding another ``ctxkeep`` package (a checkout of another
            # version), the child imported that one, and a mismatched request protocol
            # hung the ingest for good
            [sys.executable, "-P", "-m", module, str(wfd), *args],
            stdin=subprocess.PIPE,
            stdout=stdout,
            env=env,
            pass_fds=(wfd,),
        )
    except BaseException:
        os.close(rfd)
        raise
    finally:
        os.close(wfd)  # the process holds its copy
    return proc, os.fdopen(rfd, "rb")


def _warm_prices() -> None:
    """Import genai-prices and load its snapshot (the first price asks for it)."""
    with contextlib.suppress(Exception):
        from genai_prices import data_snapshot

        data_snapshot.get_snapshot()


#: the idle imports of a small ingest's DuckDB sync (``analytics``), one step each, in
#: order: no step is long (~0.02-0.15 s of CPU each; ``ctxkeep.sinks.duckdb`` as one
#: step took 0.37 s), so a count asked meanwhile waits for one of them at most
ANALYTICS_IMPORTS = ("numpy", "pyarrow", "duckdb", "ctxkeep.sinks.duckdb")
#: the idle imports of the prices (``prices``): genai-prices' models are pydantic's;
#: the snapshot is loaded in a step of its own (``_warm_prices``)
PRICE_IMPORTS = ("pydantic", "pydantic.main", "genai_prices")


class _Idle:
    """Work the side process does while no request waits (``_main`` runs one step
    between requests when its stdin has nothing to read: the ingest asks one request at
    a time, so nothing waits in the read buffer then), never in a thread beside the
    counts: their BPE calls give up the GIL once per text, and beside a thread that
    imports they wait for it each time (a first corpus ingest's counts took ~0.2-0.4 s
    longer beside the genai-prices import thread this replaced).

    Steps: the imports of DuckDB and pyarrow (``analytics``: ``ANALYTICS_IMPORTS``,
    ~0.35 s of CPU in all), those of genai-prices with its snapshot (``prices``:
    ``PRICE_IMPORTS``, ~0.35 s), each module a step of its own so that a count asked
    meanwhile waits for one short step at most, and opening ``analytics.duckdb`` for a
    small ingest (``SideProcess.analytics_open``; ~0.1 s). ``analytics_sync`` runs the
    steps left, then syncs from a read-only SQLite connection."""

    def __init__(self, prices: bool, analytics: bool) -> None:
        self.todo: list[tuple] = []
        if analytics:
            self.todo += [("import", m) for m in ANALYTICS_IMPORTS]
        if prices:
            self.todo += [("import", m) for m in PRICE_IMPORTS] + [("prices", None)]
        self._con: dict[str, object] = {}
        #: per store: the ``(first_rowid, Arrow IPC)`` of the groups committed so far
        #: (``append``), appended by the closing sync
        self._queued: dict[str, list[tuple[int, bytes]]] = {}

    def step(self) -> None:
        kind, arg = self.todo.pop(0)
        if kind == "prices":
            _warm_prices()
        elif kind == "import":
            with contextlib.suppress(Exception):  # the step that needs it says what is wrong
                importlib.import_module(arg)
        else:
            try:
                from ctxkeep.sinks import duckdb as duckdb_store

                self._con[arg] = duckdb_store.connect(Path(arg))
            except Exception as e:  # reported by the sync
                self._con[arg] = e

    def open(self, home: str) -> None:
        self.todo.append(("connect", home))

    def append(self, args: tuple[str, int, bytes]) -> None:
        """Keep the entries an ingest just committed (``SideProcess.analytics_append``'s
        ``(home, first_rowid, Arrow IPC file bytes)``) for the closing sync."""
        self._queued.setdefault(args[0], []).append(args[1:])

    def _append(self, home: str, con) -> int:
        """Append the entries kept for ``home`` (``append``) to its DuckDB in one
        ``duckdb_store.append_entries`` (one transaction: each costs ~15-20 ms of CPU
        there, and one per group made the side process's DuckDB work ~0.07 s more than
        the closing sync from SQLite, where one for all is ~0.06 s less); returns the
        rows appended, 0 when there are none, when they do not follow on in rowids or
        the append failed (the closing sync then reads them from SQLite)."""
        got = self._queued.pop(home, [])
        if not got:
            return 0
        try:
            import pyarrow as pa

            from ctxkeep.sinks import duckdb as duckdb_store

            tables, end = [], got[0][0]
            for first_rowid, data in got:
                if first_rowid != end:
                    return 0
                tables.append(pa.ipc.open_file(pa.BufferReader(data)).read_all())
                end += tables[-1].num_rows
            return duckdb_store.append_entries(con, got[0][0], pa.concat_tables(tables)) or 0
        except Exception:  # the closing sync reads the rows from SQLite
            return 0

    def _take(self, home: str):
        while self.todo:
            self.step()
        got = self._con.pop(home)
        if isinstance(got, Exception):
            raise got
        return got

    def sync(self, home: str) -> dict:
        from ctxkeep.sinks import duckdb as duckdb_store
        from ctxkeep.sinks import sqlite as sqlite_store

        con = self._take(home)
        try:
            appended = self._append(home, con)
            sq = sqlite_store.connect(Path(home), readonly=True)
            try:
                r = duckdb_store.sync(sq, Path(home), con=con, usage=True)
            finally:
                sq.close()
        finally:
            con.close()
        return {
            "entries_synced": appended + r["entries_synced"],
            "entries_appended": appended,
            "entries_rowid": r["entries_rowid"],
            "status_seq": r["status_seq"],
        }

    def close(self, home: str) -> None:
        self.todo = [t for t in self.todo if t != ("connect", home)]
        self._queued.pop(home, None)
        got = self._con.pop(home, None)
        if got is not None and not isinstance(got, Exception):
            got.close()


def _pending(inp) -> bool:
    """True when a request is there to read on ``inp`` (its descriptor; see ``_Idle``)."""
    return bool(select.select([inp], [], [], 0)[0])


def _main() -> None:
    """The side process: builds the encoder, then answers requests until its stdin
    ends, doing its idle work (``_Idle``: ``sys.argv[2:]`` may hold ``prices`` and
    ``analytics``) while none waits. Ctrl-C reaches the process group: it is ignored
    here (the ingest ends the process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(int(sys.argv[1]), "wb")
    from ctxkeep.transforms import cost, tokens

    tokens.prepare()  # first: the counts are asked for first (bpe-openai's counter, else tiktoken's)
    idle = _Idle(prices="prices" in sys.argv[2:], analytics="analytics" in sys.argv[2:])
    ops = {
        "count": tokens.count_here,
        "rates": lambda keys: [cost.genai_rates(*k) for k in keys],
        "tiered": lambda items: [cost.genai_tiered(*i) for i in items],
        "analytics_open": idle.open,
        "analytics_append": idle.append,
        "analytics_sync": idle.sync,
        "analytics_close": idle.close,
    }
    one_way = {"analytics_open", "analytics_append"}
    inp = sys.stdin.buffer
    while True:
        if idle.todo and not _pending(inp):
            idle.step()
            continue
        try:
            op, args = pickle.load(inp)
        except EOFError:
            # no interpreter teardown (the rank table, pydantic's models: ~0.3-0.6 s);
            # nothing is left to flush or close
            os._exit(0)
        if op in one_way:  # no reply: nobody waits for one
            ops[op](args)
            continue
        try:
            reply = ("ok", ops[op](args))
        except Exception as e:  # the ingest computes it itself
            reply = ("err", f"{type(e).__name__}: {e}")
        try:
            pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        except BrokenPipeError:
            return


if __name__ == "__main__":
    _main()

"""The ingest's side process: BPE token counts and genai-prices prices computed in a
process of their own, on the other core, off the ingest's critical path.

An interactive first ingest of a small tree (the 8.8 MB corpus) spends ~0.35-0.45 s of
CPU building tiktoken's ``o200k_base`` encoder (``transforms.tokens.encoding``; the
``CoreBPE`` construction holds the GIL, so a thread does not overlap it) and ~0.3 s
importing genai-prices for the closing DuckDB sync (``transforms.cost``; its import
pulls pydantic and httpx). Both are independent of what the ingest reads: the side
process starts before the ingest imports Polars and DuckDB, builds the encoder while
the ingest imports, plans and parses, then imports genai-prices while the ingest loads
SQLite; the ingest asks it for the counts of its new texts and the prices of its usage
rows. It runs the same code (``tokens.count_here``, ``cost.genai_rates``,
``cost.genai_tiered``), so every count and price is the one the ingest would compute
itself; when the process cannot start or dies, the ingest computes them itself
(``tokens.use_counter`` and ``cost.use_remote`` fall back).

The process is ``python -m ctxkeep.pipeline.side_process FD``: requests are pickles
``(op, args)`` on its stdin, replies ``("ok", value)`` or ``("err", text)`` pickles on
the pipe ``FD`` (its own, as ``reader_process``'s: its stdout is the ingest's stderr).
It imports no Polars and touches no file but the rank-table cache
(``tokens.cached_ranks``), except for a small ingest's DuckDB sync
(``analytics_sync.SideAnalytics``): it then opens ``analytics.duckdb`` while the
ingest runs and syncs it from a read-only SQLite connection at the end, so the
ingest process never imports DuckDB and pyarrow. ``CTXKEEP_SIDE_PROCESS=0`` turns it off. ``compress --check`` and ``--dry-run`` use it too (their token
figures), without the prices.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

#: ``CTXKEEP_SIDE_PROCESS=0``: count and price in the ingest process
ENABLED = os.environ.get("CTXKEEP_SIDE_PROCESS", "1") != "0"


class SideProcess:
    """A running side process. ``count(texts)`` is ``tokens.count_here(texts)``,
    ``rates(keys)`` ``[cost.genai_rates(*k) for k in keys]``, ``tiered(items)``
    ``[cost.genai_tiered(*i) for i in items]``, each computed there (one round trip,
    thread-safe). Each raises RuntimeError when the process failed or is gone (then it
    stays gone: the callers compute locally). Raises OSError when it cannot start."""

    def __init__(self, prices: bool = True) -> None:
        self._proc, self._replies = start_child("ctxkeep.pipeline.side_process", "prices" if prices else "-")
        self._lock = threading.Lock()
        self._dead = False

    def _ask(self, op: str, args):
        with self._lock:
            if self._dead:
                raise RuntimeError("the side process is gone")
            try:
                pickle.dump((op, args), self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self._proc.stdin.flush()
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
        """Start opening ``<home>/analytics.duckdb`` there (``duckdb_store.connect``, in
        a thread of its own: the reply does not wait for it)."""
        self._ask("analytics_open", home)

    def analytics_sync(self, home: str) -> dict:
        """The closing ``duckdb_store.sync`` of the store at ``home``, there, on the
        connection ``analytics_open`` opened (then closed): ``{"entries_synced",
        "entries_rowid", "status_seq"}``. Raises RuntimeError when it failed (the text
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
def started(prices: bool = True) -> Iterator[SideProcess | None]:
    """Start a side process and route ``tokens.estimate_tokens`` and genai-prices
    through it for the block (``tokens.use_counter``, ``cost.use_remote``); yields None
    (everything computed in this process) when it is turned off or cannot start.
    ``prices``: it imports genai-prices once the encoder is built, before any price is
    asked for (False for work that prices nothing: ``compress --check``)."""
    from ctxkeep.transforms import cost, tokens

    global _current
    side = None
    if ENABLED:
        with contextlib.suppress(OSError):
            side = SideProcess(prices)
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
    """``python -m module FD ARGS`` (this interpreter, ctxkeep importable from this
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
            [sys.executable, "-m", module, str(wfd), *args],
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


class _Analytics:
    """The side process's DuckDB work (``SideProcess.analytics_*``): the file is opened
    in a thread while the ingest runs (importing DuckDB and pyarrow there, ~0.3-0.5 s,
    keeps them out of the ingest process), then synced from a read-only SQLite
    connection when the ingest has loaded everything."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[threading.Thread, dict]] = {}

    def open(self, home: str) -> None:
        got: dict = {}

        def run() -> None:
            try:
                from ctxkeep.sinks import duckdb as duckdb_store

                got["con"] = duckdb_store.connect(Path(home))
            except BaseException as e:  # reported by the sync
                got["error"] = e

        t = threading.Thread(target=run, name="ctxkeep-analytics-open", daemon=True)
        t.start()
        self._open[home] = (t, got)

    def _take(self, home: str):
        t, got = self._open.pop(home)
        t.join()
        if "error" in got:
            raise got["error"]
        return got["con"]

    def sync(self, home: str) -> dict:
        from ctxkeep.sinks import duckdb as duckdb_store
        from ctxkeep.sinks import sqlite as sqlite_store

        con = self._take(home)
        try:
            sq = sqlite_store.connect(Path(home), readonly=True)
            try:
                r = duckdb_store.sync(sq, Path(home), con=con, usage=True)
            finally:
                sq.close()
        finally:
            con.close()
        return {k: r[k] for k in ("entries_synced", "entries_rowid", "status_seq")}

    def close(self, home: str) -> None:
        self._take(home).close()


def _main() -> None:
    """The side process: builds the encoder, imports genai-prices in a thread (when
    ``sys.argv[2]`` is ``prices``), then answers requests until its stdin ends. Ctrl-C reaches the process group: it is
    ignored here (the ingest ends the process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(int(sys.argv[1]), "wb")
    from ctxkeep.transforms import cost, tokens

    tokens.encoding()  # first: the counts are asked for first
    if sys.argv[2:3] == ["prices"]:
        threading.Thread(target=_warm_prices, daemon=True).start()
    analytics = _Analytics()
    ops = {
        "count": tokens.count_here,
        "rates": lambda keys: [cost.genai_rates(*k) for k in keys],
        "tiered": lambda items: [cost.genai_tiered(*i) for i in items],
        "analytics_open": analytics.open,
        "analytics_sync": analytics.sync,
        "analytics_close": analytics.close,
    }
    inp = sys.stdin.buffer
    while True:
        try:
            op, args = pickle.load(inp)
        except EOFError:
            # no interpreter teardown (the rank table, pydantic's models: ~0.3-0.6 s);
            # nothing is left to flush or close
            os._exit(0)
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

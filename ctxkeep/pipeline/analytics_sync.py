"""DuckDB (analytics) kept in step with SQLite: the closing sync of a run, the
background thread that appends each committed group during an ingest. (A small
ingest leaves DuckDB to its readers: ``sinks.analytics_current``.)"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ctxkeep.pipeline.writer import HELD_OVERFLOW
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.analytics_file import set_aside_if_damaged
from ctxkeep.sinks.sqlite import store_safety

if TYPE_CHECKING:
    import duckdb

_END = object()
#: ``finish(abandon=True)``'s item: stop without the closing sync
_STOP = object()
#: ``reading_done``'s item: sync the usage rows and texts committed so far
_STEP = object()

#: committed groups the analytics thread may have waiting at most: ``on_commit`` (the
#: writer thread) waits beyond it. Unbounded, a DuckDB that fell behind (a checkpoint,
#: a closing row group) let every committed group's entries frame wait in memory
#: (~20 MB per 50,000 entries)
SYNC_AHEAD = 2
#: DuckDB's ``memory_limit`` while the thread only appends committed groups
#: (``duckdb_store.EntryAppends``): what it needs is the open row group (~60 MB before
#: its checkpoint); above it, DuckDB's buffer pool kept every block appended and
#: checkpointed, up to the writer's ``WRITER_MEMORY_LIMIT`` (256 MB) at 10 GB. A sync
#: from SQLite (the closing one: usage with its key index, status changes) gets the
#: writer's limit back
APPEND_MEMORY_LIMIT = "128MB"
#: new SQLite usage rows from which the thread syncs them after a group's entries
#: (``duckdb_store.UsageSteps``) rather than at the end of the reading
#: (``reading_done``): a step costs ~0.02-0.04 CPU s of DuckDB statements whatever its
#: rows, and ~0.35 s per 20,000 rows that the closing sync would pay after the last
#: commit (a step after every group, 14 on the 200 MB tree, cost ~0.9 CPU s more than
#: the 0.3 s it took off the closing sync). At 50,000 (session 17) the 200 MB tree's
#: 25,777 rows took one step, at ``reading_done``: ~0.6 CPU s that ran on after the
#: writer's last commit (``profile_ingest.py --groups``, 4 runs at load 8-36), the
#: closing sync waiting for it. At 10,000 it takes two steps while the readers run and
#: a small one (~0.1-0.17 s) at ``reading_done``, done by the last commit; the steps'
#: CPU 0.61-0.64 -> 0.64-0.76 s. A 2 GB tree's ~260,000 rows: ~26 steps
#: (``CTXKEEP_USAGE_STEP_ROWS`` overrides, for measurements)
USAGE_STEP_ROWS = int(os.environ.get("CTXKEEP_USAGE_STEP_ROWS", "10000"))


def sync_analytics(conn, home: Path) -> str:
    """Sync DuckDB from SQLite; returns a one-line note (never raises for a busy file)."""
    from ctxkeep.sinks import duckdb as duckdb_store  # imported here: a no-op ingest never needs DuckDB

    try:
        r = duckdb_store.sync(conn, home)
        sqlite_store.mark_analytics_synced(
            conn, r["entries_rowid"], r["status_seq"], r.get("prices_stamp"), r.get("usage_log_seq")
        )
        return f"analytics: {r['entries_synced']} entries synced"
    except Exception as e:  # a notebook holding the file must not fail the ingest
        if store_safety.is_corruption(e):  # SQLite read a damaged page: the store's matter
            raise
        return (
            f"analytics store not updated ({type(e).__name__}: {str(e).splitlines()[0]}); "
            "the next ingest catches up"
        )


class AnalyticsSyncer:
    """Keeps DuckDB in step with SQLite during an ingest, in a background thread.

    ``on_commit`` (``engine.ingest_files``'s callback, called in commit order) hands the
    thread each committed group: its new entries (as loaded, with their first SQLite
    rowid) go to DuckDB straight from Arrow (``duckdb_store.EntryAppends``: DuckDB
    checkpointed where a row group fills up) without reading SQLite back; a group that does not follow DuckDB's high-water mark (or
    comes without its rows) makes a ``duckdb_store.sync`` from SQLite instead, on a
    read-only connection of the thread's own. One DuckDB connection is kept open:
    the thread is the run's only DuckDB writer. ``finish()`` makes the closing
    ``sync`` (the entries left, status changes, usage) in that thread and returns the
    note of ``sync_analytics``. DuckDB work releases the GIL, so the sync overlaps
    the ingest. An error never fails the ingest: a failed step is caught up by the
    next one, and a failing closing sync is reported in the note (the next ingest
    catches up). With ``usage_after`` (``engine._ingest_synced``), the thread also
    syncs the run's new usage rows and texts before the closing sync
    (``duckdb_store.UsageSteps``): after a group once ``USAGE_STEP_ROWS`` wait, and
    once the reading is over (``reading_done``), beside the writer's last groups; the
    closing sync then compares every row as before and writes what is left (issue 26:
    it was the run's single-core tail after the last commit). The thread starts at the
    first commit. At most ``ahead`` groups wait
    for it (``SYNC_AHEAD``): ``on_commit`` waits for room, so the groups held in memory
    are bounded however far DuckDB falls behind.
    """

    def __init__(
        self,
        home: Path,
        ahead: int = SYNC_AHEAD,
        usage_after: int | None = None,
        usage_held: set[str] | None = None,
    ) -> None:
        self.home = Path(home)
        #: ``duckdb_store.UsageSteps``' ``after`` (``sqlite_store.usage_top`` before the
        #: run's first commit); None: the usage rows and texts wait for the closing sync
        self.usage_after = usage_after
        self._q: queue.Queue = queue.Queue(maxsize=ahead)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.synced = 0
        self.appended = 0
        self.note = ""
        #: (entries rowid, status_log seq) DuckDB holds after a complete closing sync
        self.marks: tuple[int, int, str | None, int | None] | None = None
        #: the usage keys the run's groups may have updated in place: a set the caller
        #: has the writer fill (``load_batch``'s ``usage_held``: ``engine.ingest_files``),
        #: or None. With it, the closing sync of a run whose steps filled an empty
        #: DuckDB compares only those rows and the rows above the last step
        #: (``duckdb_store.sync``'s ``usage_only``), not every row (200 MB tree: 25,777
        #: rows, ~0.13 CPU s after the last commit; ~10x at 2 GB); one the writer found
        #: too big (``writer.HELD_OVERFLOW``) compares every row
        self.usage_held = usage_held
        #: the thread's DuckDB connection while open (``finish(abandon=True)`` interrupts it)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._abandoned = False

    @property
    def started(self) -> bool:
        return self._thread is not None

    def on_commit(self, n: int, first_rowid: int | None = None, entries=None) -> None:
        """A group with ``n`` new entries or status changes was committed; ``entries``
        (pl.DataFrame, ``STORED_COLUMNS``) are its new entries with SQLite rowids
        from ``first_rowid`` on, when known."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ctxkeep-analytics", daemon=True)
                self._thread.start()
        self._put((first_rowid, entries))

    def _put(self, item) -> None:
        """Queue ``item`` for the thread, waiting while ``ahead`` items wait; dropped
        when the thread has ended (an interrupt stopped it: nothing more is synced)."""
        assert self._thread is not None
        while self._thread.is_alive():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def reading_done(self) -> None:
        """The ingest has handed its last group to the writer (``engine.ingest_files``'s
        ``on_read``): the thread syncs the usage rows and texts committed so far
        (``duckdb_store.UsageSteps``) while the writer stores the last groups, so the
        closing sync is left with theirs. Nothing before the first commit."""
        if self._thread is not None and self.usage_after is not None:
            self._put(_STEP)

    def finish(self, abandon: bool = False) -> str:
        """Run the closing sync (the tail of the entries, status changes, usage), stop
        the thread and return the note; '' when nothing was committed. ``abandon``
        (Ctrl-C): no closing sync, the groups waiting are dropped and the DuckDB
        statement running is interrupted; DuckDB stays behind SQLite (``marks`` None),
        as after a failed closing sync, and the next ingest or reader brings it current
        (newuser20 F8: the closing sync of an interrupted 1 GB ingest took seconds)."""
        if self._thread is None:
            return ""
        if abandon:
            self._abandoned = True
            while True:
                try:
                    self._q.get_nowait()
                except queue.Empty:
                    break
            held = self._con
            if held is not None:
                try:
                    held.interrupt()
                except Exception:  # closed meanwhile
                    pass
        self._put(_STOP if abandon else _END)
        self._thread.join()
        return self.note

    def _run(self) -> None:
        from ctxkeep.sinks import duckdb as duckdb_store  # imported here: a no-op ingest never needs DuckDB

        con = sq = appends = steps = None
        preloaded = False
        limit = ""  # DuckDB's memory_limit on ``con`` (``connect`` sets the writer's)
        while True:
            item = self._q.get()
            if item is _STOP:
                self.note = "analytics: stopped (the next ingest or report brings DuckDB current)"
                break
            if self._abandoned:
                continue  # (queued before the stop: dropped)
            final = item is _END
            try:
                if con is None:
                    con = self._con = duckdb_store.connect(self.home)
                    limit = duckdb_store.WRITER_MEMORY_LIMIT
                    appends = duckdb_store.EntryAppends(con)
                    if self.usage_after is not None:
                        steps = duckdb_store.UsageSteps(con, self.home, self.usage_after)
                assert appends is not None  # opened with con
                if item is _STEP:
                    if steps is not None:
                        if sq is None:
                            sq = sqlite_store.connect(self.home, readonly=True)
                        steps.step(sq)
                        self.usage_after = steps.after
                    continue
                got = None
                if not final and item[1] is not None:
                    limit = duckdb_store.set_memory_limit(con, limit, APPEND_MEMORY_LIMIT)
                    got = appends.append(item[0], item[1].to_arrow())
                if got is None:
                    limit = duckdb_store.set_memory_limit(con, limit, duckdb_store.WRITER_MEMORY_LIMIT)
                    if sq is None:
                        sq = sqlite_store.connect(self.home, readonly=True)
                    if final:
                        appends.close()
                    only = None
                    held = self.usage_held
                    if (
                        final
                        and steps is not None
                        and steps.fresh
                        and held is not None
                        and HELD_OVERFLOW not in held
                    ):
                        only = (steps.after, held)
                    r = duckdb_store.sync(sq, self.home, con=con, usage=final, usage_only=only)
                    if not final:
                        appends.synced()
                    got = r["entries_synced"]
                    if final:
                        self.marks = (
                            r["entries_rowid"],
                            r["status_seq"],
                            r.get("prices_stamp"),
                            r.get("usage_log_seq"),
                        )
                else:
                    self.appended += got
                self.synced += got
                if not final and steps is not None:
                    if sq is None:
                        sq = sqlite_store.connect(self.home, readonly=True)
                    if sqlite_store.usage_top(sq) - steps.after >= USAGE_STEP_ROWS:
                        steps.step(sq)
                        self.usage_after = steps.after
                if final:
                    self.note = f"analytics: {self.synced} entries synced"
                elif not preloaded:
                    preloaded = True
                    preload_prices()
            except BaseException as e:  # a notebook holding the file must not fail the ingest;
                # nothing escapes the thread (an interrupted process must not print a traceback)
                self.note = (
                    f"analytics store not updated ({type(e).__name__}: "
                    f"{(str(e).splitlines() or [''])[0]}); the next ingest catches up"
                )
                if con is not None:
                    _close_quietly(con)
                    con = self._con = None
                    steps = None  # made again with ``con``, from the rows synced so far
                if isinstance(e, Exception) and set_aside_if_damaged(self.home, e):
                    appends = None  # the next step opens a new file and syncs it from SQLite
                if not isinstance(e, Exception):
                    final = True
            if final:
                break
        self._con = None
        for c in (con, sq):
            if c is not None:
                _close_quietly(c)


def preload_prices() -> None:
    """Load genai-prices' tables (``transforms.cost.genai``) while the ingest still
    reads and transforms: the closing sync prices the usage rows with them, and loading
    them there (~0.1 s of CPU: pydantic and the price data, issue 26) was on the
    ingest's critical path, after the main thread's last group. The analytics thread
    calls it once its first group is in DuckDB. Nothing when they cannot load (the
    closing sync then says why)."""
    from ctxkeep.transforms import cost

    try:
        cost.genai()
    except ImportError:
        pass


def _close_quietly(c) -> None:
    try:
        c.close()
    except Exception:
        pass

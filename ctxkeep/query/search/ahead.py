"""Candidate lists run ahead on a second read-only connection, in a thread.

``search`` runs its lists one after another, each a statement or two whose cost is
mostly FTS5 (BM25's IDF walk of each phrase's whole posting list, then ranking the
window). sqlite3 releases the GIL while a statement steps, so a list run on a second
connection (``sinks.sqlite.pool``) in a thread overlaps the word list on the caller's
connection: on two cores a search's wall time falls by the share of the lists that
overlap. The hits are the same: each list's rows are a function of the store, its
MATCH, the filters and ``n`` (``retrieve.fts_ids``), and ``search`` still consumes the
lists, loads their candidates into one cache and fuses them in the order it always did.

Which lists: ``grams`` and ``symbols`` whenever the query has them (they do not depend on
the word list), and one list chosen ahead of the word list's outcome: the ``phrase``
list ranked on its own (needed when the word list has ``n`` rows) or ``any`` (needed
when it has fewer contents than ``n``), guessed by counting the word list's matches up
to ``n`` (``retrieve.match_count``, no BM25). A wrong guess costs that list's CPU: the search
computes the list it needs itself, as without a second connection, and the guessed
one, if still running, is interrupted.

The thread pays only when a core is free for it: on a machine whose run queue already
holds as many processes as it has cores (the 1-minute load average, ``core_free``),
the second statement competes with the first for the same time slices, and each
hand-over between the threads waits for the scheduler (2.5 GB store, load 10-11 on 2
cores, the bench's 200 queries x 2: p95 98 ms with the thread, 71 without).

A failure in the thread (FTS5 syntax, an interrupted statement, a store that cannot be
opened again) is never raised there: the search runs that list itself, and raises what
it raises.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxkeep.query.search import retrieve
from ctxkeep.query.search.parse import Filters
from ctxkeep.query.search.retrieve import Candidate
from ctxkeep.sinks.sqlite import pool


def core_free() -> bool:
    """Whether a second core is likely idle: this process may use 2+ cores and the
    1-minute load average (which counts this search's own process) is below their
    number. False where the OS gives neither (no ``getloadavg``)."""
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return cores >= 2 and os.getloadavg()[0] < cores
    except (OSError, AttributeError):
        return False


@dataclass
class Job:
    """One list run ahead: ``name``, its FTS table (None: ``symbols``, whose table is
    looked up on the second connection, ``retrieve.symbols_table``) and MATCH; with
    ``guess`` it runs only when ``guess(conn)`` is true (``phrase``/``any``)."""

    name: str
    fts: str | None
    match: str
    guess: Callable[[sqlite3.Connection], bool] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    rows: list[tuple[int, float]] | None = None  # None: not run or failed
    table: str = ""  # the table it ran on
    cache: dict[int, Candidate | None] = field(default_factory=dict)


class Guess:
    """Whether the word list (``match``: its terms ``parts`` ANDed, facet filters
    included) will hold ``n`` rows, found once, on the connection that asks first.
    First each term's matches counted up to ``n`` (``retrieve.match_count``: a common
    term stops at ``n``, a rare one's posting list is short): a term with fewer than
    ``n`` matches leaves the word list short for certain. Otherwise ``match`` itself is
    counted up to ``n``, which walks every posting list when their intersection is
    small (as long as the word list's own walk: ``README OPK_DEBUG`` for Claude Code tool
    calls, 2 GB store). Filters facet tokens cannot answer (time, status) are not
    counted: the guess can say ``full`` for a list they leave short (the search then
    runs ``any`` itself); ``search`` makes no guess under them."""

    def __init__(self, match: str, parts: list[str], n: int):
        self.match, self.parts, self.n = match, parts, n
        self.count: int | None = None

    def full(self, conn: sqlite3.Connection) -> bool:
        if self.count is None:
            for p in self.parts if len(self.parts) > 1 else ():
                c = retrieve.match_count(conn, "fts_words", p, self.n)
                if c < self.n:
                    self.count = c
                    break
            else:
                self.count = retrieve.match_count(conn, "fts_words", self.match, self.n)
        return self.count >= self.n

    def short(self, conn: sqlite3.Connection) -> bool:
        return not self.full(conn)


class Ahead:
    """Lists ``jobs`` run in order on a borrowed connection in a thread (``start``);
    ``take`` waits for one and gives its rows, ``close`` ends the thread (interrupting
    a list no one will take) and gives the connection back."""

    def __init__(self, jobs: list[Job], filters: Filters, n: int, passed: dict[int, bool], facets: bool):
        self.jobs = {j.name: j for j in jobs}
        self.filters, self.n, self.passed, self.facets = filters, n, passed, facets
        self.unwanted: set[str] = set()
        self.borrowed: pool.Borrowed | None = None
        self.running: str | None = None
        self.interrupted = False
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def start(self, conn: sqlite3.Connection) -> bool:
        """Borrow a second connection to the store of ``conn`` and start the thread;
        False (nothing runs ahead) when there is none to borrow."""
        self.borrowed = pool.borrow(conn)
        if self.borrowed is None:
            for j in self.jobs.values():
                j.done.set()
            return False
        self.thread = threading.Thread(target=self._run, name="ctxkeep-search-ahead", daemon=True)
        self.thread.start()
        return True

    def _run(self) -> None:
        assert self.borrowed is not None
        c = self.borrowed.conn
        for j in self.jobs.values():
            try:
                with self.lock:
                    if j.name in self.unwanted:
                        continue
                    self.running = j.name
                if j.guess is not None and (not j.guess(c) or j.name in self.unwanted):
                    continue
                j.table = j.fts or retrieve.symbols_table(c)
                rows = retrieve.fts_ids(c, j.table, j.match, self.filters, self.n, self.passed, self.facets)
                retrieve.load_candidates(c, [r[0] for r in rows], self.filters, j.cache)
                j.rows = rows
            except sqlite3.Error:
                j.rows = None
            finally:
                with self.lock:
                    self.running = None
                j.done.set()

    def take(self, name: str, match: str | None) -> tuple[list[tuple[int, float]], str, dict] | None:
        """``(rows, table, candidates)`` of list ``name`` when it ran ahead for
        ``match`` (waits for it), else None (the caller runs it)."""
        j = self.jobs.get(name)
        if j is None or j.match != match:
            return None
        j.done.wait()
        return (j.rows, j.table, j.cache) if j.rows is not None else None

    def drop(self, name: str) -> None:
        """List ``name`` will not be taken: skipped if not started, interrupted if running."""
        with self.lock:
            self.unwanted.add(name)
            if self.running == name and self.borrowed is not None:
                self.interrupted = True
                self.borrowed.conn.interrupt()

    def close(self) -> None:
        """Stop: lists not taken are dropped, the thread joined, the connection given
        back (closed instead when a statement of it was interrupted)."""
        for name in self.jobs:
            if not self.jobs[name].done.is_set():
                self.drop(name)
        if self.thread is not None:
            self.thread.join()
        if self.borrowed is not None:
            pool.give_back(self.borrowed, reuse=not self.interrupted)
            self.borrowed = None

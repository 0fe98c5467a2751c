"""One heavy window statement run as two rowid ranges on two connections at once.

A list's window statement (``retrieve.newest_ranked``: the ``window`` newest matches of
a MATCH, ranked, the best ``n`` kept) is one FTS5 walk, and at 10 GB the slow ones walk
the doclists of common tokens down to few rows (``"exit" AND "code" AND
"create-next-app"``: no row, 22 ms CPU). sqlite3 releases the GIL while a statement
steps, so the walk is split at a rowid ``mid`` and the two ranges are walked at once:

- the upper range (``rowid >= mid``) on the caller's connection, **oldest first**, up to
  ``window`` + 1 matches, ranked, its best ``n`` kept and its matches counted;
- the lower range (``rowid < mid``) on a second read-only connection
  (``sinks.sqlite.pool``) in a thread, **newest first**, each row ranked as it comes;
  the thread stops fetching once it holds the rows the window needs from it.

Each walk starts at ``mid`` (FTS5 seeks a range's start) and ends at the table's end,
where it would end anyway: FTS5 checks a range's far end only on the next match, so a
walk bounded by ``rowid < hi`` newest first, or ``rowid >= lo`` oldest first, runs past
it to the next match (10 GB, a MATCH without any row: a range's walk cost the whole
table's).

When the upper range holds more than ``window`` matches, the window lies in it: it is
ranked newest first as it always was (the thread's rows are dropped). Otherwise the
window is every upper match and the ``window`` - that many newest lower ones; the best
``n`` of their union, ordered as the statement orders them (rank, then newer first), are
the statement's rows. Exact, ties included: BM25 uses the table's statistics, and the
lower range ranks with the phrase counts the caller's connection keeps (given to the
second connection, ``native_rank.put_count``), so each row's value is the one the whole
statement computes; with ``ck_bm25_top`` a row of the lower range bounded (not read) is
strictly below ``top`` rows before it in its walk, all newer, hence in any window prefix
holding it, so it is never among the ``top`` best of the union. A commit seen between
the two statements (``PRAGMA data_version`` before and after) discards the split; the
statement then runs whole.

Which statements: those whose walk the kept counts say is long (``heavy``); a split
costs a borrowed connection, a thread and two statements. ``mid`` is ``SPLIT_AT`` of the
store's highest chunk id: FTS5 gives no posting count of a rowid range short of walking
it (10 GB store: the tokens of the whole index lie half below 0.51 of the rowid span,
from ``%_docsize``; the slow walks' cost lies higher, ~0.7-0.8: their tokens are denser
in the newest chunks).
"""

from __future__ import annotations

import sqlite3
import threading

from ctxkeep.query.search import retrieve
from ctxkeep.sinks.sqlite import native_rank, pool

#: a statement is split when the postings its walk steps (the kept counts of its
#: phrases; a single phrase or an OR unfiltered only down to its window) reach this
SPLIT_POSTINGS = 150_000
#: the split point: this share of the store's highest chunk id
SPLIT_AT = 0.8
#: rows the thread fetches at a time (it looks for its stop between fetches)
FETCH = 256

#: splits run in this process, those that fell back, and those run as a race (``_race``;
#: benchmarks, tests)
taken = [0, 0, 0]


def heavy(conn: sqlite3.Connection, fts: str, match: str, window: int, terms: str) -> dict[str, int] | None:
    """The counts ``conn`` keeps for the phrases of ``terms`` (phrase -> count; a phrase
    not kept is left out: the second connection counts it if a row needs it) when the
    walk of ``match`` (``terms``, or ``terms`` under a facet filter) looks long, else
    None: the postings it steps, estimated as the sum of the kept counts, times
    ``window`` / the largest count for a single phrase or an OR without a filter (its
    newest ``window`` matches end the walk early), reach ``SPLIT_POSTINGS``. None when
    no count is kept or ``match`` keys its phrases as a whole (``retrieve.phrase_keys``:
    the counts could not be handed over)."""
    shape = retrieve.term_phrases(terms)
    if shape is None or retrieve.phrase_keys(match).startswith("\x1e"):
        return None
    phrases, ops = shape
    counts = {}
    for p in phrases:
        c = native_rank.cached_count(conn, fts, p)
        if c is not None:
            counts[p] = c
    if not counts:
        return None
    est = float(sum(counts.values()))
    if match == terms and ops != {"AND"}:
        est *= min(1.0, window / max(1, max(counts.values())))
    return counts if est >= SPLIT_POSTINGS else None


def upper_sql(fts: str, match: str, mid: int, window: int, n: int, top: int, asc: bool) -> retrieve.Sql:
    """``(rowid, rank, walked)``: the best ``n`` of the ``window`` newest matches at or
    above ``mid`` (``asc``: the matches walked oldest first, up to ``window`` + 1), as
    ``retrieve.newest_ranked_sql`` orders them; ``walked`` counts the matches walked."""
    rank = retrieve.rank_expr(fts, True, 4, 5) if top < window else retrieve.rank_expr(fts, True, 4)
    order, limit = ("ASC", window + 1) if asc else ("DESC", window)
    return retrieve.Sql(
        f"SELECT id, r, count(*) OVER () FROM (SELECT rowid AS id, {rank} AS r FROM {fts} "
        f"WHERE {fts} MATCH ?1 AND rowid >= ?6 ORDER BY rowid {order} LIMIT ?2) ORDER BY r, id DESC LIMIT ?3",
        (match, limit, n, retrieve.phrase_keys(match), top, mid),
    )


def lower_sql(fts: str, match: str, mid: int, window: int, top: int) -> retrieve.Sql:
    """``(rowid, rank)`` of the matches below ``mid``, newest first, up to ``window``,
    each ranked as it comes (``ck_bm25_top`` keeping ``top``: a bounded row is below
    ``top`` newer rows of the walk)."""
    rank = retrieve.rank_expr(fts, True, 4, 5) if top < window else retrieve.rank_expr(fts, True, 4)
    return retrieve.Sql(
        f"SELECT rowid, {rank} FROM {fts} WHERE {fts} MATCH ?1 AND rowid < ?2 ORDER BY rowid DESC LIMIT ?3",
        (match, mid, window, retrieve.phrase_keys(match), *([top] if top < window else [])),
    )


class Lower:
    """The lower range walked on a borrowed connection in a thread (``start``): its rows
    (``rows``), fetched until ``want`` is set and reached or ``stop`` is set; ``error``
    when a statement failed (the caller runs the statement whole). The thread gives the
    connection back itself."""

    def __init__(self, borrowed: pool.Borrowed, fts: str, sql: retrieve.Sql, counts: dict[str, int]):
        self.borrowed, self.fts, self.sql, self.counts = borrowed, fts, sql, counts
        self.rows: list[tuple[int, float]] = []
        self.want: int | None = None
        self.stop = False
        self.error = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ctxkeep-search-split", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        c = self.borrowed.conn
        cur = None
        try:
            for p, k in self.counts.items():
                if not native_rank.put_count(c, self.fts, p, k):
                    raise sqlite3.OperationalError("counts not kept")
            cur = c.execute(*self.sql)
            while not self.stop and (self.want is None or len(self.rows) < self.want):
                got = cur.fetchmany(FETCH)
                self.rows += got
                if len(got) < FETCH:
                    break
        except sqlite3.Error:
            self.error = True
        finally:
            if cur is not None:
                cur.close()
            pool.give_back(self.borrowed)
            self.done.set()

    def wait(self, want: int) -> list[tuple[int, float]] | None:
        """Its newest ``want`` rows (waits for them), or None when it failed."""
        self.want = want
        self.done.wait()
        return None if self.error else self.rows[:want]


def ranked(
    conn: sqlite3.Connection, fts: str, match: str, window: int, n: int, top: int, terms: str
) -> list[tuple[int, float]] | None:
    """The rows of ``retrieve.newest_ranked(conn, fts, match, window, n, True, top)``
    (``(rowid, rank)``, best first; the first ``top`` exact) from two rowid ranges walked
    at once on two connections, or None when the statement is not split: not ``heavy``,
    no second connection (``pool.borrow``), the thread failed, or a commit came between
    (the caller runs it whole)."""
    if conn.in_transaction:
        return None
    try:
        before = conn.execute("PRAGMA data_version").fetchone()[0]  # brings the counts' check current
    except sqlite3.Error:
        return None
    counts = heavy(conn, fts, match, window, terms)
    if counts is None:
        return None
    highest = conn.execute("SELECT max(rowid) FROM chunk_rows").fetchone()[0] or 0
    mid = int(highest * SPLIT_AT) + 1
    asc = retrieve.within_window(conn, fts, terms, window)
    shape = retrieve.term_phrases(terms)
    race = not asc and shape is not None and shape[1] == {"AND"} and len(shape[0]) > 1
    borrowed = pool.borrow(conn)
    if borrowed is None:
        return None
    if race:  # the whole statement newest first on the thread, oldest first here
        whole = Lower(borrowed, fts, retrieve.newest_ranked_sql(fts, match, window, n, True, top), counts)
        whole.start()
        taken[0] += 1
        taken[2] += 1
        return _race(conn, whole, fts, match, window, n, top, before)
    lower = Lower(borrowed, fts, lower_sql(fts, match, mid, window, top), counts)
    lower.start()
    taken[0] += 1
    try:
        up = conn.execute(*upper_sql(fts, match, mid, window, n, top, asc)).fetchall()
    except BaseException:
        lower.stop = True
        raise
    walked = up[0][2] if up else 0
    if asc and walked > window:  # more matches than the counts said (a commit since): run whole
        lower.stop = True
        taken[1] += 1
        return None
    if walked >= window:
        # the window lies above mid: the statement's own rows, walked as it walks them
        lower.stop = True
        return [(r[0], r[1]) for r in up]
    rows = lower.wait(window - walked)
    if rows is None or conn.execute("PRAGMA data_version").fetchone()[0] != before:
        taken[1] += 1
        return None
    out = [(r[0], r[1]) for r in up] + rows
    out.sort(key=lambda r: (r[1], -r[0]))
    return out[:n]


def _race(
    conn: sqlite3.Connection, whole: Lower, fts: str, match: str, window: int, n: int, top: int, before: int
) -> list[tuple[int, float]] | None:
    """An AND of several phrases: the statement walked oldest first on ``conn`` while
    ``whole`` walks it newest first on the thread. Oldest first, up to ``window`` + 1
    matches, is exact when it walks at most ``window`` (then every match is in the
    window): an AND of common tokens with few or no rows ends sooner so (10 GB, no row,
    CPU ms newest / oldest first: ``"it's" AND <path>`` 22 / 12, ``"docs" AND "update"
    AND "main_window"``-like 16 / 11), which no rowid range gives it (the range's far end
    is checked only at a match). Otherwise the thread's rows are the statement's."""
    rows = conn.execute(*retrieve.newest_ranked_sql(fts, match, window, n, True, top, asc=True)).fetchall()
    if not rows or rows[0][2] <= window:
        whole.stop = True
        return [(r[0], r[1]) for r in rows]
    got = whole.wait(n)
    if got is None or conn.execute("PRAGMA data_version").fetchone()[0] != before:
        taken[1] += 1
        return None
    return got

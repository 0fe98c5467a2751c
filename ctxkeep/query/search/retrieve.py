"""Candidate retrieval for search: the SQL that finds and loads candidates, and the
functions that run it.

The ``*_sql`` builders return an ``Sql`` (statement text and its parameters) and never
touch a connection; ``ranked_window``, ``fts_ids``, ``load_candidates``, ``titles`` and
``common_terms`` execute them (``conn.execute(*sql)``).

Cost bounds for large stores: BM25 costs per matching row, so each list is ranked
among its ``RANK_WINDOW`` newest matches (a term matching more rows is not specific,
and recent context matters more). Filters on agent, kind, role, tool, session and
project are part of the MATCH (facet tokens, ``transforms.facets``; schema v3): FTS5
intersects them with the terms in C, and the window holds only matches that pass.
Status and the time window, which facet tokens cannot answer, are checked per chunk:
on the best ``FILTER_DEPTH`` matches of the window, and when too few pass, on the
``FILTER_SCAN`` newest matches (the ``FILTER_RANK`` newest that pass are ranked). A
very common term's older matches can therefore be missed; add words or filters to
reach them. That check (~10 µs a chunk on a 450 MB store, ~3.5 µs at 10 GB: most of it
reading the chunk's content id, from the index ``chunks_id_content`` since schema v16) runs in growing batches that stop once enough pass, and
its answers are shared by the lists of one search and kept for the next searches of a
long-lived connection (``kept_passed``), with the chunks' content ids. A term
with many whole-word matches gets no prefix query (``common_terms``). Each candidate
loads at most ``ENTRIES_PER_HIT`` of the entries holding its text.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ctxkeep.query.search.parse import _WORD_RE, Filters, _quote, terms
from ctxkeep.schema import EntryRef
from ctxkeep.sinks.sqlite import native_rank
from ctxkeep.sinks.sqlite.ddl import CHUNK_ID_INDEX, FTS_RANKS

FILTER_DEPTH = 1000  # matches ranked before filters apply, in the fast path
RANK_WINDOW = 2000  # BM25 ranks at most this many of the newest matches of a list
FILTER_SCAN = 5000  # matches checked against selective filters, newest first
FILTER_RANK = 200  # of those that pass, the newest ranked by BM25
#: with ``bm25()`` (no ``ck_bm25``, which never counts the facet phrases), a filtered
#: window is ranked by its terms alone when they match fewer rows than
#: this within its span (``_ranked_by_terms``). 2 GB store, 200 queries x 3, one
#: process, alternating: CPU sum / p95 0 (never) 6,962 ms / 30.6, 2,001 6,890 / 30.4,
#: 16,000 6,679 / 27.9, 64,000 6,782 / 28.4, unbounded 6,926 / 28.2
TERMS_SPAN = 16000
#: ... per this many chunks of the store (at least once): the facet phrases' IDF walk,
#: which ranking by the terms alone saves, grows with the store, the terms' walk within
#: the window's span does not. 10 GB store (2.35 M chunks: 4 x 16,000), both rankings of
#: 8 filtered windows of the bench, CPU ms facets / terms alone (terms in span):
#: ``"step by step"`` messages 45.6 / 27.5 (18,479), ``constitution OR <path>`` for
#: Claude Code tool calls 93.5 / 64.0 (37,982), ``005-orchestrator-architecture``
#: messages 23.8 / 12.6 (19,644); ``exit code`` messages 60.7 / 66.0 (200,801) and
#: ``embedding OR <path>`` for users 56.8 / 83.5 (151,927) stay ranked as they are
TERMS_SPAN_CHUNKS = 576_000
#: entries of one text loaded per candidate (the newest that pass the filters): a
#: stock text held by thousands of entries must not load them all
ENTRIES_PER_HIT = 8
#: a term with at least this many whole-word matches gets no prefix query
PREFIX_COMMON = 50
#: vocabulary tokens one inner-substring term expands to (``fts_vocab``), shortest
#: first (closest to the term)
VOCAB_EXPAND = 48


def _entry_cols(a: str) -> str:
    """The ``entry_rows`` columns of an ``EntryRef``, in its field order, of the table
    aliased ``a`` (the project dir through its id, ``projects``)."""
    return (
        f"{a}.entry_id, {a}.agent, {a}.session_id, "
        f"(SELECT project_dir FROM projects WHERE project_id = {a}.project_id), "
        f"{a}.ts, {a}.role, {a}.kind, {a}.tool_name"
    )


#: ``query.search.split.ranked``'s shape: ``(conn, fts, match, window, n, top, terms)``
#: -> the rows of ``newest_ranked``, or None when the statement is not split
Split = Callable[[sqlite3.Connection, str, str, int, int, int, str], "list[tuple[int, float]] | None"]


class Sql(NamedTuple):
    """One SQLite statement and its parameters (``conn.execute(*sql)``)."""

    text: str
    params: tuple | list = ()


@dataclass
class Candidate:
    """One matching chunk of a content and the entries holding that content.

    ``seq`` is the chunk's 0-based position in the text, ``token_estimate`` (tokens)
    and ``bytes`` (UTF-8 bytes) are the whole content's, ``entries`` the newest
    ``ENTRIES_PER_HIT`` entries holding the text that pass the filters (newest first,
    ``meta`` entries after the others: ``entries[0]`` is the hit's representative),
    ``total`` the number of entries holding the text, filters aside."""

    chunk_id: int
    seq: int
    title: str
    text: str
    content_id: int
    content_hash: str
    token_estimate: int
    bytes: int
    entries: list[EntryRef]
    total: int = 0


def _marks(n: int) -> str:
    return ",".join("?" * n)


# ---------------------------------------------------------------- SQL builders


def window_floor_sql(fts: str, match: str) -> Sql:
    """One row ``(count, floor)``: the number of matches of ``match`` in ``fts``,
    counted up to ``RANK_WINDOW`` + 1, and the rowid of the oldest of them (the
    ``RANK_WINDOW`` + 1-th newest match when there are more than ``RANK_WINDOW``;
    NULL when there is none)."""
    return Sql(
        f"SELECT count(*), min(rowid) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH ? "
        f"ORDER BY rowid DESC LIMIT ?)",
        (match, RANK_WINDOW + 1),
    )


def ranked_sql(fts: str, match: str, floor: int, n: int, native: bool = False) -> Sql:
    """The ``n`` best ``(rowid, rank)`` of the matches above rowid ``floor`` (BM25
    rank ascending = better; equal ranks newest first)."""
    return Sql(
        f"SELECT rowid, {rank_expr(fts, native, 4, 3)} AS r FROM {fts} WHERE {fts} MATCH ?1 AND rowid > ?2 "
        f"ORDER BY r, rowid DESC LIMIT ?3",
        (match, floor, n, phrase_keys(match)) if native else (match, floor, n),
    )


def newest_ranked_sql(
    fts: str, match: str, window: int, n: int, native: bool = False, top: int | None = None, asc: bool = False
) -> Sql:
    """The ``n`` best ``(rowid, rank)`` of the ``window`` newest matches of ``match``
    (as ``ranked_sql`` orders them: BM25 rank ascending, equal ranks newest first), in
    one statement: the newest matches are walked once, ranked as they come. The same
    rows and ranks as ``window_floor_sql`` then ``ranked_sql`` above the floor (every
    list of the bench's 200 queries compared, 500 MB and 2 GB stores), which walk the
    window twice: the 111 unfiltered lists of those queries at 500 MB, min of 5, 570 →
    491 ms CPU. The subquery keeps its ``LIMIT`` (SQLite never flattens a limited
    subquery into an ordered outer query).

    ``top``: the rows whose ranks are read (``ck_bm25_top``: the others may get a bound
    that keeps them out of the ``top`` best; ``rank_expr``); default ``n``; None or
    ``window`` and above: every rank exact.

    ``asc``: the matches walked oldest first, up to ``window`` + 1, each row with a
    third column, the number walked (``newest_ranked``): for a ``match`` believed to
    have at most ``window`` matches (``within_window``) the same rows (all of them)
    and ranks, for less (FTS5 steps its doclists forward for less than backward; 10 GB
    store, every match, min of 4, CPU ms newest / oldest first: ``"Not on a feature
    branch"`` 21.2 / 15.5, ``"PLACEHOLDER_RE"`` under a codex tool result's facets 23.4
    / 15.3); more than ``window`` walked says the belief was wrong."""
    top = n if top is None else top
    order, more, walked = ("ASC", 1, ", count(*) OVER ()") if asc else ("DESC", 0, "")
    if not native or top >= window:
        return Sql(
            f"SELECT id, r{walked} FROM (SELECT rowid AS id, {rank_expr(fts, native, 4)} AS r FROM {fts} "
            f"WHERE {fts} MATCH ?1 ORDER BY rowid {order} LIMIT ?2) ORDER BY r, id DESC LIMIT ?3",
            (match, window + more, n, phrase_keys(match)) if native else (match, window + more, n),
        )
    return Sql(
        f"SELECT id, r{walked} FROM (SELECT rowid AS id, {rank_expr(fts, native, 4, 5)} AS r FROM {fts} "
        f"WHERE {fts} MATCH ?1 ORDER BY rowid {order} LIMIT ?2) ORDER BY r, id DESC LIMIT ?3",
        (match, window + more, n, phrase_keys(match), top),
    )


def newest_ranked(
    conn: sqlite3.Connection,
    fts: str,
    match: str,
    window: int,
    n: int,
    native: bool,
    top: int | None = None,
    terms: str | None = None,
    split: Split | None = None,
) -> list[tuple[int, float]]:
    """The rows of ``newest_ranked_sql`` (``(rowid, rank)``), walked oldest first when
    the counts ``conn`` keeps bound ``terms`` (default ``match``; ``match`` is
    ``terms`` or a filtered subset of it) within ``window`` (``within_window``). That
    statement counts what it walked, in its own read transaction: more than
    ``window`` (another connection committed rows after the counts were kept, which
    the counts' own check sees only inside a statement) and it is run newest first,
    so the rows are always the ``window`` newest matches'.

    ``split`` (``query.search.split.ranked``): run a heavy statement as two rowid
    ranges on two connections at once; it gives the same rows, or None (not split)."""
    if native and split is not None:
        halves = split(conn, fts, match, window, n, n if top is None else top, terms or match)
        if halves is not None:
            return halves
    if native and within_window(conn, fts, terms or match, window):
        rows = conn.execute(*newest_ranked_sql(fts, match, window, n, native, top, asc=True)).fetchall()
        if not rows or rows[0][2] <= window:
            return [(r[0], r[1]) for r in rows]
    return conn.execute(*newest_ranked_sql(fts, match, window, n, native, top)).fetchall()


def match_bound(conn: sqlite3.Connection, fts: str, terms: str) -> int | None:
    """An upper bound of the rows of ``fts`` that ``terms`` matches, from the phrase
    counts ``ck_bm25`` keeps on ``conn`` (``native_rank.cached_count``), or None when
    they give none. ``terms``: quoted phrases joined by one operator, as ``parse``
    builds them (``words_match``'s ANDs, ``any_match``'s and ``prefix_match``'s ORs, one
    phrase; parentheses are ignored, which one operator allows): for ANDs the least
    kept count, for ORs the sum of all (None when one is not kept); None for ``NOT``,
    mixed operators, a facet filter or any other shape."""
    shape = term_phrases(terms)
    if shape is None:
        return None
    phrases, ops = shape
    counts = [native_rank.cached_count(conn, fts, p) for p in phrases]
    if ops == {"OR"}:
        return None if None in counts else sum(c for c in counts if c is not None)
    known = [c for c in counts if c is not None]
    return min(known) if known else None


def term_phrases(terms: str) -> tuple[list[str], set[str]] | None:
    """The quoted phrases of ``terms`` (as written, each a ``phrase_keys`` part) and the
    operators joining them (``{"AND"}``, ``{"OR"}``, or none for one phrase), for the
    shapes ``match_bound`` takes; None for any other (``NOT``, mixed operators, a facet
    filter, a bare word)."""
    phrases: list[str] = []
    ops: set[str] = set()
    pos = 0
    while pos < len(terms):
        m = _KEY_LEX.match(terms, pos)
        if not m or m.end() == pos:
            if terms[pos:].strip():
                return None
            break
        pos = m.end()
        phrase, op, paren, _, _ = m.groups()
        if phrase is not None:
            phrases.append(phrase)
        elif op is not None:
            ops.add(op)
        elif paren is None:  # a facet filter or a bare word
            return None
    if not phrases or not (ops <= {"AND"} or ops == {"OR"}):
        return None
    return phrases, ops


def within_window(conn: sqlite3.Connection, fts: str, terms: str, window: int) -> bool:
    """Whether ``terms`` (``match_bound``'s shapes) is known to match at most
    ``window`` rows of ``fts``: then its ``window`` newest matches are all of them, in
    whatever order they are walked (``newest_ranked_sql(asc=True)``)."""
    bound = match_bound(conn, fts, terms)
    return bound is not None and bound <= window


def rank_expr(fts: str, native: bool = False, key_at: int = 0, top_at: int | None = None) -> str:
    """The BM25 call of ``fts`` with its column weights (``ddl.FTS_RANKS``), e.g.
    ``bm25(fts_words, 4.0, 1.0, 0.0)``; with ``native`` (``native_rank.ready``) the same
    values from ``ck_bm25(fts_words, 'fts_words', ?<key_at>, 4.0, 1.0, 0.0)``, whose
    phrase counts are cached per connection under the keys bound at parameter ``key_at``
    (``phrase_keys``). The values of the ``rank`` column at ~70 % of
    its CPU, since ``ORDER BY bm25(...) LIMIT n`` is SQLite's top-n sorter while
    ``ORDER BY rank`` takes FTS5's sorted-match path (a nested statement that ranks
    and sorts every match). Measured on a 500 MB store, 10 lists x 12 rounds
    (floor query included): rank 1,446 ms CPU, bm25() 1,041 ms; fetching the window
    newest first with its ranks and sorting in Python, 1,243 ms. Weights beyond an
    older store's columns are ignored by FTS5.

    ``top_at`` (with ``native``): the parameter holding how many of the best rows the
    statement reads (its ``LIMIT``): ``ck_bm25_top(fts_words, 'fts_words', ?<key_at>,
    ?<top_at>, 4.0, 1.0, 0.0)`` gives those rows ``ck_bm25``'s values and may give a
    row that cannot be among them, even at length 0, that bound instead of reading its
    length from ``%_docsize`` (a seek per row: ~80 % of ranking a 2,000-row window; 2
    GB store, 5 lists, their ranking 8.3 -> ~0-1.5 ms CPU without it). The rows of
    the top are the same, with the same values (tests/sinks/test_native_rank.py)."""
    if native and top_at is not None:
        return FTS_RANKS[fts].replace("bm25(", f"ck_bm25_top({fts}, '{fts}', ?{key_at}, ?{top_at}, ", 1)
    if native:
        return FTS_RANKS[fts].replace("bm25(", f"ck_bm25({fts}, '{fts}', ?{key_at}, ", 1)
    return FTS_RANKS[fts].replace("bm25(", f"bm25({fts}, ", 1)


#: one phrase of the MATCH expressions ``parse`` builds: a quoted string (``""`` within
#: it a quote) and an optional prefix ``*``; the operators and parentheses between them;
#: a facet filter (``transforms.facets.filter_expr``: ``facets : (fk0 OR fk123)``)
_KEY_LEX = re.compile(
    r'\s*(?:("(?:[^"]|"")*"\*?)|(AND|OR|NOT)(?![\w"])|([()])|(facets\s*:\s*\()|([a-z0-9]+))'
)
#: separators of ``phrase_keys`` (never inside a key: such a MATCH gets the whole-match key)
_UNIT, _WHOLE = "\x1f", "\x1e"


def phrase_keys(match: str) -> str:
    """The cache keys of ``match``'s phrases for ``ck_bm25`` (``_ckrank.c``), in FTS5's
    phrase order (the order they are written): each phrase as written (a bare token of
    a facet filter as ``facets:<token>``, its column), joined by 0x1f, so lists of one
    search and searches after it share the count of a phrase they both rank (``"exit"``
    in ``"exit" AND "code"`` and ``"exit" OR "code"``; a facet token in every filtered
    list). Any other shape (a column filter, ``NEAR``, ``^``, a separator character in
    the text) gets ``0x1e + match``: its phrases are cached under the whole MATCH and
    their index. A phrase FTS5 drops (no token: ``"-"``) makes the key count differ
    from FTS5's phrase count, and ``ck_bm25`` then keys by the whole key string and the
    index too: exact either way, since a phrase's count depends only on its text and
    column filter."""
    whole = _WHOLE + match
    if _UNIT in match or _WHOLE in match:
        return whole
    keys: list[str] = []
    depth, facet_depth, pos = 0, -1, 0
    while pos < len(match):
        m = _KEY_LEX.match(match, pos)
        if not m or m.end() == pos:
            if match[pos:].strip():
                return whole
            break
        pos = m.end()
        phrase, op, paren, facets, bare = m.groups()
        if phrase is not None:
            keys.append(("facets:" if facet_depth >= 0 else "") + phrase)
        elif facets is not None:
            if facet_depth >= 0:
                return whole
            depth += 1
            facet_depth = depth
        elif paren == "(":
            depth += 1
        elif paren == ")":
            if depth == facet_depth:
                facet_depth = -1
            depth -= 1
            if depth < 0:
                return whole
        elif bare is not None:
            if facet_depth < 0:  # a bare word outside a facet filter: not a shape parse builds
                return whole
            keys.append("facets:" + bare)
        elif op is None:
            return whole
    return _UNIT.join(keys) if keys and depth == 0 else whole


def window_ids_sql(fts: str, match: str) -> Sql:
    """The rowids of the ``RANK_WINDOW`` + 1 newest matches of ``match``, newest first
    (the window and its floor, as ``window_floor_sql`` counts them)."""
    return Sql(
        f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT ?", (match, RANK_WINDOW + 1)
    )


def ranked_ids_sql(fts: str, match: str, ids: list[int], n: int, native: bool = False) -> Sql:
    """The ``n`` best ``(rowid, rank)`` of the matches of ``match`` among ``ids``
    (sorted ascending), as ``ranked_sql`` orders them. ``+rowid IN`` is tested before
    the rank is computed (``rank_of_sql``); the scan covers the matches between the
    first and last id. The ids are bound as one JSON array: one statement text whatever
    their number (``IN (?, …)`` prepared and cached a statement per length; 32 windows of
    the bench's queries at 500 MB, 5 rounds: 1,241 → 1,190 ms)."""
    return Sql(
        f"SELECT rowid, {rank_expr(fts, native, 6, 5)} AS r FROM {fts} WHERE {fts} MATCH ?1 AND rowid "
        f"BETWEEN ?2 AND ?3 AND +rowid IN (SELECT value FROM json_each(?4)) ORDER BY r, rowid DESC LIMIT ?5",
        (match, ids[0], ids[-1], json.dumps(ids), n, *([phrase_keys(match)] if native else [])),
    )


def match_count(conn: sqlite3.Connection, fts: str, match: str, cap: int) -> int:
    """The number of matches of ``match`` in ``fts``, counted up to ``cap`` (no ranking:
    the first ``cap`` rowids the MATCH yields; all of its posting lists are walked when
    it has fewer)."""
    sql = f"SELECT count(*) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH ? LIMIT ?)"
    return conn.execute(sql, (match, cap)).fetchone()[0]


def newest_match(conn: sqlite3.Connection, fts: str, match: str) -> int | None:
    """The rowid of the newest match of ``match`` in ``fts`` (unranked: the walk stops
    there; a MATCH without any match walks its posting lists as a ranked list does, no
    further), or None when it has none."""
    sql = f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT 1"
    row = conn.execute(sql, (match,)).fetchone()
    return None if row is None else row[0]


def holds_none(conn: sqlite3.Connection, fts: str, match: str) -> bool:
    """Whether ``match`` has no match in ``fts`` (any match sought, unranked: the walk
    stops at the first). The walk goes in FTS5's own order, oldest first: a walk that
    finds nothing covers every posting either way, and FTS5 steps its doclists forward
    for less than backward (10 GB store, min of 4, CPU ms newest / oldest first:
    ``<path> AND`` the role user's facets, no match, 21.5 / 13.8; ``"it's" AND
    <path>``, none, 25.9 / 13.8; every match of ``"the"`` 57.6 / 50.7)."""
    sql = f"SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT 1"
    return conn.execute(sql, (match,)).fetchone() is None


def span_count_sql(fts: str, match: str, lo: int, hi: int, cap: int) -> Sql:
    """The number of matches of ``match`` with rowids ``lo`` … ``hi``, counted up to
    ``cap`` (``terms_span``)."""
    return Sql(
        f"SELECT count(*) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?)",
        (match, lo, hi, cap),
    )


def terms_span(conn: sqlite3.Connection) -> int:
    """The matches of a filtered window's terms within its span below which it is ranked
    by its terms alone (``_ranked_by_terms``): ``TERMS_SPAN`` per ``TERMS_SPAN_CHUNKS``
    chunks of the store (the highest chunk id: one index seek), at least once."""
    top = conn.execute("SELECT max(rowid) FROM chunk_rows").fetchone()[0] or 0
    return TERMS_SPAN * max(1, top // TERMS_SPAN_CHUNKS)


def older_sql(fts: str, match: str, floor: int, n: int) -> Sql:
    """The rowids of the ``n`` newest matches at or below rowid ``floor`` (a window's
    floor: the newest match older than the window), newest first: the walk of the
    newest matches continued below a window already known."""
    return Sql(
        f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? AND rowid <= ? ORDER BY rowid DESC LIMIT ?",
        (match, floor, n),
    )


def rank_of_sql(fts: str, match: str, ids: list[int], native: bool = False) -> Sql:
    """``(rowid, rank)`` of the matches ``ids`` (sorted ascending), in rowid order.
    ``+rowid IN`` is tested before the rank column is read, so BM25 runs for those
    rows only (``+`` keeps the IN list out of FTS5, which would run the MATCH once per
    value); ``BETWEEN`` bounds the scan to the range they span."""
    return Sql(
        f"SELECT rowid, {rank_expr(fts, native, 5)} FROM {fts} WHERE {fts} MATCH ?1 AND rowid BETWEEN ?2 AND ?3 "
        f"AND +rowid IN (SELECT value FROM json_each(?4)) ORDER BY rowid",
        (match, ids[0], ids[-1], json.dumps(ids), *([phrase_keys(match)] if native else [])),
    )


def _chunk_ids(indexed: bool) -> str:
    """The FROM of a statement reading chunks' content ids by chunk id (as ``ch``): from
    the index ``ddl.CHUNK_ID_INDEX`` (v16; SQLite's planner would seek the table's
    rowid, a random leaf of its 6.7 GB at 10 GB), or (``indexed`` False: a v10-v15
    store a reader opens) from the table."""
    return f"chunk_rows ch INDEXED BY {CHUNK_ID_INDEX}" if indexed else "chunk_rows ch"


def passing_sql(chunk_ids: list[int], where: tuple[str, list], indexed: bool = True) -> Sql:
    """The chunks of ``chunk_ids`` held by at least one entry passing ``where`` (a
    ``Filters.sql("e")`` fragment); ``indexed``: ``_chunk_ids``."""
    cond, params = where
    return Sql(
        f"SELECT ch.chunk_id FROM {_chunk_ids(indexed)} WHERE ch.chunk_id IN ({_marks(len(chunk_ids))}) AND EXISTS "
        f"(SELECT 1 FROM entry_rows e INDEXED BY entries_content WHERE e.content_id = ch.content_id AND {cond})",
        [*chunk_ids, *params],
    )


def passing_chunks_sql(chunk_ids: list[int], where: tuple[str, list], indexed: bool = True) -> Sql:
    """Rows ``(chunk_id, content_id, passes)`` of the chunks ``chunk_ids``: ``passes`` 1
    when at least one entry holding the chunk's content passes ``where`` (a
    ``Filters.sql("e")`` fragment), else 0; ``indexed``: ``_chunk_ids``."""
    cond, params = where
    return Sql(
        f"SELECT ch.chunk_id, ch.content_id, EXISTS (SELECT 1 FROM entry_rows e INDEXED BY "
        f"entries_content WHERE e.content_id = ch.content_id AND {cond}) FROM {_chunk_ids(indexed)} "
        f"WHERE ch.chunk_id IN ({_marks(len(chunk_ids))})",
        [*params, *chunk_ids],
    )


def passing_contents_sql(content_ids: list[int], where: tuple[str, list]) -> Sql:
    """The contents of ``content_ids`` held by at least one entry passing ``where`` (a
    ``Filters.sql("e")`` fragment): one seek into ``entries_content`` each (the ids
    bound as one JSON array)."""
    cond, params = where
    return Sql(
        f"SELECT j.value FROM json_each(?) j WHERE EXISTS (SELECT 1 FROM entry_rows e "
        f"INDEXED BY entries_content WHERE e.content_id = j.value AND {cond})",
        [json.dumps(content_ids), *params],
    )


def _by_chunk_ids(conn: sqlite3.Connection, sql: Callable[[bool], Sql]) -> list:
    """The rows of ``sql(True)`` (a statement reading ``ddl.CHUNK_ID_INDEX``), or of
    ``sql(False)`` when the store has no such index (schema v10-v15, opened by a reader,
    which never migrates: SQLite refuses ``INDEXED BY`` an unknown index)."""
    try:
        return conn.execute(*sql(True)).fetchall()
    except sqlite3.OperationalError as e:
        if f"no such index: {CHUNK_ID_INDEX}" not in str(e):
            raise
    return conn.execute(*sql(False)).fetchall()


def passing(
    conn: sqlite3.Connection,
    chunk_ids: list[int],
    where: tuple[str, list],
    content_of: dict[int, int] | None = None,
) -> set[int]:
    """The chunks of ``chunk_ids`` held by at least one entry passing ``where``: the
    chunks whose content ``content_of`` (chunk id → content id) knows are checked by
    their contents (``passing_contents_sql``), the others by their rows
    (``passing_chunks_sql``), whose content ids ``content_of`` then keeps. Without
    ``content_of`` (a connection's first search: perhaps a process's only one) the rows
    that pass, alone (``passing_sql``): returning every row's content id costs ~15 %
    more (10 GB, 5,000 chunks: 20.3 -> 23.7 ms CPU).

    Reading a chunk's content id is most of a check (10 GB store, the 5,000 newest
    matches of ``"x"`` since a date: 14-17 ms CPU of 18-21, the same whether the store
    is mapped or not, with no page fault: each chunk is a random leaf of the 6.7 GB
    table; 5,000 consecutive ones take 2.4 ms), while their 4,999 contents are checked
    in 3.6-4.1 ms: so a long-lived process keeps the ids (``kept_passed``). Since schema
    v16 the ids are read from ``chunks_id_content`` (``_chunk_ids``): 5,000 random chunks
    30 -> 12 ms CPU."""
    if content_of is None:
        return {r[0] for r in _by_chunk_ids(conn, lambda x: passing_sql(chunk_ids, where, x))}
    known: dict[int, int] = {}
    unknown = []
    for i in chunk_ids:
        c = content_of.get(i)
        if c is None:
            unknown.append(i)
        else:
            known[i] = c
    good: set[int] = set()
    if unknown:
        rows = _by_chunk_ids(conn, lambda x: passing_chunks_sql(unknown, where, x))
        content_of.update((r[0], r[1]) for r in rows)
        good.update(r[0] for r in rows if r[2])
    if known:
        cids = sorted(set(known.values()))
        ok = {r[0] for r in conn.execute(*passing_contents_sql(cids, where))}
        good.update(i for i, c in known.items() if c in ok)
    return good


class Passed(dict[int, bool]):
    """Chunk id → whether one of its entries passes a search's filters (the memo the
    lists of a search share, ``fts_ids``), and ``content_of``: chunk id → content id
    (``passing``), shared by every filter of one connection's kept answers (None: not
    read)."""

    def __init__(self, content_of: dict[int, int] | None = None):
        super().__init__()
        self.content_of = content_of


#: connections whose filter answers are kept between searches (``kept_passed``: a
#: long-lived process searches on one), the filters kept per connection, and the
#: answers kept per connection, all filters together, and as many content ids: a
#: dict of 200,000 ints is ~16-21 MB, so ~40 MB a connection at most
KEEP_CONNECTIONS = 2
KEEP_FILTERS = 8
KEEP_CHUNKS = 200_000


class _Kept:
    """The answers kept for one connection, valid while its ``version`` holds."""

    __slots__ = ("by_filter", "conn", "content_of", "searches", "version")

    def __init__(self, conn: sqlite3.Connection, version: tuple[int, int], searches: int = 0):
        self.conn, self.version, self.searches = conn, version, searches
        self.content_of: dict[int, int] = {}
        self.by_filter: OrderedDict[tuple, Passed] = OrderedDict()


_kept: OrderedDict[int, _Kept] = OrderedDict()
_kept_lock = threading.Lock()


def kept_passed(conn: sqlite3.Connection, where: tuple[str, list]) -> Passed:
    """The filter answers (``Passed``) ``conn``'s earlier searches found for ``where``
    (a ``Filters.sql("e")`` fragment), to fill further: a long-lived process (the MCP
    server, the app) asking one time or status filter again checks only chunks it has
    not checked. Valid while nothing changed the database: ``PRAGMA data_version``
    (other connections' commits; its read brings the pager current) and
    ``native_rank.data_version`` (any commit, ``conn``'s own included) as they were when
    kept; without the library ``conn.total_changes`` for its own, which its ``temp``
    writes bump too (the "did you mean" probe's: answers dropped more often, never
    kept stale); inside a transaction (own uncommitted changes) nothing is kept. The connection
    is held (an id is not reused while its object lives) for the ``KEEP_CONNECTIONS``
    that searched last; at most ``KEEP_FILTERS`` filters and ``KEEP_CHUNKS`` answers
    (the least recently asked filters dropped first) and content ids (then emptied).
    Content ids are read and kept from a connection's second search on (its first may
    be its process's only one, ``passing``). Raises nothing: a connection that cannot
    say gets a new memo."""
    try:
        if conn.in_transaction:
            return Passed()
        # the pragma first: its read transaction brings the pager's data version current
        others = conn.execute("PRAGMA data_version").fetchone()[0]
        dv = native_rank.data_version(conn)
        version = (others, conn.total_changes if dv is None else dv)
    except sqlite3.Error:
        return Passed()
    key = (where[0], tuple(where[1]))
    with _kept_lock:
        k = _kept.get(id(conn))
        if k is None or k.conn is not conn:
            k = _kept[id(conn)] = _Kept(conn, version)
        elif k.version != version:
            k = _kept[id(conn)] = _Kept(conn, version, k.searches)
        k.searches += 1
        _kept.move_to_end(id(conn))
        while len(_kept) > KEEP_CONNECTIONS:
            _kept.popitem(last=False)
        if len(k.content_of) > KEEP_CHUNKS:
            k.content_of.clear()
        p = k.by_filter.get(key)
        if p is None or len(p) > KEEP_CHUNKS:
            p = k.by_filter[key] = Passed()
        # content ids from the connection's second search on (``passing``)
        p.content_of = k.content_of if k.searches > 1 else None
        k.by_filter.move_to_end(key)
        while len(k.by_filter) > 1 and (
            len(k.by_filter) > KEEP_FILTERS or sum(map(len, k.by_filter.values())) > KEEP_CHUNKS
        ):
            k.by_filter.popitem(last=False)  # the least recently asked (never this one: last)
        return p


def forget_kept() -> None:
    """Drop every connection's kept filter answers (benchmarks: a search as a new
    process makes it, with none from earlier searches)."""
    with _kept_lock:
        _kept.clear()


def chunks_sql(chunk_ids: list[int]) -> Sql:
    """Rows ``(chunk_id, seq, title, text, content_id, content_hash, token_estimate,
    bytes)`` of the chunks ``chunk_ids`` and their contents (the first fields of a
    ``Candidate``)."""
    return Sql(
        f"SELECT ch.chunk_id, ch.seq, ch.title, ch.text, c.content_id, c.content_hash, "
        f"coalesce(c.token_estimate, 0), c.bytes FROM chunks ch JOIN contents c "
        f"ON c.content_id = ch.content_id WHERE ch.chunk_id IN ({_marks(len(chunk_ids))})",
        chunk_ids,
    )


def holders_sql(content_ids: list[int], where: tuple[str, list]) -> Sql:
    """Rows ``(content_id, *EntryRef fields)``: for each content of ``content_ids``, the
    newest ``ENTRIES_PER_HIT`` entries holding it that pass ``where`` (a
    ``Filters.sql("e")`` fragment), grouped by content in ``content_ids`` order, newest
    first within one. One statement for the whole batch (the ids bound as one JSON
    array): a correlated ``LIMIT`` subquery per content walks ``entries_content`` from
    its newest entry, so a stock text held by thousands of entries reads only the first
    that pass (one statement per content was ~40 statements a search, 123 ms of the
    bench's 200 queries at 500 MB)."""
    cond, params = where
    return Sql(
        f"SELECT j.value, {_entry_cols('h')} FROM json_each(?) j JOIN entry_rows h "
        f"ON h.rowid IN (SELECT e.rowid FROM entry_rows e INDEXED BY entries_content WHERE "
        f"e.content_id = j.value AND {cond} ORDER BY e.ts DESC, e.rowid DESC LIMIT {ENTRIES_PER_HIT}) "
        f"ORDER BY j.key, h.ts DESC, h.rowid DESC",
        (json.dumps(content_ids), *params),
    )


def holders_count_sql(content_ids: list[int]) -> Sql:
    """Rows ``(content_id, count)``: the number of entries holding each content of
    ``content_ids`` (index-only counts, one statement)."""
    return Sql(
        "SELECT j.value, (SELECT count(*) FROM entry_rows INDEXED BY entries_content "
        "WHERE content_id = j.value) FROM json_each(?) j",
        (json.dumps(content_ids),),
    )


#: characters of a content's start read with its title (``titles``): its first line
TITLE_HEAD_CHARS = 1000


def titles_sql(content_ids: list[int]) -> Sql:
    """Rows ``(content_id, title, head)``: the first chunk's title of each content and
    the first ``TITLE_HEAD_CHARS`` characters of its text."""
    return Sql(
        f"SELECT content_id, title, substr(text, 1, {TITLE_HEAD_CHARS}) FROM chunks "
        f"WHERE seq = 0 AND content_id IN ({_marks(len(content_ids))})",
        content_ids,
    )


def term_count_sql(term: str) -> Sql:
    """The number of whole-word matches of ``term`` in ``fts_words``, counted up to
    ``PREFIX_COMMON``."""
    return Sql(
        "SELECT count(*) FROM (SELECT rowid FROM fts_words WHERE fts_words MATCH ? LIMIT ?)",
        (_quote(term), PREFIX_COMMON),
    )


# ---------------------------------------------------------------- execution


def common_terms(conn: sqlite3.Connection, query: str) -> set[str]:
    """The terms of ``query`` with ≥ ``PREFIX_COMMON`` whole-word matches in
    ``fts_words`` (reads at most that many rowids of each term)."""
    out = set()
    for t in terms(query):
        t = t.rstrip("*")
        if _WORD_RE.search(t) and conn.execute(*term_count_sql(t)).fetchone()[0] >= PREFIX_COMMON:
            out.add(t)
    return out


def vocab_sql(match: str) -> Sql:
    """The ``VOCAB_EXPAND`` shortest vocabulary tokens matching ``match`` (an
    ``fts_vocab`` trigram expression)."""
    return Sql(
        "SELECT term FROM fts_vocab WHERE fts_vocab MATCH ? ORDER BY length(term), term LIMIT ?",
        (match, VOCAB_EXPAND),
    )


def vocab_expand(conn: sqlite3.Connection, match: str) -> list[str]:
    """The vocabulary tokens (``vocab``) holding the substring ``match`` (see
    ``vocab_sql``); [] on a store without a vocabulary (schema < 9)."""
    try:
        return [r[0] for r in conn.execute(*vocab_sql(match))]
    except sqlite3.OperationalError:  # no fts_vocab: an older, read-only store
        return []


def symbols_table(conn: sqlite3.Connection) -> str:
    """The FTS table holding symbol terms (``c++``): ``fts_symbols`` (schema v8), or on
    an older store opened read-only (not migrated) ``fts_grams``, where v7 kept them."""
    have = conn.execute("SELECT 1 FROM sqlite_master WHERE name='fts_symbols'").fetchone()
    return "fts_symbols" if have else "fts_grams"


def ranked_window(
    conn: sqlite3.Connection,
    fts: str,
    match: str,
    n: int,
    terms: str | None = None,
    split: Split | None = None,
) -> tuple[list[tuple[int, float]], int]:
    """The ``n`` best ``(chunk_id, rank)`` among the ``RANK_WINDOW`` newest matches of
    ``match`` (``ranked_sql``), and the window floor: the chunk id of the next older
    match, 0 when there is none (``window_floor_sql``; with ``n`` above ``RANK_WINDOW``,
    the whole window, one statement: ``newest_ranked_sql``). BM25 costs per match, so a
    very common term is ranked among its newest matches only; counting down the rowids
    to the floor is cheap. A MATCH without any match is not run a second time: that
    pass would walk the same posting lists again (112 of 304 lists of the bench's 200
    queries, 2 GB store: 166 ms CPU of 2.7 s).

    ``terms``: ``match`` without its facet filters (``match`` is ``(terms) AND
    facets : (…)``), given by ``fts_ids``; see ``_ranked_by_terms``."""
    native = native_rank.ready(conn)
    # ``ck_bm25`` never counts the facet phrases (the facets column weighs 0: no row
    # needs their IDF), so they cost nothing to rank: one walk that ranks the window as
    # it comes beats the terms-alone ranking's three (the window's ids, the terms' count
    # in its span, the terms ranked over the span), counts cached or not; the same rows
    # and ranks. 2 GB store: ``constitution OR <path>`` for Claude Code tool calls
    # 13.7 -> 5 ms (session 16: one walk only when every count was cached, and the
    # facets', never counted by the terms-alone ranking, seldom were)
    if terms is not None and not native:
        return _ranked_by_terms(conn, fts, match, terms, n)
    if n > RANK_WINDOW or terms is not None:  # the whole window: ranked with the next older match, dropped
        # (the best n + 1 ranked exactly: the floor, dropped, may be one of them)
        rows = newest_ranked(conn, fts, match, RANK_WINDOW + 1, RANK_WINDOW + 1, native, n + 1, terms, split)
        floor = min(r[0] for r in rows) if len(rows) > RANK_WINDOW else 0
        return [r for r in rows if r[0] != floor][:n], floor
    count, oldest = conn.execute(*window_floor_sql(fts, match)).fetchone()
    if not count:
        return [], 0
    floor = oldest if count > RANK_WINDOW else 0
    return conn.execute(*ranked_sql(fts, match, floor, n, native)).fetchall(), floor


def _ranked_by_terms(
    conn: sqlite3.Connection, fts: str, match: str, terms: str, n: int
) -> tuple[list[tuple[int, float]], int]:
    """``ranked_window`` of a filtered ``match`` (``(terms) AND facets : (…)``) ranked
    with ``bm25()``, the window ranked by ``terms`` alone when they match few rows
    within its span (``ck_bm25`` needs none of this: it never counts the facet phrases).

    FTS5's ``bm25()`` first counts, for each phrase of the MATCH, the rows holding it
    in the whole table (its IDF): a walk of every facet token's posting list, which
    holds a large share of all chunks (``codex``, ``message``) - ~10-15 ms each on a 2 GB
    store. The facets column weighs 0 (``ddl.FTS_RANKS``) and facet phrases come after
    the terms, so ranking the window's rows by ``terms`` gives the same values, bit for
    bit (each facet phrase adds 0.0; row sizes, average and the terms' IDF are the
    table's). That ranking walks the matches of ``terms`` between the window's oldest
    and newest row, so it is used only when they are fewer than ``terms_span`` (counted
    first, up to that many); otherwise (terms more common than the filter: ``exit code``
    among messages, 60 ms instead of 34) ``match`` is ranked as it is. 2 GB store:
    ``"step by step"`` for codex 32 -> 12 ms, ``requirements`` for codex tool results
    34 -> 9 ms."""
    ids = [r[0] for r in conn.execute(*window_ids_sql(fts, match))]
    if not ids:
        return [], 0
    floor = ids[-1] if len(ids) > RANK_WINDOW else 0
    window = ids[:RANK_WINDOW]
    window.reverse()  # ascending
    # fewer rowids in the span than the cap: fewer matches too, no count needed
    cap = terms_span(conn)
    few = window[-1] - window[0] < cap - 1
    if few or conn.execute(*span_count_sql(fts, terms, window[0], window[-1], cap)).fetchone()[0] < cap:
        return conn.execute(*ranked_ids_sql(fts, terms, window, n, native_rank.ready(conn))).fetchall(), floor
    return conn.execute(*ranked_sql(fts, match, floor, n, native_rank.ready(conn))).fetchall(), floor


def among_sql(fts: str, match: str, ids: list[int]) -> Sql:
    """The rowids of ``ids`` (sorted ascending) that match ``match``, unranked: the
    scan covers the matches between the first and last id, ``+rowid IN`` keeps the
    list out of FTS5 (see ``rank_of_sql``), and no ``bm25()`` means no walk of each
    phrase's whole posting list for its IDF."""
    return Sql(
        f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? AND rowid BETWEEN ? AND ? "
        f"AND +rowid IN (SELECT value FROM json_each(?))",
        (match, ids[0], ids[-1], json.dumps(ids)),
    )


def phrase_among(
    conn: sqlite3.Connection, phrase: str, rows: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """The rows ``(chunk_id, rank)`` of ``rows`` (a list of ``fts_words`` holding all
    the words of ``phrase``) whose chunk matches ``phrase`` (an FTS5 phrase over
    ``fts_words``), in their order and with their ranks: the phrase list when ``rows``
    is every match of the words."""
    if not rows:
        return []
    hit = {r[0] for r in conn.execute(*among_sql("fts_words", phrase, sorted(r[0] for r in rows)))}
    return [r for r in rows if r[0] in hit]


def fts_ids(
    conn: sqlite3.Connection,
    fts: str,
    match: str,
    filters: Filters,
    n: int,
    passed: dict[int, bool] | None = None,
    facets: bool = False,
    split: Split | None = None,
) -> list[tuple[int, float]]:
    """Top ``n`` ``(chunk_id, rank)`` of one FTS table for ``match`` (best first, BM25
    rank ascending), among the ``RANK_WINDOW`` newest matches (passing the filters).

    With ``facets`` (a v3 store), the filters that have facet tokens join the MATCH
    (``Filters.facet_match``) and only the rest (``Filters.residual``) are checked per
    chunk here; the exact check of every filter follows in ``load_candidates``.
    ``passed`` (chunk id → whether one of its entries passes ``filters``) is a memo
    shared by the lists of one search: the lists match mostly the same chunks, and
    the filter check (~10 µs a chunk) is the main cost of a filtered search.
    ``split``: a heavy window statement run as two rowid ranges on two connections
    (``newest_ranked``; the same rows).
    Raises ``sqlite3.OperationalError`` when FTS5 cannot parse ``match``."""
    fmatch = filters.facet_match() if facets else None
    terms = None
    if fmatch:
        terms, match = match, f"({match}) AND {fmatch}"
        if filters.residual().is_empty():
            filters = Filters()
    if filters.is_empty():
        if terms is None:  # no floor needed: one walk (``newest_ranked_sql``)
            return newest_ranked(conn, fts, match, RANK_WINDOW, n, native_rank.ready(conn), split=split)
        return ranked_window(conn, fts, match, n, terms, split)[0]
    where = filters.sql("e")
    memo: dict[int, bool] = {} if passed is None else passed
    content_of = memo.content_of if isinstance(memo, Passed) else None

    def ok_of(ids: list[int]) -> set[int]:
        need = [i for i in ids if i not in memo]
        for i in range(0, len(need), 1000):
            part = need[i : i + 1000]
            good = passing(conn, part, where, content_of)
            memo.update((j, j in good) for j in part)
        return {i for i in ids if memo[i]}

    # 1. the best FILTER_DEPTH matches of the window, then the filters: enough unless
    #    the filters are selective
    #    (checked best first in growing batches, until ``n`` pass: the same first ``n``
    #    as checking all, at a fraction of the cost when the filters are not selective)
    #    Every match of the window is fetched with its rank (BM25 costs per match of
    #    the window whatever the LIMIT), so step 2 need not rank these again.
    window, floor = ranked_window(conn, fts, match, RANK_WINDOW + 1, terms, split)
    if not window:  # no match at all: step 2 would find none either
        return []
    rows = window[:FILTER_DEPTH]
    if rows:
        kept: list = []
        i, step = 0, 64
        while i < len(rows) and len(kept) < n:
            part = rows[i : i + step]
            ok = ok_of([r[0] for r in part])
            kept += [r for r in part if r[0] in ok]
            i, step = i + step, step * 2
        if len(kept) >= n or (len(rows) < FILTER_DEPTH and floor == 0):
            return kept[:n]
    # 2. selective filters: walk the newest FILTER_SCAN matches, keep those that pass
    #    (older matches are not reached); growing batches stop soon after
    #    ``FILTER_RANK`` pass, so the newest ``FILTER_RANK`` are the same as checking all
    #    The window's matches (all of them, ranked in step 1) are the newest: only the
    #    older ones, from the floor down, are walked (the batches are the same)
    found: list[int] = []
    pending = sorted((r[0] for r in window), reverse=True)
    cur = None
    step = 256
    while len(found) < FILTER_RANK:
        batch, pending = pending[:step], pending[step:]
        if len(batch) < step and floor:
            if cur is None:
                cur = conn.execute(*older_sql(fts, match, floor, FILTER_SCAN - RANK_WINDOW))
            batch += [r[0] for r in cur.fetchmany(step - len(batch))]
        if not batch:
            break
        ok = ok_of(batch)
        found += [i for i in batch if i in ok]
        step = min(step * 2, 1000)
    # rank the newest FILTER_RANK of them, over the rowid range they span (bounded by
    # FILTER_SCAN matches; one MATCH per row would reload the term lists each time)
    if not found:
        return []
    top = found[:FILTER_RANK]
    keep = set(top)
    # ranks of the window's matches are known from step 1 (the same BM25 values);
    # only the kept matches at or below the window floor are ranked here
    known = {r[0]: r[1] for r in window if r[0] in keep}
    rows = [(i, known[i]) for i in sorted(known)]
    below = sorted(i for i in top if i not in known)
    if below:
        rows = conn.execute(*rank_of_sql(fts, match, below, native_rank.ready(conn))).fetchall() + rows
    rows.sort(key=lambda r: r[1])
    return rows[:n]


def _representative_rank(e: EntryRef) -> bool:
    """Sort key of the entries holding one text: ``meta`` entries (an Aider
    ``.aider.input.history`` record, ``sources.aider``) after the others, so a hit
    shared by a conversation's message and a history record shows the message (the
    hit then leads into the conversation). Chosen among the ``ENTRIES_PER_HIT``
    newest that pass the filters."""
    return e.kind == "meta"


def load_candidates(
    conn: sqlite3.Connection, ids: list[int], filters: Filters, cache: dict[int, Candidate | None]
) -> None:
    """Load candidates ``ids`` (chunk ids) into ``cache``: the chunk, its content and
    the newest ``ENTRIES_PER_HIT`` entries holding the text that pass ``filters``
    (``None`` when none passes), non-``meta`` first (``_representative_rank``). ``total`` is the number of entries holding the text,
    filters aside (an index-only count)."""
    need = [i for i in ids if i not in cache]
    if not need:
        return
    where = filters.sql("e")
    rows = conn.execute(*chunks_sql(need)).fetchall()
    contents = list(dict.fromkeys(r[4] for r in rows))  # content ids, first seen first
    holders: dict[int, list[EntryRef]] = {h: [] for h in contents}
    if contents:
        for r in conn.execute(*holders_sql(contents, where)).fetchall():
            holders[r[0]].append(EntryRef(*r[1:]))
    # the count of all holders, filters aside: known from the batch when it found fewer
    # than ENTRIES_PER_HIT without filters; not needed for a content none passes
    counted = [h for h in contents if holders[h] and (len(holders[h]) >= ENTRIES_PER_HIT or where[1])]
    totals = {h: len(es) for h, es in holders.items()}
    if counted:
        totals.update(conn.execute(*holders_count_sql(counted)).fetchall())
    for r in rows:
        es = holders[r[4]]
        if es:
            es.sort(key=_representative_rank)  # stable: newest first within a rank
            # the 8 columns of chunks_sql, then the holders
            cache[r[0]] = Candidate(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], entries=es, total=totals[r[4]]
            )
    for i in need:  # chunks whose entries all fail the filters
        cache.setdefault(i, None)


def titles(conn: sqlite3.Connection, content_ids: list[int]) -> dict[int, str]:
    """content_id → the title of its first chunk without the tool name stored before it
    ('' or absent when it has none). The stored title of a text's first chunk leads
    with the tool name of the entry that stored the text first (``sinks.sqlite.load``:
    tool names weigh like titles), which another entry holding the same text does not
    have: an Aider chat message shared with its ``.aider.input.history`` record showed
    ``input_history /copy-context …``. The hit adds its own entry's tool name
    (``render.to_hit``)."""
    if not content_ids:
        return {}
    out = {}
    for cid, title, head in conn.execute(*titles_sql(content_ids)).fetchall():
        start = (head or "").lstrip()  # the title is the first non-blank line, stripped
        rest = title.split(" ", 1)[1] if " " in title else ""
        out[cid] = rest if rest and not start.startswith(title) and start.startswith(rest) else title
    return out

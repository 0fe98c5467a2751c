"""A heavy window statement split in two rowid ranges on two connections
(``query.search.split``): the rows of the whole statement, ties, filters and empty
ranges included; taken for a heavy statement of a search (and not for a light one, nor
on one connection); a failure of the second connection leaves the statement whole."""

from __future__ import annotations

import shutil

import pytest

from ctxkeep.query.search import Filters, retrieve, search, split
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import native_rank, pool

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None,
    reason="no C compiler: the library is not built",
)

MESSAGES = Filters(kind="message").facet_match()
TOOL_CALLS = Filters(agent="claude-code", kind="tool_call").facet_match()
#: (terms, facet filter or None): ANDs, ORs, one phrase, a prefix, phrases of several words
SHAPES = [
    ('"file"', None),
    ('"exit" AND "code"', None),
    ('"exit" OR "code" OR "create" OR "next" OR "app"', None),
    ('"command not found"', None),
    ('"test"*', None),
    ('"error"', MESSAGES),
    ('"exit" OR "code"', MESSAGES),
    ('"file" AND "the"', TOOL_CALLS),
    ('"zzzz-no-such-term" OR "install"', None),
]


@pytest.fixture(scope="module")
def conn(corpus_store):
    home, _ = corpus_store
    c = sqlite_store.connect(home, readonly=True, mmap=True)
    assert native_rank.ready(c)
    yield c
    c.close()
    pool.close_idle()


def _whole(conn, fts, match, window, n, top, terms):
    return retrieve.newest_ranked(conn, fts, match, window, n, True, top, terms)


@pytest.mark.parametrize("at", [0.0, 0.3, 0.6, 0.9, 1.5])
def test_a_split_statement_gives_the_rows_of_the_whole_one(conn, monkeypatch, at):
    """Every shape, windows that lie above the split point, straddle it or hold every
    match, ``n`` above and below ``top``; ``at`` 0.0 leaves the lower range empty and
    1.5 the upper one. The first ``top`` rows are the whole statement's, values and tie
    order included, and the rows are the same set."""
    monkeypatch.setattr(split, "SPLIT_POSTINGS", 0)
    monkeypatch.setattr(split, "SPLIT_AT", at)
    ties = 0
    raced = split.taken[2]
    for terms, facets in SHAPES:
        match = f"({terms}) AND {facets}" if facets else terms
        for window, n, top in ((5, 5, 5), (40, 10, 10), (400, 50, 50), (2001, 2001, 51), (2000, 50, 2001)):
            whole = _whole(conn, "fts_words", match, window, n, top, terms)
            before = split.taken[0]
            got = split.ranked(conn, "fts_words", match, window, n, top, terms)
            if not whole and got is None:  # no row: no count kept, nothing to split on
                continue
            assert got is not None, (match, window)
            assert split.taken[0] == before + 1
            k = min(top, n)
            assert got[:k] == whole[:k], (match, window, n, top)
            assert sorted(r[0] for r in got) == sorted(r[0] for r in whole), (match, window)
            ties += sum(1 for a, b in zip(whole[:k], whole[1:k], strict=False) if a[1] == b[1])
    assert ties > 0  # equal ranks were among the compared rows: their order was checked
    assert split.taken[2] > raced  # the ANDs of several phrases ran as a race (``_race``)


def test_a_heavy_statement_of_a_search_is_split_and_gives_the_same_hits(conn, monkeypatch):
    """``exit code`` ranks ``"exit"`` and ``"code"`` (the words list) and the phrase:
    with their counts kept and above ``SPLIT_POSTINGS`` the search splits them, on two
    connections only, and returns what one connection returns."""
    one = search(conn, "exit code", limit=10, budget_tokens=4000, parallel=False)  # counts kept
    counts = [native_rank.cached_count(conn, "fts_words", p) for p in ('"exit"', '"code"')]
    assert all(c for c in counts)
    monkeypatch.setattr(split, "SPLIT_POSTINGS", sum(counts))  # the words list is heavy, just
    before = split.taken[0]
    again = search(conn, "exit code", limit=10, budget_tokens=4000, parallel=False)
    assert split.taken[0] == before  # one connection: never split
    two = search(conn, "exit code", limit=10, budget_tokens=4000, parallel=True)
    assert split.taken[0] > before
    assert [vars(h) for h in two.hits] == [vars(h) for h in one.hits] == [vars(h) for h in again.hits]
    for f in ({"kind": "message"}, {"since": "2025-09-01"}):
        before = split.taken[0]
        filtered = search(conn, "exit code", filters=Filters(**f), limit=10, parallel=False)
        split_hits = search(conn, "exit code", filters=Filters(**f), limit=10, parallel=True)
        assert [vars(h) for h in split_hits.hits] == [vars(h) for h in filtered.hits], f
        assert split.taken[0] > before, f


def test_a_light_statement_is_not_split(conn, monkeypatch):
    """Below ``SPLIT_POSTINGS`` (the corpus's counts are far below the default) nothing
    is split; a single phrase is weighed only down to its window."""
    search(conn, "exit code", limit=10, parallel=False)
    before = split.taken[0]
    search(conn, "exit code", limit=10, parallel=True)
    assert split.taken[0] == before
    c = native_rank.cached_count(conn, "fts_words", '"file"')
    assert c and c > 5
    monkeypatch.setattr(split, "SPLIT_POSTINGS", c)
    assert split.heavy(conn, "fts_words", '"file"', 5, '"file"') is None  # 5 of c walked
    assert split.heavy(conn, "fts_words", '"file"', c, '"file"') == {'"file"': c}


def test_a_failure_on_the_second_connection_leaves_the_statement_whole(conn, monkeypatch):
    monkeypatch.setattr(split, "SPLIT_POSTINGS", 0)
    match = '"exit" OR "code"'
    whole = _whole(conn, "fts_words", match, 2000, 50, 50, match)
    monkeypatch.setattr(native_rank, "put_count", lambda *a: False)
    before = split.taken[1]
    assert split.ranked(conn, "fts_words", match, 2000, 50, 50, match) is None
    assert split.taken[1] == before + 1
    assert retrieve.newest_ranked(conn, "fts_words", match, 2000, 50, True, split=split.ranked) == whole

""" "did you mean" (newuser16 F16): a quoted phrase's suggestion was shown in two pairs
of quotes (`""connection refused""`), and a suggestion was offered that finds nothing
(the corpus holds "connection" and "refused", never side by side)."""

from __future__ import annotations

import sqlite3

from ctxkeep.query.search import search, suggest
from ctxkeep.service.search_core import did_you_mean


def _conn(corpus_store):
    return sqlite3.connect(f"file:{corpus_store[0] / 'store.db'}?mode=ro", uri=True)


def test_a_suggestion_that_finds_nothing_is_not_offered(corpus_store):
    conn = _conn(corpus_store)
    # the suggester alone proposes the phrase; none of its proposals finds an entry
    assert '"connection refused"' in suggest.suggestions(
        conn, '"conection refused"', ["conection", "refused"]
    )
    assert search(conn, '"connection refused"').hits == []
    assert search(conn, '"conection refused"').suggestions == []
    # one that finds something is offered (and finds it)
    got = search(conn, '"create a new foldr"').suggestions
    assert got == ['"create a new folder"'] and search(conn, got[0]).hits


def test_a_quoted_phrase_keeps_one_pair_of_quotes():
    assert did_you_mean(['"store line"', '"story line"']) == 'did you mean "store line" or "story line"?'
    assert did_you_mean(["frequency"]) == 'did you mean "frequency"?'


def test_a_quote_never_closed_is_not_offered_back(corpus_store):
    """newuser21 N2: `search '"unclosed'` offered `""uncased"` (the stray quote kept in
    each suggestion, then quoted again); a quote never closed is searched as words, and
    the suggestion is the words."""
    conn = _conn(corpus_store)
    got = suggest.suggestions(conn, '"unclosed', ["unclosed"])
    assert got and all('"' not in q for q in got), got
    assert did_you_mean(got).count('"') == 2 * len(got)
    # a closed pair is kept
    assert all(
        q.count('"') == 2 for q in suggest.suggestions(conn, '"conection refused"', ["conection", "refused"])
    )

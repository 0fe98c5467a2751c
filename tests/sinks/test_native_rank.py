"""``ck_bm25`` (``sinks.sqlite.native_rank``, ``_ckrank.c``): FTS5's ``bm25()`` values bit
for bit, with each phrase's document count cached per connection until the database
changes, and the search's fallback to ``bm25()`` when the library is absent.

The library is built by the build hook (``hatch_build.py``) wherever a C compiler
exists; CI installs one (``.ci/run``), so a missing library fails here rather than
silently leaving the search on ``bm25()``."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from ctxkeep.query.search import Filters, retrieve, search
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import native_rank

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None,
    reason="no C compiler: the library is not built",
)

WEIGHTS = "4.0, 1.0, 0.0"
MATCHES = [
    '"file"',
    '"exit" AND "code"',
    '"exit" OR "code" OR "create" OR "next" OR "app"',
    '"command not found"',
    '"test"*',
    '("error") AND facets : (fk0 OR fk386842243290)',
    '{title text} : "commit" OR "branch"',
    '"zzzz-no-such-term" OR "install"',
    '"-" OR "error" OR "--"',  # phrases without a token: FTS5 drops them (the keys then do not count)
    '("exit" OR "code") AND facets : (fk0 OR fk386842243290)',
]


def _ranks(conn: sqlite3.Connection, fn: str, match: str) -> list[tuple[int, float]]:
    args = f"fts_words, {WEIGHTS}" if fn == "bm25" else f"fts_words, 'fts_words', ?2, {WEIGHTS}"
    sql = f"SELECT rowid, {fn}({args}) FROM fts_words WHERE fts_words MATCH ?1 ORDER BY rowid"
    return conn.execute(sql, (match,) if fn == "bm25" else (match, retrieve.phrase_keys(match))).fetchall()


def test_the_library_is_built_and_registers_on_a_store_connection(corpus_store):
    assert native_rank.LIBRARY.is_file()
    conn = sqlite_store.connect(corpus_store[0], readonly=True, mmap=True)
    try:
        assert native_rank.ready(conn)
        assert native_rank.ready(conn)  # registered once: the second call only looks it up
    finally:
        conn.close()


def test_ck_bm25_equals_bm25_bit_for_bit_first_and_cached(corpus_store):
    conn = sqlite_store.connect(corpus_store[0], readonly=True)
    try:
        assert native_rank.ready(conn)
        native_rank.clear()
        hits0, misses0 = native_rank.stats(conn)
        checked = 0
        for match in MATCHES:
            want = _ranks(conn, "bm25", match)
            first = _ranks(conn, "ck_bm25", match)  # walks, fills the cache
            again = _ranks(conn, "ck_bm25", match)  # from the cache
            assert first == want and again == want, match
            checked += len(want)
        hits, misses = native_rank.stats(conn)
        assert checked > 1000  # the corpus matches these terms: real rows compared
        assert misses - misses0 > 0 and hits - hits0 >= misses - misses0
        for match in MATCHES:  # every phrase counted once: a second pass walks none
            assert _ranks(conn, "ck_bm25", match) == _ranks(conn, "bm25", match)
        assert native_rank.stats(conn)[1] == misses
    finally:
        conn.close()


def test_lists_share_the_count_of_a_phrase_they_both_rank(corpus_store):
    conn = sqlite_store.connect(corpus_store[0], readonly=True)
    try:
        assert native_rank.ready(conn)
        native_rank.clear()
        for match in [
            '"exit" AND "code"',
            '"exit" OR "code" OR "branch"',
            '("code") AND facets : (fk0 OR fk386842243290)',
        ]:
            h0, m0 = native_rank.stats(conn)
            assert _ranks(conn, "ck_bm25", match) == _ranks(conn, "bm25", match)
            h1, m1 = native_rank.stats(conn)
            yield_ = (h1 - h0, m1 - m0)
            if match.startswith('"exit" AND'):
                assert yield_ == (0, 2)
            elif match.startswith('"exit" OR'):
                assert yield_ == (2, 1)  # "exit" and "code" counted by the list before
            else:
                # "code"; the two facet tokens are never counted: the facets column
                # weighs 0, so no row needs their IDF (the walk of a kind's postings)
                assert yield_ == (1, 0)
    finally:
        conn.close()


def test_a_phrase_no_ranked_row_needs_is_never_counted_and_the_ranks_stay_bm25s(corpus_store):
    conn = sqlite_store.connect(corpus_store[0], readonly=True)
    try:
        assert native_rank.ready(conn)
        # the title and facets columns weigh 0: "install" holds only title instances in
        # some rows, the facet tokens never count; "zzzz" is held by no row
        for weights in ("0.0, 1.0, 0.0", "4.0, 0.0, 0.0", "4.0, 1.0, 0.0", "1.0, -1.0, 0.5"):
            for match in [
                '"zzzz-no-such-term" OR "install"',
                '("error" OR "commit") AND facets : (fk0 OR fk386842243290)',
                '"exit" OR "code" OR "create" OR "next" OR "app"',
            ]:
                native_rank.clear()
                want = conn.execute(
                    f"SELECT rowid, bm25(fts_words, {weights}) FROM fts_words WHERE fts_words MATCH ?1 "
                    "ORDER BY rowid",
                    (match,),
                ).fetchall()
                got = conn.execute(
                    f"SELECT rowid, ck_bm25(fts_words, 'fts_words', ?2, {weights}) FROM fts_words "
                    "WHERE fts_words MATCH ?1 ORDER BY rowid",
                    (match, retrieve.phrase_keys(match)),
                ).fetchall()
                assert got == want and len(want) > 10, (weights, match)
        native_rank.clear()
        _, m0 = native_rank.stats(conn)
        _ranks(conn, "ck_bm25", '"zzzz-no-such-term" OR "install"')
        assert native_rank.stats(conn)[1] - m0 == 1  # "install" only
        native_rank.clear()
        _, m0 = native_rank.stats(conn)
        facets = Filters(kind="message", agent="codex").facet_match()
        assert len(_ranks(conn, "ck_bm25", f'("error") AND {facets}')) >= 10
        assert native_rank.stats(conn)[1] - m0 == 1  # "error" only
    finally:
        conn.close()


def test_phrase_keys_of_the_shapes_parse_builds():
    assert retrieve.phrase_keys('"exit" AND "code"') == '"exit"\x1f"code"'
    assert retrieve.phrase_keys('"exit"* OR "a""b"') == '"exit"*\x1f"a""b"'
    assert (
        retrieve.phrase_keys('("x" OR "y") AND facets : (fk0 OR fk12) AND facets : (fa3)')
        == '"x"\x1f"y"\x1ffacets:fk0\x1ffacets:fk12\x1ffacets:fa3'
    )
    # any other shape: the whole MATCH (its phrases keyed by their index)
    for other in ['{title text} : "x"', 'NEAR("a" "b")', "x", '"a\x1fb"', '("a"']:
        assert retrieve.phrase_keys(other) == "\x1e" + other


def test_the_counts_follow_a_commit_of_another_connection_and_own_changes(tmp_path):
    db = tmp_path / "t.db"
    w = sqlite3.connect(db, isolation_level=None)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("CREATE VIRTUAL TABLE t USING fts5(a, b)")
    rnd = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]

    def rows(n):
        return [
            (" ".join(rnd.choices(words, k=rnd.randint(1, 12))), " ".join(rnd.choices(words, k=3)))
            for _ in range(n)
        ]

    w.executemany("INSERT INTO t VALUES (?, ?)", rows(2000))
    r = sqlite3.connect(db, isolation_level=None)
    assert native_rank.ready(r) and native_rank.ready(w)

    def same(conn, match):
        want = conn.execute("SELECT rowid, bm25(t, 2.0, 1.0) FROM t WHERE t MATCH ?1", (match,)).fetchall()
        got = conn.execute(
            "SELECT rowid, ck_bm25(t, 't', ?1, 2.0, 1.0) FROM t WHERE t MATCH ?1", (match,)
        ).fetchall()
        return got == want and len(got) > 0

    assert same(r, "alpha")
    assert same(r, "alpha")  # cached
    # another connection commits rows holding "alpha": the reader's count must follow
    w.executemany("INSERT INTO t VALUES (?, ?)", [("alpha alpha", "x")] * 500)
    assert same(r, "alpha")
    # the connection's own uncommitted change (no commit: the data version stays)
    w.execute("BEGIN")
    assert same(w, "beta")
    w.execute("DELETE FROM t WHERE rowid IN (SELECT rowid FROM t WHERE t MATCH 'beta' LIMIT 300)")
    assert same(w, "beta")
    w.execute("ROLLBACK")
    assert same(w, "beta")
    # the connection's own commit (autocommit), after its cache holds the count
    assert same(w, "gamma") and same(w, "gamma")
    w.executemany("INSERT INTO t VALUES (?, ?)", [("gamma", "gamma")] * 400)
    assert same(w, "gamma")
    # a write to the temp schema (as the search's term probe) does not empty the cache
    assert same(r, "alpha")  # counted again since w's commits
    hits = native_rank.stats(r)[0]
    r.execute("CREATE TEMP TABLE probe(x)")
    r.execute("INSERT INTO temp.probe VALUES (1)")
    assert same(r, "alpha") and native_rank.stats(r)[0] == hits + 1
    r.close()
    w.close()


def test_a_pointer_of_another_connection_is_refused():
    lib = native_rank._load()
    assert lib is not None
    a, b = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    try:
        assert native_rank._verified(lib, a, native_rank._db(a))
        assert not native_rank._verified(lib, a, native_rank._db(b))
        assert not native_rank._verified(lib, a, 0)
    finally:
        a.close()
        b.close()


QUERIES = [
    ("exit code", {}),
    ("file", {"kind": "message"}),
    ('"command not found"', {}),
    ("commit branch", {"agent": "claude-code"}),
    ("useTodos", {}),
    ("the", {"role": "user"}),
]


def test_search_gives_the_same_hits_with_and_without_the_library(corpus_store, monkeypatch):
    home = corpus_store[0]
    conn = sqlite_store.connect(home, readonly=True, mmap=True)
    try:
        assert native_rank.ready(conn)
        with_lib = [search(conn, q, filters=Filters(**f), limit=10, parallel=False) for q, f in QUERIES]
        with_lib_again = [search(conn, q, filters=Filters(**f), limit=10, parallel=False) for q, f in QUERIES]
        sql: list[str] = []
        conn.set_trace_callback(sql.append)
        search(conn, "exit code", limit=10, parallel=False)
        conn.set_trace_callback(None)
        # the lists read their best rows: ck_bm25_top (ck_bm25's values for those rows)
        assert any("ck_bm25_top(" in s for s in sql) and not any(" bm25(" in s for s in sql)
        monkeypatch.setattr(native_rank, "_lib", None)  # as without a compiler at install
        assert not native_rank.ready(conn)
        sql.clear()
        conn.set_trace_callback(sql.append)
        without = [search(conn, q, filters=Filters(**f), limit=10, parallel=False) for q, f in QUERIES]
        conn.set_trace_callback(None)
        assert not any("ck_bm25" in s for s in sql) and any("bm25(" in s for s in sql)
    finally:
        conn.close()
    assert sum(len(r.hits) for r in without) > 20
    assert [repr(r) for r in with_lib] == [repr(r) for r in without]
    assert [repr(r) for r in with_lib_again] == [repr(r) for r in without]


def test_rank_expr_names_the_table_and_the_match_parameter():
    assert retrieve.rank_expr("fts_words") == "bm25(fts_words, 4.0, 1.0, 0.0)"
    assert retrieve.rank_expr("fts_words", True, 4) == "ck_bm25(fts_words, 'fts_words', ?4, 4.0, 1.0, 0.0)"
    assert (
        retrieve.rank_expr("fts_words", True, 4, 3)
        == "ck_bm25_top(fts_words, 'fts_words', ?4, ?3, 4.0, 1.0, 0.0)"
    )
    assert retrieve.rank_expr("fts_words", False, 4, 3) == "bm25(fts_words, 4.0, 1.0, 0.0)"
    text, params = retrieve.ranked_sql("fts_grams", '"ab"', 7, 10, True)
    assert "?4" in text and "MATCH ?1 AND rowid > ?2" in text and params == ('"ab"', 7, 10, '"ab"')


def test_unavailable_library_means_bm25(monkeypatch, tmp_path):
    monkeypatch.setattr(native_rank, "_tried", False)
    monkeypatch.setattr(native_rank, "_lib", None)
    monkeypatch.setattr(native_rank, "LIBRARY", Path(tmp_path / "absent.so"))
    conn = sqlite3.connect(":memory:")
    try:
        assert not native_rank.ready(conn)
        assert native_rank.stats(conn) == (0, 0)
    finally:
        conn.close()


def test_a_filtered_window_is_ranked_in_one_walk_to_the_same_rows(corpus_store):
    """With ``ck_bm25`` a filtered window is ranked as it is, in one walk (its facet
    tokens are never counted: the facets column weighs 0), counts cached or not; the
    same rows and ranks as the terms-alone ranking ``bm25()`` needs."""
    conn = sqlite_store.connect(corpus_store[0], readonly=True)
    facets = Filters(kind="message").facet_match()
    try:
        assert native_rank.ready(conn)
        for terms in ['"exit" AND "code"', '"file" OR "error"', '"step by step"']:
            match = f"({terms}) AND {facets}"
            for n in (10, retrieve.RANK_WINDOW + 1):
                by_terms = retrieve._ranked_by_terms(conn, "fts_words", match, terms, n)
                for fresh in (True, False):
                    if fresh:
                        native_rank.clear()
                    sql: list[str] = []
                    conn.set_trace_callback(sql.append)
                    one_walk = retrieve.ranked_window(conn, "fts_words", match, n, terms)
                    conn.set_trace_callback(None)
                    top = [s for s in sql if not s.startswith("--")]
                    assert len(top) == 1 and "json_each" not in top[0]  # one statement, not by terms
                    assert one_walk == by_terms and by_terms[0], (terms, n, fresh)
    finally:
        conn.close()


def test_data_version_follows_every_commit_to_main_and_nothing_else(tmp_path):
    """``data_version``: a connection's own commits and (after a read) another's change
    it; a write to the ``temp`` schema does not (``retrieve.kept_passed`` keys by it)."""
    db = tmp_path / "v.db"
    w = sqlite3.connect(db)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("CREATE TABLE t(x)")
    w.commit()
    r = sqlite3.connect(f"file:{db}?mode=ro", uri=True)

    def now(c: sqlite3.Connection) -> int | None:
        c.execute("PRAGMA data_version").fetchone()  # a read: the pager current
        return native_rank.data_version(c)

    w0, r0 = now(w), now(r)
    assert w0 is not None and r0 is not None
    w.execute("CREATE TEMP TABLE tt(x)")
    w.execute("INSERT INTO tt VALUES (1)")
    assert now(w) == w0
    w.execute("INSERT INTO t VALUES (1)")
    w.commit()
    w1, r1 = now(w), now(r)
    assert w1 != w0 and r1 != r0
    assert now(w) == w1 and now(r) == r1
    w.close()
    r.close()


def _top(conn: sqlite3.Connection, fn: str, match: str, k: int, weights: str = WEIGHTS, order: str = "DESC"):
    """The ``k`` best ``(rowid, rank)`` of ``match`` as a list statement reads them
    (``ORDER BY r, rowid DESC LIMIT k``), ranked by ``fn`` over the matches walked in
    rowid ``order``."""
    args = {
        "bm25": f"fts_words, {weights}",
        "ck_bm25": f"fts_words, 'fts_words', ?2, {weights}",
        "ck_bm25_top": f"fts_words, 'fts_words', ?2, ?3, {weights}",
    }[fn]
    sql = (
        f"SELECT id, r FROM (SELECT rowid AS id, {fn}({args}) AS r FROM fts_words WHERE fts_words MATCH ?1 "
        f"ORDER BY rowid {order}) ORDER BY r, id DESC LIMIT ?3"
    )
    return conn.execute(sql, (match, retrieve.phrase_keys(match), k)).fetchall()


@pytest.mark.parametrize("k", [1, 7, 50])
def test_ck_bm25_top_gives_the_k_best_rows_bm25_gives_and_bounds_the_others(corpus_store, k):
    """``ck_bm25_top``: the ``k`` best rows of every MATCH shape, walked newest or
    oldest first, are ``bm25()``'s with the same values bit for bit; rows that cannot be
    among them are given their bound without reading their length (counted)."""
    conn = sqlite_store.connect(corpus_store[0], readonly=True)
    try:
        assert native_rank.ready(conn)
        ranked0, bounded0 = native_rank.top_stats(conn)
        compared = 0
        for match in MATCHES:
            for order in ("DESC", "ASC"):
                want = _top(conn, "bm25", match, k, order=order)
                assert _top(conn, "ck_bm25_top", match, k, order=order) == want, (match, order)
                assert _top(conn, "ck_bm25", match, k, order=order) == want
                compared += len(want)
        ranked, bounded = native_rank.top_stats(conn)
        assert compared >= len(MATCHES) * k  # most shapes match at least k rows
        assert bounded - bounded0 > 0 and ranked - ranked0 > 0  # rows bounded, the best ranked
    finally:
        conn.close()


def test_ck_bm25_top_bounds_nothing_under_a_negative_weight(corpus_store):
    """A negative column weight makes a row's frequency lower its score: no bound holds,
    so every row is ranked (its length read), to ``bm25()``'s values."""
    conn = sqlite_store.connect(corpus_store[0], readonly=True)
    try:
        assert native_rank.ready(conn)
        for match in ('"exit" OR "code"', '"file"'):
            _, b0 = native_rank.top_stats(conn)
            want = _top(conn, "bm25", match, 5, "1.0, -1.0, 0.5")
            assert _top(conn, "ck_bm25_top", match, 5, "1.0, -1.0, 0.5") == want and len(want) == 5
            assert native_rank.top_stats(conn)[1] == b0
    finally:
        conn.close()


def test_list_statements_read_the_same_rows_with_and_without_the_bound(corpus_store, monkeypatch):
    """The list statements that read their best rows (``newest_ranked_sql``,
    ``ranked_sql``, ``ranked_ids_sql``; a filtered window's best ``n`` + 1 with its
    floor, ``ranked_window``) give the same rows and ranks with ``ck_bm25_top`` as with
    ``ck_bm25`` (``rank_expr`` without ``top_at``)."""
    conn = sqlite_store.connect(corpus_store[0], readonly=True)
    try:
        assert native_rank.ready(conn)
        real = retrieve.rank_expr

        def exact(fts, native=False, key_at=0, top_at=None):  # the same parameters, no bound
            e = real(fts, native, key_at)
            return f"({e} + 0 * ?{top_at})" if native and top_at is not None else e

        facets = Filters(kind="message").facet_match()
        shapes = ['"exit" AND "code"', '"file"', '"test"*', '"exit" OR "code" OR "branch"']
        got, want = [], []
        for out, fn in ((got, real), (want, exact)):
            monkeypatch.setattr(retrieve, "rank_expr", fn)
            for m in shapes:
                ids = [r[0] for r in conn.execute(*retrieve.window_ids_sql("fts_words", m))][::-1]
                out.append(
                    conn.execute(*retrieve.newest_ranked_sql("fts_words", m, 2000, 10, True)).fetchall()
                )
                out.append(conn.execute(*retrieve.ranked_sql("fts_words", m, 0, 10, True)).fetchall())
                out.append(conn.execute(*retrieve.ranked_ids_sql("fts_words", m, ids, 10, True)).fetchall())
                # a subset of the span: rows the IN leaves out are never ranked (nor bounded)
                part = ids[::3]
                out.append(conn.execute(*retrieve.ranked_ids_sql("fts_words", m, part, 10, True)).fetchall())
                out.append(retrieve.ranked_window(conn, "fts_words", f"({m}) AND {facets}", 10, m))
        assert got == want and all(x for x in got)
    finally:
        conn.close()


def test_cached_count_reads_the_kept_count_and_none_once_the_database_changed(tmp_path):
    db = tmp_path / "t.db"
    w = sqlite3.connect(db, isolation_level=None)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("CREATE VIRTUAL TABLE t USING fts5(a)")
    w.executemany("INSERT INTO t VALUES (?)", [("alpha beta",)] * 30 + [("beta",)] * 20)
    r = sqlite3.connect(db, isolation_level=None)
    assert native_rank.ready(r)
    assert native_rank.cached_count(r, "t", '"alpha"') is None  # never ranked: nothing kept
    sql = "SELECT rowid, ck_bm25(t, 't', ?2, 1.0) FROM t WHERE t MATCH ?1"
    r.execute(sql, ('"alpha" AND "beta"', '"alpha"\x1f"beta"')).fetchall()
    assert native_rank.cached_count(r, "t", '"alpha"') == 30
    assert native_rank.cached_count(r, "t", '"beta"') == 50
    assert native_rank.cached_count(r, "other", '"alpha"') is None  # keyed by table
    assert retrieve.match_bound(r, "t", '"alpha" AND "beta"') == 30
    assert retrieve.match_bound(r, "t", '("alpha" OR "beta")') == 80
    assert retrieve.match_bound(r, "t", '"alpha" AND "gamma"') == 30  # the least kept
    assert retrieve.match_bound(r, "t", '"alpha" OR "gamma"') is None  # one not kept
    for shape in ('"alpha" NOT "beta"', '"alpha" AND "beta" OR "x"', '("alpha") AND facets : (fk0)'):
        assert retrieve.match_bound(r, "t", shape) is None
    # another connection commits: the kept count is dropped once r reads again (the
    # pager's data version moves at its next read transaction)
    w.executemany("INSERT INTO t VALUES (?)", [("alpha",)] * 20)
    r.execute("SELECT count(*) FROM t").fetchone()
    assert native_rank.cached_count(r, "t", '"alpha"') is None
    r.close()
    w.close()


def test_lists_known_within_the_window_walk_oldest_first_to_the_same_hits(corpus_store):
    """A list whose MATCH the kept counts bound within ``RANK_WINDOW`` walks oldest first
    (``newest_ranked_sql(asc=True)``), unfiltered and filtered, with the hits a
    connection without counts (newest first) gives."""
    queries = [("command not found", Filters()), ("apply_patch", Filters(kind="tool_call"))]
    queries += [("speckit constitution", Filters()), ("useTodos", Filters(agent="claude-code"))]
    warm = sqlite_store.connect(corpus_store[0], readonly=True)
    try:
        for q, f in queries:
            cold = sqlite_store.connect(corpus_store[0], readonly=True)
            try:
                want = search(cold, q, filters=f, parallel=False)
            finally:
                cold.close()
            search(warm, q, filters=f, parallel=False)  # the counts kept
            sql: list[str] = []
            warm.set_trace_callback(sql.append)
            got = search(warm, q, filters=f, parallel=False)
            warm.set_trace_callback(None)
            assert [vars(h) for h in got.hits] == [vars(h) for h in want.hits] and want.hits
            assert any("ORDER BY rowid ASC" in s for s in sql), q
    finally:
        warm.close()


def test_a_list_believed_within_the_window_walks_newest_first_when_it_is_not(tmp_path):
    """The counts a connection keeps can be behind another connection's commit until its
    next statement: a list walked oldest first that finds more than the window is walked
    again newest first (``retrieve.newest_ranked``), so it holds the newest matches."""
    db = tmp_path / "t.db"
    w = sqlite3.connect(db, isolation_level=None)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("CREATE VIRTUAL TABLE fts_words USING fts5(title, text, facets)")
    w.executemany("INSERT INTO fts_words(text) VALUES (?)", [("alpha",)] * 30)
    r = sqlite3.connect(db, isolation_level=None)
    assert native_rank.ready(r)
    assert len(retrieve.newest_ranked(r, "fts_words", '"alpha"', 40, 100, True)) == 30  # counted: 30
    assert retrieve.within_window(r, "fts_words", '"alpha"', 40)
    w.executemany("INSERT INTO fts_words(text) VALUES (?)", [("alpha",)] * 30)  # 60 now
    sql: list[str] = []
    r.set_trace_callback(sql.append)
    rows = retrieve.newest_ranked(r, "fts_words", '"alpha"', 40, 100, True)
    assert sorted(i for i, _ in rows) == list(range(21, 61))  # the 40 newest
    assert ["ASC" in s for s in sql if not s.startswith("--")] == [True, False]  # then newest first
    r.close()
    w.close()


def test_a_count_put_on_a_connection_is_the_one_it_ranks_with_until_the_database_changes(tmp_path):
    """``put_count`` (the split's hand-over, ``query.search.split``): the next statement
    ranks with the count given, without walking the phrase (a cache hit, no miss); a
    commit the connection has not seen yet drops it, and the phrase is walked again."""
    db = tmp_path / "t.db"
    w = sqlite3.connect(db, isolation_level=None)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("CREATE VIRTUAL TABLE t USING fts5(a)")
    w.executemany("INSERT INTO t VALUES (?)", [("alpha beta",)] * 30 + [("beta",)] * 20)
    r = sqlite3.connect(db, isolation_level=None)
    assert native_rank.ready(r)
    r.execute("SELECT count(*) FROM t").fetchone()
    sql = "SELECT rowid, ck_bm25(t, 't', ?2, 1.0) FROM t WHERE t MATCH ?1 ORDER BY rowid"
    ref = sqlite3.connect(db, isolation_level=None)
    exact = ref.execute(
        "SELECT rowid, bm25(t, 1.0) FROM t WHERE t MATCH ? ORDER BY rowid", ('"alpha"',)
    ).fetchall()
    assert native_rank.put_count(r, "t", '"alpha"', 30)  # the true count
    hits, misses = native_rank.stats(r)
    assert r.execute(sql, ('"alpha"', '"alpha"')).fetchall() == exact
    assert native_rank.stats(r) == (hits + 1, misses)  # ranked with the count given
    assert native_rank.put_count(r, "t", '"alpha"', 7)  # a count it would not walk to: used as given
    assert native_rank.cached_count(r, "t", '"alpha"') == 7
    assert r.execute(sql, ('"alpha"', '"alpha"')).fetchall() != exact
    w.executemany("INSERT INTO t VALUES (?)", [("alpha",)] * 20)  # not seen by r yet
    assert native_rank.put_count(r, "t", '"alpha"', 7)
    rows = r.execute(sql, ('"alpha"', '"alpha"')).fetchall()  # its read sees the commit: walked again
    assert (
        rows
        == ref.execute(
            "SELECT rowid, bm25(t, 1.0) FROM t WHERE t MATCH ? ORDER BY rowid", ('"alpha"',)
        ).fetchall()
    )
    assert native_rank.cached_count(r, "t", '"alpha"') == 50
    for c in (r, w, ref):
        c.close()

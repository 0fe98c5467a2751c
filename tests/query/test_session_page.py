"""The session list's page built in SQL (``sinks.session_list`` through
``query.sessions.session_page``): the order of the whole list against a reference
computed here in Python from the stored entries, pages (rows of that list, sub-agents
included) that put the whole list back together, the total, the same list from DuckDB
and from SQLite, and the sub-agent
shapes a store can hold (a sub-agent of a sub-agent, two sessions naming each other,
a session naming itself) each listed exactly once."""

from __future__ import annotations

import sqlite3

import pytest

from ctxkeep.query import sessions as qs
from ctxkeep.query.sessions import list_sessions, session_page
from ctxkeep.sinks import session_list as sl


@pytest.fixture(scope="module")
def conn(corpus_store):
    c = sqlite3.connect(f"file:{corpus_store[0] / 'store.db'}?mode=ro", uri=True)
    yield c
    c.close()


def _reference(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
    """The list's order computed in Python from ``entries``: ``(agent, session_id,
    depth)``; parents newest first (first ts; ties by agent then id, descending),
    each one's sub-agents (a parent that is listed at the top) oldest first."""
    started: dict[tuple[str, str], str] = {}
    parent: dict[tuple[str, str], str | None] = {}
    for agent, sid, p, ts in conn.execute(
        "SELECT agent, session_id, max(parent_session_id), min(ts) FROM entries "
        "WHERE status IS NOT 'rewound' GROUP BY 1, 2"
    ):
        started[(agent, sid)] = ts or ""
        parent[(agent, sid)] = p or None

    def has_parent(k):
        p = parent[k]
        return p is not None and p != k[1] and (k[0], p) in parent

    kid = {k for k in parent if has_parent(k) and not has_parent((k[0], parent[k]))}
    top = sorted((k for k in parent if k not in kid), key=lambda k: (started[k], k[0], k[1]), reverse=True)
    out = []
    for k in top:
        out.append((*k, 0))
        subs = [c for c in kid if c[0] == k[0] and parent[c] == k[1]]
        out += [(*c, 1) for c in sorted(subs, key=lambda c: (started[c], c[1]))]
    return out


@pytest.mark.parametrize("analytics", [True, False])
def test_whole_list_in_the_reference_order(conn, corpus_store, analytics):
    page = session_page(conn, corpus_store[0] if analytics else None)
    assert page.source == ("duckdb" if analytics else "sqlite")
    want = _reference(conn)
    assert [(r.agent, r.session_id, r.depth) for r in page.rows] == want
    assert page.total == len(want) > 20 and any(w[2] for w in want)  # the corpus has sub-agents


@pytest.mark.parametrize("analytics", [True, False])
def test_pages_put_the_list_back_together(conn, corpus_store, analytics):
    home = corpus_store[0] if analytics else None
    whole = session_page(conn, home).rows
    got, offset, starts = [], 0, []
    while True:
        p = session_page(conn, home, limit=7, offset=offset)
        assert p.total == len(whole) and len(p.rows) == min(7, p.total - offset)
        got += p.rows
        starts.append(p.rows[0].depth)
        offset += len(p.rows)
        if offset >= p.total:
            break
    assert [r.as_dict() for r in got] == [r.as_dict() for r in whole]
    assert 1 in starts  # a page that begins inside a family: the rows are the whole list's
    past = session_page(conn, home, limit=7, offset=p.total + 3)
    assert past.rows == [] and past.total == p.total


def test_duckdb_and_sqlite_list_the_same_sessions(conn, corpus_store):
    duck, lite = session_page(conn, corpus_store[0]), session_page(conn, None)
    keys = ("agent", "session_id", "short_id", "depth", "started", "ended", "messages", "tool_calls")
    assert [[getattr(r, k) for k in keys] for r in duck.rows] == [
        [getattr(r, k) for k in keys] for r in lite.rows
    ]
    assert any(r.cost_usd for r in duck.rows) and not any(r.cost_usd for r in lite.rows)
    # the tokens the agents logged are the same sums either way
    assert [r.tokens for r in duck.rows] == [r.tokens for r in lite.rows]


@pytest.mark.parametrize("analytics", [True, False])
def test_filters_count_what_they_keep(conn, corpus_store, analytics):
    home = corpus_store[0] if analytics else None
    codex = session_page(conn, home, agents=["codex"], limit=4)
    # six Codex rollouts in the corpus, none of them a sub-agent
    assert codex.total == 6 and [r.agent for r in codex.rows] == ["codex"] * 4
    rest = session_page(conn, home, agents=["codex"], limit=4, offset=4)
    assert len(rest.rows) == 2 and not {r.session_id for r in rest.rows} & {r.session_id for r in codex.rows}
    only = session_page(conn, home, project="/home/randy/projects/python-3/OpenPrintKit")
    assert {r.session_id[:8] for r in only.rows} == {"c61729d4", "fa1ac8bf"} and only.total == 2
    assert session_page(conn, home, since="2030-01-01T00:00:00.000000Z").total == 0


def test_only_the_page_is_read_whole(conn, corpus_store, monkeypatch):
    """First prompts and short ids are looked up for the page's sessions only."""
    asked: list[list[str]] = []
    first, short = qs._first_prompts, qs.short_session_ids

    def prompts(c, sessions=None):
        asked.append(list(sessions))
        return first(c, sessions)

    def shorts(c, ids):
        asked.append(list(ids))
        return short(c, ids)

    monkeypatch.setattr(qs, "_first_prompts", prompts)
    monkeypatch.setattr(qs, "short_session_ids", shorts)
    for home in (corpus_store[0], None):
        asked.clear()
        p = session_page(conn, home, limit=3)
        ids = {r.session_id for r in p.rows}
        assert asked and all(set(a) <= ids for a in asked)
    # the shown ids are the ones the whole list shows
    whole = {r.session_id: r.short_id for r in list_sessions(conn, corpus_store[0])[0]}
    assert all(whole[r.session_id] == r.short_id for r in p.rows)


def _store(rows: list[tuple]) -> sqlite3.Connection:
    """An in-memory SQLite with the columns ``sqlite_page`` reads: ``rows`` of
    ``(agent, session_id, parent_session_id, ts)``, one message each."""
    c = sqlite3.connect(":memory:")
    c.execute(
        "CREATE TABLE entries(agent, session_id, parent_session_id, project_dir, ts, kind, token_estimate, status)"
    )
    c.execute(
        "CREATE TABLE usage(agent, session_id, input_tokens, output_tokens, cache_read_tokens, "
        "cache_creation_tokens, reasoning_tokens)"
    )
    c.executemany("INSERT INTO entries VALUES (?, ?, ?, '/p', ?, 'message', 10, NULL)", rows)
    c.execute("INSERT INTO usage VALUES ('a', 'B', 1, 2, 3, 4, 5)")  # (agent a: reasoning inside output)
    return c


def test_every_session_once_whatever_its_parents():
    """A sub-agent of a sub-agent stands on its own (one level of nesting), two
    sessions naming each other as parent and a session naming itself are listed on
    their own; none is lost (the Python nesting before dropped all three)."""
    c = _store(
        [
            ("a", "A", None, "2026-01-01T10:00:00Z"),
            ("a", "B", "A", "2026-01-01T10:05:00Z"),  # A's sub-agent
            ("a", "C", "B", "2026-01-01T10:06:00Z"),  # B's sub-agent: on its own
            ("a", "D", "E", "2026-01-02T00:00:00Z"),  # D and E name each other
            ("a", "E", "D", "2026-01-03T00:00:00Z"),
            ("a", "F", "F", "2026-01-04T00:00:00Z"),  # names itself
            ("a", "G", "gone", "2025-12-01T00:00:00Z"),  # its parent is not stored
            ("a", "H", None, None),  # no time: last
            ("b", "B2", "A", "2026-01-01T11:00:00Z"),  # another agent's A: not a parent
        ]
    )
    p = sl.sqlite_page(c, sl.SessionFilter())
    got = [(r["session_id"], r["depth"]) for r in p.rows]
    assert got == [
        ("F", 0), ("E", 0), ("D", 0), ("B2", 0), ("C", 0), ("A", 0), ("B", 1), ("G", 0), ("H", 0),
    ]  # fmt: skip
    assert p.total == 9
    b = next(r for r in p.rows if r["session_id"] == "B")
    assert b["tokens"] == 10 and b["messages"] == 1 and b["token_estimate"] == 10
    # A filtered out (it ended before): B stands on its own, and C is then B's sub-agent
    q = sl.sqlite_page(c, sl.SessionFilter(since="2026-01-01T10:01:00Z"))
    assert [(r["session_id"], r["depth"]) for r in q.rows] == [
        ("F", 0), ("E", 0), ("D", 0), ("B2", 0), ("B", 0), ("C", 1),
    ]  # fmt: skip
    assert q.total == 6
    # until: started before it; a session without a time (H) cannot be placed: left out
    u = sl.sqlite_page(c, sl.SessionFilter(until="2026-01-01T10:05:00Z"), limit=2)
    assert [r["session_id"] for r in u.rows] == ["A", "G"] and u.total == 2
    assert [r["session_id"] for r in sl.sqlite_page(c, sl.SessionFilter(agents=("b",))).rows] == ["B2"]


def test_the_sqlite_page_looks_sub_agents_up_through_an_index(conn):
    """The SQLite fallback (DuckDB missing or behind) finds whether a session's parent
    is itself a sub-agent through an index SQLite builds on the sessions with a parent
    (``kp``), not a scan of them per session: an ``IN`` over the materialized list ran
    as a nested loop, ~76 CPU s for the page of a 2.5 GB store (36,305 sessions); with
    the search ~3.6 CPU s, the page the same as DuckDB's."""
    from ctxkeep.sinks import session_list as sl

    sql, params = sl.sqlite_page_sql(sl.SessionFilter(), limit=50)
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    assert any(
        x.startswith("SEARCH kp USING AUTOMATIC COVERING INDEX (agent=? AND session_id=?)") for x in plan
    ), plan
    assert not any(x.startswith("SCAN kp") for x in plan), plan


# ---------------------------------------------------------------- session_parts (rss20)


def _parts_current(home) -> bool:
    import duckdb

    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        return bool(con.execute(sl._PARTS_CURRENT).fetchall()[0][0])
    finally:
        con.close()


_FILTERS = [
    (sl.SessionFilter(), None, 0),
    (sl.SessionFilter(empty=False), 7, 3),
    (sl.SessionFilter(agents=("codex",)), 4, 0),
    (sl.SessionFilter(since="2025-01-01T00:00:00.000000Z", empty=False), None, 0),
    (sl.SessionFilter(project="/home/randy/projects/python-3/OpenPrintKit"), None, 0),
]


def _same_both_ways(home) -> list[dict]:
    """Every ``_FILTERS`` page from ``session_parts`` equals the one from every entry;
    returns the whole list's rows."""
    whole = []
    for flt, limit, offset in _FILTERS:
        parts = sl.duckdb_page(home, flt, limit=limit, offset=offset)
        live = sl.duckdb_page(home, flt, limit=limit, offset=offset, live=True)
        assert (parts.rows, parts.total, parts.empty) == (live.rows, live.total, live.empty)
        whole = whole or parts.rows
    return whole


def test_the_ingest_leaves_session_parts_current_and_they_list_as_every_entry(corpus_store):
    home = corpus_store[0]
    assert _parts_current(home)
    rows = _same_both_ways(home)
    assert len(rows) > 20 and any(r["depth"] for r in rows) and any(r["messages"] for r in rows)


def test_session_parts_follow_rewinds_and_new_rows(store):
    """A rewind applied to DuckDB directly (``apply_changes``) sums its session again
    at once; the sync's replay of ``status_log`` and rows above the parts' mark are
    summed again by the next closing sync (the rest of the table kept)."""
    import duckdb

    from ctxkeep.sinks import duckdb as duckdb_store
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store)
    try:
        sid, n = conn.execute(
            "SELECT session_id, count(*) FROM entries WHERE kind = 'message' GROUP BY 1 ORDER BY 2 DESC LIMIT 1"
        ).fetchone()
        half = [
            r[0]
            for r in conn.execute(
                "SELECT entry_id FROM entries WHERE session_id = ? AND kind = 'message' ORDER BY rowid",
                (sid,),
            )
        ][: n // 2]
        before = {r["session_id"]: r["messages"] for r in sl.duckdb_page(store, sl.SessionFilter()).rows}
        sqlite_store.apply_changes(conn, [{"entry_ids": half, "status": "rewound"}], home=store)
        assert _parts_current(store)  # (the status mark has not moved: the parts must be right already)
        after = {r["session_id"]: r["messages"] for r in _same_both_ways(store)}
        assert after[sid] == before[sid] - len(half) and before[sid] == n
        # the sync replays the same changes from status_log: nothing moves
        duckdb_store.sync(conn, store)
        assert _parts_current(store) and _same_both_ways(store)
        # rows above the mark (as a sync that appended them without the closing step):
        # the parts of their sessions dropped, the mark set back; the next sync sums them
        con = duckdb.connect(str(store / "analytics.duckdb"))
        try:
            top = con.execute("SELECT max(sqlite_rowid) FROM entries").fetchall()[0][0]
            cut = top - 200
            con.execute(
                "DELETE FROM session_parts WHERE (agent, session_id) IN "
                "(SELECT agent, session_id FROM entries WHERE sqlite_rowid > ?)",
                [cut],
            )
            con.execute("UPDATE meta SET value = ? WHERE key = 'parts_rowid'", [cut])
            con.execute(
                "UPDATE meta SET value = (SELECT count(*) FROM entries WHERE sqlite_rowid <= ?) "
                "WHERE key = 'parts_count'",
                [cut],
            )
            kept = con.execute("SELECT count(*) FROM session_parts").fetchall()[0][0]
        finally:
            con.close()
        assert not _parts_current(store)
        assert (
            sl.duckdb_page(store, sl.SessionFilter()).rows
            == sl.duckdb_page(store, sl.SessionFilter(), live=True).rows
        )  # (read from every entry meanwhile)
        duckdb_store.sync(conn, store)
        assert _parts_current(store)
        assert [r["messages"] for r in _same_both_ways(store)] == [
            r["messages"] for r in sl.duckdb_page(store, sl.SessionFilter(), live=True).rows
        ]
        con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM session_parts").fetchall()[0][0] > kept
        finally:
            con.close()
    finally:
        conn.close()

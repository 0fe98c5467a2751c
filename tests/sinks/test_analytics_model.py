"""The DuckDB analytics model (docs/analytics.md) on the corpus store: figures computed
independently, from SQLite directly, never from the view under test."""

from __future__ import annotations

import datetime as dt
import sqlite3

import duckdb
import pytest

from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import StatusChange


def _sqlite(home) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)


def _duck(home):
    return duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)


def _rows(home, sql: str, params=()) -> list[tuple]:
    """One query on the analytics file, read-only."""
    con = _duck(home)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def _largest_session(sq) -> tuple[str, str]:
    return sq.execute(
        "SELECT agent, session_id FROM entries WHERE agent = 'claude-code' "
        "GROUP BY 1, 2 ORDER BY sum(token_estimate) DESC LIMIT 1"
    ).fetchone()


def _turn_totals(sq, agent, sid, skip=()) -> list[tuple[int, int]]:
    """(turn, cumulative tokens at its end) from SQLite: a turn starts at each user
    message; entries in ``skip`` (rewound) are left out."""
    rows = sq.execute(
        "SELECT entry_id, kind, role, coalesce(token_estimate, 0) FROM entries "
        "WHERE agent = ? AND session_id = ? ORDER BY ts IS NULL, ts, source_offset, rowid",
        (agent, sid),
    ).fetchall()
    turn, total, out = 0, 0, {}
    for eid, kind, role, tok in rows:
        if eid in skip:
            continue
        if kind == "message" and role == "user":
            turn += 1
        total += tok
        out[turn] = total
    return sorted(out.items())


def test_context_growth_is_cumulative_per_turn(corpus_store):
    home, _ = corpus_store
    sq = _sqlite(home)
    agent, sid = _largest_session(sq)
    want = _turn_totals(sq, agent, sid)
    final = sq.execute(
        "SELECT sum(token_estimate) FROM entries WHERE agent = ? AND session_id = ?", (agent, sid)
    ).fetchone()[0]
    sq.close()
    con = _duck(home)
    try:
        got = con.execute(
            "SELECT turn, cumulative_tokens FROM context_turns WHERE agent = ? AND "
            "session_id = ? ORDER BY turn",
            [agent, sid],
        ).fetchall()
        last = con.execute(
            "SELECT cumulative_tokens FROM context_growth WHERE agent = ? AND session_id = ? "
            "ORDER BY cumulative_tokens DESC LIMIT 1",
            [agent, sid],
        ).fetchone()[0]
        per_entry = con.execute(
            "SELECT max(token_estimate) FROM context_growth WHERE agent = ? AND session_id = ?", [agent, sid]
        ).fetchone()[0]
    finally:
        con.close()
    assert len(want) >= 5
    assert got == want
    assert last == final > per_entry * 2  # the running total, not one entry's tokens


def test_context_growth_leaves_rewound_entries_out(store):
    sq = sqlite_store.connect(store)
    agent, sid = _largest_session(sq)
    ids = [
        r[0]
        for r in sq.execute(
            "SELECT entry_id FROM entries WHERE agent = ? AND session_id = ? AND kind != 'message' "
            "ORDER BY rowid LIMIT 5",
            (agent, sid),
        )
    ]
    sqlite_store.apply_changes(sq, [StatusChange("rewound", tuple(ids))])
    duckdb_store.sync(sq, store)
    want = _turn_totals(sq, agent, sid, skip=set(ids))
    sq.close()
    con = _duck(store)
    try:
        got = con.execute(
            "SELECT turn, cumulative_tokens FROM context_turns WHERE agent = ? AND "
            "session_id = ? ORDER BY turn",
            [agent, sid],
        ).fetchall()
        left = con.execute(
            f"SELECT count(*) FROM context_growth WHERE entry_id IN ({','.join('?' * len(ids))})", ids
        ).fetchone()[0]
    finally:
        con.close()
    assert left == 0 and got == want


def _errors(sq) -> set[str]:
    return {
        r[0]
        for r in sq.execute(
            "SELECT e.entry_id FROM entries e JOIN contents c USING (content_hash) JOIN chunks ch "
            "ON ch.content_id = c.content_id AND ch.seq = 0 WHERE e.kind = 'tool_result' "
            "AND ch.text LIKE '[error]%'"
        )
    }


def test_tool_calls_match_sqlite(corpus_store):
    """Per tool: calls, sessions, results paired by call id, errors (the results' error
    flag), error rate, output bytes and tokens, each computed from SQLite."""
    home, _ = corpus_store
    sq = _sqlite(home)
    err = _errors(sq)
    calls = sq.execute(
        "SELECT agent, session_id, native_id, tool_name FROM entries WHERE kind = 'tool_call'"
    ).fetchall()
    name = {}
    for agent, sid, nid, tool in sorted(calls, key=lambda r: (r[0], r[1], r[2] or "", r[3] or "")):
        if nid is not None:
            name.setdefault((agent, sid, nid), tool)
    want: dict = {}
    for agent, sid, _nid, tool in calls:
        w = want.setdefault(
            (agent, tool), {"calls": 0, "sessions": set(), "results": 0, "errors": 0, "bytes": 0, "tokens": 0}
        )
        w["calls"] += 1
        w["sessions"].add(sid)
    for eid, agent, sid, nid, tool, nbytes, tok in sq.execute(
        "SELECT entry_id, agent, session_id, native_id, tool_name, text_bytes, token_estimate "
        "FROM entries WHERE kind = 'tool_result'"
    ):
        tool = tool or (name.get((agent, sid, nid)) if nid is not None else None)
        w = want.setdefault(
            (agent, tool), {"calls": 0, "sessions": set(), "results": 0, "errors": 0, "bytes": 0, "tokens": 0}
        )
        w["results"] += 1
        w["errors"] += eid in err
        w["bytes"] += nbytes or 0
        w["tokens"] += tok or 0
    sq.close()
    con = _duck(home)
    try:
        got = {
            (a, t): (c, s, r, e, rate, b, o)
            for a, t, c, s, r, e, rate, b, o in con.execute(
                "SELECT agent, tool_name, calls, sessions, results, errors, error_rate, output_bytes, "
                "output_tokens FROM tool_calls"
            ).fetchall()
        }
    finally:
        con.close()
    expect = {
        k: (
            w["calls"],
            len(w["sessions"]),
            w["results"],
            w["errors"],
            (w["errors"] / w["results"]) if w["results"] else None,
            w["bytes"],
            w["tokens"],
        )
        for k, w in want.items()
    }
    assert got == expect
    bash = got[("claude-code", "Bash")]
    assert bash[3] > 0 and 0 < bash[4] < 1  # the corpus has failing Bash calls


def test_sessions_project_title_and_counts(corpus_store):
    home, _ = corpus_store
    sq = _sqlite(home)
    agent, sid = _largest_session(sq)
    counts = sq.execute(
        "SELECT count(*) FILTER (WHERE kind = 'message'), count(*) FILTER (WHERE kind = 'tool_call'), "
        "count(*) FILTER (WHERE kind = 'summary'), min(ts), max(ts) FROM entries WHERE agent = ? AND "
        "session_id = ?",
        (agent, sid),
    ).fetchone()
    dirs = sq.execute(
        "SELECT project_dir, count(*), min(ts) FROM entries WHERE agent = ? AND session_id = ? "
        "AND coalesce(project_dir, '') <> '' GROUP BY 1 ORDER BY 2 DESC, 3",
        (agent, sid),
    ).fetchall()
    prompt = sq.execute(
        "SELECT ch.text FROM entries e JOIN contents c USING (content_hash) JOIN chunks ch "
        "ON ch.content_id = c.content_id AND ch.seq = 0 WHERE e.agent = ? AND e.session_id = ? "
        "AND e.kind = 'message' AND e.role = 'user' ORDER BY e.rowid LIMIT 1",
        (agent, sid),
    ).fetchone()[0]
    tok = sq.execute(
        "SELECT sum(input_tokens), sum(output_tokens), max(input_tokens + cache_read_tokens "
        "+ cache_creation_tokens) FROM usage WHERE agent = ? AND session_id = ?",
        (agent, sid),
    ).fetchone()
    sq.close()
    con = _duck(home)
    try:
        row = con.execute(
            "SELECT messages, tool_calls, compactions, strftime(started AT TIME ZONE 'UTC', "
            "'%Y-%m-%dT%H:%M:%S'), project_dir, title, input_tokens, output_tokens, "
            "largest_context_tokens, cost_usd, tool_errors FROM sessions WHERE agent = ? AND "
            "session_id = ?",
            [agent, sid],
        ).fetchone()
        n = con.execute("SELECT count(*), count(DISTINCT (agent, session_id)) FROM sessions").fetchone()
    finally:
        con.close()
    assert row[:3] == counts[:3]
    assert row[3] == counts[3][:19]
    assert row[4] == dirs[0][0]
    assert row[5] == " ".join(prompt.split())[:200]
    assert row[6:9] == tok
    assert row[9] > 0 and row[10] >= 0
    assert n[0] == n[1]


def test_session_project_is_the_most_frequent_dir_ties_to_the_first(tmp_path):
    con = duckdb_store.connect(tmp_path)
    try:
        rows = [
            ("a", "/p/one", "2025-01-01 10:00:00+00"),
            ("b", "/p/two", "2025-01-01 10:01:00+00"),
            ("c", "/p/two", "2025-01-01 10:02:00+00"),
            ("d", "/p/one", "2025-01-01 10:03:00+00"),
            ("e", "", "2025-01-01 09:00:00+00"),
            ("f", None, "2025-01-01 09:00:00+00"),
        ]
        for i, (eid, d, ts) in enumerate(rows):
            con.execute(
                "INSERT INTO entries(sqlite_rowid, entry_id, agent, session_id, project_dir, ts, kind, "
                "role, status, token_estimate) VALUES (?, ?, 'x', 's', ?, ?, 'message', 'user', "
                "'active', 1)",
                [i + 1, eid, d, ts],
            )
        assert con.execute("SELECT project_dir FROM sessions").fetchall() == [("/p/one",)]
        con.execute(
            "INSERT INTO entries(sqlite_rowid, entry_id, agent, session_id, project_dir, ts, kind, "
            "role, status) VALUES (9, 'g', 'x', 's', '/p/two', '2025-01-01 11:00:00+00', 'meta', "
            "'system', 'rewound')"
        )  # rewound: not counted
        assert con.execute("SELECT project_dir FROM sessions").fetchall() == [("/p/one",)]
    finally:
        con.close()


def _usage_store(home, rows):
    """A store holding only ``usage`` rows (usage_key, agent, ts, model, input, output,
    cache_read, cache_creation), synced to DuckDB."""
    sq = sqlite_store.connect(home)
    with sqlite_store.write(sq):
        sq.executemany(
            "INSERT INTO usage(usage_key, agent, session_id, project_dir, ts, model, input_tokens, "
            "output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, entry_id) "
            "VALUES (?, ?, 's', '/p', ?, ?, ?, ?, ?, ?, 0, NULL)",
            rows,
        )
    r = duckdb_store.sync(sq, home)
    return sq, r


def test_daily_usage_takes_a_time_zone_across_midnight_and_dst(tmp_path):
    rows = [  # Europe/Berlin
        ("k1", "claude-code", "2025-06-10T21:59:00.000000Z", "m", 1, 0, 0, 0),  # 23:59 CEST 06-10
        ("k2", "claude-code", "2025-06-10T22:01:00.000000Z", "m", 2, 0, 0, 0),  # 00:01 CEST 06-11
        (
            "k3",
            "claude-code",
            "2025-03-30T22:30:00.000000Z",
            "m",
            4,
            0,
            0,
            0,
        ),  # 00:30 CEST 03-31 (DST began 03-30)
        ("k4", "claude-code", "2025-03-29T23:30:00.000000Z", "m", 8, 0, 0, 0),  # 00:30 CET 03-30
        ("k5", "claude-code", "2025-10-26T22:30:00.000000Z", "m", 16, 0, 0, 0),  # 23:30 CET 10-26 (DST ended)
    ]
    sq, _ = _usage_store(tmp_path, rows)
    sq.close()
    con = _duck(tmp_path)
    try:
        berlin = con.execute(
            "SELECT strftime(day, '%Y-%m-%d'), input_tokens FROM daily_usage('Europe/Berlin') ORDER BY day"
        ).fetchall()
        utc = con.execute(
            "SELECT strftime(day, '%Y-%m-%d'), input_tokens FROM daily_usage ORDER BY day"
        ).fetchall()
        ny = con.execute(
            "SELECT strftime(day, '%Y-%m-%d'), input_tokens FROM daily_usage('America/New_York') ORDER BY day"
        ).fetchall()
    finally:
        con.close()
    assert berlin == [
        ("2025-03-30", 8),
        ("2025-03-31", 4),
        ("2025-06-10", 1),
        ("2025-06-11", 2),
        ("2025-10-26", 16),
    ]
    assert utc == [("2025-03-29", 8), ("2025-03-30", 4), ("2025-06-10", 3), ("2025-10-26", 16)]
    assert ny == [("2025-03-29", 8), ("2025-03-30", 4), ("2025-06-10", 3), ("2025-10-26", 16)]


def test_usage_is_upserted_by_key_not_reloaded(tmp_path):
    import socket

    rows = [
        (
            f"k{i}",
            "claude-code",
            f"2025-06-1{i}T10:00:00.000000Z",
            "claude-sonnet-4-20250514",
            100 * i,
            10,
            0,
            0,
        )
        for i in range(1, 5)
    ]
    sq, r = _usage_store(tmp_path, rows)
    assert (r["usage_rows"], r["usage_changed"]) == (4, 4)
    assert duckdb_store.sync(sq, tmp_path)["usage_changed"] == 0
    con = duckdb_store.connect(tmp_path)
    # a marker on every row: rows the next sync does not rewrite keep it (machine is no
    # marker: a sync re-labels every row with the store's machine name)
    con.execute("UPDATE usage SET cost_source = 'untouched'")
    con.close()
    with sqlite_store.write(sq):
        sq.execute("UPDATE usage SET output_tokens = 1000 WHERE usage_key = 'k2'")
        sq.execute("DELETE FROM usage WHERE usage_key = 'k4'")
    r = duckdb_store.sync(sq, tmp_path)
    sq.close()
    assert (r["usage_rows"], r["usage_changed"]) == (3, 1)
    got = _rows(
        tmp_path,
        "SELECT usage_key, output_tokens, machine, cost_source, model_source, "
        "round(cost_usd, 9) FROM usage ORDER BY 1",
    )
    host = socket.gethostname()
    # claude-sonnet-4: $3 input, $15 output per million tokens
    assert got == [
        ("k1", 10, host, "untouched", "logged", round((100 * 3 + 10 * 15) / 1e6, 9)),
        ("k2", 1000, host, "calculated", "logged", round((200 * 3 + 1000 * 15) / 1e6, 9)),
        ("k3", 10, host, "untouched", "logged", round((300 * 3 + 10 * 15) / 1e6, 9)),
    ]


def test_unknown_model_has_null_cost_and_is_named_prices_toml_adds_it(tmp_path):
    rows = [
        ("k1", "aider", "2025-06-10T10:00:00.000000Z", "my-local-llm", 1000, 500, 0, 0),
        ("k2", "aider", "2025-06-10T10:00:00.000000Z", None, 1000, 500, 0, 0),
    ]
    sq, r = _usage_store(tmp_path, rows)
    assert r["unpriced_models"] == ["my-local-llm"]
    con = _duck(tmp_path)
    try:
        assert con.execute(
            "SELECT usage_key, cost_usd, cost_source, model_source FROM usage ORDER BY 1"
        ).fetchall() == [("k1", None, "none", "logged"), ("k2", None, "none", None)]
        assert con.execute(
            "SELECT sum(input_tokens), sum(cost_usd), sum(unpriced_responses) FROM daily_usage"
        ).fetchall() == [(2000, None, 2)]
    finally:
        con.close()
    (tmp_path / "prices.toml").write_text('[models."my-local-llm"]\ninput_mtok = 2.0\noutput_mtok = 4.0\n')
    r = duckdb_store.sync(sq, tmp_path)  # the prices changed: every row is priced again
    sq.close()
    assert r["usage_changed"] == 2 and r["unpriced_models"] == []
    con = _duck(tmp_path)
    try:
        assert con.execute("SELECT usage_key, cost_usd, cost_source FROM usage ORDER BY 1").fetchall() == [
            ("k1", (1000 * 2 + 500 * 4) / 1e6, "calculated"),
            ("k2", None, "none"),
        ]
    finally:
        con.close()


def test_a_logged_cost_is_kept_in_auto_mode(tmp_path):
    """A SQLite usage row carrying a logged cost (``cost_usd``, schema v5): auto keeps
    it; ``cost_in_mode`` gives the other modes."""
    rows = [("k1", "opencode", "2025-06-10T10:00:00.000000Z", "claude-sonnet-4-20250514", 1000, 0, 0, 0)]
    sq, _ = _usage_store(tmp_path, rows)
    with sqlite_store.write(sq):
        sq.execute("UPDATE usage SET cost_usd = 0.5")
    duckdb_store.sync(sq, tmp_path)
    sq.close()
    con = _duck(tmp_path)
    try:
        assert con.execute(
            "SELECT cost_usd, cost_source, cost_in_mode('calculate', logged_cost_usd, calculated_cost_usd), "
            "cost_in_mode('display', logged_cost_usd, calculated_cost_usd) FROM usage"
        ).fetchall() == [(0.5, "logged", 1000 * 3 / 1e6, 0.5)]
    finally:
        con.close()


def test_compression_reads_the_compress_runs(tmp_path):
    sq = sqlite_store.connect(tmp_path)
    files = [
        {
            "path": "/a.jsonl",
            "agent": "claude-code",
            "status": "compressed",
            "bytes_before": 1000,
            "bytes_after": 400,
            "tokens_before": 300,
            "tokens_after": 120,
        },
        {
            "path": "/b.jsonl",
            "agent": "codex",
            "status": "compressed",
            "bytes_before": 50,
            "bytes_after": 45,
            "tokens_before": 10,
            "tokens_after": 9,
        },
    ]
    with sqlite_store.recorded_run(sq, "compress") as rec:
        rec.summary = {"files": 2, "files_detail": files}
    run = rec.run_id
    with sqlite_store.recorded_run(sq, "compress") as rec:  # a run recorded before per-file figures
        rec.summary = {"files": 1, "bytes_before": 7, "bytes_after": 5, "tokens_before": 3, "tokens_after": 2}
    old = rec.run_id
    duckdb_store.sync(sq, tmp_path)
    sq.close()
    got = _rows(
        tmp_path,
        "SELECT run_id, path, agent, bytes_before, bytes_after, bytes_saved, tokens_before, "
        "tokens_after, tokens_saved FROM compression ORDER BY run_id, path",
    )
    assert got == [
        (run, "/a.jsonl", "claude-code", 1000, 400, 600, 300, 120, 180),
        (run, "/b.jsonl", "codex", 50, 45, 5, 10, 9, 1),
        (old, None, None, 7, 5, 2, 3, 2, 1),
    ]


def test_archived_entries_stay_in_analytics(store):
    """Retention moves entries to Parquet; sessions, tool calls and context growth
    still count them (the ``archive`` view), once each."""
    from ctxkeep.maintenance import reindex as reindex_mod
    from ctxkeep.sinks import parquet

    con = _duck(store)
    try:
        assert con.execute("SELECT count(*) FROM archive").fetchone() == (0,)  # no files yet
        before = con.execute(
            "SELECT * EXCLUDE (has_archived) FROM sessions ORDER BY agent, session_id"
        ).fetchall()
        growth = con.execute(
            "SELECT agent, session_id, turn, cumulative_tokens FROM context_turns ORDER BY ALL"
        ).fetchall()
        tools = con.execute("SELECT * FROM tool_calls ORDER BY agent, tool_name").fetchall()
    finally:
        con.close()
    sq = sqlite_store.connect(store)
    agent, sid = _largest_session(sq)
    ids = [
        r[0]
        for r in sq.execute("SELECT entry_id FROM entries WHERE agent = ? AND session_id = ?", (agent, sid))
    ]
    sqlite_store.apply_changes(sq, [StatusChange("archived", tuple(ids))])
    out = parquet.archive_entries(sq, store, dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    assert out["entries"] == len(ids)
    reindex_mod.rebuild_analytics(sq, store)
    assert sq.execute(
        "SELECT count(*) FROM entries WHERE agent = ? AND session_id = ?", (agent, sid)
    ).fetchone() == (0,)
    sq.close()
    con = _duck(store)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT entry_id) FROM archive").fetchone() == (
            len(ids),
            len(ids),
        )
        after = con.execute(
            "SELECT * EXCLUDE (has_archived) FROM sessions ORDER BY agent, session_id"
        ).fetchall()
        assert con.execute(
            "SELECT has_archived FROM sessions WHERE agent = ? AND session_id = ?", [agent, sid]
        ).fetchone() == (True,)
        assert (
            con.execute(
                "SELECT agent, session_id, turn, cumulative_tokens FROM context_turns ORDER BY ALL"
            ).fetchall()
            == growth
        )
        assert con.execute("SELECT * FROM tool_calls ORDER BY agent, tool_name").fetchall() == tools
    finally:
        con.close()
    assert after == before


def test_an_old_analytics_file_is_upgraded(tmp_path, corpus_store):
    """A file written by the previous model (usage without key or cost) is migrated at
    connect and refilled by the next sync."""
    home, _ = corpus_store
    con = duckdb.connect(str(tmp_path / duckdb_store.DB_NAME))
    con.execute("CREATE TABLE meta(key VARCHAR PRIMARY KEY, value BIGINT)")
    con.execute("CREATE TABLE usage(usage_key VARCHAR, agent VARCHAR)")
    con.execute("INSERT INTO usage VALUES ('x', 'y')")
    con.close()
    sq = _sqlite(home)
    r = duckdb_store.sync(sq, tmp_path)
    n = sq.execute("SELECT count(*) FROM usage").fetchone()[0]
    sq.close()
    assert r["usage_rows"] == r["usage_changed"] == n
    con = _duck(tmp_path)
    try:
        assert con.execute("SELECT count(*), count(cost_usd) > 0 FROM usage").fetchone() == (n, True)
    finally:
        con.close()


@pytest.mark.parametrize(
    "view",
    [
        "usage",
        "sessions",
        "daily_usage",
        "tool_calls",
        "context_growth",
        "context_turns",
        "compression",
        "archive",
        "all_entries",
        "history",
    ],
)
def test_every_documented_relation_exists(corpus_store, view):
    from conftest import ROOT

    home, _ = corpus_store
    doc = (ROOT / "docs" / "analytics.md").read_text(encoding="utf-8")
    assert f"`{view}`" in doc
    con = _duck(home)
    try:
        cols = [d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description]
    finally:
        con.close()
    missing = [c for c in cols if f"`{c}`" not in doc]
    assert missing == []


def test_tiered_prices_are_computed_per_response(tmp_path):
    # gemini-2.5-pro: up to 200k input tokens $1.25 input / $10 output per MTok,
    # above $2.50 / $15 (genai-prices' tiers) — so each response is priced alone
    rows = [
        ("k1", "gemini-cli", "2025-09-01T10:00:00.000000Z", "gemini-2.5-pro", 250_000, 1000, 0, 0),
        ("k2", "gemini-cli", "2025-09-01T11:00:00.000000Z", "gemini-2.5-pro", 1000, 1000, 0, 0),
    ]
    sq, _ = _usage_store(tmp_path, rows)
    sq.close()
    got = _rows(tmp_path, "SELECT usage_key, round(cost_usd, 9) FROM usage ORDER BY 1")
    assert got == [
        ("k1", round((250_000 * 2.5 + 1000 * 15) / 1e6, 9)),
        ("k2", round((1000 * 1.25 + 1000 * 10) / 1e6, 9)),
    ]

"""Logged costs and the one-hour cache write (schema v5), from the source files to
DuckDB. Expected values are read from the corpus files independently of ctxkeep's
sources (JSON parsed here, the databases opened read-only here)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS_HOME, FIXTURES, ingest, q
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import migrations
from ctxkeep.sources import claude_code
from ctxkeep.sources.contract import SourceFile
from dbhelpers import priced

CRUSH = CORPUS_HOME / "code/dbos-transact-golang/.crush/crush.db"
GO_OPENCODE = CORPUS_HOME / "code/noora/.opencode/opencode.db"
EF958 = CORPUS_HOME / ".claude/projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"


def _duck(home: Path, sql: str, *args) -> list[tuple]:
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        return con.execute(sql, list(args)).fetchall()
    finally:
        con.close()


def _session_costs(db: Path) -> dict[str, float]:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return dict(conn.execute("SELECT id, cost FROM sessions WHERE cost > 0").fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize(("agent", "db"), [("crush", CRUSH), ("opencode-go", GO_OPENCODE)])
def test_charm_sessions_cost_is_the_logged_cost_of_the_session_row(corpus_store, agent, db):
    home, _ = corpus_store
    expected = _session_costs(db)
    assert expected  # the corpus databases log a cost per session
    got = dict(_duck(home, "SELECT session_id, logged_cost_usd FROM usage WHERE agent = ? ORDER BY 1", agent))
    assert got == pytest.approx(expected, rel=1e-12)
    # auto shows the logged cost, calculate the list price, display only the logged one
    rows = _duck(
        home,
        "SELECT cost_usd, cost_source, cost_in_mode('calculate', logged_cost_usd, calculated_cost_usd), "
        "cost_in_mode('display', logged_cost_usd, calculated_cost_usd) FROM usage WHERE agent = ?",
        agent,
    )
    # the tokens are unknown (the row's are the last response's: charm_db), so every
    # mode, calculate too, shows the logged cost and no tokens are summed
    for auto, src, calc, display in rows:
        assert src == "logged" and auto == display == calc


def test_crush_tokens_are_not_priced_nor_summed(corpus_store):
    home, _ = corpus_store
    conn = sqlite3.connect(f"file:{CRUSH}?mode=ro&immutable=1", uri=True)
    try:
        sid, inp, out, logged = conn.execute(
            "SELECT id, prompt_tokens, completion_tokens, cost FROM sessions ORDER BY cost DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    assert (inp, out) == (127170, 64)  # one response's context, not the session's
    ((auto, calc, tin, tout, tcr),) = _duck(
        home,
        "SELECT cost_usd, calculated_cost_usd, input_tokens, output_tokens, cache_read_tokens "
        "FROM usage WHERE agent = 'crush' AND session_id = ?",
        sid,
    )
    # before: calculate priced 127,170 + 64 tokens at gpt-5 list prices ($0.16) for a $3.20 session
    assert (auto, calc, tin, tout, tcr) == (pytest.approx(logged), pytest.approx(logged), None, None, None)


def test_opencode_message_cost_is_logged_per_response(corpus_store):
    home, _ = corpus_store
    msgs = [
        json.loads(p.read_text())
        for p in (CORPUS_HOME / ".local/share/opencode/storage/message").rglob("*.json")
    ]
    expected = {f"opencode:{m['id']}": m["cost"] for m in msgs if m.get("cost")}
    assert expected == {"opencode:msg-002": 0.01}
    got = dict(_duck(home, "SELECT usage_key, logged_cost_usd FROM usage WHERE agent = 'opencode'"))
    assert got == expected


def test_cline_request_cost_is_logged(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "cline" / "home", home)
    old = time.time() - 3600
    for p in home.rglob("*"):
        os.utime(p, (old, old))
    store = tmp_path / "store"
    ingest(home, store, agents=["cline"])
    (ui,) = home.rglob("ui_messages.json")
    expected = sorted(
        info["cost"]
        for m in json.loads(ui.read_text())
        if m.get("say") == "api_req_started" and "cost" in (info := json.loads(m["text"]))
    )
    assert len(expected) == 3
    # every usage row of the task (the partial request has no tokens: no row) has its cost
    got = sorted(c for (c,) in q(store, "SELECT cost_usd FROM usage WHERE agent = 'cline'"))
    assert got == pytest.approx(expected)


def _one_hour_by_response(path: Path) -> dict[str, tuple[int, int, int]]:
    """(message.id:requestId) -> (cache_creation, 5m, 1h) of each assistant response of
    a Claude Code file, parsed here."""
    out = {}
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        u = msg.get("usage")
        if rec.get("type") != "assistant" or not isinstance(u, dict):
            continue
        split = u.get("cache_creation") or {}
        out[f"{msg.get('id')}:{rec.get('requestId')}"] = (
            u.get("cache_creation_input_tokens") or 0,
            split.get("ephemeral_5m_input_tokens"),
            split.get("ephemeral_1h_input_tokens"),
        )
    return out


def test_one_hour_cache_writes_have_their_own_column(corpus_store):
    home, _ = corpus_store
    expected = _one_hour_by_response(EF958)
    one_hour = sum(v[2] or 0 for v in expected.values())
    assert one_hour == 102_189  # the corpus' one-hour writes (all of them in this file)
    rows = {
        k: (cc, m5, h1)
        for k, cc, m5, h1 in _duck(
            home,
            "SELECT usage_key, cache_creation_tokens, cache_creation_5m_tokens, cache_creation_1h_tokens "
            "FROM usage WHERE session_id = 'ef958aa1-0e93-49f0-bb71-150f63befcd1'",
        )
    }
    assert {k: rows[k] for k in expected} == expected
    # a file older than the split (v1.0.17) leaves both parts NULL
    assert _duck(
        home,
        "SELECT count(*) FROM usage WHERE session_id = 'd3ad4cdc-5657-435d-98fa-0035d53e383d' "
        "AND (cache_creation_5m_tokens IS NOT NULL OR cache_creation_1h_tokens IS NOT NULL)",
    ) == [(0,)]


def test_one_hour_writes_are_priced_at_twice_the_input(tmp_path):
    # claude-opus-4-7: $5 input, $25 output, $0.50 cache read, $6.25 5-minute and $10
    # one-hour cache write per MTok (Anthropic's list prices: 1.25x and 2x the input)
    import datetime as dt

    ts = dt.datetime(2026, 4, 18, 12, tzinfo=dt.UTC)
    [got] = priced(tmp_path / "a", [("claude-code", "claude-opus-4-7", ts, 100, 200, 3000, 5000, 0, 4000)])
    assert got == pytest.approx((100 * 5 + 200 * 25 + 3000 * 0.5 + 1000 * 6.25 + 4000 * 10) / 1e6, abs=1e-12)
    # prices.toml: a one-hour rate left out is the cache-write rate
    toml = '[models."m"]\ninput_mtok = 1\ncache_write_mtok = 2\n'
    assert priced(tmp_path / "b", [("x", "m", ts, 0, 0, 0, 10, 0, 4)], toml) == [pytest.approx(10 * 2 / 1e6)]
    toml = '[models."m"]\ninput_mtok = 1\ncache_write_1h_mtok = 3\n'
    assert priced(tmp_path / "c", [("x", "m", ts, 0, 0, 0, 10, 0, 4)], toml) == [
        pytest.approx((6 * 1 + 4 * 3) / 1e6)
    ]


def test_the_opus_day_is_priced_with_its_one_hour_writes(corpus_store):
    """DuckDB's arithmetic (flat rates) equals pricing each response with genai-prices'
    own decomposition, one-hour writes included."""
    import datetime as dt

    from genai_prices import Usage, data_snapshot

    home, _ = corpus_store
    rows = _duck(
        home,
        "SELECT ts, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, "
        "cache_creation_1h_tokens, calculated_cost_usd FROM usage WHERE model = 'claude-opus-4-7'",
    )
    assert rows
    model = data_snapshot.get_snapshot().find_provider_model("claude-opus-4-7", None, None, None)[1]
    for ts, i, o, cr, cc, h, calc in rows:
        price = model.get_prices(ts.astimezone(dt.UTC))
        want = price.calc_price(
            Usage(
                input_tokens=i + cr + cc,
                output_tokens=o,
                cache_read_tokens=cr,
                cache_write_tokens=cc,
                cache_write_1h_tokens=h or 0,
            )
        )["total_price"]
        assert calc == pytest.approx(float(want), rel=1e-9)


def _state() -> dict:
    return claude_code.init_state(SourceFile("claude-code", Path("/p/s1.jsonl")))


def test_claude_code_costusd_is_a_logged_cost():
    """Older Claude Code lines carry ``costUSD`` (ccusage's cost-modes guide)."""
    line = {
        "type": "assistant",
        "uuid": "u1",
        "sessionId": "s1",
        "timestamp": "2025-05-01T10:00:00.000Z",
        "requestId": "req_1",
        "costUSD": 0.0123,
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    }
    entries = claude_code.parse_record(line, 0, "h", _state(), "/p/s1.jsonl")
    first = next(e for e in entries if e.get("usage_key"))
    assert first["cost_usd"] == 0.0123
    assert first.get("cache_creation_1h_tokens") is None
    line["costUSD"] = "0.5"  # a cost logged as text is not trusted
    entries = claude_code.parse_record(line, 0, "h", _state(), "/p/s1.jsonl")
    assert next(e for e in entries if e.get("usage_key"))["cost_usd"] is None


def _v4(path: Path) -> None:
    c = sqlite3.connect(path)
    for col in ("cache_creation_5m_tokens", "cache_creation_1h_tokens", "cost_usd"):
        c.execute(f"ALTER TABLE usage DROP COLUMN {col}")
    c.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    c.commit()
    c.close()


def test_v4_store_gains_the_columns_without_an_fts_rebuild(tmp_path, monkeypatch):
    conn = sqlite_store.connect(tmp_path)
    with sqlite_store.write(conn):
        conn.execute(
            "INSERT INTO usage(usage_key, agent, ts, model, input_tokens) "
            "VALUES ('k', 'crush', '2025-08-09T03:11:00.000000Z', 'gpt-5', 7)"
        )
    conn.close()
    _v4(tmp_path / "store.db")

    # migration 5 touches no text (the FTS tables stay); v7 (symbol terms) rebuilds them,
    # so an upgrade from v4 rebuilds exactly once, for v7's sake
    assert [m.rebuilds_fts for m in migrations.MIGRATIONS if m.version in (5, 6)] == [False, False]
    rebuilds = []
    monkeypatch.setattr(migrations, "rebuild_fts_tables", lambda conn, **kw: rebuilds.append(conn))
    conn = sqlite_store.connect(tmp_path)
    try:
        assert sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION and len(rebuilds) == 1
        cols = [r[1] for r in conn.execute("PRAGMA table_info(usage)")]
        assert cols[-3:] == ["cache_creation_5m_tokens", "cache_creation_1h_tokens", "cost_usd"]
        assert conn.execute("SELECT usage_key, input_tokens, cost_usd FROM usage").fetchall() == [
            ("k", 7, None)
        ]
    finally:
        conn.close()


def test_a_reread_fills_what_the_stored_row_lacks(tmp_path):
    """After the upgrade the sources' new parser versions re-read the files: a row with
    the same totals fills the cost and split; a larger row replaces; a Codex key keeps
    its first tokens."""
    import polars as pl

    from ctxkeep.sinks.sqlite.load import load_batch
    from ctxkeep.transforms.normalize import usage_frame

    def batch(rows):
        frame = pl.DataFrame(
            [
                {
                    "usage_key": k,
                    "agent": a,
                    "session_id": "s",
                    "project_dir": "/p",
                    "ts": None,
                    "model": "gpt-5",
                    "input_tokens": i,
                    **dict.fromkeys(
                        ("output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"),
                        None if i is None else 0,
                    ),
                    "cache_creation_5m_tokens": None,
                    "cache_creation_1h_tokens": h,
                    "cost_usd": c,
                    "entry_id": "e",
                    "source_offset": 0,
                }
                for k, a, i, h, c in rows
            ],
            schema_overrides={
                "ts": pl.Datetime("us", "UTC"),
                "cost_usd": pl.Float64,
                "cache_creation_1h_tokens": pl.Int64,
                "cache_creation_5m_tokens": pl.Int64,
            },
        )
        return usage_frame(frame)

    conn = sqlite_store.connect(tmp_path)
    empty = pl.DataFrame()
    kw = {"entries": empty, "contents": empty, "chunks": empty, "quarantine": []}
    try:
        load_batch(
            conn, usage=batch([("a", "crush", 10, None, None), ("codex:x", "codex", 10, None, None)]), **kw
        )
        load_batch(conn, usage=batch([("a", "crush", 10, 3, 0.5), ("codex:x", "codex", 99, None, 0.2)]), **kw)
        got = conn.execute(
            "SELECT usage_key, input_tokens, cache_creation_1h_tokens, cost_usd FROM usage ORDER BY 1"
        ).fetchall()
        assert got == [("a", 10, 3, 0.5), ("codex:x", 10, None, 0.2)]
        load_batch(conn, usage=batch([("a", "crush", 20, None, None)]), **kw)  # larger: replaces tokens
        assert conn.execute(
            "SELECT input_tokens, cache_creation_1h_tokens, cost_usd FROM usage WHERE usage_key='a'"
        ).fetchall() == [(20, 3, 0.5)]
        load_batch(conn, usage=batch([("a", "crush", 30, None, 0.9)]), **kw)  # larger with a cost: new cost
        assert conn.execute("SELECT input_tokens, cost_usd FROM usage WHERE usage_key='a'").fetchall() == [
            (30, 0.9)
        ]
        # tokens unknown (a Crush session's running cost, parser v3): the stored
        # tokens (a v2 store's last-response figures) go null, the larger cost stays
        load_batch(conn, usage=batch([("a", "crush", None, None, 0.7)]), **kw)
        tok = "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens"
        assert conn.execute(f"SELECT {tok}, cost_usd FROM usage WHERE usage_key='a'").fetchall() == [
            (None, None, None, None, None, 0.9)
        ]
        load_batch(conn, usage=batch([("a", "crush", None, None, 1.25)]), **kw)  # the cost grew
        assert conn.execute(f"SELECT {tok}, cost_usd FROM usage WHERE usage_key='a'").fetchall() == [
            (None, None, None, None, None, 1.25)
        ]
    finally:
        conn.close()


def test_daily_report_uses_logged_costs_by_mode(corpus_store):
    from ctxkeep.query import reports as R

    home, _ = corpus_store
    logged = _session_costs(CRUSH)
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        by_mode = {}
        for mode in R.MODES:
            rep = R.usage_report(con, "daily", R.Filters("UTC", agents=("crush",), mode=mode))
            by_mode[mode] = sum(r.cost_usd or 0 for r in rep.rows)
    finally:
        con.close()
    assert by_mode["auto"] == pytest.approx(sum(logged.values()))
    assert by_mode["display"] == pytest.approx(sum(logged.values()))
    # Crush logs no session token totals: list prices cannot price it, calculate keeps
    # the logged cost (it priced the last response's 127,234 tokens at $0.16 before)
    assert by_mode["calculate"] == pytest.approx(sum(logged.values()))

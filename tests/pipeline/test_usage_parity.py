"""Usage per day (UTC), agent and model equals ccusage's ``daily --json --by-agent -z UTC``.

The golden file ``fixtures/ccusage/daily_by_agent_utc.json`` is ccusage 20.0.24's own
output over the shared corpus home (regenerate with
``tests/tools/regen_ccusage_golden.sh``); this test needs neither node nor network.
"""

from __future__ import annotations

import json

import duckdb

from conftest import FIXTURES

GOLDEN = FIXTURES / "ccusage" / "daily_by_agent_utc.json"
# ccusage name -> ours: every agent ccusage 20.0.24 reads. Crush and Go opencode usage
# (session totals) and Copilot's have no ccusage counterpart and are tested per source.
AGENTS = {"claude": "claude-code", "codex": "codex", "gemini": "gemini-cli", "opencode": "opencode"}

# The Codex 0.34 rollout (OpenPrintKit, 2025-11-01) logs no model anywhere (no
# turn_context before ~0.40, session_meta has none); ccusage reports it under its
# fallback "gpt-5". SQLite keeps the model as logged (NULL); DuckDB's usage names the
# version's documented default, gpt-5, with model_source 'assumed' (transforms.cost).
# Token figures are identical.
MODEL_FALLBACKS = {("2025-11-01", "codex", "gpt-5"): None}


def _golden(fallbacks: dict = MODEL_FALLBACKS) -> dict:
    out = {}
    for day in json.loads(GOLDEN.read_text())["daily"]:
        for a in day["agents"]:
            for m in a["modelBreakdowns"]:
                key = (day["period"], AGENTS[a["agent"]], m["modelName"])
                key = (key[0], key[1], fallbacks.get((day["period"], a["agent"], m["modelName"]), key[2]))
                out[key] = (
                    m["inputTokens"],
                    m["outputTokens"],
                    m["cacheReadTokens"],
                    m["cacheCreationTokens"],
                )
    return out


def _ours_duckdb(home) -> dict:
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT strftime(day, '%Y-%m-%d'), agent, model, sum(input_tokens), sum(output_tokens), "
            "sum(cache_read_tokens), sum(cache_creation_tokens) FROM daily_usage "
            "WHERE day IS NOT NULL GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    return {(d, a, m): tuple(int(x) for x in v) for d, a, m, *v in rows if a in AGENTS.values()}


def test_golden_is_ccusage_output():
    g = _golden()
    assert len(g) == 17
    assert g[("2025-12-03", "gemini-cli", "gemini-2.5-flash")] == (26701, 1036, 71622, 0)
    assert g[("2025-06-19", "opencode", "claude-3-5-sonnet-20241022")] == (100, 50, 0, 0)
    assert g[("2025-06-08", "claude-code", "claude-sonnet-4-20250514")] == (114, 16769, 3754072, 174552)
    assert g[("2025-11-01", "codex", None)] == (3402915, 223050, 59491328, 0)


def test_daily_usage_equals_ccusage(corpus_store):
    home, _ = corpus_store
    assert _ours_duckdb(home) == _golden(fallbacks={})
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        assert con.execute(
            "SELECT DISTINCT model, model_source FROM usage WHERE agent = 'codex' "
            "AND CAST(ts AS DATE) = DATE '2025-11-01'"
        ).fetchall() == [("gpt-5", "assumed")]
    finally:
        con.close()


def test_sqlite_usage_equals_ccusage(corpus_store):
    import sqlite3

    home, _ = corpus_store
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT substr(ts, 1, 10), agent, model, sum(input_tokens), sum(output_tokens), "
        "sum(cache_read_tokens), sum(cache_creation_tokens) FROM usage WHERE ts IS NOT NULL "
        "GROUP BY 1, 2, 3"
    ).fetchall()
    conn.close()
    assert {(d, a, m): tuple(v) for d, a, m, *v in rows if a in AGENTS.values()} == _golden()


def test_split_claude_response_counted_once(corpus_store):
    """d3ad4cdc… (CC 1.0.17) writes 11 of its 62 API responses over several lines that
    share message.id and requestId; each response is one usage row."""
    import sqlite3

    home, _ = corpus_store
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    n = conn.execute(
        "SELECT count(*) FROM usage WHERE session_id = 'd3ad4cdc-5657-435d-98fa-0035d53e383d'"
    ).fetchone()[0]
    lines = conn.execute(
        "SELECT count(*) FROM entries WHERE session_id = "
        "'d3ad4cdc-5657-435d-98fa-0035d53e383d' AND usage_key IS NOT NULL"
    ).fetchone()[0]
    conn.close()
    assert n == 62
    assert lines > n

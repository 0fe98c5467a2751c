"""What a search budget counts and what MCP answers without one (newuser24 F5, F6).

F5: a hit was charged its JSON form in the CLI too (~205 tokens for ~85 printed), and a
budget was split equally between the queries: ``--budget 150`` returned nothing, MCP
``budget: 300`` with 2 queries 0 hits. F6: ``ctx_search`` without a budget answered
``limit: 200`` with 97,079 characters of text plus 170,756 of structuredContent."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.mcp.server import Handlers
from ctxkeep.service.search import MCP_DEFAULT_BUDGET
from ctxkeep.service.search_core import json_tokens, text_tokens
from ctxkeep.transforms.tokens import heuristic_tokens


def test_the_cli_budget_counts_the_printed_hit(corpus_store):
    home = corpus_store[0]
    r = CliRunner().invoke(app, ["search", "turbopack", "--home", str(home), "--budget", "150", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["hits"]) >= 1, out["note"]
    assert 0 < out["used_tokens"] <= 150
    # what one hit prints, counted by the same estimate, is what it was charged
    one = CliRunner().invoke(app, ["search", "turbopack", "--home", str(home), "-n", "1"])
    printed = heuristic_tokens(one.stdout)
    first = json.loads(
        CliRunner().invoke(app, ["search", "turbopack", "--home", str(home), "-n", "1", "--json"]).stdout
    )
    assert abs(first["used_tokens"] - printed) <= 10, (first["used_tokens"], printed)


def test_mcp_budget_is_shared_in_rank_order_and_counts_json(corpus_store):
    home = corpus_store[0]
    text, sc = Handlers(home).ctx_search(
        {"queries": ["gitignore crush", "turbopack"], "limit": 2, "budget": 300}
    )
    a, b = sc["results"]
    # the best hit of the first query fits (~220 tokens of JSON); before: 0 hits for both
    assert len(a["hits"]) == 1
    assert a["used_tokens"] == json_tokens(_Hit(a["hits"][0]))
    assert a["used_tokens"] + b["used_tokens"] <= 300
    assert sc["budget_tokens"] == 300 and a["budget_tokens"] == 300
    assert "shared by 2 queries" in (b["note"] or a["note"])
    assert "counted as the hits' JSON, what an MCP client gives the model" in text


def test_mcp_search_without_a_budget_gets_the_default_and_a_note(corpus_store):
    home = corpus_store[0]
    text, sc = Handlers(home).ctx_search({"queries": ["error"], "limit": 200})
    (q,) = sc["results"]
    assert q["budget_tokens"] == MCP_DEFAULT_BUDGET == 4_000
    assert q["omitted"] > 0 and 0 < q["used_tokens"] <= MCP_DEFAULT_BUDGET
    assert "ctx_search's default budget of 4,000 tokens spent" in q["note"]
    assert 'pass "budget" (up to 200,000) for more' in q["note"]
    # the structured hits are about what was charged; the text is smaller still
    hits_chars = len(json.dumps(q["hits"], ensure_ascii=False))
    assert hits_chars <= 4 * MCP_DEFAULT_BUDGET + 8 * len(q["hits"])
    assert len(text) < hits_chars
    _, more = Handlers(home).ctx_search({"queries": ["error"], "limit": 200, "budget": 200_000})
    assert len(more["results"][0]["hits"]) > len(q["hits"])
    assert more["results"][0]["note"] is None or "budget" not in more["results"][0]["note"]


class _Hit:
    """A structured hit read back as the attributes ``json_tokens`` renders."""

    def __init__(self, d: dict) -> None:
        self.__dict__.update(d)


def test_text_tokens_are_below_json_tokens(corpus_store):
    home = corpus_store[0]
    _, sc = Handlers(home).ctx_search({"queries": ["turbopack"], "limit": 3, "budget": 200_000})
    for d in sc["results"][0]["hits"]:
        h = _Hit(d)
        assert text_tokens(h) * 2 < json_tokens(h)


def test_mcp_wording_no_fetch_hint_without_hits_and_plurals(corpus_store):
    """newuser24 F17 (a search with 0 hits ended with the ctx_fetch hint), F18
    (``1 sessions``)."""
    home = corpus_store[0]
    h = Handlers(home)
    none, _ = h.ctx_search({"queries": ["zzqxnosuchwordzzqx"]})
    assert "ctx_fetch" not in none
    some, _ = h.ctx_search({"queries": ["turbopack"], "limit": 1})
    assert some.endswith('(fetch full texts with ctx_fetch {"ids": [...]})')
    text, sc = h.ctx_stats({})
    for agent, d in sc["agents"].items():
        if d["sessions"] == 1:
            assert f"- {agent}: " in text and ", 1 session (" in text
    assert ", 1 sessions" not in text

"""The MCP server (``ctxkeep mcp``) driven by a real MCP client session over stdio
(mcp.client.stdio): tool list, search, fetch, stats, index, lenient inputs, errors."""

from __future__ import annotations

import shutil
import sys

import anyio
import pytest

pytestmark = pytest.mark.slow  # spawns the server process


@pytest.fixture(scope="module")
def mcp_home(corpus_store, tmp_path_factory):
    src, _ = corpus_store
    dst = tmp_path_factory.mktemp("mcp") / "home"
    shutil.copytree(src, dst)
    return dst


def run_session(home, calls, cwd=None):
    """Start ``ctxkeep mcp --home HOME`` and make ``calls`` [(tool, args)] in one
    client session. Returns (tool names, [CallToolResult])."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main():
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "ctxkeep", "mcp", "--home", str(home)],
            cwd=str(cwd) if cwd else None,
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            tools = await s.list_tools()
            out = [await s.call_tool(name, args) for name, args in calls]
            return tools.tools, out

    return anyio.run(main)


def test_tools_search_fetch_stats(mcp_home):
    tools, (search, search2, fetch_r, stats) = run_session(
        mcp_home,
        [
            ("ctx_search", {"queries": ["python: command not found"], "limit": 3}),
            (
                "ctx_search",
                {
                    "queries": '["QT_QPA_PLATFORM=xcb", "Not on a feature branch"]',
                    "limit": "2",
                    "budget": "3000",
                    "raw": "false",
                    "filters": {"agent": "codex"},
                },
            ),
            ("ctx_fetch", {"ids": "PLACEHOLDER"}),
            ("ctx_stats", {}),
        ],
    )
    by_name = {t.name: t for t in tools}
    assert {"ctx_search", "ctx_fetch", "ctx_stats", "ctx_index"} <= set(by_name)
    for t in tools:
        assert t.input_schema["type"] == "object"
        assert "WHEN:" in t.description and "WHEN NOT:" in t.description
        assert not any(k in t.input_schema for k in ("oneOf", "anyOf", "allOf"))
    assert not search.is_error
    hits = search.structured_content["results"][0]["hits"]
    assert hits[0]["session_id"].startswith("019a802a") and "python: command not found" in hits[0]["snippet"]
    assert "python: command not found" in search.content[0].text
    r2 = search2.structured_content["results"]
    assert [len(r["hits"]) for r in r2] == [2, 2]
    assert all(h["agent"] == "codex" for r in r2 for h in r["hits"])
    assert fetch_r.is_error and "PLACEHOLDER" in fetch_r.content[0].text
    s = stats.structured_content
    assert s["agents"]["codex"]["entries"] > 2000 and s["agents"]["claude-code"]["entries"] > 900
    assert "entries" in stats.content[0].text


def test_fetch_with_budget_and_marker(mcp_home):
    import sqlite3

    c = sqlite3.connect(f"file:{mcp_home}/store.db?mode=ro", uri=True)
    eid, n = c.execute("SELECT entry_id, text_bytes FROM entries ORDER BY text_bytes DESC LIMIT 1").fetchone()
    c.close()
    _, (full, cut, cont) = run_session(
        mcp_home,
        [
            ("ctx_fetch", {"ids": [eid[:12]], "budget": 200000}),
            ("ctx_fetch", {"ids": [eid], "budget": 300}),
            ("ctx_fetch", {"ids": [eid], "budget": 300, "offset": "1000"}),
        ],
    )
    e = full.structured_content["entries"][0]
    assert e["entry_id"] == eid and e["bytes"] == n and not e["truncated"]
    e = cut.structured_content["entries"][0]
    assert e["truncated"] and f"ctxkeep show {eid} --offset" in e["text"] and e["elided_bytes"] > n - 2000
    e = cont.structured_content["entries"][0]
    assert e["offset"] == 1000 and e["next_offset"] > 1000


def test_index_then_search_then_replace(mcp_home, tmp_path):
    note = tmp_path / "decision.md"
    note.write_text(
        "# Decision\nWe keep the 字段 mapping in zebrafish.toml, not in code.\n", encoding="utf-8"
    )
    _, (idx, found, again, gone, rel) = run_session(
        mcp_home,
        [
            ("ctx_index", {"label": "decisions", "path": str(note)}),
            ("ctx_search", {"queries": ["zebrafish.toml"], "filters": {"agent": "note"}}),
            ("ctx_index", {"label": "decisions", "text": "Superseded: mapping moved to axolotl.yaml"}),
            ("ctx_search", {"queries": ["zebrafish", "字段"], "filters": {"agent": "note"}}),
            ("ctx_index", {"label": "rel", "path": "decision.md"}),
        ],
        cwd=tmp_path,
    )
    assert not idx.is_error and idx.structured_content["replaced"] == 0
    hits = found.structured_content["results"][0]["hits"]
    assert [(h["session_id"], h["entry_id"]) for h in hits] == [
        ("decisions", idx.structured_content["entry_id"])
    ]
    assert again.structured_content["replaced"] == 1 and again.content[0].text.startswith("replaced note")
    assert [r["hits"] for r in gone.structured_content["results"]] == [[], []]
    assert not rel.is_error and rel.structured_content["source_path"] == str(note)


BAD_CALLS = [
    ("ctx_search", {"queries": ["x"], "limit": -1}, "limit -1 is out of range"),
    ("ctx_search", {"queries": ["x"], "limit": "lots"}, "limit must be a whole number"),
    ("ctx_search", {"queries": []}, "queries is required"),
    ("ctx_search", {"queries": "[broken"}, "not a valid JSON array"),
    ("ctx_search", {"queries": ["x"], "filters": {"colour": "red"}}, "unknown filter colour"),
    ("ctx_search", {"queries": ["x"], "filters": {"kind": "bogus"}}, "unknown kind 'bogus'"),
    ("ctx_search", {"queries": ["foo AND"], "raw": "true"}, "FTS5 syntax error"),
    ("ctx_search", {"queries": ["x"], "raw": "maybe"}, "raw must be true or false"),
    ("ctx_fetch", {"ids": []}, "ids is required"),
    ("ctx_index", {"label": "x"}, "exactly one of text and path"),
    ("ctx_nope", {}, "unknown tool ctx_nope"),
]


def test_bad_arguments_are_one_line_tool_errors(mcp_home):
    _, results = run_session(mcp_home, [(tool, args) for tool, args, _ in BAD_CALLS])
    for (tool, args, msg), r in zip(BAD_CALLS, results, strict=False):
        assert r.is_error, (tool, args)
        assert msg in r.content[0].text and "\n" not in r.content[0].text, (tool, args, r.content[0].text)


def test_filters_beside_filters_are_read_with_a_note(mcp_home):
    _, (r, bad) = run_session(
        mcp_home,
        [
            ("ctx_search", {"queries": ["error"], "agent": "codex", "kind": "tool_result"}),
            ("ctx_search", {"queries": ["error"], "agent": "codex", "filters": {"agent": "gemini-cli"}}),
        ],
    )
    assert not r.is_error
    hits = r.structured_content["results"][0]["hits"]
    assert hits and all(h["agent"] == "codex" and h["kind"] == "tool_result" for h in hits)
    assert r.structured_content["notes"] == ['read agent, kind as filters (they belong inside "filters")']
    assert bad.is_error and "given twice with different values" in bad.content[0].text


def test_absurd_limit_is_clamped_with_a_note(mcp_home):
    _, (r,) = run_session(mcp_home, [("ctx_search", {"queries": ["the"], "limit": 100000, "budget": 100000})])
    assert not r.is_error and "limit 100000 clamped to 200" in r.structured_content["notes"]
    assert len(r.structured_content["results"][0]["hits"]) <= 200


def test_purge_contract_over_stdio(mcp_home, tmp_path):
    """ctx_purge (maintenance.purge): the seed's contract, then a
    real session purge that is idempotent and reports the resolved scope."""
    import sqlite3

    home = tmp_path / "home"
    shutil.copytree(mcp_home, home)
    sid = "0d3a8e6f-290f-4105-a327-a2496e5e2a83"
    c = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    n = c.execute("SELECT count(*) FROM entries WHERE session_id = ?", (sid,)).fetchone()[0]
    c.close()
    assert n > 50
    tools, res = run_session(
        home,
        [
            ("ctx_purge", {"sessionId": sid, "confirm": False}),
            ("ctx_purge", {"sessionId": sid, "confirm": "false"}),
            ("ctx_purge", {"sessionId": sid, "scope": "project", "confirm": True}),
            ("ctx_purge", {"scope": "session", "confirm": True}),
            ("ctx_purge", {"confirm": True}),
            ("ctx_purge", {"sessionId": sid}),
            ("ctx_search", {"queries": ["timeline filtering"], "filters": {"session": sid}}),
            ("ctx_purge", {"sessionId": sid, "confirm": "true"}),
            ("ctx_purge", {"sessionId": sid, "confirm": True}),
            ("ctx_search", {"queries": ["timeline filtering"], "filters": {"session": sid}}),
        ],
    )
    assert "ctx_purge" in {t.name for t in tools}
    cancel, cancel_s, ambiguous, no_id, bare, no_confirm, before, first, again, after = res
    assert cancel.content[0].text == "Purge cancelled. Pass confirm: true to proceed."
    assert cancel_s.content[0].text == cancel.content[0].text
    assert ambiguous.is_error and ambiguous.content[0].text.startswith("error: Ambiguous purge")
    assert no_id.is_error and "session id" in no_id.content[0].text
    assert bare.is_error and "session" in bare.content[0].text and "project" in bare.content[0].text
    # not confirmed has one shape: the cancelled reply (newuser24 F16)
    assert not no_confirm.is_error and no_confirm.structured_content["cancelled"] is True
    assert no_confirm.content[0].text.startswith("Purge cancelled: no confirm was given.")
    assert before.structured_content["results"][0]["hits"]
    assert not first.is_error and first.structured_content["removed"]["entries"] == n
    assert first.structured_content["scope"] == "session" and sid in first.structured_content["resolved"]
    assert not again.is_error and again.structured_content["removed"]["entries"] == 0
    # the purged session is gone: a filter naming it says so (``lookup.resolve_session``)
    assert after.is_error and f"no such session {sid}" in after.content[0].text


def test_a_damaged_page_read_mid_call_is_the_damaged_store_line(corpus_store, tmp_path):
    """Random bytes in the middle of store.db pass the cheap check on open; a tool that
    reads a damaged page answers with the CLI's one line, not "internal error"."""
    import random

    home = tmp_path / "home"
    shutil.copytree(corpus_store[0], home)
    db = home / "store.db"
    size = db.stat().st_size
    rng = random.Random(11)
    with open(db, "r+b") as f:  # pages 25 %..75 % of the file; page 1 (the header) intact
        f.seek(size // 4 // 4096 * 4096)
        f.write(rng.randbytes(size // 2 // 4096 * 4096))
    _, (stats,) = run_session(home, [("ctx_stats", {})])
    text = stats.content[0].text
    assert stats.is_error and text.startswith("error: store.db is damaged (") and "ctxkeep doctor" in text
    assert "internal error" not in text

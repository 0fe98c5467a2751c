"""Session listing and conversations (query.sessions) on the corpus store. Expected
counts were read from the corpus JSONL by hand (python json), as the comments say."""

from __future__ import annotations

import sqlite3

import pytest

from ctxkeep.errors import SessionNotFound
from ctxkeep.query.sessions import conversation, error_flag, list_sessions, resolve_session, short_ids

CLAUDE = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
SUB = "agent-a4ca7529859c158c2"


@pytest.fixture(scope="module")
def conn(corpus_store):
    c = sqlite3.connect(f"file:{corpus_store[0] / 'store.db'}?mode=ro", uri=True)
    yield c
    c.close()


def test_short_ids():
    assert short_ids(["abcd1", "abcd2", "xyz9999", "ab"]) == {
        "abcd1": "abcd1",
        "abcd2": "abcd2",
        "xyz9999": "xyz9",
        "ab": "ab",
    }


@pytest.mark.parametrize("analytics", [True, False])
def test_list_sessions(conn, corpus_store, analytics):
    rows, source = list_sessions(conn, corpus_store[0] if analytics else None)
    assert source == ("duckdb" if analytics else "sqlite")
    ids = [r.session_id for r in rows]
    assert (
        len(ids)
        == len(set(ids))
        == conn.execute("SELECT count(DISTINCT session_id) FROM entries").fetchone()[0]
    )
    parent = {r.session_id: r.parent_session_id for r in rows}
    for r in rows:  # a shown prefix names its session and its own sidechains only (or is
        # the whole id, when it is the prefix of another id: aider-0b47469a-1 and -1549)
        if r.session_id.startswith(r.short_id):
            named = [i for i in ids if i.startswith(r.short_id) and parent[i] != r.session_id]
            assert named == [r.session_id] or r.short_id == r.session_id
        else:  # a sidechain: <its parent's shown id>/<the rest of its id>
            short = {x.session_id: x.short_id for x in rows}[r.parent_session_id]
            assert r.short_id.startswith(short + "/")
            assert r.session_id.startswith(r.parent_session_id + "/" + r.short_id[len(short) + 1 :])
        assert resolve_session(conn, r.short_id) == r.session_id
    i = ids.index(CLAUDE)
    main, sub = rows[i], rows[i + 1]
    assert sub.session_id == SUB and sub.depth == 1 and sub.parent_session_id == CLAUDE
    # main file: 40 tool_use blocks; first prompt "OK, we're going to make …"
    assert main.tool_calls == 40 and main.title.startswith("OK, we're going to make a little experiment")
    assert main.started.startswith("2026-04-18T13:10") and main.ended.startswith("2026-04-18T15:09")
    assert main.tokens > 0
    assert (main.cost_usd is not None) == analytics
    assert [r.agent for r in list_sessions(conn, None, agents=["codex"])[0]] == ["codex"] * 6
    only = list_sessions(conn, None, project="/home/randy/projects/python-3/OpenPrintKit")[0]
    # the two rollouts of 2025-10-31 whose session_meta cwd is OpenPrintKit
    assert {r.session_id[:8] for r in only} == {"c61729d4", "fa1ac8bf"}
    assert not list_sessions(conn, None, since="2030-01-01T00:00:00.000000Z")[0]


def test_the_duckdb_index_reads_first_prompts_only_where_it_lacks_a_title(conn, corpus_store, monkeypatch):
    """The DuckDB session index reads SQLite's first prompts only for the sessions
    without a usable DuckDB title (``prompt_text`` of it is None): its titles are the
    ones it gave reading every session's prompt."""
    from ctxkeep.query import sessions as qs

    narrow, source = list_sessions(conn, corpus_store[0])
    assert source == "duckdb"
    asked: list = []
    full = qs._first_prompts

    def every(c, sessions=None):
        asked.append(sessions)
        return full(c)

    monkeypatch.setattr(qs, "_first_prompts", every)
    wide, _ = list_sessions(conn, corpus_store[0])
    assert [(r.session_id, r.title) for r in narrow] == [(r.session_id, r.title) for r in wide]
    assert asked and 0 < len(asked[0]) < len(wide)  # some sessions, not all
    some = sorted({sid for _agent, sid in full(conn)})[::2]
    assert full(conn, some) == {k: v for k, v in full(conn).items() if k[1] in some}
    assert full(conn, []) == {}


def test_conversation_in_order_with_folded_tool_calls(conn):
    conv = conversation(conn, "ef958aa1", subagents=True)
    turns = conv.turns
    assert turns[0].role == "user" and turns[0].text.startswith("OK, we're going to make a little experiment")
    calls = [t for t in turns if t.kind == "tool_call"]
    # 40 tool_use blocks in the main file + 24 in the sub-agent's, each with its result
    assert len(calls) == 64 and all(t.result_bytes is not None for t in calls)
    assert not any(t.kind == "tool_result" for t in turns)
    # the sub-agent's WebFetch of claudelog.com: is_error, content "Request failed with status code 403"
    bad = [t for t in calls if t.result_error]
    assert [t.tool_name for t in bad] == ["WebFetch"] and "claudelog.com" in bad[0].text
    assert bad[0].result_bytes == len(b"[error] Request failed with status code 403")
    kind = conn.execute("SELECT kind FROM entries WHERE entry_id = ?", (bad[0].result_entry_id,)).fetchone()
    assert kind == ("tool_result",)
    ts = [t.ts for t in turns if t.session_id == CLAUDE]
    assert ts == sorted(ts)


def test_compaction_boundaries_are_marked(conn):
    # claude-code/…/small.jsonl: a system compact_boundary line (uuid s4) and the
    # isCompactSummary user line (uuid u3, on the file's sidechain)
    conv = conversation(conn, "ses_stage0_small", subagents=True)
    marks = [t for t in conv.turns if t.kind == "compaction"]
    assert len(marks) == 2 and all("compacted" in t.text for t in marks)


def test_conversation_budget(conn):
    conv = conversation(conn, "c61729d4", budget=400)
    assert sum(t.tokens for t in conv.turns) <= 400
    assert conv.omitted > 0 and "without --budget" in conv.note
    assert conv.turns[0].text == "Can we continue from where we left off?"


def test_errors_and_flags(conn):
    with pytest.raises(SessionNotFound):
        resolve_session(conn, "ab")
    with pytest.raises(SessionNotFound):
        resolve_session(conn, "nope-nope")
    assert error_flag("[error] boom") and error_flag("Exit code: 2\nWall time: 1s")
    assert not error_flag("Exit code: 0\nok") and not error_flag("all good")


def test_conversation_project_from_a_row_that_names_one(conn):
    """Session fe5e... opens with a ``summary`` record, which names no cwd; its messages
    carry ``"cwd": "/path/to/Demo"`` (read from its JSONL): the conversation's project
    (``show --session``'s header and ``--json``) is that, not None."""
    conv = conversation(conn, "fe5e")
    assert conv.turns[0].kind == "summary" and conv.project_dir == "/path/to/Demo"


def test_a_session_of_records_only_lists_them(conn):
    """Aider's .aider.input.history is stored as meta entries of the pseudo-session
    aider-input:<project> (sources.aider): its conversation lists those records (8 in
    the corpus: the prompts typed, in order) and says what the session is, instead
    of a bare header."""
    from ctxkeep.query.sessions import META_ONLY_NOTE

    sid = resolve_session(conn, "aider-i")
    assert sid.startswith("aider-input:")
    conv = conversation(conn, "aider-i")
    assert len(conv.turns) == 8
    assert {(t.kind, t.tool_name, t.role) for t in conv.turns} == {("meta", "input_history", "user")}
    assert [t.text for t in conv.turns[:2]] == ["N", "/add **"]
    assert conv.turns[4].text.startswith("/copy-context 请你分析一下我这列的处理")
    assert conv.note == META_ONLY_NOTE
    # a conversation with messages still leaves its meta records out
    assert all(t.kind != "meta" for t in conversation(conn, "ef958aa1").turns)


@pytest.mark.parametrize("analytics", [True, False])
def test_a_time_filter_leaves_out_sessions_without_a_time(conn, corpus_store, analytics):
    """A session no record of which carries a time (a Claude Code file of summary or
    snapshot records only) cannot be placed in a period: `sessions --until 2025-01-01`
    listed the corpus' undated ones though they started in no such period."""
    home = corpus_store[0] if analytics else None
    every = list_sessions(conn, home)[0]
    undated = {r.session_id for r in every if r.started is None and r.ended is None}
    assert undated  # the corpus holds some
    dated = [r for r in every if r.started is not None]
    first, last = min(r.started for r in dated), max(r.ended or r.started for r in dated)
    assert not list_sessions(conn, home, until="2000-01-01T00:00:00.000000Z")[0]
    # a window holding every dated session: every one of them, none undated
    wide = list_sessions(conn, home, since=first, until="2100-01-01T00:00:00.000000Z")[0]
    assert {r.session_id for r in wide} == {r.session_id for r in dated}
    assert {r.session_id for r in list_sessions(conn, home, until=last)[0]} & undated == set()
    # without a time filter they are listed
    assert undated <= {r.session_id for r in every}

"""Hermes: handmade transcripts (JSONL and JSON) and a ``state.db`` (format facts in
ctxkeep/sources/hermes.py) read into prompts, reasoning, OpenAI tool calls answered by
``tool`` messages, a compaction summary, sub-agent sessions under their parent, titles
and per-session usage with its cost; beside the database only the transcripts of
sessions it lacks are read; discovery through ``$HERMES_SESSIONS_DIR``; appended lines and new database
rows arrive once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import hermes
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import writable_copy
from helpers_sources import ENTRY_TEXT, kinds

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hermes"
JSONL = "20260901_100000_ab12cd"


def test_transcripts_tool_loop_and_compaction(tmp_path):
    store = tmp_path / "store"
    home = writable_copy(FIXTURES / "home", tmp_path / "home")
    s = ingest(home, store, agents="hermes")
    assert s.files_read == 2 and s.quarantined == 0
    assert kinds(store, "hermes") == {
        "system/meta": 1,
        "user/message": 2,
        "assistant/thinking": 1,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/summary": 1,
        "assistant/message": 2,
    }
    assert q(
        store,
        f"SELECT kind, native_id, tool_name, model, {ENTRY_TEXT} FROM entries e WHERE agent='hermes' "
        "AND session_id=? AND kind IN ('tool_call', 'tool_result', 'thinking') ORDER BY rowid",
        JSONL,
    ) == [
        ("thinking", None, None, "hermes-4-70b", "Query the CI API, then the logs."),
        ("tool_call", "call_a", "terminal", "hermes-4-70b", '{"command":"gh run list --status failure"}'),
        ("tool_call", "call_b", "read_file", "hermes-4-70b", '{"path":".github/workflows/ci.yml"}'),
        ("tool_result", "call_a", None, None, "lint  failure  main"),
        ("tool_result", "call_b", None, None, "jobs: lint, test"),
    ]
    assert q(
        store,
        f"SELECT session_id, {ENTRY_TEXT}, strftime('%Y-%m-%dT%H:%M:%S', ts) FROM entries e WHERE agent='hermes' "
        "AND role='user' ORDER BY ts",
    ) == [
        (JSONL, "List the failing CI jobs", "2026-09-01T10:00:01"),
        ("20260902_080000_ef34gh", "Remind me what Hermes is", "2026-09-02T08:00:00"),
    ]
    assert q(store, "SELECT count(*) FROM usage WHERE agent='hermes'") == [(0,)]
    line = '{"role":"user","content":"And on the release branch?","timestamp":"2026-09-01T10:06:00+00:00"}\n'
    with (home / ".hermes/sessions" / f"{JSONL}.jsonl").open("a") as f:
        f.write(line)
    assert ingest(home, store, agents="hermes").entries_new == 1


def test_state_db_subagent_usage_and_new_rows(tmp_path):
    home = writable_copy(FIXTURES / "db-home", tmp_path / "home")
    env = {"HERMES_SESSIONS_DIR": str(home / ".hermes/sessions")}
    found = hermes.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    # the parent's transcript repeats the database; the older session's is read
    assert [(f.path.name, f.mode) for f in found] == [
        ("state.db", "sqlite"),
        ("20260801_070000_old.jsonl", "append"),
    ]
    store = tmp_path / "store"
    s = ingest(tmp_path / "nohome", store, agents="hermes", env=env)
    assert s.quarantined == 0
    assert q(
        store,
        f"SELECT session_id, parent_session_id, role, kind, native_id, tool_name, {ENTRY_TEXT} FROM entries e "
        "WHERE agent='hermes' AND kind != 'meta' ORDER BY ts",
    ) == [
        ("20260801_070000_old", None, "user", "message", None, None, "An older question"),
        ("parent", None, "user", "message", None, None, "Is the deploy healthy?"),
        ("parent", None, "assistant", "thinking", None, None, "Delegate log reading."),
        ("parent", None, "assistant", "tool_call", "call_1", "delegate_task", '{"goal":"read the logs"}'),
        ("child", "parent", "user", "message", None, None, "read the logs"),
        ("child", "parent", "assistant", "message", None, None, "No errors in the last hour."),
        ("parent", None, "tool", "tool_result", "call_1", "delegate_task", "No errors in the last hour."),
        ("parent", None, "assistant", "message", None, None, "The deploy is healthy."),
    ]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, "
        "reasoning_tokens, cost_usd FROM usage WHERE agent='hermes' ORDER BY session_id",
    ) == [
        ("child", "gpt-5.4-mini", 300, 70, 20, 5, 9, 0.0031),
        ("parent", "claude-sonnet-4-5", 1500, 200, 4000, 300, 0, 0.042),
    ]
    assert q(
        store,
        f"SELECT session_id, {ENTRY_TEXT} FROM entries e WHERE agent='hermes' AND tool_name='title' ORDER BY 1",
    ) == [("child", "Read the logs"), ("parent", "Deploy check")]
    c = sqlite3.connect(home / ".hermes/state.db")
    c.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('parent', 'user', 'Thanks', 1788000200.0)"
    )
    c.commit()
    c.close()
    assert ingest(tmp_path / "nohome", store, agents="hermes", env=env).entries_new == 1
    assert ingest(tmp_path / "nohome", store, agents="hermes", env=env).entries_new == 0


def test_empty_home_says_where_it_looked(tmp_path):
    d = hermes.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".hermes/sessions" in (d.reason or "")

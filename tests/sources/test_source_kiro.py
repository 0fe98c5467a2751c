"""Kiro CLI: the current ``data.sqlite3`` store and a legacy JSONL session, both
handmade (format facts in ctxkeep/sources/kiro.py), read into prompts, answers, tool
calls and their results (an ``Error`` status marked), with times from the turns;
discovery through ``$KIRO_SESSIONS_DIR``; a rewritten conversation row and appended
lines read incrementally."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import kiro
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import fixture_home
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "kiro" / "home"
CID = "5d1c2e3f-4a5b-4c6d-8e7f-90a1b2c3d4e5"
OLD = "0b9a8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d"


def test_both_generations_messages_tool_calls_and_results(tmp_path):
    store = tmp_path / "store"
    home = fixture_home("kiro", tmp_path / "home")
    s = ingest(home, store, agents="kiro")
    assert s.files_read == 3 and s.quarantined == 0  # with the legacy session's .json (a sidecar)
    assert kinds(store, "kiro") == {
        "user/message": 3,
        "assistant/message": 5,
        "assistant/tool_call": 3,
        "tool/tool_result": 3,
        "system/meta": 1,
    }
    assert q(
        store,
        f"SELECT session_id, native_id, tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='kiro' "
        "AND kind='tool_call' ORDER BY session_id, native_id",
    ) == [
        (
            OLD,
            "tu-9",
            "write",
            '{"command":"strReplace","path":"client.py","oldStr":"fetch","newStr":"load"}',
        ),
        (CID, "tooluse_a1", "fs_read", '{"path":"db/schema.sql"}'),
        (CID, "tooluse_b2", "execute_bash", '{"command":"pytest -q"}'),
    ]
    assert q(
        store,
        f"SELECT native_id, {ENTRY_TEXT}, strftime('%H:%M:%S', ts) FROM entries e WHERE agent='kiro' "
        "AND kind='tool_result' ORDER BY session_id, native_id",
    ) == [
        ("tu-9", "ok", "10:00:00"),
        ("tooluse_a1", "CREATE TABLE payments (id INTEGER);", "08:01:20"),
        ("tooluse_b2", '[error] {"exit_status":"1","stdout":"1 failed"}', "08:01:20"),
    ]
    # answers take the turn's stream end time; the project is the row's key / the companion's cwd
    assert q(
        store,
        f"SELECT {ENTRY_TEXT}, strftime('%H:%M:%S', ts), project_dir FROM entries e WHERE agent='kiro' "
        "AND role='assistant' AND kind='message' AND session_id=? ORDER BY ts",
        CID,
    ) == [
        ("It records payments.", "08:00:05", "/home/dev/ledger"),
        ("Reading the schema.", "08:01:10", "/home/dev/ledger"),
        ("One test fails: test_refund.", "08:01:40", "/home/dev/ledger"),
    ]
    assert q(store, "SELECT DISTINCT project_dir FROM entries WHERE agent='kiro' AND session_id=?", OLD) == [
        ("/home/dev/weather",)
    ]
    assert q(store, "SELECT tool_name FROM entries WHERE agent='kiro' AND kind='meta'") == [("title",)]
    # the format logs no token usage
    assert q(store, "SELECT count(*) FROM usage WHERE agent='kiro'") == [(0,)]


def test_env_dir_rewritten_row_and_appended_lines_read_once(tmp_path):
    home = fixture_home("kiro", tmp_path / "home")
    root = home / ".local" / "share" / "kiro-cli"
    env = {"KIRO_SESSIONS_DIR": str(root)}
    found = kiro.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert [(f.path.name, f.mode) for f in found] == [("data.sqlite3", "sqlite")]
    store = tmp_path / "store"
    assert ingest(home, store, agents="kiro").entries_new == 15
    db = root / "data.sqlite3"
    c = sqlite3.connect(db)
    value = json.loads(c.execute("SELECT value FROM conversations_v2").fetchone()[0])
    value["history"].append(
        {
            "user": {"content": {"Prompt": {"prompt": "Fix it"}}, "timestamp": "2026-06-02T08:05:00Z"},
            "assistant": {"Response": {"message_id": "m-4", "content": "Fixed."}},
            "request_metadata": {"stream_end_timestamp_ms": 1780387520000},
        }
    )
    c.execute("UPDATE conversations_v2 SET value=?, updated_at=?", (json.dumps(value), 1780387520000))
    c.commit()
    c.close()
    with (home / ".kiro/sessions/cli" / f"{OLD}.jsonl").open("a") as f:
        f.write('{"kind":"Prompt","data":{"content":[{"kind":"text","data":"Thanks"}]}}\n')
    assert ingest(home, store, agents="kiro").entries_new == 3
    assert ingest(home, store, agents="kiro").entries_new == 0
    assert q(
        store,
        f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='kiro' AND role='user' ORDER BY ts DESC LIMIT 2",
    ) == [("Fix it",), ("Show me the schema and run the tests",)]


def test_empty_home_says_where_it_looked(tmp_path):
    d = kiro.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".kiro/sessions/cli" in (d.reason or "")
    assert [p.relative_to(tmp_path).as_posix() for p in d.searched] == [
        ".kiro/sessions/cli",
        ".local/share/kiro-cli",
        "Library/Application Support/kiro-cli",
    ]

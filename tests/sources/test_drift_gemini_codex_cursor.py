"""Format drift of Gemini CLI, Codex and Cursor (issue 25, item 2): Gemini messages
without an ``id``; Codex items without ``payload.type``, pre-envelope rollouts and
``info.model``; Cursor ``tool_call`` blocks. Fixtures: tests/fixtures/drift (README.md
there names the sources)."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT

FIX = Path(__file__).parent.parent / "fixtures" / "drift"


def test_gemini_messages_without_an_id_are_kept(tmp_path, store_home):
    home = tmp_path / "home"
    shutil.copytree(FIX / "gemini", home / ".gemini")
    ingest(home, store_home, "gemini-cli")
    rows = q(
        store_home,
        f"SELECT session_id, role, {ENTRY_TEXT} FROM entries e WHERE kind = 'message' ORDER BY ts",
    )
    assert rows == [
        ("9f0e1d2c-0000-4000-8000-000000000001", "user", "list the files"),
        ("9f0e1d2c-0000-4000-8000-000000000001", "assistant", "There are 3 files."),
        ("9f0e1d2c-0000-4000-8000-000000000001", "user", "thanks"),
        ("9f0e1d2c-0000-4000-8000-000000000002", "user", "what changed?"),
        ("9f0e1d2c-0000-4000-8000-000000000002", "assistant", "Two files changed."),
    ]
    # read again after a rewrite that changes nothing of them: stored once
    p = next((home / ".gemini").rglob("*.json"))
    p.write_text(p.read_text() + "\n")
    assert ingest(home, store_home, "gemini-cli").entries_new == 0


def _codex(tmp_path: Path, store_home: Path):
    home = tmp_path / "home"
    shutil.copytree(FIX / "codex", home / ".codex")
    return ingest(home, store_home, "codex")


def test_codex_pre_envelope_rollouts_are_read(tmp_path, store_home):
    _codex(tmp_path, store_home)
    sid = "c3c4b301-27c8-4c70-b6e4-46b99fdf0236"
    rows = q(
        store_home,
        f"SELECT role, kind, tool_name, project_dir, ts, {ENTRY_TEXT} FROM entries e "
        "WHERE session_id = ? AND kind <> 'meta' ORDER BY source_offset",
        sid,
    )
    assert [(r, k, t) for r, k, t, *_ in rows] == [
        ("user", "message", None),
        ("assistant", "thinking", None),
        ("assistant", "tool_call", "shell"),
        ("tool", "tool_result", None),
        ("assistant", "message", None),
    ]
    assert [x[5] for x in rows] == [
        "run the tests",
        "I should run pytest.",
        "pytest -q",
        "3 passed",
        "All 3 tests pass.",
    ]
    # the cwd from the environment context; the header's timestamp for lines without one
    assert {x[3] for x in rows} == {"/work/legacy-app"} and {x[4] for x in rows} == {
        "2025-09-02T17:17:41.762000Z"
    }
    # the state lines are bookkeeping: nothing stored, nothing quarantined
    assert q(store_home, "SELECT count(*) FROM quarantine") == [(0,)]


def test_codex_items_without_payload_type_and_info_model(tmp_path, store_home):
    _codex(tmp_path, store_home)
    sid = "019c0000-aaaa-7bbb-8ccc-000000000001"
    rows = q(
        store_home,
        f"SELECT role, kind, tool_name, {ENTRY_TEXT} FROM entries e "
        "WHERE session_id = ? AND kind <> 'meta' ORDER BY source_offset",
        sid,
    )
    assert rows == [
        ("user", "message", None, "count the lines"),
        ("assistant", "tool_call", "shell", "wc -l a.txt"),
        ("tool", "tool_result", None, "42 a.txt"),
        ("assistant", "message", None, "a.txt has 42 lines."),
    ]
    usage = q(
        store_home,
        "SELECT model, input_tokens, cache_read_tokens, output_tokens FROM usage WHERE session_id = ?",
        sid,
    )
    assert usage == [("gpt-5.2-codex", 1000, 200, 80)]


def test_cursor_tool_call_blocks_are_read(tmp_path, store_home):
    home = tmp_path / "home"
    shutil.copytree(FIX / "cursor", home / ".cursor")
    ingest(home, store_home, "cursor")
    rows = q(
        store_home,
        f"SELECT kind, tool_name, native_id, {ENTRY_TEXT} FROM entries e "
        "WHERE kind IN ('tool_call', 'tool_result') ORDER BY source_offset, kind",
    )
    assert rows == [
        ("tool_call", "read", "call_r1", '{"path":"note.txt"}'),
        ("tool_result", "read", "call_r1", '{"success":{"content":"banana"}}'),
        ("tool_call", "shell", None, '{"command":"ls"}'),
        ("tool_result", "shell", None, "note.txt"),
    ]

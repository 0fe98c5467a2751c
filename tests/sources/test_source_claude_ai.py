"""The Claude.ai data export: a handmade ``conversations.json`` (format facts in
ctxkeep/sources/claude_ai.py) imported with ``--path``: content blocks (text, thinking,
a tool use and its result; a token budget skipped), an attachment's extracted text and
a file as meta, a text-only older conversation, an empty conversation left out, the
titles; the same export again adds nothing; a newer export with one more message adds
only it; the ChatGPT source does not claim it; never discovered in the home."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import claude_ai, files_for_paths
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

EXPORT = Path(__file__).resolve().parents[1] / "fixtures" / "claude-ai" / "export" / "conversations.json"
C1 = "2b4d6f80-1a3c-4e5f-8a7b-9c0d1e2f3a4b"


def test_import_blocks_attachments_and_titles(tmp_path):
    store = tmp_path / "store"
    s = ingest(tmp_path / "home", store, paths=[EXPORT])
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "claude-ai") == {
        "user/message": 2,
        "assistant/message": 2,
        "assistant/thinking": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 4,  # attachment, file, two titles
    }
    assert q(
        store,
        f"SELECT role, kind, tool_name, native_id, {ENTRY_TEXT} FROM entries e WHERE session_id=? "
        "ORDER BY ts, kind = 'meta' AND tool_name = 'title', rowid",
        C1,
    ) == [
        ("user", "message", None, "m-0001", "The upload test fails one run in ten. Log attached."),
        (
            "system",
            "meta",
            "attachment",
            "m-0001",
            "[attachment pytest.log]\nE   TimeoutError: upload did not finish within 2.0 s",
        ),
        ("system", "meta", "file", "m-0001", "[file screenshot.png]"),
        ("system", "meta", "title", None, "Fix the flaky upload test"),
        (
            "assistant",
            "thinking",
            None,
            "m-0002",
            "A fixed 2 s timeout on a shared runner is the likely cause.",
        ),
        ("assistant", "tool_call", "web_search", "toolu_01Search", '{"query":"pytest timeout flaky upload"}'),
        (
            "tool",
            "tool_result",
            "web_search",
            "toolu_01Search",
            "Use a deadline from the fixture, not a constant.",
        ),
        (
            "assistant",
            "message",
            None,
            "m-0002",
            "Raise the timeout to the fixture's deadline instead of a fixed 2 s.",
        ),
    ]
    assert q(store, "SELECT count(DISTINCT session_id) FROM entries WHERE agent='claude-ai'") == [(2,)]
    assert q(store, "SELECT count(*) FROM usage WHERE agent='claude-ai'") == [(0,)]
    assert ingest(tmp_path / "home", store, paths=[EXPORT]).entries_new == 0


def test_newer_export_adds_only_the_new_message(tmp_path):
    convs = json.loads(EXPORT.read_text())
    export = tmp_path / "x" / "conversations.json"
    export.parent.mkdir()
    export.write_text(json.dumps(convs))
    store = tmp_path / "store"
    assert ingest(tmp_path / "home", store, paths=[export]).entries_new == 11
    convs[1]["chat_messages"].append(
        {"uuid": "o-0003", "text": "Another one", "sender": "human", "created_at": "2026-01-10T08:00:00Z"}
    )
    export.write_text(json.dumps(convs))
    assert ingest(tmp_path / "home", store, paths=[export]).entries_new == 1


def test_import_only_and_claims(tmp_path):
    d = claude_ai.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and d.searched == [] and "ingest --path" in (d.reason or "")
    files, problems = files_for_paths([EXPORT])
    assert problems == [] and [(f.agent, f.mode) for f in files] == [("claude-ai", "rewrite")]
    d = claude_ai.discover(DiscoveryContext(home=tmp_path, env={}, extra_dirs=[EXPORT.parent]))
    assert [f.path for f in d.files] == [EXPORT]

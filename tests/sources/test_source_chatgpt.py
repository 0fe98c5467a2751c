"""The ChatGPT data export: a handmade ``conversations.json`` (format facts in
ctxkeep/sources/chatgpt.py) imported with ``--path`` into conversations: prompts,
answers with their model, thoughts, a Python tool call with its output, custom
instructions as meta, an image part named, the abandoned branch's answer rewound, the
titles; the same export again adds nothing; a damaged conversation is quarantined and
the others stored; a truncated export keeps what came before the damage; never
discovered in the home."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import chatgpt, files_for_paths
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

EXPORT = Path(__file__).resolve().parents[1] / "fixtures" / "chatgpt" / "export" / "conversations.json"
C1 = "6790a1b2-c3d4-8005-9e6f-7a8b9c0d1e2f"
C2 = "6780ffff-0000-8000-9000-000000000001"


def test_import_messages_tool_calls_and_branches(tmp_path):
    store = tmp_path / "store"
    s = ingest(tmp_path / "home", store, paths=[EXPORT])
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "chatgpt") == {
        "system/meta": 3,  # the custom instructions, two titles
        "user/message": 2,
        "assistant/message": 3,
        "assistant/thinking": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
    }
    assert q(
        store,
        f"SELECT role, kind, tool_name, native_id, model, status, {ENTRY_TEXT} FROM entries e "
        "WHERE session_id=? AND kind != 'meta' ORDER BY ts",
        C1,
    ) == [
        (
            "user",
            "message",
            None,
            "n-user",
            None,
            "active",
            "Write a regex that matches ISO dates like 2026-01-08",
        ),
        ("assistant", "message", None, "n-asst-1", "gpt-4o", "rewound", "Use \\d{4}-\\d{2}-\\d{2}."),
        (
            "assistant",
            "thinking",
            None,
            "n-think",
            "o3",
            "active",
            "Validating months\nMonths run 01-12; test it.",
        ),
        (
            "assistant",
            "tool_call",
            "python",
            "n-code",
            "o3",
            "active",
            "import re\nprint(bool(re.fullmatch(r'\\d{4}-(0[1-9]|1[0-2])-\\d{2}', '2026-13-01')))",
        ),
        ("tool", "tool_result", "python", "n-code", None, "active", "False"),
        (
            "assistant",
            "message",
            None,
            "n-asst-2",
            "o3",
            "active",
            "Use \\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01]); it rejects month 13.",
        ),
    ]
    assert q(store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE session_id=? AND role='user'", C2) == [
        ("[image 640x480]\nWhat should I pack for this trip?",)
    ]
    assert q(
        store,
        f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='chatgpt' AND tool_name='user_editable_context'",
    ) == [("I write Python.\n\nBe brief.",)]
    assert q(store, "SELECT count(*) FROM usage WHERE agent='chatgpt'") == [(0,)]
    assert ingest(tmp_path / "home", store, paths=[EXPORT]).entries_new == 0


def test_damaged_conversation_and_truncated_export(tmp_path):
    convs = json.loads(EXPORT.read_text())
    bad = tmp_path / "a" / "conversations.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps([{"mapping": {}, "title": "no id"}, convs[1]]))
    store = tmp_path / "store"
    s = ingest(tmp_path / "home", store, paths=[bad])
    assert s.quarantined == 1 and s.entries_new == 3
    assert q(store, "SELECT offset, reason FROM quarantine WHERE agent='chatgpt'") == [
        (0, "item 0: ValueError: conversation without an id")
    ]
    cut = tmp_path / "b" / "conversations.json"
    cut.parent.mkdir()
    text = json.dumps(convs[1:] + convs[:1])
    cut.write_text(text[: len(text) - 200])  # the download stopped inside the last conversation
    store2 = tmp_path / "store2"
    s2 = ingest(tmp_path / "home", store2, paths=[cut])
    assert s2.entries_new == 3 and s2.quarantined == 1
    assert "malformed JSON after 1 item(s)" in q(store2, "SELECT reason FROM quarantine")[0][0]


def test_import_only_claims_and_configured_dir(tmp_path):
    d = chatgpt.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and d.searched == [] and "ingest --path" in (d.reason or "")
    files, problems = files_for_paths([EXPORT.parent])
    assert problems == [] and [(f.agent, f.mode) for f in files] == [("chatgpt", "rewrite")]
    shard = tmp_path / "exports" / "conversations-000.json"
    shard.parent.mkdir()
    shutil.copyfile(EXPORT, shard)
    (tmp_path / "exports" / "other.json").write_text('{"mapping": {}}')
    d = chatgpt.discover(DiscoveryContext(home=tmp_path, env={}, extra_dirs=[shard.parent]))
    assert [f.path for f in d.files] == [shard]

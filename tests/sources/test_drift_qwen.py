"""Format drift of Qwen Code (issue 25, item 2): a rewind marks the abandoned branch
``rewound``, ``custom_title`` is the session's title, hook context and notifications
are not prompts (resume must not report a notification as the last prompt).
Fixture: tests/fixtures/drift/qwen (README.md there names the sources)."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT

FIX = Path(__file__).parent.parent / "fixtures" / "drift" / "qwen"
SID = "0c1d2e3f-4a5b-4c6d-8e7f-90a1b2c3d4e5"


def _ingested(tmp_path: Path, store_home: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(FIX, home / ".qwen")
    ingest(home, store_home, "qwen-code")
    return store_home


def test_rewind_marks_the_abandoned_branch_rewound(tmp_path, store_home):
    _ingested(tmp_path, store_home)
    rows = q(
        store_home,
        f"SELECT message_id, role, kind, status, {ENTRY_TEXT} FROM entries e WHERE kind IN ('message') ORDER BY ts",
    )
    assert [(m, r, st) for m, r, _k, st, _t in rows] == [
        ("u1", "user", "active"),
        ("a1", "assistant", "active"),
        ("u2", "user", "rewound"),
        ("a2", "assistant", "rewound"),
        ("u3", "user", "active"),
        ("a3", "assistant", "active"),
    ]


def test_hook_context_and_notifications_are_not_prompts_and_resume_says_the_last_typed_one(
    tmp_path, store_home
):
    from ctxkeep.query.resume import build_snapshot
    from ctxkeep.sinks import sqlite as sqlite_store

    _ingested(tmp_path, store_home)
    prompts = q(
        store_home,
        f"SELECT {ENTRY_TEXT} FROM entries e WHERE role = 'user' AND kind = 'message' "
        "AND status = 'active' ORDER BY ts",
    )
    assert [p for (p,) in prompts] == ["add a login page", "add a logout button instead"]
    meta = q(store_home, f"SELECT tool_name, {ENTRY_TEXT} FROM entries e WHERE kind = 'meta' ORDER BY ts")
    assert ("notification", "Worker completed.") in meta
    assert (
        "hook_context",
        "<qwen:user-prompt-submit-context>\nbranch main is protected\n</qwen:user-prompt-submit-context>",
    ) in meta
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        snap = build_snapshot(conn, SID)
    finally:
        conn.close()
    said = [i.text for i in snap.sections["prompts"]]
    assert any("add a logout button instead" in t for t in said)
    assert not any("Worker completed" in t or "task-notification" in t for t in said)
    assert not any("now add signup" in t for t in said)  # rewound


def test_custom_title_is_the_session_title(tmp_path, store_home):
    from ctxkeep.query.sessions import list_sessions
    from ctxkeep.sinks import sqlite as sqlite_store

    _ingested(tmp_path, store_home)
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        rows, _ = list_sessions(conn, store_home, agents=["qwen-code"])
    finally:
        conn.close()
    assert [(r.session_id, r.title) for r in rows] == [(SID, "Login page work")]

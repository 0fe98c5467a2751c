"""Trae: a generated ``state.vscdb`` (format facts in ctxkeep/sources/trae.py) read into
two sessions' prompts and answers (an empty answer falling back to its plan items,
per-message and session models, epoch ms, epoch s and RFC 3339 times), the workspace
folder as project; an encrypted modern-layout database counted as skipped; a rewritten
value adds only what is new and a truncated history is marked rewound; ``$TRAE_DIR``."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import files_for_paths, trae
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "trae" / "home"
USER = HOME / ".config" / "Trae" / "User"


def test_sessions_messages_and_project(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="trae")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "trae") == {"user/message": 2, "assistant/message": 3, "system/meta": 1}
    assert q(
        store,
        f"SELECT session_id, role, model, ts, {ENTRY_TEXT} FROM entries e WHERE agent='trae' ORDER BY ts, role",
    ) == [
        (
            "trae-sess-0001",
            "user",
            None,
            "2026-01-07T10:00:00.000000Z",
            "Add pagination to the /orders endpoint",
        ),
        (
            "trae-sess-0001",
            "assistant",
            "doubao-seed-1.6",
            "2026-01-07T10:00:10.000000Z",
            "Read the orders router\nAdd limit and offset query parameters",
        ),
        (
            "trae-sess-0001",
            "assistant",
            "claude-sonnet-4-5",
            "2026-01-07T10:00:30.000000Z",
            "Done: GET /orders takes limit (default 50) and offset.",
        ),
        ("trae-sess-0002", "system", None, "2026-01-07T12:46:40.000000Z", "context: src/validate.py"),
        ("trae-sess-0002", "user", None, "2026-01-07T12:46:40.000000Z", "What does this regex match?"),
        (
            "trae-sess-0002",
            "assistant",
            None,
            "2026-01-07T12:46:45.000000Z",
            "Lower-case words of 3 to 8 letters.",
        ),
    ]
    assert q(store, "SELECT DISTINCT project_dir FROM entries WHERE agent='trae'") == [
        ("/home/dev/shop-api",)
    ]
    # the format logs no tokens: no usage row is made up
    assert q(store, "SELECT count(*) FROM usage WHERE agent='trae'") == [(0,)]
    assert ingest(HOME, store, agents="trae").entries_new == 0


def test_encrypted_layout_is_skipped_and_said(tmp_path):
    d = trae.discover(DiscoveryContext(home=HOME, env={}))
    assert [f.path.name for f in d.files] == ["state.vscdb"]
    assert d.skipped == {trae.REASON_ENCRYPTED: 1}
    only = trae.discover(
        DiscoveryContext(home=HOME, env={"TRAE_DIR": str(HOME / ".config" / "Trae CN" / "User")})
    )
    assert only.files == [] and "encrypted" in (only.reason or "")


def test_rewrite_and_truncation_env_dir(tmp_path):
    user = tmp_path / "User"
    shutil.copytree(USER, user)
    env = {"TRAE_DIR": str(user)}
    nohome = tmp_path / "nohome"
    store = tmp_path / "store"
    assert ingest(nohome, store, agents="trae", env=env).entries_new == 6
    db = next(user.glob("workspaceStorage/*/state.vscdb"))
    con = sqlite3.connect(db)
    value = json.loads(con.execute("SELECT value FROM ItemTable WHERE key=?", (trae.KEY,)).fetchone()[0])
    value["list"][1]["messages"].append({"role": "user", "content": "And with digits?"})
    value["list"][0]["messages"] = value["list"][0]["messages"][:1]  # the user cleared the answers
    con.execute("UPDATE ItemTable SET value=? WHERE key=?", (json.dumps(value), trae.KEY))
    con.commit()
    con.close()
    assert ingest(nohome, store, agents="trae", env=env).entries_new == 1
    assert q(store, "SELECT session_id, status, count(*) FROM entries WHERE agent='trae' GROUP BY 1, 2") == [
        ("trae-sess-0001", "active", 1),
        ("trae-sess-0001", "rewound", 2),
        ("trae-sess-0002", "active", 4),
    ]


def test_path_claims(tmp_path):
    db = next(USER.glob("workspaceStorage/*/state.vscdb"))
    files, problems = files_for_paths([db])
    assert problems == [] and [(f.agent, f.mode) for f in files] == [("trae", "sqlite")]
    d = trae.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and d.searched[0] == tmp_path / ".config/Trae/User/workspaceStorage"

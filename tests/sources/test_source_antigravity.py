"""Antigravity CLI and IDE: handmade conversation databases (format facts in
ctxkeep/sources/antigravity.py) read into prompts, answers, a tool call and its
result, usage per generation on the planner step that made it, the workspace from
``history.jsonl``, a brain artifact; the encrypted ``.pb`` is not discovered; a step
the agent rewrites marks the old copy rewound; discovery through the env overrides."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import SOURCES, antigravity, files_for_paths
from ctxkeep.sources.antigravity import pb_parse, usage_of
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

FIX = Path(__file__).resolve().parents[1] / "fixtures"
CLI_HOME = FIX / "antigravity-cli" / "home"
IDE_HOME = FIX / "antigravity" / "home"
CLI_ID = "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b"
CALL = "1b2c3d4e-5f60-4718-9a0b-c1d2e3f4a5b6"


def test_cli_session_messages_tool_calls_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(CLI_HOME, store, agents="antigravity-cli")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "antigravity-cli") == {
        "user/message": 1,
        "assistant/message": 2,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "assistant/meta": 1,  # the brain artifact
    }
    assert q(store, "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='antigravity-cli'") == [
        (CLI_ID, "/work/app")
    ]
    assert q(
        store,
        f"SELECT role, kind, tool_name, native_id, {ENTRY_TEXT} FROM entries e WHERE agent='antigravity-cli' "
        "AND kind != 'meta' ORDER BY ts, kind",
    ) == [
        ("user", "message", None, None, "Add a --dry-run flag to the deploy script"),
        ("assistant", "message", None, None, "I will read the script first."),
        ("assistant", "tool_call", "view_file", CALL, '{"AbsolutePath": "/work/app/deploy.sh"}'),
        ("tool", "tool_result", "step:8", CALL, "#!/bin/sh\nrsync -a build/ prod:/srv/app\n"),
        ("assistant", "message", None, None, "Added --dry-run: it passes -n to rsync."),
    ]
    assert q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_read_tokens FROM usage "
        "WHERE agent='antigravity-cli' ORDER BY input_tokens DESC",
    ) == [("Gemini 3 Pro", 1200, 85, 4000), ("Gemini 3 Pro", 300, 40, 0)]
    assert q(
        store, "SELECT min(ts), max(ts) FROM entries WHERE agent='antigravity-cli' AND kind != 'meta'"
    ) == [("2025-12-29T09:20:00.500000Z", "2025-12-29T09:20:09.500000Z")]
    # the second ingest finds nothing new
    assert ingest(CLI_HOME, store, agents="antigravity-cli").entries_new == 0


def test_ide_session_and_env_override(tmp_path):
    root = tmp_path / "ag"
    shutil.copytree(IDE_HOME / ".gemini" / "antigravity", root)
    env = {"ANTIGRAVITY_DIR": str(root)}
    d = SOURCES["antigravity"].discover(DiscoveryContext(home=tmp_path / "nohome", env=env))
    assert [f.path.parent.name for f in d.files] == ["conversations"]
    store = tmp_path / "store"
    assert ingest(tmp_path / "nohome", store, agents="antigravity", env=env).entries_new == 2
    assert q(store, f"SELECT role, {ENTRY_TEXT} FROM entries e WHERE agent='antigravity' ORDER BY ts") == [
        ("user", "Why is the build slow?"),
        ("assistant", "The tests run twice: once in pre-commit."),
    ]
    # the agent rewrites the planner step as it streams: the new copy arrives, the old is rewound
    db = d.files[0].path
    con = sqlite3.connect(db)
    payload = con.execute("SELECT step_payload FROM steps WHERE idx=1").fetchone()[0]
    more = payload.replace(b"pre-commit.", b"pre-commit!")  # same length: the varints stand
    con.execute("UPDATE steps SET step_payload=? WHERE idx=1", (more,))
    con.commit()
    con.close()
    assert ingest(tmp_path / "nohome", store, agents="antigravity", env=env).entries_new == 1
    assert q(store, "SELECT status, count(*) FROM entries WHERE agent='antigravity' GROUP BY 1") == [
        ("active", 2),
        ("rewound", 1),
    ]
    assert q(
        store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='antigravity' AND status='active' ORDER BY ts"
    ) == [("Why is the build slow?",), ("The tests run twice: once in pre-commit!",)]


def test_path_claims_and_empty_home(tmp_path):
    db = next((CLI_HOME / ".gemini/antigravity-cli/conversations").glob("*.db"))
    files, problems = files_for_paths([db])
    assert problems == [] and [(f.agent, f.mode) for f in files] == [("antigravity-cli", "sqlite")]
    found = SOURCES["antigravity-cli"].discover(DiscoveryContext(home=CLI_HOME, env={}))
    assert len(found.files) == 1 and found.skipped == {antigravity.REASON_ENCRYPTED: 1}
    enc = tmp_path / "enc" / "conversations"
    enc.mkdir(parents=True)
    (enc / "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716.pb").write_bytes(b"\x07" * 64)
    only = SOURCES["antigravity-cli"].discover(
        DiscoveryContext(home=tmp_path, env={"ANTIGRAVITY_CLI_DIR": str(tmp_path / "enc")})
    )
    assert only.files == [] and "only encrypted" in (only.reason or "")
    d = SOURCES["antigravity-cli"].discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and d.searched == [tmp_path / ".gemini/antigravity-cli/conversations"]
    assert "does not exist" in (d.reason or "")


def test_wire_decoding_rejects_damage():
    assert [(f.num, f.wire, f.value) for f in pb_parse(b"\x08\x0e")] == [(1, 0, 14)]
    for bad in (b"\x0a\x05ab", b"\x07", b"\x08"):
        try:
            pb_parse(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
    # a generation without a plausible usage block (model enum out of range) gives no counts
    assert usage_of(b"\x0a\x08\x22\x06\x08\x05\x10\x01\x18\x01")[0] is None

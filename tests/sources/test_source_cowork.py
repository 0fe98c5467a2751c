"""Cowork (Claude Desktop local agent mode): a handmade session (format facts in
ctxkeep/sources/cowork.py) found through its metadata file, read with Claude Code's
parser into prompts, answers, a tool call and result, usage with the model, the
sub-agent linked to its parent, the metadata's title and the user's folder as project;
appended lines arrive once; discovery through ``$COWORK_DIR``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import cowork, files_for_paths
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "cowork" / "home"
ROOT = HOME / ".config" / "Claude" / "local-agent-mode-sessions"
CLI = "e41c9b27-8d5a-4f10-b3e6-2c7a9d0f5b18"


def test_session_subagent_usage_title_and_project(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="cowork")
    assert s.files == 2 and s.quarantined == 0
    assert kinds(store, "cowork") == {
        "user/message": 2,
        "assistant/message": 3,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "system/meta": 2,  # the title and the ai-title line
    }
    assert q(
        store,
        f"SELECT session_id, parent_session_id, role, kind, {ENTRY_TEXT} FROM entries e WHERE agent='cowork' "
        "AND kind != 'meta' ORDER BY ts, kind",
    ) == [
        (CLI, None, "user", "message", "Summarise the expenses in receipts.csv by category"),
        (CLI, None, "assistant", "message", "Reading the receipts."),
        (
            CLI,
            None,
            "assistant",
            "tool_call",
            '{"file_path":"/sessions/brave-otter/mnt/Finance/receipts.csv"}',
        ),
        (
            CLI,
            None,
            "tool",
            "tool_result",
            "date,category,amount\n2025-10-02,travel,412.50\n2025-11-14,software,99.00",
        ),
        ("agent-a7f3c2d1", CLI, "user", "message", "Check the totals add up"),
        ("agent-a7f3c2d1", CLI, "assistant", "message", "The totals match: 511.50."),
        (CLI, None, "assistant", "message", "Travel: 412.50; software: 99.00."),
    ]
    assert q(store, "SELECT DISTINCT project_dir FROM entries WHERE agent='cowork'") == [
        ("/Users/dana/Documents/Finance",)
    ]
    assert q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens FROM usage "
        "WHERE agent='cowork' ORDER BY input_tokens",
    ) == [
        ("claude-sonnet-4-5-20250929", 250, 35, 13800, 0),
        ("claude-haiku-4-5-20251001", 300, 12, 0, 0),
        ("claude-sonnet-4-5-20250929", 1800, 60, 12000, 400),
    ]
    assert q(store, "SELECT count(*) FROM usage WHERE usage_key NOT LIKE 'cowork:%' AND agent='cowork'") == [
        (0,)
    ]
    assert q(store, f"SELECT {ENTRY_TEXT} FROM entries e WHERE agent='cowork' AND tool_name='title'") == [
        ("Quarterly expenses summary",)
    ]


def test_appends_arrive_once_and_env_dir(tmp_path):
    root = tmp_path / "sessions"
    shutil.copytree(ROOT, root)
    env = {"COWORK_DIR": str(root)}
    nohome = tmp_path / "nohome"
    d = cowork.discover(DiscoveryContext(home=nohome, env=env))
    assert sorted(f.path.name for f in d.files) == ["agent-a7f3c2d1.jsonl", f"{CLI}.jsonl"]
    store = tmp_path / "store"
    first = ingest(nohome, store, agents="cowork", env=env).entries_new
    assert first == 9
    main = next(f.path for f in d.files if f.path.name == f"{CLI}.jsonl")
    line = {
        "parentUuid": "c0000000-0000-4000-8000-000000000004",
        "type": "user",
        "sessionId": CLI,
        "cwd": "/sessions/brave-otter",
        "message": {"role": "user", "content": "Put it in a table"},
        "uuid": "c0000000-0000-4000-8000-000000000005",
        "timestamp": "2026-01-06T09:01:00.000Z",
    }
    with open(main, "a") as f:
        f.write(json.dumps(line) + "\n")
    assert ingest(nohome, store, agents="cowork", env=env).entries_new == 1
    assert ingest(nohome, store, agents="cowork", env=env).entries_new == 0


def test_path_claims_and_empty_home(tmp_path):
    main = next(ROOT.glob(f"*/*/local_*/.claude/projects/*/{CLI}.jsonl"))
    files, problems = files_for_paths([main])
    assert problems == [] and [f.agent for f in files] == ["cowork"]
    d = cowork.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and d.searched[0] == tmp_path / ".config/Claude/local-agent-mode-sessions"

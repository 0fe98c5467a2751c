"""OpenClaw: a handmade Pi-shaped session OpenClaw kept at a reset and the live session
after it (format facts in ctxkeep/sources/openclaw.py) read as ``openclaw`` entries,
tool calls, results and usage; lines in both a kept and a live file stored once;
discovery through ``$OPENCLAW_DIR``."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import openclaw, pi
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "openclaw" / "home"
SID = "4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8"
NEW = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
KEPT = f"{SID}.jsonl.reset.2026-10-02T08-00-00Z"


def test_messages_tool_calls_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="openclaw")
    assert s.files_read == 2 and s.quarantined == 0
    assert kinds(store, "openclaw") == {
        "system/meta": 1,
        "user/message": 2,
        "assistant/thinking": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "assistant/message": 2,
    }
    assert q(
        store, "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='openclaw' ORDER BY 1"
    ) == [(SID, "/home/dev/notes"), (NEW, "/home/dev/notes")]
    assert q(
        store,
        f"SELECT kind, native_id, tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='openclaw' "
        "AND kind IN ('tool_call', 'tool_result') ORDER BY kind",
    ) == [
        ("tool_call", "tc_1", "bash", '{"command":"ls notes/2026-10-02"}'),
        ("tool_result", "tc_1", "bash", "standup.md\nreview.md"),
    ]
    assert q(
        store,
        "SELECT usage_key, model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens "
        "FROM usage WHERE agent='openclaw' ORDER BY usage_key",
    ) == [
        (f"openclaw:{SID}:e2", "claude-sonnet-4-5", 800, 35, 4000, 120),
        (f"openclaw:{SID}:e4", "claude-sonnet-4-5", 60, 12, 4900, 0),
        (f"openclaw:{NEW}:f2", "claude-sonnet-4-5", 50, 6, 0, 0),
    ]


def test_env_dir_kept_copies_and_not_pi(tmp_path):
    agents = tmp_path / "agents"
    shutil.copytree(HOME / ".openclaw/agents", agents)
    found = openclaw.discover(DiscoveryContext(home=tmp_path / "nohome", env={"OPENCLAW_DIR": str(agents)}))
    assert sorted(f.path.name for f in found.files) == [KEPT, f"{NEW}.jsonl"]
    assert openclaw.init_state(found.files[0]) == {"sid": SID}
    store = tmp_path / "store"
    env = {"OPENCLAW_DIR": str(agents)}
    assert ingest(tmp_path, store, agents="openclaw", env=env).entries_new == 8
    # the kept lines also in a live file (copied back) are the same entries
    shutil.copyfile(agents / "main/sessions" / KEPT, agents / "main/sessions" / f"{SID}.jsonl")
    s = ingest(tmp_path, store, agents="openclaw", env=env)
    assert s.files_read == 1 and s.entries_new == 0
    assert pi.discover(DiscoveryContext(home=HOME, env={})).files == []
    assert all(openclaw.matches(p) for p in HOME.rglob("*.jsonl*"))


def test_empty_home_says_where_it_looked(tmp_path):
    d = openclaw.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".openclaw/agents" in (d.reason or "") and len(d.searched) == 2


def test_path_claims_openclaw_files_not_pi():
    """``--path`` offers a file to the sources in registry order: an OpenClaw session
    (Pi-shaped) goes to openclaw, a kept ``.reset`` copy too."""
    from ctxkeep.sources import files_for_paths

    files, problems = files_for_paths([HOME / ".openclaw/agents/main/sessions"])
    assert problems == [] and sorted((f.agent, f.path.name) for f in files) == [
        ("openclaw", KEPT),
        ("openclaw", f"{NEW}.jsonl"),
    ]

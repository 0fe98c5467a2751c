"""Kimi CLI and Kimi Code: generated wire logs (tests/fixtures/kimi/make_fixtures.py;
format facts in ctxkeep/sources/kimi.py): prompts, thinking, tool calls and results
(an error flagged), usage per step (a usage.record repeating its step.end counted
once), the model and cwd Kimi Code names, $KIMI_CODE_HOME."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "kimi" / "home"
CLI_SID = "5d0c8a4e-1111-4222-8333-944455566677"
CODE_SID = "session_7a1b2c3d-0000-4000-8000-000000000002"


def test_both_generations(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="kimi")
    assert s.files_read == 2 and s.quarantined == 0
    assert kinds(store, "kimi") == {
        "user/message": 2,
        "assistant/message": 2,
        "assistant/thinking": 1,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/meta": 3,  # usage: two Kimi CLI steps, one Kimi Code step
    }
    rows = q(
        store,
        f"SELECT session_id, role, kind, tool_name, native_id, project_dir, {ENTRY_TEXT} FROM entries e "
        "WHERE agent='kimi' AND kind IN ('message', 'tool_call', 'tool_result') ORDER BY ts",
    )
    assert rows == [
        (CLI_SID, "user", "message", None, None, None, "count the lines of a.txt"),
        (CLI_SID, "assistant", "tool_call", "Bash", "tool_1", None, '{"command": "wc -l a.txt"}'),
        (CLI_SID, "tool", "tool_result", None, "tool_1", None, "42 a.txt"),
        (CLI_SID, "assistant", "message", None, None, None, "a.txt has 42 lines."),
        (CODE_SID, "user", "message", None, None, "/work/demo", "run the tests"),
        (CODE_SID, "assistant", "tool_call", "Bash", "tc_1", "/work/demo", '{"command":"pytest -q"}'),
        (CODE_SID, "tool", "tool_result", None, "tc_1", "/work/demo", "[error] 1 failed"),
        (CODE_SID, "assistant", "message", None, None, "/work/demo", "One test fails."),
    ]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens "
        "FROM usage WHERE agent='kimi' ORDER BY ts",
    ) == [
        (CLI_SID, None, 5000, 60, 200, 0),
        (CLI_SID, None, 120, 9, 5200, 0),
        (CODE_SID, "kimi-k2.6", 800, 30, 4000, 100),
    ]
    assert q(store, "SELECT min(ts) FROM entries WHERE session_id=?", CLI_SID) == [
        ("2026-01-03T09:00:00.500000Z",)
    ]


def test_kimi_code_home_override(tmp_path):
    from ctxkeep.sources import kimi
    from ctxkeep.sources.contract import DiscoveryContext

    other = tmp_path / "kc"
    shutil.copytree(HOME / ".kimi-code", other)
    d = kimi.discover(DiscoveryContext(home=tmp_path / "nohome", env={"KIMI_CODE_HOME": str(other)}))
    assert [f.path.parent.name for f in d.files] == ["main"]
    assert d.searched == [tmp_path / "nohome" / ".kimi" / "sessions", other / "sessions"]
    assert kimi.discover(DiscoveryContext(home=tmp_path / "nohome", env={})).reason

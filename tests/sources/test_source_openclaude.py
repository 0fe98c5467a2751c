"""OpenClaude: Claude Code's transcript format under ~/.openclaude, labelled
``openclaude`` with its own usage keys, never claimed as Claude Code's."""

from __future__ import annotations

from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import claude_code, openclaude
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "openclaude" / "home"


def test_entries_usage_and_labels(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="openclaude")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "openclaude") == {
        "user/message": 1,
        "assistant/message": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
    }
    assert q(store, "SELECT DISTINCT project_dir FROM entries WHERE agent='openclaude'") == [
        ("/home/dev/todo",)
    ]
    assert q(store, "SELECT usage_key, model, input_tokens, output_tokens FROM usage") == [
        ("openclaude:chatcmpl-91:req_91", "gpt-4.1", 900, 40)
    ]


def test_discovery_is_apart_from_claude_code(tmp_path):
    ctx = DiscoveryContext(home=HOME, env={})
    assert len(openclaude.discover(ctx).files) == 1
    assert claude_code.discover(ctx).files == []
    env = DiscoveryContext(home=tmp_path, env={"OPENCLAUDE_CONFIG_DIR": str(HOME / ".openclaude")})
    assert len(openclaude.discover(env).files) == 1
    f = openclaude.discover(ctx).files[0].path
    assert openclaude.matches(f)

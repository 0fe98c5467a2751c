"""GitHub Copilot CLI source: the corpus events fixture and the session dir layout with
``session.shutdown`` usage."""

from __future__ import annotations

import json
import shutil

from conftest import CORPUS_HOME, corpus, ingest, q
from ctxkeep.sources import copilot_cli
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import kinds

FIXTURE = ".copilot/session-state/fixture-small.jsonl"


def test_corpus_fixture_entries(tmp_path):
    src = corpus(FIXTURE)
    types = [json.loads(line)["type"] for line in src.read_text().splitlines()]
    store = tmp_path / "store"
    s = ingest(CORPUS_HOME, store, agents=["copilot-cli"])
    assert s.files_read == 1 and s.quarantined == 0
    k = kinds(store, "copilot-cli")
    assert k["user/message"] == types.count("user.message") == 2
    assert k["assistant/message"] == types.count("assistant.message") == 5
    assert k["assistant/tool_call"] == types.count("tool.execution_start") == 2
    assert k["tool/tool_result"] == types.count("tool.execution_complete") == 4
    assert k["assistant/thinking"] == types.count("assistant.reasoning") + 1 == 2  # + one reasoningText
    assert sum(k.values()) == 33
    # one session; cwd from session.start, then from each session.resume (the fixture's
    # resume has its cwd replaced by "[trimmed for fixture]" upstream)
    assert q(
        store,
        "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='copilot-cli' "
        "ORDER BY source_offset",
    ) == [("copilot_stage0_small", "/tmp/repo"), ("copilot_stage0_small", "[trimmed for fixture]")]
    tools = q(
        store,
        "SELECT tool_name, text FROM entries e JOIN contents c USING(content_hash) "
        "JOIN chunks ch USING(content_id) WHERE agent='copilot-cli' AND kind='tool_call' "
        "ORDER BY source_offset",
    )
    assert tools[0] == ("shell", '{"command":"ls"}')
    # the fixture's shutdown has no per-model usage, so nothing is counted (as ccusage)
    assert q(store, "SELECT count(*) FROM usage WHERE agent='copilot-cli'") == [(0,)]


def test_session_dir_layout_copilot_home_and_shutdown_usage(tmp_path):
    root = tmp_path / "cp"
    d = root / "session-state" / "sess-42"
    d.mkdir(parents=True)
    lines = [
        {
            "type": "session.start",
            "data": {
                "sessionId": "sess-42",
                "selectedModel": "claude-sonnet-4.6",
                "context": {"cwd": "/home/dev/api"},
            },
            "id": "e1",
            "timestamp": "2026-03-02T08:00:00.000Z",
            "parentId": None,
        },
        {
            "type": "user.message",
            "data": {"content": "run the tests"},
            "id": "e2",
            "timestamp": "2026-03-02T08:00:01.000Z",
            "parentId": "e1",
        },
        {
            "type": "session.shutdown",
            "data": {
                "modelMetrics": {
                    "claude-sonnet-4.6": {
                        "requests": {"count": 7, "cost": 1},
                        "usage": {
                            "inputTokens": 197185,
                            "outputTokens": 1532,
                            "cacheReadTokens": 180864,
                            "cacheWriteTokens": 16310,
                            "reasoningTokens": 0,
                        },
                    }
                }
            },
            "id": "e3",
            "timestamp": "2026-03-02T08:10:00.000Z",
            "parentId": "e2",
        },
    ]
    (d / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ctx = DiscoveryContext(home=tmp_path / "nohome", env={"COPILOT_HOME": str(root)})
    disc = copilot_cli.discover(ctx)
    assert [f.path for f in disc.files] == [d / "events.jsonl"]
    store = tmp_path / "store"
    ingest(tmp_path / "nohome", store, env={"COPILOT_HOME": str(root)}, agents=["copilot-cli"])
    # ccusage's uncached input: inputTokens - cacheRead - cacheWrite
    assert q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens FROM usage",
    ) == [("claude-sonnet-4.6", 197185 - 180864 - 16310, 1532, 180864, 16310)]
    # a resumed session shuts down again with larger (cumulative) totals: one row, the latest
    with open(d / "events.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "type": "session.shutdown",
                    "data": {
                        "modelMetrics": {
                            "claude-sonnet-4.6": {
                                "usage": {
                                    "inputTokens": 250000,
                                    "outputTokens": 2000,
                                    "cacheReadTokens": 230000,
                                    "cacheWriteTokens": 16310,
                                }
                            }
                        }
                    },
                    "id": "e9",
                    "timestamp": "2026-03-02T09:00:00.000Z",
                }
            )
            + "\n"
        )
    ingest(tmp_path / "nohome", store, env={"COPILOT_HOME": str(root)}, agents=["copilot-cli"])
    assert q(store, "SELECT substr(ts,1,16), input_tokens, output_tokens FROM usage") == [
        ("2026-03-02T09:00", 250000 - 230000 - 16310, 2000)
    ]


def test_matches_only_copilot_events(tmp_path):
    assert copilot_cli.matches(corpus(FIXTURE))
    other = tmp_path / "x.jsonl"
    shutil.copy(
        corpus(
            ".gemini/tmp/9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b/chats/"
            "session-2026-05-01T10-00-fixture0.jsonl"
        ),
        other,
    )
    assert not copilot_cli.matches(other)

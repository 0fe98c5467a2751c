"""gptme: a handmade conversation (format facts in ctxkeep/sources/gptme.py) read into
messages, tool output, usage and cost; discovery through ``$GPTME_DIR``; appended lines
read incrementally."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import gptme
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "gptme" / "home"
SID = "2026-06-20-parse-csv"


def test_messages_tool_output_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="gptme")
    assert s.files_read == 1 and s.quarantined == 0
    assert kinds(store, "gptme") == {
        "system/meta": 2,
        "user/message": 1,
        "assistant/message": 2,
        "tool/tool_result": 1,
    }
    assert q(store, "SELECT DISTINCT session_id FROM entries WHERE agent='gptme'") == [(SID,)]
    rows = q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd "
        "FROM usage WHERE agent='gptme' ORDER BY input_tokens",
    )
    assert rows == [
        ("anthropic/claude-sonnet-4-5", 310, 55, 1200, 40, 0.0021),
        ("anthropic/claude-sonnet-4-5", 420, 12, 1500, 0, None),
    ]
    first = q(
        store,
        "SELECT role, strftime('%Y-%m-%dT%H:%M:%S', ts) FROM entries WHERE agent='gptme' "
        "AND kind='message' ORDER BY source_offset LIMIT 1",
    )
    assert first == [("user", "2026-06-20T09:00:02")]


def test_env_dir_and_incremental_append(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(HOME / ".local/share/gptme/logs", logs)
    found = gptme.discover(DiscoveryContext(home=tmp_path / "nohome", env={"GPTME_DIR": str(logs)})).files
    assert [f.path.parent.name for f in found] == [SID]
    store = tmp_path / "store"
    env = {"GPTME_DIR": str(logs)}
    assert ingest(tmp_path, store, agents="gptme", env=env).entries_new == 6
    conv = logs / SID / "conversation.jsonl"
    with conv.open("a") as f:
        f.write('{"role":"user","content":"Now count the rows.","timestamp":"2026-06-20T09:01:00.000000"}\n')
    s = ingest(tmp_path, store, agents="gptme", env=env)
    assert s.entries_new == 1
    assert q(store, "SELECT count(*) FROM entries WHERE agent='gptme' AND role='user'") == [(2,)]


def test_empty_home_says_where_it_looked(tmp_path):
    d = gptme.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and "gptme/logs" in (d.reason or "")

"""Cortex Code: a handmade whole conversation, its backup, and a conversation split into
metadata + ``.history.jsonl`` (format facts in ctxkeep/sources/cortex.py) read into
prompts, injected context, wrapped tool calls and results with their status, and
titles; discovery through ``$CORTEX_DIR``; the history file read incrementally."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from ctxkeep.sources import cortex
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import ENTRY_TEXT, kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "cortex" / "home"
WHOLE = "3f1e2d4c-5b6a-4978-8a9b-0c1d2e3f4a5b"
SPLIT = "7a8b9c0d-1e2f-4a3b-9c4d-5e6f7a8b9c0d"


def test_messages_tool_calls_and_results(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="cortex")
    assert s.files_read == 3 and s.quarantined == 0  # the backup is not read
    assert kinds(store, "cortex") == {
        "system/meta": 3,
        "user/message": 2,
        "assistant/message": 2,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
    }
    assert q(
        store,
        f"SELECT session_id, native_id, tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='cortex' "
        "AND kind='tool_call' ORDER BY native_id",
    ) == [
        (
            WHOLE,
            "tu_1",
            "snowflake_sql_execute",
            '{"query":"select customer, sum(amount) from orders group by 1 order by 2 desc limit 5"}',
        ),
        (SPLIT, "tu_9", "bash", '{"command":"dbt build -s stg_orders"}'),
    ]
    assert q(
        store,
        f"SELECT native_id, {ENTRY_TEXT} FROM entries e WHERE agent='cortex' AND kind='tool_result' "
        "ORDER BY native_id",
    ) == [("tu_1", "ACME 120000\nGLOBEX 98000"), ("tu_9", "[error] column AMOUNT not found")]
    assert q(
        store,
        f"SELECT session_id, project_dir, strftime('%Y-%m-%dT%H:%M:%S', ts), {ENTRY_TEXT} FROM entries e "
        "WHERE agent='cortex' AND role='user' ORDER BY session_id",
    ) == [
        (WHOLE, "/home/dev/analytics", "2026-05-05T12:00:05", "Top 5 customers by revenue last month?"),
        (SPLIT, "/home/dev/dbt", "2026-05-06T08:00:10", "Why does stg_orders fail?"),
    ]
    assert q(
        store,
        f"SELECT tool_name, {ENTRY_TEXT} FROM entries e WHERE agent='cortex' AND kind='meta' ORDER BY 2",
    ) == [
        ("injected", "<system-reminder>Connected to dev.</system-reminder>"),
        ("title", "Fix the dbt model"),
        ("title", "Top customers query"),
    ]


def test_env_dir_and_incremental_history(tmp_path):
    conv = tmp_path / "conversations"
    shutil.copytree(HOME / ".snowflake/cortex/conversations", conv)
    env = {"CORTEX_DIR": str(conv)}
    found = cortex.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert sorted((f.path.name, f.mode) for f in found) == [
        (f"{WHOLE}.json", "rewrite"),
        (f"{SPLIT}.history.jsonl", "append"),
        (f"{SPLIT}.json", "rewrite"),
    ]
    store = tmp_path / "store"
    assert ingest(tmp_path, store, agents="cortex", env=env).entries_new == 11
    with (conv / f"{SPLIT}.history.jsonl").open("a") as f:
        f.write(
            '{"role":"assistant","id":"h4","content":[{"type":"text","text":"Rename AMOUNT to TOTAL."}]}\n'
        )
    assert ingest(tmp_path, store, agents="cortex", env=env).entries_new == 1
    assert q(
        store, "SELECT session_id, project_dir FROM entries WHERE agent='cortex' AND native_id='h4'"
    ) == [(SPLIT, "/home/dev/dbt")]


def test_empty_home_says_where_it_looked(tmp_path):
    d = cortex.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and "cortex/conversations" in (d.reason or "")

"""Mistral Vibe: a handmade session folder (format facts in
ctxkeep/sources/mistral_vibe.py): messages, reasoning, tool calls and results, an
injected message kept out of the user's prompts, session id, project and usage from
meta.json, and a grown meta.json replacing the usage row rather than adding one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import kinds

HOME = Path(__file__).resolve().parents[1] / "fixtures" / "mistral-vibe" / "home"
SID = "7d1c2a90-3b4e-4f5a-9c8d-112233445566"


def test_session_entries_project_and_usage(tmp_path):
    store = tmp_path / "store"
    s = ingest(HOME, store, agents="mistral-vibe")
    assert s.files_read == 2 and s.quarantined == 0  # messages.jsonl and meta.json (a sidecar)
    k = kinds(store, "mistral-vibe")
    assert {key: k.get(key) for key in ("user/message", "assistant/message", "assistant/thinking")} == {
        "user/message": 1,
        "assistant/message": 2,
        "assistant/thinking": 1,
    }
    assert k["assistant/tool_call"] == 1 and k["tool/tool_result"] == 1
    assert q(store, "SELECT DISTINCT session_id, project_dir FROM entries WHERE agent='mistral-vibe'") == [
        (SID, "/home/dev/shop-api")
    ]
    assert q(
        store,
        "SELECT tool_name, native_id FROM entries WHERE agent='mistral-vibe' AND kind='tool_call'",
    ) == [("bash", "call_a1")]
    assert q(
        store,
        "SELECT model, input_tokens, output_tokens, cache_read_tokens FROM usage WHERE agent='mistral-vibe'",
    ) == [("devstral-medium-2507", 1500, 310, 3900)]


def test_grown_meta_replaces_the_usage_row(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(HOME, home)
    store = tmp_path / "store"
    ingest(home, store, agents="mistral-vibe")
    folder = next((home / ".vibe/logs/session").iterdir())
    meta = json.loads((folder / "meta.json").read_text())
    meta["stats"].update(
        session_prompt_tokens=9000, session_completion_tokens=520, session_cached_tokens=6000
    )
    (folder / "meta.json").write_text(json.dumps(meta))
    with (folder / "messages.jsonl").open("a") as f:
        f.write(
            '{"role":"assistant","content":"Fixed: empty passwords are refused now.","message_id":"m-06"}\n'
        )
    s = ingest(home, store, agents="mistral-vibe")
    assert s.entries_new >= 1
    assert q(
        store,
        "SELECT input_tokens, output_tokens, cache_read_tokens FROM usage WHERE agent='mistral-vibe'",
    ) == [(3000, 520, 6000)]

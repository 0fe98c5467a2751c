"""sst OpenCode: the corpus JSON storage tree (SYNTHETIC, from iansherr/claude-code-log),
the generated ``opencode.db`` fixture, usage equal to ccusage, rewrites and streaming."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from conftest import CORPUS_HOME, ingest, q
from ctxkeep.sources import opencode
from dbhelpers import TEXT, corpus_part, fixture_home, kinds, usage_by_day

STORAGE = ".local/share/opencode/storage"
CCUSAGE = Path("/work/tools-ccusage/node_modules/.bin/ccusage")


def test_corpus_tree_discovery_and_entries(corpus_ctx):
    d = opencode.discover(corpus_ctx)
    assert [f.path.relative_to(CORPUS_HOME).as_posix() for f in d.files] == [
        f"{STORAGE}/session/test-project/test-session.json"
    ]
    (f,) = d.files
    entries = [e for b in opencode.read(f, None) for e in b.entries]
    assert [(e["role"], e["kind"], e["record_id"]) for e in entries] == [
        ("user", "message", "test-session:part-001"),
        ("assistant", "message", "test-session:part-002"),
        ("system", "meta", "test-session:msg-002:usage"),
    ]
    assert entries[0]["text"] == "Hello, can you help me with a coding problem?"
    assert entries[1]["ts"] == "2025-06-19T05:20:01.000000Z"
    assert {e["project_dir"] for e in entries} == {"/home/user/project"}
    u = entries[2]
    assert (
        u["model"],
        u["input_tokens"],
        u["output_tokens"],
        u["reasoning_tokens"],
        u["cache_read_tokens"],
        u["cache_creation_tokens"],
        u["usage_key"],
    ) == ("claude-3-5-sonnet-20241022", 100, 50, 10, 0, 0, "opencode:msg-002")


def _ccusage_opencode() -> dict:
    """ccusage's daily opencode figures on the corpus: {day: {model: (in, out, cr, cw)}}."""
    env = dict(os.environ, HOME=str(CORPUS_HOME))
    r = subprocess.run(
        [str(CCUSAGE), "daily", "--json", "--by-agent", "-z", "UTC", "--offline"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd="/tmp",
    )
    data = json.loads(r.stdout)
    out: dict = {}
    for day in data["daily"]:
        for a in day.get("agents", []):
            if a["agent"] != "opencode":
                continue
            for m in a["modelBreakdowns"]:
                out.setdefault(day["period"], {})[m["modelName"]] = (
                    m["inputTokens"],
                    m["outputTokens"],
                    m["cacheReadTokens"],
                    m["cacheCreationTokens"],
                )
    return out


@pytest.mark.slow
def test_usage_per_day_equals_ccusage(tmp_path):
    if not CCUSAGE.exists():
        pytest.skip("ccusage not installed")
    home = tmp_path / "home"
    corpus_part(STORAGE, home)
    store = tmp_path / "store"
    ingest(home, store, "opencode")
    ours: dict = {}
    for day, model, i, o, cr, cw in q(
        store,
        "SELECT substr(ts,1,10), model, sum(input_tokens), "
        "sum(output_tokens), sum(cache_read_tokens), "
        "sum(cache_creation_tokens) FROM usage WHERE agent='opencode' "
        "GROUP BY 1, 2",
    ):
        ours.setdefault(day, {})[model] = (i, o, cr, cw)
    ref = _ccusage_opencode()
    assert ref == {"2025-06-19": {"claude-3-5-sonnet-20241022": (100, 50, 0, 0)}}
    assert ours == ref


def test_opencode_db_fixture(tmp_path):
    home = tmp_path / "home"
    fixture_home("opencode", home)
    store = tmp_path / "store"
    s = ingest(home, store, "opencode")
    assert s.per_agent == {"opencode": 14} and s.quarantined == 0
    assert kinds(store, "opencode") == {
        ("user", "message"): 3,
        ("assistant", "message"): 2,
        ("assistant", "thinking"): 1,
        ("assistant", "tool_call"): 2,
        ("tool", "tool_result"): 2,
        ("system", "meta"): 4,
    }
    assert q(store, f"SELECT tool_name, {TEXT} FROM entries e WHERE kind='tool_result' ORDER BY ts") == [
        ("grep", "api/users.py:41: for user in users: user.orders.all()"),
        ("bash", "pytest: command not found"),
    ]
    # the sub-agent session points at its parent
    assert q(
        store,
        "SELECT DISTINCT session_id, parent_session_id, is_sidechain FROM entries "
        "WHERE parent_session_id IS NOT NULL",
    ) == [("ses_01JZfixtureTask", "ses_01JZfixtureMain", 1)]
    # the data: URL of the file part is not stored
    assert q(store, "SELECT count(*) FROM chunks WHERE text LIKE '%base64%'") == [(0,)]
    assert usage_by_day(store, "opencode") == {
        "2025-07-02": (1700, 370, 5000, 800),
        "2025-07-03": (300, 90, 6200, 0),
    }
    again = ingest(home, store, "opencode")
    assert again.files_read == 0 and again.entries_new == 0


def test_opencode_db_new_rows_once(tmp_path):
    import sqlite3

    home = tmp_path / "home"
    fixture_home("opencode", home)
    store = tmp_path / "store"
    ingest(home, store, "opencode")
    db = home / ".local/share/opencode/opencode.db"
    now = int(time.time() * 1000)
    w = sqlite3.connect(db)
    w.execute(
        "INSERT INTO message VALUES ('msg_a5','ses_01JZfixtureMain',?,?,?)",
        (now, now, json.dumps({"role": "user", "time": {"created": now}})),
    )
    w.execute(
        "INSERT INTO part VALUES ('prt_12','msg_a5','ses_01JZfixtureMain',?,?,?)",
        (now, now, json.dumps({"type": "text", "text": "And the index on orders.user_id?"})),
    )
    w.commit()
    w.close()
    s = ingest(home, store, "opencode")
    assert s.per_agent == {"opencode": 1}
    assert q(store, f"SELECT {TEXT} FROM entries e WHERE e.native_id='prt_12'") == [
        ("And the index on orders.user_id?",)
    ]
    assert ingest(home, store, "opencode").entries_new == 0


def _write_json(p: Path, obj) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(orjson.dumps(obj))


def test_tree_rewritten_in_place_is_read_again_without_duplicates(tmp_path):
    home = tmp_path / "home"
    corpus_part(STORAGE, home)
    st = home / STORAGE
    store = tmp_path / "store"
    assert ingest(home, store, "opencode").entries_new == 3
    # the agent appends a turn: a new user message and a streaming-complete assistant reply
    now = int(time.time() * 1000)
    _write_json(
        st / "message/test-session/msg-003.json",
        {"id": "msg-003", "sessionID": "test-session", "role": "user", "time": {"created": now}},
    )
    _write_json(
        st / "part/msg-003/part-003.json",
        {
            "id": "part-003",
            "sessionID": "test-session",
            "messageID": "msg-003",
            "type": "text",
            "text": "Sort a list of dicts by two keys.",
        },
    )
    _write_json(
        st / "message/test-session/msg-004.json",
        {
            "id": "msg-004",
            "sessionID": "test-session",
            "role": "assistant",
            "time": {"created": now + 1000},
            "modelID": "claude-3-5-sonnet-20241022",
        },
    )
    _write_json(
        st / "part/msg-004/part-004.json",
        {
            "id": "part-004",
            "sessionID": "test-session",
            "messageID": "msg-004",
            "type": "tool",
            "callID": "c1",
            "tool": "read",
            "state": {"status": "running", "input": {"path": "a.py"}},
        },
    )
    s = ingest(home, store, "opencode")
    # the running tool and the unfinished reply wait; the user turn is in
    assert s.entries_new == 1
    assert q(store, "SELECT count(*) FROM entries WHERE agent='opencode'") == [(4,)]
    # the agent finishes: the tool part and the message are rewritten in place
    _write_json(
        st / "part/msg-004/part-004.json",
        {
            "id": "part-004",
            "sessionID": "test-session",
            "messageID": "msg-004",
            "type": "tool",
            "callID": "c1",
            "tool": "read",
            "state": {"status": "completed", "input": {"path": "a.py"}, "output": "rows.sort(key=...)"},
        },
    )
    _write_json(
        st / "message/test-session/msg-004.json",
        {
            "id": "msg-004",
            "sessionID": "test-session",
            "role": "assistant",
            "time": {"created": now + 1000, "completed": now + 3000},
            "modelID": "claude-3-5-sonnet-20241022",
            "tokens": {"input": 20, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}},
        },
    )
    s = ingest(home, store, "opencode")
    assert s.entries_new == 3  # tool call, tool result, usage
    assert kinds(store, "opencode") == {
        ("user", "message"): 2,
        ("assistant", "message"): 1,
        ("assistant", "tool_call"): 1,
        ("tool", "tool_result"): 1,
        ("system", "meta"): 2,
    }
    assert ingest(home, store, "opencode").files_read == 0


def test_bad_json_file_is_quarantined(tmp_path):
    home = tmp_path / "home"
    corpus_part(STORAGE, home)
    bad = home / STORAGE / "part/msg-002/part-999.json"
    bad.write_text('{"id": "part-999", "type": "text", "text": "cut off', encoding="utf-8")
    store = tmp_path / "store"
    s = ingest(home, store, "opencode")
    assert s.entries_new == 3 and s.quarantined == 1
    assert q(store, "SELECT path, offset FROM quarantine") == [(str(bad), 0)]

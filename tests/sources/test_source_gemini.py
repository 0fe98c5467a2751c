"""Gemini CLI source: corpus files (JSON documents and the JSONL form), usage parity
with ccusage, rewrite without duplicates, ``$rewindTo``, bad documents."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS_HOME, corpus, ingest, q
from ctxkeep.sources import gemini_cli
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import kinds

PROJ_A = "3f1c0a6c9e5b4d2f8a7e6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e"
PROJ_B = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
DEC03 = f".gemini/tmp/{PROJ_A}/chats/session-2025-12-03T08-28-fc2fd534.json"
DEC24 = f".gemini/tmp/{PROJ_A}/chats/session-2025-12-24T06-27-36e8d28f.json"
JSONL = f".gemini/tmp/{PROJ_B}/chats/session-2026-05-01T10-00-fixture0.jsonl"

# `HOME=/work/shared/corpus/home ccusage daily --json --by-agent -z UTC --offline`
# (ccusage 20.0.24), agent "gemini": day, model -> input, output, cacheRead, cacheCreate
CCUSAGE_GEMINI = {
    ("2025-12-03", "gemini-3-pro-preview"): (34757, 203, 46793, 0),
    ("2025-12-03", "gemini-2.5-flash"): (26701, 1036, 71622, 0),
    ("2025-12-24", "gemini-2.5-pro"): (32438, 1108, 109989, 0),
    ("2025-12-24", "gemini-2.5-flash"): (25938, 760, 149072, 0),
    ("2026-04-29", "gemini-3-flash-preview"): (12422, 228, 11502, 0),
}


@pytest.fixture(scope="module")
def gemini_store(tmp_path_factory):
    corpus(DEC03)
    store = tmp_path_factory.mktemp("gemini-store")
    summary = ingest(CORPUS_HOME, store, agents=["gemini-cli"])
    return store, summary


def test_discovery_finds_both_formats_with_modes(corpus_ctx):
    d = gemini_cli.discover(corpus_ctx)
    got = {f.path.name: f.mode for f in d.files}
    assert got == {
        "session-2025-12-03T08-28-fc2fd534.json": "rewrite",
        "session-2025-12-08T17-35-9fae96a8.json": "rewrite",
        "session-2025-12-24T06-27-36e8d28f.json": "rewrite",
        "session-2026-05-01T10-00-fixture0.jsonl": "append",
    }
    assert d.reason is None


def test_gemini_cli_home_override(tmp_path):
    chats = tmp_path / "alt" / ".gemini" / "tmp" / "myproj" / "chats"
    chats.mkdir(parents=True)
    shutil.copy(corpus(JSONL), chats / "session-x.jsonl")
    (chats.parent / ".project_root").write_text("/home/dev/myproj")
    d = gemini_cli.discover(
        DiscoveryContext(home=tmp_path / "nohome", env={"GEMINI_CLI_HOME": str(tmp_path / "alt")})
    )
    assert [f.path for f in d.files] == [chats / "session-x.jsonl"]
    assert d.files[0].meta["project_dir"] == "/home/dev/myproj"


def test_entries_per_kind_sessions_and_tool_calls(gemini_store):
    store, summary = gemini_store
    assert summary.per_agent == {"gemini-cli": 172 + 47}
    assert summary.quarantined == 0
    # 8 user turns (3 + 4 + 1), 15 assistant texts, 51 thoughts, 43 tool calls each
    # with a result (42 in the JSON documents + 1 in the JSONL), 11 info/error messages,
    # one usage record per gemini message (15 + 30 + 2)
    assert kinds(store, "gemini-cli") == {
        "user/message": 8,
        "assistant/message": 15,
        "assistant/thinking": 51,
        "assistant/tool_call": 43,
        "tool/tool_result": 43,
        "system/meta": 11,
        "system/summary": 1,
        "assistant/meta": 47,
    }
    sessions = dict(q(store, "SELECT session_id, count(*) FROM entries WHERE agent='gemini-cli' GROUP BY 1"))
    assert set(sessions) == {
        "fc2fd534-30d6-4f3e-b843-7c72c66d4e89",
        "9fae96a8-acbd-4dff-bdfe-843155dbe0e2",
        "36e8d28f-d561-4a3d-8823-4964a2919723",
        "gemini_stage0_jsonl",
    }
    assert sessions["9fae96a8-acbd-4dff-bdfe-843155dbe0e2"] == 2
    tools = dict(
        q(
            store,
            "SELECT tool_name, count(*) FROM entries WHERE agent='gemini-cli' "
            "AND kind='tool_call' GROUP BY 1",
        )
    )
    assert tools["run_shell_command"] == 1 + sum(
        1
        for p in (DEC03, DEC24)
        for m in json.loads(corpus(p).read_text())["messages"]
        for tc in m.get("toolCalls") or []
        if tc["name"] == "run_shell_command"
    )
    summ = q(
        store,
        "SELECT text FROM entries e JOIN contents c ON c.content_hash=e.content_hash "
        "JOIN chunks ch ON ch.content_id=c.content_id WHERE e.kind='summary' AND e.agent='gemini-cli'",
    )
    assert summ == [("Set up Gemini-Playground and its context.",)]


def test_offsets_point_at_the_message_in_the_document(gemini_store):
    store, _ = gemini_store
    (off,) = q(
        store, "SELECT source_offset FROM entries WHERE native_id='fd18ba1d-1de0-40bb-a6c8-af9e9f3dc70c'"
    )[0]
    raw = corpus(DEC03).read_bytes()
    assert raw[off : off + 50].startswith(b'"id": "fd18ba1d-1de0-40bb-a6c8-af9e9f3dc70c"')


def test_usage_per_day_equals_ccusage(gemini_store):
    store, _ = gemini_store
    rows = q(
        store,
        "SELECT substr(ts, 1, 10), model, sum(input_tokens), sum(output_tokens), "
        "sum(cache_read_tokens), sum(cache_creation_tokens) FROM usage "
        "WHERE agent='gemini-cli' GROUP BY 1, 2",
    )
    assert {(d, m): tuple(v) for d, m, *v in rows} == CCUSAGE_GEMINI
    # thoughts are kept apart (ccusage counts them only in its totalTokens)
    assert q(store, "SELECT sum(reasoning_tokens) FROM usage WHERE agent='gemini-cli'") == [
        (733 + 577 + 1288 + 931,)
    ]
    # the DuckDB daily view agrees
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    try:
        got = con.execute(
            "SELECT CAST(day AS VARCHAR), model, sum(input_tokens), sum(output_tokens), "
            "sum(cache_read_tokens), sum(cache_creation_tokens) FROM daily_usage "
            "WHERE agent='gemini-cli' GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert {(d, m): tuple(v) for d, m, *v in got} == CCUSAGE_GEMINI


def _home_with(tmp_path: Path, rel: str, data: bytes) -> tuple[Path, Path]:
    home = tmp_path / "home"
    p = home / rel
    p.parent.mkdir(parents=True)
    p.write_bytes(data)
    old = p.stat().st_mtime - 3600
    os.utime(p, (old, old))
    return home, p


def _rewrite(p: Path, doc: dict) -> None:
    # the way Gemini CLI writes it: pretty-printed, no trailing newline, in place
    with open(p, "r+b") as f:
        f.truncate(0)
        f.write(json.dumps(doc, indent=2, ensure_ascii=False).encode())
    st = p.stat()
    os.utime(p, (st.st_atime, st.st_mtime + 5))


def test_rewritten_document_with_more_messages_adds_only_them(tmp_path):
    src = json.loads(corpus(DEC03).read_text())
    first = dict(src, messages=src["messages"][:10])
    home, p = _home_with(tmp_path, DEC03, json.dumps(first, indent=2).encode())
    store = tmp_path / "store"
    s1 = ingest(home, store)
    n1 = s1.entries_new
    ino = p.stat().st_ino
    _rewrite(p, src)  # all 20 messages: the agent rewrote the file in place
    assert p.stat().st_ino == ino
    s2 = ingest(home, store)
    # a fresh store reading the full document directly holds exactly as many entries
    ref = tmp_path / "ref-store"
    home2, _ = _home_with(tmp_path / "b", DEC03, json.dumps(src, indent=2).encode())
    total = ingest(home2, ref).entries_new
    assert s2.entries_new == total - n1 > 0
    assert q(store, "SELECT count(*), count(DISTINCT entry_id) FROM entries") == [(total, total)]
    assert q(store, "SELECT count(*) FROM entries WHERE status<>'active'") == [(0,)]
    # unchanged file: nothing read, nothing added
    s3 = ingest(home, store)
    assert (s3.files_read, s3.entries_new) == (0, 0)
    # the same bytes with a new mtime: hash unchanged, no entries
    os.utime(p, (p.stat().st_atime, p.stat().st_mtime + 5))
    s4 = ingest(home, store)
    assert (s4.files_read, s4.entries_new, s4.bytes) == (1, 0, 0)


def _jsonl(*recs) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in recs)


META = {
    "sessionId": "s-rw",
    "projectHash": "abc",
    "startTime": "2026-05-01T10:00:00.000Z",
    "lastUpdated": "2026-05-01T10:00:00.000Z",
    "kind": "main",
}


def _msg(i, typ, text, **kw):
    return dict(
        {"id": f"m{i}", "timestamp": f"2026-05-01T10:00:0{i}.000Z", "type": typ, "content": text}, **kw
    )


def _statuses(store: Path) -> dict[str, str]:
    return dict(
        q(
            store,
            "SELECT message_id, min(status) FROM entries WHERE session_id='s-rw' "
            "AND message_id IS NOT NULL GROUP BY 1",
        )
    )


def test_rewind_marks_rewound_messages_and_reaches_duckdb(tmp_path):
    rel = ".gemini/tmp/p/chats/session-2026-05-01T10-00-srw00000.jsonl"
    home, p = _home_with(
        tmp_path,
        rel,
        _jsonl(
            META,
            _msg(1, "user", [{"text": "write a haiku"}]),
            _msg(2, "gemini", "Autumn moon…", model="gemini-2.5-pro"),
            _msg(3, "user", [{"text": "make it about rust"}]),
            _msg(4, "gemini", "Borrow checker sighs", model="gemini-2.5-pro"),
        ),
    )
    store = tmp_path / "store"
    s1 = ingest(home, store)
    assert s1.entries_new == 4
    assert _statuses(store) == {"m1": "active", "m2": "active", "m3": "active", "m4": "active"}
    with open(p, "ab") as f:  # the user rewinds to m3 and asks again
        f.write(
            _jsonl(
                {"$rewindTo": "m3"},
                _msg(5, "user", [{"text": "make it about python"}]),
                {"$set": {"lastUpdated": "2026-05-01T10:00:09.000Z"}},
            )
        )
    s2 = ingest(home, store)
    assert s2.entries_new == 1 and s2.status_changed == 1
    # the message with the rewind id and every later one leave the active entries
    assert _statuses(store) == {
        "m1": "active",
        "m2": "active",
        "m3": "rewound",
        "m4": "rewound",
        "m5": "active",
    }
    assert q(store, "SELECT count(*) FROM entries WHERE session_id='s-rw' AND status='active'") == [(3,)]
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    try:
        duck = dict(con.execute("SELECT message_id, status FROM entries WHERE session_id='s-rw'").fetchall())
    finally:
        con.close()
    assert duck == {"m1": "active", "m2": "active", "m3": "rewound", "m4": "rewound", "m5": "active"}
    # a second run changes nothing
    s3 = ingest(home, store)
    assert (s3.entries_new, s3.status_changed) == (0, 0)


def test_rewind_seen_in_the_same_read_and_unknown_id(tmp_path):
    rel = ".gemini/tmp/p/chats/session-x.jsonl"
    home, p = _home_with(
        tmp_path,
        rel,
        _jsonl(
            META, _msg(1, "user", "a"), _msg(2, "gemini", "b"), {"$rewindTo": "m2"}, _msg(3, "gemini", "c")
        ),
    )
    store = tmp_path / "store"
    ingest(home, store)
    assert _statuses(store) == {"m1": "active", "m2": "rewound", "m3": "active"}
    with open(p, "ab") as f:  # an id the file never had: Gemini CLI clears everything
        f.write(_jsonl({"$rewindTo": "nope"}))
    ingest(home, store)
    assert set(_statuses(store).values()) == {"rewound"}


def test_message_recorded_again_with_tokens_counts_usage_once(tmp_path):
    rel = ".gemini/tmp/p/chats/session-y.jsonl"
    call = {
        "id": "c1",
        "name": "read_file",
        "args": {"path": "a.py"},
        "status": "success",
        "result": [
            {"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "print(1)"}}}
        ],
    }
    tokens = {"input": 1000, "output": 50, "cached": 400, "thoughts": 7, "tool": 0, "total": 1057}
    home, p = _home_with(
        tmp_path,
        rel,
        _jsonl(
            META,
            _msg(1, "user", "read a.py"),
            _msg(
                2,
                "gemini",
                "",
                model="gemini-2.5-flash",
                toolCalls=[dict(call, result=None, status="executing")],
            ),
            _msg(2, "gemini", "", model="gemini-2.5-flash", toolCalls=[call]),
            _msg(2, "gemini", "", model="gemini-2.5-flash", toolCalls=[call], tokens=tokens),
        ),
    )
    store = tmp_path / "store"
    ingest(home, store)
    assert kinds(store, "gemini-cli") == {
        "user/message": 1,
        "assistant/tool_call": 1,
        "tool/tool_result": 1,
        "assistant/meta": 1,
    }
    assert q(store, "SELECT input_tokens, output_tokens, cache_read_tokens, reasoning_tokens FROM usage") == [
        (600, 50, 400, 7)
    ]


def test_document_losing_messages_marks_them_rewound(tmp_path):
    src = json.loads(corpus(DEC24).read_text())
    home, p = _home_with(tmp_path, DEC24, json.dumps(src, indent=2).encode())
    store = tmp_path / "store"
    ingest(home, store)
    gone = [m["id"] for m in src["messages"][-5:]]
    _rewrite(p, dict(src, messages=src["messages"][:-5]))
    s2 = ingest(home, store)
    assert s2.entries_new == 0
    rewound = {r[0] for r in q(store, "SELECT DISTINCT message_id FROM entries WHERE status='rewound'")}
    assert rewound == set(gone)


def test_bad_document_is_quarantined_and_the_run_goes_on(tmp_path):
    good = corpus(DEC24).read_bytes()
    home, p = _home_with(tmp_path, DEC03, good[: len(good) // 2])  # torn write
    shutil.copy(corpus(JSONL), p.parent / "session-ok.jsonl")
    store = tmp_path / "store"
    s = ingest(home, store)
    assert s.quarantined == 1
    assert s.per_agent["gemini-cli"] == 6  # the JSONL file still went in (4 + 2 usage)
    ((path, off, length, reason),) = q(store, "SELECT path, offset, length, reason FROM quarantine")
    assert (path, off, length) == (str(p), 0, len(good) // 2)
    assert reason.startswith("malformed JSON")
    # the agent finishes writing: the next run ingests it
    _rewrite(p, json.loads(good))
    s2 = ingest(home, store)
    assert s2.entries_new > 0 and s2.quarantined == 0


def test_document_caught_mid_write_is_retried_not_quarantined(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "120")  # the rule under test (conftest sets 0)
    good = corpus(DEC24).read_bytes()
    home, p = _home_with(tmp_path, DEC24, good[:1000])
    os.utime(p, None)  # modified just now: the agent is writing it
    store = tmp_path / "store"
    s1 = ingest(home, store)
    assert (s1.quarantined, s1.entries_new) == (0, 0)
    p.write_bytes(good)  # the write completes
    s2 = ingest(home, store)
    assert s2.quarantined == 0 and s2.entries_new > 100


def test_subagent_session_links_to_its_parent(tmp_path):
    rel = ".gemini/tmp/p/chats/parent-session-id/sub-1.jsonl"
    home, p = _home_with(
        tmp_path,
        rel,
        _jsonl(
            {"sessionId": "sub-1", "projectHash": "h", "kind": "subagent", "directories": ["/home/dev/app"]},
            _msg(1, "user", "investigate the flaky test"),
            _msg(2, "gemini", "It races on the port."),
        ),
    )
    d = gemini_cli.discover(DiscoveryContext(home=home, env={}))
    assert [(f.path, f.meta["parent_session"]) for f in d.files] == [(p, "parent-session-id")]
    store = tmp_path / "store"
    ingest(home, store)
    assert q(
        store, "SELECT DISTINCT session_id, parent_session_id, is_sidechain, project_dir FROM entries"
    ) == [("sub-1", "parent-session-id", 1, "/home/dev/app")]

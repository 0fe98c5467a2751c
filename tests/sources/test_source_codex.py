"""Codex source against the real corpus (shared/corpus/home/.codex/sessions)."""

from __future__ import annotations

import json
import sqlite3

from conftest import CORPUS_HOME, corpus
from ctxkeep.sources import codex
from ctxkeep.sources.contract import SourceFile

S = ".codex/sessions/"
V040 = S + "2025/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl"
TINY = S + "2025/10/31/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"
V034 = S + "2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
V058 = S + "2025/11/13/rollout-2025-11-13T18-21-11-019a802a-aab1-7c31-9831-d2510c7a74a2.jsonl"
USEREQ = S + "2025/12/15/rollout-2025-12-15T14-44-44-019b2241-a0a9-7740-a0c0-33c010d4f7e6.jsonl"
SYNTHETIC = S + "2026/07/01/rollout-2026-07-01T00-00-00-fixture-small.jsonl"
DUP_EVENTS = {"user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content"}


def _read(rel: str):
    entries, quarantine, lines = [], [], 0
    for b in codex.read(SourceFile("codex", corpus(rel)), None):
        entries += b.entries
        quarantine += b.quarantine
        lines += b.lines
    return entries, quarantine, lines


def _kinds(entries):
    out: dict = {}
    for e in entries:
        out[e["kind"]] = out.get(e["kind"], 0) + 1
    return out


def _dup_event_lines(rel: str) -> int:
    """Lines that are event_msg repeats of a response_item (counted from the file)."""
    n = 0
    for line in corpus(rel).read_bytes().splitlines():
        r = json.loads(line)
        if r.get("type") == "event_msg" and (r.get("payload") or {}).get("type") in DUP_EVENTS:
            n += 1
    return n


def test_discovery(corpus_ctx, tmp_path):
    d = codex.discover(corpus_ctx)
    assert sorted(str(f.path.relative_to(CORPUS_HOME)) for f in d.files) == sorted(
        [V040, TINY, V034, V058, USEREQ, SYNTHETIC]
    )
    from ctxkeep.sources.contract import DiscoveryContext

    arch = tmp_path / "codex" / "archived_sessions" / "2025"
    arch.mkdir(parents=True)
    (arch / "rollout-x.jsonl").write_bytes(corpus(TINY).read_bytes())
    d2 = codex.discover(DiscoveryContext(home=CORPUS_HOME, env={"CODEX_HOME": str(tmp_path / "codex")}))
    assert [f.path.name for f in d2.files] == ["rollout-x.jsonl"]
    assert d2.files[0].meta == {"archived": True}


def test_records_and_kinds_per_file():
    expected = {  # lines, entries per kind
        V040: (202, {"message": 24, "meta": 65, "thinking": 27, "tool_call": 17, "tool_result": 17}),
        TINY: (2, {"meta": 2}),
        V034: (1612, {"message": 125, "meta": 458, "thinking": 104, "tool_call": 400, "tool_result": 400}),
        V058: (309, {"message": 2, "meta": 133, "thinking": 43, "tool_call": 42, "tool_result": 42}),
        USEREQ: (249, {"message": 2, "meta": 111, "thinking": 32, "tool_call": 35, "tool_result": 35}),
    }
    for rel, (lines, kinds) in expected.items():
        entries, quarantine, n = _read(rel)
        assert n == lines, rel
        assert quarantine == [], rel
        assert _kinds(entries) == kinds, rel
        # one entry per line, except the event_msg copies of response_item messages
        assert len(entries) == lines - _dup_event_lines(rel), rel


def test_event_copies_not_stored_twice():
    entries, _, _ = _read(V034)
    user = [e for e in entries if e["role"] == "user" and e["kind"] == "message"]
    # 63 user turns: each logged as a response_item message and a user_message event
    assert len(user) == 63
    assert len(entries) == 1612 - 63 - 62


def test_reasoning_summary_never_encrypted_content():
    entries, _, _ = _read(V040)
    th = [e for e in entries if e["kind"] == "thinking"]
    assert len(th) == 27
    assert not any("gAAAAA" in e["text"] for e in entries)
    assert th[0]["text"].startswith("**")  # summary_text is a bold heading line


def test_function_call_arguments_decoded():
    entries, _, _ = _read(V034)
    calls = [e for e in entries if e["kind"] == "tool_call"]
    assert {e["tool_name"] for e in calls} == {"shell", "update_plan"}
    shell = next(e for e in calls if e["tool_name"] == "shell")
    assert shell["text"].startswith("bash -lc ") and not shell["text"].startswith("{")
    outs = [e for e in entries if e["kind"] == "tool_result"]
    assert len({e["native_id"] for e in outs}) == 400
    assert not any(e["text"].startswith('{"output"') for e in outs)


def test_custom_tool_call():
    entries, _, _ = _read(V058)
    patch = [e for e in entries if e.get("tool_name") == "apply_patch"]
    assert len(patch) == 1 and patch[0]["text"].startswith("*** Begin Patch")


def test_model_and_project():
    v034, _, _ = _read(V034)
    assert {e["model"] for e in v034} == {None}  # 0.34 logs no model at all
    assert {e["project_dir"] for e in v034} == {"/home/randy/projects/python-3/OpenPrintKit"}
    v040, _, _ = _read(V040)
    # 0.40 names the model in turn_context; usage rows carry it
    assert {e["model"] for e in v040 if e.get("usage_key")} == {"gpt-5-codex"}


def test_usage_is_delta_of_cumulative_totals():
    entries, _, _ = _read(USEREQ)
    usage = [e for e in entries if e.get("usage_key")]
    # 72 token_count events: the first has info null, 35 re-emit the previous total
    assert len(usage) == 36
    assert sum(e["input_tokens"] for e in usage) == 86382
    assert sum(e["cache_read_tokens"] for e in usage) == 501760
    assert sum(e["output_tokens"] for e in usage) == 21871


def test_multiple_session_meta_and_forks():
    entries, q, n = _read(SYNTHETIC)
    assert q == [] and n == 113 + _dup_event_lines(SYNTHETIC)
    first = "019fc8be-3658-7ca3-9e29-000000000000"
    assert {e["session_id"] for e in entries} == {first}
    # records after a later session_meta (sub-agent thread / fork) are linked to it
    linked = [e for e in entries if e["parent_session_id"]]
    assert len(linked) == 88
    usage = [e for e in entries if e.get("usage_key")]
    # the sub-agent thread restarts its totals at 0: it adds nothing, and is not a
    # negative delta of the parent thread
    assert [(e["input_tokens"], e["output_tokens"], e["cache_read_tokens"]) for e in usage] == [
        (12757, 81, 3584)
    ]


def test_store_sessions(corpus_store):
    home, _ = corpus_store
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT session_id, count(*) FROM entries WHERE agent='codex' GROUP BY 1 ORDER BY 1"
    ).fetchall()
    conn.close()
    assert rows == [
        ("019985ca-7ef7-7580-a921-c20ac619f40b", 150),
        ("019a802a-aab1-7c31-9831-d2510c7a74a2", 262),
        ("019b2241-a0a9-7740-a0c0-33c010d4f7e6", 215),
        ("019fc8be-3658-7ca3-9e29-000000000000", 113),
        ("c61729d4-da6d-46a4-9a29-ec2c614e5e23", 1487),
        ("fa1ac8bf-348e-4b9a-a06d-767050fa1e10", 2),
    ]

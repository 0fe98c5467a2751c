"""The helpers new sources share (``sources._util``, ``readers.sqlite``): the OpenAI
chat-message loop (an assistant's ``tool_calls`` answered by ``tool`` messages by
id), the cached companion-JSON read, and the row collector's quarantine of a damaged
row while the other rows are kept."""

from __future__ import annotations

import os

from ctxkeep.sources._util import json_object, openai_message_entries, openai_tool_calls, title_entry
from ctxkeep.sources.readers.sqlite import RowCollector, json_object_of, resume_mark

BASE = {"agent": "x", "session_id": "s", "record_id": "s:1"}


def test_openai_loop_pairs_calls_and_results_by_id():
    assistant = {
        "role": "assistant",
        "content": "Looking.",
        "reasoning_content": "grep first",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"q":"x"}'}},
            {"id": "c2", "name": "read", "input": {"path": "a.py"}},
            "not a call",
        ],
    }
    got = openai_message_entries(assistant, BASE)
    assert [(e["part"], e["kind"], e.get("native_id"), e.get("tool_name"), e["text"]) for e in got] == [
        (0, "thinking", None, None, "grep first"),
        (1, "message", None, None, "Looking."),
        (2, "tool_call", "c1", "grep", '{"q":"x"}'),
        (3, "tool_call", "c2", "read", '{"path":"a.py"}'),
    ]
    result = openai_message_entries(
        {"role": "tool", "tool_call_id": "c1", "name": "grep", "content": "a.py:1"}, BASE
    )
    assert [(e["role"], e["kind"], e["native_id"], e["tool_name"], e["text"]) for e in result] == [
        ("tool", "tool_result", "c1", "grep", "a.py:1")
    ]
    assert (
        openai_message_entries({"role": "developer", "content": "rules"}, BASE)[0]["tool_name"] == "developer"
    )
    assert openai_tool_calls(None, BASE) == []
    assert openai_tool_calls([{"id": "c3", "function": {"name": "ls"}}], BASE, 5)[0]["part"] == 5


def test_json_object_is_read_again_only_when_it_changed(tmp_path):
    p = tmp_path / "meta.json"
    assert json_object(p) == {}
    p.write_text('{"title": "one"}')
    assert json_object(p) == {"title": "one"}
    p.write_text('{"title": "two", "x": 1}')
    os.utime(p, ns=(1, 2_000_000_000))
    assert json_object(p) == {"title": "two", "x": 1}
    p.write_text("[1, 2]")
    assert json_object(p) == {}
    assert title_entry("x", "s", "T", "/f")["record_id"] == "s:title:T"


def test_row_collector_quarantines_a_damaged_row_and_keeps_the_rest(tmp_path):
    rows = RowCollector(tmp_path / "a.db", reset=True)
    good = rows.add(
        1, b'{"t": "hi"}', "items", lambda u: [dict(BASE, text=json_object_of(b'{"t": "hi"}', "v")["t"])]
    )
    bad = rows.add(2, b"{not json", "items", lambda u: [json_object_of(b"{not json", "v")])
    odd = rows.add(3, b"[1]", "items", lambda u: u.append("shape:list") or [])
    assert good == [dict(BASE, text="hi")] and bad is None and odd == []
    assert rows.rows == 3 and rows.bytes == len(b'{"t": "hi"}') + len(b"{not json") + 3
    assert [(q["offset"], q["reason"].split(":")[0]) for q in rows.quarantine] == [(2, "items row 2")]
    tally = rows.tally.version("")
    assert (tally.records, tally.parsed, tally.quarantined, list(tally.unknown)) == (3, 1, 1, ["shape:list"])
    assert resume_mark({"mark": {"rowid": 9}}, 4) == {} and resume_mark({"mark": {"rowid": 3}}, 4) == {
        "rowid": 3
    }

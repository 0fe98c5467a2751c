"""The MCP stdio transport answers every malformed message (``ctxkeep.mcp.stdio``):
-32700 for invalid JSON, -32600 for an invalid request, -32602 for invalid params, as
JSON-RPC 2.0 §5.1 says; and a long ``ctx_index`` does not hold up a ``ctx_search``.

The whole-process tests speak raw JSON-RPC lines to ``ctxkeep mcp`` (an SDK client
would refuse to send these messages)."""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import string
import subprocess
import sys
import time

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkeep.mcp.stdio import check_line


class RawClient:
    """``ctxkeep mcp`` as a subprocess, spoken to line by line."""

    def __init__(self, home, cwd=None):
        self.p = subprocess.Popen(
            [sys.executable, "-m", "ctxkeep", "mcp", "--home", str(home)],
            cwd=str(cwd) if cwd else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self.buf = b""
        self.send_obj(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        assert self.recv(60)["id"] == "init"
        self.send_obj({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, line: str) -> None:
        self.p.stdin.write(line.encode() + b"\n")

    def send_obj(self, obj) -> None:
        self.send(json.dumps(obj))

    def recv(self, timeout: float) -> dict | None:
        """The next reply line as an object, or None after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 20)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> str:
        self.p.stdin.close()
        self.p.wait(30)
        return self.p.stderr.read().decode()


# (line sent, code, id expected in the reply)
MALFORMED = [
    ("not json at all", -32700, None),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/list"', -32700, None),  # cut off
    ('{"jsonrpc":"2.0","id":2}', -32600, 2),  # no method
    ('{"jsonrpc":"1.0","id":3,"method":"tools/list"}', -32600, 3),
    ('{"id":"four","method":"tools/list"}', -32600, "four"),  # no jsonrpc member
    ('{"jsonrpc":"2.0","id":5,"method":5}', -32600, 5),
    ('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}', -32600, 6),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}', -32602, 7),
    ('{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, None),  # id unreadable
    ('{"jsonrpc":"2.0","id":true,"method":"tools/list"}', -32600, None),
    ('{"jsonrpc":"2.0","id":null,"method":"tools/list"}', -32600, None),
    ('{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', -32600, 1.5),  # JSON-RPC's, not MCP's: echoed
    ('[{"jsonrpc":"2.0","id":2.5,"method":"ping"}]', -32600, 2.5),
    (  # nested past what the SDK's parser takes: the id, read from the top level
        '{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"ctx_stats","arguments":{"a":'
        + "[" * 300
        + "]" * 300
        + "}}}",
        -32600,
        "deep",
    ),
    (
        '{"jsonrpc":"2.0","method":"ping","params":{"a":' + "[" * 5000 + "]" * 5000 + '},"id":"deeper"}',
        -32600,
        "deeper",
    ),
    ("[]", -32600, None),
    ('[{"jsonrpc":"2.0","id":14,"method":"tools/list"}]', -32600, 14),
    ("5", -32600, None),
    ('"a string"', -32600, None),
    # these the SDK answers itself: params of a known method, unknown method
    ('{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{}}', -32602, 20),
    (
        '{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"ctx_stats","arguments":[1]}}',
        -32602,
        21,
    ),
    ('{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":5}}', -32602, 22),
    ('{"jsonrpc":"2.0","id":23,"method":"no/such"}', -32601, 23),
]


@pytest.mark.parametrize("line,code,rid", MALFORMED, ids=[m[0][:40] for m in MALFORMED])
def test_check_line(line, code, rid):
    replies = check_line(line)
    if code in (-32601,) or rid in (20, 21, 22):  # valid envelopes: the SDK's part
        assert replies == []
        return
    assert [(r["error"]["code"], r["id"]) for r in replies] == [(code, rid)]
    assert all(r["jsonrpc"] == "2.0" and r["error"]["message"] for r in replies)


def test_two_objects_on_one_line_are_two_messages():
    from ctxkeep.mcp.stdio import split_line

    a, b = '{"jsonrpc":"2.0","id":1,"method":"ping"}', '{"jsonrpc":"2.0","id":"two","method":"ping"}'
    assert split_line(a + b) == ([a, b], [])
    assert split_line(a + " " + b + "\n") == ([a, b], [])
    # a valid one, then a broken one: the first passes, the rest is a parse error
    passed, replies = split_line(a + '{"jsonrpc":')
    assert passed == [a] and [(r["id"], r["error"]["code"]) for r in replies] == [(None, -32700)]
    # a valid one and one MCP cannot take: each its own fate, each with its id
    passed, replies = split_line(a + '{"jsonrpc":"2.0","id":1.5,"method":"ping"}')
    assert passed == [a] and [(r["id"], r["error"]["code"]) for r in replies] == [(1.5, -32600)]


def test_valid_messages_and_responses_pass():
    assert check_line('{"jsonrpc":"2.0","id":1,"method":"tools/list"}') == []
    assert check_line('{"jsonrpc":"2.0","method":"notifications/initialized"}') == []
    assert check_line('{"jsonrpc":"2.0","id":"x","result":{}}') == []
    assert check_line('{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}') == []
    assert check_line("   ") == []
    # a malformed response is dropped, never answered (no reply loops between peers)
    assert check_line('{"jsonrpc":"2.0","id":3,"result":5}') == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_envelope = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.none() | st.booleans() | st.integers() | st.text(max_size=4) | st.floats() | st.just({}),
        "method": st.sampled_from(["tools/list", "ping"]) | st.integers(),
        "params": st.none() | st.just({}) | st.lists(st.integers(), max_size=2) | st.text(max_size=3),
        "result": st.just({}) | st.integers(),
        "error": st.just({"code": 1, "message": "m"}) | st.just({}),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_envelope, _json))
def test_every_line_is_answered_or_accepted_by_the_sdk(obj):
    """Property: a line check_line passes is one the SDK's models accept, and a
    request with a usable id that the SDK would reject always gets a reply."""
    line = json.dumps(obj)
    replies = check_line(line)
    try:
        msg = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:
        msg = None
    if not replies:
        is_response = isinstance(obj, dict) and "method" not in obj and ("result" in obj or "error" in obj)
        assert msg is not None or is_response, line
        if isinstance(obj, dict) and "id" in obj and "method" in obj:
            assert isinstance(msg, types.JSONRPCRequest), line  # never mistaken for a notification
    for r in replies:
        assert r["error"]["code"] in (-32700, -32600, -32602)
        assert r["id"] is None or r["id"] == (obj.get("id") if isinstance(obj, dict) else r["id"])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_never_raise(data):
    for r in check_line(data.decode("utf-8", "replace")):
        assert r["error"]["code"] in (-32700, -32600)


@pytest.mark.slow  # spawns the server
def test_every_malformed_request_gets_a_reply_over_stdio(tmp_path):
    c = RawClient(tmp_path / "home", tmp_path)
    try:
        for line, code, rid in MALFORMED:
            c.send(line)
            r = c.recv(20)
            assert r is not None, f"no reply to {line!r}"
            assert r["error"]["code"] == code and r["id"] == rid, (line, r)
        c.send_obj({"jsonrpc": "2.0", "id": 99, "method": "ping"})  # the connection still works
        assert c.recv(20) == {"jsonrpc": "2.0", "id": 99, "result": {}}
        # two requests on one line: each answered, with its own id
        c.send('{"jsonrpc":"2.0","id":100,"method":"ping"}{"jsonrpc":"2.0","id":"101","method":"ping"}')
        assert sorted([json.dumps(c.recv(20)), json.dumps(c.recv(20))]) == sorted(
            [
                json.dumps({"jsonrpc": "2.0", "id": 100, "result": {}}),
                json.dumps({"jsonrpc": "2.0", "id": "101", "result": {}}),
            ]
        )
    finally:
        err = c.close()
    assert "Traceback" not in err, err
    assert c.p.returncode == 0


@pytest.mark.slow  # spawns the server
def test_nul_bytes_and_a_huge_note_are_clear_tool_errors(corpus_store, tmp_path):
    """A NUL character in a query, a filter or a path, and a note over the size cap:
    one-line tool errors saying what to do, never "internal error", no traceback in the
    server's log."""
    src, _ = corpus_store
    home = tmp_path / "home"
    shutil.copytree(src, home, ignore=shutil.ignore_patterns("*.lock"))
    calls = {
        "q": ("ctx_search", {"queries": ["python\u0000 command"]}),
        "f": ("ctx_search", {"queries": ["python"], "filters": {"project": "/tmp/a\u0000b"}}),
        "p": ("ctx_index", {"label": "x", "path": "notes\u0000.md"}),
        "i": ("ctx_fetch", {"ids": ["abc\u0000def"]}),
        "big": ("ctx_index", {"label": "big", "text": "word " * 1_700_000}),  # 8.5 MB > 8 MB
    }
    c = RawClient(home, tmp_path)
    try:
        got = {}
        for rid, (name, args) in calls.items():
            c.send_obj(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": args},
                }
            )
            r = c.recv(60)
            got[r["id"]] = r["result"]
    finally:
        err = c.close()
    for rid in ("q", "f", "p", "i"):
        assert got[rid]["isError"], rid
        text = got[rid]["content"][0]["text"]
        assert text.startswith("error: a NUL character (\\x00) is not allowed") and "internal" not in text, (
            text
        )
    big = got["big"]["content"][0]["text"]
    assert got["big"]["isError"] and "8,500,000 bytes, over the 8 MB limit of a note" in big, big
    assert "max_index_mb" in big
    assert "Traceback" not in err and "failed" not in err, err


def _words_file(path, size: int) -> None:
    rnd = random.Random(11)
    words = [
        "".join(rnd.choice(string.ascii_lowercase) for _ in range(rnd.randint(3, 10))) for _ in range(5000)
    ]
    with open(path, "w") as f:
        n = 0
        while n < size:
            line = " ".join(rnd.choice(words) for _ in range(12)) + "\n"
            f.write(line)
            n += len(line)


@pytest.mark.slow  # spawns the server and indexes 60 MB
def test_search_answers_while_a_60mb_index_runs(corpus_store, tmp_path):
    src, _ = corpus_store
    home = tmp_path / "home"
    shutil.copytree(src, home, ignore=shutil.ignore_patterns("*.lock"))
    (home / "config.toml").write_text("[mcp]\nmax_index_mb = 64\n")  # over the default cap of a note
    big = tmp_path / "big.md"
    _words_file(big, 60_000_000)
    c = RawClient(home, tmp_path)
    try:
        t0 = time.monotonic()
        c.send_obj(
            {"jsonrpc": "2.0", "id": "index", "method": "tools/call",
             "params": {"name": "ctx_index", "arguments": {"label": "big", "path": str(big)}}}
        )  # fmt: skip
        time.sleep(0.5)
        t1 = time.monotonic()
        c.send_obj(
            {"jsonrpc": "2.0", "id": "search", "method": "tools/call",
             "params": {"name": "ctx_search", "arguments": {"queries": ["python: command not found"], "limit": 3}}}
        )  # fmt: skip
        first = c.recv(300)
        t_first = time.monotonic()
        second = c.recv(300)
        t_second = time.monotonic()
    finally:
        c.close()
    # the search is answered first, while the index still works, and finds its hit
    assert first["id"] == "search" and second["id"] == "index", (first, second)
    hits = first["result"]["structuredContent"]["results"][0]["hits"]
    assert hits and hits[0]["session_id"].startswith("019a802a")
    assert second["result"]["structuredContent"]["bytes"] == big.stat().st_size
    print(f"ctx_index 60 MB: {t_second - t0:.2f} s; concurrent ctx_search answered in {t_first - t1:.2f} s")


@pytest.mark.slow  # spawns the server
def test_every_request_before_eof_is_answered(corpus_store, tmp_path):
    """A client that writes its requests and closes stdin at once (``printf ... |
    ctxkeep mcp``) gets a reply to each one: the SDK's loop used to end at EOF and
    cancel the ``ctx_search`` still running, so only ``initialize`` (and ``ping``)
    came back."""
    src, _ = corpus_store
    home = tmp_path / "home"
    shutil.copytree(src, home, ignore=shutil.ignore_patterns("*.lock"))
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "ctx_search", "arguments": {"queries": ["setSectionResizeMode"], "limit": 2}}},
        {"jsonrpc": "2.0", "id": "s2", "method": "tools/call",
         "params": {"name": "ctx_search", "arguments": {"queries": ["python: command not found"], "limit": 1}}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]  # fmt: skip
    stdin = "".join(json.dumps(o) + "\n" for o in lines).encode()
    p = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "mcp", "--home", str(home)],
        input=stdin, capture_output=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    replies = {r["id"]: r for r in map(json.loads, p.stdout.decode().splitlines())}
    assert sorted(replies, key=str) == [1, 2, 3, "s2"], p.stdout.decode()
    hits = replies["s2"]["result"]["structuredContent"]["results"][0]["hits"]
    assert hits and hits[0]["session_id"].startswith("019a802a")
    assert replies[2]["result"]["structuredContent"]["results"][0]["hits"]

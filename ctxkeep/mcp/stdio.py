"""The stdio transport of ``ctxkeep mcp``: the SDK's ``stdio_server`` behind a line
filter that answers every malformed message the SDK would drop.

mcp 2.3.0's ``stdio_server`` validates each line with ``jsonrpc_message_adapter``
and, on failure, passes the exception to the dispatcher, which logs it at debug and
sends nothing (``JSONRPCDispatcher._dispatch``); a line whose ``id`` is ``null``,
``true`` or an object validates as a *notification* (extra keys are allowed) and is
dropped too. A client waiting on that id hangs. JSON-RPC 2.0 (jsonrpc.org/specification
§5, §5.1) wants a reply instead: -32700 for invalid JSON, -32600 for a message that
is not a valid request, with the request's id, or ``null`` when the id cannot be
read. The filter below checks each line before the SDK sees it, writes those
replies through the SDK's own write stream (so frames never interleave) and passes
every valid line on unchanged. Invalid *params* of a known method (-32602) and
unknown methods (-32601) are answered by the SDK itself.

MCP messages are single objects (the 2025-06-18 protocol removed JSON-RPC batches),
so an array is answered with one -32600 per element that carries an id (or one
with id ``null``). Several objects on one line (``{…}{…}``) are read one by one, each
passed on (or answered) as if it had its own line. Every reply carries the request's
id whenever JSON-RPC allows one (a string or a number, ``1.5`` too: MCP takes only
strings and integers, so such a request gets -32600 with its id, written as sent); a
message nested deeper than ``MAX_DEPTH`` (the SDK's parser gives up near 200 levels
and would drop it) gets -32600 with its id, read from the top level of the line.

End of input: the SDK's serving loop ends when the read stream ends and cancels
every handler still running, so a client that writes its requests and closes stdin
(``printf ... | ctxkeep mcp``) got only the replies that happened to be done. The
filter therefore holds the read stream open after EOF until every request it passed
on has been answered (a response or an error with its id went out through the write
stream) or cancelled by the client (``notifications/cancelled``), or the server
closed the write stream.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
#: the deepest nesting of arrays and objects a message may have (the SDK's JSON parser
#: fails near 200 levels; MCP's own messages nest a few levels, tool arguments a few more)
MAX_DEPTH = 100


def _valid_id(v: Any) -> bool:
    """A JSON-RPC id MCP accepts: a string or an integer (not a bool, not null)."""
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


def _json_id(v: Any) -> bool:
    """A JSON-RPC 2.0 id a reply can carry back: a string or a finite number
    (jsonrpc.org/specification §4: String, Number or Null)."""
    return _valid_id(v) or (isinstance(v, float) and math.isfinite(v))


def _error(rid: Any, code: int, message: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": rid if _json_id(rid) else None,
        "error": {"code": code, "message": message},
    }


_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def _depth(obj: Any) -> int:
    """The nesting depth of a decoded JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            stack += [(x, d + 1) for x in v if isinstance(x, (dict, list))]
    return deepest


def _top_level_id(text: str) -> Any:
    """The ``id`` member of the object ``text`` starts with, read without decoding the
    rest (a message too deep to decode); None when there is none to read."""
    depth, key = 0, None
    for m in _TOKEN_RE.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
        elif tok in "]}":
            depth -= 1
            if depth <= 0:
                return None
        elif tok == ":" and depth == 1 and key == '"id"':
            i = m.end()
            while i < len(text) and text[i] in " \t\r\n":
                i += 1
            try:
                value, _ = json.JSONDecoder().raw_decode(text, i)
            except (ValueError, RecursionError):
                return None
            return value if _json_id(value) else None
        key = tok
    return None


def _check_object(obj: dict) -> dict | None:
    """The -32600 reply for one decoded message object, or None when it is a
    well-formed request, notification or response (the SDK's models then accept it)."""
    rid = obj.get("id")
    has_id = "id" in obj
    if obj.get("jsonrpc") != "2.0":
        return _error(rid, INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"')
    if "method" in obj:
        if not isinstance(obj["method"], str):
            return _error(rid, INVALID_REQUEST, 'invalid request: "method" must be a string')
        if "result" in obj or "error" in obj:
            return _error(rid, INVALID_REQUEST, 'invalid request: a request has no "result" or "error"')
        if has_id and not _valid_id(rid):  # 1.5 comes back as 1.5; null, true, {} as null
            return _error(rid, INVALID_REQUEST, 'invalid request: "id" must be a string or an integer')
        params = obj.get("params")
        if isinstance(params, list):  # valid JSON-RPC, but MCP params are named (an object)
            return _error(rid, INVALID_PARAMS, 'invalid params: "params" must be an object, not an array')
        if params is not None and not isinstance(params, dict):
            return _error(rid, INVALID_REQUEST, 'invalid request: "params" must be an object')
        return None
    if "result" in obj or "error" in obj:  # a response to one of our requests
        if "result" in obj and "error" not in obj:
            ok = _valid_id(rid) and isinstance(obj["result"], dict)
        else:
            err = obj.get("error")
            code = err.get("code") if isinstance(err, dict) else None
            ok = (
                "result" not in obj
                and (rid is None or _valid_id(rid))
                and isinstance(err, dict)
                and _valid_id(code)
                and not isinstance(code, str)
                and isinstance(err.get("message"), str)
            )
        if ok:
            return None
        log.warning("ctxkeep mcp: dropped a malformed response (id %r)", rid)
        return {}  # never answer a response: that could loop between two peers
    return _error(rid, INVALID_REQUEST, 'invalid request: no "method"')


def check_line(line: str) -> list[dict]:
    """The JSON-RPC error replies one received line needs; ``[]`` when the line is a
    valid message to pass on (or blank). Each reply is a dict ``{"jsonrpc", "id",
    "error": {"code", "message"}}`` with ``id`` the request's when JSON-RPC allows one
    (a string or a finite number), else ``None``. Codes: -32700 (not JSON), -32600 (not
    a valid request object, a batch, a scalar, an id MCP does not take, nested deeper
    than ``MAX_DEPTH``), -32602 (positional ``params``). Never raises."""
    return split_line(line)[1]


def split_line(line: str) -> tuple[list[str], list[dict]]:
    """``(messages, replies)`` of one received line: the valid messages it holds, each
    as its own line to pass on (one, or several objects written on one line), and the
    error replies of the others (``check_line``). Never raises."""
    passed: list[str] = []
    replies: list[dict] = []
    dec = json.JSONDecoder()
    pos, n = 0, len(line)
    while True:
        while pos < n and line[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            return passed, replies
        try:
            obj, end = dec.raw_decode(line, pos)
        except RecursionError:  # nested past Python's own limit: the id, read shallowly
            replies.append(_error(_top_level_id(line[pos:]), INVALID_REQUEST, _too_deep()))
            return passed, replies
        except ValueError:
            replies.append(_error(None, PARSE_ERROR, "parse error: the line is not valid JSON"))
            return passed, replies
        ok, out = _check_value(obj)
        replies += out
        if ok:
            passed.append(line[pos:end])
        pos = end


def _too_deep() -> str:
    return f"invalid request: the message is nested deeper than {MAX_DEPTH} levels"


def _check_value(obj: Any) -> tuple[bool, list[dict]]:
    """``(valid, replies)`` of one decoded value: a valid message (passed on, no reply),
    else the replies it needs (none for a malformed response: dropped)."""
    if isinstance(obj, dict):
        if _depth(obj) > MAX_DEPTH:
            return False, [_error(obj.get("id"), INVALID_REQUEST, _too_deep())]
        reply = _check_object(obj)
        return reply is None, [reply] if reply else []
    if isinstance(obj, list):
        msg = "invalid request: JSON-RPC batches are not supported (MCP sends one message per line)"
        ids = [m["id"] for m in obj if isinstance(m, dict) and _json_id(m.get("id"))]
        return False, [_error(i, INVALID_REQUEST, msg) for i in ids] or [_error(None, INVALID_REQUEST, msg)]
    return False, [_error(None, INVALID_REQUEST, "invalid request: a message must be a JSON object")]


def _request_id(line: str) -> tuple[bool, Any]:
    """For a line that passed ``check_line``: ``(True, id)`` for a request (it will be
    answered), ``(False, requestId)`` for a ``notifications/cancelled`` (that request
    will not be), ``(False, None)`` for anything else."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return False, None
    if not isinstance(obj, dict) or not isinstance(obj.get("method"), str):
        return False, None
    if "id" in obj:
        return True, obj["id"]
    if obj["method"] == "notifications/cancelled":
        params = obj.get("params")
        return False, params.get("requestId") if isinstance(params, dict) else None
    return False, None


class _FilteredLines:
    """An async iterator over the lines of ``source`` that yields the valid ones and
    sends the replies of the others through ``send`` (set by ``attach``). At the end
    of ``source`` it waits until every request it yielded has been answered
    (``answered``), cancelled, or ``closed`` was called, before it ends."""

    def __init__(self, source):
        import anyio

        self._source = source
        self._send = None
        self._ready = anyio.Event()
        self._pending: Counter = Counter()  # request id -> requests not yet answered
        self._drained = anyio.Event()
        self._closed = False

    def attach(self, send) -> None:
        self._send = send
        self._ready.set()

    def _settle(self, rid: Any) -> None:
        if self._pending[rid] > 1:
            self._pending[rid] -= 1
        else:
            self._pending.pop(rid, None)
        if not self._pending:
            self._drained.set()

    def answered(self, message: Any) -> None:
        """Note a message the server writes: a response or error settles its request."""
        import mcp_types as types

        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id in self._pending:
            self._settle(message.id)

    def closed(self) -> None:
        """The server closed its write stream: nothing more will be answered."""
        self._closed = True
        self._drained.set()

    async def _reply(self, replies: list[dict]) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        await self._ready.wait()
        for r in replies:
            err: types.JSONRPCError | _RawMessage
            if r["id"] is None or _valid_id(r["id"]):
                err = types.JSONRPCError(jsonrpc="2.0", id=r["id"], error=types.ErrorData(**r["error"]))
            else:  # an id MCP's models refuse (1.5): written as the request sent it
                err = _RawMessage(r)
            # a _RawMessage stands in for the SDK's models: its stdio writer calls only
            # model_dump_json, which SessionMessage's type does not express
            await self._send.send(SessionMessage(err))  # type: ignore[arg-type]

    async def __aiter__(self) -> AsyncIterator[str]:
        import anyio

        async for line in self._source:
            messages, replies = split_line(line)
            if replies:
                await self._reply(replies)
            for msg in messages:
                is_request, rid = _request_id(msg)
                if is_request:
                    self._pending[rid] += 1
                    self._drained = anyio.Event()
                elif rid is not None and rid in self._pending:
                    self._settle(rid)
                yield msg
        if self._pending and not self._closed:
            await self._drained.wait()


class _RawMessage:
    """A reply the SDK's models cannot hold (an id such as ``1.5``): what its stdio
    writer calls (``model_dump_json``) gives the JSON as built."""

    def __init__(self, reply: dict) -> None:
        self._json = json.dumps(reply, ensure_ascii=False)

    def model_dump_json(self, **_kw) -> str:
        return self._json


class _AnsweringWrite:
    """The SDK's write stream, telling ``lines`` of each message sent and of its close
    (the dispatcher uses ``send``, ``aclose`` and ``async with``)."""

    def __init__(self, inner, lines: _FilteredLines):
        self._inner = inner
        self._lines = lines

    async def send(self, item) -> None:
        await self._inner.send(item)
        self._lines.answered(getattr(item, "message", None))

    async def aclose(self) -> None:
        self._lines.closed()
        await self._inner.aclose()

    def close(self) -> None:
        self._lines.closed()
        self._inner.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _claim_stdin():
    """Serve the protocol from a private duplicate of fd 0 and point fd 0 at the null
    device, so nothing run by a handler can read protocol bytes (as the SDK does for
    the streams it claims itself). Returns ``(binary stream, restore)``; falls back to
    ``sys.stdin.buffer`` in place when fd 0 is not stdin or cannot be duplicated."""
    try:
        if sys.stdin.buffer.fileno() != 0:
            raise OSError("stdin is not fd 0")
        private = os.dup(0)
    except (AttributeError, OSError, ValueError):
        return sys.stdin.buffer, lambda: None
    os.set_inheritable(private, False)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        os.close(private)
        return sys.stdin.buffer, lambda: None

    def restore() -> None:
        try:
            os.dup2(private, 0)
        except OSError:
            pass

    return os.fdopen(private, "rb", closefd=False), restore


@asynccontextmanager
async def stdio_transport():
    """``(read_stream, write_stream)`` for ``Server.run``, as ``mcp.server.stdio.stdio_server``
    yields them, with every malformed line answered (``check_line``) and every request
    received before the end of stdin answered before the read stream ends."""
    from io import TextIOWrapper

    import anyio
    from mcp.server.stdio import stdio_server

    buffer, restore = _claim_stdin()
    try:
        text = TextIOWrapper(buffer, encoding="utf-8", errors="replace")
        lines = _FilteredLines(anyio.wrap_file(text))
        async with stdio_server(stdin=lines) as (read, write):
            lines.attach(write)
            yield read, _AnsweringWrite(write, lines)
    finally:
        restore()

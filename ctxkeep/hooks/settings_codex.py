"""Codex's ``config.toml`` (``$CODEX_HOME``, default ``~/.codex``): ctxkeep's ``notify``
program and its ``[mcp_servers.ctxkeep]`` table, edited so that the user's formatting
and comments stay as they are.

Format facts (Codex CLI, ``docs/config.md`` "notify" and "mcp_servers", openai/codex;
config reference https://developers.openai.com/codex/config-reference):

- ``notify`` is a top-level array of strings, the argv of one program that Codex runs
  after each agent turn with a JSON payload (``{"type": "agent-turn-complete",
  "thread-id", "turn-id", "cwd", "input-messages", "last-assistant-message"}``) as its
  last argument; Codex does not wait for it nor read its output, so it can save (ingest)
  but never inject anything into the context. Only one program: ctxkeep never replaces
  another one unless asked (``--force``).
- ``[mcp_servers.<name>]`` with ``command`` (string) and ``args`` (array of strings)
  starts a stdio MCP server.

Edits are made on the text where they can be: a new ``notify`` line goes just before the
first table header (a top-level key must come before any table), a new table at the end
of the file, and removing what ctxkeep added removes exactly those bytes. Every text edit
is checked by parsing the result (:mod:`tomllib`); anything else (updating a value the
user moved or reformatted) goes through ``tomlkit``, which keeps comments and layout.
"""

from __future__ import annotations

import re
import tomllib

import tomlkit
import tomlkit.exceptions

from ctxkeep.errors import ConfigError

_UNTOUCHED = "fix it and run the command again; ctxkeep left it untouched"


def parse(data: bytes | None, where: str) -> dict:
    """The config's data (``{}`` for no file). Raises ConfigError (one line, with the
    parser's line and column) when it is not UTF-8 TOML."""
    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"is not valid TOML ({e})", where=where, hint=_UNTOUCHED) from e


def _nl(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line(key: str, value) -> str:
    return tomlkit.dumps({key: value})  # `key = value\n`, with TOML's escaping


def _first_header(text: str) -> int:
    """Offset where the first table header's block starts (its comment and blank lines
    above it belong to it), or len(text) when there is no table."""
    m = re.search(r"^[ \t]*\[", text, flags=re.M)
    if not m:
        return len(text)
    start = m.start()
    lines = text[:start].splitlines(keepends=True)
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("#")):
        start -= len(lines.pop())
    return start


def set_notify(data: bytes | None, argv: list[str], where: str) -> bytes:
    """The config with ``notify = argv`` (replacing any ``notify`` there: the caller
    decides whether it may)."""
    text = (data or b"").decode("utf-8")
    want = {**parse(data, where), "notify": argv}
    if "notify" not in parse(data, where):
        nl = _nl(text)
        at = _first_header(text)
        head, tail = text[:at], text[at:]
        if head and not head.endswith("\n"):
            head += nl
        new = head + _line("notify", argv).replace("\n", nl) + tail
        if _valid(new, want):
            return new.encode("utf-8")
    return _via_tomlkit(text, where, lambda doc: doc.__setitem__("notify", argv))


def remove_notify(data: bytes, where: str) -> bytes:
    """The config without its ``notify`` key (the caller checked it is ctxkeep's)."""
    text = data.decode("utf-8")
    want = {k: v for k, v in parse(data, where).items() if k != "notify"}
    line = _line("notify", parse(data, where).get("notify")).replace("\n", _nl(text))
    i = text.find(line)
    if i >= 0 and (i == 0 or text[i - 1] == "\n"):
        new = text[:i] + text[i + len(line) :]
        if _valid(new, want):
            return new.encode("utf-8")
    return _via_tomlkit(text, where, lambda doc: doc.__delitem__("notify"))


def _table_text(name: str, server: dict, nl: str) -> str:
    body = tomlkit.dumps(server)
    return f"[mcp_servers.{name}]{nl}" + body.replace("\n", nl)


def set_mcp_server(data: bytes | None, name: str, server: dict, where: str) -> bytes:
    """The config with ``[mcp_servers.<name>]`` = ``server`` (``{"command": str,
    "args": [str]}``), replacing a table of that name. Raises ConfigError when
    ``mcp_servers`` is not a table."""
    cur = parse(data, where)
    servers = cur.get("mcp_servers", {})
    if not isinstance(servers, dict):
        raise ConfigError('has an "mcp_servers" value that is not a table', where=where, hint=_UNTOUCHED)
    want = {**cur, "mcp_servers": {**servers, name: server}}
    text = (data or b"").decode("utf-8")
    if name not in servers:
        nl = _nl(text)
        sep = "" if not text else (nl if text.endswith("\n") else nl + nl)
        new = text + sep + _table_text(name, server, nl)
        if _valid(new, want):
            return new.encode("utf-8")

    def edit(doc):
        if "mcp_servers" not in doc:
            doc["mcp_servers"] = tomlkit.table(is_super_table=True)
        t = tomlkit.table()
        for k, v in server.items():
            t[k] = v
        doc["mcp_servers"][name] = t

    return _via_tomlkit(text, where, edit)


def remove_mcp_server(data: bytes, name: str, where: str) -> bytes:
    """The config without ``[mcp_servers.<name>]`` (nor ``mcp_servers`` when that left
    it empty)."""
    cur = parse(data, where)
    servers = dict(cur.get("mcp_servers", {}))
    servers.pop(name, None)
    want = {k: v for k, v in cur.items() if k != "mcp_servers"}
    if servers:
        want["mcp_servers"] = servers
    text = data.decode("utf-8")
    nl = _nl(text)
    block = _table_text(name, cur.get("mcp_servers", {}).get(name, {}), nl)
    i = text.find(block)
    if i >= 0 and (i == 0 or text[i - 1] == "\n"):
        head = text[:i]
        if i + len(block) == len(text):  # ctxkeep's table at the end: drop the blank line before it too
            head = head.removesuffix(nl) if head.endswith(nl + nl) else head
        new = head + text[i + len(block) :]
        if _valid(new, want):
            return new.encode("utf-8")

    def edit(doc):
        del doc["mcp_servers"][name]
        if not doc["mcp_servers"]:
            del doc["mcp_servers"]

    return _via_tomlkit(text, where, edit)


def _valid(text: str, want: dict) -> bool:
    try:
        return tomllib.loads(text) == want
    except tomllib.TOMLDecodeError:
        return False


def _via_tomlkit(text: str, where: str, edit) -> bytes:
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as e:  # pragma: no cover - tomllib accepted it
        raise ConfigError(f"is not valid TOML ({e})", where=where, hint=_UNTOUCHED) from e
    edit(doc)
    return tomlkit.dumps(doc).encode("utf-8")

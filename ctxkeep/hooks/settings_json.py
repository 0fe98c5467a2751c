"""JSON settings files (Claude Code's and Gemini CLI's ``settings.json``, the MCP
configs of Claude Code, Gemini CLI and Cursor): read them, edit ctxkeep's entries, and
write them back in the user's own layout.

A file is parsed with :mod:`json` (key order kept) and re-serialized with the layout
detected in it: the indent (spaces or a tab, or none for a one-line file), the
separators of a one-line file, the line ending, a trailing newline, a UTF-8 BOM, and
``\\uXXXX`` escapes when the file has them instead of raw non-ASCII. A file written as
``JSON.stringify(obj, null, 2)`` (how Claude Code and Gemini CLI write theirs) comes
back byte for byte after an edit and its undo.

The hooks schema shared by Claude Code and Gemini CLI (sources: Claude Code hooks
reference, https://code.claude.com/docs/en/hooks "Configuration" / "Structure";
Gemini CLI ``docs/hooks/reference.md`` "Configuration schema", v0.27+)::

    {"hooks": {"<Event>": [{"matcher": "<pattern>",       # optional
                            "hooks": [{"type": "command",
                                       "command": "<shell command>",
                                       "timeout": <number>}]}]}}

Claude Code's ``timeout`` is in seconds, Gemini CLI's in milliseconds; Gemini hooks
also take a ``name`` (shown in ``/hooks panel``; ``hooksConfig.disabled`` lists names).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from ctxkeep.errors import ConfigError

_BOM = "\ufeff"


@dataclass(frozen=True)
class Layout:
    """How a JSON file was written: what :func:`dumps` reproduces."""

    indent: int | str | None = 2
    separators: tuple[str, str] | None = None  # one-line files only
    newline: str = "\n"
    trailing_newline: bool = True
    ensure_ascii: bool = False
    bom: bool = False


def detect_layout(text: str) -> Layout:
    """The :class:`Layout` of JSON ``text`` (a new file gets 2 spaces, ``\\n`` and a
    trailing newline: Claude Code's and Gemini CLI's own)."""
    bom = text.startswith(_BOM)
    if bom:
        text = text[1:]
    newline = "\r\n" if "\r\n" in text else "\n"
    body = text.rstrip()
    trailing = text != body  # any trailing whitespace: write one newline back
    m = re.search(r"\n([ \t]+)\S", body)
    if "\n" in body and m:
        ws = m.group(1)
        indent: int | str | None = "\t" if ws.startswith("\t") else len(ws)
        separators = None
    else:
        indent = None
        separators = (", ", ": ") if re.search(r'"\s*: ', body) else (",", ":")
    non_ascii = any(ord(c) > 127 for c in body)
    ensure_ascii = not non_ascii and bool(re.search(r"\\u00[89a-fA-F]|\\u0[1-9a-fA-F]|\\u[1-9a-fA-F]", body))
    return Layout(indent, separators, newline, trailing, ensure_ascii, bom)


def loads(data: bytes | None, where: str) -> tuple[dict, Layout]:
    """Parse a settings file's bytes into (object, layout). ``None`` (no file) or an
    empty file is ``{}`` with the default layout.

    Raises ConfigError (one line, naming ``where`` and the line and column) when the
    bytes are not UTF-8 JSON or the top level is not an object; the caller then leaves
    the file untouched."""
    if data is None:
        return {}, Layout()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError("is not UTF-8 text", where=where, hint=_UNTOUCHED) from e
    if not text.strip(_BOM + " \t\r\n"):
        return {}, detect_layout(text) if text else Layout()
    try:
        obj = json.loads(text.removeprefix(_BOM))
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"is not valid JSON (line {e.lineno} column {e.colno}: {e.msg})", where=where, hint=_UNTOUCHED
        ) from e
    if not isinstance(obj, dict):
        raise ConfigError("is not a JSON object at the top level", where=where, hint=_UNTOUCHED)
    return obj, detect_layout(text)


_UNTOUCHED = "fix it or move it away and run the command again; ctxkeep left it untouched"


def dumps(obj: dict, layout: Layout) -> bytes:
    """Serialize ``obj`` in ``layout`` (the inverse of :func:`loads` for files in the
    layouts it detects)."""
    text = json.dumps(
        obj, indent=layout.indent, separators=layout.separators, ensure_ascii=layout.ensure_ascii
    )
    if layout.newline != "\n":
        text = text.replace("\n", layout.newline)
    if layout.trailing_newline:
        text += layout.newline
    if layout.bom:
        text = _BOM + text
    return text.encode("utf-8")


def same(a: dict, b: dict) -> bool:
    """True when two parsed files hold the same data in the same key order."""
    return json.dumps(a) == json.dumps(b)


def same_but_emptied_hooks(before: dict, stripped: dict) -> bool:
    """True when ``before`` (a file as it was before ctxkeep's install) holds what
    ``stripped`` (``remove_hooks`` of the installed file) does, but for event lists or a
    ``hooks`` object that were empty already: the removal drops what it left empty, so
    a user's ``"hooks": {}`` or ``"SessionStart": []`` is not in ``stripped``."""
    if same(before, stripped):
        return True
    hooks = before.get("hooks")
    if not isinstance(hooks, dict):
        return False
    kept = {e: g for e, g in hooks.items() if g != []}
    pruned = {k: v for k, v in before.items() if k != "hooks"} if not kept else dict(before, hooks=kept)
    return same(pruned, stripped)


# -- hooks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HookEntry:
    """One hook ctxkeep installs: under ``event``, in a group with ``matcher`` (None:
    no matcher key), the hook object ``hook`` (``{"type": "command", "command": …}``)."""

    event: str
    matcher: str | None
    hook: dict


#: ``command -> the ctxkeep arguments after the executable`` (e.g. ``("hook",
#: "claude-code", "session-start")``) or None when the command is not ctxkeep's
Identify = Callable[[str], tuple[str, ...] | None]


def _hooks_object(settings: dict, where: str) -> dict:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError('has a "hooks" value that is not an object', where=where, hint=_UNTOUCHED)
    return hooks


def find_hook(
    settings: dict, event: str, identify: Identify
) -> dict[tuple[str, ...], list[tuple[dict, dict]]]:
    """ctxkeep's hooks under ``event``: ``{ctxkeep args: [(group, hook), …]}``."""
    found: dict[tuple[str, ...], list[tuple[dict, dict]]] = {}
    groups = settings.get("hooks", {}).get(event) if isinstance(settings.get("hooks"), dict) else None
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            continue
        for h in group["hooks"]:
            args = identify(h.get("command", "")) if isinstance(h, dict) else None
            if args is not None:
                found.setdefault(args, []).append((group, h))
    return found


def merge_hooks(
    settings: dict, entries: list[tuple[tuple[str, ...], HookEntry]], identify: Identify, where: str
) -> dict:
    """A copy of ``settings`` with each of ctxkeep's ``entries`` ``[(args, entry)]``
    present exactly once: an entry already there (found by ``identify`` on its command
    and equal) is left alone; one there with another command, timeout or matcher (an
    older install, another ctxkeep path) is updated in place; a missing one is appended
    to its event's list as a group of its own. Every other key, event, group and hook
    keeps its place. Raises ConfigError when ``hooks`` or an event's value has the
    wrong type."""
    out = copy.deepcopy(settings)
    hooks = _hooks_object(out, where)
    for args, e in entries:
        groups = hooks.get(e.event, [])
        if not isinstance(groups, list):
            raise ConfigError(
                f'has a "hooks.{e.event}" value that is not a list', where=where, hint=_UNTOUCHED
            )
        mine = find_hook({"hooks": {e.event: groups}}, e.event, identify).get(args, [])
        if mine:
            group, h = mine[0]
            if h != e.hook:
                h.clear()
                h.update(e.hook)
            if group.get("matcher") != e.matcher and len(group["hooks"]) == 1:
                if e.matcher is None:
                    group.pop("matcher", None)
                else:
                    group["matcher"] = e.matcher
            dups = mine[1:]  # a hand-copied second one: ctxkeep runs once
            for g, dup in dups:
                g["hooks"] = [x for x in g["hooks"] if x is not dup]
            if dups:
                emptied = [g for g, _ in dups if not g["hooks"]]
                hooks[e.event] = [g for g in groups if all(g is not x for x in emptied)]
            continue
        group = {"matcher": e.matcher, "hooks": [e.hook]} if e.matcher is not None else {"hooks": [e.hook]}
        hooks[e.event] = [*groups, group]
    if hooks:
        out["hooks"] = hooks
    return out


def remove_hooks(settings: dict, identify: Identify) -> dict:
    """A copy of ``settings`` without ctxkeep's hooks (every hook whose command
    ``identify`` recognizes). A group, event list or ``hooks`` object left empty by
    the removal goes too; one that was empty before stays."""
    out = copy.deepcopy(settings)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for g in groups:
            if isinstance(g, dict) and isinstance(g.get("hooks"), list):
                left = [h for h in g["hooks"] if not (isinstance(h, dict) and identify(h.get("command", "")))]
                if len(left) != len(g["hooks"]):
                    if not left:
                        continue
                    g["hooks"] = left
            kept.append(g)
        if len(kept) != len(groups):
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
                if not hooks:
                    del out["hooks"]
    return out


# -- MCP servers ---------------------------------------------------------------------------


def set_mcp_server(settings: dict, name: str, server: dict, where: str) -> dict:
    """A copy of ``settings`` with ``mcpServers[name] = server`` (the ``mcpServers``
    object of Claude Code's ``.claude.json`` / ``.mcp.json``, Gemini CLI's
    ``settings.json`` and Cursor's ``mcp.json``). Raises ConfigError when
    ``mcpServers`` is not an object."""
    out = copy.deepcopy(settings)
    servers = out.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError('has an "mcpServers" value that is not an object', where=where, hint=_UNTOUCHED)
    servers[name] = server
    out["mcpServers"] = servers
    return out


def remove_mcp_server(settings: dict, name: str) -> dict:
    """A copy of ``settings`` without ``mcpServers[name]`` (and without ``mcpServers``
    when that left it empty)."""
    out = copy.deepcopy(settings)
    servers = out.get("mcpServers")
    if isinstance(servers, dict) and name in servers:
        del servers[name]
        if not servers:
            del out["mcpServers"]
    return out

"""JSON settings files (Claude Code's and Gemini CLI's ``settings.json``, the MCP
configs of Claude Code, Gemini CLI and Cursor): read them, edit ctxkeep's entries, and
write them back in the user's own layout.

A file is parsed with :mod:`json` (key order kept) and re-serialized with the layout
detected in it: the indent (spaces or a tab, or none for a one-line file), the
separators of a one-line file, the line ending, a trailing newline, a UTF-8 BOM, and
``\\uXXXX`` escapes when the file has them instead of raw non-ASCII. A file written as
``JSON.stringify(obj, null, 2)`` (how Claude Code and Gemini CLI write theirs) comes
back byte for byte after an edit and its undo. Gemini CLI's settings.json may hold
``//`` and ``/* */`` comments (``loads(comments=True)``): such a file is edited in place,
its top-level members changed, added or cut and every comment kept; a comment inside a
value ctxkeep changes is refused in one line, never dropped.

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
import dataclasses
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
    #: a file with comments (Gemini CLI's JSONC, ``loads(comments=True)``): its text
    #: (no BOM), which ``dumps`` edits in place so that every comment stays
    source: str | None = None
    where: str = ""


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


def strip_comments(text: str) -> str:
    """``text`` with each ``//`` line comment and ``/* */`` block comment outside strings
    replaced by spaces (newlines kept), so every offset and line number stays the same:
    what Gemini CLI's ``strip-json-comments`` reads (its default, whitespace mode). An
    unterminated block comment is left as it is (the JSON parse then fails)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                break
            out[i : j + 2] = [ch if ch in "\r\n" else " " for ch in text[i : j + 2]]
            i = j + 2
        else:
            i += 1
    return "".join(out)


def loads(data: bytes | None, where: str, comments: bool = False) -> tuple[dict, Layout]:
    """Parse a settings file's bytes into (object, layout). ``None`` (no file) or an
    empty file is ``{}`` with the default layout. ``comments``: the file may hold
    ``//`` and ``/* */`` comments (Gemini CLI's settings.json, JSONC: its
    ``packages/cli/src/config/settings.ts`` reads it through ``strip-json-comments``);
    the layout then keeps the text for ``dumps`` to edit in place.

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
    body = text.removeprefix(_BOM)
    plain = strip_comments(body) if comments else body
    try:
        obj = json.loads(plain)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"is not valid JSON (line {e.lineno} column {e.colno}: {e.msg})", where=where, hint=_UNTOUCHED
        ) from e
    if not isinstance(obj, dict):
        raise ConfigError("is not a JSON object at the top level", where=where, hint=_UNTOUCHED)
    layout = detect_layout(text if plain == body else (_BOM if text != body else "") + plain)
    if plain != body:  # (a file of comments only has no indent to copy: 2 spaces)
        layout = dataclasses.replace(layout, source=body, where=where)
        if layout.indent is None and "\n" in body.strip():
            layout = dataclasses.replace(layout, indent=2, separators=None)
    return obj, layout


_UNTOUCHED = "fix it or move it away and run the command again; ctxkeep left it untouched"


def _members(plain: str) -> tuple[list[tuple[str, int, int, int]], int]:
    """The top-level members of the object in ``plain`` (JSON, comments blanked):
    ``[(key, key start, value start, value end)]`` and the offset of its closing ``}``."""
    dec = json.JSONDecoder()

    def skip(i: int) -> int:  # past the whitespace at i
        return len(plain) - len(plain[i:].lstrip())

    i = skip(plain.index("{") + 1)
    out = []
    while plain[i] != "}":
        key, k_end = dec.raw_decode(plain, i)  # the key: a JSON string
        v0 = skip(skip(k_end) + 1)  # past the colon
        _, v1 = dec.raw_decode(plain, v0)
        out.append((str(key), i, v0, v1))
        i = skip(v1)
        if plain[i] == ",":
            i = skip(i + 1)
    return out, i


def _edit_in_place(old: dict, new: dict, layout: Layout) -> str:
    """``layout.source`` (a file with comments) with its top-level members changed from
    ``old`` to ``new``: a changed value replaced, a removed member cut, a new one added
    after the last; everything else (comments too) byte for byte. Raises ConfigError
    when a comment sits inside what changes (it would be lost)."""
    text = layout.source or ""
    plain = strip_comments(text)
    members, close = _members(plain)
    nl = layout.newline
    unit = layout.indent if isinstance(layout.indent, str) else " " * (layout.indent or 0)

    def indent_at(k0: int) -> str:
        line = text[text.rfind("\n", 0, k0) + 1 : k0]
        return line if not line.strip() else unit

    def value(v, ind: str) -> str:
        t = json.dumps(
            v, indent=layout.indent, separators=layout.separators, ensure_ascii=layout.ensure_ascii
        )
        return t.replace("\n", nl + ind)

    def untouched(a: int, b: int, key: str) -> None:
        if text[a:b] != plain[a:b]:
            raise ConfigError(
                f'has comments inside "{key}", which ctxkeep would lose by changing that value',
                where=layout.where,
                hint=f'move them out of "{key}", or edit the file by hand; ctxkeep left it untouched',
            )

    def line_start(k0: int) -> int:  # the newline before k0 when only blanks sit between
        nl_at = text.rfind("\n", 0, k0)
        return nl_at if nl_at >= 0 and not text[nl_at + 1 : k0].strip() else k0

    def comma_after(v1: int) -> int:
        return v1 + len(plain[v1:]) - len(plain[v1:].lstrip())

    edits: list[tuple[int, int, str]] = []
    gone = [key not in new for key, *_ in members]
    n = 0
    while n < len(members):
        key, k0, v0, v1 = members[n]
        if gone[n]:  # a run of removed members n..m
            m = n
            while m + 1 < len(members) and gone[m + 1]:
                m += 1
            untouched(k0, members[m][3], key)
            if m + 1 < len(members):  # up to and with the comma after the run's last value
                edits.append((line_start(k0), comma_after(members[m][3]) + 1, ""))
            else:  # the run ends the object: the comma before it goes
                if n:
                    c = comma_after(members[n - 1][3])
                    edits.append((c, c + 1, ""))
                edits.append((line_start(k0), members[m][3], ""))
            n = m + 1
            continue
        if json.dumps(new[key]) != json.dumps(old.get(key)):
            untouched(v0, v1, key)
            edits.append((v0, v1, value(new[key], indent_at(k0))))
        n += 1
    added = [k for k in new if k not in old]
    if added:
        sep = nl if layout.indent is not None else " "
        if members:
            end = members[-1][3]
            eol = text.find("\n", end)
            at = eol - (text[eol - 1 : eol] == "\r") if eol >= 0 and not plain[end:eol].strip() else end
            ind = indent_at(members[-1][1])
        else:
            at = end = plain.index("{") + 1
            ind = unit
        key_text = lambda k: json.dumps(k, ensure_ascii=layout.ensure_ascii)  # noqa: E731
        add = ",".join(f"{sep}{ind}{key_text(k)}: {value(new[k], ind)}" for k in added)
        # a comma right after the last value; the rest of its line (a comment) stays there
        edits.append((end, at, ("," if members else "") + text[end:at] + add))
    for a, b, rep in sorted(edits, reverse=True):
        text = text[:a] + rep + text[b:]
    return text


def dumps(obj: dict, layout: Layout, old: dict | None = None) -> bytes:
    """Serialize ``obj`` in ``layout`` (the inverse of :func:`loads` for files in the
    layouts it detects). A file with comments (``layout.source``) is edited in place
    from ``old`` (what ``loads`` returned) to ``obj`` instead, its comments kept
    (``_edit_in_place``; ConfigError when one sits inside a changed value)."""
    if layout.source is not None:
        text = _edit_in_place(old or {}, obj, layout)
        return ((_BOM if layout.bom else "") + text).encode("utf-8")
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

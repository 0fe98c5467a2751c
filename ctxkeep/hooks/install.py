"""Install, remove and report ctxkeep's agent hooks and MCP server entries in the agents'
own settings files.

What is installed (the commands are ctxkeep's hook runtime, ``ctxkeep hook …``):

======================  ==================================  =====================================================
agent                   settings file                       entries
======================  ==================================  =====================================================
claude-code             ``~/.claude/settings.json``         ``PreCompact`` -> ``hook claude-code precompact``;
                        (``$CLAUDE_CONFIG_DIR``) or          ``SessionStart`` matcher ``compact|resume`` ->
                        ``<project>/.claude/settings.json``  ``hook claude-code session-start``; ``Stop`` ->
                                                             ``hook claude-code stop`` (after each response);
                                                             ``SessionEnd`` -> ``hook claude-code session-end``
codex                   ``~/.codex/config.toml``            ``notify = ["<ctxkeep>", "hook", "codex", "notify"]``
                        (``$CODEX_HOME``) or
                        ``<project>/.codex/config.toml``
gemini-cli              ``~/.gemini/settings.json`` or      ``SessionStart`` matcher ``resume`` -> ``hook gemini-cli
                        ``<project>/.gemini/settings.json``  SessionStart``; ``PreCompress`` -> ``… PreCompress``;
                                                             ``AfterAgent`` -> ``… AfterAgent`` (after each turn);
                                                             ``SessionEnd`` -> ``… SessionEnd``
======================  ==================================  =====================================================

Format facts: Claude Code hooks reference (https://code.claude.com/docs/en/hooks:
settings files, ``{"hooks": {"<Event>": [{"matcher", "hooks": [{"type": "command",
"command", "timeout" (seconds)}]}]}}``; ``SessionStart`` sources ``startup|resume|clear|
compact`` and its stdout / ``hookSpecificOutput.additionalContext`` added to the context;
``PreCompact`` triggers ``manual|auto``; ``Stop`` "when the main agent has finished
responding", stdin ``session_id``, ``transcript_path``, ``stop_hook_active``, which blocks
only on exit 2 or a ``decision: block`` output: ctxkeep's exits 0 and prints nothing;
``SessionEnd``); Gemini CLI ``docs/hooks/
reference.md`` and ``docs/hooks/index.md`` (v0.27+, hooks on by default, ``timeout`` in
milliseconds, lifecycle matchers are exact strings; ``SessionStart`` source
``startup|resume|clear`` with ``hookSpecificOutput.additionalContext``; ``PreCompress``
and ``SessionEnd`` advisory, not awaited; ``AfterAgent`` when the agent loop completes;
exit 0 with an empty stdout changes nothing, exit 2 blocks); Codex ``docs/config.md`` ``notify`` (see
:mod:`ctxkeep.hooks.settings_codex`).

MCP server entries (``ctxkeep mcp install``): Claude Code ``mcpServers.ctxkeep`` in
``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json``; ``claude mcp add --scope user``
writes the same) or the project's ``.mcp.json`` (``{"type": "stdio", "command", "args",
"env"}``); Codex ``[mcp_servers.ctxkeep]`` (``command``, ``args``); Gemini CLI
``mcpServers.ctxkeep`` in ``settings.json`` (``command``, ``args``); Cursor
``mcpServers.ctxkeep`` in ``~/.cursor/mcp.json`` or ``<project>/.cursor/mcp.json``.

Safety: every change is planned first (:class:`Change`, with the bytes before and
after, so ``--dry-run`` shows the diff), then applied with a backup
(``<file>.ctxkeep-backup-<UTC>``) and an atomic replace that keeps the file's mode. A
second install changes nothing. Uninstall removes only ctxkeep's entries (recognized by
their command: the ``ctxkeep`` executable, or ``python -m ctxkeep``, followed by ``hook
<agent>`` / ``mcp``); when what is left equals a backup ctxkeep made, the backup's bytes
come back exactly, and its backups are deleted (else all but the newest: ``apply``). A file that does not parse is never written (ConfigError).
Hooks installed for a store other than the default (``ctxkeep --home DIR hooks
install``, or ``$CTXKEEP_HOME`` at install time) carry ``--home DIR`` after their
arguments (``hook_args``), as the MCP entry does; a hook is recognized whatever its
``--home``, so an install for another store replaces it.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.errors import ConfigError, UsageError
from ctxkeep.hooks import safe_write, settings_codex
from ctxkeep.hooks import settings_json as sj
from ctxkeep.sources._util import dict_at

HOOK_AGENTS = ("claude-code", "codex", "gemini-cli")
MCP_AGENTS = ("claude-code", "codex", "gemini-cli", "cursor")
SCOPES = ("user", "project")
SERVER_NAME = "ctxkeep"
#: Codex's config file (``$CODEX_HOME/config.toml``; the same name as ctxkeep's own)
CODEX_CONFIG = "config.toml"
#: seconds the agent lets a ctxkeep hook run before killing it: a backstop above the
#: runtime's own hard timeout (5 s), so the agent never waits on ctxkeep for long
DEFAULT_TIMEOUT_S = 10


@dataclass(frozen=True)
class HookSpec:
    """One hook ctxkeep installs for an agent: its ``event`` (the agent's name for it),
    the ``matcher`` of its group (None: none), the ctxkeep arguments it runs, and what it
    does (for ``hooks status``)."""

    event: str
    matcher: str | None
    args: tuple[str, ...]
    does: str


HOOKS: dict[str, tuple[HookSpec, ...]] = {
    "claude-code": (
        HookSpec(
            "PreCompact",
            None,
            ("hook", "claude-code", "precompact"),
            "ingests the transcript before Claude Code summarizes it (its output is not added to the context)",
        ),
        HookSpec(
            "SessionStart",
            "compact|resume",
            ("hook", "claude-code", "session-start"),
            "after a compaction or a resume, prints the resume snapshot, which Claude Code adds to the context",
        ),
        HookSpec(
            "Stop",
            None,
            ("hook", "claude-code", "stop"),
            "ingests the transcript after each response (queued: Claude Code does not wait for the ingest)",
        ),
        HookSpec(
            "SessionEnd", None, ("hook", "claude-code", "session-end"), "ingests the session when it ends"
        ),
    ),
    "codex": (
        HookSpec("notify", None, ("hook", "codex", "notify"), "ingests the rollout after each agent turn"),
    ),
    "gemini-cli": (
        HookSpec(
            "SessionStart",
            "resume",
            ("hook", "gemini-cli", "SessionStart"),
            "on a resume, prints the resume snapshot, which Gemini CLI adds as the first turn",
        ),
        HookSpec(
            "PreCompress",
            None,
            ("hook", "gemini-cli", "PreCompress"),
            "ingests the session before Gemini CLI compresses its history",
        ),
        HookSpec(
            "AfterAgent",
            None,
            ("hook", "gemini-cli", "AfterAgent"),
            "ingests the session after each agent turn (queued: Gemini CLI does not wait for the ingest)",
        ),
        HookSpec(
            "SessionEnd", None, ("hook", "gemini-cli", "SessionEnd"), "ingests the session when it ends"
        ),
    ),
}

#: where the agent adds ctxkeep's output to the model's context (``hooks status``)
INJECTION = {
    "claude-code": "SessionStart (compact|resume): the resume snapshot is added to the new context",
    "codex": (
        "none: Codex runs its notify program after a turn without reading its output, so ctxkeep can only"
        " ingest; give Codex the snapshot with `ctxkeep mcp install --agent codex` (tool ctx_resume)"
    ),
    "gemini-cli": (
        "SessionStart (resume) only: Gemini CLI has no event after a compression (PreCompress is advisory),"
        " so a compressed session gets no snapshot; `ctxkeep mcp install --agent gemini-cli` gives it ctx_resume"
    ),
}


@dataclass
class Change:
    """A planned edit of one settings file.

    ``action``: ``created`` / ``updated`` (install), ``removed`` (uninstall: ctxkeep's
    entries taken out), ``restored`` (uninstall: the ``backup``'s bytes put back),
    ``deleted`` (uninstall: the file ctxkeep created held nothing else), ``unchanged``,
    ``absent`` (no file, nothing to remove). ``before`` / ``after``: the file's bytes
    (None: no file). ``backup``: the backup written (or restored from).
    ``pruned``: the backups an uninstall deleted (``apply``)."""

    agent: str
    path: Path
    action: str
    before: bytes | None
    after: bytes | None
    backup: Path | None = None
    notes: list[str] = field(default_factory=list)
    pruned: list[Path] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return self.action in ("created", "updated", "removed", "restored", "deleted")

    def diff(self) -> str:
        """A unified diff of the change (empty when there is none)."""
        a = (self.before or b"").decode("utf-8", "replace").splitlines(keepends=True)
        b = (self.after or b"").decode("utf-8", "replace").splitlines(keepends=True)
        return "".join(difflib.unified_diff(a, b, str(self.path), f"{self.path} (after)"))

    def as_dict(self) -> dict:
        """The change for ``--json``: agent, path, action, backup, backups_removed,
        notes."""
        return {
            "agent": self.agent,
            "path": str(self.path),
            "action": self.action,
            "backup": str(self.backup) if self.backup else None,
            "backups_removed": [str(p) for p in self.pruned],
            "notes": self.notes,
        }


# -- the ctxkeep command and how to recognize it ---------------------------------------


def ctxkeep_argv() -> list[str]:
    """The argv prefix that runs this ctxkeep from an agent: the absolute path of the
    ``ctxkeep`` executable that is running (``sys.argv[0]``), else the one on PATH, else
    ``[sys.executable, "-m", "ctxkeep"]``."""
    argv0 = Path(sys.argv[0])
    if argv0.name in ("ctxkeep", "ctxkeep.exe") and argv0.is_file():
        return [str(argv0.absolute())]
    found = shutil.which("ctxkeep")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "ctxkeep"]


def _ctxkeep_tail(tokens: list[str], first: str) -> tuple[str, ...] | None:
    """The arguments after the ctxkeep executable in ``tokens`` when they start with
    ``first`` (``hook``, ``mcp``), else None."""
    for i, tok in enumerate(tokens):
        if tok != first:
            continue
        before = tokens[:i]
        if before and (
            Path(before[-1]).name in ("ctxkeep", "ctxkeep.exe") or before[-2:] == ["-m", "ctxkeep"]
        ):
            return tuple(tokens[i:])
    return None


def _without_home(tail: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """``tail`` without a ``--home DIR`` (or ``--home=DIR``): a hook is the same hook
    whichever store it runs against (an install for another store replaces it)."""
    if tail is None:
        return None
    out: list[str] = []
    skip = False
    for tok in tail:
        if skip:
            skip = False
        elif tok == "--home":
            skip = True
        elif not tok.startswith("--home="):
            out.append(tok)
    return tuple(out)


def hook_args(spec: HookSpec, home: Path | None = None) -> list[str]:
    """The ctxkeep arguments of a hook: ``spec.args``, then ``--home DIR`` when the hook
    runs against the store ``home`` (``ctxkeep --home DIR hooks install``) rather than
    the default one."""
    return [*spec.args, *(["--home", str(home)] if home else [])]


def identify_hook(agent: str) -> Callable[[str | list[str]], tuple[str, ...] | None]:
    """``command -> ("hook", agent, event, …)`` for ctxkeep's hook commands of
    ``agent``, None for any other command."""

    def identify(command) -> tuple[str, ...] | None:
        if isinstance(command, list):
            tokens = [str(t) for t in command]
        else:
            try:
                tokens = shlex.split(str(command))
            except ValueError:
                return None
        tail = _without_home(_ctxkeep_tail(tokens, "hook"))
        return tail if tail and len(tail) >= 2 and tail[1] == agent else None

    return identify


def _is_ctxkeep_server(server) -> bool:
    if not isinstance(server, dict) or not isinstance(server.get("command"), str):
        return False
    args = server.get("args") or []
    return _ctxkeep_tail([server["command"], *map(str, args)], "mcp") is not None


# -- where each agent keeps its settings -----------------------------------------------


@dataclass(frozen=True)
class Where:
    """The user's environment for locating settings files: ``home`` (``$HOME``), the
    environment (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``), and the project directory
    used by ``--scope project``."""

    home: Path
    env: Mapping[str, str]
    project: Path

    @classmethod
    def current(cls, project: Path | None = None) -> Where:
        return cls(Path.home(), dict(os.environ), (project or Path.cwd()).absolute())

    def claude_dir(self) -> Path:
        d = self.env.get("CLAUDE_CONFIG_DIR")
        return Path(d).expanduser() if d else self.home / ".claude"

    def codex_dir(self) -> Path:
        d = self.env.get("CODEX_HOME")
        return Path(d).expanduser() if d else self.home / ".codex"


def hooks_path(agent: str, scope: str, w: Where) -> Path:
    """The settings file that holds ``agent``'s hooks for ``scope``."""
    _check(agent, HOOK_AGENTS, scope)
    if agent == "claude-code":
        return (
            w.claude_dir() / "settings.json" if scope == "user" else w.project / ".claude" / "settings.json"
        )
    if agent == "codex":
        return w.codex_dir() / CODEX_CONFIG if scope == "user" else w.project / ".codex" / CODEX_CONFIG
    return (w.home if scope == "user" else w.project) / ".gemini" / "settings.json"


def mcp_path(agent: str, scope: str, w: Where) -> Path:
    """The file that holds ``agent``'s MCP servers for ``scope``."""
    _check(agent, MCP_AGENTS, scope)
    if agent == "claude-code":
        if scope == "project":
            return w.project / ".mcp.json"
        d = w.env.get("CLAUDE_CONFIG_DIR")
        return Path(d).expanduser() / ".claude.json" if d else w.home / ".claude.json"
    if agent == "cursor":
        return (w.home if scope == "user" else w.project) / ".cursor" / "mcp.json"
    return hooks_path(agent, scope, w)


def _check(agent: str, allowed: tuple[str, ...], scope: str) -> None:
    if agent not in allowed:
        raise UsageError(f"unknown agent {agent!r}", hint=f"use one of: {', '.join(allowed)}")
    if scope not in SCOPES:
        raise UsageError(f"unknown scope {scope!r}", hint="use user or project")


def detected_agents(w: Where, agents: tuple[str, ...] = HOOK_AGENTS) -> list[str]:
    """The agents whose configuration directory exists under ``w`` (the default of
    ``hooks install`` when no ``--agent`` is given)."""
    dirs = {
        "claude-code": w.claude_dir(),
        "codex": w.codex_dir(),
        "gemini-cli": w.home / ".gemini",
        "cursor": w.home / ".cursor",
    }
    return [a for a in agents if dirs[a].is_dir()]


def display_path(p: Path, w: Where) -> str:
    """``p`` shown from the home as ``~/…`` when it is under it."""
    try:
        return "~/" + str(p.relative_to(w.home))
    except ValueError:
        return str(p)


# -- hooks -----------------------------------------------------------------------------


def hook_command(exe: list[str], spec: HookSpec, home: Path | None = None) -> str:
    """The shell command of a hook (Claude Code and Gemini CLI run it with a shell)."""
    return shlex.join([*exe, *hook_args(spec, home)])


def _json_entries(
    agent: str, exe: list[str], timeout_s: int, home: Path | None = None
) -> list[tuple[tuple[str, ...], sj.HookEntry]]:
    out = []
    for spec in HOOKS[agent]:
        if agent == "claude-code":
            hook = {"type": "command", "command": hook_command(exe, spec, home), "timeout": timeout_s}
        else:  # gemini-cli: milliseconds, and a name for /hooks panel
            hook = {
                "name": "ctxkeep-" + re.sub(r"(?<!^)(?=[A-Z])", "-", spec.args[-1]).lower(),
                "type": "command",
                "command": hook_command(exe, spec, home),
                "timeout": timeout_s * 1000,
                "description": f"ctxkeep: {spec.does}",
            }
        out.append((spec.args, sj.HookEntry(spec.event, spec.matcher, hook)))
    return out


def plan_hooks_install(
    agent: str,
    scope: str,
    w: Where,
    exe: list[str],
    timeout_s: int = DEFAULT_TIMEOUT_S,
    force: bool = False,
    home: Path | None = None,
) -> Change:
    """Plan installing ``agent``'s hooks (nothing is written; see :func:`apply`); with
    ``home``, the hooks run against that store (``--home DIR`` in their commands).

    Raises ConfigError when the settings file does not parse, or (Codex) when
    ``notify`` already runs another program and ``force`` is False."""
    path = hooks_path(agent, scope, w)
    where = display_path(path, w)
    before = safe_write.read_bytes(path)
    notes: list[str] = []
    if agent == "codex":
        argv = [*exe, *hook_args(HOOKS["codex"][0], home)]
        cur = settings_codex.parse(before, where).get("notify")
        if cur == argv:
            return Change(agent, path, "unchanged", before, before)
        if cur is not None and not identify_hook("codex")(_as_argv(cur)):
            if not force:
                raise ConfigError(
                    f"notify already runs another program ({_argv_text(cur)}); Codex runs only one",
                    where=where,
                    hint="pass --force to replace it (the old value stays in the backup), or call"
                    f" `{shlex.join(argv)} '<json>'` from your own notify program",
                )
            notes.append(f"replaced notify {_argv_text(cur)} (kept in the backup)")
        after = settings_codex.set_notify(before, argv, where)
    else:
        obj, layout = sj.loads(before, where, comments=_jsonc(agent))
        new = sj.merge_hooks(obj, _json_entries(agent, exe, timeout_s, home), identify_hook(agent), where)
        if sj.same(new, obj) and before is not None:
            return Change(agent, path, "unchanged", before, before)
        after = sj.dumps(new, layout, obj)
        notes += _json_notes(agent, new)
    return Change(agent, path, "created" if before is None else "updated", before, after, notes=notes)


def _jsonc(agent: str) -> bool:
    """Whether ``agent``'s JSON settings may hold comments: Gemini CLI reads its
    settings.json through ``strip-json-comments`` (``packages/cli/src/config/
    settings.ts``) and writes it back keeping them; Claude Code's and Cursor's files are
    plain JSON (a comment there stays an error)."""
    return agent == "gemini-cli"


def _backup_matches(where: str, comments: bool = False):
    """The test ``_undo`` applies to a backup's text ``a`` and the stripped settings
    ``b``: the same but for a ``hooks`` object or event lists the user had left empty
    (``settings_json.same_but_emptied_hooks``)."""
    return lambda a, b: sj.same_but_emptied_hooks(sj.loads(a, where, comments)[0], b)


def plan_hooks_uninstall(agent: str, scope: str, w: Where) -> Change:
    """Plan removing ctxkeep's hooks of ``agent`` (nothing is written). Raises
    ConfigError when the settings file does not parse."""
    path = hooks_path(agent, scope, w)
    where, before = display_path(path, w), safe_write.read_bytes(path)
    if before is None:
        return Change(agent, path, "absent", None, None)
    if agent == "codex":
        cur = settings_codex.parse(before, where)
        notify = cur.get("notify")
        if notify is None or not identify_hook("codex")(_as_argv(notify)):
            return Change(agent, path, "unchanged", before, before)
        stripped = settings_codex.remove_notify(before, where)

        def same_but_notify(a: bytes, b: dict) -> bool:
            # a backup from before ctxkeep's install: the same config, with no notify or
            # the user's own notify program (one `--force` replaced) that comes back
            old = settings_codex.parse(a, where)
            theirs = old.pop("notify", None)
            return old == b and (theirs is None or not identify_hook("codex")(_as_argv(theirs)))

        return _undo(agent, path, before, stripped, same_but_notify, None, where)
    obj, layout = sj.loads(before, where, comments=_jsonc(agent))
    new = sj.remove_hooks(obj, identify_hook(agent))
    if sj.same(new, obj):
        return Change(agent, path, "unchanged", before, before)
    return _undo(
        agent, path, before, sj.dumps(new, layout, obj), _backup_matches(where, _jsonc(agent)), new, where
    )


def _undo(agent, path, before, stripped: bytes, same_data, stripped_data, where) -> Change:
    """The uninstall of one file: the newest backup whose data equals what is left once
    ctxkeep's entries are out comes back byte for byte (``restored``); else the file
    ctxkeep created and that now holds nothing is deleted; else ``stripped``."""
    if agent == "codex":
        stripped_data = settings_codex.parse(stripped, where)
    for b in safe_write.backups(path):
        try:
            data = b.read_bytes()
            if same_data(data, stripped_data):
                return Change(agent, path, "restored", before, data, backup=b)
        except (OSError, ConfigError):
            continue
    if not stripped_data and not safe_write.backups(path):
        return Change(agent, path, "deleted", before, None)
    return Change(agent, path, "removed", before, stripped)


def _json_notes(agent: str, settings: dict) -> list[str]:
    notes = []
    if agent == "claude-code" and settings.get("disableAllHooks") is True:
        notes.append("disableAllHooks is true in this file: Claude Code runs no hook until it is removed")
    if agent == "gemini-cli":
        cfg = dict_at(settings, "hooksConfig")
        if cfg.get("enabled") is False:
            notes.append("hooksConfig.enabled is false in this file: Gemini CLI runs no hook")
        off = [n for n in cfg.get("disabled") or [] if str(n).startswith("ctxkeep-")]
        if off:
            notes.append(f"hooksConfig.disabled lists {', '.join(map(str, off))}: those do not run")
    return notes


def _as_argv(v) -> list[str]:
    return [str(t) for t in v] if isinstance(v, list) else [str(v)]


def _argv_text(v) -> str:
    return json.dumps(v, ensure_ascii=False)


def hooks_status(agent: str, scope: str, w: Where, exe: list[str], home: Path | None = None) -> dict:
    """What ``agent`` has of ctxkeep's hooks in ``scope``, compared with what
    ``plan_hooks_install`` writes for the store ``home``.

    Returns ``{"agent", "scope", "path", "exists", "error" (str | None), "hooks": [{"event",
    "matcher", "does", "state": "installed" | "outdated" | "missing" | "foreign", "command"
    (what install writes), "found" (what is there, or None)}], "injection" (where the agent
    adds the snapshot to the context, or why it cannot), "notes": [str]}``; ``outdated``: a
    ctxkeep hook with another command, matcher or timeout (``hooks install`` updates it);
    ``foreign``: Codex's ``notify`` runs another program."""
    path = hooks_path(agent, scope, w)
    where = display_path(path, w)
    data = safe_write.read_bytes(path)
    out: dict = {
        "agent": agent,
        "scope": scope,
        "path": str(path),
        "exists": data is not None,
        "error": None,
        "hooks": [],
        "injection": INJECTION[agent],
        "notes": [],
    }
    try:
        if agent == "codex":
            spec = HOOKS["codex"][0]
            argv = [*exe, *hook_args(spec, home)]
            cur = settings_codex.parse(data, where).get("notify")
            if cur is None:
                state = "missing"
            elif cur == argv:
                state = "installed"
            elif identify_hook("codex")(_as_argv(cur)):
                state = "outdated"
            else:
                state = "foreign"
                out["notes"].append(
                    f"notify runs another program ({_argv_text(cur)}): ctxkeep does not replace it"
                    " unless `hooks install --force`"
                )
            out["hooks"].append(_row(spec, state, shlex.join(argv), cur))
        else:
            obj, _ = sj.loads(data, where, comments=_jsonc(agent))
            entries = dict(_json_entries(agent, exe, DEFAULT_TIMEOUT_S, home))
            for spec in HOOKS[agent]:
                mine = sj.find_hook(obj, spec.event, identify_hook(agent)).get(spec.args, [])
                want = entries[spec.args]
                if not mine:
                    state, found = "missing", None
                else:
                    group, h = mine[0]
                    found = h.get("command")
                    same_cmd = (
                        h.get("command") == want.hook["command"] and group.get("matcher") == spec.matcher
                    )
                    state = "installed" if same_cmd else "outdated"
                out["hooks"].append(_row(spec, state, want.hook["command"], found))
            out["notes"] += _json_notes(agent, obj)
    except ConfigError as e:
        out["error"] = str(e)
    return out


def _row(spec: HookSpec, state: str, command: str, found) -> dict:
    return {
        "event": spec.event,
        "matcher": spec.matcher,
        "does": spec.does,
        "state": state,
        "command": command,
        "found": found,
    }


# -- MCP servers -----------------------------------------------------------------------


def mcp_server_entry(agent: str, exe: list[str], home: Path | None = None) -> dict:
    """ctxkeep's MCP server entry in ``agent``'s format: ``{"command", "args"}`` (Claude
    Code's adds ``"type": "stdio"`` and ``"env": {}``, as ``claude mcp add`` writes).
    ``home``: a store directory passed on as ``--home``."""
    args = [*exe[1:], "mcp", *(["--home", str(home)] if home else [])]
    entry = {"command": exe[0], "args": args}
    if agent == "claude-code":
        return {"type": "stdio", **entry, "env": {}}
    return entry


def agent_mcp_command(agent: str, scope: str, exe: list[str], home: Path | None = None) -> str | None:
    """The agent's own command that registers ctxkeep's MCP server (an alternative to
    ``mcp install``), or None when the agent has none."""
    entry = mcp_server_entry(agent, exe, home)
    server = shlex.join([entry["command"], *entry["args"]])
    if agent == "claude-code":
        return f"claude mcp add --scope {'user' if scope == 'user' else 'project'} {SERVER_NAME} -- {server}"
    if agent == "codex":
        return f"codex mcp add {SERVER_NAME} -- {server}"
    if agent == "gemini-cli":
        return f"gemini mcp add --scope {scope} {SERVER_NAME} {server}"
    return None


def plan_mcp_install(
    agent: str, scope: str, w: Where, exe: list[str], home: Path | None = None, force: bool = False
) -> Change:
    """Plan writing ctxkeep's MCP server entry for ``agent`` (nothing is written).
    Raises ConfigError when the file does not parse, or when a server named ctxkeep
    runs another program and ``force`` is False."""
    path = mcp_path(agent, scope, w)
    where = display_path(path, w)
    before = safe_write.read_bytes(path)
    entry = mcp_server_entry(agent, exe, home)
    if agent == "codex":
        entry = {k: v for k, v in entry.items() if k in ("command", "args")}
        cur = settings_codex.parse(before, where).get("mcp_servers", {})
        old = cur.get(SERVER_NAME) if isinstance(cur, dict) else None
    else:
        obj, layout = sj.loads(before, where, comments=_jsonc(agent))
        servers = obj.get("mcpServers")
        old = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    if old == entry:
        return Change(agent, path, "unchanged", before, before)
    if old is not None and not _is_ctxkeep_server(old) and not force:
        raise ConfigError(
            f"already has an MCP server named {SERVER_NAME} that runs another program",
            where=where,
            hint="pass --force to replace it (the old entry stays in the backup)",
        )
    if agent == "codex":
        after = settings_codex.set_mcp_server(before, SERVER_NAME, entry, where)
    else:
        after = sj.dumps(sj.set_mcp_server(obj, SERVER_NAME, entry, where), layout, obj)
    notes = []
    if agent == "claude-code" and scope == "user":
        notes.append(
            "Claude Code rewrites ~/.claude.json while it runs: install with it closed, or use `claude mcp add`"
        )
    return Change(agent, path, "created" if before is None else "updated", before, after, notes=notes)


def plan_mcp_uninstall(agent: str, scope: str, w: Where) -> Change:
    """Plan removing ctxkeep's MCP server entry for ``agent`` (nothing is written). A
    server named ctxkeep that runs another program is left alone."""
    path = mcp_path(agent, scope, w)
    where, before = display_path(path, w), safe_write.read_bytes(path)
    if before is None:
        return Change(agent, path, "absent", None, None)
    if agent == "codex":
        cur = settings_codex.parse(before, where)
        servers = cur.get("mcp_servers", {})
        if not isinstance(servers, dict) or not _is_ctxkeep_server(servers.get(SERVER_NAME)):
            return Change(agent, path, "unchanged", before, before)
        stripped = settings_codex.remove_mcp_server(before, SERVER_NAME, where)
        return _undo(
            agent, path, before, stripped, lambda a, b: settings_codex.parse(a, where) == b, None, where
        )
    obj, layout = sj.loads(before, where, comments=_jsonc(agent))
    servers = obj.get("mcpServers")
    if not isinstance(servers, dict) or not _is_ctxkeep_server(servers.get(SERVER_NAME)):
        return Change(agent, path, "unchanged", before, before)
    new = sj.remove_mcp_server(obj, SERVER_NAME)
    return _undo(
        agent, path, before, sj.dumps(new, layout, obj), _backup_matches(where, _jsonc(agent)), new, where
    )


# -- applying --------------------------------------------------------------------------


def apply(change: Change) -> Change:
    """Write a planned change: a backup of the current bytes first (install and a
    structural uninstall), then an atomic replace keeping the file's mode; ``restored``
    puts the backup's bytes back, ``deleted`` removes the file. Returns the change with
    ``backup`` set. An uninstall then deletes the file's backups (``pruned``): all of
    them once the file is back byte for byte (``restored``) or gone (``deleted``), all
    but the one just written (``removed``: the file as it was, with what the user
    changed since the install). Raises OSError when the directory is not writable."""
    if not change.changes:
        return change
    if change.action == "deleted":
        safe_write.remove(change.path)
        change.pruned = safe_write.prune(change.path)
        return change
    if change.action in ("created", "updated", "removed") and change.before is not None:
        change.backup = safe_write.backup(change.path, change.before)
    assert change.after is not None
    safe_write.atomic_write(change.path, change.after)
    if change.action in ("restored", "removed"):
        change.pruned = safe_write.prune(
            change.path, keep=change.backup if change.action == "removed" else None
        )
    return change

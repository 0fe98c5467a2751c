"""Extract: one module per agent. ``SOURCES`` maps an agent name to its source.

A source fulfils ``contract.Source`` (a ``typing.Protocol``); every one registered
here (``_REGISTRY``) is imported and checked against it (``contract.check_source``)
when its agent is first looked up. Adding an agent is one new module registered here
(and in ``schema.AGENTS``) plus fixtures (docs/adding-an-agent.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from importlib import import_module
from pathlib import Path

from ctxkeep.sources.confine import confine
from ctxkeep.sources.contract import (
    ChangeTest,
    ClaimsPaths,
    Discovery,
    DiscoveryContext,
    ModeByPath,
    Source,
    SourceFile,
    Watermark,
    check_source,
)
from ctxkeep.sources.readers.jsonl import is_unchanged
from ctxkeep.sources.readers.sqlite import db_unchanged

#: the registry, in its order (``schema.AGENTS``): agent name → (module under
#: ``ctxkeep.sources``, the name of its source object there, or None: the module is the
#: source)
_REGISTRY: dict[str, tuple[str, str | None]] = {
    "claude-code": ("claude_code", None),
    # before codex: its matches() claims any rollout, TraeX's included
    "traex": ("traex", None),
    "codex": ("codex", None),
    "gemini-cli": ("gemini_cli", None),
    "copilot-cli": ("copilot_cli", None),
    "qwen-code": ("qwen_code", None),
    "continue": ("continue_dev", None),
    "cline": ("cline", "SOURCE"),
    "roo-code": ("roo_code", "SOURCE"),
    "kilo-code": ("kilo_code", "SOURCE"),
    "aider": ("aider", None),
    "specstory": ("specstory", None),
    "opencode": ("opencode", None),
    "opencode-go": ("opencode_go", None),
    "crush": ("crush", None),
    "goose": ("goose", None),
    # before cursor: its matches() claims any state.vscdb, Windsurf's included
    "windsurf": ("windsurf", None),
    # before cursor: its matches() claims any state.vscdb, Trae's included
    "trae": ("trae", None),
    "cursor": ("cursor", None),
    "gptme": ("gptme", None),
    "mistral-vibe": ("mistral_vibe", None),
    "openclaude": ("openclaude", None),
    "amp": ("amp", None),
    # before pi: its matches() claims any Pi-shaped file, OpenClaw's included
    "openclaw": ("openclaw", None),
    "pi": ("pi", None),
    "kimi": ("kimi", None),
    "openhands": ("openhands", None),
    "zed": ("zed", None),
    "iflow": ("iflow", None),
    "deepseek-tui": ("deepseek_tui", None),
    "zencoder": ("zencoder", None),
    "grok": ("grok", None),
    "cortex": ("cortex", None),
    "qoder": ("qoder", None),
    "kiro": ("kiro", None),
    "kiro-ide": ("kiro_ide", None),
    "forge": ("forge", None),
    "devin": ("devin", None),
    "codebuff": ("codebuff", None),
    "hermes": ("hermes", None),
    "warp": ("warp", None),
    "antigravity-cli": ("antigravity", "CLI"),
    "antigravity": ("antigravity", "IDE"),
    "vscode-copilot": ("vscode_copilot", None),
    "visualstudio-copilot": ("visual_studio_copilot", None),
    "cowork": ("cowork", None),
    "chatgpt": ("chatgpt", None),
    "claude-ai": ("claude_ai", None),
}


class _Sources(Mapping):
    """``SOURCES``: agent name → its source, each source module imported (and checked,
    ``contract.check_source``) when its agent is first looked up. The names, their
    order and ``in`` need no import: ``compress --check`` reads Claude Code and Codex
    files only, and importing all 16 sources cost ~20 ms of its start. Iterating
    ``items()``/``values()`` imports every source. Raises KeyError for an unknown
    agent, ``TypeError`` (``check_source``) for a module that breaks the contract."""

    def __init__(self) -> None:
        self._loaded: dict[str, Source] = {}

    def __getitem__(self, agent: str) -> Source:
        src = self._loaded.get(agent)
        if src is None:
            module, attr = _REGISTRY[agent]
            mod = import_module(f"ctxkeep.sources.{module}")
            src = check_source(getattr(mod, attr) if attr else mod)
            if agent != src.AGENT:
                raise TypeError(f"ctxkeep.sources.{module} is registered as {agent} but names {src.AGENT}")
            self._loaded[agent] = src
        return src

    def __iter__(self) -> Iterator[str]:
        return iter(_REGISTRY)

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __contains__(self, agent: object) -> bool:
        return agent in _REGISTRY

    def __repr__(self) -> str:
        return f"SOURCES({', '.join(_REGISTRY)})"


SOURCES: Mapping[str, Source] = _Sources()


def file_mode(agent: str, path: str | Path) -> str | None:
    """How ``agent``'s source reads the file at ``path`` (``contract.FileMode``:
    ``append``, ``rewrite``, ``sqlite``, ``tree``; ``mode_for`` for a source with
    files of several modes), or None for an agent no source reads (a note)."""
    src = SOURCES.get(agent)
    if src is None:
        return None
    return src.mode_for(Path(path)) if isinstance(src, ModeByPath) else src.MODE


_CHANGE_TESTS: dict[object, ChangeTest | None] = {}


def _change_test(src: Source) -> ChangeTest | None:
    """``src`` when ``isinstance(src, ChangeTest)``, else None; once per source (module or
    object): a runtime-checkable Protocol's ``isinstance`` costs ~80 µs (its members are
    looked up each time), which was ~15 % of a no-op ingest's plan over 5,000 files."""
    try:
        return _CHANGE_TESTS[src]
    except KeyError:
        test = src if isinstance(src, ChangeTest) else None
        _CHANGE_TESTS[src] = test
        return test


def as_stored(f: SourceFile, state: dict | None) -> SourceFile:
    """``f`` as the store keyed it: with the meta its source's ``ids_meta(file, state)``
    adds from ``state``, the file's watermark state (None: no watermark, keyed as a
    new read keys it). Claude Code (and the sources using its parser): a file a store
    read before records were keyed by session keeps its uuid ids, so a parse from byte
    0 outside an ingest (compress's and scrub's line checks, a reparse) gives the entry
    ids the store holds. ``f`` itself for a source without ``ids_meta``."""
    fn = getattr(SOURCES.get(f.agent), "ids_meta", None)
    return f if fn is None else fn(f, state)


def reads_state(agent: str) -> bool:
    """True when ``agent``'s source has its own change test (``contract.ChangeTest``),
    which reads a watermark's ``state`` (``needs_state`` of its files that are not
    ``sqlite`` ones)."""
    return _change_test(SOURCES[agent]) is not None


def needs_state(f: SourceFile) -> bool:
    """True when ``file_unchanged(f, wm)`` reads ``wm.state`` (a ``sqlite`` file's or a
    ``ChangeTest`` source's fingerprint); the default test reads the stat facts only."""
    return f.mode == "sqlite" or _change_test(SOURCES[f.agent]) is not None


def file_unchanged(f: SourceFile, wm: Watermark | None, st: os.stat_result | None = None) -> bool:
    """True when ``f`` holds nothing new since ``wm`` (the ingest plan skips it): a
    ``sqlite`` file when neither the database nor its ``-wal`` changed
    (``readers.sqlite.db_unchanged``); else the source's own test when it has one
    (``contract.ChangeTest``: a JSON tree's fingerprint); else the default test (same
    inode, size, mtime; ``st``: the file's ``stat`` when the caller has it). A file
    that cannot be stat'ed is not unchanged."""
    src = SOURCES[f.agent]
    if f.mode == "sqlite":
        return db_unchanged(f.path, wm, src.PARSER_VERSION)
    test = _change_test(src)
    if test is not None:
        return test.unchanged(f, wm)
    try:
        return is_unchanged(f.path.stat() if st is None else st, wm, src.PARSER_VERSION)
    except OSError:
        return False


def discover_all(
    ctx: DiscoveryContext,
    agents: list[str] | None = None,
    enabled: dict[str, bool] | None = None,
    extra_dirs: dict[str, list[Path]] | None = None,
) -> list[Discovery]:
    """Run every (selected, enabled) source's discovery.

    Args: ``agents`` restricts to these names (None: all); ``enabled`` maps agent →
    enabled flag from config; ``extra_dirs`` maps agent → configured session dirs.
    Returns one Discovery per agent, disabled agents with ``reason="disabled in config"``;
    each confined to its agent's folders (``confine.confine``: symlinks out, loops,
    FIFOs and devices, hard links are refused and counted in ``Discovery.skipped``).
    """
    out = []
    for name in SOURCES:
        if agents and name not in agents:
            continue
        if enabled is not None and not enabled.get(name, True):
            out.append(Discovery(name, reason="disabled in config"))
            continue
        src = SOURCES[name]
        dirs = (extra_dirs or {}).get(name, [])
        sub = DiscoveryContext(ctx.home, ctx.env, list(dirs), [])
        d = confine(src.discover(sub), ctx.home)
        missing = [p for p in dirs if not p.exists()]
        if missing:
            note = "configured dir missing: " + ", ".join(map(str, missing))
            d.reason = f"{d.reason}; {note}" if d.reason else note
        out.append(d)
    return out


def sidecars_for(files: list[SourceFile]) -> list[SourceFile]:
    """The sidecars on disk (``readers.sidecar``) of the transcripts ``files`` not among
    them, each once: what ``sidecars_of(path)`` of each file's source gives (Claude
    Code, Mistral Vibe). An ``ingest --path`` (the agents' hooks) reads them with the
    transcripts it names, as discovery finds them beside every session. Each is
    confined to the folder it was found in (``confine.confine``: a symlink out of it,
    e.g. a todo list linked to a file elsewhere, is refused as discovery refuses it)."""
    seen = {str(f.path) for f in files}
    out = []
    for f in files:
        fn = getattr(SOURCES.get(f.agent), "sidecars_of", None)
        for side in fn(f.path) if fn is not None else ():
            if str(side.path) not in seen:
                seen.add(str(side.path))
                out.append(side)
    if not out:
        return out
    return confine(Discovery("sidecars", files=out, searched=sorted({f.path.parent for f in out}))).files


def files_for_paths(paths: list[Path], agents: list[str] | None = None) -> tuple[list[SourceFile], list[str]]:
    """Map explicit ``--path`` files or directories to source files.

    Each file is offered to every source that claims paths (``contract.ClaimsPaths``;
    claude-code's ``matches``, the broadest, last); the first that claims it wins.
    The file's mode is the source's ``mode_for(path)`` (``contract.ModeByPath``) when
    it has one, else its ``MODE``.
    Returns ``(files, problems)`` where problems are one-line messages for paths that
    do not exist or that no source recognizes.
    """
    from ctxkeep.paths import absolute_file

    files, problems = [], []
    for p in paths:
        # absolute, as discovery's paths: a relative one stored as typed was a second
        # name of the file (newuser24 F1); lexical, so a symlink is still seen as one
        p = Path(absolute_file(p))
        if not p.exists():
            problems.append(f"{p}: no such file or directory")
            continue
        cands = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())
        found = 0
        for c in cands:
            # claude-code's matches() is the broadest (any JSONL with "sessionId"): ask it
            # last so the Gemini, Copilot and Qwen JSONL files reach their own source
            # the agents asked only: a source's module is imported when it is asked
            # (the hooks' worker names its agent: ~20 ms of imports at load 35 saved)
            for name in sorted(SOURCES, key=lambda n: n == "claude-code"):
                if agents and name not in agents:
                    continue
                src = SOURCES[name]
                if isinstance(src, ClaimsPaths) and src.matches(c):
                    meta = {}
                    if c.name.startswith("agent-") and name == "claude-code":
                        from ctxkeep.sources.claude_code import subagent_meta

                        meta = subagent_meta(c)
                    mode = src.mode_for(c) if isinstance(src, ModeByPath) else src.MODE
                    files.append(SourceFile(name, c, mode, meta))
                    found += 1
                    break
        if not found:
            whose = "any agent" if not agents else "the agents asked (--agent)"
            what = f"not a session file of {whose}" if p.is_file() else f"holds no session file of {whose}"
            problems.append(f"{p}: {what}; skipped")
    return files, problems

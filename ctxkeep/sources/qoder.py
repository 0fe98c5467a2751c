"""Qoder (Alibaba's agentic IDE and its ``qodercli``) session transcripts.

Where: ``$QODER_PROJECTS_DIR`` else, under the user's home, ``~/.qoder/projects``,
``~/.qoderwork/projects`` and the IDE's shared CLI cache ``SharedClientCache/cli/projects``
under ``~/.config/Qoder`` (Linux), ``~/Library/Application Support/Qoder`` (macOS) and
``~/AppData/Roaming/Qoder`` (Windows) (agentsview 0.46 ``internal/parser/qoder_paths.go``
qoderDefaultDirs and ``types.go`` AgentQoder, env ``QODER_PROJECTS_DIR``). Layout
(``qoder.go`` DiscoverQoderSessions): ``<projects>/<encoded cwd>/<session>.jsonl``, or
``<projects>/<session>.jsonl`` flat; sub-agents
``<projects>/<dir>/<session>/subagents/agent-<id>.jsonl``; beside a session a
``<session>-session.json`` ``{title, parent_session_id, fork_from, working_dir}``
(rewritten).

Format: Claude Code's transcript lines (agentsview parses them with its Claude parser,
``claudeParseWithExclusions``), read here by ``claude_code.parse_record``; entries are
labelled ``qoder`` and their usage keys prefixed ``qoder:``. From the
``-session.json``: the title (a ``meta`` entry on the session's first line), the parent
(``fork_from``, else ``parent_session_id``) of a session whose lines name none, and the
working directory of lines without ``cwd``.
"""

from __future__ import annotations

import re
from pathlib import Path

from ctxkeep.sources import claude_code
from ctxkeep.sources._util import json_object, nonempty, relabel, title_entry
from ctxkeep.sources.contract import Discovery, DiscoveryContext, FileMode, Mode, SourceFile, sorted_paths
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.jsonl import record_reader

AGENT = "qoder"
PARSER_VERSION = claude_code.PARSER_VERSION
MODE: Mode = "append"

_ID = re.compile(r"[A-Za-z0-9_-]+")
_CACHE = ("SharedClientCache", "cli", "projects")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$QODER_PROJECTS_DIR`` when set, else the five default dirs (module doc)."""
    env = ctx.env.get("QODER_PROJECTS_DIR")
    if env:
        return [Path(env).expanduser()]
    h = ctx.home
    return [
        h / ".qoder" / "projects",
        h / ".qoderwork" / "projects",
        h.joinpath("Library", "Application Support", "Qoder", *_CACHE),
        h.joinpath(".config", "Qoder", *_CACHE),
        h.joinpath("AppData", "Roaming", "Qoder", *_CACHE),
    ]


def _session_file(p: Path) -> bool:
    return not p.name.startswith("agent-") and bool(_ID.fullmatch(p.stem))


def discover(ctx: DiscoveryContext) -> Discovery:
    """Session transcripts (flat and per project) and sub-agent transcripts."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        d.searched.append(root)
        if not root.is_dir():
            continue
        for p in sorted_paths([*root.glob("*.jsonl"), *root.glob("*/*.jsonl")]):
            if _session_file(p):
                d.add(p, MODE)
        for p in sorted_paths(root.glob("*/*/subagents/agent-*.jsonl")):
            if _ID.fullmatch(p.stem) and _ID.fullmatch(p.parent.parent.name):
                d.add(p, MODE, claude_code.subagent_meta(p))
    sidecar.add_all(d, sidecars_of)
    d.explain_empty(roots(ctx)[0], "no Qoder <session>.jsonl transcripts found")
    return d


def matches(path: Path) -> bool:
    """A Claude Code-shaped transcript in a Qoder dir (``.qoder``, ``.qoderwork`` or
    ``Qoder`` in its path)."""
    return bool({".qoder", ".qoderwork", "Qoder"} & set(path.parts)) and claude_code.matches(path)


def session_meta(transcript: Path) -> dict:
    """``<session>-session.json`` beside a transcript ({} when missing or unreadable),
    read again only when it changed."""
    p = transcript.with_name(transcript.stem + "-session.json")
    return json_object(p)


def init_state(file: SourceFile) -> dict:
    """As Claude Code's (the session id from the file name, sub-agent ids)."""
    return claude_code.init_state(file)


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Claude Code's parse of the line, relabelled ``qoder`` and completed from the
    session's ``-session.json``."""
    out = relabel(claude_code.parse_record(rec, offset, line_hash, state, src), AGENT)
    path = Path(src)
    meta = {} if path.parent.name == "subagents" else session_meta(path)
    parent = nonempty(meta.get("fork_from")) or nonempty(meta.get("parent_session_id"))
    for e in out:
        if parent and not e.get("parent_session_id") and e.get("session_id") == path.stem:
            e["parent_session_id"] = parent
        if not e.get("project_dir"):
            e["project_dir"] = nonempty(meta.get("working_dir"))
    title = nonempty(meta.get("title"))
    if offset == 0 and title:
        ts = out[0].get("ts") if out else None
        out.append(
            dict(
                title_entry(
                    AGENT,
                    path.stem,
                    title,
                    src,
                    ts=ts,
                    project_dir=nonempty(meta.get("working_dir")),
                    offset=offset,
                ),
                parent_session_id=parent,
            )
        )
    return out


#: new lines of one transcript into entry dicts (``parse_record``)
def sidecars_of(path: Path) -> list[SourceFile]:
    """The sidecar of a session transcript at ``path``: its ``<session>-session.json``
    (``session_meta``), kept by the vault with it (``readers.sidecar``)."""
    if path.suffix != ".jsonl" or path.name.startswith("agent-"):
        return []
    return sidecar.beside(AGENT, path, {path.stem + "-session.json": "session-meta"})


def mode_for(path: Path) -> FileMode:
    """``rewrite`` for a ``<session>-session.json`` (a sidecar), else ``append``."""
    return sidecar.MODE if path.name.endswith("-session.json") else MODE


#: new lines of a transcript into entry dicts; a sidecar whole, for the vault
read = sidecar.reading(record_reader(PARSER_VERSION, parse_record, init_state), PARSER_VERSION)

"""OpenClaude: the open fork of Claude Code that talks to any OpenAI-compatible model.

Where: ``$OPENCLAUDE_CONFIG_DIR`` (comma-separated list allowed) else
``~/.openclaude``, with ``projects/<encoded cwd>/<session>.jsonl`` and sub-agent
transcripts ``projects/<dir>/<session>/subagents/agent-<id>.jsonl``, as Claude Code
lays them out (agentsview 0.46: ``internal/parser/types.go`` AgentOpenClaude,
``DefaultDirs .openclaude/projects``, root env ``OPENCLAUDE_CONFIG_DIR``; its
``openclaude.go`` reads the files with the Claude Code line parser).

Format: Claude Code's transcript lines (see ``claude_code``), parsed by the same
parser; the entries are labelled ``openclaude`` and the usage keys prefixed
``openclaude:`` (its message ids come from other providers and must not meet Claude
Code's keys).
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources import claude_code
from ctxkeep.sources._util import relabel
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile, sorted_paths
from ctxkeep.sources.readers.jsonl import record_reader

AGENT = "openclaude"
PARSER_VERSION = claude_code.PARSER_VERSION
MODE: Mode = "append"


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$OPENCLAUDE_CONFIG_DIR`` entries, else ``~/.openclaude``, plus configured dirs."""
    env = ctx.env.get("OPENCLAUDE_CONFIG_DIR")
    out = (
        [Path(p.strip()).expanduser() for p in env.split(",") if p.strip()]
        if env
        else [ctx.home / ".openclaude"]
    )
    return out + list(ctx.extra_dirs)


def discover(ctx: DiscoveryContext) -> Discovery:
    """Session and sub-agent transcripts under each root's ``projects/``."""
    d = Discovery(AGENT)
    for root in roots(ctx):
        proj = root / "projects" if (root / "projects").is_dir() else root
        d.searched.append(proj)
        if not proj.is_dir():
            continue
        for p in sorted_paths(proj.glob("*/*.jsonl")):
            d.add(p, MODE, {"subagent": p.stem[len("agent-") :]} if p.name.startswith("agent-") else {})
        for p in sorted_paths(proj.glob("*/*/subagents/agent-*.jsonl")):
            d.add(p, MODE, {"subagent": p.stem[len("agent-") :], "parent_session": p.parent.parent.name})
    d.explain_empty(ctx.home / ".openclaude", "no OpenClaude projects/*/*.jsonl found")
    return d


def matches(path: Path) -> bool:
    """A Claude Code-shaped transcript under an ``.openclaude`` folder."""
    return ".openclaude" in path.parts and claude_code.matches(path)


def init_state(file: SourceFile) -> dict:
    """As Claude Code's (the session id from the file name, sub-agent ids)."""
    return claude_code.init_state(file)


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Claude Code's parse of the line, relabelled ``openclaude``."""
    return relabel(claude_code.parse_record(rec, offset, line_hash, state, src), AGENT)


#: new lines of one transcript into entry dicts (``parse_record``; ``claude_code.keep_ids``)
read = claude_code.keep_ids(record_reader(PARSER_VERSION, parse_record, init_state))
#: the ids a store gave a file (``sources.as_stored``): Claude Code's
ids_meta = claude_code.ids_meta

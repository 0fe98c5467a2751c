"""OpenClaw (the personal agent gateway built on pi-mono's agent runtime) sessions.

Where: ``$OPENCLAW_DIR`` else ``~/.openclaw/agents`` and ``~/.kimi_openclaw/agents``
(all platforms, under the user's home; agentsview 0.46 ``internal/parser/types.go``
AgentOpenClaw, env ``OPENCLAW_DIR``): ``<agents>/<agent id>/sessions/<session>.jsonl``,
appended as the session goes; a session the user reset or deleted is kept renamed
``<session>.jsonl.reset.<ts>``, ``<session>.jsonl.deleted.<ts>`` or
``<session>.jsonl.full.bak`` (agentsview 0.46 ``internal/parser/openclaw.go``
IsOpenClawSessionFile, openClawAgentIDFromPath), and these are read too: their lines
carry the same ids as the live file's, so nothing is stored twice.

Format (``openclaw.go``): Pi's session lines (see ``ctxkeep.sources.pi``): a ``session``
header ``{id, cwd, timestamp}``, ``message`` entries whose ``message.role`` is ``user``,
``assistant`` (``model``, ``usage {input, output, cacheRead, cacheWrite}``) or
``toolResult`` (``toolCallId``), and ``model_change``, ``thinking_level_change``,
``custom``, ``compaction``. They are parsed by ``pi.parse_record``; entries are labelled
``openclaw`` and usage keys ``openclaw:<session>:<entry id>`` (Pi's, its prefix replaced).
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources import pi
from ctxkeep.sources._util import relabel
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile, sorted_paths
from ctxkeep.sources.readers.jsonl import record_reader

AGENT = "openclaw"
PARSER_VERSION = pi.PARSER_VERSION
MODE: Mode = "append"


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$OPENCLAW_DIR`` when set, else ``~/.openclaw/agents`` and ``~/.kimi_openclaw/agents``."""
    env = ctx.env.get("OPENCLAW_DIR")
    if env:
        return [Path(env).expanduser()]
    return [ctx.home / ".openclaw" / "agents", ctx.home / ".kimi_openclaw" / "agents"]


def is_session_file(name: str) -> bool:
    """A live ``<id>.jsonl`` or a kept ``.jsonl.reset.*``/``.jsonl.deleted.*``/``.jsonl.full.bak``."""
    if name.endswith(".jsonl"):
        return True
    head, sep, tail = name.partition(".jsonl.")
    return bool(head and sep) and (tail.startswith(("deleted.", "reset.")) or tail == "full.bak")


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<agents>/*/sessions/<session>.jsonl*`` in each root and configured dir."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        d.searched.append(root)
        if root.is_dir():
            for p in sorted_paths(root.glob("*/sessions/*.jsonl*")):
                if is_session_file(p.name):
                    d.add(p, MODE)
    d.explain_empty(roots(ctx)[0], "no OpenClaw <agent>/sessions/*.jsonl found")
    return d


def matches(path: Path) -> bool:
    """A Pi-shaped session file (a ``session`` header) under an OpenClaw
    ``agents/<id>/sessions`` dir."""
    if not (is_session_file(path.name) and path.parent.name == "sessions" and len(path.parents) > 3):
        return False
    if path.parents[2].name != "agents" or path.parents[3].name not in (".openclaw", ".kimi_openclaw"):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(2048)
    except OSError:
        return False
    return head.replace(b" ", b"").startswith(b'{"type":"session"')


def init_state(file: SourceFile) -> dict:
    """The session id the file name implies (up to ``.jsonl``) until the header names it."""
    return {"sid": file.path.name.partition(".jsonl")[0]}


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Pi's parse of the line, relabelled ``openclaw``."""
    return relabel(pi.parse_record(rec, offset, line_hash, state, src), AGENT, "pi:")


#: new lines of one session file into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

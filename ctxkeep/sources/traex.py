"""TraeX (ByteDance's Trae CLI, ``traex``, a fork of Codex CLI) rollouts.

Where: ``$TRAEX_SESSIONS_DIR`` else ``~/.trae/cli/sessions`` (the dated tree
``YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl``) and ``~/.trae/cli/archived_sessions``
(where ``traex archive <id>`` moves a rollout, as ``codex archive`` does), all
platforms under the user's home (agentsview 0.46 ``internal/parser/types.go``
AgentTraeX, env ``TRAEX_SESSIONS_DIR``). Append-only JSONL.

Format: Codex CLI's rollout lines, unchanged (agentsview 0.46 ``internal/parser/traex.go``
parses them with its Codex parser and only relabels the sessions, because resuming
needs ``traex resume`` and the two tools keep separate archives). Read here by
``codex.parse_record``; entries are labelled ``traex`` and usage keys
``traex:<origin>:<totals>`` (Codex's, its prefix replaced).
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources import codex
from ctxkeep.sources._util import relabel
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.readers.jsonl import record_reader

AGENT = "traex"
PARSER_VERSION = codex.PARSER_VERSION
MODE: Mode = "append"


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$TRAEX_SESSIONS_DIR`` when set, else ``~/.trae/cli/sessions`` and
    ``~/.trae/cli/archived_sessions``."""
    env = ctx.env.get("TRAEX_SESSIONS_DIR")
    if env:
        return [Path(env).expanduser()]
    cli = ctx.home / ".trae" / "cli"
    return [cli / "sessions", cli / "archived_sessions"]


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``**/rollout-*.jsonl`` in each root and configured dir."""
    d = Discovery(AGENT)
    for base in [*roots(ctx), *ctx.extra_dirs]:
        archived = base.name == "archived_sessions"

        def meta(p: Path, a: bool = archived) -> dict:
            return {"archived": a}

        d.add_glob(base, ["**/rollout-*.jsonl"], MODE, meta)
    d.explain_empty(roots(ctx)[0], "no TraeX rollout-*.jsonl found")
    return d


def matches(path: Path) -> bool:
    """A Codex-shaped rollout under a ``.trae`` dir."""
    return ".trae" in path.parts and codex.matches(path)


def init_state(file: SourceFile) -> dict:
    """As Codex's (the session id from the rollout's file name)."""
    return codex.init_state(file)


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Codex's parse of the line, relabelled ``traex``."""
    return relabel(codex.parse_record(rec, offset, line_hash, state, src), AGENT, "codex:")


#: new lines of one rollout into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)

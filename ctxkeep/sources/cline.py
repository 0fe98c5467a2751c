"""Cline (VS Code extension ``saoudrizwan.claude-dev``) tasks: see ``_vscode_tasks`` for the
locations (globalStorage of Code, Code - Insiders, VSCodium, Cursor and Windsurf on
Linux, macOS and Windows), the file formats and the mapping.

Also searched: the Cline CLI / JetBrains data dir ``$CLINE_DATA_DIR``, else
``$CLINE_DIR/data``, else ``~/.cline/data`` (its ``tasks/<id>/`` have the same files).

The corpus holds no Cline task; tests use the fixture in tests/fixtures/cline/,
built from the published schema (README.md there).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ctxkeep.sources import vscode_family as vt
from ctxkeep.sources.contract import DEFAULT_BATCH_BYTES, Batch, Discovery, DiscoveryContext, SourceFile, Watermark

AGENT = "cline"
PARSER_VERSION = 1
MODE = "rewrite"
EXTENSION_IDS = ("saoudrizwan.claude-dev",)


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find this extension's task files in every VS Code-family user dir."""
    return vt.discover_tasks(AGENT, EXTENSION_IDS, ctx, _extra_roots(ctx))


def _extra_roots(ctx: DiscoveryContext) -> list[Path]:
    """The Cline CLI / JetBrains data dir: ``$CLINE_DATA_DIR``, else
    ``$CLINE_DIR/data``, else ``~/.cline/data`` (cline/cline standalone storage context)."""
    if ctx.env.get("CLINE_DATA_DIR"):
        return [Path(ctx.env["CLINE_DATA_DIR"]).expanduser()]
    base = Path(ctx.env["CLINE_DIR"]).expanduser() if ctx.env.get("CLINE_DIR") else ctx.home / ".cline"
    return [base / "data"]


def matches(path: Path) -> bool:
    """True for an ``api_conversation_history.json``/``ui_messages.json`` under
    this extension's storage dir."""
    return vt.matches_task_file(path, EXTENSION_IDS) or (
        path.name in (vt.HISTORY, vt.UI) and ".cline" in path.parts)


def read(file: SourceFile, wm: Watermark | None,
         batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one task file whole when it changed."""
    return vt.read_task_file(AGENT, PARSER_VERSION, file, wm, batch_bytes)

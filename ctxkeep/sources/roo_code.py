"""Roo Code (VS Code extension ``rooveterinaryinc.roo-cline``) tasks: see ``_vscode_tasks`` for the
locations (globalStorage of Code, Code - Insiders, VSCodium, Cursor and Windsurf on
Linux, macOS and Windows), the file formats and the mapping.

The corpus holds no Roo Code task; tests use the fixture in tests/fixtures/roo-code/,
built from the published schema (README.md there).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ctxkeep.sources import vscode_family as vt
from ctxkeep.sources.contract import DEFAULT_BATCH_BYTES, Batch, Discovery, DiscoveryContext, SourceFile, Watermark

AGENT = "roo-code"
PARSER_VERSION = 1
MODE = "rewrite"
EXTENSION_IDS = ("rooveterinaryinc.roo-cline",)


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find this extension's task files in every VS Code-family user dir."""
    return vt.discover_tasks(AGENT, EXTENSION_IDS, ctx, _extra_roots(ctx))


def _extra_roots(ctx: DiscoveryContext) -> list[Path]:
    return []


def matches(path: Path) -> bool:
    """True for an ``api_conversation_history.json``/``ui_messages.json`` under
    this extension's storage dir."""
    return vt.matches_task_file(path, EXTENSION_IDS)


def read(file: SourceFile, wm: Watermark | None,
         batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one task file whole when it changed."""
    return vt.read_task_file(AGENT, PARSER_VERSION, file, wm, batch_bytes)

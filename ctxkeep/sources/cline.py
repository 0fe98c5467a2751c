"""Cline (VS Code extension ``saoudrizwan.claude-dev``) tasks: see ``vscode_family`` for
the locations (globalStorage of Code, Code - Insiders, VSCodium, Cursor and Windsurf on
Linux, macOS and Windows), the file formats and the mapping.

Also searched: the Cline CLI / JetBrains data dir ``$CLINE_DATA_DIR``, else
``$CLINE_DIR/data``, else ``~/.cline/data`` (its ``tasks/<id>/`` have the same files;
cline/cline standalone storage context).

The corpus holds no Cline task; tests use the fixture in tests/fixtures/cline/,
built from the published schema (README.md there).
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.sources.vscode_family import ExtensionSource


def data_roots(ctx: DiscoveryContext) -> list[Path]:
    """The Cline CLI / JetBrains data dir: ``$CLINE_DATA_DIR``, else
    ``$CLINE_DIR/data``, else ``~/.cline/data``."""
    if ctx.env.get("CLINE_DATA_DIR"):
        return [Path(ctx.env["CLINE_DATA_DIR"]).expanduser()]
    return [ctx.env_dir("CLINE_DIR", ctx.home / ".cline") / "data"]


SOURCE = ExtensionSource(
    AGENT="cline", EXTENSION_IDS=("saoudrizwan.claude-dev",), extra_roots=data_roots, data_dir_name=".cline"
)

"""Roo Code (VS Code extension ``rooveterinaryinc.roo-cline``, a fork of Cline) tasks:
see ``vscode_family`` for the locations (globalStorage of Code, Code - Insiders,
VSCodium, Cursor and Windsurf on Linux, macOS and Windows), the file formats and the
mapping.

The corpus holds no Roo Code task; tests use the fixture in tests/fixtures/roo-code/,
built from the published schema (README.md there).
"""

from __future__ import annotations

from ctxkeep.sources.vscode_family import ExtensionSource

SOURCE = ExtensionSource(AGENT="roo-code", EXTENSION_IDS=("rooveterinaryinc.roo-cline",))

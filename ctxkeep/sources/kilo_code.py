"""Kilo Code (VS Code extension ``kilocode.kilo-code``, a fork of Cline) tasks: see
``vscode_family`` for the locations (globalStorage of Code, Code - Insiders, VSCodium,
Cursor and Windsurf on Linux, macOS and Windows), the file formats and the mapping.

The corpus holds no Kilo Code task; tests use the fixture in tests/fixtures/kilo-code/,
built from the published schema (README.md there).
"""

from __future__ import annotations

from ctxkeep.sources.vscode_family import ExtensionSource

SOURCE = ExtensionSource(AGENT="kilo-code", EXTENSION_IDS=("kilocode.kilo-code",))

"""Gemini CLI reads its ``settings.json`` with comments (``packages/cli/src/config/
settings.ts``: ``strip-json-comments``; it writes back preserving them): hooks and MCP
install accept such a file and keep every comment; uninstall gives the bytes back
(newuser17 F8: "is not valid JSON ... fix it"). Claude Code's settings.json takes no
comments: refused as before. A comment inside the value ctxkeep rewrites ("hooks",
"mcpServers") is refused plainly, never dropped."""

from __future__ import annotations

import json
import re

import pytest

from ctxkeep.errors import ConfigError
from ctxkeep.hooks import install as inst
from tests.hooks.test_install import EXE, put, where

GEMINI = """{
  // my theme
  "theme": "Dracula", /* dark, "quoted" */
  "general": {
    // inner: keep me
    "vimMode": true
  },
  "url": "http://x//y" // a URL is not a comment
}
"""


def _strip(text: str) -> dict:
    return json.loads(
        re.sub(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', lambda m: m.group(1) or "", text, flags=re.S)
    )


def test_hooks_and_mcp_install_keep_geminis_comments(tmp_path):
    w = where(tmp_path)
    path = w.home / ".gemini" / "settings.json"
    original = put(path, GEMINI)
    assert inst.apply(inst.plan_hooks_install("gemini-cli", "user", w, EXE)).action == "updated"
    assert inst.apply(inst.plan_mcp_install("gemini-cli", "user", w, EXE)).action == "updated"
    text = path.read_text()
    for c in ("// my theme", '/* dark, "quoted" */', "// inner: keep me", "// a URL is not a comment"):
        assert c in text, text
    got = _strip(text)
    assert got["theme"] == "Dracula" and got["general"] == {"vimMode": True} and got["url"] == "http://x//y"
    assert got["mcpServers"]["ctxkeep"]["args"] == ["mcp"]
    cmds = [h["command"] for g in got["hooks"]["SessionEnd"] for h in g["hooks"]]
    assert any("hook gemini-cli SessionEnd" in c for c in cmds), got["hooks"]
    assert inst.apply(inst.plan_hooks_install("gemini-cli", "user", w, EXE)).action == "unchanged"
    assert inst.hooks_status("gemini-cli", "user", w, EXE)["hooks"][0]["state"] == "installed"
    inst.apply(inst.plan_mcp_uninstall("gemini-cli", "user", w))
    inst.apply(inst.plan_hooks_uninstall("gemini-cli", "user", w))
    assert path.read_bytes() == original


def test_a_comment_inside_the_value_ctxkeep_rewrites_is_refused_plainly(tmp_path):
    w = where(tmp_path)
    path = w.home / ".gemini" / "settings.json"
    original = put(path, '{\n  "mcpServers": {\n    // mine\n    "a": {"command": "x"}\n  }\n}\n')
    with pytest.raises(ConfigError, match="comments inside"):
        inst.plan_mcp_install("gemini-cli", "user", w, EXE)
    assert path.read_bytes() == original


def test_claude_settings_with_a_comment_stay_refused(tmp_path):
    w = where(tmp_path)
    put(w.home / ".claude" / "settings.json", '{\n  // x\n  "model": "opus"\n}\n')
    with pytest.raises(ConfigError, match="not valid JSON"):
        inst.plan_hooks_install("claude-code", "user", w, EXE)

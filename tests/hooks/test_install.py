"""The hook and MCP installers (ctxkeep.hooks.install) on settings files in a temporary
HOME that already hold the user's hooks and keys: the merged result exactly, a second
install changing nothing, uninstall giving back the user's bytes, status, bad files left
untouched, Codex's notify, and each agent's MCP config."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from ctxkeep.errors import ConfigError
from ctxkeep.hooks import install as inst
from ctxkeep.hooks import safe_write
from ctxkeep.hooks.settings_json import detect_layout, dumps, loads

EXE = ["/opt/ck bin/ctxkeep"]  # a space in the path: the command must quote it
Q = "'/opt/ck bin/ctxkeep'"

#: a user's Claude Code settings (4-space indent, other hooks and keys)
CLAUDE_USER = """{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {
                        "type": "command",
                        "command": "echo pre"
                    }
                ]
            }
        ],
        "SessionStart": [
            {
                "matcher": "startup",
                "hooks": [
                    {
                        "type": "command",
                        "command": "echo hi"
                    }
                ]
            }
        ]
    },
    "permissions": {
        "allow": [
            "Bash(ls:*)"
        ]
    }
}
"""


def where(tmp_path: Path, **env) -> inst.Where:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return inst.Where(home, env, tmp_path / "proj")


def put(p: Path, text: str, mode: int = 0o640) -> bytes:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    os.chmod(p, mode)
    return p.read_bytes()


def test_claude_install_merges_into_the_users_settings(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    original = put(path, CLAUDE_USER)
    change = inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE, timeout_s=7))
    assert change.action == "updated"
    got = json.loads(path.read_text())
    assert got == {
        "model": "opus",
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo pre"}]}],
            "SessionStart": [
                {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]},
                {
                    "matcher": "compact|resume",
                    "hooks": [
                        {"type": "command", "command": f"{Q} hook claude-code session-start", "timeout": 7}
                    ],
                },
            ],
            "PreCompact": [
                {"hooks": [{"type": "command", "command": f"{Q} hook claude-code precompact", "timeout": 7}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": f"{Q} hook claude-code stop", "timeout": 7}]}],
            "SessionEnd": [
                {"hooks": [{"type": "command", "command": f"{Q} hook claude-code session-end", "timeout": 7}]}
            ],
        },
        "permissions": {"allow": ["Bash(ls:*)"]},
    }
    # key order kept (dict equality above ignores it), the user's indent kept, mode kept
    assert list(got) == ["model", "hooks", "permissions"]
    assert list(got["hooks"]) == ["PreToolUse", "SessionStart", "PreCompact", "Stop", "SessionEnd"]
    assert '\n    "model": "opus",\n' in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    # the backup holds the user's bytes, with the same mode
    assert change.backup is not None and change.backup.read_bytes() == original
    assert change.backup.name.startswith("settings.json.ctxkeep-backup-")
    assert stat.S_IMODE(change.backup.stat().st_mode) == 0o640


def test_second_install_changes_nothing_byte_for_byte(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    put(path, CLAUDE_USER)
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    after_first = path.read_bytes()
    n_backups = len(safe_write.backups(path))
    again = inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    assert again.action == "unchanged" and not again.changes
    assert path.read_bytes() == after_first
    assert len(safe_write.backups(path)) == n_backups  # no new backup either


def test_uninstall_restores_the_users_bytes(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    original = put(path, CLAUDE_USER)
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    change = inst.apply(inst.plan_hooks_uninstall("claude-code", "user", w))
    assert change.action == "restored"
    assert path.read_bytes() == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    # nothing of ctxkeep's left: a second uninstall changes nothing
    assert inst.plan_hooks_uninstall("claude-code", "user", w).action == "unchanged"


def test_uninstall_without_a_backup_takes_out_only_ctxkeeps_entries(tmp_path):
    """The backups gone (or never made): the removal itself gives back the bytes of a
    file in the layout Claude Code writes."""
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    original = put(path, json.dumps(json.loads(CLAUDE_USER), indent=2) + "\n")
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    for b in safe_write.backups(path):
        b.unlink()
    change = inst.apply(inst.plan_hooks_uninstall("claude-code", "user", w))
    assert change.action == "removed"
    assert path.read_bytes() == original


def test_uninstall_keeps_what_the_user_changed_after_the_install(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    put(path, CLAUDE_USER)
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    edited = json.loads(path.read_text())
    edited["model"] = "sonnet"
    edited["hooks"]["SessionEnd"][0]["hooks"].append({"type": "command", "command": "echo bye"})
    path.write_text(json.dumps(edited, indent=4) + "\n")
    change = inst.apply(inst.plan_hooks_uninstall("claude-code", "user", w))
    assert change.action == "removed"
    got = json.loads(path.read_text())
    expected = json.loads(CLAUDE_USER)
    expected["model"] = "sonnet"
    expected["hooks"]["SessionEnd"] = [{"hooks": [{"type": "command", "command": "echo bye"}]}]
    assert got == expected


def test_install_into_no_file_then_uninstall_deletes_it(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    c = inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    assert c.action == "created" and c.backup is None
    assert set(json.loads(path.read_text())["hooks"]) == {"PreCompact", "SessionStart", "Stop", "SessionEnd"}
    assert path.read_text().startswith('{\n  "hooks": {\n')  # Claude Code's own layout
    assert inst.apply(inst.plan_hooks_uninstall("claude-code", "user", w)).action == "deleted"
    assert not path.exists()


def test_an_older_ctxkeep_entry_is_updated_in_place(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    old = {
        "hooks": {
            "SessionStart": [
                {
                    "matcher": "resume",
                    "hooks": [
                        {"type": "command", "command": "/old/bin/ctxkeep hook claude-code session-start"}
                    ],
                }
            ]
        }
    }
    put(path, json.dumps(old, indent=2))
    st = inst.hooks_status("claude-code", "user", w, EXE)
    assert [h["state"] for h in st["hooks"]] == ["missing", "outdated", "missing", "missing"]
    assert st["hooks"][1]["found"] == "/old/bin/ctxkeep hook claude-code session-start"
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    got = json.loads(path.read_text())["hooks"]["SessionStart"]
    assert got == [
        {
            "matcher": "compact|resume",
            "hooks": [{"type": "command", "command": f"{Q} hook claude-code session-start", "timeout": 10}],
        }
    ]
    st = inst.hooks_status("claude-code", "user", w, EXE)
    assert [h["state"] for h in st["hooks"]] == ["installed"] * 4


def test_invalid_json_is_left_untouched(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    bad = put(path, '{\n  "model": "opus",\n  "hooks": {\n}\n')
    mtime = path.stat().st_mtime_ns
    with pytest.raises(ConfigError) as e:
        inst.plan_hooks_install("claude-code", "user", w, EXE)
    msg = str(e.value)
    assert "\n" not in msg and "is not valid JSON (line 5" in msg and "~/.claude/settings.json" in msg
    assert "untouched" in msg
    with pytest.raises(ConfigError):
        inst.plan_hooks_uninstall("claude-code", "user", w)
    assert path.read_bytes() == bad and path.stat().st_mtime_ns == mtime
    assert safe_write.backups(path) == []
    assert "is not valid JSON" in inst.hooks_status("claude-code", "user", w, EXE)["error"]


def test_a_hooks_value_of_the_wrong_type_is_refused(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    put(path, '{"hooks": []}')
    with pytest.raises(ConfigError, match='"hooks" value that is not an object'):
        inst.plan_hooks_install("claude-code", "user", w, EXE)


def test_claude_config_dir_and_project_scope(tmp_path):
    cfg = tmp_path / "claude-cfg"
    w = where(tmp_path, CLAUDE_CONFIG_DIR=str(cfg))
    assert inst.hooks_path("claude-code", "user", w) == cfg / "settings.json"
    assert inst.hooks_path("claude-code", "project", w) == tmp_path / "proj" / ".claude" / "settings.json"
    assert inst.mcp_path("claude-code", "user", w) == cfg / ".claude.json"
    assert inst.mcp_path("claude-code", "project", w) == tmp_path / "proj" / ".mcp.json"
    w2 = where(tmp_path, CODEX_HOME=str(tmp_path / "cx"))
    assert inst.hooks_path("codex", "user", w2) == tmp_path / "cx" / "config.toml"
    inst.apply(inst.plan_hooks_install("claude-code", "project", w, EXE))
    assert (tmp_path / "proj" / ".claude" / "settings.json").is_file()
    assert not (cfg / "settings.json").exists()


def test_status_reports_each_agent_and_its_injection_point(tmp_path):
    w = where(tmp_path)
    st = inst.hooks_status("claude-code", "user", w, EXE)
    assert st["exists"] is False and [h["state"] for h in st["hooks"]] == ["missing"] * 4
    assert [(h["event"], h["matcher"]) for h in st["hooks"]] == [
        ("PreCompact", None),
        ("SessionStart", "compact|resume"),
        ("Stop", None),
        ("SessionEnd", None),
    ]
    assert st["injection"].startswith("SessionStart (compact|resume)")
    assert inst.hooks_status("codex", "user", w, EXE)["injection"].startswith("none:")
    assert "no event after a compression" in inst.hooks_status("gemini-cli", "user", w, EXE)["injection"]


# -- Gemini CLI ---------------------------------------------------------------------------


def test_gemini_hooks_merge_with_names_and_milliseconds(tmp_path):
    w = where(tmp_path)
    path = w.home / ".gemini" / "settings.json"
    user = {
        "theme": "GitHub",
        "hooksConfig": {"enabled": False},
        "hooks": {
            "BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}]
        },
    }
    original = put(path, json.dumps(user, indent=2) + "\n")
    c = inst.apply(inst.plan_hooks_install("gemini-cli", "user", w, EXE, timeout_s=3))
    got = json.loads(path.read_text())
    assert list(got) == ["theme", "hooksConfig", "hooks"]
    assert got["hooks"]["BeforeTool"] == user["hooks"]["BeforeTool"]
    start = got["hooks"]["SessionStart"]
    assert start == [
        {
            "matcher": "resume",
            "hooks": [
                {
                    "name": "ctxkeep-session-start",
                    "type": "command",
                    "command": f"{Q} hook gemini-cli SessionStart",
                    "timeout": 3000,
                    "description": "ctxkeep: " + inst.HOOKS["gemini-cli"][0].does,
                }
            ],
        }
    ]
    assert got["hooks"]["PreCompress"][0]["hooks"][0]["command"] == f"{Q} hook gemini-cli PreCompress"
    assert "matcher" not in got["hooks"]["PreCompress"][0]
    assert got["hooks"]["SessionEnd"][0]["hooks"][0]["name"] == "ctxkeep-session-end"
    # after each agent turn (newuser20 F1): the event the runtime ingests on
    assert got["hooks"]["AfterAgent"][0]["hooks"][0]["command"] == f"{Q} hook gemini-cli AfterAgent"
    assert got["hooks"]["AfterAgent"][0]["hooks"][0]["name"] == "ctxkeep-after-agent"
    assert any("hooksConfig.enabled is false" in n for n in c.notes)
    assert any(
        "hooksConfig.enabled is false" in n for n in inst.hooks_status("gemini-cli", "user", w, EXE)["notes"]
    )
    inst.apply(inst.plan_hooks_uninstall("gemini-cli", "user", w))
    assert path.read_bytes() == original


# -- Codex --------------------------------------------------------------------------------

CODEX_USER = """# my Codex setup
model = "gpt-5-codex"  # the fast one
approval_policy = "on-request"

# trusted projects
[projects."/work/app"]
trust_level = "trusted"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
"""


def test_codex_notify_is_added_keeping_comments_and_layout(tmp_path):
    w = where(tmp_path)
    path = w.home / ".codex" / "config.toml"
    original = put(path, CODEX_USER)
    inst.apply(inst.plan_hooks_install("codex", "user", w, EXE))
    text = path.read_text()
    assert text == CODEX_USER.replace(
        'approval_policy = "on-request"\n',
        'approval_policy = "on-request"\nnotify = ["/opt/ck bin/ctxkeep", "hook", "codex", "notify"]\n',
    )
    assert tomllib.loads(text)["notify"] == [*EXE, "hook", "codex", "notify"]
    assert inst.hooks_status("codex", "user", w, EXE)["hooks"][0]["state"] == "installed"
    assert inst.plan_hooks_install("codex", "user", w, EXE).action == "unchanged"
    assert inst.apply(inst.plan_hooks_uninstall("codex", "user", w)).action == "restored"
    assert path.read_bytes() == original
    # the removal itself (no backup) gives back the same bytes
    inst.apply(inst.plan_hooks_install("codex", "user", w, EXE))
    for b in safe_write.backups(path):
        b.unlink()
    assert inst.apply(inst.plan_hooks_uninstall("codex", "user", w)).action == "removed"
    assert path.read_bytes() == original


def test_codex_existing_notify_is_not_overwritten_without_force(tmp_path):
    w = where(tmp_path)
    path = w.home / ".codex" / "config.toml"
    theirs = 'notify = ["python3", "/home/me/notify.py"]\nmodel = "o3"\n'
    original = put(path, theirs)
    st = inst.hooks_status("codex", "user", w, EXE)
    assert st["hooks"][0]["state"] == "foreign"
    assert st["hooks"][0]["found"] == ["python3", "/home/me/notify.py"]
    assert any("ctxkeep does not replace it" in n for n in st["notes"])
    with pytest.raises(ConfigError) as e:
        inst.plan_hooks_install("codex", "user", w, EXE)
    assert "notify already runs another program" in str(e.value) and "--force" in str(e.value)
    assert path.read_bytes() == original
    # uninstall leaves another program's notify alone
    assert inst.plan_hooks_uninstall("codex", "user", w).action == "unchanged"
    # --force replaces it; the backup keeps it; uninstall brings it back
    c = inst.apply(inst.plan_hooks_install("codex", "user", w, EXE, force=True))
    assert tomllib.loads(path.read_text()) == {"notify": [*EXE, "hook", "codex", "notify"], "model": "o3"}
    assert c.backup.read_bytes() == original and any("replaced notify" in n for n in c.notes)
    assert inst.apply(inst.plan_hooks_uninstall("codex", "user", w)).action == "restored"
    assert path.read_bytes() == original


def test_codex_invalid_toml_is_left_untouched(tmp_path):
    w = where(tmp_path)
    path = w.home / ".codex" / "config.toml"
    bad = put(path, 'model = "o3\n')
    with pytest.raises(ConfigError, match="is not valid TOML"):
        inst.plan_hooks_install("codex", "user", w, EXE)
    assert path.read_bytes() == bad


def test_codex_config_with_only_tables_and_no_file(tmp_path):
    w = where(tmp_path)
    path = w.home / ".codex" / "config.toml"
    inst.apply(inst.plan_hooks_install("codex", "user", w, EXE))
    assert path.read_text() == 'notify = ["/opt/ck bin/ctxkeep", "hook", "codex", "notify"]\n'
    path.write_text("[tui]\nnotifications = true\n")
    inst.apply(inst.plan_hooks_install("codex", "user", w, EXE))
    assert tomllib.loads(path.read_text()) == {
        "notify": [*EXE, "hook", "codex", "notify"],
        "tui": {"notifications": True},
    }


# -- MCP servers ---------------------------------------------------------------------------


def test_mcp_claude_user_config_keeps_its_other_keys(tmp_path):
    w = where(tmp_path)
    path = w.home / ".claude.json"
    user = {
        "numStartups": 41,
        "mcpServers": {"gh": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}}},
    }
    original = put(path, json.dumps(user, indent=2), mode=0o600)
    inst.apply(inst.plan_mcp_install("claude-code", "user", w, EXE))
    got = json.loads(path.read_text())
    assert got == {
        "numStartups": 41,
        "mcpServers": {
            "gh": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}},
            "ctxkeep": {"type": "stdio", "command": "/opt/ck bin/ctxkeep", "args": ["mcp"], "env": {}},
        },
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert inst.plan_mcp_install("claude-code", "user", w, EXE).action == "unchanged"
    assert inst.apply(inst.plan_mcp_uninstall("claude-code", "user", w)).action == "restored"
    assert path.read_bytes() == original


def test_mcp_claude_project_gemini_cursor_and_codex_entries(tmp_path):
    w = where(tmp_path)
    store = tmp_path / "store"
    py = ["/usr/bin/python3", "-m", "ctxkeep"]
    inst.apply(inst.plan_mcp_install("claude-code", "project", w, EXE, home=store))
    assert json.loads((tmp_path / "proj" / ".mcp.json").read_text()) == {
        "mcpServers": {
            "ctxkeep": {
                "type": "stdio",
                "command": "/opt/ck bin/ctxkeep",
                "args": ["mcp", "--home", str(store)],
                "env": {},
            }
        }
    }
    gem = put(w.home / ".gemini" / "settings.json", '{\n\t"theme": "Dracula"\n}\n')
    inst.apply(inst.plan_mcp_install("gemini-cli", "user", w, py))
    text = (w.home / ".gemini" / "settings.json").read_text()
    assert json.loads(text) == {
        "theme": "Dracula",
        "mcpServers": {"ctxkeep": {"command": "/usr/bin/python3", "args": ["-m", "ctxkeep", "mcp"]}},
    }
    assert '\n\t"theme"' in text  # the tab indent kept
    inst.apply(inst.plan_mcp_install("cursor", "user", w, EXE))
    assert json.loads((w.home / ".cursor" / "mcp.json").read_text()) == {
        "mcpServers": {"ctxkeep": {"command": "/opt/ck bin/ctxkeep", "args": ["mcp"]}}
    }
    codex = put(w.home / ".codex" / "config.toml", CODEX_USER)
    inst.apply(inst.plan_mcp_install("codex", "user", w, EXE))
    assert (w.home / ".codex" / "config.toml").read_text() == (
        CODEX_USER + '\n[mcp_servers.ctxkeep]\ncommand = "/opt/ck bin/ctxkeep"\nargs = ["mcp"]\n'
    )
    for agent, scope in [
        ("claude-code", "project"),
        ("gemini-cli", "user"),
        ("cursor", "user"),
        ("codex", "user"),
    ]:
        inst.apply(inst.plan_mcp_uninstall(agent, scope, w))
    assert not (tmp_path / "proj" / ".mcp.json").exists()
    assert not (w.home / ".cursor" / "mcp.json").exists()
    assert (w.home / ".gemini" / "settings.json").read_bytes() == gem
    assert (w.home / ".codex" / "config.toml").read_bytes() == codex


def test_mcp_server_named_ctxkeep_of_another_program_needs_force(tmp_path):
    w = where(tmp_path)
    path = w.home / ".cursor" / "mcp.json"
    original = put(path, '{"mcpServers": {"ctxkeep": {"command": "node", "args": ["other.js"]}}}')
    with pytest.raises(ConfigError, match="already has an MCP server named ctxkeep"):
        inst.plan_mcp_install("cursor", "user", w, EXE)
    assert inst.plan_mcp_uninstall("cursor", "user", w).action == "unchanged"
    assert path.read_bytes() == original
    inst.apply(inst.plan_mcp_install("cursor", "user", w, EXE, force=True))
    assert json.loads(path.read_text())["mcpServers"]["ctxkeep"]["command"] == EXE[0]


def test_agent_commands_for_mcp():
    assert (
        inst.agent_mcp_command("claude-code", "user", EXE)
        == f"claude mcp add --scope user ctxkeep -- {Q} mcp"
    )
    assert inst.agent_mcp_command("codex", "user", EXE) == f"codex mcp add ctxkeep -- {Q} mcp"
    assert (
        inst.agent_mcp_command("gemini-cli", "project", EXE)
        == f"gemini mcp add --scope project ctxkeep {Q} mcp"
    )
    assert inst.agent_mcp_command("cursor", "user", EXE) is None


# -- recognizing ctxkeep's commands, and layouts --------------------------------------------


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("/usr/local/bin/ctxkeep hook claude-code precompact", ("hook", "claude-code", "precompact")),
        ("'/a b/ctxkeep' hook claude-code session-end", ("hook", "claude-code", "session-end")),
        (
            "/usr/bin/python3 -m ctxkeep hook claude-code session-start",
            ("hook", "claude-code", "session-start"),
        ),
        ("ctxkeep hook codex notify", None),  # another agent's
        ("echo ctxkeep hook claude-code precompact", ("hook", "claude-code", "precompact")),
        ("/bin/notctxkeep hook claude-code precompact", None),
        ("python3 ~/.claude/hooks/ctxkeep-like.py hook", None),
        ("unbalanced 'quote", None),
    ],
)
def test_identify_hook(command, ours):
    assert inst.identify_hook("claude-code")(command) == ours


@pytest.mark.parametrize(
    "text",
    [
        '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ],\n  "c": {}\n}\n',
        '{\n\t"a": "é"\n}',
        '{"a": 1, "b": {"c": []}}',
        '{"a":1,"b":{"c":[]}}\n',
        '{\r\n    "a": "\\u00e9"\r\n}\r\n',
        '\ufeff{\n  "a": 1\n}\n',
    ],
)
def test_json_layouts_round_trip(text):
    obj, layout = loads(text.encode("utf-8"), "x")
    assert dumps(obj, layout) == text.encode("utf-8")
    assert detect_layout(text) == layout


def test_home_before_the_command_is_the_store_the_hooks_run_against(tmp_path, monkeypatch):
    """``ctxkeep --home S hooks install`` writes hooks that run against S (as ``mcp
    install`` does); an install for another store replaces them, status compares with
    the store given; and the installed command ingests into S."""
    import shlex

    from typer.testing import CliRunner

    from conftest import corpus
    from ctxkeep.cli import app

    home = tmp_path / "home"
    home.mkdir()
    store = tmp_path / "S"
    monkeypatch.delenv("CTXKEEP_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(inst, "ctxkeep_argv", lambda: EXE)
    runner = CliRunner()
    agents = ["--agent", "claude-code", "--agent", "codex", "--agent", "gemini-cli"]
    r = runner.invoke(app, ["--home", str(store), "hooks", "install", *agents])
    assert r.exit_code == 0, r.output

    claude = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    commands = [h["command"] for groups in claude.values() for g in groups for h in g["hooks"]]
    assert len(commands) == 4 and all(c.endswith(f" --home {store}") for c in commands)
    gemini = json.loads((home / ".gemini" / "settings.json").read_text())["hooks"]
    assert all(
        h["command"].endswith(f" --home {store}") for gs in gemini.values() for g in gs for h in g["hooks"]
    )
    notify = tomllib.loads((home / ".codex" / "config.toml").read_text())["notify"]
    assert notify == [*EXE, "hook", "codex", "notify", "--home", str(store)]

    def states(*before: str) -> set[str]:
        r = runner.invoke(app, [*before, "hooks", "status", *agents, "--json"])
        return {h["state"] for row in json.loads(r.stdout)["agents"] for h in row["hooks"]}

    assert states("--home", str(store)) == {"installed"}
    assert states() == {"outdated"}  # the default store's hooks would differ
    # another store: replaced in place, never a second hook per event
    other = tmp_path / "T"
    assert runner.invoke(app, ["--home", str(other), "hooks", "install", *agents]).exit_code == 0
    claude = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    commands = [h["command"] for groups in claude.values() for g in groups for h in g["hooks"]]
    assert len(commands) == 4 and all(c.endswith(f" --home {other}") for c in commands)

    # the installed SessionEnd hook, run as Claude Code runs it (this Python for the
    # executable; the runtime ends its process with os._exit), ingests into that store
    import subprocess
    import sys

    (end,) = [h["command"] for g in claude["SessionEnd"] for h in g["hooks"]]
    transcript = corpus(".claude/projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl")
    payload = {"session_id": "ef958aa1", "transcript_path": str(transcript), "hook_event_name": "SessionEnd"}
    env = {k: v for k, v in os.environ.items() if k != "CTXKEEP_HOME"}
    p = subprocess.run(
        [sys.executable, "-m", "ctxkeep", *shlex.split(end)[1:]],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**env, "HOME": str(home)},
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    # the hook queues the ingest for a detached worker (hooks.worker): wait for it
    import time

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and "ingested" not in _text(other / "hooks.log"):
        time.sleep(0.2)
    assert "ingested" in _text(other / "hooks.log")
    assert (other / "store.db").exists() and not store.exists()


def _text(p: Path) -> str:
    try:
        return p.read_text()
    except OSError:
        return ""


@pytest.mark.parametrize("text", ['{"theme":"dark","hooks":{}}\n', '{"hooks": {"SessionStart": []}, "x": 1}'])
def test_uninstall_gives_back_an_empty_hooks_object_byte_for_byte(tmp_path, text):
    """A settings file whose ``hooks`` (or an event's list) was empty before install:
    the removal drops what it left empty, and the backup holding the user's bytes still
    comes back (before: the file was rewritten without the user's ``"hooks": {}``;
    newuser14 F11)."""
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    original = put(path, text)
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    assert path.read_bytes() != original
    change = inst.apply(inst.plan_hooks_uninstall("claude-code", "user", w))
    assert change.action == "restored"
    assert path.read_bytes() == original


def test_uninstall_deletes_the_backups_it_no_longer_needs(tmp_path):
    """newuser21 N10: every install's `settings.json.ctxkeep-backup-*` stayed (5 after
    two rounds). Back byte for byte: none is left; the user's edits kept (a structural
    uninstall): only the newest, the file as it was just before."""
    w = where(tmp_path)
    path = w.home / ".claude" / "settings.json"
    original = put(path, CLAUDE_USER)
    for _ in range(2):
        inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
        inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE, home=tmp_path / "other"))
        assert len(safe_write.backups(path)) == 2
        change = inst.apply(inst.plan_hooks_uninstall("claude-code", "user", w))
        assert change.action == "restored" and path.read_bytes() == original
        assert len(change.pruned) == 2
        assert safe_write.backups(path) == []
        assert change.as_dict()["backups_removed"] == [str(p) for p in change.pruned]
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE))
    inst.apply(inst.plan_hooks_install("claude-code", "user", w, EXE, home=tmp_path / "other"))
    edited = path.read_text().replace('"opus"', '"sonnet"')
    path.write_text(edited)
    change = inst.apply(inst.plan_hooks_uninstall("claude-code", "user", w))
    assert change.action == "removed" and len(change.pruned) == 2
    assert safe_write.backups(path) == [change.backup]
    assert change.backup.read_text() == edited  # the file as it was, ctxkeep's entries and all
    assert json.loads(path.read_text())["model"] == "sonnet"

"""``ctxkeep hooks install | uninstall | status`` and ``ctxkeep mcp install | uninstall``
on the command line (Typer's CliRunner, in a temporary HOME with a ``ctxkeep`` on PATH
that the installed commands must name)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()

CLAUDE = {
    "model": "opus",
    "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo pre"}]}]},
    "statusLine": {"type": "command", "command": "~/bin/status"},
}


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A HOME with Claude Code and Codex settings, and a ctxkeep executable first on PATH."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps(CLAUDE, indent=2) + "\n")
    (home / ".codex" / "config.toml").write_text('model = "o3"\n')
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    exe = bin_ / "ctxkeep"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    return home, str(exe)


def ck(*args):
    return runner.invoke(app, list(args))


def test_install_status_uninstall(env):
    home, exe = env
    settings = home / ".claude" / "settings.json"
    before = settings.read_bytes()
    r = ck("hooks", "install")  # no --agent: the agents found in HOME (not gemini-cli)
    assert r.exit_code == 0, r.output
    assert "claude-code: updated ~/.claude/settings.json (backup settings.json.ctxkeep-backup-" in r.output
    assert "codex: updated ~/.codex/config.toml" in r.output
    assert "gemini-cli" not in r.output and not (home / ".gemini").exists()
    got = json.loads(settings.read_text())
    assert got["hooks"]["SessionStart"] == [
        {
            "matcher": "compact|resume",
            "hooks": [{"type": "command", "command": f"{exe} hook claude-code session-start", "timeout": 10}],
        }
    ]
    assert (
        got["statusLine"] == CLAUDE["statusLine"]
        and got["hooks"]["PreToolUse"] == CLAUDE["hooks"]["PreToolUse"]
    )
    assert (
        home / ".codex" / "config.toml"
    ).read_text() == f'model = "o3"\nnotify = ["{exe}", "hook", "codex", "notify"]\n'
    installed = settings.read_bytes()

    r = ck("hooks", "install", "--agent", "claude-code")
    assert r.exit_code == 0 and r.output == "claude-code: unchanged ~/.claude/settings.json\n"
    assert settings.read_bytes() == installed

    r = ck("hooks", "status")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "claude-code: ~/.claude/settings.json"
    assert lines[1].startswith("  ok       PreCompact: ingests the transcript")
    assert lines[2].startswith("  ok       SessionStart [compact|resume]: ")
    assert "gemini-cli: ~/.gemini/settings.json (no file)" in lines
    assert "  missing  PreCompress: ingests the session before Gemini CLI compresses its history" in lines
    assert any(line.startswith("  snapshot injection: none: Codex runs its notify program") for line in lines)

    r = ck("hooks", "status", "--json", "--agent", "codex")
    shown = json.loads(r.stdout)
    (row,) = shown["agents"]
    assert shown["schema"] == 1 and (
        row["hooks"][0]["state"] == "installed" and row["hooks"][0]["command"] == f"{exe} hook codex notify"
    )

    r = ck("hooks", "uninstall", "--agent", "claude-code", "--agent", "codex")
    assert r.exit_code == 0, r.output
    assert "claude-code: restored ~/.claude/settings.json (from settings.json.ctxkeep-backup-" in r.output
    # newuser21 N10: back byte for byte, so its backups are gone, and the line says so
    assert "; deleted its 1 backup: the file is back byte for byte" in r.output, r.output
    assert [p.name for p in settings.parent.iterdir() if ".ctxkeep-backup-" in p.name] == []
    assert settings.read_bytes() == before
    assert (home / ".codex" / "config.toml").read_text() == 'model = "o3"\n'


def test_dry_run_writes_nothing_and_shows_the_diff(env):
    home, exe = env
    settings = home / ".claude" / "settings.json"
    before = settings.read_bytes()
    r = ck("hooks", "install", "--agent", "claude-code", "--dry-run")
    assert r.exit_code == 0
    assert r.output.startswith("claude-code: would update ~/.claude/settings.json\n---")
    assert f'+            "command": "{exe} hook claude-code precompact",' in r.output
    assert settings.read_bytes() == before
    assert [p.name for p in settings.parent.iterdir()] == ["settings.json"]


def test_invalid_json_one_error_line_exit_1_file_untouched(env):
    home, _ = env
    settings = home / ".claude" / "settings.json"
    settings.write_text('{"model": "opus",}\n')
    before = settings.read_bytes()
    r = ck("hooks", "install", "--agent", "claude-code")
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: claude-code: is not valid JSON (line 1 column 18")
    assert "(~/.claude/settings.json) - fix it or move it away" in r.stderr
    assert settings.read_bytes() == before and len(list(settings.parent.iterdir())) == 1
    r = ck("hooks", "status", "--agent", "claude-code")
    assert r.exit_code == 1 and "  error: is not valid JSON" in r.stdout


def test_codex_foreign_notify_refused_then_forced(env):
    home, exe = env
    cfg = home / ".codex" / "config.toml"
    cfg.write_text('notify = ["notify-send", "codex"]\n')
    r = ck("hooks", "install", "--agent", "codex")
    assert r.exit_code == 1
    assert r.stderr.startswith('error: codex: notify already runs another program (["notify-send", "codex"])')
    assert "pass --force" in r.stderr
    assert cfg.read_text() == 'notify = ["notify-send", "codex"]\n'
    r = ck("hooks", "status", "--agent", "codex")
    assert "  other program notify: " in r.stdout and "found: ['notify-send', 'codex']" in r.stdout
    r = ck("hooks", "install", "--agent", "codex", "--force", "--json")
    (row,) = json.loads(r.stdout)["agents"]
    assert row["action"] == "updated" and row["notes"] == [
        'replaced notify ["notify-send", "codex"] (kept in the backup)'
    ]
    assert Path(row["backup"]).read_text() == 'notify = ["notify-send", "codex"]\n'


def test_unknown_agent_is_a_usage_error(env):
    r = ck("hooks", "install", "--agent", "aider")
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        "error: unknown agent 'aider' (--agent) - use one of: claude-code, codex, gemini-cli"
        " - see `ctxkeep hooks install --help`"
    ]
    # comma-separated as everywhere: both are taken
    r = ck("hooks", "status", "--agent", "claude-code,codex", "--json")
    assert [row["agent"] for row in json.loads(r.stdout)["agents"]] == ["claude-code", "codex"]


def test_no_agent_found(env, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "empty"))
    r = ck("hooks", "install")
    assert r.exit_code == 1 and "no agent found in your home" in r.stderr


def test_mcp_install_and_uninstall(env):
    home, exe = env
    r = ck("mcp", "install", "--agent", "cursor", "--agent", "claude-code")
    assert r.exit_code == 0, r.output
    assert "cursor: created ~/.cursor/mcp.json" in r.output
    assert "claude-code: created ~/.claude.json" in r.output
    assert (
        f"  or with claude-code's own command: claude mcp add --scope user ctxkeep -- {exe} mcp" in r.output
    )
    assert json.loads((home / ".cursor" / "mcp.json").read_text()) == {
        "mcpServers": {"ctxkeep": {"command": exe, "args": ["mcp"]}}
    }
    r = ck("mcp", "install", "--agent", "codex", "--scope", "project", "--json")
    shown = json.loads(r.stdout)
    (row,) = shown["agents"]
    assert shown["schema"] == 1 and (
        row["path"].endswith("/.codex/config.toml")
        and row["agent_command"] == f"codex mcp add ctxkeep -- {exe} mcp"
    )
    assert (
        Path.cwd() / ".codex" / "config.toml"
    ).read_text() == f'[mcp_servers.ctxkeep]\ncommand = "{exe}"\nargs = ["mcp"]\n'
    r = ck("mcp", "uninstall", "--agent", "cursor", "--agent", "claude-code")
    assert r.exit_code == 0
    assert not (home / ".cursor" / "mcp.json").exists() and not (home / ".claude.json").exists()


def test_mcp_without_subcommand_still_documents_the_server():
    r = ck("mcp", "--help")
    assert r.exit_code == 0 and "install" in r.output and "uninstall" in r.output and "--home" in r.output


def test_status_s_install_line_fits_80_columns(tmp_path):
    """`hooks status` with no hook installed printed an 83-column install line at 80
    columns (newuser19 F17); the agents now go comma-separated, as --agent takes them,
    and the line folds between words."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, HOME=str(tmp_path), COLUMNS="80", CTXKEEP_HOME=str(tmp_path / "store"))
    for scope in ("user", "project"):
        r = subprocess.run(
            [sys.executable, "-m", "ctxkeep", "hooks", "status", "--scope", scope],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        lines = (r.stdout + r.stderr).splitlines()
        assert lines and all(len(x) <= 80 for x in lines), [x for x in lines if len(x) > 80]
        said = " ".join(" ".join(lines).split())
        want = "install: ctxkeep hooks install --agent claude-code,codex,gemini-cli"
        assert want + ("" if scope == "user" else " --scope project") in said, said


def test_status_shows_each_hooks_last_run_and_a_failing_one(env, tmp_path, monkeypatch):
    """newuser20 F15: a hook exits 0 whatever happens, so a failing one was invisible
    (`hooks status` said ok; the log had a raw exception). Status now shows each hook's
    last run from the store's hooks.log, and the error while it is the newest line; the
    log line says what, where and what to do."""
    from ctxkeep.hooks import runtime

    store = tmp_path / "store"
    monkeypatch.setenv("CTXKEEP_HOME", str(store))
    assert ck("hooks", "install", "--agent", "claude-code").exit_code == 0
    r = runtime.run("claude-code", "precompact", "not json", home=store)
    assert r.action == "error" and r.stdout == ""
    log = (store / "hooks.log").read_text()
    assert (
        "claude-code precompact: error: the hook's input is not JSON (Expecting value at character 0)" in log
    )
    assert "JSONDecodeError" not in log
    out = ck("hooks", "status", "--agent", "claude-code")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    at = lines.index(next(x for x in lines if "PreCompact" in x))
    assert lines[at + 1].strip().startswith("last run 20") and lines[at + 1].endswith(" UTC: error")
    assert lines[at + 2].strip().startswith("failed 20") and "is not JSON" in lines[at + 2]
    rows = json.loads(ck("hooks", "status", "--agent", "claude-code", "--json").stdout)["agents"][0]["hooks"]
    by = {h["event"]: h for h in rows}
    assert (
        by["PreCompact"]["last"]["outcome"] == "error"
        and by["PreCompact"]["last_error"]["outcome"] == "error"
    )
    assert by["Stop"]["last"] is None and by["Stop"]["last_error"] is None  # never ran
    # a run that works afterwards: the last run is that one, the old error no longer shown
    runtime.run("claude-code", "precompact", json.dumps({"transcript_path": "/no/such.jsonl"}), home=store)
    lines = ck("hooks", "status", "--agent", "claude-code").output.splitlines()
    at = lines.index(next(x for x in lines if "PreCompact" in x))
    assert lines[at + 1].endswith(" UTC: skipped") and "failed" not in lines[at + 2]

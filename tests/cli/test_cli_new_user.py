"""Defects a new user met (session 12, the ux brief): each command answers with one
clear line and the right exit code where it printed a traceback, a third-party error
or two contradicting lines."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app

CODEX_FILE = (
    CORPUS_HOME
    / ".codex/sessions/2025/10/31/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"
)

runner = CliRunner()


def _listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def test_ui_on_a_taken_port_is_one_error_line_before_any_url(tmp_path, monkeypatch):
    """`ui --port P` with P taken: one error line, rc 1, the server never started and
    no URL announced (before: "ctxkeep app at URL", then uvicorn's address-in-use error)."""
    from ctxkeep.cli import ui as ui_mod

    started: list = []
    monkeypatch.setattr(ui_mod, "run_server", lambda cmd, env, secret=None: started.append(cmd) or 0)
    with _listening() as s:
        port = s.getsockname()[1]
        r = runner.invoke(app, ["ui", "--home", str(tmp_path), "--no-browser", "--port", str(port)])
    assert r.exit_code == 1 and started == []
    assert r.stderr.splitlines() == [
        f"error: port {port} is already in use (127.0.0.1:{port}) - stop what listens there, "
        "or pass another --port (or none: a free one is picked)"
    ]


def test_ui_default_port_taken_picks_a_free_one_and_says_so(tmp_path, monkeypatch):
    from ctxkeep.cli import ui as ui_mod

    started: list = []
    monkeypatch.setattr(ui_mod, "run_server", lambda cmd, env, secret=None: started.append(cmd) or 0)
    with _listening() as s:
        busy = s.getsockname()[1]
        monkeypatch.setattr(ui_mod, "UI_PORT", busy)
        r = runner.invoke(app, ["ui", "--home", str(tmp_path), "--no-browser"])
    assert r.exit_code == 0, r.output
    cmd = started[0]
    port = int(cmd[cmd.index("--port") + 1])
    assert port != busy
    assert r.stderr.splitlines() == [
        f"port {busy} is in use; using port {port}",
        f"ctxkeep app at http://localhost:{port} (Ctrl+C stops it)",
    ]


def test_ingest_path_of_no_agent_is_one_error_line(tmp_path):
    """`ingest --path README.md`: one line saying the file is no agent's and was
    skipped, rc 1 (before: "ingested 0 new entries from 0 of 0 files", "no session files
    found: ... --path FILE reads one file" and a warning, rc 0)."""
    readme = tmp_path / "README.md"
    readme.write_text("# a project\n")
    store = tmp_path / "store"
    r = runner.invoke(app, ["ingest", "--home", str(store), "--no-progress", "--path", str(readme)])
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"error: not a session file of any agent; skipped ({readme}) - give a session file or a "
        "folder that holds them (`ctxkeep sources` shows where each agent keeps them)"
    ]
    r = runner.invoke(app, ["ingest", "--home", str(store), "--json", "--path", str(readme)])
    assert r.exit_code == 1 and '"problems": [' in r.stdout
    assert len(r.stderr.splitlines()) == 1
    # a folder of no agent's files, then one of two paths skipped: a warning, the run goes on
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("x")
    r = runner.invoke(app, ["ingest", "--home", str(store), "--path", str(tmp_path / "docs")])
    assert r.exit_code == 1 and "holds no session file of any agent; skipped" in r.stderr


def test_ingest_path_skipped_beside_a_session_file_is_a_warning(tmp_path):
    if not CODEX_FILE.is_file():
        pytest.skip("shared/corpus not present")
    readme = tmp_path / "README.md"
    readme.write_text("# a project\n")
    r = runner.invoke(
        app,
        [
            "ingest",
            "--home",
            str(tmp_path / "s"),
            "--no-progress",
            "--path",
            str(readme),
            "--path",
            str(CODEX_FILE),
        ],
    )
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == [f"warning: {readme}: not a session file of any agent; skipped"]
    assert r.stdout.startswith("ingested 2 new entries from 1 of 1 file")


def test_no_command_help_breaks_a_line_mid_sentence():
    """Rich help keeps a docstring's newlines: a command whose help spanned lines was
    shown broken mid-sentence in `ctxkeep --help` (`restore`). Every command's help, and
    every group's command's, is one paragraph on one line."""
    import typer.main

    group = typer.main.get_group(app)

    def walk(g, path):
        for name, cmd in g.commands.items():
            yield f"{path} {name}", cmd
            if hasattr(cmd, "commands"):
                yield from walk(cmd, f"{path} {name}")

    broken = [
        name for name, cmd in walk(group, "ctxkeep") if "\n" in (cmd.help or "").strip().split("\n\n")[0]
    ]
    assert broken == []

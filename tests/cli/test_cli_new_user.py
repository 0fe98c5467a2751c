"""Defects a new user met (session 12, the ux brief): each command answers with one
clear line and the right exit code where it printed a traceback, a third-party error
or two contradicting lines."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from ctxkeep.cli import app

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

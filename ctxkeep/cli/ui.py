"""``ctxkeep ui``: the app (``ctxkeep/notebooks/app.py``, a marimo notebook) served by
``marimo run`` on loopback; read-only over the store. A non-loopback ``--host`` needs
``--allow-remote`` and a token (``--token``, ``CTXKEEP_UI_TOKEN`` or ``--token-file``;
marimo's token password: the URL must carry ``?access_token=TOKEN``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, _fail, _home, app, err
from ctxkeep.errors import CtxkeepError, UsageError


def marimo_command(
    app_path: Path, home: Path, host: str, port: int, *, browser: bool, token: str | None
) -> list[str]:
    """The ``marimo run`` command line of the app (the store as ``--store`` after
    ``--``, marimo's own options before it). A token is read from standard input
    (``--token-password-file -``), never put on the command line (which other users
    of the machine can list).

    marimo's own ``-y`` (yes to its prompts) and ``-q`` (no banner or tips): Ctrl+C in a
    terminal reaches marimo too (the terminal signals the whole foreground group), and
    marimo 0.2x then asked "Are you sure you want to quit? (y/N)" on the terminal and
    stopped answering while it waited (``marimo/_server/api/interrupt.py``: it shuts
    down at once when quiet or ``--yes``); its startup tips ("Lint and format
    notebooks $ marimo check --fix .") are about marimo, not this app (newuser15 F7).
    ``ctxkeep ui`` prints the app's address itself."""
    cmd = [
        sys.executable,
        "-m",
        "marimo",
        "-y",
        "-q",
        "run",
        str(app_path),
        "--host",
        host,
        "--port",
        str(port),
    ]
    cmd += ["--token", "--token-password-file", "-"] if token else ["--no-token"]
    if not browser:
        cmd.append("--headless")
    return [*cmd, "--", "--store", str(home)]


def _read_token(path: Path) -> str:
    """The first line of ``path``, stripped (newuser18 F16: a token given as ``--token``
    is on the command line, which every user of the machine can list). An unreadable
    or empty file: one error line, exit 2."""
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        _fail(
            UsageError(f"cannot read the token file: {getattr(e, 'strerror', None) or e}", where=str(path)), 2
        )
    first = text.splitlines()[0].strip() if text.strip() else ""
    if not first:
        _fail(
            UsageError("the token file is empty", where=str(path), hint="write the token on its first line"),
            2,
        )
    return first


#: the app's port when ``--port`` is not given (marimo's own default)
UI_PORT = 2718


@app.command()
def ui(
    port: int | None = typer.Option(
        None,
        "--port",
        "-p",
        min=1,
        max=65535,
        help=f"TCP port (default {UI_PORT}; when that one is taken, a free one).",
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (loopback unless --allow-remote)."
    ),
    no_browser: bool = typer.Option(False, "--no-browser", help="Do not open the browser."),
    allow_remote: bool = typer.Option(
        False,
        "--allow-remote",
        help="Allow a non-loopback --host (needs --token: anyone who can reach it reads every session).",
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        metavar="TOKEN",
        envvar="CTXKEEP_UI_TOKEN",
        show_envvar=True,
        help="Access token a remote browser must give (with --allow-remote). On the command line other "
        "users of the machine can read it (ps): prefer CTXKEEP_UI_TOKEN or --token-file.",
    ),
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        metavar="FILE",
        help="Read the access token from the first line of FILE (instead of --token).",
    ),
    home: Path | None = HomeOpt,
):
    """Browse the store in the browser: Overview, Sessions and transcripts, Search, Store (the marimo app)."""
    from ctxkeep.render import report
    from ctxkeep.service.maintenance import free_port, is_loopback, port_free

    if token_file is not None:
        token = _read_token(token_file)

    if not is_loopback(host) and not allow_remote:
        _fail(
            UsageError(
                f"--host {host} is not a loopback address",
                where="--host",
                hint="add --allow-remote --token TOKEN, or use 127.0.0.1",
            ),
            2,
        )
    if allow_remote and not is_loopback(host) and not (token and len(token) >= 8):
        _fail(
            UsageError(
                f"--token is {len(token)} character{'s' * (len(token) != 1)}: --allow-remote needs 8 or more"
                if token
                else "--allow-remote needs --token (8 characters or more)",
                where="--token",
                hint="pass a longer --token TOKEN" if token else "pass --token TOKEN",
            ),
            2,
        )
    missing = [m for m in report.missing_modules() if m != "vl_convert"]
    if missing:
        _fail(CtxkeepError(f"`ui` needs {', '.join(missing)}", hint=report.INSTALL_HINT))
    h = _home(home)
    # checked before the URL is announced: a taken port was "app at URL" then uvicorn's
    # "address already in use" error
    if port is not None and not port_free(host, port):
        _fail(
            CtxkeepError(
                f"port {port} is already in use",
                where=f"{host}:{port}",
                hint="stop what listens there, or pass another --port (or none: a free one is picked)",
            )
        )
    if port is None:
        port = UI_PORT
        if not port_free(host, port):
            try:
                port = free_port(host)
            except OSError as e:
                _fail(CtxkeepError(f"cannot listen on {host}: {e.strerror}", where="--host"))
            err.print(f"port {UI_PORT} is in use; using port {port}", highlight=False)
    app_path = Path(str(report.notebooks_dir() / "app.py"))
    cmd = marimo_command(
        app_path, h, host, port, browser=not no_browser, token=token if allow_remote else None
    )
    shown = "localhost" if host in ("127.0.0.1", "localhost") else host
    err.print(f"ctxkeep app at http://{shown}:{port} (Ctrl+C stops it)", highlight=False)
    env = {**os.environ, "MARIMO_SKIP_UPDATE_CHECK": "1"}
    raise typer.Exit(run_server(cmd, env, secret=token if allow_remote else None))


def run_server(cmd: list[str], env: dict, *, secret: str | None = None) -> int:
    """Run the server until it ends or this process is stopped (Ctrl+C, SIGTERM: both
    passed on to the server, which is waited for); ``secret`` is written to its
    standard input (the token). Returns the exit code to give: 0 for a server stopped
    by a signal, 1 when it failed on its own."""
    import signal

    # its own session: a terminal's Ctrl+C (or hangup) reaches this process alone, which
    # stops the server with SIGTERM (its clean shutdown); SIGINT to both made marimo's
    # server print uvicorn's CancelledError traceback as it stopped
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE if secret else None, start_new_session=True)
    if secret and proc.stdin is not None:  # a pipe with a secret
        proc.stdin.write(secret.encode() + b"\n")
        proc.stdin.close()

    def stop(_sig, _frame):
        proc.terminate()

    old = signal.signal(signal.SIGTERM, stop)
    old_hup = signal.signal(signal.SIGHUP, stop)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        code = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGHUP, old_hup)
    return 0 if code in (0, -2, -15, 130, 143) else 1

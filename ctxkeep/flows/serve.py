"""``ctxkeep serve``: the schedules, as Prefect deployments served by this process.

Prefect fires schedules only against a real API server (on its temporary server
``serve`` warns and never runs them; DESIGN.md). So, unless ``PREFECT_API_URL`` is set,
``serve`` starts ``prefect server start`` on 127.0.0.1 (its database under
``PREFECT_HOME``, by default ``<ctxkeep home>/prefect``), waits for ``/api/health``,
serves the deployments with ``prefect.serve`` and stops the server (its whole process
group) when it exits: SIGINT (Ctrl-C; also when started with SIGINT ignored, as a
script's ``setsid … &`` does), SIGTERM (systemd, launchd) or an error. While it
serves, ``<home>/prefect/serve.json`` holds its API URL (``prefect_env.SERVE_FILE``):
``ctxkeep ingest`` and the maintenance commands then record their runs there.

Deployments (flow name / deployment name, schedule):

- ``ingest/ctxkeep-ingest``: every ``ingest_minutes`` (15);
- ``compress/ctxkeep-compress``: every ``compress_minutes`` (60);
- ``retention/ctxkeep-retention``: every ``retention_hours`` (24);
- ``backup/ctxkeep-backup``: every ``backup_hours`` (24; ``maintenance.backup``);
- ``purge-policy/ctxkeep-purge-policy``: every ``[purge] every_hours`` (24), only when
  ``config.toml`` has ``[purge]`` rules (``policy_schedules``, ``maintenance.purge_policy``).

Each run executes in a subprocess started by Prefect's runner, which imports the flow by
module path (``ctxkeep.flows.ingest.ingest_flow``, …), with the ``home`` parameter set.
The functions here import Prefect lazily (``serve --dry-run`` reads the schedules
without it); ``configure_prefect`` runs first.
"""

from __future__ import annotations

import datetime as dt
import http.client
import importlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.errors import CtxkeepError
from ctxkeep.flows import serve_lines
from ctxkeep.flows.prefect_env import configure_prefect, remove_serve_file, use_api_url, write_serve_file

DEFAULT_PORT = 4200
COMPRESS_ENTRYPOINT = "ctxkeep.flows.compress:compress_flow"
EXPORT_ENTRYPOINT = "ctxkeep.flows.export:export_flow"


@dataclass
class Schedule:
    """One deployment to serve: its name, the flow's import path (``module:attr``), its
    interval and its parameters besides ``home``."""

    name: str
    entrypoint: str
    interval: dt.timedelta
    parameters: dict = field(default_factory=dict)


def schedules(
    ingest_minutes: int = 15, compress_minutes: int = 60, retention_hours: int = 24, backup_hours: int = 24
) -> list[Schedule]:
    """The default schedules: ingest every 15 min, compress hourly, retention and the
    store backup daily."""
    return [
        Schedule("ctxkeep-ingest", "ctxkeep.flows.ingest:ingest_flow", dt.timedelta(minutes=ingest_minutes)),
        Schedule("ctxkeep-compress", COMPRESS_ENTRYPOINT, dt.timedelta(minutes=compress_minutes)),
        Schedule(
            "ctxkeep-retention",
            "ctxkeep.flows.maintenance:retention_flow",
            dt.timedelta(hours=retention_hours),
        ),
        Schedule("ctxkeep-backup", "ctxkeep.flows.maintenance:backup_flow", dt.timedelta(hours=backup_hours)),
    ]


def export_schedule(dest: str, minutes: int = 60) -> Schedule:
    """The export deployment's schedule (``--lake``): the store into the lake ``dest``
    every ``minutes``."""
    return Schedule("ctxkeep-export", EXPORT_ENTRYPOINT, dt.timedelta(minutes=minutes), {"dest": dest})


def next_runs(s: Schedule, now: dt.datetime, n: int = 3) -> list[dt.datetime]:
    """The first ``n`` run times of ``s`` for a serve started at ``now``: Prefect's
    interval schedule built by ``to_deployment(interval=...)`` is anchored at its
    creation time (``IntervalSchedule.anchor_date``: "If no anchor_date is supplied,
    the current UTC time is used"), so the first run is at the start, then one every
    interval."""
    return [now + k * s.interval for k in range(n)]


def policy_schedules(home: Path) -> list[Schedule]:
    """The purge-policy deployment (``purge-policy/ctxkeep-purge-policy``, every
    ``[purge] every_hours``, 24 by default) when ``config.toml`` has ``[purge]`` rules;
    none otherwise."""
    from ctxkeep.config import load_config
    from ctxkeep.maintenance.purge_policy import has_rules

    pc = load_config(Path(home)).purge
    if not has_rules(pc):
        return []
    return [
        Schedule(
            "ctxkeep-purge-policy",
            "ctxkeep.flows.maintenance:purge_policy_flow",
            dt.timedelta(hours=pc.every_hours),
        )
    ]


def load_flow(entrypoint: str):
    """Import ``module:attr`` and return the flow, or None when the module or the
    attribute does not exist."""
    mod, _, attr = entrypoint.partition(":")
    try:
        m = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name and (e.name == mod or mod.startswith(e.name + ".")):
            return None
        raise
    return getattr(m, attr, None)


def build_deployments(home: Path, scheds: list[Schedule] | None = None) -> list:
    """``RunnerDeployment`` objects for ``scheds`` (default ``schedules()``) with
    ``home`` as parameter. Raises CtxkeepError when a flow cannot be imported."""
    from prefect.types.entrypoint import EntrypointType

    out = []
    for s in scheds or schedules():
        fl = load_flow(s.entrypoint)
        if fl is None:
            raise CtxkeepError(f"flow {s.entrypoint} not found", hint="reinstall ctxkeep")
        out.append(
            fl.to_deployment(
                s.name,
                interval=s.interval,
                parameters={"home": str(home), **s.parameters},
                entrypoint_type=EntrypointType.MODULE_PATH,
                description=f"ctxkeep {s.name} for the store at {home}",
                tags=["ctxkeep"],
            )
        )
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    """True when ``<api_url>/health`` answers ``true`` (loopback only in practice)."""
    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return False  # HTTPException: something that is not an HTTP server holds the port


def prefect_cli() -> list[str]:
    """The command that runs Prefect's CLI with this interpreter's installation."""
    exe = Path(sys.executable).with_name("prefect")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "prefect"]


def start_server(
    home: Path,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    timeout: float = 180.0,
    log_path: Path | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start ``prefect server start`` on ``host:port`` in its own process group and wait
    until it is healthy. Returns ``(process, api_url)``.

    Raises CtxkeepError when the port is taken or the server does not become healthy
    within ``timeout`` seconds (this machine needs ~20-30 s); the server is stopped then.
    """
    configure_prefect(home)
    if port_in_use(host, port):
        raise CtxkeepError(
            f"port {port} on {host} is already in use",
            hint="pass --port, or set PREFECT_API_URL to use a running Prefect server",
        )
    api = f"http://{host}:{port}/api"
    env = dict(
        os.environ,
        PREFECT_SERVER_API_HOST=host,
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_UI_ENABLED=os.environ.get("PREFECT_UI_ENABLED", "false"),
    )
    env.pop("PREFECT_API_URL", None)
    log_path = log_path or Path(os.environ["PREFECT_HOME"]) / "server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the server process, closed by its owner
    kwargs = (
        {"start_new_session": True}
        if os.name == "posix"
        # Windows only: typeshed defines the constant under sys.platform == "win32"
        else {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    )
    proc = subprocess.Popen(
        [*prefect_cli(), "server", "start", "--host", host, "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )
    log.close()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise CtxkeepError(
                    f"the Prefect server exited with code {proc.returncode}",
                    where=str(log_path),
                    hint="see the server log",
                )
            if healthy(api):
                return proc, api
            time.sleep(0.5)
    except BaseException:  # Ctrl-C / SIGTERM while it starts: no server outlives us
        stop_server(proc)
        raise
    stop_server(proc)
    raise CtxkeepError(
        f"the Prefect server did not become healthy within {timeout:.0f} s",
        where=str(log_path),
        hint="see the server log",
    )


def stop_server(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """Stop a server started by ``start_server``: SIGTERM to its process group, then
    SIGKILL after ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.terminate()
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait(5)
    except ProcessLookupError:
        pass


def serve(
    home: Path,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    limit: int = 2,
    scheds: list[Schedule] | None = None,
    on_ready=None,
    run=None,
) -> None:
    """Run the schedules until interrupted (see the module doc). ``on_ready(api_url)``
    is called once the deployments are built, before serving. ``run(api_url)``, when
    given, runs instead of serving the deployments here (``flows.team.work``: this
    machine's deployments in a team work pool and its worker), within the same server
    and signal handling."""
    configure_prefect(home)
    proc = None
    api = os.environ.get("PREFECT_API_URL")

    def _term(signum, frame):  # systemd/launchd stop, Ctrl-C: unwind so the server is stopped
        raise KeyboardInterrupt

    # SIGTERM and SIGINT both stop it, however it was started: a script's `setsid … &`
    # starts it with SIGINT ignored, and Python then installs no KeyboardInterrupt handler
    prev = {
        sig: signal.signal(sig, _term)
        for sig in (getattr(signal, "SIGTERM", None), signal.SIGINT)
        if sig is not None
    }
    try:
        if not api:
            proc, api = start_server(home, host, port)
            use_api_url(api)  # prefect is imported already: its settings too, not only os.environ
        elif not healthy(api, timeout=5):
            raise CtxkeepError(
                f"no Prefect server answers at {api}",
                where="PREFECT_API_URL",
                hint="start it, or unset PREFECT_API_URL to let ctxkeep start one",
            )
        # interactive commands of this home find the server here (prefect_env.run_as_flow)
        write_serve_file(home, api)
        # each run's subprocess prints its line when it ends (``serve_lines``: serve
        # was silent after its start line, runs or not: newuser19 F8); a team worker
        # (``run``: ``ProcessWorker``, in this process) passes os.environ on as well
        os.environ[serve_lines.ENV] = "1"
        if run is not None:
            run(api)
            return
        deps = build_deployments(home, (scheds or schedules()) + policy_schedules(home))
        if on_ready:
            on_ready(api)
        from prefect import serve as prefect_serve

        prefect_serve(*deps, limit=limit, print_starting_message=False)
    except KeyboardInterrupt:
        pass
    finally:
        remove_serve_file(home)
        os.environ.pop(serve_lines.ENV, None)  # (a test calling serve in-process goes on)
        for sig, handler in prev.items():
            signal.signal(sig, handler)
        if proc is not None:
            stop_server(proc)

"""Prefect settings ctxkeep applies before Prefect is imported, and the choice between
a Prefect flow run and an in-process run for an interactive command (no Prefect
import here: importing this module costs no more than ``os`` and ``json``).

Settings (``configure_prefect``):

- ``PREFECT_HOME`` defaults to ``<ctxkeep home>/prefect``: a server's database then
  lives beside the store, works when ``$HOME`` is read-only, and never touches the
  user's own Prefect profile. An explicit ``PREFECT_HOME`` wins.
- Telemetry off (``PREFECT_SERVER_ANALYTICS_ENABLED=false``, ``DO_NOT_TRACK=1``): no
  network, no telemetry errors offline.
- ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120``: on a 2-core machine the
  temporary server needs 15–30 s to start (the default timeout is 20 s).
- On Prefect's temporary server only (``--prefect`` with no server found):
  ``PREFECT_LOGGING_ROOT_LEVEL=CRITICAL``, so third-party loggers below Prefect's root
  logger stay quiet. When the temporary server is stopped (SIGTERM) on a loaded machine,
  SQLAlchemy's pool logs ``ERROR ... Exception during reset or similar`` with an
  ``asyncio.CancelledError`` traceback for a connection cancelled mid-rollback (Prefect
  3.9.1; sqlalchemy/sqlalchemy#11821 is the same race): harmless - the flow run had
  finished - but a traceback on a user's terminal. Prefect's own loggers keep
  ``PREFECT_LOGGING_LEVEL`` (they set their level; the root level does not filter them).

The choice (``run_as_flow``): ``ingest``, ``compress``, ``retention``, ``reindex``
and ``backfill`` record a Prefect flow run only when a Prefect server is there to
record it - ``PREFECT_API_URL`` is set, or a ``ctxkeep serve`` of the same home is
running (it writes its API URL to ``<home>/prefect/serve.json``, ``SERVE_FILE``, and
answers a ``/health`` request on loopback within ``PROBE_SECONDS``) - or when the user
asks with ``--prefect``. Otherwise they run in-process: Prefect's temporary server
(15-50 s to start) is never started for an interactive run unless asked for. A
``PREFECT_API_URL`` where no server answers (``probe_api``: a stale setting, the server
stopped) is not used: the command runs in-process with one warning line, or, with
``--prefect``, fails with one error line (before, Prefect's client raised a
``RuntimeError: Failed to reach API`` traceback after ~20 s of retries).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from ctxkeep.errors import ConfigError
from ctxkeep.sinks.files import PREFECT_DIR

#: where ``ctxkeep serve`` records its Prefect API, relative to the ctxkeep home:
#: JSON ``{"api_url": str, "pid": int}``, removed when serve exits
SERVE_FILE = f"{PREFECT_DIR}/serve.json"
#: how long an interactive command waits for serve's ``/health`` answer (seconds)
PROBE_SECONDS = 0.05
#: how long a command waits for an answer from ``PREFECT_API_URL`` (seconds)
API_PROBE_SECONDS = 2.0
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def configure_prefect(home: Path) -> None:
    """Set the environment defaults above for this process (existing values win)."""
    os.environ.setdefault("PREFECT_HOME", str(Path(home) / PREFECT_DIR))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def write_serve_file(home: Path, api_url: str) -> Path:
    """Record ``api_url`` (and this process id) as the Prefect API of the ``ctxkeep
    serve`` running for ``home``; returns the file (user-only, 0600)."""
    p = Path(home) / SERVE_FILE
    p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"api_url": api_url, "pid": os.getpid()}, f)
        os.replace(tmp, p)
    except BaseException:  # a full disk: no temp file stays behind
        tmp.unlink(missing_ok=True)
        raise
    return p


def remove_serve_file(home: Path) -> None:
    """Remove the serve file of ``home`` if this process wrote it (another serve's
    file stays)."""
    p = Path(home) / SERVE_FILE
    try:
        if json.loads(p.read_text()).get("pid") == os.getpid():
            p.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    except OSError:
        return False
    return True


def probe_health(api_url: str, timeout: float = PROBE_SECONDS) -> bool:
    """True when ``<api_url>/health`` on a loopback host answers 200 within
    ``timeout`` seconds (connect and read each). Other hosts are never contacted."""
    u = urlsplit(api_url)
    if u.scheme != "http" or u.hostname not in _LOOPBACK:
        return False
    import http.client  # ~5 ms: only when a serve file exists

    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        conn.request("GET", u.path.rstrip("/") + "/health")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def probe_api(api_url: str, timeout: float = API_PROBE_SECONDS) -> bool:
    """True when a server answers ``GET <api_url>/health`` within ``timeout`` seconds
    (connect and read each) with any HTTP status (Prefect Cloud may ask for a key:
    a 401 still proves a server is there); False when the connection is refused,
    times out or the URL is not http(s). The user named this host in
    ``PREFECT_API_URL``, so any host is asked (Prefect's client would ask it too)."""
    import http.client

    u = urlsplit(api_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        return False
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("GET", u.path.rstrip("/") + "/health")
        conn.getresponse()
        return True
    except (OSError, http.client.HTTPException, ValueError):
        return False
    finally:
        conn.close()


def serve_api_url(home: Path, probe=None) -> str | None:
    """The Prefect API URL of a ``ctxkeep serve`` running for ``home``: read from
    ``SERVE_FILE``, its process alive, and ``probe(url)`` true (default: a loopback
    ``/health`` within ``PROBE_SECONDS``). None when there is no such serve."""
    try:
        d = json.loads((Path(home) / SERVE_FILE).read_text())
    except (OSError, ValueError):
        return None
    url = d.get("api_url") if isinstance(d, dict) else None
    if not isinstance(url, str) or not _alive(d.get("pid")):
        return None
    return url if (probe or probe_health)(url) else None


def use_api_url(url: str) -> None:
    """Make ``url`` the Prefect API of this process: ``PREFECT_API_URL`` in
    ``os.environ`` (what the flow runs' subprocesses inherit) and, when Prefect is
    imported already, its global settings context rebuilt from the environment
    (``prefect.context.refresh_global_settings_context``, Prefect 3.x): Prefect reads
    its settings once, at import, and a client made after a later ``os.environ`` change
    found no URL and started its own temporary server beside ``ctxkeep serve``'s
    (newuser17 F16: a second uvicorn, ~0.2 GB RSS)."""
    os.environ["PREFECT_API_URL"] = url
    ctx = sys.modules.get("prefect.context")
    if ctx is not None:
        ctx.refresh_global_settings_context()


def run_as_flow(home: Path, prefect: bool | None, probe=None, api_probe=None) -> bool:
    """Whether an interactive command runs as a Prefect flow run (True) or in-process.

    ``prefect`` is the command's ``--prefect/--no-prefect`` (None: neither given):
    False runs in-process; True a flow run (on Prefect's temporary server when no
    server is found); None a flow run when ``PREFECT_API_URL`` is set or
    ``serve_api_url(home, probe)`` finds a ``ctxkeep serve``, in-process otherwise.
    A serve's URL found here is set as ``PREFECT_API_URL`` for this process, so the
    flow run is recorded there. A set ``PREFECT_API_URL`` that ``api_probe(url)``
    (default ``probe_api``) finds dead is dropped for this process with a warning on
    stderr (``prefect`` None), or raises ConfigError (``prefect`` True).
    """
    if prefect is False:
        return False
    url = os.environ.get("PREFECT_API_URL")
    if url and not (api_probe or probe_api)(url):
        if prefect:
            raise ConfigError(
                "no Prefect server answers at PREFECT_API_URL",
                where=url,
                hint="start that server, unset PREFECT_API_URL, or drop --prefect",
            )
        sys.stderr.write(
            f"warning: no Prefect server answers at PREFECT_API_URL ({url}); running without it "
            "- start that server or unset PREFECT_API_URL\n"
        )
        del os.environ["PREFECT_API_URL"]  # nothing of this process asks it
        url = None
    url = url or serve_api_url(home, probe)
    if url:
        use_api_url(url)
        return True
    if prefect:
        # the temporary server (the module doc): Prefect reads this when it sets up
        # logging, in this process and in the server's subprocess
        os.environ.setdefault("PREFECT_LOGGING_ROOT_LEVEL", "CRITICAL")
    return bool(prefect)

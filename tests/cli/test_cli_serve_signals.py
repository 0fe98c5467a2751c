"""`ctxkeep serve` stops on SIGINT and SIGTERM however it was started (issue 15): a
script's `setsid ctxkeep serve &` starts it with SIGINT ignored, and Python then installs
no KeyboardInterrupt handler. Each case starts serve in a new session with SIGINT
ignored, waits until it has started `prefect server start` (its child), signals serve
only, and checks serve exits and takes the server down with it.

Slow: each case starts a Prefect server process (stopped during its start-up, a few
seconds).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="POSIX signals")]


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ignore_sigint():  # what `setsid … &` in a non-interactive shell leaves
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_on_the_signal_when_started_with_sigint_ignored(tmp_path, sig):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(HOME=str(tmp_path / "home"), CTXKEEP_HOME=str(tmp_path / "store"))
    (tmp_path / "home").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkeep", "serve", "--port", str(_free_port())],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_ignore_sigint,  # the point of the test
    )
    try:
        deadline = time.monotonic() + 120
        server, rc, left = [], None, []
        while time.monotonic() < deadline and not server and proc.poll() is None:
            server = _children(proc.pid)
            time.sleep(0.2)
        assert server, "serve did not start the Prefect server"
        time.sleep(1.0)
        os.kill(proc.pid, sig)
        rc = proc.wait(timeout=60)
        time.sleep(0.5)
        left = [p for p in server if _alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in server:  # a failing run must not leave a Prefect server behind
            if _alive(p):
                os.killpg(p, signal.SIGKILL)
    assert rc in (0, 1), proc.stderr.read().decode()
    stderr = proc.stderr.read().decode()
    assert "Traceback" not in stderr, stderr
    assert left == []

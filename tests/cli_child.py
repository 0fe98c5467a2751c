"""A ``ctxkeep`` command in a child forked from a multiprocessing forkserver that
imported the CLI once (each trial forks a warm process instead of paying a second or
more of imports, most of a small command's run), reporting its phases on a pipe:
``ready``, a ``mark`` at each of the operation's kill points
(``sinks.sqlite.intents.kill_point``, passed through: ``CTXKEEP_KILL_AT`` still
kills there), ``done`` with the exit code. The child's environment is the one given
(the forkserver's is the test process's at the server's start)."""

from __future__ import annotations

import os
import sys
import time

import duckdb  # noqa: F401  (imported before the fork, as the operations use it)
import polars  # noqa: F401

from ctxkeep import cli
from ctxkeep.maintenance import retention  # noqa: F401  (its kill points, imported once)
from ctxkeep.sinks.vault import prune  # noqa: F401
from forkserver import mark_kill_points


def run(conn, argv: list[str], env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)
    mark_kill_points(conn)
    conn.send(("ready", time.monotonic()))
    sys.argv = ["ctxkeep", *argv]
    try:
        cli.main()  # the console script's path: exits through SystemExit
        code = 0
    except SystemExit as e:
        code = e.code
    conn.send(("done", time.monotonic(), code or 0))

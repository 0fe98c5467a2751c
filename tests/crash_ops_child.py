"""The child process of ``test_crash_consistency``: imported once by a multiprocessing
forkserver (each trial forks a warm process instead of paying seconds of imports),
then ``run`` performs one operation (purge, retention or compress) on a store and
reports ``ready``, a ``mark`` at each kill point it passes and ``done`` on a pipe. ``kill_at`` (``<op>:<step>``) is put into
``CTXKEEP_KILL_AT`` first: the operation SIGKILLs itself at that step
(``sinks.sqlite.intents.kill_point``); without it the parent kills at a random time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb  # noqa: F401  (imported before the fork, as the operations use it)
import polars  # noqa: F401

from ctxkeep.maintenance import compress
from ctxkeep.maintenance.purge import run_purge
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.maintenance.retention import run_retention
from ctxkeep.sinks.sqlite.intents import KILL_ENV
from forkserver import mark_kill_points

# (no BPE warm-up before the fork: the tables are now decoded by Polars, whose thread
# pool does not survive a fork - a forked child using it would hang)


def run(conn, op: str, home: str, arg: str, kill_at: str | None) -> None:
    if kill_at:
        os.environ[KILL_ENV] = kill_at
    else:
        os.environ.pop(KILL_ENV, None)
    h = Path(home)
    mark_kill_points(conn)
    conn.send(("ready", time.monotonic()))
    if op == "purge":
        r = run_purge(h, PurgeRequest("session", session_id=arg))
        out = r["removed"]["entries"]
    elif op == "retention":
        r = run_retention(
            h, archive_after_days=0, delete_archives_after_days=10_000, backup_max_age_days=10_000
        )
        out = r["archived"]["entries"]
    else:
        r = compress.run_compress(h, paths=[Path(arg)], keep_messages=3, force=True)
        out = r["files"][0]["status"]
    conn.send(("done", time.monotonic(), out))

"""The compressing child process of ``test_compress_crash``: imported once by a
multiprocessing forkserver (so every trial forks a warm process instead of paying
~3 s of imports and BPE loading), then ``run`` compresses one file and reports its
phases on a pipe: ``ready``, ``write`` (just before the backup is made), a ``mark``
at each kill point it passes (``compress:renamed``, ...), ``done``."""

from __future__ import annotations

import time
from pathlib import Path

from ctxkeep.maintenance import compress
from ctxkeep.maintenance.compress import rewrite
from forkserver import mark_kill_points

# (no BPE warm-up before the fork: the tables are now decoded by Polars, whose thread
# pool does not survive a fork - a forked child using it would hang)

_make_backup = rewrite.make_backup


def run(conn, store: str, path: str) -> None:
    def make_backup(*a, **k):
        conn.send(("write", time.monotonic()))
        return _make_backup(*a, **k)

    rewrite.make_backup = make_backup
    mark_kill_points(conn)
    conn.send(("ready", time.monotonic()))
    s = compress.run_compress(Path(store), paths=[Path(path)], keep_messages=10, force=True)
    f = s["files"][0]
    conn.send(("done", time.monotonic(), f["status"], f["reason"]))

"""A multiprocessing forkserver whose server imported a test child module once (so each
crash trial forks a warm process instead of paying seconds of imports), and waiting for
a child's messages on a pipe: shared by the SIGKILL tests."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path


def forkserver(monkeypatch, preload: str):
    """A ``forkserver`` context preloading ``preload`` (a module in tests/). Python
    3.11's forkserver ignores the parent's sys.path when preloading: the server finds
    the module through PYTHONPATH, inherited at its start."""
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([preload])
    return ctx


def wait_for(recv, word: str, timeout: float = 120) -> tuple | None:
    """The first message ``(word, ...)`` from ``recv`` within ``timeout`` s, or None
    when the child ended (or timed out) before sending it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if recv.poll(max(0.0, deadline - time.monotonic())):
            try:
                msg = recv.recv()
            except EOFError:
                return None
            if msg[0] == word:
                return msg
    return None

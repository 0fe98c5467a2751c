"""A multiprocessing forkserver whose server imported a test child module once (so each
crash trial forks a warm process instead of paying seconds of imports), and waiting for
a child's messages on a pipe: shared by the SIGKILL tests."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

#: the test child modules every server preloads: a process has one forkserver, and
#: the preload list of whichever test starts it first is the one it keeps (a later
#: ``set_forkserver_preload`` is ignored while it runs): without the others there,
#: each of their children imported its module (seconds) after the fork
CHILDREN = ["crash_child", "crash_ops_child", "cli_child"]


def forkserver(monkeypatch, preload: str):
    """A ``forkserver`` context preloading ``preload`` (a module in tests/) and the
    other ``CHILDREN``. Python 3.11's forkserver ignores the parent's sys.path when
    preloading: the server finds the module through PYTHONPATH, inherited at its start."""
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(dict.fromkeys([preload, *CHILDREN])))
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


class Child:
    """A child forked from ``ctx`` running ``target(send, *args)`` that reports on its
    pipe ``("ready", t)``, ``("mark", name, t)`` at its phases and ``("done", t, ...)``
    (``cli_child``): ``marks`` are its ``(key, monotonic time)`` so far, a key being
    ``ready``, ``done`` or ``name#n`` (the n-th time the mark ``name`` came)."""

    def __init__(self, ctx, target, *args):
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=target, args=(send, *args), daemon=True)
        self.proc.start()
        send.close()
        self.marks: list[tuple[str, float]] = []
        self.done: tuple | None = None
        self._seen: dict[str, int] = {}
        self._ended = False

    def _next(self, timeout: float) -> bool:
        """Read one message into ``marks``; False when the child ended (or timed out)."""
        if self._ended or not self.recv.poll(timeout):
            return False
        try:
            msg = self.recv.recv()
        except EOFError:
            self._ended = True
            return False
        if msg[0] == "mark":
            self._seen[msg[1]] = self._seen.get(msg[1], 0) + 1
            self.marks.append((f"{msg[1]}#{self._seen[msg[1]]}", msg[2]))
        else:
            self.marks.append((msg[0], msg[1]))
            if msg[0] == "done":
                self.done = msg
        return True

    def until(self, key: str, timeout: float = 120) -> float | None:
        """The time of the mark ``key``, once it came; None when the child ended first."""
        deadline = time.monotonic() + timeout
        while True:
            for k, t in self.marks:
                if k == key:
                    return t
            if not self._next(max(0.0, deadline - time.monotonic())):
                return None

    def kill_after(self, key: str, delay: float) -> None:
        """SIGKILL the child ``delay`` s after its mark ``key`` (unless it ended)."""
        t = self.until(key)
        if t is None:
            return
        while self.proc.is_alive() and time.monotonic() < t + delay:
            self._next(max(0.0, t + delay - time.monotonic()))
            if self._ended:
                break
        if self.proc.is_alive():
            self.proc.kill()

    def finish(self, timeout: float = 300) -> int | None:
        """Read its messages to the end, wait for it; its exit code."""
        deadline = time.monotonic() + timeout
        while self._next(max(0.0, deadline - time.monotonic())):
            pass
        self.proc.join(max(0.0, deadline - time.monotonic()))
        self.recv.close()
        return self.proc.exitcode


def mark_kill_points(conn) -> None:
    """In a child: send ``("mark", "<op>:<step>", t)`` on ``conn`` at each kill point
    (``sinks.sqlite.intents.kill_point``) it reaches, then go on (``CTXKEEP_KILL_AT``
    still kills there). Patches the modules that imported it by name, and ``intents``
    itself for those that import it at their call."""
    import sys

    from ctxkeep.sinks.sqlite import intents

    original = intents.kill_point

    def kill_point(op: str, step: str) -> None:
        conn.send(("mark", f"{op}:{step}", time.monotonic()))
        original(op, step)

    for m in list(sys.modules.values()):
        if getattr(m, "kill_point", None) is original:
            m.kill_point = kill_point

"""SIGKILL trials timed by a child's own progress marks instead of a random time of
its whole run: shared by the ``ctxkeep`` subprocess trials (``test_vault_crash``).

A child ``ctxkeep`` command run with ``CTXKEEP_TRACE=1`` writes
``CTXKEEP-TRACE ROLE EVENT CPU WALL`` lines on stderr at its phases
(``pipeline.prestart.trace``: an ingest's ``planned``, ``engine``, each ``group``
committed, ``read``, ``written``, ``recorded``, ``end``). A reference run gives the
phases and their lengths; each trial then waits for the mark that starts its phase and
kills a random fraction of that phase's reference length later. A kill at a random
time of the whole run lands mostly in the longest phase (the imports, for a small
run): timed from the marks, ``len(phases)`` trials cover every phase once."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

#: the role whose marks time the trials (the readers' marks interleave with them)
ROLE = "ingest"
#: the events that start a phase: the reader protocol's ``todo``/``wait``/``got``
#: marks (one per file block sent or taken) are left out, they all fall in the read
EVENTS = frozenset({"planned", "engine", "spawn", "group", "read", "written", "recorded", "end"})
#: the phase before the first mark (the process's start, its imports)
START = "start"
#: the phase after the last mark (the process's teardown)
EXIT = "exit"


@dataclass
class Traced:
    """A child process whose stderr is read as it comes: ``marks`` are its
    ``(phase key, monotonic time)`` in order (a key is ``event#n``, the n-th time that
    event came), ``tail`` its last stderr bytes (the trace lines left out)."""

    proc: subprocess.Popen
    t0: float
    marks: list[tuple[str, float]] = field(default_factory=list)
    tail: bytearray = field(default_factory=bytearray)
    cond: threading.Condition = field(default_factory=threading.Condition)
    reader: threading.Thread | None = None

    def _read(self) -> None:
        seen: dict[str, int] = {}
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            parts = line.split()
            if line.startswith(b"CTXKEEP-TRACE ") and len(parts) >= 3:
                event = parts[2].decode()
                if parts[1].decode() != ROLE or event not in EVENTS:
                    continue
                seen[event] = seen.get(event, 0) + 1
                with self.cond:
                    self.marks.append((f"{event}#{seen[event]}", time.monotonic()))
                    self.cond.notify_all()
            else:
                self.tail += line
                del self.tail[:-4000]
        with self.cond:
            self.marks.append((EXIT, time.monotonic()))
            self.cond.notify_all()

    def wait_mark(self, key: str, timeout: float = 600) -> bool:
        """True once the mark ``key`` came; False when the child's stderr ended first."""
        if key == START:
            return True
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                keys = [k for k, _ in self.marks]
                if key in keys:
                    return True
                if EXIT in keys or time.monotonic() > deadline:
                    return False
                self.cond.wait(max(0.0, deadline - time.monotonic()))

    def finish(self) -> int:
        """Wait for the child and its stderr's reader; its exit code."""
        code = self.proc.wait()
        if self.reader is not None:
            self.reader.join()
        return code


def start(argv: list[str], **popen) -> Traced:
    """Start ``argv`` (with ``CTXKEEP_TRACE=1`` in ``popen["env"]``) and read its marks."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen)
    t = Traced(proc, t0)
    t.reader = threading.Thread(target=t._read, daemon=True)
    t.reader.start()
    return t


def phases(marks: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """A finished reference run's phases from its marks ``(key, monotonic time)``, in
    order from its start to its end: ``(key of the mark that starts a phase, its
    length in s)``."""
    return [(marks[i][0], marks[i + 1][1] - marks[i][1]) for i in range(len(marks) - 1)]


def plan(
    marks: list[tuple[str, float]], rng: random.Random, trials: int | None = None
) -> list[tuple[str, float]]:
    """The trials' kill points: ``(phase, delay after its mark in s)``, every phase of
    the reference (its ``marks``) in turn (``trials`` defaults to one per phase; more
    go round again), each at a random fraction of the phase's reference length."""
    ph = phases(marks)
    n = trials or len(ph)
    return [(ph[i % len(ph)][0], rng.uniform(0.0, ph[i % len(ph)][1])) for i in range(n)]


def traced_marks(ref: Traced) -> list[tuple[str, float]]:
    """A finished ``Traced`` run's marks from its start to its exit."""
    return [(START, ref.t0), *ref.marks]


def run_killed(argv: list[str], phase: str, delay: float, **popen) -> tuple[bool, Traced]:
    """Run ``argv``, SIGKILL it ``delay`` s after its mark ``phase``. ``(killed, run)``:
    killed False when it ended by itself first (its exit code is then checked by the
    caller: ``run.proc.returncode``)."""
    t = start(argv, **popen)
    if t.wait_mark(phase):
        base = t.t0 if phase == START else dict(t.marks)[phase]
        try:
            t.proc.wait(timeout=max(0.0, base + delay - time.monotonic()))
        except subprocess.TimeoutExpired:
            t.proc.send_signal(signal.SIGKILL)
    code = t.finish()
    return code == -signal.SIGKILL, t

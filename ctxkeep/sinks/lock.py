"""The store's maintenance lock: one ingest, compress, purge, retention, reindex or
backfill at a time per store.

A ``filelock.FileLock`` on ``<home>/ingest.lock``: an OS lock (``fcntl.flock`` on POSIX,
``msvcrt.locking`` on Windows) that the OS releases when the holding process dies, so a
killed run never leaves the store locked. Lives in ``sinks`` so that the purge core
(shared with the MCP server) takes it without importing ``flows``;
``flows.pipeline.lock`` returns the same object.

Within one process the lock is reentrant and shared by all threads (filelock's
``is_singleton=True, thread_local=False``): a compress that holds it may call
``run_ingest``, a Prefect flow may call a function that takes it again, without
deadlocking. Between processes it excludes: a second run waits (``timeout`` -1) or
gives up with StoreBusy / ``filelock.Timeout``.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from ctxkeep.errors import StoreBusy

LOCK_NAME = "ingest.lock"


class StoreLock:
    """The lock of one store. ``with StoreLock(home, timeout):`` or ``acquire()`` /
    ``release()``; ``timeout`` in seconds (-1: wait forever, 0: do not wait). Acquiring
    past the timeout raises ``filelock.Timeout``."""

    def __init__(self, home: Path, timeout: float = -1):
        home = Path(home)
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = home / LOCK_NAME
        self.timeout = timeout
        # one instance per path and process; the timeout is given per acquire
        self._lock = FileLock(str(self.path), mode=0o600, is_singleton=True, thread_local=False)

    def acquire(self, timeout: float | None = None) -> "StoreLock":
        """Take the lock, waiting up to ``timeout`` seconds (None: the object's
        timeout). Reentrant within the process. Raises ``filelock.Timeout``."""
        self._lock.acquire(timeout=self.timeout if timeout is None else timeout)
        return self

    def release(self) -> None:
        """Release one level of the lock (the OS lock goes with the last one)."""
        self._lock.release()

    @property
    def is_locked(self) -> bool:
        """True while this process holds the lock."""
        return self._lock.is_locked

    def __enter__(self) -> "StoreLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def store_lock(home: Path, timeout: float = -1) -> StoreLock:
    """The lock of the store at ``home`` (the directory is created 0700)."""
    return StoreLock(home, timeout)


@contextmanager
def hold(home: Path, timeout: float = -1, *, what: str = "maintenance run") -> Iterator[StoreLock]:
    """Hold the store lock for the ``with`` block.

    Raises StoreBusy (transient) when another process holds it past ``timeout`` seconds
    (-1: wait forever, 0: do not wait).
    """
    lk = StoreLock(home, timeout)
    try:
        lk.acquire()
    except Timeout:
        raise StoreBusy(f"another ctxkeep maintenance run holds the store; {what} not started",
                        where=str(lk.path), hint="wait for it to finish, or retry later") from None
    try:
        yield lk
    finally:
        lk.release()

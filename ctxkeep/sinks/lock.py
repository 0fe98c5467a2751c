"""The store's maintenance lock: one ingest, compress, purge, retention or reindex at a
time per store.

A ``filelock.FileLock`` on ``<home>/ingest.lock`` (an OS-level lock: ``fcntl.flock`` on
POSIX, ``msvcrt.locking`` on Windows; released by the OS when the holding process dies,
so a killed run never leaves the store locked). Lives in ``sinks`` so that the purge core
(shared with the MCP server) can take it without importing ``flows``;
``flows.pipeline.lock`` is the same function.

Note: two ``FileLock`` objects on the same path in one process do not share the lock
(``flock`` locks belong to an open file description): code that already holds the lock
must not take it again through a new object.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from ..errors import StoreBusy

LOCK_NAME = "ingest.lock"


def store_lock(home: Path, timeout: float = -1) -> FileLock:
    """The lock object for the store at ``home`` (the directory is created 0700).

    ``timeout`` in seconds: -1 waits forever, 0 fails at once. Acquiring raises
    ``filelock.Timeout``; use ``hold`` for a StoreBusy instead.
    """
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return FileLock(str(home / LOCK_NAME), timeout=timeout, mode=0o600)


@contextmanager
def hold(home: Path, timeout: float = -1, *, what: str = "maintenance run") -> Iterator[None]:
    """Hold the store lock for the ``with`` block.

    Raises StoreBusy (transient) when another process holds it past ``timeout`` seconds
    (-1: wait forever, 0: do not wait).
    """
    lk = store_lock(home, timeout)
    try:
        lk.acquire()
    except Timeout:
        raise StoreBusy(f"another ctxkeep maintenance run holds the store; {what} not started",
                        where=str(Path(home) / LOCK_NAME),
                        hint="wait for it to finish, or retry later") from None
    try:
        yield
    finally:
        lk.release()

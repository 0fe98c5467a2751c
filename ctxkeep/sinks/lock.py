"""The store's maintenance lock: one ingest, compress, purge, retention, reindex or
backfill at a time per store. ``hold`` is the one way to take it.

A ``filelock.FileLock`` on ``<home>/ingest.lock`` (``files.LOCK_FILE``): an OS lock
(``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows) that the OS releases when the
holding process dies, so a killed run never leaves the store locked. Lives in
``sinks`` so that the purge core (shared with the MCP server) takes it without
importing ``pipeline`` or ``flows``.

Within one process the lock is reentrant and shared by all threads (filelock's
``is_singleton=True, thread_local=False``): a compress that holds it may call
``run_ingest``, a Prefect flow may call a function that takes it again, without
deadlocking. Between processes it excludes: a second run waits or gives up with
StoreBusy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ctxkeep.config import ensure_home
from ctxkeep.errors import StoreBusy
from ctxkeep.sinks.files import LOCK_FILE
from ctxkeep.timeutil import now_iso


class StoreLock:
    """The lock of one store, for a holder that cannot use a ``with`` block (a test's
    subprocess): ``acquire()`` / ``release()``, reentrant within the process. Code that
    runs under the lock uses ``hold``. Creating it creates ``home`` (0700, checked by
    ``config.ensure_home``: StoreError for a read-only parent)."""

    def __init__(self, home: Path):
        home = ensure_home(Path(home))
        self.path = home / LOCK_FILE
        # one instance per path and process; the timeout is given per acquire
        self._lock = FileLock(str(self.path), mode=0o600, is_singleton=True, thread_local=False)

    def acquire(self, timeout: float = -1) -> StoreLock:
        """Take the lock, waiting up to ``timeout`` seconds (-1: forever, 0: do not
        wait). Reentrant within the process. Raises ``filelock.Timeout``."""
        self._lock.acquire(timeout=timeout)
        return self

    def release(self) -> None:
        """Release one level of the lock (the OS lock goes with the last one)."""
        self._lock.release()

    @property
    def is_locked(self) -> bool:
        """True while this process holds the lock."""
        return self._lock.is_locked


#: home (resolved, str) → the UTC time (ISO, as ``runs.started_at``) this process took
#: its store lock, for the outermost ``hold``
_HELD_SINCE: dict[str, str] = {}


def held_since(home: Path) -> str | None:
    """When this process took the store lock of ``home`` (ISO-8601 UTC, the format of
    ``runs.started_at``), or None when it does not hold it. A ``runs`` row still
    ``running`` that started before is a dead process's (every recorded run holds the
    lock)."""
    return _HELD_SINCE.get(str(Path(home).resolve()))


def held_by_another(home: Path) -> bool:
    """Whether another holder (an ingest, compress, purge …: another process, or
    another open of the lock file) holds the store lock of ``home`` now: a shared,
    non-blocking ``flock`` of ``<home>/ingest.lock`` fails (filelock takes it
    exclusive: ``fcntl.flock``, POSIX). Creates nothing (a read command must not
    write); False where there is no lock file or no ``fcntl`` (Windows)."""
    try:
        import fcntl
    except ImportError:  # Windows: not asked
        return False
    try:
        fd = os.open(Path(home) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@contextmanager
def hold(
    home: Path,
    timeout: float = -1,
    *,
    what: str = "maintenance run",
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[StoreLock]:
    """Hold the store lock of ``home`` for the ``with`` block.

    Args:
        timeout: seconds to wait for another process to release it (-1: forever, 0:
            do not wait).
        what: the run, for the error message (``"purge"``, ``"ingest"`` ...).
        on_wait: told the lock file's path (str) when the lock is taken and this run
            is going to wait for it (the CLI says why nothing happens); not called when
            the lock is free or ``timeout`` is 0.

    Raises StoreBusy (transient) when another process holds it past ``timeout``.
    """
    lk = StoreLock(home)
    try:
        try:
            lk.acquire(0)
        except Timeout:
            if timeout == 0:
                raise
            if on_wait:
                on_wait(str(lk.path))
            lk.acquire(timeout)
    except Timeout:
        raise StoreBusy(
            f"another ctxkeep maintenance run holds the store; {what} not started",
            where=str(lk.path),
            hint="wait for it to finish, or retry later",
        ) from None
    key = str(Path(home).resolve())
    outer = key not in _HELD_SINCE
    if outer:
        _HELD_SINCE[key] = now_iso()
    try:
        yield lk
    finally:
        if outer:
            _HELD_SINCE.pop(key, None)
        lk.release()

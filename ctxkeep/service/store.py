"""What every question shares about the store: which directory it is in
(``resolve_home``) and what a damaged page read in mid-question means
(``store_error``). Imports nothing heavy (``config``; the store's modules only when
an error is being turned into its line)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxkeep.errors import CtxkeepError, FileSystemError, StoreError, from_os_error


def narrow_umask() -> None:
    """``config.narrow_umask``: what ctxkeep creates is user-only from now on; the
    user's umask is kept for the files it writes back for an agent (``vault restore``)."""
    from ctxkeep import config

    config.narrow_umask()


@contextmanager
def reading(home: str | os.PathLike, *, mmap: bool = False) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the store at ``home`` (``sinks.sqlite.connect``;
    ``mmap``: memory-mapped reads, for searches and fetches), closed on leaving. Raises
    StoreError when there is no readable store."""
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(Path(home), readonly=True, mmap=mmap)
    try:
        yield conn
    finally:
        conn.close()


def resolve_home(given: str | os.PathLike | None = None) -> Path:
    """The store directory: ``given``, else ``$CTXKEEP_HOME``, else the platform data
    dir (``config.resolve_home``). Raises StoreError when it names a file,
    FileSystemError when its path goes through a file (``--home FILE/sub``)."""
    from ctxkeep import config as cfgmod

    h = cfgmod.resolve_home(given)
    if h.is_file():
        raise StoreError(
            f"cannot use {h} as the store: it is a file, not a directory",
            hint="pass --home DIR (or CTXKEEP_HOME) naming a directory",
        )
    probe = h.parent
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():  # --home FILE/sub: a path through a file
        raise FileSystemError(
            f"cannot use {h} as the store: {probe} is a file, not a directory",
            hint="pass --home DIR (or CTXKEEP_HOME) naming a directory",
            kind="ENOTDIR",
        )
    return h


def store_error(home: Path, e: BaseException) -> CtxkeepError | None:
    """``e`` as the error a front end shows: itself when it is a ``CtxkeepError``, the
    store's "damaged" error (``StoreDamaged``: what, the file, run ``ctxkeep doctor``)
    for SQLite's SQLITE_CORRUPT/SQLITE_NOTADB read mid-question, else None (a bug: its
    traceback is wanted). A file-system failure anywhere in ``e``'s causes (a full disk,
    a read-only file system, a path through a file, permission denied) comes first:
    ``errors.from_os_error``'s one line, naming ``home`` when the error names no file
    (a "damaged" store found by a check that ran on a full disk is the full disk)."""
    fs = from_os_error(e, where=str(home))
    if fs is not None:
        return fs
    if isinstance(e, CtxkeepError):
        return e
    import sqlite3

    if not isinstance(e, sqlite3.DatabaseError):
        return None
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.sinks.sqlite.store_safety import damaged, is_corruption

    return damaged(Path(home) / STORE_DB, e) if is_corruption(e) else None


def ensure_home(home: Path) -> Path:
    """``home`` created if missing (``config.ensure_home``: private permissions) and
    returned; raises FileSystemError when it cannot be."""
    from ctxkeep import config as cfgmod

    return cfgmod.ensure_home(home)


def config_warnings(home: Path) -> list[str]:
    """config.toml's warnings (unknown keys, with the closest valid one), one line each
    naming the file; none for a file that does not load (the command that reads its
    settings reports that)."""
    from ctxkeep import config as cfgmod
    from ctxkeep.sources import SOURCES

    try:
        cfg = cfgmod.load_config(home)
    except CtxkeepError:  # the agent names still said beside the error (newuser21 M5)
        return cfgmod.unknown_agent_lines_of_file(home, SOURCES)
    # an agent name no source has, as `ingest` says it (newuser21 M5: only ingest did)
    return [f"{home / cfgmod.CONFIG_FILE}: {w}" for w in cfg.warnings] + cfgmod.unknown_agent_lines(
        cfg, SOURCES
    )

"""Writing an agent's settings file without ever losing it: a backup first, then an
atomic replace (temp file in the same directory + fsync + rename) that keeps the
file's mode.

The installers (``ctxkeep.hooks.install``) are the only callers. A backup sits beside
the file as ``<name>.ctxkeep-backup-<UTC YYYYmmddTHHMMSSZ>``: install keeps every one
(uninstall reads the newest ones to restore the user's bytes exactly); an uninstall
then removes them (``prune``): all of them when the file is back byte for byte, else
all but the newest (newuser21 N10: 5 left in ``~/.claude`` after two rounds).
"""

from __future__ import annotations

import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from ctxkeep.sinks.files import fsync_dir

BACKUP_MARK = ".ctxkeep-backup-"


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def backup(path: Path, data: bytes) -> Path:
    """Write ``data`` (the file's current bytes) to a new backup beside ``path`` and
    return the backup's path: ``<name>.ctxkeep-backup-<UTC>``, with ``-2``, ``-3`` …
    appended when one with that second already exists. Same mode as ``path``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    dst = path.with_name(f"{path.name}{BACKUP_MARK}{stamp}")
    n = 2
    while dst.exists():
        dst = path.with_name(f"{path.name}{BACKUP_MARK}{stamp}-{n}")
        n += 1
    atomic_write(dst, data, mode=_mode(path))
    return dst


def backups(path: Path) -> list[Path]:
    """The backups of ``path`` made by :func:`backup`, newest first."""
    if not path.parent.is_dir():
        return []
    found = [p for p in path.parent.iterdir() if p.name.startswith(path.name + BACKUP_MARK)]
    return sorted(found, key=lambda p: _backup_key(p, path.name), reverse=True)


def prune(path: Path, keep: Path | None = None) -> list[Path]:
    """Delete the backups of ``path`` but ``keep`` (None: all of them); returns the
    deleted ones, newest first. A backup that cannot be deleted stays (and is not
    listed)."""
    gone = []
    for b in backups(path):
        if keep is not None and b == keep:
            continue
        try:
            b.unlink()
        except OSError:
            continue
        gone.append(b)
    if gone:
        fsync_dir(path.parent)
    return gone


def _backup_key(p: Path, name: str) -> tuple[str, int]:
    rest = p.name[len(name) + len(BACKUP_MARK) :]
    stamp, _, n = rest.partition("-")
    return stamp, int(n) if n.isdigit() else 1


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically: a reader sees the old bytes or the
    new ones, never a part. ``mode``: the permission bits to give the new file
    (default: the existing file's, else 0o600). Creates the parent directory (0o700)
    when missing. Raises OSError when the directory is not writable."""
    if mode is None:
        mode = _mode(path)
    if mode is None:
        mode = 0o600
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def remove(path: Path) -> None:
    """Delete ``path`` (a settings file ctxkeep created and that now holds nothing)."""
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)

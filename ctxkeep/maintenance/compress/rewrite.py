"""Atomic rewrite of an agent's JSONL session file, with a verified backup.

The only place where ctxkeep modifies a user's session file (``compress.run``: the
compress flow, and ``--restore``). The sequence, each step durable before the next:

1. check the file is still the one planned (device, inode, size, mtime, SHA-256);
2. write the new content to a temp file in the same directory (same mode as the
   original), fsync it, re-read it and validate it (every line compress wrote parses as
   a JSON object — a line that did not parse in the original either and is kept byte
   for byte is not judged —, the line count is the planned one, plus the caller's check);
3. rotate the backups and write ``<file>.backup``: a temp file in the same directory,
   fsynced, re-read and compared by SHA-256 with the original, renamed into place,
   directory fsynced — so a ``.backup`` that exists is always complete;
4. check the original again, ``rename`` the temp file over it (atomic on POSIX and on
   Windows' ``MoveFileEx``), fsync the directory.

The backup is made only once the new content validated, and taken back (the previous
``.backup`` renamed back) when the file is not replaced after all (it changed meanwhile,
an error): a refused file leaves no backup beside it (newuser15 F6). A crash (even
SIGKILL) at any point leaves either the original file or the complete new one (never
the new one without its backup), and at most a stray temp file
(``.<name>.ctxkeep-tmp.<pid>``), which the next run removes, or a backup of the
unchanged original. An agent that appends to the file between step 4's check and the rename would
write to the old inode: that is why compress refuses recently modified files.

Backups (naming documented for users): ``<file>.backup`` is the newest; when a new one
is made, the previous one is renamed ``<file>.backup.<UTC time it was made>``
(``YYYYmmddTHHMMSSffffffZ``; no renumbering, so no rename ever overwrites a backup).
``prune_backups`` keeps the newest ``keep_backups`` and deletes any older than
``backup_max_age_days``. Backups get the
original's mode; their mtime is the time of the backup. The rewritten (or restored)
file keeps the mtime (and atime) of the file it replaces (``keep_times``, set on the
temp file before the rename).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat as statmod
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from ctxkeep.errors import CtxkeepError
from ctxkeep.sinks.files import fsync_dir
from ctxkeep.sources.readers.jsonl import parse_line

BACKUP_SUFFIX = ".backup"
TMP_MARK = ".ctxkeep-tmp."


class RewriteError(CtxkeepError):
    """The file changed under us, the backup did not verify, or the new content did
    not validate. Nothing was replaced; retrying later may help (``transient``)."""

    transient = True


@dataclass
class FileState:
    """What a file was when it was read: device, inode, size (bytes), mtime (ns), mode
    and the SHA-256 hex of its bytes."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int
    sha256: str

    @classmethod
    def of(cls, st: os.stat_result, sha: str) -> FileState:
        """The state of a file from its ``os.stat`` result and SHA-256 hex."""
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, sha)

    def same_stat(self, st: os.stat_result) -> bool:
        """True when ``st`` is the same file unchanged (device, inode, size, mtime)."""
        return (self.dev, self.ino, self.size, self.mtime_ns) == (
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
        )


def sha256_file(path: Path) -> str:
    """SHA-256 hex of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_state(path: Path) -> tuple[bytes, FileState]:
    """The file's bytes and its FileState, read through one open file description."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        data = f.read()
    return data, FileState.of(st, hashlib.sha256(data).hexdigest())


def _tmp_path(path: Path, what: str) -> Path:
    return path.parent / f".{path.name}{TMP_MARK}{what}.{os.getpid()}"


def _write_durable(tmp: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to the new file ``tmp`` (mode ``mode``) and fsync it. On any
    failure (a full disk: ENOSPC; an I/O error) ``tmp`` is removed before the error
    propagates: no temp file stays behind."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode & 0o7777)
    try:
        os.fchmod(fd, mode & 0o7777)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)


def cleanup_temps(path: Path) -> list[Path]:
    """Remove temp files a killed run left beside ``path``; returns what was removed."""
    gone = []
    for p in path.parent.glob(f".{glob_escape(path.name)}{TMP_MARK}*"):
        try:
            p.unlink()
            gone.append(p)
        except OSError:
            pass
    return gone


def glob_escape(name: str) -> str:
    """``name`` with the glob metacharacters ``*?[`` escaped (for ``Path.glob``)."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def backup_paths(path: Path) -> list[Path]:
    """Existing backups of ``path``, newest first: ``<file>.backup``, then
    ``<file>.backup.<UTC time>`` (``YYYYmmddTHHMMSSffffffZ``, the time it was made)."""
    out = []
    b = Path(str(path) + BACKUP_SUFFIX)
    if b.exists():
        out.append(b)
    # one listing of the folder, not ``Path.glob`` (which compiles a pattern per call:
    # ~1 ms per file of ``compress --check``)
    head = path.name + BACKUP_SUFFIX + "."
    try:
        names = os.listdir(path.parent)
    except OSError:
        names = []
    stamped = [n for n in names if n.startswith(head) and _STAMP_RE.fullmatch(n[len(head) :])]
    out += [path.parent / n for n in sorted(stamped, reverse=True)]
    return out


_STAMP_RE = re.compile(r"\d{8}T\d{12}Z(-\d+)?")


def _rotate(path: Path) -> Path | None:
    """Rename the current ``<file>.backup`` to ``<file>.backup.<its mtime, UTC>``.
    One atomic rename, never over an existing file (a crash leaves every backup).
    Returns the new name, or None when there was no backup."""
    cur = Path(str(path) + BACKUP_SUFFIX)
    if not cur.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(cur.stat().st_mtime))
    stamp += f"{cur.stat().st_mtime_ns // 1000 % 1_000_000:06d}Z"
    dst = Path(f"{cur}.{stamp}")
    n = 0
    while dst.exists():
        n += 1
        dst = Path(f"{cur}.{stamp}-{n}")
    os.rename(cur, dst)
    fsync_dir(path.parent)
    return dst


def make_backup(path: Path, data: bytes, state: FileState, rotated: list[Path] | None = None) -> Path:
    """Write ``<path>.backup`` holding ``data`` (the file's bytes as read); an existing
    ``.backup`` is first renamed to its timestamped name (``prune_backups`` applies the
    retention; appended to ``rotated`` when given, so ``take_back_backup`` can undo it).
    Verified by SHA-256 against ``state`` before it is renamed
    into place. Returns the backup path. Raises RewriteError when it does not verify."""
    if hashlib.sha256(data).hexdigest() != state.sha256:
        raise RewriteError("the bytes to back up are not the bytes read", where=str(path))
    tmp = _tmp_path(path, "backup")
    tmp.unlink(missing_ok=True)
    _write_durable(tmp, data, statmod.S_IMODE(state.mode))
    if sha256_file(tmp) != state.sha256:
        tmp.unlink(missing_ok=True)
        raise RewriteError(
            "backup did not verify (hash differs after writing)", where=str(tmp), hint="check the disk"
        )
    old = _rotate(path)
    if old is not None and rotated is not None:
        rotated.append(old)
    dst = Path(str(path) + BACKUP_SUFFIX)
    os.replace(tmp, dst)
    fsync_dir(path.parent)
    return dst


def take_back_backup(path: Path, rotated: list[Path], *, made: bool = True) -> None:
    """Undo ``make_backup`` of a file that was not replaced after all: delete
    ``<path>.backup`` when ``made`` (it copies the unchanged original) and give the backup
    it rotated (``rotated``) its name back. Never raises (what it cannot undo stays: a
    backup too many, never one too few)."""
    cur = Path(str(path) + BACKUP_SUFFIX)
    try:
        if made:
            cur.unlink(missing_ok=True)
        for old in rotated[-1:]:
            if old.exists() and not cur.exists():
                os.rename(old, cur)
        fsync_dir(path.parent)
    except OSError:
        pass


def validate_jsonl(
    data: bytes, expected_lines: int | None = None, kept_bad: Collection[bytes] = ()
) -> list[str]:
    """Problems of a JSONL document: lines that do not parse to a JSON object, an
    unterminated last line, a line count other than ``expected_lines``. [] when valid.
    A line whose body (without ``\\r``) is one of ``kept_bad`` (lines that did not
    parse in the original either, kept byte for byte by the rewrite) is not judged:
    only what the rewrite wrote is (newuser15 F2)."""
    problems = []
    if data and not data.endswith(b"\n"):
        problems.append("last line has no newline")
    n = 0
    for i, raw in enumerate(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")):
        body = raw[:-1] if raw.endswith(b"\r") else raw
        if not body.strip():
            continue
        n += 1
        if body in kept_bad:
            continue
        rec, why = parse_line(body)
        if not isinstance(rec, dict):
            problems.append(f"line {i + 1} does not parse: {why or 'not an object'}")
            if len(problems) > 5:
                break
    if expected_lines is not None and n != expected_lines:
        problems.append(f"{n} lines, planned {expected_lines}")
    return problems


def replace_file(
    path: Path,
    new_data: bytes,
    state: FileState,
    *,
    expected_lines: int,
    check: Callable[[Path], list[str]] | None = None,
    before_rename: Callable[[os.stat_result], None] | None = None,
    kept_bad: Collection[bytes] = (),
    backup_of: bytes | None = None,
    tail: bytes = b"",
) -> os.stat_result:
    """Atomically replace ``path`` (last read as ``state``) by ``new_data``.

    Writes a temp file in the same directory with the original's mode, fsyncs it,
    validates it (``validate_jsonl`` with ``expected_lines`` and ``kept_bad``, then
    ``check(temp_path)`` which returns problems), with ``backup_of`` (the original's
    bytes as read) makes the verified ``<path>.backup`` (``make_backup``); ``tail``: an
    unended last line ``new_data`` ends with, not judged (``secrets --scrub`` of a
    file whose agent died mid-line); calls
    ``before_rename(temp_stat)`` (e.g. to record the new watermark), checks the original
    is unchanged, renames, fsyncs the directory. A backup made for a file that is then
    not replaced is taken back (``take_back_backup``).
    Returns the stat of the new file (same inode as the temp file).
    Raises RewriteError (nothing replaced, no backup left) when the file changed or
    validation fails.
    """
    cur = os.stat(path)
    if not state.same_stat(cur):
        raise RewriteError(
            "the file changed since it was read",
            where=str(path),
            hint="the agent may be writing to it; retry later",
        )
    tmp = _tmp_path(path, "new")
    tmp.unlink(missing_ok=True)
    rotated: list[Path] = []
    made = False
    try:
        _write_durable(tmp, new_data, statmod.S_IMODE(state.mode))
        with open(tmp, "rb") as f:
            written = f.read()
        if tail and not written.endswith(tail):
            problems = ["the unended last line was not written as planned"]
        else:  # (``tail``: an unended last line kept as it is, not judged)
            problems = validate_jsonl(written[: len(written) - len(tail)], expected_lines, kept_bad)
        if not problems and check is not None:
            problems = check(tmp)
        if problems:
            raise RewriteError(
                "the compressed file did not validate: " + "; ".join(problems[:3]),
                where=str(path),
                hint="the original was left unchanged",
            )
        if backup_of is not None:
            make_backup(path, backup_of, state, rotated)
            made = True
        keep_times(tmp, cur)
        tst = os.stat(tmp)
        if before_rename is not None:
            before_rename(tst)
        if not state.same_stat(os.stat(path)):
            raise RewriteError(
                "the file changed while it was being compressed",
                where=str(path),
                hint="the agent may be writing to it; retry later",
            )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        if made or rotated:  # (rotated, then cut short: the old backup gets its name back)
            take_back_backup(path, rotated, made=made)
        raise
    fsync_dir(path.parent)
    return os.stat(path)


def keep_times(tmp: Path, st: os.stat_result) -> None:
    """Give the new content ``tmp`` the access and modification times of the file it
    replaces (``st``), before the rename: the rewrite is the same conversation, so the
    file appears with its old mtime in one atomic step (a kill at any point leaves the
    old file or the new one with the old mtime, never the new one dated now). The
    agents read that mtime: Claude Code deletes sessions not modified for
    ``cleanupPeriodDays`` (settings.json, default 30 days; docs.anthropic.com/en/docs/
    claude-code/settings); ctxkeep's own
    active-file check (``[compress] active_minutes``) would call its rewrite an agent's
    write (newuser18 F4). The inode changes, so an ingest still sees a new file."""
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))


def restore_backup(path: Path, backup: Path | None = None) -> tuple[Path, os.stat_result]:
    """Put a backup (default ``<path>.backup``) back in place of ``path``, atomically
    (temp copy, fsync, verify by SHA-256, rename, fsync dir). The backup is kept.
    Returns (backup used, stat of the restored file). Raises RewriteError when no backup
    exists or it does not parse as JSONL."""
    backup = backup or Path(str(path) + BACKUP_SUFFIX)
    if not backup.exists():
        raise RewriteError(
            "no backup to restore", where=str(backup), hint="backups are made by `ctxkeep compress`"
        )
    data = backup.read_bytes()
    problems = validate_jsonl(data)
    if problems:
        raise RewriteError("the backup is not valid JSONL: " + problems[0], where=str(backup))
    sha = hashlib.sha256(data).hexdigest()
    cur = os.stat(path) if path.exists() else None
    mode = cur.st_mode if cur is not None else os.stat(backup).st_mode
    tmp = _tmp_path(path, "restore")
    tmp.unlink(missing_ok=True)
    try:
        _write_durable(tmp, data, statmod.S_IMODE(mode))
        if sha256_file(tmp) != sha:
            raise RewriteError("restored copy did not verify", where=str(tmp))
        if cur is not None:
            keep_times(tmp, cur)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return backup, os.stat(path)


ASIDE_SUFFIX = ".before-restore"


def save_aside(path: Path, data: bytes, mode: int) -> Path:
    """Keep ``data`` (the file's bytes just before a forced restore replaces it) as
    ``<path>.before-restore.<UTC time>`` beside it (``YYYYmmddTHHMMSSffffffZ``, a
    ``-N`` tail when taken), mode ``mode``, fsynced and verified by SHA-256: no line
    the agent wrote is lost by ``compress --restore --force``. Never overwrites a
    file; never read as a session file (the name does not end in ``.jsonl``).
    Returns the path written. Raises RewriteError when the copy does not verify,
    OSError (a full disk) with nothing left behind."""
    now = time.time_ns()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 1_000_000_000))
    stamp += f"{now // 1000 % 1_000_000:06d}Z"
    dst = Path(f"{path}{ASIDE_SUFFIX}.{stamp}")
    n = 0
    while dst.exists():
        n += 1
        dst = Path(f"{path}{ASIDE_SUFFIX}.{stamp}-{n}")
    tmp = _tmp_path(path, "aside")
    tmp.unlink(missing_ok=True)
    _write_durable(tmp, data, mode)
    if sha256_file(tmp) != hashlib.sha256(data).hexdigest():
        tmp.unlink(missing_ok=True)
        raise RewriteError("the copy of the current file did not verify", where=str(tmp))
    os.link(tmp, dst)  # never replaces a file of that name
    tmp.unlink()
    fsync_dir(path.parent)
    return dst


def prune_backups(
    path: Path, keep: int, max_age_days: float, *, now: float | None = None, dry_run: bool = False
) -> list[Path]:
    """Delete backups of ``path`` beyond the newest ``keep`` and any older than
    ``max_age_days`` (by mtime: the time the backup was made). Returns the deleted (or,
    with ``dry_run``, deletable) paths."""
    now = time.time() if now is None else now
    gone = []
    for i, p in enumerate(backup_paths(path)):
        try:
            age_days = (now - p.stat().st_mtime) / 86400
        except OSError:
            continue
        if i >= keep or age_days > max_age_days:
            if not dry_run:
                p.unlink(missing_ok=True)
            gone.append(p)
    return gone

"""Errors raised by ctxkeep.

Flat and small, in the style of sqlite-utils and dlt: every error says what failed
(``what``), where (``where``: a path, a store file, or the name of a request field such
as ``limit`` or ``session``, which each front end shows in its own words: ``--limit``
on the command line, ``limit`` in an MCP tool's arguments), what to do (``todo``), the
process exit code it maps to (``exit_code``: 1 failure, 2 wrong usage) and whether
retrying can help (``transient``). Front ends render these fields; they never reword
the text. All errors keep their fields through pickling, so they can cross process and
Prefect task boundaries.
"""

from __future__ import annotations


class CtxkeepError(Exception):
    """Base class. ``transient`` is True when the same call may succeed later."""

    transient: bool = False
    #: the exit code of a command that fails with this error (README "Exit codes")
    exit_code: int = 1

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message, where, hint)
        self.message = message
        self.where = where
        self.hint = hint

    @property
    def what(self) -> str:
        """What failed (one sentence, no parameter spelled in a front end's words)."""
        return self.message

    @property
    def todo(self) -> str | None:
        """What to do about it, or None."""
        return self.hint

    def __str__(self) -> str:  # one line: what, where, what to do
        parts = [self.message]
        if self.where:
            parts.append(f"({self.where})")
        if self.hint:
            parts.append(f"- {self.hint}")
        return " ".join(parts)

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.where, self.hint))


def _rebuild(cls, message, where, hint):
    return cls(message, where=where, hint=hint)


class StoreBusy(CtxkeepError):
    """Another process holds the store's maintenance lock, or SQLite stayed locked."""

    transient = True


class StoreError(CtxkeepError):
    """The store is unreadable, of an unknown schema version, or not writable."""


class NothingStored(StoreError):
    """The store exists but holds no usage yet (an ingest found no session file with
    any): a read command answers it as an empty result, rc 0, with this line as its
    note (docs/cli.md "Exit codes"); a command that must write something from it fails."""


class ConfigError(CtxkeepError):
    """``config.toml`` or an environment override is invalid. ``problems``: one line
    per wrong value (file, key, value, what is wrong) when the file was validated;
    ``warnings``: the file's unknown keys found in the same check (``<file>: unknown key
    …``), said before the error."""

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        hint: str | None = None,
        problems=(),
        warnings=(),
    ):
        super().__init__(message, where=where, hint=hint)
        self.problems = list(problems)
        self.warnings = list(warnings)

    def __reduce__(self):
        return (_rebuild_config, (self.message, self.where, self.hint, self.problems, self.warnings))


def _rebuild_config(message, where, hint, problems, warnings=()):
    return ConfigError(message, where=where, hint=hint, problems=problems, warnings=warnings)


class UsageError(CtxkeepError):
    """A command or tool was called with arguments that do not fit together (exit 2)."""

    exit_code = 2


class NotFound(UsageError):
    """What a call names is not there (no such session, entry, backup or file) or may
    not be done to it now: the call was well formed, so the CLI exits 1, not 2. A
    UsageError, so callers that catch UsageError (MCP) treat it as before."""

    exit_code = 1


class SearchSyntaxError(CtxkeepError):
    """A raw FTS5 query did not parse (only raised in raw mode; exit 2, wrong usage)."""

    exit_code = 2


class PurgeCancelled(CtxkeepError):
    """A purge was called with ``confirm`` false: nothing was changed. Its text is the
    ctx_purge seed's exact reply."""

    MESSAGE = "Purge cancelled. Pass confirm: true to proceed."

    def __init__(self, message: str = MESSAGE, *, where: str | None = None, hint: str | None = None):
        super().__init__(message, where=where, hint=hint)


class SessionNotFound(NotFound):
    """No stored session has the id, or starts with the prefix, a caller gave (exit 1:
    the call was well formed, the store holds nothing by that name)."""


class AmbiguousSession(UsageError):
    """A session id prefix names several sessions (exit 2: wrong usage, give more
    characters). ``candidates``: the sessions it names, as ``(short id, agent, session
    id)`` tuples, at most ``lookup.MAX_CANDIDATES`` of them; ``total`` counts them all."""

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        hint: str | None = None,
        candidates: tuple = (),
        total: int = 0,
    ):
        super().__init__(message, where=where, hint=hint)
        self.candidates = tuple(candidates)
        self.total = total or len(self.candidates)

    def __reduce__(self):
        return (
            _rebuild_ambiguous,
            (self.message, self.where, self.hint, self.candidates, self.total),
        )


def _rebuild_ambiguous(message, where, hint, candidates, total):
    return AmbiguousSession(message, where=where, hint=hint, candidates=candidates, total=total)


class FileSystemError(CtxkeepError):
    """The file system refused an operation: the disk is full, it is read-only, a
    path goes through a file, permission is denied, an I/O error. Made from the
    ``OSError`` (or SQLite's/DuckDB's report of one) by ``from_os_error``, the one
    place that maps them. ``kind``: the errno name (``ENOSPC``, ``EROFS``, ``ENOTDIR``,
    ``EACCES``, …; ``READONLY`` for SQLite's read-only store); ``stops``: True when
    every further write to that disk fails the same way (full, quota, read-only), so a
    run over many files stops at the first."""

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None, kind: str = ""):
        super().__init__(message, where=where, hint=hint)
        self.kind = kind

    @property
    def stops(self) -> bool:
        return self.kind in ("ENOSPC", "EDQUOT", "EROFS")

    def __reduce__(self):
        return (_rebuild_fs, (self.message, self.where, self.hint, self.kind))


def _rebuild_fs(message, where, hint, kind):
    return FileSystemError(message, where=where, hint=hint, kind=kind)


#: errno name → (what, what to do); ``{where}`` is the file or folder concerned
_OS_ERRORS: dict[str, tuple[str, str]] = {
    "ENOSPC": (
        "no space left on the device",
        "free space on that disk (or pass --home DIR on another), then run the command again: "
        "what was stored before stays stored",
    ),
    "EDQUOT": (
        "disk quota exceeded",
        "free space within your quota (or pass --home DIR on another disk), then run the command again",
    ),
    "EROFS": (
        "the file system is read-only",
        "remount it writable, or copy the store to a writable disk and pass --home DIR",
    ),
    "READONLY": (
        "the store cannot be written (a read-only file or file system)",
        "make it writable (chmod u+w, or remount the disk writable) or pass --home DIR; search, "
        "show and stats read a read-only store",
    ),
    "CANTOPEN": (
        "cannot open the database file",
        "check that its folder exists and that you may write there (ls -ld), or pass --home DIR",
    ),
    "ENOTDIR": (
        "a part of the path is a file, not a directory",
        "give a path whose folders are directories (e.g. --home DIR)",
    ),
    "EISDIR": ("the path is a directory, not a file", "give the path of a file"),
    "EACCES": (
        "permission denied",
        "give your user access to it (ls -l; chmod or chown) or pass --home DIR",
    ),
    "EPERM": (
        "operation not permitted",
        "give your user access to it (ls -l; chmod or chown) or pass --home DIR",
    ),
    "EIO": ("input/output error", "the disk may be failing: check it (dmesg), then run the command again"),
    "EMFILE": ("too many open files", "raise the limit (ulimit -n) and run the command again"),
    "ENAMETOOLONG": ("the path is too long", "give a shorter path"),
    "ELOOP": ("too many levels of symbolic links", "fix the symlink loop in the path"),
    "ENOENT": ("no such file or directory", "check the path and run the command again"),
}
#: the order in which a cause is preferred when a chain holds several (a full disk
#: first: SQLite then reports "disk I/O error" or a failed commit on top of it)
_OS_PRIORITY = ["ENOSPC", "EDQUOT", "EROFS", "ENOTDIR", "EACCES", "EPERM", "READONLY", "CANTOPEN", "EIO"]
#: SQLite result codes (``sqlite3.Error.sqlite_errorname``, Python ≥ 3.11) and the
#: texts SQLite and DuckDB use, as errno names
_SQLITE_CODES = {
    "SQLITE_FULL": "ENOSPC",
    "SQLITE_READONLY": "READONLY",
    "SQLITE_IOERR": "EIO",
    "SQLITE_CANTOPEN": "CANTOPEN",
}
_TEXTS = {
    "no space left on device": "ENOSPC",
    "database or disk is full": "ENOSPC",
    "read-only file system": "EROFS",
    "attempt to write a readonly database": "READONLY",
    "permission denied": "EACCES",
    "not a directory": "ENOTDIR",
}


def _errno_name(e: BaseException) -> tuple[str, str | None] | None:
    """``(errno name, file)`` of one exception that reports a file-system failure."""
    import errno as errno_mod

    if isinstance(e, OSError) and e.errno is not None and e.errno in errno_mod.errorcode:
        name = errno_mod.errorcode[e.errno]
        if name in _OS_ERRORS:
            return name, e.filename if isinstance(e.filename, str) else None
    code = getattr(e, "sqlite_errorname", None) or ""
    for prefix, name in _SQLITE_CODES.items():  # (SQLITE_IOERR_WRITE, SQLITE_READONLY_CANTINIT, …)
        if code.startswith(prefix):
            return name, None
    if type(e).__module__.split(".")[0] in ("sqlite3", "duckdb", "_duckdb", "pyarrow", "polars"):
        text = str(e).lower()
        for t, name in _TEXTS.items():
            if t in text:
                return name, None
    return None


#: free bytes under which a disk counts as full when SQLite reports only an I/O error
FULL_BELOW = 1024 * 1024


def _disk_state(path: str | None) -> str | None:
    """``EROFS`` when the file system holding ``path`` (or its nearest existing parent)
    is mounted read-only, ``ENOSPC`` when less than ``FULL_BELOW`` bytes are free to
    the user, else None (``os.statvfs``; None where it does not exist)."""
    import os

    if not path or not hasattr(os, "statvfs"):
        return None
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    if st.f_flag & getattr(os, "ST_RDONLY", 1):
        return "EROFS"
    if st.f_bavail * st.f_frsize < FULL_BELOW:
        return "ENOSPC"
    return None


def _chain(e: BaseException) -> list[BaseException]:
    """``e`` and its causes and contexts (each once, at most 32)."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [e]
    while todo and len(out) < 32:
        x = todo.pop(0)
        if x is None or any(x is y for y in out):
            continue
        out.append(x)
        todo += [x.__cause__, x.__context__]
    return out


def from_os_error(e: BaseException, where: str | None = None) -> FileSystemError | None:
    """The one-line error (``what (where) - what to do``) of a file-system failure in
    ``e`` or its causes (``__cause__``/``__context__``): an ``OSError`` of a known errno
    (``_OS_ERRORS``: full disk, quota, read-only file system, a path through a file,
    permission, I/O, …), or SQLite's ``SQLITE_FULL``/``SQLITE_READONLY`` and SQLite's or
    DuckDB's text of one. ``where``: the file or folder to name when the error names
    none (e.g. the store). None when ``e`` holds no such failure, and for a
    ``CtxkeepError`` (it says what it has to) unless a full disk or a read-only file
    system caused it (a store found "damaged" by a check that ran on a full disk)."""
    found = [f for f in (_errno_name(x) for x in _chain(e)) if f is not None]
    if isinstance(e, CtxkeepError):  # it says what it has to, unless the disk is full or read-only
        found = [f for f in found if f[0] in ("ENOSPC", "EDQUOT", "EROFS")]
    if not found:
        return None
    rank = {n: i for i, n in enumerate(_OS_PRIORITY)}
    name, filename = min(found, key=lambda f: rank.get(f[0], len(rank)))
    filename = filename or next((fn for n, fn in found if n == name and fn), None)
    if name in ("EIO", "READONLY", "CANTOPEN"):  # SQLite's codes hide the errno: ask the disk
        name = _disk_state(filename or where) or name
    what, hint = _OS_ERRORS[name]
    return FileSystemError(what, where=filename or where, hint=hint, kind=name)

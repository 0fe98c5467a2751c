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


class ConfigError(CtxkeepError):
    """``config.toml`` or an environment override is invalid. ``problems``: one line
    per wrong value (file, key, value, what is wrong) when the file was validated."""

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None, problems=()):
        super().__init__(message, where=where, hint=hint)
        self.problems = list(problems)

    def __reduce__(self):
        return (_rebuild_config, (self.message, self.where, self.hint, self.problems))


def _rebuild_config(message, where, hint, problems):
    return ConfigError(message, where=where, hint=hint, problems=problems)


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

"""Project directories: how a named directory is normalized, and the one rule "this
directory or below it" that purge, tombstones, the Parquet archive and the search
``project`` filter share.

The rule (``under``): a path is under ``root`` when it is ``root`` itself or starts with
``root`` followed by a separator, ``/`` or ``\\`` (Windows paths as Claude Code, Codex
and Cursor record them on Windows: ``C:\\Users\\x\\repo``). Whole path components only:
``/a/bc`` is not under ``/a/b``. A trailing separator on ``root`` is ignored (``/a/b/``
is ``/a/b``); a filesystem root ``/`` (or ``\\``) holds every path that starts with it;
a drive root ``C:\\`` holds ``C:`` and every ``C:\\…`` / ``C:/…`` path. The comparison is
exact and case-sensitive (SQLite's BINARY collation; Polars' and Python's ``==``):
``/A/b`` is not under ``/a``.

It is written here once, in three forms built from one definition (``_bounds``): a
Python predicate (``is_under``), an SQL fragment with its parameters (``under_sql``)
and a Polars expression (``under_expr``). This module imports nothing heavy (Polars
is not imported: ``under_expr`` takes the column expression).
"""

from __future__ import annotations

import os

#: the separators a recorded project directory may use (POSIX and Windows)
SEPARATORS = ("/", "\\")


def normalize_dir(path: str, cwd: str) -> str:
    """A directory a user named, as stored ``project_dir`` values are written: ``~``
    expanded, a relative path taken from ``cwd``, ``..``/``.`` folded and trailing
    separators dropped (``/`` stays ``/``); Windows paths (``C:\\x``) are kept as
    given apart from the trailing separator."""
    p = os.path.expanduser(str(path).strip())
    if not os.path.isabs(p) and not looks_windows_abs(p):
        p = os.path.join(cwd, p)
    if not looks_windows_abs(p):
        p = os.path.normpath(p)
    if len(p) > 1:
        p = p.rstrip("/\\") or p[:1]
    return p


def caller_cwd() -> str:
    """The caller's working directory as the shell names it: ``$PWD`` when it is
    absolute and the same directory as ``os.getcwd()`` (a folder reached through a
    symlink keeps the name the user typed, as discovery keeps the lexical path under
    ``$HOME``), else ``os.getcwd()``."""
    cwd = os.getcwd()
    pwd = os.environ.get("PWD", "")
    if pwd and os.path.isabs(pwd) and pwd != cwd:
        try:
            if os.path.samefile(pwd, cwd):
                return os.path.normpath(pwd)
        except OSError:
            pass
    return cwd


def absolute_file(path: str | os.PathLike, cwd: str | os.PathLike | None = None) -> str:
    """A file or folder a user named (``compress FILE``, ``ingest --path P``), as
    discovery stores paths: ``~`` expanded, a relative path taken from ``cwd``
    (default ``caller_cwd()``), ``..``/``.`` folded by ``os.path.normpath``, symlinks
    NOT followed (lexical, so ``sources.confine``'s refusal of a symlink out of an
    agent's folder still sees the link). Windows paths (``C:\\x``) are kept as given.
    Raises nothing (no file system access beyond ``caller_cwd``). Newuser24 F1: a
    relative path stored as typed was a second name of the same file."""
    p = os.path.expanduser(os.fspath(path))
    if looks_windows_abs(p):
        return p
    if not os.path.isabs(p):
        p = os.path.join(os.fspath(cwd) if cwd else caller_cwd(), p)
    return os.path.normpath(p)


def is_relative_stored(p: str) -> bool:
    """True for a stored path that is neither POSIX-absolute nor a Windows drive path
    (``.claude/projects/x.jsonl``): what ``doctor`` reports and repairs (F1)."""
    return bool(p) and not p.startswith(("/", "\\")) and not looks_windows_abs(p)


def looks_windows_abs(p: str) -> bool:
    """True for ``C:\\…`` or ``C:/…``."""
    return len(p) >= 3 and p[1] == ":" and p[2] in "\\/"


def _bounds(root: str) -> tuple[str | None, tuple[str, ...]]:
    """The one definition of "``root`` or below": ``(exact, prefixes)``. A path is under
    ``root`` when it equals ``exact`` (None: no exact value) or starts with one of
    ``prefixes``. Raises ValueError for an empty root."""
    r = str(root)
    if r in SEPARATORS:
        return None, (r,)  # a filesystem root: every path that starts with it (itself too)
    r = r.rstrip("/\\")
    if not r:  # "//" and the like: the root
        return None, (str(root)[0],)
    return r, tuple(r + s for s in SEPARATORS)


def _check(root: str | None) -> str:
    if root is None or not str(root):
        raise ValueError("a project directory is required (got an empty one)")
    return str(root)


def is_under(path: str | None, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (see the module doc); False for None.
    Raises ValueError when ``root`` is empty."""
    exact, prefixes = _bounds(_check(root))
    if path is None:
        return False
    return path == exact or path.startswith(prefixes)


def under_sql(col: str, root: str) -> tuple[str, list[str]]:
    """An SQLite boolean expression over column ``col`` (an identifier, e.g.
    ``e.project_dir``) true when it is ``root`` or below it, and its positional (``?``)
    parameters, in order: ``(sql, params)``. NULL for a NULL column. A prefix is matched
    as a range (``col >= 'r/' AND col < 'r0'``: ``0`` follows ``/``, ``]`` follows
    ``\\``), so an index on ``col`` can serve it. Raises ValueError when ``root`` is
    empty."""
    exact, prefixes = _bounds(_check(root))
    conds, params = [], []
    if exact is not None:
        conds.append(f"{col} = ?")
        params.append(exact)
    for p in prefixes:
        conds.append(f"({col} >= ? AND {col} < ?)")
        params += [p, p[:-1] + chr(ord(p[-1]) + 1)]
    return "(" + " OR ".join(conds) + ")", params


def under_expr(col, root: str):
    """A Polars boolean expression: ``col`` (a ``pl.Expr`` of String dtype) is ``root``
    or below it; null where ``col`` is null. Raises ValueError when ``root`` is
    empty."""
    exact, prefixes = _bounds(_check(root))
    expr = None
    if exact is not None:
        expr = col == exact
    for p in prefixes:
        e = col.str.starts_with(p)
        expr = e if expr is None else expr | e
    return expr


def every_project_reason(d: str) -> str:
    """Why ``d`` (for which ``holds_every_project`` is True) holds every project, in a
    few words: ``the filesystem root``, ``your home directory``, or ``above your home
    directory (~ is /tmp/u/home)`` (``/tmp`` with HOME below it was called "the
    filesystem root or your home directory": newuser16 F3)."""
    import re

    if d in ("/", "\\") or re.fullmatch(r"[A-Za-z]:[\\/]?", d):
        return "the filesystem root"
    home = os.path.normpath(os.path.expanduser("~"))
    if os.path.normpath(d) == home:
        return "your home directory"
    return f"above your home directory (~ is {home})"


def holds_every_project(d: str) -> bool:
    """True for a directory that holds every project: ``/``, a drive root, the user's
    home directory or an ancestor of it (a purge of it would tombstone everything; the
    latest session "of" it is any project's)."""
    import re

    if d in ("/", "\\") or re.fullmatch(r"[A-Za-z]:[\\/]?", d):
        return True
    return is_under(os.path.normpath(os.path.expanduser("~")), d)

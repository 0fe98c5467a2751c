"""The rules of the arguments every question shares, in one place and without pydantic:
the defaults and ranges (``DEFAULT_LIMIT``, ``MAX_LIMIT``, ``MAX_BUDGET``), how a
number out of range is read (``in_range``: clamped above with a note, a usage error
below), the NUL rule (``refuse_nul``), repeatable comma-separated names
(``split_values``, ``unknown_value``), a project directory (``project_dir``) and a
``--since``/``--until`` value (``when``, ``in_order``).

``service.model``'s pydantic types (``Limit``, ``Budget``, ``ProjectDir``, ``When`` …)
apply these same functions to untyped input (MCP tools, the app); the CLI, whose
options Typer has typed already, applies them directly to build the plain requests of
the interactive read paths (``service.search.SearchArgs``, ``service.stats``,
``service.conversation.ConversationArgs``), which import no pydantic (docs/design.md,
"Latency budget": pydantic's import and first model builds were ~0.06-0.08 s of CPU
of each ~0.1 s read command, issue 22). Errors are ``errors.UsageError`` whose
``where`` is the field's name, as the models raise them.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Sequence
from typing import Any

from ctxkeep.errors import UsageError

DEFAULT_LIMIT = 10
MAX_LIMIT = 200
#: the default page of a list people read (``sessions``): ``--limit N`` or ``--all``
#: for more
DEFAULT_PAGE = 50
MAX_BUDGET = 200_000
#: the version of every ``--json`` object and MCP ``structuredContent`` (docs/cli.md):
#: a change that removes or renames a key, or changes a value's meaning, raises it
JSON_SCHEMA = 1


def out_of_range(field: str, value: Any, lo: Any, hi: Any) -> UsageError:
    """The usage error of a number out of its range: ``limit 0 is out of range (limit)
    - use 1 to 200`` (``hi`` None: ``use at least 1``)."""
    rng = f"use {lo} to {hi}" if lo is not None and hi is not None else f"use at least {lo}"
    return UsageError(f"{field.replace('_', ' ')} {value} is out of range", where=field, hint=rng)


def in_range(field: str, value: int | None, hi: int, notes: list[str], lo: int = 1) -> int | None:
    """``value`` of a clamped whole-number argument (a limit, a budget; None stays
    None): above ``hi`` it is taken as ``hi`` and ``notes`` gets ``limit 500 clamped to
    200``; below ``lo`` it is a usage error (``out_of_range``)."""
    if value is None:
        return None
    if value > hi:
        notes.append(f"{field} {value} clamped to {hi}")
        return hi
    if value < lo:
        raise out_of_range(field, value, lo, hi)
    return value


def refuse_nul(values: Any, where: str = "") -> None:
    """Raise UsageError for a NUL character in any string of ``values`` (a key or a
    value, nested too): no path, query or label holds one, and SQLite, the file system
    and FTS5 each fail on it their own way."""
    if isinstance(values, str):
        if "\x00" in values:
            raise UsageError(
                "a NUL character (\\x00) is not allowed",
                where=where or None,
                hint="remove it: no query, path or label contains one",
            )
    elif isinstance(values, dict):
        for k, v in values.items():
            refuse_nul(str(k), str(k))
            refuse_nul(v, str(k))
    elif isinstance(values, (list, tuple)):
        for v in values:
            refuse_nul(v, where)


def split_values(values: Any) -> list[str]:
    """The values of a repeatable, comma-separated option as one list, in order,
    without blanks or repeats: ``["codex,crush", "aider"]`` → ``["codex", "crush",
    "aider"]``; a JSON array in a string is read as one."""
    if values is None:
        return []
    if isinstance(values, str):
        s = values.strip()
        if s.startswith("["):
            try:
                values = json.loads(s)
            except json.JSONDecodeError:
                pass
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        values = [values]
    return split_commas(values)


def split_commas(values: Sequence[Any]) -> list[str]:
    """Each of ``values`` split at commas, stripped, blanks and repeats left out, in
    order (``split_values``; the CLI's ``options.split_values``)."""
    out: list[str] = []
    for v in values:
        for x in str(v).split(","):
            x = x.strip()
            if x and x not in out:
                out.append(x)
    return out


def closest(name: str, choices: Sequence[str], prefer: Sequence[str] = ()) -> str | None:
    """The valid name nearest to a misspelt ``name``, one rule for the CLI and MCP
    (newuser24 F3: ``claud`` gave ``claude-ai`` over MCP, ``claude-code`` on the command
    line): the names that start with it, those in ``prefer`` (the agents a store holds)
    first, then in the order of ``choices`` (the registry's: the most used agents
    first), so ``claud`` → ``claude-code``, not the import-only ``claude-ai``; else the
    closest by ``difflib`` (cutoff 0.6, ``prefer`` first on a tie), or None."""
    low = name.lower()
    held = set(prefer)
    starts = [c for c in choices if c.startswith(low)]
    if starts:
        return sorted(starts, key=lambda c: c not in held)[0]
    for pool in ([c for c in choices if c in held], list(choices)):
        m = difflib.get_close_matches(low, pool, n=1, cutoff=0.6)
        if m:
            return m[0]
    return None


def unknown_value(
    what: str,
    name: str,
    choices: Sequence[str],
    where: str | None = None,
    *,
    prefer: Sequence[str] = (),
    lister: str | None = None,
) -> str:
    """``unknown agent 'codx' (--agent) - did you mean 'codex'?``: the line of a usage
    error, the same for the CLI, MCP and the app (``where``: the option, when there is
    one; ``prefer``: the agents a store holds, suggested first). The agents are not
    spelled out (their 49 names made a 544-character line, and over MCP went into an
    agent's context: newuser24 F3): the closest is named, else where they are listed:
    ``lister`` (MCP: ``ctx_stats`` lists the agents the store holds), else ``ctxkeep
    sources --all`` with the number it lists: the source agents, ``note`` left out even
    where ``choices`` holds it, so every command gives the same count (newuser23 F8)."""
    near = closest(name, choices, prefer)
    if what == "agent" and len(choices) > 8:
        where_to = (
            f" - {lister} lists the agents the store holds"
            if lister
            else f" - `ctxkeep sources --all` lists all {sum(c != 'note' for c in choices)}"
        )
        return (
            f"unknown agent {name!r}"
            + (f" ({where})" if where else "")
            + (f" - did you mean {near!r}?" if near else where_to)
        )
    return (
        f"unknown {what} {name!r}"
        + (f" ({where})" if where else "")
        + (f" - did you mean {near!r}? (one of: " if near else " - use one of: ")
        + ", ".join(choices)
        + (")" if near else "")
    )


def names(
    field: str, v: Any, choices: Sequence[str] | None = None, *, lower: bool = True
) -> list[str] | None:
    """A repeatable, comma-separated list of names (``--agent``, ``--kind``,
    ``--tool``): split (``split_values``), lower-cased unless ``lower`` is false, each
    checked against ``choices`` when given (an unknown one is a usage error naming the
    closest valid one). None when none is given."""
    vals = split_values(v)
    if lower:
        vals = [x.lower() for x in vals]
    if choices is not None:
        allowed = tuple(choices)
        for x in vals:
            if x not in allowed:
                raise UsageError(unknown_value(field, x, allowed, lister="ctx_stats"), where=field)
    return vals or None


def project_dir(v: str | None, cwd: str | os.PathLike | None = None) -> str | None:
    """A ``--project`` value as "this directory or below": ``paths.normalize_dir``
    against ``cwd`` (default this process's directory; ``.``, ``~`` and relative paths
    work); None for none."""
    if v is None or not str(v).strip():
        return None
    from ctxkeep.paths import normalize_dir

    return normalize_dir(str(v), str(cwd or os.getcwd()))


def when(v: str | None, field: str) -> str | None:
    """A ``--since``/``--until`` value checked by the one parser
    (``timeutil.read_when``: UsageError naming ``field``), kept as written; None for
    none."""
    if v is None or not str(v).strip():
        return None
    from ctxkeep.timeutil import read_when

    read_when(str(v), where=field)
    return str(v).strip()


def in_order(since: str | None, until: str | None) -> None:
    """Raise UsageError when ``since`` is after ``until`` (``timeutil.check_window``)."""
    from ctxkeep.timeutil import check_window

    check_window(since, until)

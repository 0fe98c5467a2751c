"""Facet tokens: search filters as words of the full-text index.

A filtered search (``--kind message``, ``--tool Bash``, ``--project ~/code/x``) used to
check each FTS match against ``entries`` (~10 µs a chunk): a common word under a
selective filter walked thousands of matches. Instead every chunk carries, in an
extra FTS5 column ``facets``, one token per filter value of the entries holding its
text, and a filter becomes part of the MATCH (``… AND facets:(fk… OR fk…)``): FTS5
intersects the posting lists in C.

A token is a field letter pair plus 12 digits of a BLAKE2b hash of the lower-cased
value (``fk0734…`` = kind ``message``): digits-only tails pass the ``porter`` and
``unicode61`` tokenizers unchanged and never collide with a word anyone types.

Fields (``FIELDS``): agent ``fa``, kind ``fk``, role ``fr``, tool name ``ft``, session
``fs``, project ``fp`` (the project directory and each of its ancestors at ``/``
boundaries, plus ``/`` for an absolute path, so a path-prefix filter is one token).
One text held by many entries (a stock tool output in hundreds of sessions) keeps at
most ``MAX_VALUES`` tokens per field; beyond that the field's wildcard token
(``fs0``: "any session") replaces them, and a filter on that field always admits the
chunk. Tokens are therefore a superset test: search still checks the matching
entries exactly, so a token left behind by a purged entry only costs a check.
Values are lower-cased for the same reason (the tool filter is case-insensitive, and
the project filter's ``LIKE`` is for ASCII).

Status and time bounds change or are ranges: they stay exact checks in search.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

#: filter name (``query.search.Filters``) → (token prefix, entries column)
FIELDS: dict[str, tuple[str, str]] = {
    "agent": ("fa", "agent"),
    "kind": ("fk", "kind"),
    "role": ("fr", "role"),
    "tool": ("ft", "tool_name"),
    "session": ("fs", "session_id"),
    "project": ("fp", "project_dir"),
}
#: distinct tokens per field a chunk keeps before the field's wildcard replaces them
MAX_VALUES = {"fa": 8, "fk": 8, "fr": 8, "ft": 8, "fs": 8, "fp": 32}
_PREFIXES = {p for p, _ in FIELDS.values()}
#: entries of each cache below: the entries of a session come together (one file, a
#: group of consecutive batches), so a few thousand tuples hold a group's; at 65,536
#: the three held ~170 MB of token sets and strings in a 10 GB ingest (36,000 sessions)
#: for the whole run (issue 26, target 2)
CACHE_ENTRIES = 8192


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def token(prefix: str, value: str) -> str:
    """The facet token of one value: ``prefix`` + 12 digits of BLAKE2b-64 of the
    lower-cased value (deterministic across processes and versions)."""
    h = hashlib.blake2b(value.lower().encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return f"{prefix}{int.from_bytes(h, 'big') % 10**12:012d}"


def wildcard(prefix: str) -> str:
    """The token standing for "any value of this field" (``fs0``)."""
    return prefix + "0"


@functools.lru_cache(maxsize=4096)
def project_keys(project_dir: str | None) -> tuple[str, ...]:
    """The project-filter values that match ``project_dir``: itself, each ancestor cut
    at a ``/`` (``/a/b/c`` → ``/a/b/c``, ``/a/b``, ``/a``) and ``/`` for an absolute
    path, as ``query.search.Filters`` matches (``paths.under_sql``: ``p`` itself or below it)."""
    if not project_dir:
        return ()
    out = {project_dir}
    for i, ch in enumerate(project_dir):
        if ch == "/" and i > 0:
            out.add(project_dir[:i])
    if project_dir.startswith("/"):
        out.add("/")
    return tuple(sorted(out))


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def entry_tokens(agent, kind, role, tool_name, session_id, project_dir) -> frozenset[str]:
    """The facet tokens of one entry (None values give none); cached: the entries of
    one session mostly share them."""
    out = set()
    for prefix, v in (("fa", agent), ("fk", kind), ("fr", role), ("ft", tool_name), ("fs", session_id)):
        if v:
            out.add(token(prefix, v))
    out.update(token("fp", k) for k in project_keys(project_dir))
    return frozenset(out)


def merge(tokens: Iterable[str]) -> str:
    """The ``facets`` column text of a set of tokens: sorted, space-separated, each
    field capped at ``MAX_VALUES`` (then only its wildcard)."""
    return _merge(frozenset(tokens))


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _merge(tokens: frozenset[str]) -> str:
    by: dict[str, set[str]] = {}
    for t in tokens:
        if t:
            by.setdefault(t[:2], set()).add(t)
    out = []
    for prefix in sorted(by):
        ts = by[prefix]
        if wildcard(prefix) in ts or len(ts) > MAX_VALUES.get(prefix, 8):
            out.append(wildcard(prefix))
        else:
            out.extend(sorted(ts))
    return " ".join(out)


def facets_by_content(rows: Iterable[tuple]) -> dict[str, frozenset[str]]:
    """``content_hash → tokens`` from rows ``(content_hash, agent, kind, role,
    tool_name, session_id, project_dir)`` (entries without text are skipped)."""
    out: dict[str, frozenset[str]] = {}
    for h, *vals in rows:
        if h:
            t = entry_tokens(*vals)
            prev = out.get(h)
            out[h] = t if prev is None or prev is t else prev | t
    return out


def filter_expr(prefix: str, values: Iterable[str]) -> str:
    """The FTS5 expression for one filter field: ``facets : (t1 OR t2 OR wildcard)``;
    ``project`` values are path prefixes (a trailing ``/`` is ignored)."""
    toks = {token(prefix, v) for v in values}
    toks.add(wildcard(prefix))
    return "facets : (" + " OR ".join(sorted(toks)) + ")"

"""The search question without pydantic: ``run(home, SearchArgs) -> SearchOutcome``,
the one rendering of a hit (``render_hit``) and the ``--json`` shape of a query's hits
(``hits_json``). ``ctxkeep search`` asks it directly (an interactive path,
docs/design.md "Latency budget": no pydantic import); ``service.search.search`` (MCP
``ctx_search``, the app) asks it through ``SearchRequest``, the pydantic model that
reads untyped input and documents the fields, and wraps its outcome in the result
models (``QueryHits``, ``SearchHit``), which document the ``--json`` keys that
``hits_json`` prints (tests hold the two equal, key for key and in order).

Never imports Prefect, Polars, DuckDB or pydantic.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxkeep import schema
from ctxkeep.errors import UsageError
from ctxkeep.service.args import (
    DEFAULT_LIMIT,
    JSON_SCHEMA,
    MAX_BUDGET,
    MAX_LIMIT,
    in_order,
    in_range,
    names,
    project_dir,
    refuse_nul,
    when,
)
from ctxkeep.service.store import reading

#: the most queries one call runs (more are dropped, with a note)
MAX_QUERIES = 10

#: the filters, in ``SearchFilters``' order (a test holds them equal)
FILTER_KEYS = ("agent", "project", "session", "kind", "role", "tool", "since", "until", "status")
#: a hit's ``--json`` keys, in ``SearchHit``'s order (a test holds them equal)
HIT_KEYS = (
    "entry_id",
    "agent",
    "session_id",
    "session_short_id",
    "project_dir",
    "ts",
    "role",
    "kind",
    "tool_name",
    "title",
    "snippet",
    "token_estimate",
    "bytes",
    "score",
    "matched",
    "duplicates",
    "chunk",
)
#: a query's ``--json`` keys after ``"schema"``, in ``QueryHits``' order
QUERY_KEYS = ("query", "hits", "budget_tokens", "used_tokens", "omitted", "note", "suggestions")


@dataclass(frozen=True)
class SearchArgs:
    """A search asked by a front end whose options are typed already (the CLI):
    ``queries``, ``limit`` (1-``MAX_LIMIT``), ``budget`` (tokens or None), ``filters``
    (``FILTER_KEYS`` → value or None, read as ``SearchFilters`` reads them), ``raw``,
    and ``notes`` on how the arguments were read. Made by ``parse``."""

    queries: tuple[str, ...]
    limit: int = DEFAULT_LIMIT
    budget: int | None = None
    filters: dict[str, Any] = field(default_factory=dict)
    raw: bool = False
    notes: tuple[str, ...] = ()

    @classmethod
    def parse(
        cls,
        queries: list[str],
        *,
        limit: int | None = None,
        budget: int | None = None,
        raw: bool = False,
        filters: dict[str, Any] | None = None,
        cwd: str | os.PathLike | None = None,
    ) -> SearchArgs:
        """The arguments read by the rules ``SearchRequest.parse`` applies
        (``service.args``): NUL refused, limit and budget clamped above with a note and
        refused below 1, agents/kinds/roles/statuses checked, session and tool names
        split, ``project`` as "this directory or below" from ``cwd``, ``since`` not after
        ``until``, a query required. Raises UsageError naming the field. (A filter
        key outside ``FILTER_KEYS`` is a KeyError: typed callers pass only those.)"""
        given = {k: v for k, v in (filters or {}).items() if v is not None}
        if not set(given) <= set(FILTER_KEYS):
            raise KeyError(sorted(set(given) - set(FILTER_KEYS)))
        refuse_nul({"queries": queries, "filters": given})
        notes: list[str] = []
        problem: UsageError | None = None  # a range error: said after the fields' own checks
        try:
            lim = in_range("limit", DEFAULT_LIMIT if limit is None else limit, MAX_LIMIT, notes)
        except UsageError as e:
            lim, problem = DEFAULT_LIMIT, e
        try:
            bud = in_range("budget", budget, MAX_BUDGET, notes)
        except UsageError as e:
            bud, problem = None, problem or e
        f = {
            "agent": names("agent", given.get("agent"), schema.AGENTS),
            "project": project_dir(given.get("project"), cwd),
            "session": names("session", given.get("session"), lower=False),
            "kind": names("kind", given.get("kind"), schema.KINDS),
            "role": names("role", given.get("role"), schema.ROLES),
            "tool": names("tool", given.get("tool"), lower=False),
            "since": (since := when(given.get("since"), "since")),
            "until": (until := when(given.get("until"), "until")),
            "status": names("status", given.get("status"), schema.STATUSES),
        }
        in_order(since, until)
        if problem is not None:
            raise problem
        qs = tuple(str(q) for q in queries if str(q).strip())
        if not qs:
            raise UsageError("the query is empty", where="queries", hint="give words to search for")
        return cls(qs, lim if lim is not None else DEFAULT_LIMIT, bud, f, bool(raw), tuple(notes))


@dataclass
class SearchOutcome:
    """Every query's hits (``query.search.SearchResult``, in the order given), notes on
    how the arguments were read, and the budget of the whole answer."""

    results: list
    notes: list[str]
    budget_tokens: int | None


def text_tokens(h) -> int:
    """A hit's tokens as the CLI prints it (``render_hit``'s lines, indented, and the
    blank line between hits; ``transforms.tokens.heuristic_tokens``)."""
    from ctxkeep.transforms.tokens import heuristic_tokens

    return heuristic_tokens("\n".join("  " + line for _part, line in render_hit(h)) + "\n\n")


def json_tokens(h) -> int:
    """A hit's tokens as its JSON object (``hit_json``): what MCP ``ctx_search``'s
    structuredContent holds per hit, and what Claude Code and VS Code give the model
    when a tool result has structuredContent (``JSON.stringify`` of it, its text content
    dropped: anthropics/claude-code issues 55677, 79944)."""
    from ctxkeep.transforms.tokens import heuristic_tokens

    return heuristic_tokens(json.dumps(hit_json(h), ensure_ascii=False))


#: what a budget counts, per front end (``run``'s ``counts``): a note says it
COUNTS = {
    "text": (text_tokens, "counted as the hits' printed text, ~4 characters a token"),
    "json": (json_tokens, "counted as the hits' JSON, what an MCP client gives the model"),
}


def run(
    home: Path,
    queries,
    filters: dict[str, Any],
    limit: int,
    budget: int | None,
    raw: bool,
    notes,
    counts: str = "text",
    named: str = "a budget",
    more: str = "raise the budget",
) -> SearchOutcome:
    """Ranked hits for each of ``queries`` (at most ``MAX_QUERIES``), filtered by
    ``filters`` (``FILTER_KEYS``), within ``budget`` tokens shared by the queries in
    rank order (``query.search.render.share_budget``), a hit charged as ``counts``
    (``COUNTS``: ``"text"``, the CLI's printed lines; ``"json"``, MCP's hit objects);
    ``named``, ``more``: how notes name the budget and how to get more. Raises ``StoreError``
    for a missing or damaged store, ``SearchSyntaxError`` for a raw query FTS5 cannot
    parse, ``SessionNotFound``/``AmbiguousSession`` for a session filter, ``UsageError``
    for a bad filter value."""
    from ctxkeep.query.search import Filters
    from ctxkeep.query.search import search as ask

    notes = list(notes)
    qs = [q for q in queries if q.strip()]
    if len(qs) > MAX_QUERIES:
        notes.append(f"only the first {MAX_QUERIES} of {len(qs)} queries were run")
        qs = qs[:MAX_QUERIES]
    f = Filters(**{k: filters.get(k) for k in FILTER_KEYS})
    from ctxkeep.query.search.render import share_budget

    with reading(home, mmap=True) as conn:
        results = [ask(conn, q, filters=f, limit=limit, raw=raw) for q in qs]
    cost, what = COUNTS[counts]
    share_budget(results, budget, cost, what, named, more)
    for r in results:
        _name_partial_hits(r)
    # few hits or none (a page the budget did not cut, not full) or a "did you mean": is
    # an ingest filling the store? The lock probe only here, so a full page pays nothing.
    # "no matches" during a first ingest said nothing (newuser15 F15); once some rows were
    # in, a few hits said nothing either, and "did you mean" corrected the right word
    # "directory" to "directly", rarer in the part stored so far (newuser19 F18): the
    # note then, and no suggestion (the vocabulary is incomplete until the ingest ends)
    if any(len(r.hits) + r.omitted < limit or r.suggestions for r in results):
        from ctxkeep.sinks.lock import held_by_another

        if held_by_another(home):
            notes.append("an ingest is running; results may be incomplete")
            for r in results:
                r.suggestions = []
    return SearchOutcome(results, notes, budget)


def _name_partial_hits(r) -> None:
    """Add to ``r.note`` (a ``query.search.SearchResult``) where the hits holding only
    some of the terms start when hits holding every term come first (``hits 4-10 hold
    only some of the terms``): the query's own note says so only when no hit holds
    them all, and "No files found" stood among `no such file`'s hits unmarked
    (newuser20 F2; ``matched`` tells them apart in --json)."""
    from ctxkeep.query.search import ALL_TERMS_LISTS

    full = [any(m in h.matched for m in ALL_TERMS_LISTS) for h in r.hits]
    if not any(full) or all(full):
        return
    at = [i + 1 for i, x in enumerate(full) if not x]  # 1-based, as the hits are listed
    if at == list(range(at[0], at[-1] + 1)) and len(at) > 1:
        what = f"hits {at[0]}-{at[-1]} hold"
    else:
        what = (
            ("hit " if len(at) == 1 else "hits ")
            + ", ".join(map(str, at))
            + (" holds" if len(at) == 1 else " hold")
        )
    r.note = "; ".join(n for n in (r.note, f"{what} only some of the terms") if n)


def search_args(home: Path, args: SearchArgs) -> SearchOutcome:
    """``run`` of a ``SearchArgs``."""
    return run(home, args.queries, args.filters, args.limit, args.budget, args.raw, args.notes)


def hit_json(h) -> dict:
    """One hit's ``--json`` object (``HIT_KEYS``)."""
    d = {k: getattr(h, k) for k in HIT_KEYS}
    d["matched"] = list(d["matched"])
    return d


def hits_json(r) -> dict:
    """``ctxkeep search --json``: one query's hits (``query.search.SearchResult``) as
    ``QueryHits`` prints them: ``"schema"``, then ``QUERY_KEYS``."""
    return {
        "schema": JSON_SCHEMA,
        "query": r.query,
        "hits": [hit_json(h) for h in r.hits],
        "budget_tokens": r.budget_tokens,
        "used_tokens": r.used_tokens,
        "omitted": r.omitted,
        "note": r.note or None,
        "suggestions": list(r.suggestions),
    }


def did_you_mean(suggestions) -> str:
    """``suggestions`` (``query.search``'s "did you mean" queries) as one line (``did
    you mean "a" or "b"?``; "" for none), the one rendering every front end shows."""
    if not suggestions:
        return ""
    # a quoted phrase keeps its own quotes, not two pairs (`""connection refused""`:
    # newuser16 F16)
    return "did you mean " + " or ".join(q if _quoted(q) else f'"{q}"' for q in suggestions) + "?"


def _quoted(q: str) -> bool:
    """Whether ``q`` is one double-quoted phrase (``"store line"``)."""
    return len(q) > 1 and q[0] == q[-1] == '"' and '"' not in q[1:-1]


def render_hit(h) -> list[tuple[str, str]]:
    """A hit (anything with ``HIT_KEYS``' attributes) as text, the one rendering every
    front end shows: ``(part, line)`` pairs, part ``"head"`` (id, agent, session,
    time, kind, size), ``"title"`` and ``"snippet"`` (left out when the title says it
    all)."""
    when_ = (h.ts or "")[:16].replace("T", " ")
    head = (
        f"{h.entry_id}  {h.agent}  {h.session_short_id or h.session_id}  {when_}  {h.kind}"
        + (f" {h.tool_name}" if h.tool_name else "")
        + f"  ~{h.token_estimate:,} tok"
        + (f"  (+{h.duplicates:,} like it)" if h.duplicates else "")
    )
    lines = [("head", head)]
    if h.title:
        lines.append(("title", h.title))
    rest = _after_title(h.snippet, h.title, h.tool_name)
    if rest:
        lines.append(("snippet", rest))
    return lines


def _after_title(snippet: str, title: str, tool: str | None = None) -> str:
    """What ``snippet`` adds to ``title``: the snippet, or when it starts inside the
    title's words (whitespace collapsed, as ``query.search.render.snippet`` collapses
    them; at the text's start, or after a leading ``…`` at a point of the title's line;
    a tool's title leads with the ``tool`` name, its text does not) and goes on past
    them, only what follows them, led by ``…`` (from the start of the word a cut title
    ends in; "" when nothing follows: a short text, its title says it all). The title
    is the text's first line, so a snippet near the text's start repeated it."""
    head = " ".join(title.rstrip("…").split())
    heads = [head] + ([head[len(tool) + 1 :]] if tool and head.startswith(tool + " ") else [])
    inner = snippet.startswith("…")
    body = snippet[1:] if inner else snippet
    for h in heads:
        if not h:
            continue
        pos = h.find(body[:_OVERLAP_PROBE]) if inner and body else 0
        if pos < 0 or not body.startswith(h[pos:]):
            continue
        cut = len(h) - pos
        if title.endswith("…"):  # cut inside a word: from its start
            cut -= len(h) - len(h.rstrip(_WORD_CHARS))
            cut = cut if cut > 0 else len(h) - pos
        rest = body[cut:].strip()
        return "" if not rest.rstrip("…") else "…" + rest.lstrip("…")
    return snippet


#: characters of a snippet's start looked for in its title (``_after_title``)
_OVERLAP_PROBE = 16
#: the characters of a word, for a title cut inside one (``_after_title``)
_WORD_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

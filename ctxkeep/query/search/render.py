"""Rendering of search hits (tier 1): ``Hit`` and ``SearchResult``, snippets,
titles, the token cost of a hit and the token budget. No SQL: titles come in as a
mapping (``retrieve.titles``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from ctxkeep.query.search.retrieve import Candidate
from ctxkeep.schema import EntryRef
from ctxkeep.transforms.terminal_codes import strip_formatting_codes
from ctxkeep.transforms.tokens import heuristic_tokens

SNIPPET_MAX_CHARS = 300
TITLE_MAX_CHARS = 120


@dataclass
class Hit(EntryRef):
    """One search hit (tier 1): enough to decide whether to fetch the entry.

    ``title`` is the entry's first line (≤ 120 chars), ``snippet`` ≤ 300 characters
    around the match, ``token_estimate`` the tokens of the full text (what a fetch
    costs), ``score`` the fused RRF score, ``matched`` the lists that found it,
    ``duplicates`` other entries with the same text (filters aside) plus near-duplicate
    hits folded into this one (``rank.fold``), ``chunk`` the matching chunk's
    0-based position within the text, ``session_short_id`` the shortest prefix of
    ``session_id`` that names it uniquely in the store
    (``sinks.sqlite.lookup.short_session_ids``; what ``--session`` takes back).
    """

    title: str
    token_estimate: int
    bytes: int
    snippet: str
    score: float
    matched: list[str] = field(default_factory=list)
    duplicates: int = 0
    chunk: int = 0
    session_short_id: str = ""

    def as_dict(self) -> dict:
        """The hit's fields as a dict (what ``dataclasses.asdict`` gives, without its
        deep copies: every field is a scalar but ``matched``, copied)."""
        d = {f.name: getattr(self, f.name) for f in _HIT_FIELDS}
        d["matched"] = list(self.matched)
        return d


_HIT_FIELDS = fields(Hit)


@dataclass
class SearchResult:
    """Hits in rank order plus what the budget left out.

    ``budget_tokens`` None means no budget; ``used_tokens`` is the estimated size of
    the returned tier-1 entries; ``omitted`` hits were ranked but cut by the budget;
    ``note`` says so in one line ('' when nothing was cut); ``suggestions`` are the
    query with its words the store does not hold replaced by near ones, best first
    ("did you mean"; ``suggest.suggestions``; [] when the search found enough).
    """

    query: str
    hits: list[Hit]
    budget_tokens: int | None = None
    used_tokens: int = 0
    omitted: int = 0
    note: str = ""
    suggestions: list[str] = field(default_factory=list)

    # a result reads as its list of hits (``for h in search(...)``, ``[0]``, ``len``),
    # as ``search`` returned before budgets existed
    def __iter__(self):
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i):
        return self.hits[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, list):
            return self.hits == other
        if isinstance(other, SearchResult):
            return self.as_dict() == other.as_dict()
        return NotImplemented

    # unhashable (mutable, like a list): @dataclass sets __hash__ to None (eq, not frozen)

    def as_dict(self) -> dict:
        return {
            "query": self.query,
            "hits": [h.as_dict() for h in self.hits],
            "budget_tokens": self.budget_tokens,
            "used_tokens": self.used_tokens,
            "omitted": self.omitted,
            "note": self.note,
            "suggestions": list(self.suggestions),
        }


def snippet(text: str, needles: list[str], width: int = SNIPPET_MAX_CHARS) -> str:
    """≤ ``width`` characters of ``text`` around the first needle found
    (case-insensitive; whitespace collapsed; ``…`` marks cut ends), without a
    terminal's formatting sequences (``transforms.terminal_codes``: a command's colours
    and cursor moves, dropped before the cut so none is cut in half; newuser19 F3)."""
    text = strip_formatting_codes(text)
    low = text.lower()
    pos = -1
    for n in needles:
        n = n.lower().strip("*")
        if not n:
            continue
        p = low.find(n)
        if p < 0 and len(n) > 5:  # stemmed match (porter): try the stem
            p = low.find(n[: max(4, len(n) - 3)])
        if p >= 0 and (pos < 0 or p < pos):
            pos = p
    if pos < 0:
        pos = 0
    start = max(0, pos - width // 3)
    piece = " ".join(text[start : start + width * 2].split())
    lead = "…" if start > 0 else ""
    body_max = width - len(lead) - 1
    tail = "…" if len(piece) > body_max or start + width * 2 < len(text) else ""
    return lead + piece[:body_max] + tail


def title_of(title: str | None) -> str:
    """A hit's title: the content's first-chunk title, cut to ``TITLE_MAX_CHARS``
    characters (``…`` marks the cut), without a terminal's formatting sequences."""
    t = strip_formatting_codes(title or "")
    return t[: TITLE_MAX_CHARS - 1] + "…" if len(t) > TITLE_MAX_CHARS else t


def to_hit(
    c: Candidate, *, title: str | None, ts: list[str], score: float, matched: list[str], folded: int
) -> Hit:
    """The hit of candidate ``c`` (shown as its newest passing entry): ``title`` is the
    content's first-chunk title (``retrieve.titles``: without a tool name) led by the
    shown entry's tool name, if any (``title_of``), the snippet is around the terms ``ts``
    (the whole query first), ``score`` is rounded to 6 decimals, ``duplicates`` counts
    the other entries holding the text plus the ``folded`` near-duplicate hits."""
    shown = c.entries[0]
    if title and shown.tool_name:  # a tool's text: titled by the tool, as the word index weighs it
        title = f"{shown.tool_name} {title}"
    return Hit(
        **vars(shown),
        title=title_of(title),
        token_estimate=c.token_estimate,
        bytes=c.bytes,
        snippet=snippet(c.text, [" ".join(ts)] + ts),
        score=round(score, 6),
        matched=matched,
        duplicates=max(c.total, len(c.entries)) - 1 + folded,
        chunk=c.seq,
    )


# ---------------------------------------------------------------- budget


def hit_tokens(h: Hit) -> int:
    """Estimated tokens of a hit's tier-1 rendering (its JSON form)."""
    return heuristic_tokens(json.dumps(h.as_dict(), ensure_ascii=False))


def apply_budget(result: SearchResult, budget_tokens: int | None) -> SearchResult:
    """Keep hits in rank order while their tier-1 renderings fit in ``budget_tokens``
    (None: no budget). The first hit that does not fit ends the list; ``omitted`` and
    ``note`` report what was cut and how to get it."""
    result.budget_tokens = budget_tokens
    used, kept = 0, []
    for h in result.hits:
        cost = hit_tokens(h)
        if budget_tokens is not None and used + cost > budget_tokens:
            break
        used += cost
        kept.append(h)
    result.omitted = len(result.hits) - len(kept)
    result.used_tokens = used
    if result.omitted and not kept:
        result.note = (
            f"a budget of {budget_tokens} tokens is less than the first hit needs "
            f"(~{hit_tokens(result.hits[0])} tokens for its id, title and snippet); "
            f"raise the budget"
        )
    elif result.omitted:
        result.note = (
            f"budget of {budget_tokens} tokens spent: {result.omitted} more hit(s) "
            f"not shown; raise the budget, narrow the query or add filters"
        )
    result.hits = kept
    return result


def share_budget(
    results: list[SearchResult],
    budget_tokens: int | None,
    cost: Callable[[Hit], int],
    counts: str,
    named: str = "a budget",
    more: str = "raise the budget",
) -> None:
    """Cut the hits of several queries' ``results`` (in place) to one budget they share,
    taken in rank order across the queries: every query's best hit, then every query's
    second, … (a query's first hit that does not fit ends its list). ``cost(hit)``: the
    hit's tokens as the front end returns it (the CLI's printed lines; MCP's JSON);
    ``counts`` says what in the notes (``counted as …``); ``named``: how the notes name
    the budget (``the default budget``), ``more``: how to get more. None: no budget,
    nothing cut (``used_tokens`` counted all the same). Before
    (newuser24 F5) the budget was split equally and a hit charged its JSON form in the
    CLI, 2.5x what it printed: ``--budget 150`` returned nothing, and MCP ``budget: 300``
    with 2 queries 0 hits."""
    for r in results:
        r.budget_tokens = budget_tokens
    if budget_tokens is None:  # nothing cut; ``used_tokens`` counted as the front end's
        for r in results:
            r.used_tokens = sum(cost(h) for h in r.hits)
        return
    n = len(results)
    kept, used, ended = [0] * n, [0] * n, [False] * n
    total = 0
    for i in range(max((len(r.hits) for r in results), default=0)):
        for q, r in enumerate(results):
            if ended[q] or i >= len(r.hits):
                continue
            c = cost(r.hits[i])
            if total + c > budget_tokens:
                ended[q] = True
                continue
            total += c
            used[q] += c
            kept[q] += 1
    shared = f" shared by {n} queries" if n > 1 else ""
    for q, r in enumerate(results):
        r.omitted = len(r.hits) - kept[q]
        r.used_tokens = used[q]
        note = ""
        if r.omitted and not kept[q]:
            note = (
                f"{named} of {budget_tokens:,} tokens{shared} is less than the first hit "
                f"needs (~{cost(r.hits[0]):,} tokens, {counts}); {more}"
            )
        elif r.omitted:
            note = (
                f"{named} of {budget_tokens:,} tokens{shared} spent ({counts}): {r.omitted} more "
                f"hit(s) not shown; {more}, narrow the query or add filters"
            )
        r.hits = r.hits[: kept[q]]
        r.note = "; ".join(x for x in (r.note, note) if x)

"""Search the store (tier 1): ``search(home, SearchRequest) -> SearchResult``.

One request for every front end: MCP ``ctx_search`` asks one or more queries
(``AgentSearchRequest``: the same fields and defaults, and the lenient forms models
send), the app one; ``ctxkeep search`` asks the same question without pydantic
(``service.search_core``: ``SearchArgs`` read by the same rules, ``service.args``),
which ``search`` runs too. Ranking, filters and the budget: ``query.search``. The one
rendering of a hit as text: ``search_core.render_hit`` (``SearchHit.render``).

Never imports Prefect, Polars or DuckDB (the interactive path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, PrivateAttr, model_validator

from ctxkeep import schema
from ctxkeep.errors import UsageError
from ctxkeep.service.model import (
    MAX_BUDGET,
    AgentNames,
    Budget,
    EntryHead,
    Limit,
    ProjectDir,
    Request,
    Result,
    Texts,
    When,
    names_check,
    window_in_order,
)
from ctxkeep.service.search_core import DEFAULT_LIMIT, did_you_mean, render_hit, run

KindNames = Annotated[list[str] | None, names_check(lambda: schema.KINDS)]
RoleNames = Annotated[list[str] | None, names_check(lambda: schema.ROLES)]
StatusNames = Annotated[list[str] | None, names_check(lambda: schema.STATUSES)]
#: session ids and tool names: as written (tools match case-insensitively)
Ids = Annotated[list[str] | None, names_check(lower=False)]


def _object(v: Any) -> Any:
    """A JSON object given as a string (what models send) read as one."""
    if isinstance(v, str):
        try:
            return json.loads(v) if v.strip() else {}
        except json.JSONDecodeError:
            raise UsageError("filters is not a JSON object", where="filters") from None
    return v


class SearchFilters(Request):
    """Combinable filters (AND; several values of one filter: OR)."""

    agent: AgentNames | None = Field(None, description="claude-code, codex, note, … (a,b for several)")
    project: ProjectDir = None
    session: Ids | None = Field(
        None, description="a session id or its first characters, as hits show it (sub-agents included)"
    )
    kind: KindNames | None = Field(
        None, description="message, tool_call, tool_result, thinking, summary, meta"
    )
    role: RoleNames | None = Field(None, description="user, assistant, system, tool")
    tool: Ids | None = Field(None, description="tool name, e.g. Bash, shell, apply_patch")
    since: When | None = Field(
        None, description="from this UTC time on, inclusive: 2025-06-01, 2025-06-01T12:00Z, 7d"
    )
    until: When | None = Field(None, description="up to this UTC time, inclusive (a date: that whole day)")
    status: StatusNames | None = Field(None, description="active, archived, consumed, rewound")

    _window = window_in_order


class SearchRequest(Request):
    """What to search for and how many hits to give back."""

    queries: Texts = Field(
        description='one or more queries: words, "exact phrases", ids like bd-q3fy, paths, error text; CJK works',
    )
    limit: Limit = DEFAULT_LIMIT
    budget: Budget | None = Field(
        None,
        description="token budget for the listed hits, shared by the queries in rank order (each query's "
        "best hit first); over MCP a hit counts as its JSON (~220 tokens) and the default is 4,000",
    )
    filters: Annotated[SearchFilters, BeforeValidator(_object)] = Field(
        default_factory=SearchFilters, description="combinable filters"
    )
    raw: bool = Field(False, description="pass FTS5 query syntax through (word index only)")
    #: what a hit costs of the budget (``search_core.COUNTS``): the printed text (the
    #: CLI, the app); ``AgentSearchRequest``: its JSON
    counts: ClassVar[str] = "text"
    #: the budget is ctx_search's default (``AgentSearchRequest``), not the caller's
    _default_budget: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _some_query(self):
        if not any(q.strip() for q in self.queries):
            raise UsageError("the query is empty", where="queries", hint="give words to search for")
        return self


#: ``ctx_search``'s budget when the call gives none (tokens of the hits' JSON,
#: ``search_core.json_tokens``, ~220 a hit: ~18 hits): without one, ``limit: 200``
#: answered 97,079 characters of text and 170,756 of structuredContent, and Claude Code
#: warns at 10,000 tokens of MCP output (newuser24 F6)
MCP_DEFAULT_BUDGET = 4_000


class AgentSearchRequest(SearchRequest):
    """``ctx_search``: ``SearchRequest`` read leniently: ``query`` as ``queries``,
    filters given beside ``filters`` (a common slip) as filters, with a note; without a
    ``budget``, ``MCP_DEFAULT_BUDGET`` (``budget_default`` true: the notes say it and
    how to get more)."""

    budget_default: ClassVar[int] = MCP_DEFAULT_BUDGET
    counts: ClassVar[str] = "json"

    @classmethod
    def parse(cls, data: dict | None = None, *, cwd=None, **kw: Any):
        given = {**(data or {}), **kw}
        req = super().parse(data, cwd=cwd, **kw)
        if given.get("budget") in (None, ""):
            req.budget = cls.budget_default
            req._default_budget = True
        return req

    @classmethod
    def prepare(cls, values: dict) -> list[str]:
        notes = []
        if "queries" not in values and "query" in values:
            values["queries"] = values.pop("query")
        if values.get("queries") in (None, "", [], ()):
            raise UsageError(
                "queries is required: one or more search strings",
                where="queries",
                hint='pass {"queries": ["what to find"]}',
            )
        top = {k: values.pop(k) for k in list(values) if k in SearchFilters.model_fields}
        top = {k: v for k, v in top.items() if v not in (None, "")}
        if top:
            f = _object(values.get("filters")) or {}
            if not isinstance(f, dict):
                raise UsageError("filters must be an object", where="filters")
            clash = sorted(k for k in top if f.get(k) not in (None, "") and f[k] != top[k])
            if clash:
                raise UsageError(
                    f"filter {', '.join(clash)} given twice with different values",
                    where="filters",
                    hint='put filters inside "filters" only',
                )
            values["filters"] = {**f, **top}
            notes.append(f'read {", ".join(sorted(top))} as filters (they belong inside "filters")')
        return notes


class SearchHit(EntryHead):
    """One hit (tier 1): enough to decide whether to fetch the entry."""

    title: str = Field(description="the entry's first line (≤ 120 characters)")
    snippet: str = Field(description="≤ 300 characters around the match")
    token_estimate: int = Field(description="estimated tokens of the whole text (what a fetch costs)")
    bytes: int = Field(description="UTF-8 bytes of the whole text")
    score: float = Field(description="the fused rank score")
    matched: list[str] = Field(description="the candidate lists that found it")
    duplicates: int = Field(description="other entries with the same or a near-identical text")
    chunk: int = Field(description="0-based position of the matching chunk within the text")

    def render(self) -> list[tuple[str, str]]:
        """The hit as text, the one rendering every front end shows
        (``search_core.render_hit``): ``(part, line)`` pairs, part ``"head"`` (id,
        agent, session, time, kind, size), ``"title"`` and ``"snippet"`` (left out when
        the title says it all)."""
        return render_hit(self)


class QueryHits(Result):
    """The hits of one query, best first, and what the budget left out (MCP
    `ctx_search` returns one per query in `results`)."""

    query: str = Field(description="the query as run")
    hits: list[SearchHit] = Field(description="ranked hits, best first")
    budget_tokens: int | None = Field(description="the token budget (null: none)")
    used_tokens: int = Field(description="estimated tokens of the listed hits")
    omitted: int = Field(description="hits left out by the budget")
    note: str | None = Field(description="why hits were cut or only some terms matched (null: none)")
    suggestions: list[str] = Field(
        default_factory=list,
        description="did you mean: the query with the words the store does not hold replaced by near "
        "words of its vocabulary, best first (given when no entry holds all the terms; [] otherwise)",
    )

    def did_you_mean(self) -> str:
        """The suggestions as one line (``did you mean "a" or "b"?``; "" for none), the
        one rendering every front end shows."""
        return did_you_mean(self.suggestions)


class SearchResult(Result):
    """Every query's hits (MCP ``ctx_search``'s structuredContent)."""

    results: list[QueryHits] = Field(description="per query, in the order given")
    notes: list[str] = Field(description="how the arguments were read (clamped, dropped queries)")
    budget_tokens: int | None = Field(description="the budget of the whole answer (null: none)")


def search(home: Path, req: SearchRequest) -> SearchResult:
    """Ranked hits for each of ``req.queries`` (at most ``MAX_QUERIES``), within the
    budget shared by the queries in rank order, each hit charged as ``req.counts``
    (``search_core.COUNTS``: MCP's, its JSON, what an MCP client gives the model; the
    CLI's and the app's, its printed text). Raises ``StoreError`` for a missing or damaged store,
    ``SearchSyntaxError`` for a raw query FTS5 cannot parse, ``SessionNotFound``/
    ``AmbiguousSession`` for a session filter, ``UsageError`` for a bad filter value."""
    f = req.filters
    out = run(
        home,
        req.queries,
        {k: getattr(f, k) for k in SearchFilters.model_fields},
        req.limit,
        req.budget,
        req.raw,
        req.notes,
        counts=req.counts,
        named="ctx_search's default budget" if req._default_budget else "a budget",
        more=f'pass "budget" (up to {MAX_BUDGET:,}) for more' if req._default_budget else "raise the budget",
    )
    return SearchResult(
        results=[
            QueryHits(
                query=r.query,
                hits=[SearchHit.model_construct(**h.as_dict()) for h in r.hits],
                budget_tokens=r.budget_tokens,
                used_tokens=r.used_tokens,
                omitted=r.omitted,
                note=r.note or None,
                suggestions=r.suggestions,
            )
            for r in out.results
        ],
        notes=out.notes,
        budget_tokens=out.budget_tokens,
    )

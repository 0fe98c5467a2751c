"""The stored sessions: ``sessions(home, SessionsRequest) -> SessionsResult``
(``ctxkeep sessions``, the app's session index). A list people read: one page of
``limit`` sessions (default ``model.DEFAULT_PAGE``; sub-agents count, listed under
their parent) from ``offset`` on, or ``all``; the result says how many match and where the next page starts. Rows,
sub-agents, cost and the page: ``query.sessions.session_page`` (SQL in
``sinks.session_list``). Imports DuckDB only when ``analytics.duckdb`` exists (for
the cost column)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ctxkeep.service.model import (
    DEFAULT_PAGE,
    AgentNames,
    Item,
    PageLimit,
    ProjectDir,
    Request,
    Result,
    When,
    window_in_order,
)


class SessionsRequest(Request):
    """Which sessions (all filters combine)."""

    agent: AgentNames | None = Field(None, description="only these agents")
    project: ProjectDir = None
    since: When | None = Field(None, description="sessions active from this UTC time on, inclusive")
    until: When | None = Field(None, description="sessions started up to this UTC time, inclusive")
    limit: PageLimit = DEFAULT_PAGE
    offset: int = Field(
        0, ge=0, description="skip this many top-level sessions (the next page's next_offset)"
    )
    all: bool = Field(False, description="every matching session (limit and offset are ignored)")

    _window = window_in_order


class SessionRow(Item):
    agent: str
    session_id: str
    short_id: str = Field(description="the shortest prefix naming the session in the store")
    parent_session_id: str | None = Field(description="a sub-agent's parent session")
    project_dir: str | None
    started: str | None = Field(description="ISO-8601 UTC")
    ended: str | None = Field(description="ISO-8601 UTC")
    messages: int
    tool_calls: int
    tokens: int | None = Field(
        description="usage the agent logged: input + output + cache read + cache write; "
        "null: tokens not recorded by the agent (Crush, Go opencode, Codebuff log only the session's cost)"
    )
    token_estimate: int = Field(description="estimated tokens of the stored texts")
    cost_usd: float | None = Field(description="null without the analytics store or a price")
    cost_logged: int = Field(
        description="responses whose cost is the agent's own logged figure, not list prices (Crush, OpenCode)"
    )
    title: str | None = Field(description="the session's title or first prompt, one line (null: none)")
    depth: int = Field(description="0, or 1 for a sub-agent listed under its parent")


class SessionsResult(Result):
    """One page of sessions newest first, each sub-agent right under its parent."""

    source: str = Field(description='"duckdb" (with cost) or "sqlite"')
    total: int = Field(description="sessions that match, sub-agents included")
    empty: int = Field(
        0,
        description="empty sessions that match (no time, no message), left out of total and "
        "sessions; --empty lists them (0 then)",
    )
    offset: int = Field(description="sessions of the list before this page")
    limit: int | None = Field(description="the page's size (null: all)")
    next_offset: int | None = Field(
        description="the offset of the next page (give it as --offset, the same --limit); null: none left"
    )
    sessions: list[SessionRow] = Field(description="newest first, sub-agents after their parent")


def sessions(home: Path, req: SessionsRequest) -> SessionsResult:
    """The sessions of the store at ``home`` that match ``req`` (``sessions_core.
    session_list``, which ``ctxkeep sessions`` asks without pydantic). Raises
    StoreError."""
    from ctxkeep.service.sessions_core import SessionsArgs, session_list

    args = SessionsArgs(
        tuple(req.agent) if req.agent else None,
        req.project,
        req.since,
        req.until,
        req.limit,
        req.offset,
        req.all,
    )
    got = session_list(home, args)
    return SessionsResult(
        source=got.source,
        total=got.total,
        empty=got.empty,
        offset=got.offset,
        limit=got.limit,
        next_offset=got.next_offset,
        sessions=[r.as_dict() for r in got.rows],
    )

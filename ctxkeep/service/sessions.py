"""The stored sessions: ``sessions(home, SessionsRequest) -> SessionsResult``
(``ctxkeep sessions``). Rows, sub-agents and cost: ``query.sessions.list_sessions``.
Imports DuckDB only when ``analytics.duckdb`` exists (for the cost column)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ctxkeep.service.model import AgentNames, Item, ProjectDir, Request, Result, When, window_in_order
from ctxkeep.service.store import reading


class SessionsRequest(Request):
    """Which sessions (all filters combine)."""

    agent: AgentNames | None = Field(None, description="only these agents")
    project: ProjectDir = None
    since: When | None = Field(None, description="sessions active from this UTC time on, inclusive")
    until: When | None = Field(None, description="sessions started up to this UTC time, inclusive")

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
    tokens: int = Field(description="usage the agent logged: input + output + cache read + cache write")
    token_estimate: int = Field(description="estimated tokens of the stored texts")
    cost_usd: float | None = Field(description="null without the analytics store or a price")
    title: str = Field(description="the session's title or first prompt, one line")
    depth: int = Field(description="0, or 1 for a sub-agent listed under its parent")


class SessionsResult(Result):
    """Sessions newest first, each sub-agent right under its parent."""

    source: str = Field(description='"duckdb" (with cost) or "sqlite"')
    sessions: list[SessionRow] = Field(description="newest first, sub-agents after their parent")


def sessions(home: Path, req: SessionsRequest) -> SessionsResult:
    """The sessions of the store at ``home`` that match ``req``. Raises StoreError."""
    from ctxkeep.query.search.parse import parse_when
    from ctxkeep.query.sessions import list_sessions

    with reading(home) as conn:
        rows, source = list_sessions(
            conn,
            Path(home),
            agents=req.agent,
            project=req.project,
            since=parse_when(req.since),
            until=parse_when(req.until, upper=True),
        )
    return SessionsResult(source=source, sessions=[r.as_dict() for r in rows])

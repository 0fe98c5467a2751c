"""The session list without pydantic: ``SessionsArgs.parse`` reads ``ctxkeep sessions``'
typed options by the rules ``service.sessions.SessionsRequest`` applies (``service.args``:
NUL refused, agents checked, ``project`` as "this directory or below", ``since``/``until``
by the one time parser and in order, a limit of at least 1, an offset of at least 0),
and ``session_list(home, args)`` asks for the page (``query.sessions.session_page``;
SQL in ``sinks.session_list``). ``ctxkeep sessions`` asks it directly (an interactive
path, docs/design.md "Latency budget": pydantic's import and first model builds were
~0.1 CPU s of a 0.5 s budget at 10 GB); ``service.sessions.sessions`` (MCP, the app)
wraps the same page in the models, which document the keys (tests hold the ``--json``
bytes and the errors equal). Read-only; never imports pydantic, Polars or Prefect."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxkeep.service.args import (
    DEFAULT_PAGE,
    JSON_SCHEMA,
    in_order,
    names,
    out_of_range,
    project_dir,
    refuse_nul,
    when,
)
from ctxkeep.service.store import reading

#: the keys of ``sessions --json`` (``SessionsResult``, after ``schema``) and of each
#: session (``SessionRow``), in the models' order (a test holds them equal)
RESULT_KEYS = ("source", "total", "empty", "offset", "limit", "next_offset", "sessions")
ROW_KEYS = (
    "agent",
    "session_id",
    "short_id",
    "parent_session_id",
    "project_dir",
    "started",
    "ended",
    "messages",
    "tool_calls",
    "tokens",
    "token_estimate",
    "cost_usd",
    "cost_logged",
    "title",
    "depth",
)


@dataclass(frozen=True)
class SessionsArgs:
    """Which sessions: ``agent`` (None: all), ``project`` (normalized), ``since``/``until``
    (as written, checked), ``limit`` rows from ``offset`` on, or ``all``. Made by
    ``parse``."""

    agent: tuple[str, ...] | None = None
    project: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int = DEFAULT_PAGE
    offset: int = 0
    all: bool = False
    empty: bool = True  # list the empty sessions (no time, no message), or count them apart

    @classmethod
    def parse(
        cls,
        *,
        agent: list[str] | None = None,
        project: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        all: bool | None = None,
        empty: bool = True,
        cwd: str | os.PathLike | None = None,
    ) -> SessionsArgs:
        """The arguments read as ``SessionsRequest.parse`` reads them, each field's
        error in the model's field order, the window last. Raises UsageError naming
        the field."""
        from ctxkeep import schema

        given = {"agent": agent, "project": project, "since": since, "until": until}
        refuse_nul({k: v for k, v in given.items() if v is not None})
        agents = names("agent", agent, schema.AGENTS)
        proj = project_dir(project, cwd or os.getcwd())
        s, u = when(since, "since"), when(until, "until")
        lim = DEFAULT_PAGE if limit is None else limit
        if lim < 1:
            raise out_of_range("limit", lim, 1, None)
        off = 0 if offset is None else offset
        if off < 0:
            raise out_of_range("offset", off, 0, None)
        in_order(s, u)
        return cls(tuple(agents) if agents else None, proj, s, u, lim, off, bool(all), bool(empty))


@dataclass
class SessionList:
    """One page: ``rows`` (``query.sessions.SessionRow``, list order), ``total`` that
    match, ``offset``, ``limit`` (None: all), ``next_offset`` (None: none left),
    ``source`` (``duckdb`` with cost, or ``sqlite``)."""

    source: str
    total: int
    offset: int
    limit: int | None
    next_offset: int | None
    rows: list = field(default_factory=list)
    empty: int = 0  # the empty sessions that match, left out (``SessionsArgs.empty`` False)
    #: an ingest holds the store and some listed session has tokens but no cost yet
    ingest_running: bool = False
    #: why the costs are missing (``source`` sqlite): DuckDB could not be brought current
    #: (a read-only store, a broken prices.toml, the store busy); None otherwise
    lag: str | None = None

    def as_json(self) -> dict[str, Any]:
        """``sessions --json``: ``SessionsResult.as_json()``'s object (``schema`` first,
        the models' keys in their order)."""
        return {
            "schema": JSON_SCHEMA,
            "source": self.source,
            "total": self.total,
            "empty": self.empty,
            "offset": self.offset,
            "limit": self.limit,
            "next_offset": self.next_offset,
            "sessions": [r.as_dict() for r in self.rows],
        }


def session_list(home: Path, args: SessionsArgs) -> SessionList:
    """The sessions of the store at ``home`` that ``args`` asks for. Raises StoreError."""
    from ctxkeep.query.sessions import session_page
    from ctxkeep.timeutil import format_utc, when_bound

    def bound(value: str | None, upper: bool = False) -> str | None:
        # stored-ts text, as ``query.search.parse.parse_when`` (importing that package
        # loads the whole search stack: ~0.03 CPU s of a 0.5 s budget)
        t = when_bound(value, upper=upper)
        return None if t is None else format_utc(t)

    limit, offset = (None, 0) if args.all else (args.limit, args.offset)
    with reading(home) as conn:
        page = session_page(
            conn,
            Path(home),
            agents=list(args.agent) if args.agent else None,
            project=args.project,
            since=bound(args.since),
            until=bound(args.until, upper=True),
            limit=limit,
            offset=offset,
            empty=args.empty,
        )
    end = offset + len(page.rows)
    running = False
    if any(r.tokens and r.cost_usd is None for r in page.rows):
        from ctxkeep.sinks.lock import held_by_another

        running = held_by_another(home)  # costs come when the ingest ends (newuser16 F16)
    return SessionList(
        source=page.source,
        total=page.total,
        offset=offset,
        limit=limit,
        next_offset=end if end < page.total else None,
        rows=page.rows,
        empty=page.empty,
        ingest_running=running,
        lag=page.lag,
    )


def has_project(home: Path, project_dir: str) -> bool:
    """Whether the store at ``home`` holds a session whose project is ``project_dir`` or
    below it (a ``--project`` that names none matches nothing: ``search`` says why)."""
    from ctxkeep.sinks.sqlite.lookup import has_project_under

    with reading(home) as conn:
        return has_project_under(conn, project_dir)

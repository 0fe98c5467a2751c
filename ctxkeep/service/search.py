"""Search for the app: the CLI's search (``query.search.search``: FTS5 + BM25 over the
store's chunks, RRF-fused, one hit per distinct text) as a request/result pair.

A thin module over ``query.search`` until the service layer's own search lands.
Raises ``StoreError`` without a store and ``UsageError`` for a bad filter value.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from pydantic import BaseModel, Field


class SearchRequest(BaseModel):
    """``home``, the ``query`` (words, ``"phrases"``, identifiers, paths), at most
    ``limit`` hits, only these ``agents`` (None: all)."""

    home: Path
    query: str
    limit: int = 20
    agents: list[str] | None = None


class SearchHit(BaseModel):
    """One hit: where it is (entry, agent, session and its short id, ts ISO-8601 UTC,
    role, kind, tool) and what it says (``title``, ``snippet`` ≤ 300 characters)."""

    entry_id: str
    agent: str
    session_id: str
    session_short_id: str = ""
    project_dir: str | None = None
    ts: str | None = None
    role: str = ""
    kind: str = ""
    tool_name: str | None = None
    title: str = ""
    snippet: str = ""
    score: float = 0.0


class SearchHits(BaseModel):
    """The hits, best first, and a ``note`` ('' unless something was cut)."""

    schema_: int = Field(1, alias="schema")
    query: str
    hits: list[SearchHit]
    note: str = ""


def search(req: SearchRequest) -> SearchHits:
    """The hits of ``req.query`` (empty query: none)."""
    from ctxkeep.query.search import search as run
    from ctxkeep.query.search.parse import Filters
    from ctxkeep.sinks import sqlite as sqlite_store

    if not req.query.strip():
        return SearchHits(schema=1, query=req.query, hits=[])
    with closing(sqlite_store.connect(req.home, readonly=True, mmap=True)) as conn:
        res = run(conn, req.query, filters=Filters(agent=req.agents or None), limit=req.limit)
    keep = set(SearchHit.model_fields)
    return SearchHits(
        schema=1,
        query=req.query,
        hits=[SearchHit(**{k: v for k, v in h.as_dict().items() if k in keep}) for h in res.hits],
        note=res.note,
    )

"""Transcripts: the session index (every session with its counts, tokens and cost,
sub-agents under their parent) and one session's whole transcript, for the pages
that show a conversation (``ctxkeep export markdown|html``, the app's Sessions view).

Unlike ``show --session`` (``query.sessions.conversation``, folded to fit a terminal
or a token budget) a transcript carries every text whole: messages, the arguments of
each tool call, thinking, compaction summaries; a tool result is cut to
``RESULT_BYTES`` (head and tail, with the ``ctxkeep show ID --offset N`` marker of
``query.fetch.cut_text``). Texts are the store's, redacted at ingest
(``transforms.redact``). Times are stored-time text (ISO-8601 UTC); sizes UTF-8
bytes; tokens the counts the agents logged (``tokens``) or estimates.

Raises ``StoreError`` when there is no store and ``SessionNotFound`` /
``AmbiguousSession`` for a session reference that names none or several
(``sinks.sqlite.lookup.resolve_session``).
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ctxkeep.service.model import Result
from ctxkeep.service.sessions import SessionRow, SessionsRequest, sessions
from ctxkeep.service.store import reading

#: a tool result longer than this (UTF-8 bytes) is shown as its head and tail
RESULT_BYTES = 32_000
#: kinds of a transcript turn, in the words of ``entries.kind`` plus ``compaction``
#: (a compaction boundary or summary) and ``subagent`` (where a sub-agent started)
TurnKind = Literal["message", "tool_call", "tool_result", "thinking", "summary", "compaction", "subagent"]


#: one session of the index: ``service.sessions.SessionRow`` (ids, project, times,
#: counts, logged ``tokens``, ``cost_usd``, ``title``, ``depth`` 1 for a sub-agent)
SessionSummary = SessionRow


class SessionIndexRequest(BaseModel):
    """Which sessions: ``home`` (the ctxkeep home), ``agents`` (None: all)."""

    home: Path
    agents: list[str] | None = None


class SessionIndexResult(BaseModel):
    """The sessions, newest first, each sub-agent right under its parent; ``source``
    says where the counts came from (``duckdb`` with cost, or ``sqlite``)."""

    source: str
    sessions: list[SessionRow]


def session_index(req: SessionIndexRequest) -> SessionIndexResult:
    """Every stored session (the service's ``sessions`` question, ``all``). Raises
    StoreError when the home holds no store."""
    res = sessions(req.home, SessionsRequest.parse({"agent": req.agents} if req.agents else {}, all=True))
    return SessionIndexResult(source=res.source, sessions=res.sessions)


class Media(BaseModel):
    """An image or document the store keeps for an entry (``sinks.sqlite.media``):
    its ``media_type`` (``image/png`` …), ``bytes`` and the data, base64."""

    media_type: str
    bytes: int
    data_base64: str


class Turn(BaseModel):
    """One step of a transcript, in order. ``kind`` is a ``TurnKind``;
    ``text`` is whole (a tool call: its arguments as stored, usually JSON; a
    ``subagent`` turn: the sub-agent's title). A tool call carries its result:
    ``result_text`` (cut to ``RESULT_BYTES``), ``result_bytes`` (the whole result's
    UTF-8 bytes), ``result_error`` (``query.sessions.error_flag``) and
    ``result_entry_id``. ``ref`` names the sub-agent session of a ``subagent`` turn."""

    entry_id: str
    session_id: str
    ts: str | None = None
    role: str = ""
    kind: TurnKind
    tool_name: str | None = None
    text: str = ""
    result_text: str | None = None
    result_bytes: int | None = None
    result_error: bool | None = None
    result_entry_id: str | None = None
    ref: str | None = None
    media: list[Media] = Field(default_factory=list)


class TranscriptRequest(BaseModel):
    """``home`` and ``sessions``: session ids or unique prefixes (None: every session
    of the store, in the index's order)."""

    home: Path
    sessions: list[str] | None = None
    #: the store's session index when the caller holds it already (the app shares one
    #: per store change): not asked again
    index: list[SessionRow] | None = None
    #: read the texts (and media) of one page of this many turns only (None: every
    #: turn's): page ``page`` (0-based, clamped), or the page holding the entry ``focus``
    #: (an entry id, or a tool result's: its call's page); the other turns carry their
    #: ids, kinds, roles, tools and times, no text (``TranscriptResult.window``)
    page_turns: int | None = Field(None, ge=1)
    page: int = 0
    focus: str | None = None


class TranscriptResult(Result):
    """One session's transcript: its ``session`` (the index row), the sub-agents it
    started (``subagents``, index rows) and its ``turns``. ``messages`` counts the
    ``message`` turns (every role: the ``messages`` of ``ctxkeep sessions``)."""

    session: SessionSummary
    subagents: list[SessionSummary] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    #: ``(start, stop)``: only ``turns[start:stop]`` carry their texts, results and
    #: media (a ``page_turns`` request); None: every turn does
    window: tuple[int, int] | None = None

    @property
    def messages(self) -> int:
        return sum(t.kind == "message" for t in self.turns)


def transcripts(req: TranscriptRequest) -> Iterator[TranscriptResult]:
    """The transcripts of ``req.sessions`` (resolved with ``resolve_session``; a
    session named twice comes once), one at a time (a store's whole history never
    sits in memory). Raises StoreError (no store), SessionNotFound /
    AmbiguousSession (a bad reference; raised before the first result)."""
    from ctxkeep.sinks.sqlite.lookup import resolve_session

    index = req.index if req.index is not None else session_index(SessionIndexRequest(home=req.home)).sessions
    by_id = {s.session_id: s for s in index}
    with reading(req.home) as conn:
        if req.sessions is None:
            wanted = [s.session_id for s in index]
        else:
            wanted = list(dict.fromkeys(resolve_session(conn, ref) for ref in req.sessions))
        for sid in wanted:
            summary = by_id.get(sid)
            if summary is None:  # stored after the index was read: its own row
                summary = SessionRow.model_construct(
                    agent="", session_id=sid, short_id=sid, parent_session_id=None, project_dir=None, started=None,
                    ended=None, messages=0, tool_calls=0, tokens=0, token_estimate=0, cost_usd=None, cost_logged=0, title="", depth=0,
                )  # fmt: skip
            kids = [s for s in index if s.parent_session_id == sid]
            yield _transcript(conn, summary, kids, req)


def turn_window(
    turns: list[Turn], size: int, page: int = 0, focus: str | None = None
) -> tuple[int, int, int]:
    """The page of ``size`` turns of ``turns``: ``(start, stop, pages)`` for page
    ``page`` (0-based, clamped), or for the page holding ``focus`` (an entry id, or a
    tool result's id: its call's page) when a turn has it."""
    pages = max(1, -(-len(turns) // size))
    if focus:
        at = next(
            (i for i, x in enumerate(turns) if x.entry_id and focus in (x.entry_id, x.result_entry_id)), None
        )
        if at is not None:
            page = at // size
    page = min(max(page, 0), pages - 1)
    return page * size, min((page + 1) * size, len(turns)), pages


def _transcript(
    conn: sqlite3.Connection,
    summary: SessionSummary,
    kids: list[SessionSummary],
    req: TranscriptRequest | None = None,
) -> TranscriptResult:
    from ctxkeep.query.fetch import cut_text
    from ctxkeep.query.sessions import error_flag, is_compaction, session_rows
    from ctxkeep.sinks.sqlite import content_text, media_for

    rows = session_rows(conn, summary.session_id, subagents=False)
    if not summary.agent and rows:
        summary.agent = rows[0][1]
    results = {(r[2], r[11]): r for r in rows if r[6] == "tool_result" and r[11]}
    used: set[str] = set()

    def text_of(chash: str | None) -> str:
        return (content_text(conn, chash) if chash else "") or ""

    # the turns in order first, their texts after (only those of the window are read):
    # turn id -> (its content hash, its result's content hash, is a result alone)
    texts: dict[int, tuple[str | None, str | None, bool]] = {}
    turns: list[Turn] = []
    for eid, agent, sid, _proj, ts, role, kind, tool, chash, _nbytes, _tok, native in rows:
        if is_compaction(agent, role, kind, tool):
            turns.append(Turn(entry_id=eid, session_id=sid, ts=ts, role=role, kind="compaction"))
        elif kind in ("message", "thinking", "summary"):
            turns.append(Turn(entry_id=eid, session_id=sid, ts=ts, role=role, kind=kind))
        elif kind == "tool_call":
            t = Turn(entry_id=eid, session_id=sid, ts=ts, role=role, kind=kind, tool_name=tool)
            res = results.get((sid, native)) if native else None
            if res is not None:
                used.add(res[0])
                t.result_entry_id = res[0]
            texts[id(t)] = (chash, res[8] if res is not None else None, False)
            turns.append(t)
            continue
        else:
            continue
        texts[id(turns[-1])] = (chash, None, False)
    for r in rows:  # results whose call is not stored (a cut transcript)
        if r[6] == "tool_result" and r[0] not in used:
            t = Turn(entry_id=r[0], session_id=r[2], ts=r[4], role=r[5], kind="tool_result", tool_name=r[7])
            texts[id(t)] = (r[8], None, True)
            turns.append(t)
    for k in kids:  # where each sub-agent started
        turns.append(
            Turn(
                entry_id="",
                session_id=k.session_id,
                ts=k.started,
                kind="subagent",
                text=k.title or "",
                ref=k.session_id,
            )
        )
    turns.sort(key=lambda t: t.ts or "")  # stable: the store's order within one time
    window = None
    lo, hi = 0, len(turns)
    if req is not None and req.page_turns is not None:
        lo, hi, _pages = turn_window(turns, req.page_turns, req.page, req.focus)
        window = (lo, hi)
    shown = turns[lo:hi]
    for t in shown:
        if id(t) not in texts:
            continue
        chash, result_hash, alone = texts[id(t)]
        whole = text_of(chash)
        if alone:  # a tool result without its call
            t.text = cut_text(whole, t.entry_id, RESULT_BYTES).text
            t.result_bytes = len(whole.encode("utf-8", "surrogatepass"))
            t.result_error = error_flag(whole[:400])
            continue
        t.text = whole
        if t.result_entry_id is not None:
            result = text_of(result_hash)
            t.result_bytes = len(result.encode("utf-8", "surrogatepass"))
            t.result_error = error_flag(result[:400])
            t.result_text = cut_text(result, t.result_entry_id, RESULT_BYTES).text
    stored = media_for(conn, [t.entry_id for t in shown if t.entry_id])
    for t in shown:
        for m in stored.get(t.entry_id, []):
            t.media.append(
                Media(
                    media_type=m.media_type,
                    bytes=m.bytes,
                    data_base64=base64.b64encode(m.data).decode("ascii"),
                )
            )
    return TranscriptResult(session=summary, subagents=kids, turns=turns, window=window)

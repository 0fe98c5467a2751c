"""One session's conversation in order: ``conversation(home, ConversationRequest) ->
ConversationResult`` (``ctxkeep show --session``). Turns, folding of tool calls,
compaction marks and the budget: ``query.sessions.conversation``; the question itself
(``service.conversation_core``, which ``show --session`` asks without pydantic and
prints what these models print). Never imports Prefect, Polars or DuckDB.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ctxkeep.service.conversation_core import conversation_of, spans_days
from ctxkeep.service.model import Budget, Item, Request, Result


class ConversationRequest(Request):
    """Which session, within which budget."""

    session: str = Field(description="a session id or its first characters, as `ctxkeep sessions` shows it")
    budget: Budget | None = Field(None, description="token budget: the first prompt and the newest turns")


class Turn(Item):
    """One line of the conversation."""

    entry_id: str
    session_id: str = Field(description="the turn's session (a sub-agent's turns carry their own)")
    ts: str | None = Field(description="ISO-8601 UTC")
    role: str
    kind: str = Field(
        description="message, tool_call, thinking, summary, compaction, tool_result; meta (a record, in a session holding only records)"
    )
    tool_name: str | None
    text: str = Field(description="the message; a tool call's arguments on one line")
    tokens: int = Field(description="estimated tokens of text")
    result_bytes: int | None = Field(description="a tool call's result size (null: no result)")
    result_error: bool | None = Field(description="a tool call's result says it failed")
    result_entry_id: str | None = Field(description="a tool call's result entry")


class ConversationResult(Result):
    """The session's turns in order."""

    agent: str = Field(description="agent name")
    session_id: str = Field(description="the full session id")
    session_short_id: str = Field(description="the shortest prefix of session_id naming it in the store")
    project_dir: str | None = Field(description="project directory")
    turns: list[Turn] = Field(description="in order")
    omitted: int = Field(description="turns the budget left out (the oldest after the first prompt)")
    omitted_tokens: int = Field(description="their estimated tokens")
    note: str | None = Field(description="why turns were left out (null: none)")

    def spans_days(self) -> bool:
        """True when the turns fall on more than one UTC day (times then show dates)."""
        return spans_days(self.turns)


def conversation(home: Path, req: ConversationRequest) -> ConversationResult:
    """The conversation of ``req.session``. Raises ``SessionNotFound``,
    ``AmbiguousSession``, ``StoreError``."""
    conv, short = conversation_of(home, req.session, req.budget)
    return ConversationResult(**{**conv.as_dict(), "note": conv.note or None}, session_short_id=short)

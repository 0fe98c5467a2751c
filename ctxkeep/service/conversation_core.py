"""One session's conversation without pydantic: ``conversation_of(home, session,
budget)``, its ``--json`` object (``conversation_json``, the keys of
``service.conversation.ConversationResult`` in its order) and ``spans_days``.
``ctxkeep show --session`` asks it directly (an interactive path, docs/design.md
"Latency budget": no pydantic import); ``service.conversation.conversation`` wraps the
same answer in the models, which document the keys (tests hold the two outputs
equal). Never imports Prefect, Polars, DuckDB or pydantic."""

from __future__ import annotations

from pathlib import Path

from ctxkeep.service.args import JSON_SCHEMA, MAX_BUDGET, in_range, refuse_nul
from ctxkeep.service.store import reading

#: a thinking turn's text when there is nothing to read (``query.sessions``)
EMPTY_THINKING = "(thinking, ~0 tokens)"

#: the ``--json`` keys of the conversation and of a turn, in the models' order
#: (``ConversationResult``, ``Turn``; a test holds them equal)
CONVERSATION_KEYS = (
    "agent",
    "session_id",
    "session_short_id",
    "project_dir",
    "turns",
    "omitted",
    "omitted_tokens",
    "note",
)
TURN_KEYS = (
    "entry_id",
    "session_id",
    "ts",
    "role",
    "kind",
    "tool_name",
    "text",
    "tokens",
    "result_bytes",
    "result_error",
    "result_entry_id",
)


def conversation_of(home: Path, session: str, budget: int | None = None):
    """``(conversation, short id)``: ``query.sessions.conversation`` of ``session`` (an
    id or its first characters) within ``budget`` tokens (read as
    ``ConversationRequest`` reads it: clamped to ``MAX_BUDGET``, below 1 a usage
    error), and the shortest prefix naming the session in the store. Raises
    ``SessionNotFound``, ``AmbiguousSession``, ``StoreError``, ``UsageError``."""
    from ctxkeep.query.sessions import conversation as run
    from ctxkeep.sinks.sqlite.lookup import short_session_ids

    refuse_nul(session, "session")
    budget = in_range("budget", budget, MAX_BUDGET, [])
    with reading(home, mmap=True) as conn:
        conv = run(conn, session, budget=budget)
        short = short_session_ids(conn, [conv.session_id])[conv.session_id]
    # the note's command with the short id, which works (the full one: newuser16 F16)
    conv.note = conv.note.replace(f"--session {conv.session_id}`", f"--session {short}`")
    return conv, short


def conversation_json(conv, short: str) -> dict:
    """``ctxkeep show --session --json``: ``"schema"``, then ``CONVERSATION_KEYS``
    (each turn's ``TURN_KEYS``); ``note`` null when nothing was left out."""
    d = {**conv.as_dict(), "session_short_id": short}
    d["note"] = d["note"] or None
    d["turns"] = [{k: t[k] for k in TURN_KEYS} for t in d["turns"]]
    return {"schema": JSON_SCHEMA, **{k: d[k] for k in CONVERSATION_KEYS}}


def spans_days(turns) -> bool:
    """True when the turns fall on more than one UTC day (times then show dates)."""
    return len({t.ts[:10] for t in turns if t.ts}) > 1

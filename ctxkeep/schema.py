"""The entry: one row per message, tool call, tool result, thinking block, summary or
meta record of any agent. Sources produce entry dicts with the keys of ``ENTRY_SCHEMA``
(missing keys are null); transforms turn them into a Polars frame of exactly this schema.

Units: ``ts`` is UTC; ``*_tokens`` and ``token_estimate`` are tokens; ``source_offset``
and ``text_bytes`` are bytes.
"""
from __future__ import annotations

import polars as pl

ROLES = ("user", "assistant", "system", "tool")
KINDS = ("message", "tool_call", "tool_result", "thinking", "summary", "meta")
#: ``rewound``: dropped from the agent's active history by a rewind (Gemini ``$rewindTo``)
STATUSES = ("active", "archived", "consumed", "rewound")

#: Columns that sources fill in (the raw entry dict).
SOURCE_SCHEMA: dict[str, pl.DataType] = {
    "agent": pl.String,            # claude-code, codex, gemini-cli, ...
    "session_id": pl.String,       # the agent's session id (sub-agents: their own id)
    "parent_session_id": pl.String,  # sub-agent / sidechain / fork: the parent session
    "native_id": pl.String,        # the agent's record id (uuid, call_id, ...)
    "parent_id": pl.String,        # parentUuid or equivalent
    "part": pl.Int32,              # index of the block within its record (0-based)
    "project_dir": pl.String,      # working directory from the record (cwd)
    "ts": pl.String,               # ISO-8601 as logged; normalized to UTC datetime
    "role": pl.String,
    "kind": pl.String,
    "tool_name": pl.String,
    "text": pl.String,             # plain text, before redaction
    "model": pl.String,
    "input_tokens": pl.Int64,      # usage as the agent logged it (non-cached input)
    "output_tokens": pl.Int64,
    "cache_read_tokens": pl.Int64,
    "cache_creation_tokens": pl.Int64,
    "reasoning_tokens": pl.Int64,
    "usage_key": pl.String,        # key under which usage is counted once (null: none)
    "message_id": pl.String,       # API message id (Claude message.id)
    "request_id": pl.String,       # API request id (Claude requestId)
    "is_sidechain": pl.Boolean,
    "source_path": pl.String,
    "source_offset": pl.Int64,     # byte offset of the line in source_path
    "record_id": pl.String,        # stable id of the source record: the agent's uuid,
                                   # else "<session>:<SHA-256 of the raw line>"
}

#: The normalized entry frame (``transforms.normalize.entries_frame``).
ENTRY_SCHEMA: dict[str, pl.DataType] = {
    "entry_id": pl.String,         # SHA-256 hex (32 chars) of agent, scope, id, part
    "agent": pl.String,
    "session_id": pl.String,
    "parent_session_id": pl.String,
    "native_id": pl.String,
    "parent_id": pl.String,
    "project_dir": pl.String,
    "ts": pl.Datetime("us", "UTC"),
    "role": pl.String,
    "kind": pl.String,
    "tool_name": pl.String,
    "text": pl.String,             # redacted
    "content_hash": pl.String,     # SHA-256 hex of text (null when text is empty)
    "text_bytes": pl.Int64,
    "token_estimate": pl.Int64,    # tokens of text (o200k_base, or the heuristic)
    "model": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cache_read_tokens": pl.Int64,
    "cache_creation_tokens": pl.Int64,
    "reasoning_tokens": pl.Int64,
    "usage_key": pl.String,
    "message_id": pl.String,
    "request_id": pl.String,
    "is_sidechain": pl.Boolean,
    "source_path": pl.String,
    "source_offset": pl.Int64,
    "status": pl.String,
}

USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens",
                 "cache_creation_tokens", "reasoning_tokens")

#: Columns stored in SQLite ``entries`` and DuckDB ``entries`` (no text: text lives in
#: ``contents``/``chunks`` once per content_hash).
STORED_COLUMNS = [c for c in ENTRY_SCHEMA if c != "text"]

"""The entry: one row per message, tool call, tool result, thinking block, summary or
meta record of any agent. Sources produce entry dicts with the keys of ``ENTRY_SCHEMA``
(missing keys are null); transforms turn them into a Polars frame of exactly this schema.

Units: ``ts`` is UTC; ``*_tokens`` and ``token_estimate`` are tokens; ``source_offset``
and ``text_bytes`` are bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl


@dataclass
class EntryRef:
    """What names and places one stored entry wherever it is shown (a search hit, a
    fetched entry): id, agent, session, project directory, time (ISO-8601 UTC text),
    role, kind and tool name."""

    entry_id: str
    agent: str
    session_id: str
    project_dir: str | None
    ts: str | None
    role: str
    kind: str
    tool_name: str | None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Watermark:
    """How far a source file was read (one row of the store's ``watermarks`` table).
    ``offset`` is the byte offset after the last complete line stored; ``head_hash``
    the SHA-256 of its first ``head_len`` bytes (at most 4 KiB); ``state`` the parser's
    carry-over (JSON-serializable). ``dev``/``ino``/``size``/``mtime_ns`` are the
    file's stat facts (bytes, nanoseconds) when it was read. Kept here, not in
    ``sources``, because the sinks store it and sinks do not import sources."""

    path: str
    agent: str
    dev: int = 0
    ino: int = 0
    size: int = 0
    mtime_ns: int = 0
    offset: int = 0
    head_len: int = 0
    head_hash: str = ""
    parser_version: int = 0
    state: dict[str, Any] = field(default_factory=dict)


#: every ``agent`` value: the sources' names (``sources.SOURCES``, in registry order)
#: and ``note`` (``pipeline.notes``); kept here so search can check a filter without
#: importing every source
AGENTS = (
    "claude-code",
    "traex",
    "codex",
    "gemini-cli",
    "copilot-cli",
    "qwen-code",
    "continue",
    "cline",
    "roo-code",
    "kilo-code",
    "aider",
    "specstory",
    "opencode",
    "opencode-go",
    "crush",
    "goose",
    "windsurf",
    "trae",
    "cursor",
    "gptme",
    "mistral-vibe",
    "openclaude",
    "amp",
    "openclaw",
    "pi",
    "kimi",
    "openhands",
    "zed",
    "iflow",
    "deepseek-tui",
    "zencoder",
    "grok",
    "cortex",
    "qoder",
    "kiro",
    "kiro-ide",
    "forge",
    "devin",
    "codebuff",
    "hermes",
    "warp",
    "antigravity-cli",
    "antigravity",
    "vscode-copilot",
    "visualstudio-copilot",
    "cowork",
    "chatgpt",
    "claude-ai",
    "note",
)
ROLES = ("user", "assistant", "system", "tool")
KINDS = ("message", "tool_call", "tool_result", "thinking", "summary", "meta")
#: ``rewound``: dropped from the agent's active history by a rewind (Gemini ``$rewindTo``)
STATUSES = ("active", "archived", "consumed", "rewound")

#: Columns that sources fill in (the raw entry dict).
_SOURCE_TYPES: dict[str, str] = {
    "agent": "String",  # claude-code, codex, gemini-cli, ...
    "session_id": "String",  # the agent's session id (sub-agents: their own id)
    "parent_session_id": "String",  # sub-agent / sidechain / fork: the parent session
    "native_id": "String",  # the agent's record id (uuid, call_id, ...)
    "parent_id": "String",  # parentUuid or equivalent
    "part": "Int32",  # index of the block within its record (0-based)
    "project_dir": "String",  # working directory from the record (cwd)
    "ts": "String",  # ISO-8601 as logged; normalized to UTC datetime
    "role": "String",
    "kind": "String",
    "tool_name": "String",
    "text": "String",  # plain text, before redaction
    "model": "String",
    "input_tokens": "Int64",  # usage as the agent logged it (non-cached input)
    "output_tokens": "Int64",
    "cache_read_tokens": "Int64",
    "cache_creation_tokens": "Int64",
    "reasoning_tokens": "Int64",
    # the part of cache_creation_tokens written for 5 minutes / 1 hour (Claude Code
    # ``usage.cache_creation.ephemeral_5m/1h_input_tokens``); null: not split
    "cache_creation_5m_tokens": "Int64",
    "cache_creation_1h_tokens": "Int64",
    "cost_usd": "Float64",  # the cost the agent logged for this usage (USD); null: none
    "usage_key": "String",  # key under which usage is counted once (null: none)
    "message_id": "String",  # API message id (Claude message.id)
    "request_id": "String",  # API request id (Claude requestId)
    "is_sidechain": "Boolean",
    "source_path": "String",
    "source_offset": "Int64",  # byte offset of the line in source_path
    "record_id": "String",  # stable id of the source record: the agent's uuid,
    # else "<session>:<SHA-256 of the raw line>"
}

#: The normalized entry frame (``transforms.normalize.entries_frame``).
_ENTRY_TYPES: dict[str, str] = {
    "entry_id": "String",  # SHA-256 hex (32 chars) of agent, scope, id, part
    "agent": "String",
    "session_id": "String",
    "parent_session_id": "String",
    "native_id": "String",
    "parent_id": "String",
    "project_dir": "String",
    "ts": "Datetime[us,UTC]",
    "role": "String",
    "kind": "String",
    "tool_name": "String",
    "text": "String",  # redacted
    "content_hash": "String",  # SHA-256 hex of text (null when text is empty)
    "text_bytes": "Int64",
    "token_estimate": "Int64",  # tokens of text (o200k_base, or the heuristic)
    "model": "String",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cache_read_tokens": "Int64",
    "cache_creation_tokens": "Int64",
    "reasoning_tokens": "Int64",
    "cache_creation_5m_tokens": "Int64",
    "cache_creation_1h_tokens": "Int64",
    "cost_usd": "Float64",
    "usage_key": "String",
    "message_id": "String",
    "request_id": "String",
    "is_sidechain": "Boolean",
    "source_path": "String",
    "source_offset": "Int64",
    "status": "String",
}

USAGE_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
)

#: The cache-write split (tokens, a part of ``cache_creation_tokens``; null when the
#: agent does not split) and the logged cost (USD): kept in ``usage`` only.
CACHE_SPLIT_COLUMNS = ("cache_creation_5m_tokens", "cache_creation_1h_tokens")
USAGE_ONLY_COLUMNS = (*CACHE_SPLIT_COLUMNS, "cost_usd")

#: The columns of a usage row (``transforms.normalize.usage_frame``, SQLite ``usage``).
USAGE_ROW_COLUMNS = (
    "usage_key",
    "agent",
    "session_id",
    "project_dir",
    "ts",
    "model",
    *USAGE_COLUMNS,
    "entry_id",
    *USAGE_ONLY_COLUMNS,
)

#: Agents whose logged output leaves their reasoning tokens out, logged beside it:
#: Gemini CLI and Qwen Code (``thoughtsTokenCount`` beside ``candidatesTokenCount``),
#: OpenCode (``tokens.reasoning`` beside ``tokens.output``); OpenAI's output (Codex,
#: Copilot CLI) holds them. Priced as output (``transforms.cost``) and counted in a
#: total, as ccusage's ``totalTokens``, Gemini CLI's own ``tokens.total`` and agentsview
#: (thoughts folded into ``output_tokens``, ``internal/parser/gemini.go``) count them.
REASONING_OUTSIDE_OUTPUT = frozenset({"gemini-cli", "qwen-code", "opencode"})

#: Agents whose files log reasoning (thought) tokens at all: those above, and those
#: whose output holds them (Codex's ``reasoning_output_tokens``, Copilot CLI's and Grok's
#: ``reasoningTokens``, Hermes' and OpenHands' ``reasoning_tokens``: ``sources/``). Any
#: other agent's reasoning tokens are "not recorded" (``stats`` shows ``-``), not 0.
REASONING_RECORDED = REASONING_OUTSIDE_OUTPUT | frozenset(
    {"codex", "copilot-cli", "grok", "hermes", "openhands"}
)


#: Agents whose files log no cache write (their parsers store 0; ``sources/``): Codex
#: (``token_count``'s ``TokenUsage`` is input, cached input, output, reasoning output and
#: total tokens: openai/codex ``codex-rs/protocol/src/protocol.rs`` at 001cb8e, the
#: corpus's rollouts of 0.34.0 to 0.70.0-alpha.4; a ``cache_write_input_tokens`` first
#: appears in the corpus's 0.146.0 rollout, always 0 there: read since Codex's parser 4,
#: ``sources.codex._TOTAL_KEYS``, so a nonzero value is shown), Gemini CLI
#: and Qwen Code (``cachedContentTokenCount`` only), Grok (``cachedReadTokens``), Devin,
#: Forge and Mistral Vibe (``cached_tokens``), and Cursor, Goose and Windsurf (no cache
#: figure at all). Their cache write is "not recorded" (``-``, null in ``--json``), not
#: 0, wherever a sum of it is 0 (``cache_write_shown``); a nonzero sum (a future
#: version's field read) is shown as it is.
CACHE_WRITE_UNRECORDED = frozenset(
    {
        "codex",
        "cursor",
        "devin",
        "forge",
        "gemini-cli",
        "goose",
        "grok",
        "mistral-vibe",
        "qwen-code",
        "windsurf",
    }
)


def cache_write_shown(agent: str, tokens: int | None) -> int | None:
    """``tokens``, an agent's summed cache write (tokens), as reports show it: None
    ("not recorded") for an agent of ``CACHE_WRITE_UNRECORDED`` whose sum is 0."""
    return None if agent in CACHE_WRITE_UNRECORDED and not tokens else tokens


def reasoning_beside_sql(agent: str = "agent", reasoning: str = "reasoning_tokens") -> str:
    """An SQL expression (DuckDB and SQLite) of a usage row's reasoning tokens that its
    output leaves out (``REASONING_OUTSIDE_OUTPUT``; 0 for other agents), to add to a
    total: ``agent`` and ``reasoning`` name the columns."""
    names = ", ".join(f"'{a}'" for a in sorted(REASONING_OUTSIDE_OUTPUT))
    return f"(CASE WHEN {agent} IN ({names}) THEN coalesce({reasoning}, 0) ELSE 0 END)"


#: Why an agent's usage rows carry a logged cost and null tokens ("tokens not recorded
#: by the agent": never summed, never priced): Crush and the Go opencode keep a
#: session's summed cost but assign each response's tokens (``sources.charm_db``);
#: Codebuff logs a session's credits and no tokens (``sources.codebuff``). Another
#: agent's such rows take ``TOKENS_UNRECORDED_WHY_DEFAULT``.
TOKENS_UNRECORDED_WHY = {
    "crush": "it logs each session's cost, and only its last response's tokens",
    "opencode-go": "it logs each session's cost, and only its last response's tokens",
    "codebuff": "it logs the credits each session used, no tokens",
}
TOKENS_UNRECORDED_WHY_DEFAULT = "it logs each session's cost, no tokens"


def family_cost_notes(rows) -> list[str]:
    """One note per listed session (``rows``: ``query.sessions.SessionRow``, sub-agents
    under their parent) whose sub-agents are listed under it when their rows' costs,
    each rounded to the cent, do not add up to the exact sum rounded once (the one
    rounding rule, docs/design.md): that sum is what ``report session`` shows for the
    session with its sub-agents (``ctxkeep sessions``, ``export``'s index). The corpus' ef95: rows $1.97 and $1.22,
    ``report session`` $3.18 (exact $1.965285 + $1.219203)."""
    out = []
    for i, r in enumerate(rows):
        if r.depth or r.cost_usd is None:
            continue
        family = [r]
        for x in rows[i + 1 :]:
            if not x.depth or x.parent_session_id != r.session_id:
                break
            family.append(x)
        costs = [x.cost_usd for x in family if x.cost_usd is not None]
        if len(costs) < 2:
            continue
        from decimal import Decimal

        rows_sum = sum(Decimal(f"{c:.2f}") for c in costs)  # each row as shown
        whole = Decimal(f"{sum(costs):.2f}")
        if rows_sum != whole:
            n = len(family) - 1
            out.append(
                f"{r.short_id} with its {n} sub-agent{'s' if n != 1 else ''}: ${whole:,} in all, as "
                f"`report session` shows it (the rows, each rounded to the cent, add up to ${rows_sum:,})"
            )
    return out


def tokens_unrecorded_note(agent: str, sessions: int) -> str:
    """The note of ``sessions`` sessions (usage rows) of ``agent`` whose tokens the agent
    did not record, in the words of ``report``, ``sessions`` and the app."""
    why = TOKENS_UNRECORDED_WHY.get(agent, TOKENS_UNRECORDED_WHY_DEFAULT)
    return (
        f"{agent}: tokens not recorded by the agent ({sessions:,} session{'' if sessions == 1 else 's'}: "
        f"{why}): not in the token totals; every mode shows the logged cost"
    )


#: Columns stored in SQLite ``entries`` and DuckDB ``entries`` (no text: text lives in
#: ``contents``/``chunks`` once per content_hash; no ``USAGE_ONLY_COLUMNS``).
STORED_COLUMNS = [c for c in _ENTRY_TYPES if c != "text" and c not in USAGE_ONLY_COLUMNS]

#: ``ENTRY_SCHEMA``'s dtypes by name (``"String"``, ``"Int64"``, ``"Datetime[us,UTC]"``,
#: ...), without importing Polars (DuckDB's DDL maps them, in the side process too)
ENTRY_TYPE_NAMES: dict[str, str] = dict(_ENTRY_TYPES)


def _polars(types: dict[str, str]) -> dict[str, pl.DataType]:
    import polars as pl

    return {
        c: (pl.Datetime("us", "UTC") if t == "Datetime[us,UTC]" else getattr(pl, t)) for c, t in types.items()
    }


_LAZY = {"SOURCE_SCHEMA": _SOURCE_TYPES, "ENTRY_SCHEMA": _ENTRY_TYPES}
_cache: dict[str, Any] = {}


def __getattr__(name: str):
    """``SOURCE_SCHEMA`` and ``ENTRY_SCHEMA`` (column → Polars dtype) are built on first
    use, so that the interactive paths (search, show, stats: ~0.25 s of import) need not
    import Polars."""
    if name in _LAZY:
        if name not in _cache:
            _cache[name] = _polars(_LAZY[name])
        return _cache[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def entry_id(agent: str, record_id: str | None, part: int | None) -> str:
    """The ``entry_id`` of one entry dict, as ``transforms.normalize.entries_frame``
    computes it: the first 32 hex chars of SHA-256 of ``agent``, ``record_id`` ('' when null) and ``part``
    (0 when null), joined by U+001F. Used to check that the store holds a line's
    entries without building a frame per line (here, not in ``normalize``: compress's
    check imports no Polars)."""
    key = f"{agent}\x1f{record_id or ''}\x1f{part or 0}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def content_hash(text: str) -> str:
    """The ``content_hash`` of an entry text, as ``transforms.normalize.contents_frame``
    computes it: SHA-256 (64 hex chars) of the text as UTF-8, lone surrogates kept
    (``surrogatepass``). Here for the same reason as ``entry_id``: compress imports no
    Polars."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

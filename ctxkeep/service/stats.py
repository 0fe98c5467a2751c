"""Counts and sizes of the store: ``stats(home, StatsRequest) -> StatsResult``
(MCP ``ctx_stats``; ``ctxkeep stats`` asks ``service.stats_core`` for the same
figures without pydantic, and prints what these models print). The figures:
``query.stats.store_stats``. Read-only; never imports Prefect, Polars or DuckDB."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ctxkeep.service.model import Item, Request, Result
from ctxkeep.service.stats_core import figures, redactions_line


class StatsRequest(Request):
    """No arguments: the whole store."""


class AgentStats(Item):
    entries: int
    sessions: int
    text_bytes: int = Field(description="UTF-8 bytes of the agent's entries' texts")
    token_estimate: int = Field(
        description="text tokens (est.): tokens of those texts estimated from their bytes, not API tokens"
    )
    kinds: dict[str, int] = Field(description="kind → entries")


class Contents(Item):
    distinct: int = Field(description="distinct texts (each stored once)")
    bytes: int
    token_estimate: int = Field(description="text tokens (est.) of those texts, not API tokens")


class AgentUsage(Item):
    """One agent's API tokens; a figure is null when the agent recorded none of it
    (Crush's tokens; reasoning of an agent outside ``schema.REASONING_RECORDED``)."""

    responses: int
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_creation_tokens: int | None
    reasoning_tokens: int | None = Field(
        description="reasoning (thought) tokens: beside the output for Gemini CLI, Qwen Code and "
        "OpenCode (added to totals), inside it for Codex and Copilot CLI; null: not recorded"
    )


class UsageTotals(Item):
    responses: int = Field(description="model responses with logged usage")
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    reasoning_tokens: int = Field(description="reasoning (thought) tokens of the agents that record them")
    agents: dict[str, AgentUsage] = Field(description="the same figures per agent")


class Redactions(Item):
    texts: dict[str, int] = Field(description="kind → values redacted in stored texts")
    quarantine: dict[str, int] = Field(description="kind → values redacted in quarantined lines")
    texts_with_redactions: int = Field(description="distinct texts holding a redaction")
    total: int

    def line(self) -> str:
        """``redacted values: 12 (password 5, …); 10 in 9 texts, 2 in quarantined lines``
        (``redacted values: none``); counts only, never values."""
        return redactions_line(
            {
                "texts": self.texts,
                "quarantine": self.quarantine,
                "texts_with_redactions": self.texts_with_redactions,
                "total": self.total,
            }
        )


class StatsResult(Result):
    """The store's figures (bytes in bytes, tokens in tokens)."""

    entries: int = Field(description="entries stored")
    sessions: int = Field(description="sessions stored ((agent, session) pairs)")
    agents: dict[str, AgentStats] = Field(
        description="per agent (token_estimate: text tokens estimated from the stored text, not API tokens)"
    )
    status: dict[str, int] = Field(description="status → entries")
    contents: Contents = Field(description="distinct texts (token_estimate: text tokens, estimated)")
    usage: UsageTotals = Field(
        description="API tokens as the agents logged them: responses, input/output/cache and "
        "thought (reasoning) tokens, in all and per agent"
    )
    quarantine: dict[str, int] = Field(description="skipped and repaired lines")
    files: dict[str, int] = Field(description="store file → bytes")
    last_ingest: str | None = Field(
        description="end of the last ingest that stored new data, ISO-8601 UTC (an ingest that finds "
        "nothing new records no run; null: never)"
    )
    redactions: Redactions = Field(
        description="redacted values per kind in the texts and in the quarantine (counts of "
        "`[REDACTED:<kind>]` markers, never the values)"
    )


def stats(home: Path, req: StatsRequest) -> StatsResult:
    """The figures of the store at ``home``. Raises ``StoreError`` when there is no
    readable store."""
    return StatsResult(**figures(Path(home)))

"""Local reports added up, to compare with a report over the team's lake (the sum of
the machines' ``report daily --json`` rows equals the lake's, field by field)."""

from __future__ import annotations

#: the additive figures of a report row (``cost_usd`` and ``models`` are summed apart)
TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "total_tokens",
    "reasoning_tokens",
    "responses",
    "unpriced_responses",
)


def summed(reports: list[dict], key=("period", "agent")) -> dict:
    """The rows of several local reports added up per ``key``: ``{key values:
    {TOKENS... (None when no row recorded it), "cost_usd": float | None, "models": set}}``."""
    out: dict = {}
    for rep in reports:
        for row in rep["rows"]:
            k = tuple(row[x] for x in key)
            acc = out.setdefault(k, dict.fromkeys(TOKENS) | {"cost_usd": None, "models": set()})
            for f in TOKENS:  # null: tokens not recorded by the agent (null while none is)
                if row[f] is not None:
                    acc[f] = (acc[f] or 0) + row[f]
            if row["cost_usd"] is not None:
                acc["cost_usd"] = (acc["cost_usd"] or 0.0) + row["cost_usd"]
            acc["models"] |= set(row["models"])
    return out

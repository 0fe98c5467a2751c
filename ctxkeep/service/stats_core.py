"""The store's figures without pydantic: ``figures(home) -> dict`` (the keys of
``service.stats.StatsResult``), ``stats_json`` (the ``--json`` object, keys in the
models' order) and ``redactions_line``. ``ctxkeep stats`` asks it directly (an
interactive path, docs/design.md "Latency budget": no pydantic import);
``service.stats.stats`` (MCP ``ctx_stats``) wraps the same figures in the models,
which document the keys (tests hold the two outputs equal). Read-only; never imports
Prefect, Polars, DuckDB or pydantic."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ctxkeep.service.args import JSON_SCHEMA
from ctxkeep.service.store import reading

#: the keys of each object of the ``--json`` output, in the models' order
#: (``StatsResult``, ``AgentStats``, ``Contents``, ``UsageTotals``, ``Redactions``;
#: a test holds them equal)
KEYS = {
    "stats": (
        "entries",
        "sessions",
        "agents",
        "status",
        "contents",
        "usage",
        "quarantine",
        "files",
        "last_ingest",
        "redactions",
    ),
    "agents": ("entries", "sessions", "text_bytes", "token_estimate", "kinds"),
    "contents": ("distinct", "bytes", "token_estimate"),
    "usage": (
        "responses",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_creation_tokens",
        "reasoning_tokens",
        "agents",
    ),
    "redactions": ("texts", "quarantine", "texts_with_redactions", "total"),
}


def figures(home: Path) -> dict:
    """The figures of the store at ``home`` (``query.stats.store_stats``: bytes in
    bytes, tokens in tokens). Raises ``StoreError`` when there is no readable store."""
    from ctxkeep.query.stats import store_stats

    with reading(home) as conn:
        return store_stats(conn, Path(home))


def stats_json(d: dict) -> dict:
    """``ctxkeep stats --json``: ``figures``' dict as ``StatsResult`` prints it
    (``"schema"`` first, each object's keys as ``KEYS`` orders them)."""

    def pick(obj: dict, name: str) -> dict:
        return {k: obj[k] for k in KEYS[name]}

    out = pick(d, "stats")
    out["agents"] = {a: pick(v, "agents") for a, v in d["agents"].items()}
    for name in ("contents", "usage", "redactions"):
        out[name] = pick(d[name], name)
    return {"schema": JSON_SCHEMA, **out}


#: how each command counts redacted values, in the same words (newuser16 F6: `stats` 67,
#: `secrets` 128 and the vault 133 for one store, units unsaid): once per distinct stored
#: text (`stats`), per entry (`secrets`: a text several entries share counts for each),
#: per occurrence in the raw bytes the vault keeps (`vault status`, `vault restore`)
UNIT_TEXT, UNIT_ENTRY, UNIT_RAW = "per distinct text", "per entry", "per occurrence in the raw bytes"


def redactions_line(r: dict) -> str:
    """``redacted values, counted per distinct text: 12 (password 5, …); 10 in 9
    distinct texts, 2 in quarantined lines; `ctxkeep secrets` counts them per entry``
    (``redacted values: none``) of the ``redactions`` figures; counts only, never
    values."""
    if not r["total"]:
        return "redacted values: none"
    kinds = Counter(r["texts"]) + Counter(r["quarantine"])
    per = ", ".join(f"{k} {n:,}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    n_texts = sum(r["texts"].values())
    line = (
        f"redacted values, counted {UNIT_TEXT}: {r['total']:,} ({per}); "
        f"{n_texts:,} in {r['texts_with_redactions']:,} distinct texts"
    )
    if r["quarantine"]:
        line += f", {sum(r['quarantine'].values()):,} in quarantined lines"
    return line + f"; `ctxkeep secrets` counts them {UNIT_ENTRY}, the vault {UNIT_RAW}"

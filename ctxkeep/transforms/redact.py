"""Secret redaction: API keys, tokens, private keys and passwords are replaced by
``[REDACTED:<kind>]`` before anything is hashed, indexed or stored.

Patterns are the well-known public formats (OpenAI ``sk-``, Anthropic ``sk-ant-``,
GitHub ``ghp_``/``github_pat_``, AWS ``AKIA``, Slack ``xox?-``, Google ``AIza``,
JWTs, PEM private key blocks, ``Bearer`` headers, ``password=``/``secret:`` pairs).
"""
from __future__ import annotations

import polars as pl

#: (kind, regex) pairs; Rust regex syntax (Polars).
PATTERNS: list[tuple[str, str]] = [
    ("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    ("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-key", r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{32,}"),
    ("github-token", r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,}"),
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("slack-token", r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"AIza[0-9A-Za-z_\-]{35}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    ("bearer", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{24,}"),
    ("password", r"(?i)\b(?:password|passwd|secret|api[_-]?key|access[_-]?token)\s*[=:]\s*[\"']?[^\s\"',;]{8,}"),
]

_COMBINED = "|".join(f"(?:{rx})" for _, rx in PATTERNS)


def redact_expr(col: str = "text") -> pl.Expr:
    """A Polars expression that replaces every secret in ``col`` by ``[REDACTED]``."""
    return pl.col(col).str.replace_all(_COMBINED, "[REDACTED]")


def redact(text: str) -> str:
    """Redact one string (same patterns as ``redact_expr``)."""
    return pl.Series([text]).str.replace_all(_COMBINED, "[REDACTED]")[0]

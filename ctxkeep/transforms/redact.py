"""Secret redaction: API keys, tokens, private keys and passwords are replaced by
``[REDACTED]`` before anything is hashed, indexed or stored.

Patterns are the well-known public formats (OpenAI ``sk-``, Anthropic ``sk-ant-``,
GitHub ``ghp_``/``github_pat_``, AWS ``AKIA``, Slack ``xox?-``, Google ``AIza``,
Stripe ``sk_live_``, JWTs, PEM private key blocks, ``Bearer`` headers, credentials in
URLs ``scheme://user:password@``) and key/value pairs whose key names a secret
(``password``, ``DB_PASSWORD``, ``client_secret``, ``AWS_SECRET_ACCESS_KEY``,
``api_key``, ``GITHUB_TOKEN`` …) in ``=``, ``:``, shell ``export`` and JSON
(``"password": "…"``) forms, with a value of ≥ 8 characters that is not a call, an
index, a ``${VAR}`` or a ``<placeholder>``. Token counts (``"input_tokens": 12345678``)
are not secrets: a bare ``token`` key is not matched.
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
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    # from ``://`` to ``@`` (a literal start keeps the combined scan fast); ``sep`` is put back
    ("url-credentials", r"(?P<sep>://)[^\s:/@\"']+:[^\s@/\"']+@"),
    (
        "password",
        r"(?i)(?:password|passwd|secret|api[_-]?key|private[_-]?key|"
        r"(?:access|auth|refresh|api|bot|session|github|gh|gitlab|npm|pypi|hf|slack|discord)[_-]?token)"
        r"[\w.-]*[\"']?\s*[=:]\s*[\"']?[^\s\"',;()\[\]{}$<>]{8,}(?P<end>$|[\s\"',;)\]}])",
    ),
]

# Two passes: the key/value pattern (case-insensitive key words) makes a combined
# regex ~100× slower (2.3 s instead of 0.02 s per 10 MB), alone it costs 0.025 s.
_COMBINED = "|".join(f"(?:{rx})" for kind, rx in PATTERNS if kind != "password")
_KEY_VALUE = dict(PATTERNS)["password"]
#: the ``://`` of a URL and the character that ended a key/value secret are put back
_REPLACEMENT = "${sep}[REDACTED]"
_KV_REPLACEMENT = "[REDACTED]${end}"


def redact_expr(col: str = "text") -> pl.Expr:
    """A Polars expression that replaces every secret in ``col`` by ``[REDACTED]``."""
    return pl.col(col).str.replace_all(_COMBINED, _REPLACEMENT).str.replace_all(_KEY_VALUE, _KV_REPLACEMENT)


def redact(text: str) -> str:
    """Redact one string (same patterns as ``redact_expr``)."""
    return pl.DataFrame({"text": [text]}).select(redact_expr("text"))["text"][0]

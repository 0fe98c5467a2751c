"""newuser18 F14: a token as a URL's password (``https://x-access-token:<token>@host/…``,
what GitHub Actions and ``gh`` write into a git remote) is redacted as the token alone,
with its provider's kind; the key/value rule took ``<token>@github.com/acme/repo.git``
as a "password", so the host and path left the stored text (a search for the repo
missed it). In the store's texts and in the vault's raw lines (JSON-escaped) alike."""

from __future__ import annotations

import json

import pytest

from ctxkeep.sinks.vault import redact_raw
from ctxkeep.transforms.redact import redact

GH = "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"

CASES = [
    (
        f"git clone https://x-access-token:{GH}@github.com/acme/repo.git into ./repo",
        "git clone https://x-access-token:[REDACTED:github-token]@github.com/acme/repo.git into ./repo",
    ),
    (
        f"git remote set-url origin https://oauth2:{GH}@github.com/acme/repo.git",
        "git remote set-url origin https://oauth2:[REDACTED:github-token]@github.com/acme/repo.git",
    ),
    (
        'url = "https://api_token:Zx9qWv7Lm3Kp@host.example.com/v1"',
        'url = "https://api_token:[REDACTED:url-credentials]@host.example.com/v1"',
    ),
    # not in a URL: the key/value rule as before, "@" and all
    ("password=hunt@er22x", "password=[REDACTED:password]"),
    (f"export GH_TOKEN={GH}", "export GH_TOKEN=[REDACTED:github-token]"),
]


@pytest.mark.parametrize(("text", "want"), CASES)
def test_a_token_as_a_urls_password_keeps_the_host_and_path(text, want):
    assert redact(text) == want


def test_the_vaults_raw_line_keeps_the_host_and_path_too():
    line = json.dumps({"type": "user", "message": {"content": CASES[0][0]}}, separators=(",", ":")).encode()
    new, counts = redact_raw(line)
    assert json.loads(new)["message"]["content"] == CASES[0][1]
    assert counts == {"github-token": 1}

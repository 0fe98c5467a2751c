"""Secret redaction: the public formats and the key/value forms are redacted; what
looks alike but is not a secret (token counts, code, placeholders) is kept.

The secrets below are made up in the documented shapes (AWS's documented example
keys, GitHub/Stripe/OpenAI prefixes with random tails)."""

from __future__ import annotations

import pytest

from ctxkeep.transforms.redact import redact

SECRETS = [
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("export DB_PASSWORD=supersecret123", "supersecret123"),
    ("client_secret: abcdefgh12345678", "abcdefgh12345678"),
    ('{"user": "bob", "password": "hunter2hunter2"}', "hunter2hunter2"),
    ("'api_key': 'a1b2c3d4e5f6a7b8'", "a1b2c3d4e5f6a7b8"),
    ("GITHUB_TOKEN=ghx_notaprefix_butsecret99", "butsecret99"),
    ("postgres://admin:S3cretPassw0rd@db.example.com:5432/app", "S3cretPassw0rd"),
    ("https://user:p4ss-w0rd!@example.com/x", "p4ss-w0rd"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc here", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("key AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    # digits outside base32's 2-7 (newuser9 found both stored in clear)
    ("Here are creds AKIAQ7XJ2M4PLK9W3ZRT and more", "AKIAQ7XJ2M4PLK9W3ZRT"),
    ("AKIA1234567890ABCDEF", "AKIA1234567890ABCDEF"),
    ("ASIA0000111188889999 in the log", "ASIA0000111188889999"),
    ("ghp_" + "a1B2" * 9, "ghp_"),
    ("OPENAI_API_KEY=sk-proj-" + "x9Y8" * 10, "x9Y8x9Y8"),
    ("password: correcthorsebattery", "correcthorsebattery"),
    ("password: short", "short"),  # a secret-named key's value whatever its length
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", "abcdefghijklmnopqrstuvwxyz0123"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA"),
]


@pytest.mark.parametrize("text,secret", SECRETS)
def test_secret_is_redacted(text, secret):
    out = redact(text)
    assert secret not in out
    assert "[REDACTED:" in out


KEPT = [
    '"input_tokens": 12345678, "output_tokens": 23456789',  # usage counts are not secrets
    "max_tokens: 40960000",
    'password = os.environ["DB_PASSWORD"]',  # an index, not a value
    "api_key = get_api_key(config)",  # a call
    "SECRET_KEY=${SECRET_KEY}",  # a variable
    "api_key: <your-api-key-here>",  # a placeholder
    "git@github.com:org/repo.git",  # not a URL with a password
    "http://localhost:8080/api/users",
    "the secretary said hello",
]


@pytest.mark.parametrize("text", KEPT)
def test_lookalikes_are_kept(text):
    assert redact(text) == text


#: a password made of punctuation (a Crush session's docker-compose file held one of
#: this shape as POSTGRES_PASSWORD): the key/value rule stopped at its ``(`` and kept it
#: as a call. Value runs to whitespace, the line's end or the closing quote.
PUNCT_PW = "a!b@c$d()e*_,/:;=?@ff[]22"
PUNCT_FORMS = [
    f"PGPASSWORD: {PUNCT_PW}",  # YAML
    f"POSTGRES_PASSWORD: {PUNCT_PW}\nnext: line",
    f"PGPASSWORD={PUNCT_PW}",  # env
    f"export POSTGRES_PASSWORD={PUNCT_PW} && psql",
    f'{{"POSTGRES_PASSWORD": "{PUNCT_PW}"}}',  # JSON
    f'"env: {{\\"POSTGRES_PASSWORD\\": \\"{PUNCT_PW}\\"}}\\nPGPASSWORD: {PUNCT_PW}\\n"',  # JSON-escaped
    f"services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD={PUNCT_PW}\n",  # docker-compose
    f'    environment:\n      - "POSTGRES_PASSWORD={PUNCT_PW}"\n      APP_SECRET: "{PUNCT_PW}"\n',
    f"API_TOKEN: {PUNCT_PW}",
]


@pytest.mark.parametrize("text", PUNCT_FORMS)
def test_punctuation_password_is_redacted_and_its_key_kept(text):
    out = redact(text)
    for part in ("a!b@c", "e*_,/", "ff[]22", "@ff"):
        assert part not in out, out
    assert "[REDACTED:password]" in out
    assert ("PASSWORD" in out) or ("TOKEN" in out)
    for key in ("PGPASSWORD", "POSTGRES_PASSWORD", "APP_SECRET", "API_TOKEN"):
        assert text.count(key) == out.count(key)


PUNCT_KEPT = [
    "password: String::from(user_input),",  # a call
    "token: Optional[str] = None",  # a type
    "password: getpass.getpass(prompt),",
    "token: (optional) the token to use",  # prose
    "password: [];",
    "max_token=len(x),",
]


@pytest.mark.parametrize("text", PUNCT_KEPT)
def test_punctuation_after_a_password_key_in_code_is_kept(text):
    assert redact(text) == text

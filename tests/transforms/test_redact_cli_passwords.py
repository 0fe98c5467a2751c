"""newuser18 F20, F21: passwords on a command line (``mysql -pPASS``, ``sshpass -p PASS``:
how agents run these tools in a shell tool call), a Discord webhook's token (anyone with
the URL posts as the bot), and values that stop where their field does (a connection
string's ``;``, a query string's ``&``): the redaction took ``;Encrypt=true;…`` and
``&format=json`` with the value, so text that is no secret left the store."""

from __future__ import annotations

import json

import pytest

from ctxkeep.sinks.vault import redact_raw
from ctxkeep.transforms.redact import redact

DISCORD = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdEfGhIjKlMnOpQrStUvWxYz01234"

CASES = [
    ("mysql -u root -pMyNu18Passw0rd prod", "mysql -u root -p[REDACTED:password] prod"),
    (
        "mysqldump -h db -u admin -p'Nu18Passw0rd!x' shop",
        "mysqldump -h db -u admin -p'[REDACTED:password]' shop",
    ),
    ("sshpass -p SshNu18pass ssh ops@host", "sshpass -p [REDACTED:password] ssh ops@host"),
    ("sshpass -pSshNu18pass scp f ops@host:", "sshpass -p[REDACTED:password] scp f ops@host:"),
    (
        "Server=tcp:acme.database.windows.net,1433;Database=prod;User ID=admin;Password=Pa55w0rd-Nu18-conn;"
        "Encrypt=true;TrustServerCertificate=false;",
        "Server=tcp:acme.database.windows.net,1433;Database=prod;User ID=admin;Password=[REDACTED:password];"
        "Encrypt=true;TrustServerCertificate=false;",
    ),
    (
        'curl "https://api.example.com/v1/data?api_key=Q9wE8rT7yU6iO5pA4sD3fG2h&format=json"',
        'curl "https://api.example.com/v1/data?api_key=[REDACTED:password]&format=json"',
    ),
    (
        f"webhook https://discord.com/api/webhooks/112233445566778899/{DISCORD}",
        "webhook https://discord.com/api/webhooks/112233445566778899/[REDACTED:discord-webhook]",
    ),
    # kept: no password given (mysql prompts), a -p that is another tool's flag, a
    # punctuation password with no field after it
    ("mysql -u root -p prod", "mysql -u root -p prod"),
    (
        "mkdir -p build/out && python -m pytest -p no:cacheprovider",
        "mkdir -p build/out && python -m pytest -p no:cacheprovider",
    ),
    ("POSTGRES_PASSWORD: a!b@c$d()e*_,/:;=?@ff[]22", "POSTGRES_PASSWORD: [REDACTED:password]"),
]


@pytest.mark.parametrize(("text", "want"), CASES)
def test_command_line_passwords_and_field_ends(text, want):
    assert redact(text) == want


def test_the_vaults_raw_lines_alike():
    for text, want in CASES[:7]:
        line = json.dumps({"type": "user", "message": {"content": text}}, separators=(",", ":")).encode()
        new, _ = redact_raw(line)
        assert json.loads(new)["message"]["content"] == want, text

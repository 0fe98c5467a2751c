"""Acceptance: secrets written with JSON ``\\uXXXX`` escapes (one character, every
character, an escaped ``=`` or ``:`` between key and value, Go's escaped ``<``/``>``
around a private key, beside surrogate pairs and a lone surrogate, one level deeper in
JSON text inside a string: ``fixtures.secrets.unicode_escapes``) reach no byte ctxkeep
writes: the store's files, the vault's generations decoded from their zstd packs,
the DuckDB tables, and the files ``vault restore --to`` writes back, each read with
every ``\\uXXXX`` escape (at any depth) decoded. The clean lines restore byte-identical.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from fixtures.secrets.unicode_escapes import CLEAN_LINES, session

runner = CliRunner()

_U = re.compile(r"\\+u([0-9a-fA-F]{4})")


def decoded(blob: bytes) -> str:
    """``blob`` (any bytes) as text with every ``\\uXXXX`` escape below U+0080, at any
    depth of JSON text, decoded: the forms a leak could take."""
    text = blob.decode("latin-1")
    return _U.sub(lambda m: chr(int(m.group(1), 16)) if int(m.group(1), 16) < 0x80 else m.group(0), text)


def leaks(name: str, blob: bytes, secrets: list[str]) -> list[tuple[str, str]]:
    view = decoded(blob)
    return [(s[:10] + "…", name) for s in secrets if s in view]


@pytest.mark.slow
def test_unicode_escaped_secrets_reach_no_byte_ctxkeep_writes(tmp_path):
    from test_secret_planted_home import _duckdb_strings, _vault_bytes

    data, secrets = session()
    home = tmp_path / "home"
    f = home / ".claude" / "projects" / "-tmp-bad-input" / "5e551011-0000-4000-8000-000000000001.jsonl"
    f.parent.mkdir(parents=True)
    f.write_bytes(data)
    assert all(s in decoded(data) for s in secrets)  # the fixture holds them (the check sees them)
    store, out = tmp_path / "ctxhome", tmp_path / "restored"
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0"}

    def run(*args):
        r = runner.invoke(app, list(args), env=e)
        assert r.exit_code == 0, (args, r.output)
        return r

    run("ingest")
    r = run("vault", "restore", "5e551011", "--to", str(out), "--json")
    files = json.loads(r.stdout)["files"]
    assert len(files) == 1, files
    restored = [p for p in out.rglob("*") if p.is_file()]
    assert len(restored) == 1
    back = restored[0].read_bytes()
    # every line still JSON, the clean ones byte-identical
    assert [json.loads(ln)["uuid"] for ln in back.splitlines()] == [
        json.loads(ln)["uuid"] for ln in data.splitlines()
    ]
    assert back.splitlines()[-CLEAN_LINES:] == data.splitlines()[-CLEAN_LINES:]
    found = []
    for p in [*store.rglob("*"), *restored]:
        if p.is_file():
            found += leaks(str(p.relative_to(tmp_path)), p.read_bytes(), secrets)
            if p.suffix == ".duckdb":
                found += leaks(f"{p.name} (tables)", _duckdb_strings(p), secrets)
    vault = _vault_bytes(store)
    assert len(vault) == 1
    for name, blob in vault:
        found += leaks(name + " (decoded)", blob, secrets)
    assert found == [], found
    # one redaction at least per secret line (8 lines hold one)
    assert sum(files[0]["redactions"].values()) >= 8, files

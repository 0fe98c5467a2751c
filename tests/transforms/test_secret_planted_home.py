"""Acceptance (issue 24): fake credentials planted in every place a session carries text
reach no byte of any file ctxkeep writes.

Planted (the labelled set ``fixtures.secrets.positives`` and the issue-24 formats
``fixtures.secrets.issue_formats``): a Claude Code session (user text, a Write tool's
``.env`` content as JSON-escaped text, a tool result, a thinking block, a malformed
line that goes to quarantine), a Codex rollout (user message, reasoning summary, a
``function_call``'s JSON-escaped ``arguments``, its output, the agent's message; the
line shapes of codex-rs 0.146 as in the corpus' rollouts) and a Gemini CLI chat (user
text, thoughts, a tool call's args and result; ``~/.gemini/tmp/<hash>/chats``). Then
``ingest``, ``backup``, ``export parquet --with-text``, ``compress`` (the Claude and
Codex files), ``redact --rescan``, and every byte of every file under the ctxkeep
home and the lake is scanned for each value, raw and JSON-escaped, and so is every
string of the compressed stores read back (Parquet files, DuckDB tables, the vault's
generations): 0 found.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from fixtures.secrets.planted_home import plant

runner = CliRunner()


@pytest.mark.slow
def test_planted_credentials_reach_no_byte_of_the_home_or_the_lake(tmp_path):
    home = tmp_path / "home"
    claude, codex, _gemini, values = plant(home)
    store, lake = tmp_path / "ctxhome", tmp_path / "lake"
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0"}

    def run(*args):
        r = runner.invoke(app, list(args), env=e)
        assert r.exit_code == 0, (args, r.output)
        return r

    run("ingest")
    st = json.loads(run("stats", "--json").stdout)
    assert {"claude-code", "codex", "gemini-cli"} <= set(st["agents"]), st["agents"].keys()
    assert st["quarantine"]["skipped"] >= 1
    kinds = set(st["redactions"]["texts"])
    # the maintained table's kinds and ctxkeep's context rules' both reached the store
    assert {"digitalocean-pat", "age-secret-key", "aws-secret-key", "private-key-hex", "password"} <= kinds
    run("backup")
    run("export", "parquet", str(lake), "--with-text")
    r = run("compress", str(claude), str(codex), "--keep-messages", "3", "--force", "--no-prefect", "--json")
    assert json.loads(r.stdout)["compressed"] == 2, r.stdout
    run("redact", "--rescan")
    files = [p for root in (store, lake) for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "store.db" for p in files) and any(p.suffix == ".parquet" for p in files)
    assert any("backups" in p.parts for p in files)
    views = [(str(p.relative_to(tmp_path)), p.read_bytes()) for p in files]
    # compressed stores are read back decoded too: every string of every Parquet file
    # (lake, archive) and DuckDB table, and every vault generation's bytes
    views += [
        (str(p.relative_to(tmp_path)) + " (decoded)", _parquet_strings(p))
        for p in files
        if p.suffix == ".parquet"
    ]
    views += [
        (str(p.relative_to(tmp_path)) + " (decoded)", _duckdb_strings(p))
        for p in files
        if p.suffix == ".duckdb"
    ]
    vault = _vault_bytes(store)
    assert len(vault) >= 3, "the vault holds the three planted sessions"
    views += vault
    leaked = {}
    for name, blob in views:
        for v in values:
            for form in {v, json.dumps(v)[1:-1], json.dumps(json.dumps(v))[3:-3]}:
                if form.encode() in blob:
                    leaked.setdefault(v[:12] + "…", []).append(name)
    assert leaked == {}, leaked


def _parquet_strings(p) -> bytes:
    import polars as pl

    df = pl.read_parquet(p)
    cols = [c for c, t in df.schema.items() if t == pl.String]
    return "\n".join(x for c in cols for x in df[c].drop_nulls().to_list()).encode("utf-8", "surrogatepass")


def _duckdb_strings(p) -> bytes:
    import duckdb

    con = duckdb.connect(str(p), read_only=True)
    try:
        out = []
        for (t,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type='BASE TABLE'"
        ).fetchall():
            cols = [
                c
                for c, ty in con.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?", [t]
                ).fetchall()
                if ty == "VARCHAR"
            ]
            for c in cols:
                out += [
                    x for (x,) in con.execute(f'SELECT "{c}" FROM "{t}" WHERE "{c}" IS NOT NULL').fetchall()
                ]
        return "\n".join(out).encode("utf-8", "surrogatepass")
    finally:
        con.close()


def _vault_bytes(store) -> list[tuple[str, bytes]]:
    from contextlib import closing

    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.vault import manifest

    with closing(sqlite_store.connect(store, readonly=True)) as conn:
        return [(f"vault:{g.path}", manifest.gen_bytes(conn, store, g)) for g in manifest.generations(conn)]

"""``ctxkeep redact --rescan`` (``maintenance.redact_rescan``): a store ingested
before the redaction rules existed (redaction switched off for the ingest) is
re-redacted in place — entry texts with their chunks and both FTS5 tables, the
quarantine, text media, the Parquet archive and DuckDB — and the run counts the values
per kind. The planted values come from the labelled set (``fixtures.secrets``) and are
looked for in every byte of every store file, as ``test_redact_store`` does for ingest."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import fts_entries
from ctxkeep.maintenance.redact_rescan import run_rescan
from ctxkeep.pipeline import engine
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.transforms import redact as redact_mod
from fixtures.bad_input import line, rec
from fixtures.secrets import planted_session, positives

SID = "5e551011-0000-4000-8000-000000000001"


def _no_redaction(monkeypatch):
    """Ingest as a version without rules would: every redaction entry point is identity."""
    import polars as pl

    from ctxkeep.pipeline import stable_ids
    from ctxkeep.transforms import normalize

    monkeypatch.setattr(normalize, "redact_expr", lambda col="text": pl.col(col))
    monkeypatch.setattr(stable_ids, "ONE_CALL", False)  # texts not redacted ahead with the raw lines
    monkeypatch.setattr(redact_mod, "redact", lambda t: t)
    monkeypatch.setattr(redact_mod, "redact_bytes", lambda b: bytes(b))


def _home_with(tmp_path: Path, data: bytes) -> DiscoveryContext:
    """A user home whose one Claude Code session file holds ``data``."""
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-rescan"
    proj.mkdir(parents=True)
    (proj / f"{SID}.jsonl").write_bytes(data)
    return DiscoveryContext(home=home, env={})


def _leaks(store: Path, values: set[str]) -> list[str]:
    blob = b"".join(p.read_bytes() for p in store.rglob("*") if p.is_file())
    return sorted(v for v in values if v.encode() in blob or json.dumps(v)[1:-1].encode() in blob)


def _snapshot(store: Path) -> dict:
    c = sqlite3.connect(f"file:{store}/store.db?mode=ro", uri=True)
    try:
        return {
            t: c.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
            for t in ("entries", "contents", "chunks", "quarantine", "media")
        }
    finally:
        c.close()


@pytest.fixture
def unredacted(tmp_path, monkeypatch):
    """A store holding the labelled secrets in clear: a Claude Code session (a user
    message, a Write tool's .env as JSON-escaped text, a malformed line), one of its
    entries archived to Parquet and a text media row. Returns (store, cases)."""
    cases = positives(7)
    ctx = _home_with(tmp_path, planted_session(cases))
    store = tmp_path / "store"
    with monkeypatch.context() as m:
        _no_redaction(m)
        s = engine.run_ingest(store, ctx=ctx, agents=["claude-code"])
    assert s.quarantined == 1 and s.entries_new == 3
    from ctxkeep.sinks import parquet
    from ctxkeep.sinks.sqlite import media

    conn = sqlite_store.connect(store)
    try:
        eid = conn.execute("SELECT entry_id FROM entries WHERE kind = 'tool_call'").fetchone()[0]
        media.put_media(conn, [(eid, 0, "text/plain; charset=utf-8", cases[0].text.encode())])
        # archive the user message: status archived long ago, then retention's move
        first = conn.execute(
            "SELECT entry_id FROM entries WHERE role = 'user' ORDER BY source_offset"
        ).fetchone()[0]
        with sqlite_store.write(conn):
            conn.execute("UPDATE entries SET status = 'archived' WHERE entry_id = ?", (first,))
            conn.execute(
                "INSERT INTO status_log(entry_id, status, changed_at) VALUES(?, 'archived', '2020-01-01T00:00:00.000000Z')",
                (first,),
            )
        a = parquet.archive_entries(conn, store, dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
        assert a["entries"] == 1
    finally:
        conn.close()
    return store, cases


def _expected_kinds(cases) -> Counter:
    """What today's rules find in the planted texts, counted independently of the store
    (each text once per place the store keeps it)."""
    env = "\n".join(c.text for c in cases)
    per_text = redact_mod.redact_counts(env)[1]
    return per_text


def test_rescan_redacts_every_store_file_and_counts_per_kind(unredacted):
    store, cases = unredacted
    values = {s for c in cases for s in c.secrets if s}
    leaked_before = _leaks(store, values)
    assert len(leaked_before) > len(values) // 2  # the setup stored them in clear

    dry = run_rescan(store, dry_run=True)
    before = _snapshot(store)
    assert _snapshot(store) == before and dry["dry_run"]
    assert _leaks(store, values) == leaked_before  # a dry run writes nothing

    rep = run_rescan(store)
    assert rep["kinds"] == dry["kinds"] and rep["areas"] == dry["areas"]
    assert _leaks(store, values) == []
    # every planted value of every place was counted: the .env text sits in the user
    # message (+ a prefix), the Write call's input, the quarantined line (escaped), the
    # media row (first case only) and the archived message
    env_kinds = _expected_kinds(cases)
    assert sum(rep["kinds"].values()) >= 3 * sum(env_kinds.values())
    assert set(rep["kinds"]) == set(env_kinds)
    assert rep["areas"]["quarantine"]["changed"] == 1 and rep["areas"]["media"]["changed"] == 1
    # the user message went to the archive (its content left SQLite), the Write call stayed
    assert rep["areas"]["archive"]["changed"] == 1 and rep["areas"]["contents"]["changed"] == 1
    for area in ("contents", "quarantine", "archive"):
        assert set(rep["areas"][area]["kinds"]) == set(env_kinds), area
    assert rep["areas"]["archive"]["kinds"] == dict(env_kinds)  # "here are my keys:\n" + env
    assert rep["areas"]["media"]["kinds"] == dict(redact_mod.redact_counts(cases[0].text)[1])

    # the stores agree: FTS5 finds the markers, not the values, in both tables
    assert fts_entries(store, '"REDACTED"')
    some = next(v for c in cases for v in c.secrets if v.isalnum() and len(v) > 12)
    assert not fts_entries(store, f'"{some}"')
    conn = sqlite3.connect(store / "store.db")  # a test's own store: FTS5 checks write
    try:
        for t in ("fts_words", "fts_grams"):  # raises SQLITE_CORRUPT when an index is out of step
            conn.execute(f"INSERT INTO {t}({t}, rank) VALUES('integrity-check', 1)")
        # every entry points at a content whose hash is its text's
        import hashlib

        for h in [
            r[0]
            for r in conn.execute("SELECT DISTINCT content_hash FROM entries WHERE content_hash IS NOT NULL")
        ]:
            text = sqlite_store.content_text(conn, h)
            assert text is not None and hashlib.sha256(text.encode()).hexdigest() == h
        sha, data = conn.execute("SELECT sha256, data FROM media").fetchone()
        assert hashlib.sha256(data).hexdigest() == sha
    finally:
        conn.close()

    again = run_rescan(store)  # idempotent: nothing left to change
    assert again["kinds"] == {} and all(a["changed"] == 0 for a in again["areas"].values())


def test_rescan_of_a_redacted_store_changes_nothing(tmp_path):
    store = tmp_path / "store"
    engine.run_ingest(store, ctx=_home_with(tmp_path, planted_session(positives(8))), agents=["claude-code"])
    before = _snapshot(store)
    rep = run_rescan(store)
    assert rep["kinds"] == {} and _snapshot(store) == before


def test_rescan_merges_a_text_that_becomes_equal_to_a_stored_one(tmp_path, monkeypatch):
    """Two texts that differ only in their secret are one text once redacted: the
    entries point at one content, its chunks carry both entries' facets."""
    a, b = (
        "export GITHUB_TOKEN=ghp_" + "A1b2C3d4" * 4 + "Zz9Y",
        "export GITHUB_TOKEN=ghp_" + "Q9w8E7r6" * 4 + "Xx1W",
    )
    reply = rec(2, parent=1, rtype="assistant")
    reply["message"] = {"role": "assistant", "content": [{"type": "text", "text": b}]}
    ctx = _home_with(tmp_path, line(rec(1, a)) + line(reply))
    store = tmp_path / "store"
    with monkeypatch.context() as m:
        _no_redaction(m)
        engine.run_ingest(store, ctx=ctx, agents=["claude-code"])
    rep = run_rescan(store)
    assert rep["kinds"] == {"github-token": 2} and rep["merged"] == 1
    conn = sqlite3.connect(f"file:{store}/store.db?mode=ro", uri=True)
    try:
        hashes = {h for (h,) in conn.execute("SELECT content_hash FROM entries")}
        facets = conn.execute("SELECT facets FROM chunks").fetchall()
        rows = conn.execute(
            "SELECT content_hash, agent, kind, role, tool_name, session_id, project_dir FROM entries"
        ).fetchall()
        assert conn.execute("SELECT count(*) FROM contents").fetchone()[0] == 1 == len(hashes)
    finally:
        conn.close()
    from ctxkeep.transforms import facets as fx

    assert {r[3] for r in rows} == {"user", "assistant"}
    assert facets == [(fx.merge(fx.facets_by_content(rows)[rows[0][0]]),)]  # both roles' tokens
    assert fts_entries(store, '"GITHUB_TOKEN"') and len(fts_entries(store, '"GITHUB_TOKEN"')) == 2


@pytest.mark.slow  # a subprocess
def test_cli_rescan_json_and_dry_run(unredacted):
    store, _ = unredacted
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "ctxkeep", "redact", "--home", str(store), *a], capture_output=True, text=True
    )
    dry = run("--rescan", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    d = json.loads(dry.stdout)
    real = run("--rescan")
    assert real.returncode == 0 and f"redacted {sum(d['kinds'].values()):,} values" in real.stdout, (
        real.stdout
    )
    assert json.loads(run("--rescan", "--json").stdout)["kinds"] == {}
    bad = run("--dry-run")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --dry-run needs --rescan")

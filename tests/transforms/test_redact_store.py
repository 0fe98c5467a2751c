"""No planted secret reaches any byte of any store file: every kind of the labelled
set is planted in a Claude Code session (a user message, a Write tool's ``.env``
content as JSON-escaped text, and a malformed line that goes to quarantine), the
session is ingested, and every file under the store dir (store.db, its -wal,
analytics.duckdb, archives) is scanned for each planted value."""

from __future__ import annotations

import json
from pathlib import Path

from ctxkeep.pipeline import engine
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.secrets import planted_session, positives


def test_planted_secrets_reach_no_store_byte(tmp_path):
    cases = positives(7)
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-bad-input"
    proj.mkdir(parents=True)
    (proj / "5e551011-0000-4000-8000-000000000001.jsonl").write_bytes(planted_session(cases))
    store = tmp_path / "store"
    s = engine.run_ingest(store, ctx=DiscoveryContext(home=home, env={}), agents=["claude-code"])
    assert s.quarantined == 1 and s.entries_new >= 3
    conn = sqlite_store.connect(store, readonly=True)
    try:
        assert conn.execute("SELECT count(*) FROM quarantine WHERE raw_sha256 IS NOT NULL").fetchone()[0] == 1
        stored = "".join(t for (t,) in conn.execute("SELECT text FROM chunks"))
    finally:
        conn.close()
    assert "[REDACTED:" in stored and "here are my keys" in stored
    files = [p for p in store.rglob("*") if p.is_file()]
    assert any(p.name == "store.db" for p in files)
    blob = b"".join(Path(p).read_bytes() for p in files)
    values = {s for c in cases for s in c.secrets if s}
    leaked = sorted(v for v in values if v.encode() in blob or json.dumps(v)[1:-1].encode() in blob)
    assert leaked == [], leaked
    # the vault's packs are compressed: their objects, read back, hold none either
    from ctxkeep.sinks.vault import manifest

    conn = sqlite_store.connect(store, readonly=True)
    try:
        gens = manifest.generations(conn)
        vault = b"".join(manifest.gen_bytes(conn, store, g) for g in gens)
    finally:
        conn.close()
    assert gens and b"[REDACTED:" in vault
    leaked = sorted(v for v in values if v.encode() in vault or json.dumps(v)[1:-1].encode() in vault)
    assert leaked == [], leaked

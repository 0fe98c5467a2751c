"""``stats`` counts redacted values per kind, never the values (``query.stats.redaction_counts``):
the expected counts come from running the rules on the texts the test wrote, apart
from the store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from ctxkeep.pipeline import engine
from ctxkeep.query import stats
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.transforms import redact as redact_mod
from fixtures.bad_input import line, rec
from fixtures.secrets import positives

SID = "5e551011-0000-4000-8000-0000000000aa"


@pytest.fixture
def planted(tmp_path):
    """A store of one Claude Code session: one user message per labelled case, one
    case's text twice (stored once), a secret whose marker straddles a chunk boundary
    (4,096 bytes), and a malformed line holding secrets (quarantined). Returns
    (store, expected texts Counter, expected quarantine Counter, the values)."""
    cases = positives(5)
    texts = [c.text for c in cases]
    gh = "ghp_" + "Zq7Xw2Lm9Np4Rt6Vb8Yc1Df3Gh5Jk0Ms2Ua"
    long = "a" * 4090 + "/" + gh + " tail"  # the marker starts 5 bytes before the cut
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-stats"
    proj.mkdir(parents=True)
    data = b"".join(line(rec(i + 1, t)) for i, t in enumerate([*texts, texts[0], long]))
    bad = ("password=" + "Hx" * 9 + "99 and " + gh).encode()
    data += b'{"type":"user","uuid":"q","message":{"content":"' + bad + b'"},,}\n'
    (proj / f"{SID}.jsonl").write_bytes(data)
    store = tmp_path / "store"
    s = engine.run_ingest(store, ctx=DiscoveryContext(home=home, env={}), agents=["claude-code"])
    assert s.quarantined == 1
    want = Counter()
    # distinct texts once redacted: two cases that differ only in the secret are one text
    for _, c in {
        redact_mod.redact_counts(t)[0]: redact_mod.redact_counts(t)[1] for t in [*texts, long]
    }.items():
        want.update(c)
    want_q = redact_mod.redact_counts(data.splitlines()[-1].decode())[1]
    values = {v for c in cases for v in c.secrets if v} | {gh}
    return store, want, want_q, values


def test_counts_per_kind_match_the_rules_on_the_written_texts(planted):
    store, want, want_q, _ = planted
    conn = sqlite_store.connect(store, readonly=True)
    try:
        # the long text's marker really is cut by the chunk boundary
        chunks = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY chunk_id")]
        assert any(t.endswith("[REDA") or "[REDACTED:github-token]" not in t and "[RED" in t for t in chunks)
        r = stats.redaction_counts(conn)
        s = stats.store_stats(conn, store)
    finally:
        conn.close()
    assert r["texts"] == dict(want) and sum(want.values()) > 20
    assert r["quarantine"] == dict(want_q) and "password" in want_q
    assert r["total"] == sum(want.values()) + sum(want_q.values())
    assert s["redactions"] == r
    from ctxkeep.service.stats import Redactions

    line_ = Redactions(**r).line()
    assert line_.startswith(f"redacted values, counted per distinct text: {r['total']:,} (")
    assert "github-token" in line_ and f"in {r['texts_with_redactions']:,} distinct texts" in line_


def test_without_the_fts_index_the_chunks_are_scanned(planted):
    store, want, _, _ = planted
    import sqlite3

    conn = sqlite3.connect(store / "store.db")  # the test's own store
    try:
        conn.execute("DROP TABLE fts_words")
        assert stats.redaction_counts(conn)["texts"] == dict(want)
    finally:
        conn.close()


def test_marker_pattern_is_the_redaction_modules():
    assert stats.MARKER_RE.pattern == redact_mod.MARKER_RE.pattern


@pytest.mark.slow  # a subprocess
def test_cli_stats_shows_counts_never_values(planted):
    store, want, _, values = planted
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "ctxkeep", "stats", "--home", str(store), *a], capture_output=True, text=True
    )
    j = run("--json")
    assert j.returncode == 0, j.stderr
    assert json.loads(j.stdout)["redactions"]["texts"] == dict(want)
    t = run()
    assert "redacted values, counted per distinct text: " in t.stdout
    for out in (j.stdout, t.stdout):
        assert not [v for v in values if v in out]

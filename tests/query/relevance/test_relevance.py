"""Relevance of search over the real corpus: recall@3 and MRR of the queries in
``queries.json`` (see its ``_about``). Requires recall@3 ≥ 0.9."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import CORPUS_HOME
from ctxkeep.query.search import search
from ctxkeep.sinks import sqlite as sqlite_store

QUERIES = json.loads((Path(__file__).parent / "queries.json").read_text(encoding="utf-8"))["queries"]


@pytest.fixture(scope="module")
def relevance_store(tmp_path_factory):
    """The whole corpus ingested into a fresh store (every agent's source: the CJK
    queries land in the Aider history, two others in the SpecStory export)."""
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    home = tmp_path_factory.mktemp("relevance")
    run_ingest(home, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
    conn = sqlite_store.connect(home)
    yield conn
    conn.close()


def _rank(conn, q: dict) -> int | None:
    """1-based rank of the wanted entry among the top 10, or None."""
    res = search(conn, q["q"], limit=10)
    for i, h in enumerate(res.hits, 1):
        # "session" names a session id prefix, or an agent (aider, specstory)
        if not (h.session_id.startswith(q["session"]) or h.agent == q["session"]):
            continue
        row = conn.execute("SELECT content_hash FROM entries WHERE entry_id = ?", (h.entry_id,)).fetchone()
        text = sqlite_store.content_text(conn, row[0]) or ""
        if q["expect"] in text:
            return i
    return None


def test_expected_entries_exist(relevance_store):
    """Every expected entry is in the store (so a miss is a ranking miss)."""
    missing = []
    for q in QUERIES:
        n = relevance_store.execute(
            "SELECT count(*) FROM entries e JOIN contents c ON c.content_hash = e.content_hash "
            "JOIN chunks ch ON ch.content_id = c.content_id "
            "WHERE e.session_id LIKE ? AND instr(ch.text, ?) > 0",
            (q["session"] + "%", q["expect"]),
        ).fetchone()[0]
        if not n:
            missing.append(q["q"])
    assert missing == []


def test_recall_at_3_and_mrr(relevance_store):
    assert len(QUERIES) >= 30
    ranks = {q["q"]: _rank(relevance_store, q) for q in QUERIES}
    recall3 = sum(1 for r in ranks.values() if r and r <= 3) / len(ranks)
    mrr = sum(1 / r for r in ranks.values() if r) / len(ranks)
    misses = {q: r for q, r in ranks.items() if not r or r > 3}
    print(
        f"\nrelevance: {len(ranks)} queries, recall@3 {recall3:.3f}, MRR {mrr:.3f}; "
        f"outside the top 3: {misses}"
    )
    by_type: dict[str, list] = {}
    for q in QUERIES:
        by_type.setdefault(q["type"], []).append(ranks[q["q"]])
    for t, rs in sorted(by_type.items()):
        print(f"  {t}: {sum(1 for r in rs if r and r <= 3)}/{len(rs)} in top 3")
    assert recall3 >= 0.9, misses

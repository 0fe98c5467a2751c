"""Rendering of hits from hand-made candidates: titles, duplicates, score rounding and
the fields a hit takes from its newest entry."""

from __future__ import annotations

from ctxkeep.query.search import render
from ctxkeep.query.search.retrieve import Candidate
from ctxkeep.schema import EntryRef


def _cand(total: int, n_entries: int) -> Candidate:
    es = [
        EntryRef(
            entry_id=f"e{i}",
            agent="codex",
            session_id="s1",
            project_dir="/p",
            ts=f"2025-06-0{9 - i}T00:00:00.000000Z",
            role="tool",
            kind="tool_result",
            tool_name="Read",
        )
        for i in range(n_entries)
    ]
    return Candidate(
        chunk_id=7,
        seq=2,
        title="chunk title",
        text="alpha beta gamma delta",
        content_id=3,
        content_hash="h",
        token_estimate=123,
        bytes=456,
        entries=es,
        total=total,
    )


def test_title_is_cut_to_120_characters_with_a_mark():
    assert render.title_of(None) == ""
    assert render.title_of("t" * 120) == "t" * 120
    assert render.title_of("t" * 121) == "t" * 119 + "…"


def test_hit_takes_its_newest_entry_and_counts_duplicates_and_folded_hits():
    h = render.to_hit(
        _cand(total=5, n_entries=3),
        title="T",
        ts=["gamma"],
        score=0.0123456789,
        matched=["words", "exact"],
        folded=2,
    )
    assert (h.entry_id, h.ts, h.kind, h.tool_name) == (
        "e0",
        "2025-06-09T00:00:00.000000Z",
        "tool_result",
        "Read",
    )
    # the content's title (``retrieve.titles``: without a tool name) led by the shown entry's tool
    assert (h.title, h.token_estimate, h.bytes, h.chunk, h.score) == ("Read T", 123, 456, 2, 0.012346)
    assert h.duplicates == 5 - 1 + 2 and h.matched == ["words", "exact"]
    assert h.snippet == "alpha beta gamma delta"
    # the loaded entries count when the index-only total is smaller (never below)
    assert (
        render.to_hit(
            _cand(total=0, n_entries=3), title=None, ts=[], score=0, matched=[], folded=0
        ).duplicates
        == 2
    )

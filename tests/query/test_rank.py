"""Ranking of search hits, on hand-made candidates with exact values: reciprocal rank
fusion (k = 60, ranks 1-based), list weights (tool and grams_all count double), the
prior per kind, ties to the newer entry, and the folding of near-duplicates."""

from __future__ import annotations

import pytest

from ctxkeep.query.search import rank
from ctxkeep.query.search.retrieve import Candidate
from ctxkeep.schema import EntryRef


def entry(
    kind: str = "message",
    ts: str = "2025-06-01T00:00:00.000000Z",
    session: str = "s1",
    tool: str | None = None,
    eid: str = "e",
) -> EntryRef:
    return EntryRef(
        entry_id=eid,
        agent="codex",
        session_id=session,
        project_dir="/p",
        ts=ts,
        role="assistant",
        kind=kind,
        tool_name=tool,
    )


def cand(
    content_id: int, *entries: EntryRef, text: str = "", title: str = "", chunk_id: int | None = None
) -> Candidate:
    return Candidate(
        chunk_id=content_id if chunk_id is None else chunk_id,
        seq=0,
        title=title,
        text=text,
        content_id=content_id,
        content_hash=f"h{content_id}",
        token_estimate=10,
        bytes=40,
        entries=list(entries or [entry()]),
        total=len(entries or [1]),
    )


# ---------------------------------------------------------------- fusion and weights


def test_rrf_score_is_weight_over_60_plus_the_1_based_rank():
    shown = {1: cand(1), 2: cand(2), 3: cand(3)}
    sc = rank.scores({"words": [1, 2, 3], "any": [3, 1]}, shown)
    assert sc[1] == pytest.approx(1 / 61 + 1 / 62)
    assert sc[2] == pytest.approx(1 / 62)
    assert sc[3] == pytest.approx(1 / 63 + 1 / 61)
    assert round(sc[1], 6) == 0.032522  # the figure itself, not only the formula


def test_tool_and_grams_all_lists_count_double():
    shown = {1: cand(1), 2: cand(2), 3: cand(3)}
    sc = rank.scores({"tool": [1], "grams_all": [2], "grams": [3]}, shown)
    assert sc == pytest.approx({1: 2 / 61, 2: 2 / 61, 3: 1 / 61})


def test_kind_prior_multiplies_the_fused_score():
    kinds = ["message", "summary", "tool_call", "tool_result", "thinking", "meta"]
    shown = {i: cand(i, entry(kind=k)) for i, k in enumerate(kinds)}
    sc = rank.scores({"words": list(range(len(kinds)))}, shown)
    assert [round(sc[i] * (61 + i), 6) for i in range(len(kinds))] == [1.0, 1.0, 0.85, 0.85, 0.85, 0.5]
    assert sc[5] == pytest.approx(0.5 / 66)


def test_a_text_held_by_several_entries_counts_as_its_best_kind():
    shown = {1: cand(1, entry(kind="meta"), entry(kind="tool_result")), 2: cand(2, entry(kind="meta"))}
    sc = rank.scores({"words": [1, 2]}, shown)
    assert sc == pytest.approx({1: 0.85 / 61, 2: 0.5 / 62})


def test_kind_prior_reorders_the_fusion():
    """A message ranked second beats a tool call ranked first (1/62 > 0.85/61), and a
    meta record found by two lists falls behind a message found by one."""
    shown = {1: cand(1, entry(kind="tool_call")), 2: cand(2), 3: cand(3, entry(kind="meta"))}
    assert rank.fuse({"words": [1, 2]}, shown) == [2, 1]
    # message 2/62 = 0.03226 > meta 0.5 * 2/61 = 0.01639 > tool call 0.85/63 = 0.01349
    # (without the prior the meta record, 2/61 = 0.03279, would come first)
    assert rank.fuse({"words": [3, 2, 1], "any": [3, 2]}, shown) == [2, 3, 1]


def test_a_list_hit_outweighs_a_worse_rank_by_exactly_the_rrf_curve():
    # rank 1 in one list (1/61 = 0.016393) loses to ranks 2 and 40 in two (1/62 + 1/100 = 0.026129)
    filler = list(range(100, 139))
    shown = {i: cand(i) for i in [1, 2, *filler]}
    order = rank.fuse({"words": [1, 2], "any": [*filler, 2]}, shown)
    assert order[:2] == [2, 1]
    assert rank.scores({"words": [1, 2], "any": [*filler, 2]}, shown)[2] == pytest.approx(1 / 62 + 1 / 100)


def test_equal_scores_go_to_the_newer_entry():
    shown = {
        1: cand(1, entry(ts="2025-01-01T00:00:00.000000Z")),
        2: cand(2, entry(ts="2025-06-01T00:00:00.000000Z")),
        3: cand(3, entry(ts=None)),
    }
    # the same rank in lists of the same weight: equal scores
    assert rank.fuse({"words": [1], "any": [2], "prefix": [3]}, shown) == [2, 1, 3]
    assert rank.fuse({"words": [2], "any": [1], "prefix": [3]}, shown) == [2, 1, 3]


# ---------------------------------------------------------------- one list


def test_one_candidate_per_content_at_its_best_chunk_ties_to_the_newer():
    old, new = entry(ts="2025-01-01T00:00:00.000000Z"), entry(ts="2025-02-01T00:00:00.000000Z")
    cache = {
        10: cand(1, old, chunk_id=10),
        11: cand(1, old, chunk_id=11),
        20: cand(2, new, chunk_id=20),
        30: cand(3, old, chunk_id=30),
        40: None,
    }
    rows = [(10, -5.0), (40, -9.0), (30, -3.0000000001), (20, -3.0), (11, -7.0), (99, -8.0)]
    ranked = rank.ranked_contents(rows, cache)
    # content 1 by its best chunk (11, rank -7); 2 and 3 tie to 9 decimals: newer first;
    # chunk 40 (no passing entry) and 99 (not loaded) are skipped
    assert [(c.content_id, c.chunk_id) for c in ranked] == [(1, 11), (2, 20), (3, 30)]
    rows[2] = (30, -3.001)
    assert [c.content_id for c in rank.ranked_contents(rows, cache)] == [1, 3, 2]


# ---------------------------------------------------------------- folding


def test_near_duplicates_of_one_session_kind_tool_and_title_are_folded():
    e = entry(kind="tool_result", tool="Read")
    shown = {
        1: cand(1, e, text="a b c d e"),  # kept
        2: cand(2, e, text="a b c d f"),  # 4 of 6 words shared: folded into 1
        3: cand(3, e, text="a b c"),  # 3 of 5 = 0.6 with 1: folded (≥)
        4: cand(4, e, text="a b x y z"),  # 2 of 8: kept
        5: cand(5, entry(kind="tool_result", tool="Read", session="s2"), text="a b c d e"),
        6: cand(6, entry(kind="tool_call", tool="Read"), text="a b c d e"),
        7: cand(7, e, text="a b c d e"),
    }  # other title: kept
    titles = {
        1: "file.py",
        2: "file.py",
        3: "  file.py ",
        4: "file.py",
        5: "file.py",
        6: "file.py",
        7: "other.py",
    }
    kept, folded = rank.fold([1, 2, 3, 4, 5, 6, 7], shown, titles, limit=10)
    assert kept == [1, 4, 5, 6, 7]
    assert folded == {1: 2}


def test_folding_needs_a_title_and_compares_its_first_80_characters():
    e = entry()
    shown = {i: cand(i, e, text="same words here") for i in range(1, 5)}
    assert rank.fold([1, 2], shown, {}, limit=10) == ([1, 2], {})  # no title: never folded
    long = "x" * 80
    kept, folded = rank.fold([1, 2, 3], shown, {1: long + "a", 2: long + "b", 3: "x" * 79 + "y"}, limit=10)
    assert kept == [1, 3] and folded == {1: 1}


def test_folding_stops_at_the_limit_of_kept_hits():
    shown = {i: cand(i, text=f"w{i}") for i in range(1, 6)}
    shown[2] = cand(2, text="w1")
    kept, folded = rank.fold([1, 2, 3, 4, 5], shown, dict.fromkeys(range(1, 6), "t"), limit=2)
    assert kept == [1, 3] and folded == {1: 1}


def test_jaccard_just_below_the_threshold_is_not_folded():
    shown = {1: cand(1, text="a b c d"), 2: cand(2, text="a b c e f")}  # 3 of 6 = 0.5
    assert rank.fold([1, 2], shown, {1: "t", 2: "t"}, limit=10) == ([1, 2], {})


# ---------------------------------------------------------------- derived lists


def test_exact_list_holds_the_query_verbatim_across_title_and_whitespace():
    shown = {
        1: cand(1, text="see bd-q3fy  now", title=""),
        2: cand(2, text="bd q3fy"),
        3: cand(3, title="BD-Q3FY", text="body"),
    }
    assert rank.exact_list([3, 2, 1], shown, ["bd-q3fy"]) == [3, 1]
    assert rank.exact_list([1, 2], shown, []) == []
    assert rank.exact_list([1, 2, 3], shown, ["see", "BD-q3fy"]) == [1]


def test_exact_list_is_the_collapsed_text_holding_the_collapsed_query():
    """Whitespace of any kind and length (tabs, newlines, NBSP, U+2028, the title's
    newline) counts as one space, regex characters in the query are literal, a query
    word may start or end inside a text word; nothing else matches."""
    texts = [
        "run\tnpm\u00a0install  now",
        "npm\n\ninstall",
        "xnpm installer",
        "npminstall",
        "npm-install",
        "a.b (c+d)?",
        "a.b  (c+d)?",
        "axb (c+d)",
        "end npm",
        "npm\u2028install",
        "NPM INSTALL",
    ]
    shown = {i: cand(i, text=t) for i, t in enumerate(texts)}
    shown[99] = cand(99, title="npm", text="install here")
    base = sorted(shown)
    for q in (["npm", "install"], ["npm install"], ["a.b", "(c+d)?"], ["install"], ["end", "npm"]):
        needle = " ".join(" ".join(q).lower().split())
        want = [
            cid
            for cid in base
            if needle in " ".join(f"{shown[cid].title}\n{shown[cid].text}".lower().split())
        ]
        assert rank.exact_list(base, shown, q) == want
    assert rank.exact_list(base, shown, ["npm", "install"]) == [0, 1, 2, 9, 10, 99]
    assert rank.exact_list(base, shown, ["a.b", "(c+d)?"]) == [5, 6]


def test_tool_list_names_candidates_held_by_an_entry_of_that_tool():
    shown = {1: cand(1, entry(tool="Bash")), 2: cand(2, entry(), entry(tool="todowrite")), 3: cand(3)}
    assert rank.tool_list([3, 2, 1], shown, ["TodoWrite", "bash"]) == [2, 1]
    assert rank.tool_list([1, 2, 3], shown, ["grep"]) == []


def test_fold_words_are_the_lower_cased_word_runs_of_every_corpus_text(corpus_store):
    """``fold_words`` (translate and split, the regex only on pieces that are not
    ASCII) gives the words the ``\\w+`` regex finds in the lower-cased text, on every
    chunk of the corpus, on texts whose lower case changes their characters (Kelvin
    sign, dotted I, ß), and on 3,000 random texts of other characters."""
    import random
    import re
    import sqlite3

    home, _ = corpus_store
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    texts = [t for (t,) in conn.execute("SELECT text FROM chunks")]
    conn.close()
    texts += ["\u212a-Kelvin", "İstanbul_x", "Straße-STRASSE", "a\tb\x1fc\x0bd", "snake_case-and-dash", ""]
    # texts that are not ASCII (cut as UTF-8 bytes): non-ASCII spaces and punctuation
    # inside and between words, a lone surrogate, emoji, CJK
    texts += [
        "naïve ✓ café—done",
        "处理，分析一下 ok",
        "a\u00a0b\u3000c\u2028d_\u2009e",
        "x\ud800y z",
        "it’s ’quoted’",
    ]
    rnd = random.Random(14)
    pool = [chr(i) for i in range(0x20, 0x2100, 7)] + list(" _-.’✓İΣ\u00a0\ud800😀") * 20
    texts += ["".join(rnd.choice(pool) for _ in range(rnd.randint(1, 60))) for _ in range(3000)]
    assert len(texts) > 1000 and any(t.isascii() for t in texts) and not all(t.isascii() for t in texts)
    for t in texts:
        assert rank.fold_words(t) == set(re.findall(r"\w+", t.lower())), t[:80]

"""``grams_batch`` (the vectorized pre-check + cached camelCase parts used by
``chunks_frame``) must give exactly ``grams`` (the per-text reference) on every chunk
of the real corpus, and on small edge cases around its pre-checks."""

from __future__ import annotations

import sqlite3

from ctxkeep.transforms.grams import grams, grams_batch


def test_grams_batch_identical_on_all_corpus_chunks(corpus_store):
    home, summary = corpus_store
    conn = sqlite3.connect(home / "store.db")
    texts = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY chunk_id")]
    conn.close()
    assert len(texts) > 1000
    ref = [grams(t) for t in texts]
    assert grams_batch(texts) == ref
    # the corpus exercises both kinds of terms, and the skip path
    assert sum(1 for g in ref if g) > 100
    assert sum(1 for g in ref if not g) > 100


def test_grams_batch_edge_cases():
    texts = [
        "plain words only",
        "validateUserInput()",
        "JSON HTTP",
        "JSON2 x",
        "_fooBar",
        "é_fooBar",
        "fooBaré",
        "这个字段 gemini",
        "涉及gemini的处理",
        "a\u3040",
        "京",
        "HTTPServerError and xY",
        "x" * 5000 + "aB",
        "1A",
        "über fooBar",
        "fooBar_baz bazQux",
        "x—fooBar—y",
        "fooBar\u0301 q",
        "²fooBar",
        "1fooBar aB2c",
        "getX\nsetY\tHTTPServer,JSON2.parseInt(aB)",
        "日本fooBar",
        "fooBar日本 testCase",
    ]
    assert grams_batch(texts) == [grams(t) for t in texts]
    assert grams_batch([]) == []
    assert grams_batch(["validateUserInput"]) == ["validate user input |"]


def test_grams_batch_identical_on_random_mixtures():
    """20,000 seeded random strings over the characters the pre-checks treat
    differently (ASCII letters/digits, '_', word and non-word non-ASCII characters,
    a combining mark, CJK, separators): same terms as ``grams``."""
    import random

    rng = random.Random(20261129)
    alphabet = list("aBcDxYzQ09_ -.\n(") + ["é", "—", "\u0301", "²", "字", "段", "カ", "한", "Ⅻ"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(20_000)]
    ref = [grams(t) for t in texts]
    assert grams_batch(texts) == ref
    assert sum(1 for g in ref if g) > 5_000

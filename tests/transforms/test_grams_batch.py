"""``grams_batch`` (the vectorized pre-check + cached camelCase parts used by
``chunks_frame``) must give exactly ``grams`` (the per-text reference) on every chunk
of the real corpus, and on small edge cases around its pre-checks."""

from __future__ import annotations

import re
import sqlite3

from ctxkeep.transforms.grams import (
    _SYMBOL,
    _SYMBOL_CAND,
    VOCAB_TOKEN,
    _symbol_terms,
    _vocab_ok,
    grams,
    grams_batch,
    symbols,
    symbols_batch,
    vocab_terms,
)


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
    alphabet = list("aBcDxYzQ09_ -.\n(") + ["é", "—", "\u0301", "²", "字", "段", "カ", "한", "Ⅻ", "١", "ß"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(20_000)]
    ref = [grams(t) for t in texts]
    assert grams_batch(texts) == ref
    assert sum(1 for g in ref if g) > 5_000


#: the symbol-term regex as first written (two overlapping stars: quadratic in a word's
#: length); ``grams._SYMBOL`` must find exactly its matches
_SYMBOL_QUADRATIC = re.compile(
    r"(?<![A-Za-z0-9_+#])[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*[+#]+(?![A-Za-z0-9_])|\.[A-Z]{2,}(?![A-Za-z0-9_])"
)


def _symbol_texts(corpus_store) -> list[str]:
    import random

    home, _ = corpus_store
    conn = sqlite3.connect(home / "store.db")
    texts = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY chunk_id")]
    conn.close()
    rng = random.Random(20261201)
    alphabet = list("aZx09_+#. \n-C") + ["é", "字"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(20_000)]
    return texts + ["c++x", "a+b", "issue#12", "C# F#", "ASP.NET", ".NETx", "x_1++", "123+", "é++", "c++"]


def test_symbol_regex_and_prefilter_match_the_reference(corpus_store):
    import polars as pl

    texts = _symbol_texts(corpus_store)
    ref = [[m.group() for m in _SYMBOL_QUADRATIC.finditer(t)] for t in texts]
    assert [[m.group() for m in _SYMBOL.finditer(t)] for t in texts] == ref
    assert sum(1 for r in ref if r) > 1_000  # the random texts hold many symbol terms
    # the Polars prefilter keeps every text that has a symbol term
    cand = pl.Series(texts, dtype=pl.String).str.contains(_SYMBOL_CAND).to_list()
    assert all(c for c, r in zip(cand, ref, strict=True) if r)
    assert not all(cand)  # and it does drop texts (a+b, issue#12, ...)


def test_symbol_terms_and_symbols_batch_match_the_per_text_scan(corpus_store):
    # the anchored scan (``_symbol_terms``) against ``_SYMBOL.finditer`` and the batch
    # (Polars' ASCII words) against ``symbols``, on every corpus chunk and the random
    # texts; plus the overlaps of a dot match with a word match
    texts = _symbol_texts(corpus_store) + [".NE+", "x.NE+ .NET# .NETx++ a.BC.DE+ .AB#.CD", "..NET", ".N+"]
    ref = [[m.group() for m in _SYMBOL.finditer(t)] for t in texts]
    assert [_symbol_terms(t) for t in texts] == ref
    assert symbols_batch(texts) == [symbols(t) for t in texts]
    assert sum(1 for t in symbols_batch(texts) if t) > 1_000
    # no symbol term: no row; no ASCII word of 2+ characters: an empty word list
    assert symbols_batch(["C# only", "++", "c++ x"]) == ["c# | only |", "", "c++ | |"]


def test_vocab_terms_same_as_lowercasing_every_text_first(corpus_store):
    import polars as pl

    def reference(texts):
        toks = pl.Series(texts, dtype=pl.String).str.to_lowercase().str.extract_all(VOCAB_TOKEN).explode()
        return {t for t in toks.drop_nulls().unique().to_list() if _vocab_ok(t)}

    texts = _symbol_texts(corpus_store)
    assert vocab_terms(texts) == reference(texts)
    assert len(reference(texts)) > 1_000
    odd = ["\u212aelvin Kelvin", "İstanbulXyz mixedCASEword"]  # lower case of these two is ASCII
    assert vocab_terms(odd) == reference(odd) == {"kelvin", "stanbulxyz", "mixedcaseword"}


def test_vocab_lists_union_is_vocab_terms_of_any_subset(corpus_store):
    """A reader process sends each chunk's tokens (``vocab_lists``) and the ingest takes
    the union of a group's (``vocab_union``): it must be ``vocab_terms`` of exactly those
    chunks, for any subset (a group stores only the contents the store lacks), with the
    two characters whose lower case is ASCII, hex ids, digits and over-long runs."""
    import random

    import polars as pl

    from ctxkeep.transforms.grams import vocab_lists, vocab_union

    home, _ = corpus_store
    conn = sqlite3.connect(home / "store.db")
    texts = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY chunk_id")]
    conn.close()
    edge = [
        "\u0130stanbul KELVIN \u212aelvinTemp",  # İ -> i̇ (not a token letter), Kelvin sign -> k
        "deadbeef01 deadbeefcafe 12345678 abcdefgh " + "x" * 41 + " " + "y" * 40,
        "",
        "a_b-c.d fooBarBaz fooBarBaz FOOBARBAZ",
    ]
    texts = edge + texts
    lists = vocab_lists(texts)
    assert len(lists) == len(texts)
    # per text: its own vocab_terms, each token once
    for t, v in zip(texts[:200], lists[:200], strict=True):
        assert set(v.split()) == vocab_terms([t]) and len(v.split()) == len(set(v.split()))
    assert set(lists[0].split()) == vocab_terms([texts[0]]) >= {"kelvin", "kelvintemp"}
    assert set(lists[1].split()) == {"deadbeefcafe", "abcdefgh", "y" * 40}
    rng = random.Random(7)
    for k in (1, 10, 300, len(texts)):
        pick = sorted(rng.sample(range(len(texts)), k))
        got = vocab_union(pl.Series([lists[i] for i in pick], dtype=pl.String))
        assert got == vocab_terms([texts[i] for i in pick])
    assert len(vocab_union(pl.Series(lists, dtype=pl.String))) > 500

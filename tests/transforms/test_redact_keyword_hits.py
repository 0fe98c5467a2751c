"""The maintained rules' keyword gate (``redact._keyword_hits``) finds, per text, the
keywords one overlapping, ASCII case-insensitive Aho-Corasick pass over every text finds
(``str.extract_many``, what it replaced): the common keywords looked for one by one, the
others through one regex alternation and an RE2 Set over just the texts it passes."""

from __future__ import annotations

import polars as pl

from ctxkeep.transforms import redact
from tests.conftest import CORPUS_HOME


def _pairs_by_extract_many(s: pl.Series, keywords: list[str]) -> set[tuple[int, str]]:
    found = s.str.extract_many(keywords, ascii_case_insensitive=True, overlapping=True)
    return {
        (i, k.lower())
        for i, ks in enumerate(found.to_list())
        for k in ks or []  # (a null text: none)
    }


def test_keyword_hits_are_the_keywords_every_text_holds():
    lines: list[str | None] = []
    for p in sorted(CORPUS_HOME.rglob("*.jsonl")):
        lines += p.read_bytes().decode("utf-8", "replace").splitlines()
    lines += [
        "GHP_x KEY Token tOkEn S. sK ey",  # common keywords in any case
        "xoxb-1 AKIA0 glpat- hf_ sk-ant- pypi-AgEI",  # rare ones, several in one text
        "skey",  # overlapping keywords: "sk" and "ey" and "key"
        "",
        None,
        "0123 4567 89",
    ]
    s = pl.Series(lines, dtype=pl.String)
    keywords, _, _ = redact._gates()
    got = {tuple(r) for r in redact._keyword_hits(s, keywords).unique().rows()}
    want = _pairs_by_extract_many(s, keywords)
    assert len(want) > 1000
    assert got == want
    n = len(lines)
    assert {k for i, k in got if i == n - 4} == {"sk", "ey", "key"} & set(keywords)
    assert not {k for i, k in got if i >= n - 3}


def test_hyperscan_rare_keywords_are_the_re2_sets():
    """Hyperscan's rare keywords (one id each, ASCII case folding: ``redact._hs_scan``)
    give the pairs the RE2 Set gives over the texts holding one (Unicode case folding):
    a text that also holds KELVIN SIGN or long s goes through the Set, which finds
    ``ᴋ``-spelled keywords Hyperscan does not."""
    keywords, _, _ = redact._gates()
    rare = [k for k in keywords if k not in redact._COMMON_KEYWORDS]
    with_k = next(k for k in rare if "k" in k and k.replace("k", "") != k and "xoxb" not in k)
    with_s = next(k for k in rare if "s" in k and k != with_k)
    lines: list[str | None] = []
    for p in sorted(CORPUS_HOME.rglob("*.jsonl")):
        lines += p.read_bytes().decode("utf-8", "replace").splitlines()
    planted = [
        "xoxb- and " + with_k.replace("k", "\u212a"),  # found by the Set alone
        "XOXB- and " + with_s.upper().replace("S", "\u017f"),
        with_k.upper() + " " + with_s,  # ASCII only
        "\u212a alone, no rare keyword",
        None,
        "",
    ]
    s = pl.Series(lines + planted, dtype=pl.String)
    passes, rare_hits = redact._hs_scan(s)
    got = {tuple(r) for r in redact._keyword_hits(s, keywords, passes, rare_hits).unique().rows()}
    want = {tuple(r) for r in redact._keyword_hits(s, keywords, passes).unique().rows()}
    assert len(want) > 1000
    assert got == want
    n = len(lines)
    assert (n, with_k) in got and (n + 1, with_s) in got  # through the Set
    assert {(n + 2, with_k), (n + 2, with_s)} <= got
    assert rare_hits[1] >= {n, n + 1, n + 3}
    assert passes["kw_rare"].to_list()[n:] == [True, True, True, False, False, False]

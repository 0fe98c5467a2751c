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

"""The substring index terms (transforms.grams) and what they find in a store:
two-character CJK terms, single characters, partial camelCase identifiers."""

from __future__ import annotations

import pytest

from ctxkeep.pipeline.notes import index_note
from ctxkeep.query.search import search
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.transforms.grams import camel_parts, cjk_bigrams, grams, query_grams


def test_bigrams_and_parts():
    assert cjk_bigrams("这个字段") == ["这个", "个字", "字段", "段"]
    assert cjk_bigrams("京") == ["京"]
    assert camel_parts("HTTPServerError") == ["http", "server", "error"]
    assert grams("plain words only") == ""


def test_query_grams_forms():
    assert query_grams("字段") == '"字段"'
    assert query_grams("東京都") == '"東京 京都"'
    assert query_grams("京") == '"京"*'
    assert query_grams("validateUs") == '"validate us"*'
    assert query_grams("plain") is None


@pytest.fixture
def cjk_conn(store_home):
    conn = sqlite_store.connect(store_home)
    index_note(conn, "tokyo", text="昨日は東京駅で会議をした。大阪にも行く。")
    index_note(conn, "field", text="这个字段的处理是不是有问题？请你调研一下")
    index_note(conn, "code", text="def validateUserInput(form): return HTTPServerError")
    index_note(conn, "other", text="nothing relevant here, only ascii words")
    yield conn
    conn.close()


@pytest.mark.parametrize(
    "q,label",
    [
        ("東京", "tokyo"),
        ("字段", "field"),
        ("调研", "field"),
        ("京", "tokyo"),
        ("大阪", "tokyo"),
        ("会議", "tokyo"),
        ("validateUs", "code"),
        ("UserInput", "code"),
        ("ServerError", "code"),
    ],
)
def test_substring_terms_are_found(cjk_conn, q, label):
    hits = search(cjk_conn, q).hits
    assert [h.session_id for h in hits][:1] == [label]


def test_cjk_term_absent_finds_nothing(cjk_conn):
    assert search(cjk_conn, "北京").hits == []
    # bigrams never span two runs: 駅会 is not in the text (駅で会 is)
    assert search(cjk_conn, "駅会").hits == []


def test_ascii_words_glued_to_cjk_are_terms_and_mixed_queries_match_in_one_index():
    # unicode61 makes ONE token of 涉及gemini的处理是不是有问题: the word index cannot find
    # "gemini" there; the substring index gets the chunk's ASCII words
    from ctxkeep.query.search import grams_match
    from ctxkeep.transforms.grams import grams

    g = grams("我这里涉及gemini的处理是不是有问题").split()
    assert "gemini" in g and "处理" in g
    assert grams_match("gemini 处理") == '("处理") AND ("gemini")'
    assert grams("plain english text only") == ""  # no CJK: no extra terms


def test_is_symbol_term_matches_the_plain_pattern_it_replaced():
    """``_SYMBOL_TERM`` is written without nested stars (a long query word backtracked
    ~n^2 steps through ``[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*[+#]+``): it accepts exactly
    the strings that pattern accepts, on every string of up to 5 characters over the
    characters that matter."""
    import itertools
    import re

    from ctxkeep.transforms.grams import is_symbol_term

    plain = re.compile(r"[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*[+#]+|\.[A-Za-z][A-Za-z0-9]*")
    n = 0
    for k in range(6):
        for chars in itertools.product("aZ7_+#.", repeat=k):
            s = "".join(chars)
            assert is_symbol_term(s) == bool(plain.fullmatch(s)), s
            n += 1
    assert n == 19608
    assert is_symbol_term("c++") and is_symbol_term("C#") and is_symbol_term(".NET")
    assert not is_symbol_term("a" * 3000) and not is_symbol_term("_1+")

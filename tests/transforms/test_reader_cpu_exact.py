"""The readers' faster index-term, title and hash code (issue 26, session 18) gives
exactly what the plain code it replaced gave: each plain version is kept here as the
reference, and both run on the corpus's chunk texts and on seeded random texts over
the characters the fast paths treat differently."""

from __future__ import annotations

import hashlib
import random
import re
import sqlite3

import polars as pl
import pytest

from ctxkeep.transforms.chunk import chunk_title
from ctxkeep.transforms.grams import VOCAB_TOKEN, _has_cjk_batch, _vocab_ok, has_cjk, vocab_lists
from ctxkeep.transforms.normalize import _sha256

#: line ends (``str.splitlines``), whitespace, CJK, the two characters whose lower case is
#: ASCII (U+0130, U+212A), other non-ASCII letters, ASCII letters, digits, '_'
_ALPHABET = [*"aBcDxYzQ09_ -.#\n\r\t", "\v", "\f", "\x1c", "\x85", "\u2028", "\u3000", "字", "段"]
_ALPHABET += ["\u0130", "\u212a", "é", "ß", "Ⅻ", "\u00a0", "Σ", "ς"]


def _random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(n)]


def _corpus_chunks(corpus_store) -> list[str]:
    home, _ = corpus_store
    conn = sqlite3.connect(home / "store.db")
    texts = [t for (t,) in conn.execute("SELECT text FROM chunks ORDER BY chunk_id")]
    conn.close()
    assert len(texts) > 1000
    return texts


def _plain_title(chunk: str, seq: int) -> str:
    """``chunk_title`` as it was: the first non-blank line of ``splitlines``."""
    if seq == 0:
        for line in chunk.splitlines():
            line = line.strip()
            if line:
                return line[:200]
        return ""
    return chunk_title(chunk, seq)


def _plain_vocab(text: str) -> str:
    """``vocab_lists`` of one text as it was: tokens found as written (in the text
    lower-cased first when it holds U+0130 or U+212A), lower-cased, first occurrences
    in order, those ``_vocab_ok`` keeps."""
    if "\u0130" in text or "\u212a" in text:
        text = text.lower()
    toks = dict.fromkeys(t.lower() for t in re.findall(VOCAB_TOKEN, text))
    return " ".join(t for t in toks if _vocab_ok(t))


def test_titles_as_before_on_random_texts():
    texts = _random_texts(20_000, 18) + ["", " \n\t", "\n\n  first  \nx", "\x1cA\x1cB", "a\rb", "x" * 300]
    assert [chunk_title(t, 0) for t in texts] == [_plain_title(t, 0) for t in texts]
    assert sum(1 for t in texts if chunk_title(t, 0)) > 10_000


def test_titles_as_before_on_the_corpus(corpus_store):
    texts = _corpus_chunks(corpus_store)
    assert [chunk_title(t, 0) for t in texts] == [_plain_title(t, 0) for t in texts]


@pytest.mark.parametrize("seed", [1, 2])
def test_vocab_lists_in_order_as_before(seed):
    texts = _random_texts(5_000, seed)
    texts += ["\u0130stanbulXyz KELVIN \u212aelvinTemp", "deadbeef01 ABCDEFGH abcdefgh 12345678", "Σσςxyzw"]
    assert vocab_lists(texts) == [_plain_vocab(t) for t in texts]


def test_vocab_lists_and_cjk_as_before_on_the_corpus(corpus_store):
    texts = _corpus_chunks(corpus_store)
    assert vocab_lists(texts) == [_plain_vocab(t) for t in texts]
    s = pl.Series(texts, dtype=pl.String)
    got = _has_cjk_batch(texts, s)
    assert got == [has_cjk(t) for t in texts]
    assert any(got) and not all(got)


def test_cjk_batch_as_before_on_random_texts():
    texts = _random_texts(5_000, 3) + ["", "ascii", "é only", "字"]
    got = _has_cjk_batch(texts, pl.Series(texts, dtype=pl.String))
    assert got == [has_cjk(t) for t in texts]
    assert got[-4:] == [False, False, False, True]


def test_sha256_of_the_utf8_bytes():
    values = ["", "abc", "é字\U0001f600", None, "x" * 10_000]
    want = [None if v is None else hashlib.sha256(v.encode()).hexdigest() for v in values]
    assert _sha256(pl.Series("t", values, dtype=pl.String)).to_list() == want
    assert _sha256(pl.Series("t", values, dtype=pl.String), 32).to_list() == [
        None if w is None else w[:32] for w in want
    ]


def test_parse_ts_series_as_parse_ts():
    from ctxkeep.transforms.normalize import parse_ts, parse_ts_series

    values = [
        "2025-11-14T02:04:03.702000Z",
        "2025-11-14T02:04:03Z",
        "2025-11-14T02:04:03.123456789+02:00",
        "2025-11-14T02:04:03-05:30",
        "2025-11-14T02:04:03.5",
        "2025-11-14 02:04:03.25",
        "2025-11-14 02:04:03",
        "[trimmed for fixture]",
        "",
        None,
        "2025-02-30T00:00:00Z",
        "2025-11-14T02:04:03.702000ZZ",
    ]
    rng = random.Random(5)
    values += [rng.choice(values) for _ in range(2_000)]
    s = pl.Series("ts", values, dtype=pl.String)
    want = s.to_frame().select(parse_ts(pl.col("ts")))["ts"]
    got = parse_ts_series(s)
    assert got.dtype == want.dtype == pl.Datetime("us", "UTC")
    assert got.to_list() == want.to_list()
    assert got.null_count() < len(values) // 2 and got[2] is not None and got[5] is not None
    allnull = pl.Series("ts", [None, "x"], dtype=pl.String)
    assert parse_ts_series(allnull).to_list() == [None, None]


def test_chunk_text_fits_at_the_byte_cap():
    """An ASCII text is as many bytes as characters (the fast path); a non-ASCII one of
    the same length is not."""
    from ctxkeep.transforms.chunk import MAX_CHUNK_BYTES, chunk_text

    assert chunk_text("a" * MAX_CHUNK_BYTES) == ["a" * MAX_CHUNK_BYTES]
    assert len(chunk_text("a " * (MAX_CHUNK_BYTES // 2) + "b")) == 2
    wide = "é" * (MAX_CHUNK_BYTES // 2) + "x"  # 2 bytes a character: one byte over
    assert len(wide) <= MAX_CHUNK_BYTES and len(chunk_text(wide)) == 2
    assert "".join(chunk_text(wide)) == wide
    assert chunk_text("é" * (MAX_CHUNK_BYTES // 2)) == ["é" * (MAX_CHUNK_BYTES // 2)]

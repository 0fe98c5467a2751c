"""``escapes.view`` without ``where`` (``_decoded_text``: the fast decode the vault's
raw-line scan uses) gives the text of the escape-by-escape scan (``view`` with
``where``), on random JSON-ish texts dense with backslash runs, ``\\uXXXX`` escapes
(surrogate pairs, lone surrogates, ``\\u005c`` decoding to a backslash), quotes and keep
ranges."""

from __future__ import annotations

import random

from ctxkeep.transforms import escapes

ALPHABET = [
    "\\",
    "\\",
    "\\",
    "u",
    "n",
    "t",
    "r",
    '"',
    "/",
    "a",
    "\n",
    "0",
    "0",
    "5",
    "c",
    "d",
    "8",
    "3",
    "e",
    "f",
    "b",
    "\0",
    "\x01",
    "\x02",
]
PIECES = [
    "\\u003c",
    "\\u005c",
    "\\\\u0026",
    "\\ud83d\\ude00",
    "\\ud83d",
    "\\ude00",
    "\\\\\\u00e9",
    "\\u2028",
    "\\uD83D\\\\uDE00",
    "\\u0000",
    "\\u0001",
    "\\u005C",
]


def _texts(n: int, seed: int = 7):
    rnd = random.Random(seed)
    for i in range(n):
        # (every other text without raw control characters or escapes of U+0001/U+0002: the fast path)
        alphabet = ALPHABET if i % 2 else ALPHABET[:-3]
        pieces = PIECES if i % 2 else [p for p in PIECES if p != "\\u0001"]
        parts = [
            rnd.choice(pieces) if rnd.random() < 0.3 else rnd.choice(alphabet)
            for _ in range(rnd.randint(0, 40))
        ]
        yield "".join(parts)


def test_decoded_text_is_the_scans_text() -> None:
    for text in _texts(20000):
        assert escapes.view(text, where=False)[0] == escapes.view(text, where=True)[0], repr(text)


def test_decoded_text_with_keep_ranges() -> None:
    rnd = random.Random(3)
    for text in _texts(5000, seed=11):
        cuts = sorted(rnd.sample(range(len(text) + 1), min(4, len(text) + 1)))
        keep = list(zip(cuts[::2], cuts[1::2], strict=False))
        assert escapes.view(text, keep, where=False)[0] == escapes.view(text, keep, where=True)[0], (
            text,
            keep,
        )


def test_decoded_text_values() -> None:
    assert escapes.view('a\\"b\\\\nc\\n\\u003c\\u005cn\\ud83d\\ude00\\ud800', where=False)[0] == (
        'a"b\\nc\n<\\n\U0001f600\\ud800'
    )


def test_located_is_the_scans_view_and_where(monkeypatch) -> None:
    """``Located`` (blocks of ``BLOCK`` characters, made 8 here so texts cut often) gives
    the view and, for every view character, the raw start and end of ``view``."""
    monkeypatch.setattr(escapes, "BLOCK", 8)
    rnd = random.Random(5)
    texts = list(_texts(3000, seed=13))
    for n, _ in enumerate(range(1500)):
        text = "".join(rnd.choice(texts) + rnd.choice(["abcdefghij", "", "xy"]) for _ in range(6))
        keep = None
        if n % 3 == 0:
            cuts = sorted(rnd.sample(range(len(text) + 1), min(4, len(text) + 1)))
            keep = list(zip(cuts[::2], cuts[1::2], strict=False))
        for decode in (True, False):
            v, starts, ends = escapes.view(text, keep, decode)
            got = escapes.Located(text, keep, decode)
            assert got.view == v, (text, keep)
            assert [got.start(i) for i in range(len(v))] == starts, (text, keep)
            assert [got.end(i) for i in range(len(v))] == ends, (text, keep)
    assert len(escapes.Located("abcdefgh" * 40 + "\\n", None).blocks) > 1

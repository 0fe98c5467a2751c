"""The redaction's whole-Series passes by Hyperscan (``redact._hs_passes``: one scan of
each text) give Polars' booleans (``redact._passes`` without Hyperscan): the gates,
the anchor and the keywords the same, text for text; the case-sensitive prefilter
wherever Polars' matches (a superset, ``redact._hs_superset``: the same on every text
here but the planted non-ASCII lookalikes); and ``redact_series`` the same texts and
counts either way."""

from __future__ import annotations

import random
from collections import Counter

import polars as pl
import pytest
from test_redact_kv_starts import PIECES, _gitleaks

from ctxkeep.transforms import redact as R
from ctxkeep.transforms import wrapped_tokens
from fixtures.secrets import negatives, positives
from tests.conftest import CORPUS_HOME as CORPUS  # CTXKEEP_CORPUS, else ../shared/corpus

#: non-ASCII characters where the engines' Unicode tables matter: KELVIN SIGN and long s
#: (case folding onto k and s), dotless/dotted i, NBSP and U+180E (white space, once),
#: U+2028, Arabic-Indic and Adlam digits (Unicode 9), an accented letter, an emoji
UNICODE = [
    "\u212a",
    "\u017f",
    "\u0131",
    "\u0130",
    "\u00a0",
    "\u180e",
    "\u2028",
    "\u0663",
    "\U0001e951",
    "é",
    "😀",
]

#: texts whose case-sensitive rule Polars' Unicode classes or case folding decide
PLANTED = [
    "Account\u212aey=" + "A" * 24,  # (?i:AccountKey): KELVIN SIGN folds onto k
    "\u017fharedAcce\u017f\u017fKey=" + "b" * 24,
    "xapp-\u0663-ABC-1-abc",  # \d: an Arabic-Indic digit
    "xapp-\U0001e951-ABC-1-abc",  # an Adlam digit
    "xapp-é-ABC-1-abc",  # not a digit: Hyperscan's superset alone
    "-----BEGIN RSA PRIVATE KEY-----\u00a0MIIE",  # \s: NBSP
    "-----BEGIN RSA PRIVATE KEY-----\u180eMIIE",  # not white space in Rust's tables: superset
    "glpat-" + "a" * 20 + ".\u00e9t\u00e9",  # \w
    "https://user:pa\u00a0ss@host",  # [^\s…]: NBSP ends the password in Rust
    "https://user:pa\u180ess@host",  # U+180E does not
    "1234567\u0663\u0663:A" + "b" * 34,  # telegram's \d{5,16}
]


def _texts() -> list[str]:
    rng = random.Random(18)
    pieces = (
        PIECES
        + UNICODE
        + ["AccountKey=", "xapp-", "-----BEGIN PRIVATE KEY-----", "://u:", "@", "Q~", "x" * 20]
    )
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(2, 16))) for _ in range(20000)]
    texts += PLANTED + [c.text for c in positives(18)] + [t for _, t in negatives(18)] + _gitleaks()
    for p in sorted(CORPUS.rglob("*.jsonl"))[:40]:  # real lines, read only
        texts += p.read_bytes().decode("utf-8", "replace").splitlines()
    return texts


@pytest.fixture(scope="module")
def series() -> pl.Series:
    return pl.Series([*_texts(), None, ""], dtype=pl.String)


def _polars(s: pl.Series) -> pl.DataFrame:
    return pl.DataFrame({"s": s}).select(
        [
            *R._cs_exprs(),
            pl.col("s").str.contains(R._CI_ANCHOR_ASCII).fill_null(False).alias("anchor"),
            *R._keyword_exprs(R._gates()[0]),
            pl.col("s").str.contains_any(wrapped_tokens.LITERALS).fill_null(False).alias("wrap_lit"),
        ]
    )


def test_hyperscan_passes_give_polars_booleans(series):
    got, want = R._hs_passes(series), _polars(series)
    assert got is not None and got.columns == want.columns
    for name in want.columns:
        if name != "cs":
            assert got[name].to_list() == want[name].to_list(), name
    cs_got, cs_want = got["cs"].to_list(), want["cs"].to_list()
    assert all(g or not w for g, w in zip(cs_got, cs_want, strict=True))  # a superset
    only = [t for t, g, w in zip(series.to_list(), cs_got, cs_want, strict=True) if g != w]
    assert only, "the planted lookalikes pass Hyperscan's superset"
    assert set(only) <= set(PLANTED) | {t for t in series.to_list() if t and not t.isascii()}
    assert set(only) & set(PLANTED) == {PLANTED[4], PLANTED[6], PLANTED[8]}
    # the planted Unicode cases Rust's classes and folding take: both engines pass them
    assert all(got["cs"][series.to_list().index(t)] for t in PLANTED)
    assert [want["cs"][series.to_list().index(t)] for t in PLANTED] == [True] * 4 + [False, True, False] + [
        True,
        False,
    ] + [True] * 2
    assert got["anchor"].sum() > 1000 and got["kw_rare"].sum() > 100 and got["cs"].sum() > 100
    assert got["wrap_lit"].sum() > 100  # the cut tokens' prefixes (``wrapped_tokens.LITERALS``)
    assert got.row(len(series) - 2) == (False,) * len(got.columns)  # a null: no pass


def test_redact_series_is_the_same_without_hyperscan(series, monkeypatch):
    used = []
    hs_scan = R._hs_scan
    monkeypatch.setattr(R, "HS_MIN_BYTES", 0)
    monkeypatch.setattr(R, "_hs_scan", lambda s: used.append(s.len()) or hs_scan(s))
    got_n: Counter = Counter()
    got = R.redact_series(series, got_n)
    assert used == [len(series)]
    monkeypatch.setattr(R, "_hs_scan", lambda s: None)
    want_n: Counter = Counter()
    want = R.redact_series(series, want_n)
    assert got.to_list() == want.to_list()
    assert got_n == want_n and sum(got_n.values()) > 1000


def test_superset_rewrites_class_escapes_and_case_folding():
    assert R._hs_superset(r"a\d") == r"a[0-9\x{80}-\x{10ffff}]"
    assert R._hs_superset(r"[^\s@]") == r"[^\t\n\x0b\f\r @]"  # negated: ASCII spaces only
    assert R._hs_superset(r"[\w.]") == r"[A-Za-z0-9_\x{80}-\x{10ffff}.]"
    assert R._hs_superset("(?i:Ks)") == r"(?:[kK\x{212a}][sS\x{17f}])"
    for bad in (r"\bx", r"[^\S]", "(?i)x", r"\pL"):
        with pytest.raises(ValueError):
            R._hs_superset(bad)


def test_threads_scan_at_once_each_with_its_scratch(series):
    """Two threads scan the one database at once (a reader's rekey thread and its
    normalize, the ingest's capture thread): each its own scratch space (Hyperscan
    refuses a scratch in use: ``HS_SCRATCH_IN_USE``), the same booleans."""
    import threading

    want = R._hs_passes(series)
    part = series.slice(0, 20000)
    got: list = []
    errors: list = []

    def run() -> None:
        try:
            for _ in range(3):
                got.append(R._hs_passes(part))
        except Exception as e:  # the test reports it
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(got) == 6 and all(g.equals(want.slice(0, 20000)) for g in got)


def test_a_small_series_does_not_compile_hyperscan(monkeypatch):
    """A hook's or a small ingest's few lines stay on Polars' passes: Hyperscan's
    compile (~0.1 s) is paid from the first Series of ``HS_MIN_BYTES`` on, then used
    for every Series."""
    R._hs_database.cache_clear()
    small = pl.Series(["password: hunter2hunter2", "nothing here"] * 50, dtype=pl.String)
    assert R.redact_series(small).to_list()[:2] == ["password: [REDACTED:password]", "nothing here"]
    assert R._hs_database.cache_info().currsize == 0
    monkeypatch.setattr(R, "HS_MIN_BYTES", 1000)
    big = pl.Series(["x" * 1200, "password: hunter2hunter2"], dtype=pl.String)
    assert R.redact_series(big)[1] == "password: [REDACTED:password]"
    assert R._hs_database.cache_info().currsize == 1
    monkeypatch.setattr(R, "HS_MIN_BYTES", 1 << 40)  # compiled: used whatever the size
    assert R._passes(small).columns == R._hs_passes(small).columns
    assert R._passes(small).equals(R._hs_passes(small))

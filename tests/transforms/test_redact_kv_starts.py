"""The key/value rules (``redact._KV_ORDERS``) run only at the starts of key/value
anchors (``redact._ci_starts``' second list): no such rule can match at a start that
only a prose anchor (``token ``, ``basic ``, ``bearer ``) gives, so the spans are the
ones found by running them at every anchor's start."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import polars as pl

from ctxkeep.transforms import redact as R
from fixtures.secrets import negatives, positives

#: pieces that make anchors of every branch next to each other: key words, prose words,
#: separators, declared types, quotes, escapes, flags, the characters Python's ``re``
#: folds onto ASCII letters (KELVIN SIGN, long s, dotless i), other letters
PIECES = [
    "token",
    "Token",
    "TOKEN",
    "to\u212aen",
    "basic",
    "Bearer",
    "bearer",
    "secret",
    "key",
    "api_key",
    "passwd",
    "password",
    "auth",
    "sig",
    "signature",
    "creds",
    "credentials",
    "client_secret",
    "my_",
    "-",
    "--",
    "_",
    ".",
    " ",
    "  ",
    "\t",
    "\n",
    "=",
    ":",
    ",",
    "=>",
    ":=",
    '"',
    "'",
    "\\",
    '\\"',
    "string",
    "String",
    "[]byte",
    ": str",
    ": &'static str",
    "?",
    "x",
    "\u017f",
    "\u0131",
    "\u00e9",
    "abcdEFGH12345678wxyzQRST",
    "hunter2!",
    "Zz9$kP2@",
    "sk-",
    "value",
    "_value",
    "-id",
    "b64",
]


def _gitleaks() -> list[str]:
    """Every true positive of gitleaks' samples (``tests/fixtures/secrets``)."""
    got = json.loads(
        (Path(__file__).parents[1] / "fixtures" / "secrets" / "gitleaks_samples.json").read_text()
    )
    return [base64.b64decode(tp["b64"]).decode() for r in got["rules"].values() for tp in r["tp"]]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(2, 14))) for _ in range(n)]


def _prose_only_misses(text: str, anchors: list[str] | None) -> list[tuple[int, int]]:
    starts, kv = R._ci_starts(text, anchors)
    skipped = sorted(set(starts) - set(kv))
    return [(o, p) for o in R._KV_ORDERS for p in skipped if R._rx(o).match(text, p)]


def test_no_key_value_rule_matches_at_a_prose_only_start():
    texts = _texts(40000, 26) + [c.text for c in positives(26)] + [t for _, t in negatives()] + _gitleaks()
    texts += [
        "the token abcdEFGH12345678wxyz",
        "use basic auth",
        "Bearer token = abcdEFGH12345678wxyzQRST",
        "my_token\t= 'abcdEFGH12345678wxyzQRST'",
        "--token abcdEFGH12345678",
        'token string = "hunter2!"',
        "token : str = 'Zz9$kP2@Zz9$kP2@'",
        "api_token ,abcdEFGH12345678wxyzQRST",
    ]
    anchors = pl.Series(texts, dtype=pl.String).str.extract_all(R._CI_ANCHOR_ASCII).to_list()
    prose = 0
    for t, a in zip(texts, anchors, strict=True):
        starts, kv = R._ci_starts(t, a)
        assert (starts, kv) == R._ci_starts(t, None)  # the Polars anchors and Python's agree
        prose += len(set(starts) - set(kv))
        assert _prose_only_misses(t, a) == [], t
    assert prose > 3000  # the fuzz does reach prose-only starts


def test_spans_are_those_of_every_rule_at_every_start(monkeypatch):
    texts = _texts(5000, 27) + [c.text for c in positives(27)] + _gitleaks()
    got = [R._spans(t) for t in texts]
    monkeypatch.setattr(R, "_KV_ORDERS", frozenset())
    assert got == [R._spans(t) for t in texts]
    assert sum(1 for g in got if g) > 500

"""The labelled set (``tests/fixtures/secrets``: fake credentials in the providers'
documented formats, generated from seeded RNGs) against ``transforms.redact``: every
planted value is gone, every lookalike is kept byte for byte, the Polars path and the
one-string path agree, kinds are counted, and quarantined lines are stored redacted
with the SHA-256 of the raw line."""

from __future__ import annotations

import hashlib
from collections import Counter

import polars as pl
import pytest

from ctxkeep.sources.contract import quarantine_row
from ctxkeep.transforms.redact import count_markers, redact, redact_bytes, redact_counts, redact_series
from fixtures.secrets import negatives, positives

POS = positives(11) + positives(12)
NEG = negatives(11) + negatives(12)


@pytest.mark.parametrize("case", POS, ids=[f"{c.kind}-{i}" for i, c in enumerate(POS)])
def test_planted_value_is_gone(case):
    out = redact(case.text)
    for s in case.secrets:
        assert s and s not in out, (case.kind, s)
    assert "[REDACTED:" in out


@pytest.mark.parametrize("name,text", NEG, ids=[f"{n}-{i}" for i, (n, _) in enumerate(NEG)])
def test_lookalike_is_kept(name, text):
    assert redact(text) == text


def test_series_path_matches_one_string_path_and_counts():
    texts = [c.text for c in POS] + [t for _, t in NEG] + [None]
    counts = Counter()
    out = redact_series(pl.Series("text", texts), counts).to_list()
    assert out[:-1] == [redact(t) for t in texts[:-1]]
    assert out[-1] is None
    added = sum(
        count_markers(o).total() - count_markers(t).total()
        for o, t in zip(out[:-1], texts[:-1], strict=False)
    )
    assert counts.total() == added > len(POS)


def test_counts_name_kinds():
    _, c = redact_counts("GH=ghp_" + "aB3dE5" * 6 + "\npassword=hunter2")
    assert c == {"github-token": 1, "password": 1}


def test_quarantine_row_is_redacted_and_hashed():
    case = next(c for c in POS if c.kind == "json-escaped-env")
    raw = b'{"broken": ' + case.text.encode() + b"\xff\xfe"  # malformed, not UTF-8
    q = quarantine_row("/x/s.jsonl", 10, raw, "malformed JSON")
    assert q["raw_sha256"] == hashlib.sha256(raw).hexdigest()
    assert q["length"] == len(raw)
    assert q["raw"].endswith(b"\xff\xfe")
    for s in case.secrets:
        assert s.encode() not in q["raw"]
    assert redact_bytes(b"plain \xff bytes") == b"plain \xff bytes"

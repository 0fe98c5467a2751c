"""The maintained rules' gates folding ASCII case only (``redact._ascii_gate``) over
the texts that hold neither KELVIN SIGN nor long s give the gates' own booleans, and
``redact._gated`` sends the same texts to the same rules with them (Hyperscan's
``fold`` texts keep the Unicode gates)."""

from __future__ import annotations

import polars as pl
import pytest
from test_redact_kv_starts import PIECES, _gitleaks, _texts

from ctxkeep.transforms import redact as R
from tests.conftest import CORPUS_HOME


@pytest.fixture(scope="module")
def texts() -> list[str]:
    out = _gitleaks() + _texts(3000, 19) + PIECES
    for p in sorted(CORPUS_HOME.rglob("*.jsonl"))[:60]:  # real lines, read only
        out += p.read_bytes().decode("utf-8", "replace").splitlines()
    return [t for t in out if "\u212a" not in t and "\u017f" not in t]


def test_ascii_gates_match_the_texts_the_gates_match(texts):
    s = pl.Series(texts, dtype=pl.String)
    _, _, gates = R._gates()
    made = 0
    for g in gates:
        fast = R._ascii_gate(g) if g else None
        if fast is None:
            continue
        made += 1
        assert "(?i-u" in fast
        want = s.str.contains(g).to_list()
        assert s.str.contains(fast).to_list() == want, g
    assert made > 100
    assert sum(s.str.contains(R._gates()[2][76]).to_list()) > 50  # generic-api-key's gate passes some


def test_ascii_gate_refuses_what_unicode_mode_decides():
    assert R._ascii_gate("(?i)xoxe.xox") is None  # . could match part of a character
    assert R._ascii_gate("(?i)a[^b]c") is None
    assert R._ascii_gate(r"(?i)a\p{L}") is None
    assert R._ascii_gate(r"(?i)a\x{e9}") is None
    assert R._ascii_gate("abc") is None  # nothing to fold
    assert R._ascii_gate("(?i)ab(?i:cd)") == "(?i-u)ab(?i-u:cd)"


def test_gated_keeps_unicode_gates_for_kelvin_and_long_s(texts):
    """A rule whose gate matches a text only through Unicode case folding (its key word
    spelled with KELVIN SIGN or long s) still reaches that text: the same rules per
    text as the Polars path, which knows no ``fold`` column."""
    _, _, gates = R._gates()
    planted = [t.replace("k", "\u212a").replace("s", "\u017f") for t in _gitleaks() if "k" in t or "s" in t][
        :400
    ]
    s = pl.Series(texts + planted, dtype=pl.String)
    passes, rare_hits = R._hs_scan(s)
    assert rare_hits[1] >= set(range(len(texts), len(texts) + len(planted))) - {
        i for i, t in enumerate(texts + planted) if "\u212a" not in t and "\u017f" not in t
    }
    got = R._gated(s, passes, rare_hits)
    want = R._gated(s, passes)
    assert got == want
    # some planted texts pass a gate through Unicode folding only
    folded = [i for i in range(len(texts), len(s)) if i in want]
    assert len(folded) > 20


def test_big_texts_ungated_by_one_alternation_reach_the_same_rules(texts, monkeypatch):
    """A big text that no gate of its matches loses its gate rows after one pass of
    their alternation (``redact._big_texts_ungated``); one a gate matches keeps them:
    the same rules per text as the gates one by one. Every text counts as big here."""
    monkeypatch.setattr(R, "_UNION_BYTES", 0)
    monkeypatch.setattr(R, "_UNION_GATES", 2)
    filler = "lorem ipsum dolor sit amet, " * 10000  # ~280 KB
    planted = [
        filler + " jfrog artifactory linear newrelic lob mailchimp api key token ",  # no gate matches
        filler + _gitleaks()[0] + " jfrog artifactory linear ",  # a sample's gate matches
    ]
    s = pl.Series(texts + planted, dtype=pl.String)
    passes, rare_hits = R._hs_scan(s)
    dropped: list[int] = []
    real = R._big_texts_ungated

    def spy(s_, sizes, gates, folds):
        got = real(s_, sizes, gates, folds)
        dropped.append(sizes.height - got.height)
        return got

    monkeypatch.setattr(R, "_big_texts_ungated", spy)
    got = R._gated(s, passes, rare_hits)
    want = R._gated(s, passes)
    assert got == want
    assert dropped and dropped[0] > 100
    n = len(texts)
    assert n + 1 in got

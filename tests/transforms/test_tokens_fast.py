"""bpe-openai's o200k_base count (``tokens._fast_count``) against tiktoken's encoder:
the same count for every text, so the stored token estimates do not change."""

from __future__ import annotations

import random
from functools import lru_cache

from test_tokens import _claude_texts, _corpus_texts

from ctxkeep.transforms import tokens

#: characters the o200k split pattern treats differently: letters of several scripts
#: and cases, combining marks, digits, punctuation, contractions, every kind of space
_ALPHABET = (
    "aZ09 _-.\n\t\r  \u00e9\u4e2d\u6587\u3042\uac00\U0001f600'\"s't're1234567890!?,;:()[]{}<>/\\"
    "\u0301\u200b\xa0\u00c4\u00d6\u00fc\u0416\u0436\u05d0\u0627\u0e01\u2028\u3000\U0001f1fa\U0001f1f8"
)


def _random_texts(n: int = 3000, seed: int = 14) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(0, 400))) for _ in range(n)]


def test_fast_count_equals_tiktoken_on_session_and_random_text():
    fast, enc = tokens._fast_count(), tokens.encoding()
    assert fast is not None and enc is not None
    texts = _corpus_texts() + _claude_texts() + _random_texts()
    assert any(len(t) > tokens.BPE_FULL_CHARS for t in texts)
    assert [fast(t) for t in texts] == [len(enc.encode_ordinary(t)) for t in texts]
    # whole texts and the windows of sampled ones, with their methods
    assert tokens._tally(fast, texts) == tokens._count(enc.encode_ordinary, texts)


def test_lone_surrogate_is_counted_as_tiktoken_counts_it():
    # a JSON ``\ud800`` escape gives Python a lone surrogate, which bpe-openai refuses
    enc = tokens.encoding()
    for text in ["a\ud800b", "\udfff", "x" * 5000 + "\ud83d" + "y" * 5000]:
        assert tokens.count_here([text]) == tokens._count(enc.encode_ordinary, [text])


def test_count_here_uses_bpe_openai_without_building_tiktoken(monkeypatch):
    want = tokens._count(tokens.encoding().encode_ordinary, _corpus_texts())
    unbuilt = lru_cache(maxsize=1)(tokens._encoding.__wrapped__)
    monkeypatch.setattr(tokens, "_encoding", unbuilt)
    monkeypatch.setattr(tokens, "_pure_encoding", lambda: None)
    assert tokens.count_here(_corpus_texts() * 4)[0][: len(want[0])] == want[0]
    assert unbuilt.cache_info().currsize == 0  # tiktoken's encoder never built


def test_bindings_load_without_the_package_init():
    # bpe-openai's __init__ builds every encoding's rank table in Python (1.4-2.2 s)
    import subprocess
    import sys

    code = (
        "import sys; from ctxkeep.transforms import tokens; "
        "assert tokens._fast_count()('hello world') == 2; print('bpe_openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_prepare_builds_the_fast_counter_only(monkeypatch):
    from functools import lru_cache

    unbuilt = lru_cache(maxsize=1)(tokens._encoding.__wrapped__)
    monkeypatch.setattr(tokens, "_encoding", unbuilt)
    tokens.prepare()
    assert unbuilt.cache_info().currsize == 0 and tokens._fast_count.cache_info().currsize == 1
    monkeypatch.setattr(tokens, "_fast_count", lambda: None)  # without bpe-openai: tiktoken's
    tokens.prepare()
    assert unbuilt.cache_info().currsize == 1

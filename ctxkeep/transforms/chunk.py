"""Chunking for the full-text index: long contents become several FTS rows of at most
``MAX_CHUNK_BYTES`` UTF-8 bytes each, so a 30 MB tool output never becomes one row and
a hit points at the part that matched.

Chunks concatenate back to the exact original text (``"".join(chunk_text(t)) == t``).
Cuts prefer, in order: a markdown heading line, a blank line or a code fence start
(outside code fences, so a fence that fits stays whole), a line end, a space; never
inside a UTF-8 character. Each chunk also gets a title (``chunk_title``) for the
weighted title column of the word index.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    import polars as pl

MAX_CHUNK_BYTES = 4096
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})", re.M)
_HEADING_AT_RE = re.compile(r"\n(?=#{1,6} )")


def fence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character spans of the fenced code blocks of ``text`` (CommonMark:
    a fence of ≥3 backticks or tildes closes with a fence of the same character at
    least as long; an unclosed fence runs to the end)."""
    spans: list[tuple[int, int]] = []
    open_at, marker = None, ""
    if "```" not in text and "~~~" not in text:  # no fence possible: skip the regex scan
        return spans
    for m in _FENCE_RE.finditer(text):
        f = m.group(1)
        if open_at is None:
            open_at, marker = m.start(), f
        elif f[0] == marker[0] and len(f) >= len(marker):
            nl = text.find("\n", m.end())
            spans.append((open_at, len(text) if nl < 0 else nl + 1))
            open_at = None
    if open_at is not None:
        spans.append((open_at, len(text)))
    return spans


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a < pos < b for a, b in spans)


def _cut_point(text: str, start: int, limit: int, spans: list[tuple[int, int]]) -> int:
    """Best absolute cut index in ``text[start:limit]`` (the chunk is ``text[start:cut]``).

    Preference: before a markdown heading, after a blank line, or before a code fence
    (none of them inside a fence); then a line end outside a fence; then any line
    end; then a space; else ``limit``. Cuts closer to ``start`` than a quarter of the
    window are not taken, so chunks stay near the cap.
    """
    floor = start + (limit - start) // 4
    local = [(a, b) for a, b in spans if b > start and a < limit]
    window = text[start:limit]
    best = floor
    for m in _HEADING_AT_RE.finditer(window):
        p = start + m.start() + 1
        if p > best and not _inside(p, local):
            best = p
    pos = window.rfind("\n\n")
    while pos >= 0 and start + pos + 2 > best:
        p = start + pos + 2
        if not _inside(p, local):
            best = p
            break
        pos = window.rfind("\n\n", 0, pos)
    for a, _ in local:
        if best < a < limit and (a == 0 or text[a - 1] == "\n"):
            best = max(best, a)
    if best > floor:
        return best
    pos = window.rfind("\n")
    while pos >= 0 and start + pos + 1 > floor:
        if not _inside(start + pos + 1, local):
            return start + pos + 1
        pos = window.rfind("\n", 0, pos)
    for sep in ("\n", " "):
        pos = window.rfind(sep)
        if start + pos + 1 > floor and pos >= 0:
            return start + pos + 1
    return limit


def chunk_text(text: str, max_bytes: int = MAX_CHUNK_BYTES) -> list[str]:
    """Split ``text`` into chunks of at most ``max_bytes`` UTF-8 bytes.

    Cuts follow ``_cut_point`` (headings, blank lines, code fences kept whole when
    they fit, lines, spaces) and never fall inside a UTF-8 character; the chunks
    concatenate back to ``text`` exactly. Returns ``[text]`` when it fits (the common
    case) and ``[]`` for an empty text. Linear in the text length (a 30 MB tool output
    is ~7,500 chunks).
    """
    if not text:
        return []
    # (an ASCII text's bytes are its characters: ``isascii`` reads a flag, no encode)
    if len(text) * 4 <= max_bytes or (
        len(text) <= max_bytes and (text.isascii() or len(text.encode("utf-8", "surrogatepass")) <= max_bytes)
    ):
        return [text]
    spans = fence_spans(text)
    out = []
    start, n = 0, len(text)
    while start < n:
        # a UTF-8 character is ≥ 1 byte: the first max_bytes characters hold the cap
        head = text[start : start + max_bytes].encode("utf-8", "surrogatepass")
        if len(head) <= max_bytes and start + max_bytes >= n:
            out.append(text[start:])
            break
        if len(head) <= max_bytes:
            limit = start + max_bytes
        else:
            b = max_bytes
            while b > 0 and (head[b] & 0xC0) == 0x80:  # do not end inside a character
                b -= 1
            limit = start + max(1, len(head[:b].decode("utf-8", "surrogatepass")))
        cut = _cut_point(text, start, limit, spans) if limit < n else n
        out.append(text[start:cut])
        start = cut
    return out


TITLE_MAX_CHARS = 200
_HEADING_RE = re.compile(r"#{1,6} +\S")


def chunk_title(chunk: str, seq: int) -> str:
    """The title of a chunk for the weighted ``title`` column of the word index.

    The first chunk of a content (``seq`` 0) is titled by its first non-blank line
    (a message's subject, a command line, a file path, a heading); a later chunk only
    when it starts with a markdown heading. At most ``TITLE_MAX_CHARS`` characters,
    '' for none.
    """
    if seq == 0:
        # the first line of the text without its leading whitespace: every line end
        # ``splitlines`` knows is whitespace to ``strip``, so the blank lines before it
        # go with that whitespace; only that line is split, not the whole chunk
        # (0.057 -> 0.032 CPU s on the 200 MB tree's 41,463 chunks)
        rest = chunk.lstrip()
        if not rest:
            return ""
        nl = rest.find("\n")
        return (rest if nl < 0 else rest[:nl]).splitlines()[0].rstrip()[:TITLE_MAX_CHARS]
    first = chunk.lstrip("\n").split("\n", 1)[0]
    return first.strip()[:TITLE_MAX_CHARS] if _HEADING_RE.match(first) else ""


def chunks_frame(contents: pl.DataFrame, index_terms: bool = False) -> pl.DataFrame:
    """Chunk rows for new contents.

    Args: ``contents`` with columns content_hash (str), text (str); ``index_terms``:
    also the terms the store's other indexes take from each chunk text (a reader
    process computes them, off the ingest process: ``reader_process._precompute``).
    Returns columns content_hash (str), seq (int32, 0-based), title (str, see
    ``chunk_title``), text (str, ≤ 4 KiB UTF-8), grams (str, substring-index terms of
    the chunk and its title, '' for none); with ``index_terms`` also symbols (str,
    ``grams.symbols_batch``: the ``fts_symbols`` terms, '' for none) and vocab (str,
    ``grams.vocab_lists``: the chunk's vocabulary tokens space-joined).
    """

    from ctxkeep.transforms.grams import grams_batch, symbols_batch, vocab_lists

    hashes, seqs, titles, texts = [], [], [], []
    for h, text in contents.select("content_hash", "text").iter_rows():
        for i, c in enumerate(chunk_text(text)):
            hashes.append(h)
            seqs.append(i)
            titles.append(chunk_title(c, i))
            texts.append(c)
    gram_col = grams_batch(texts)
    cols = {"content_hash": hashes, "seq": seqs, "title": titles, "text": texts, "grams": gram_col}
    schema = {
        "content_hash": pl.String,
        "seq": pl.Int32,
        "title": pl.String,
        "text": pl.String,
        "grams": pl.String,
    }
    if index_terms:
        cols.update(symbols=symbols_batch(texts), vocab=vocab_lists(texts))
        schema.update(symbols=pl.String, vocab=pl.String)
    return pl.DataFrame(cols, schema=schema)

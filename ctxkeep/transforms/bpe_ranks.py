"""The BPE merge ranks as a file-backed hash table: a rank lookup without loading the
200 Ki-entry dict.

``tokens.cached_ranks`` loads the o200k_base ranks as a dict (a ``marshal`` load:
~60-90 ms of CPU on this machine kind), which tiktoken's encoder needs whole. The
pure-Python BPE (``tokens._pure_encoding``) reads ranks one piece at a time through
``get``/``[]``: counting the few texts ``compress --check`` rewrites (4 texts, 5,192
characters on the corpus) looks up ~1,450 pieces. ``RankIndex`` answers those lookups
from a memory-mapped file instead (~1-2 µs each, memoized), so a process that counts a
few texts never loads the dict.

The file (``<cache_dir>/bpe/<name>-<sha256 of the data file, 16 hex>-v<FORMAT>.index``,
a derived cache like the marshal, rebuilt when missing or not valid), native byte
order, 4-byte unsigned ints:

- header: magic ``CKBR``, ``FORMAT``, the slot count (a power of two, at least twice the
  token count), the token count, the blob's byte length;
- slots: per slot 0 (empty) or 1 + a token's index; open addressing, linear probing
  from ``zlib.crc32(token) & (slots - 1)``;
- ranks: per token its rank; offsets: per token + 1 its start in the blob (the last is
  the blob's length);
- blob: the tokens' bytes, one after another.

Same lookups as the dict (a test compares all 200 Ki tokens, absent keys and the counts
with tiktoken's).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zlib
from array import array
from collections.abc import Mapping
from pathlib import Path

#: bumped when the layout changes (part of the file name)
FORMAT = 1
_MAGIC = b"CKBR"
_HEADER = struct.Struct("=4sIIII")
_MISS = object()


def encode_index(ranks: Mapping[bytes, int]) -> bytes:
    """The index file's bytes for ``ranks`` (token bytes → rank, ranks < 2**32).
    ~0.3 s of CPU for o200k_base's 200 Ki tokens (once per cache)."""
    toks = list(ranks)
    n = len(toks)
    size = 1 << max(1, (2 * n - 1).bit_length())
    mask = size - 1
    slots = array("I", bytes(4 * size))
    crc = zlib.crc32
    for i, t in enumerate(toks):
        h = crc(t) & mask
        while slots[h]:
            h = (h + 1) & mask
        slots[h] = i + 1
    offs = array("I", [0])
    acc = 0
    for t in toks:
        acc += len(t)
        offs.append(acc)
    vals = array("I", ranks.values())
    return b"".join(
        (_HEADER.pack(_MAGIC, FORMAT, size, n, acc), slots.tobytes(), vals.tobytes(), offs.tobytes(), *toks)
    )


class RankIndex:
    """Read-only rank lookups on an index file's bytes (``buf``: an ``mmap`` or bytes):
    ``get(token, default)`` and ``index[token]`` as on the dict (KeyError when absent).
    Raises ValueError when ``buf`` is not a whole index of this ``FORMAT``."""

    __slots__ = ("_buf", "_slots", "_ranks", "_offs", "_blob", "_mask", "_memo")

    def __init__(self, buf) -> None:
        if len(buf) < _HEADER.size:
            raise ValueError("not a rank index (too short)")
        magic, fmt, size, n, blob_len = _HEADER.unpack_from(buf, 0)
        at = _HEADER.size
        want = at + 4 * (size + n + n + 1) + blob_len
        if magic != _MAGIC or fmt != FORMAT or size & (size - 1) or size < 2 * n or len(buf) != want:
            raise ValueError("not a rank index of this format (or a truncated one)")
        mv = memoryview(buf)
        self._buf = buf
        self._slots = mv[at : at + 4 * size].cast("I")
        at += 4 * size
        self._ranks = mv[at : at + 4 * n].cast("I")
        at += 4 * n
        self._offs = mv[at : at + 4 * (n + 1)].cast("I")
        self._blob = at + 4 * (n + 1)
        if self._offs[n] != blob_len:
            raise ValueError("not a rank index (its offsets do not end at the blob's end)")
        self._mask = size - 1
        self._memo: dict[bytes, int | None] = {}

    def get(self, token: bytes, default=None):
        """The rank of ``token``, else ``default``."""
        r = self._memo.get(token, _MISS)
        if r is _MISS:
            r = self._find(token)
            self._memo[token] = r
        return default if r is None else r

    def __getitem__(self, token: bytes) -> int:
        r = self.get(token)
        if r is None:
            raise KeyError(token)
        return r

    def _find(self, token: bytes) -> int | None:
        slots, offs, buf, base, mask = self._slots, self._offs, self._buf, self._blob, self._mask
        h = zlib.crc32(token) & mask
        while True:
            e = slots[h]
            if not e:
                return None
            e -= 1
            if buf[base + offs[e] : base + offs[e + 1]] == token:
                return self._ranks[e]
            h = (h + 1) & mask


def open_index(path: Path, ranks=None) -> RankIndex:
    """The ``RankIndex`` of the file ``path`` (memory-mapped), written first from
    ``ranks()`` (a callable returning the dict) when it is missing or not valid; when
    it cannot be written (a read-only cache dir) the index is built in memory. The file
    is replaced atomically, so a concurrent reader sees the old one or the whole new one.
    Raises what ``ranks()`` raises (OSError: the data file is unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        return _mapped(path)
    if ranks is None:
        raise FileNotFoundError(path)
    data = encode_index(ranks())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            tmp.unlink(missing_ok=True)
    return RankIndex(data)


def _mapped(path: Path) -> RankIndex:
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return RankIndex(buf)
    except ValueError:
        buf.close()
        raise

"""A document version's list of chunks (32-byte SHA-256s, in order) as stored in
``vault_generations.chunks``: whole (``F`` + the hashes) or as a delta against the
file's version before (``D`` + base ``gen_id`` (8 bytes, big-endian) + chain depth
(2 bytes) + ops: ``C`` + start + count (4 bytes each: a run of the base's chunks) or
``L`` + a hash). A document rewritten after every message shares almost every chunk
with its version before, so the delta is a few runs and the new hashes: storing every
list whole grew as the square of the versions (100 versions of a 143 KB document:
~110 KB of hashes). A chain is cut every ``MAX_DEPTH`` versions (a whole list)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable

SHA_LEN = 32
MAX_DEPTH = 32


def encode(new: list[bytes], base: list[bytes] | None, base_gen_id: int | None, base_depth: int) -> bytes:
    """The stored form of the list ``new``: a delta against ``base`` (the list of
    generation ``base_gen_id``, at chain depth ``base_depth``) when there is one and
    the chain is shorter than ``MAX_DEPTH`` and the delta is smaller; else whole."""
    whole = b"F" + b"".join(new)
    if base is None or base_gen_id is None or base_depth + 1 >= MAX_DEPTH:
        return whole
    at: dict[bytes, int] = {}
    for i, h in enumerate(base):
        at.setdefault(h, i)
    ops = [b"D" + struct.pack(">QH", base_gen_id, base_depth + 1)]
    i = 0
    while i < len(new):
        j = at.get(new[i])
        if j is None:
            ops.append(b"L" + new[i])
            i += 1
            continue
        n = 1
        while i + n < len(new) and j + n < len(base) and new[i + n] == base[j + n]:
            n += 1
        ops.append(b"C" + struct.pack(">II", j, n))
        i += n
    delta = b"".join(ops)
    return delta if len(delta) < len(whole) else whole


def list_sha(chunks: list[bytes]) -> bytes:
    """The SHA-256 of a chunk list (its 32-byte hashes concatenated): the ``doc_sha`` of a
    rows document version built on the one before (``rows_capture``)."""
    return hashlib.sha256(b"".join(chunks)).digest()


def depth(blob: bytes | None) -> int:
    """The chain depth of a stored list (0: whole)."""
    if not blob or blob[:1] != b"D":
        return 0
    return struct.unpack(">QH", blob[1:11])[1]


def base_of(blob: bytes | None) -> int | None:
    """The ``gen_id`` a stored list is a delta against (None: a whole list)."""
    if not blob or blob[:1] != b"D":
        return None
    return struct.unpack(">QH", blob[1:11])[0]


def decode(blob: bytes | None, fetch: Callable[[int], bytes | None]) -> list[bytes]:
    """The list of hashes of a stored list; ``fetch(gen_id)`` gives the stored list of
    a base generation. Raises ValueError on a malformed list or a missing base."""
    if not blob:
        return []
    kind = blob[:1]
    if kind == b"F":
        body = blob[1:]
        if len(body) % SHA_LEN:
            raise ValueError("chunk list of a length that is not a multiple of 32")
        return [body[i : i + SHA_LEN] for i in range(0, len(body), SHA_LEN)]
    if kind != b"D":
        # lists written before the recipe: the hashes alone
        if len(blob) % SHA_LEN:
            raise ValueError("unknown chunk list format")
        return [blob[i : i + SHA_LEN] for i in range(0, len(blob), SHA_LEN)]
    base_id, _ = struct.unpack(">QH", blob[1:11])
    base_blob = fetch(base_id)
    if base_blob is None:
        raise ValueError(f"the base version (generation {base_id}) of a chunk list is missing")
    base = decode(base_blob, fetch)
    out: list[bytes] = []
    i = 11
    while i < len(blob):
        op = blob[i : i + 1]
        if op == b"L":
            out.append(blob[i + 1 : i + 1 + SHA_LEN])
            i += 1 + SHA_LEN
        elif op == b"C":
            start, n = struct.unpack(">II", blob[i + 1 : i + 9])
            if start + n > len(base):
                raise ValueError("a chunk run past its base's end")
            out.extend(base[start : start + n])
            i += 9
        else:
            raise ValueError("unknown op in a chunk list")
    return out


__all__ = ["MAX_DEPTH", "base_of", "decode", "depth", "encode", "list_sha"]

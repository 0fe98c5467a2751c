"""The vault's zstd compressor: one per thread, reused for every object it
compresses (``sinks.vault.packs.compress``), the frames the same bytes as a new
compressor's (a pack is named by the SHA-256 of its bytes)."""

from __future__ import annotations

import hashlib
import json
import struct
import threading

import zstandard

from ctxkeep.sinks.vault import packs


def _counting(monkeypatch) -> list[int]:
    made: list[int] = []
    real = zstandard.ZstdCompressor

    def counted(*a, **k):
        made.append(threading.get_ident())
        return real(*a, **k)

    monkeypatch.setattr(packs.zstandard, "ZstdCompressor", counted)
    monkeypatch.setattr(packs, "_local", threading.local())  # no compressor made before
    return made


def test_one_compressor_per_thread(monkeypatch):
    made = _counting(monkeypatch)
    datas = [b"x" * 10, b'{"type":"user","text":"hello"}\n' * 300, b"", bytes(range(256)) * 40]
    fresh = [zstandard.ZstdCompressor(level=packs.ZSTD_LEVEL).compress(d) for d in datas]
    made.clear()
    here = [packs.compress(d) for d in datas * 3]
    assert here == fresh * 3  # the same frames, byte for byte
    assert made == [threading.get_ident()]  # one compressor for 12 objects
    got: list[bytes] = []
    t = threading.Thread(target=lambda: got.extend(packs.compress(d) for d in datas))
    t.start()
    t.join()
    assert got == fresh
    assert len(made) == 2 and made[1] != made[0]  # the other thread made its own


def test_pack_record_frame_unchanged(tmp_path):
    """``write_pack`` compresses its record with the thread's compressor: the pack's
    bytes (and so its name) are those a new compressor gives."""
    data = b'{"a": 1}\n' * 50
    sha = hashlib.sha256(data).digest()
    b = packs.PackBuilder()
    b.add(sha, data)
    b.record = {"captures": []}
    got = packs.write_pack(tmp_path, b)
    assert got is not None
    name, size = got
    raw = packs.pack_path(tmp_path, name).read_bytes()
    rec = {"captures": [], "objects": [[sha.hex(), 0, b.objects[0][2], len(data)]]}
    obj = zstandard.ZstdCompressor(level=packs.ZSTD_LEVEL).compress(data)
    frame = zstandard.ZstdCompressor(level=packs.ZSTD_LEVEL).compress(
        json.dumps(rec, sort_keys=True).encode()
    )
    assert raw == obj + frame + packs.TRAILER_MAGIC + struct.pack(">Q", len(frame))
    assert size == len(raw) and name == hashlib.sha256(raw).hexdigest()

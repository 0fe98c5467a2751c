"""The vault's bytes on disk: objects (the redacted bytes of a segment or a chunk),
zstd-compressed and named by the SHA-256 of their uncompressed bytes, written together
as pack files ``<home>/vault/packs/<2 hex>/<SHA-256 of the pack>.pack`` (one pack per
ingest group: one fsync, not one per object).

A pack is the objects' zstd frames back to back, then its record (a zstd frame of JSON:
the captures it holds, where each object lies, when it was written: what rebuilds the
manifest without ``store.db``, ``capture.replay``), then a trailer (``TRAILER_MAGIC``
and the record frame's size, 8 bytes big-endian); where each object lies (pack, byte
offset, compressed and raw sizes) is the manifest's ``vault_objects`` row, which is
committed only after the pack is durable (``write_pack``: temporary file, fsync,
rename, directory fsync). A pack no manifest row names (a crash between the rename and
the commit) is an orphan: harmless (``vault verify --full`` names them; ``vault verify
--repair`` removes those whose contents the manifest holds: ``capture.orphan_verdicts``).

Reading an object (``read_object``) decompresses it and checks its SHA-256 and size:
a flipped byte raises ``VaultDamaged`` naming the pack file.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import zstandard

from ctxkeep.errors import CtxkeepError
from ctxkeep.sinks.files import VAULT_DIR, fsync_dir

#: zstd level of the vault's objects (3: zstd's default; ~10x on session JSONL)
ZSTD_LEVEL = 3
#: the last 16 bytes of a pack: this magic and the size of its record frame
TRAILER_MAGIC = b"CKVAULT1"


class VaultDamaged(CtxkeepError):
    """An object of the vault does not read back as written: a missing or short pack,
    bytes that do not decompress, or a SHA-256 or size that differs (``where``: the
    pack file)."""


def _damaged(what: str, where: Path) -> VaultDamaged:
    return VaultDamaged(f"vault damaged: {what}", where=str(where), hint="run 'ctxkeep vault verify --full'")


def vault_dir(home: Path) -> Path:
    """``<home>/vault``."""
    return Path(home) / VAULT_DIR


def pack_path(home: Path, name: str) -> Path:
    """Where pack ``name`` (64 hex digits) lives."""
    return vault_dir(home) / "packs" / name[:2] / f"{name}.pack"


@dataclass
class PackBuilder:
    """Objects gathered for one pack: ``add(data)`` compresses one object unless the
    pack holds it already; ``objects`` lists ``(sha, offset, stored, raw)``."""

    parts: list[bytes] = field(default_factory=list)
    objects: list[tuple[bytes, int, int, int]] = field(default_factory=list)
    size: int = 0
    #: the pack's record (JSON-ready): the captures; ``write_pack`` adds the objects
    record: dict | None = None
    _have: set[bytes] = field(default_factory=set)

    def add(self, sha: bytes, data: bytes) -> None:
        """Add object ``data`` (its SHA-256 ``sha``) when not added before."""
        if sha in self._have:
            return
        self.add_frame(sha, compress(data), len(data))

    def add_frame(self, sha: bytes, z: bytes, raw: int) -> None:
        """Add an object compressed already (``compress``): its zstd frame ``z`` and its
        size ``raw`` uncompressed (when not added before)."""
        if sha in self._have:
            return
        self._have.add(sha)
        self.objects.append((sha, self.size, len(z), raw))
        self.parts.append(z)
        self.size += len(z)


#: each thread's zstd compressor (``_compressor``)
_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    """This thread's compressor at ``ZSTD_LEVEL``, made on its first use. A
    ``ZstdCompressor`` may not be used by two threads at once (python-zstandard's
    docs), so each thread has its own; reused, its context is not set up again for
    every object (~16 us of the ~23 us a 2 KB chunk cost; the frames are the same
    bytes: ``compress`` resets the context's parameters each call)."""
    c = getattr(_local, "zc", None)
    if c is None:
        c = _local.zc = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return c


def compress(data: bytes) -> bytes:
    """One object's zstd frame (level ``ZSTD_LEVEL``), by this thread's compressor."""
    return _compressor().compress(data)


def write_pack(home: Path, b: PackBuilder) -> tuple[str, int] | None:
    """Write the pack of ``b`` durably (temporary file in ``vault/tmp``, fsync, rename,
    fsync of the directory). Returns ``(name, bytes)``; None when ``b`` is empty.
    Raises OSError (a full disk: the caller's transaction then never commits)."""
    if not b.objects and b.record is None:
        return None
    rec = dict(b.record or {}, objects=[[sha.hex(), off, st, raw] for sha, off, st, raw in b.objects])
    frame = compress(json.dumps(rec, sort_keys=True).encode())
    data = b"".join([*b.parts, frame, TRAILER_MAGIC, struct.pack(">Q", len(frame))])
    name = hashlib.sha256(data).hexdigest()
    dest = pack_path(home, name)
    if dest.exists() and dest.stat().st_size == len(data):
        return name, len(data)  # the same objects written before (an orphan now reused)
    tmpdir = vault_dir(home) / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmpdir / f"{name}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:  # a full disk: no temp file stays behind
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)
    return name, len(data)


def read_object(home: Path, pack: str, offset: int, stored: int, raw: int, sha: bytes) -> bytes:
    """The bytes of one object, checked: read ``stored`` bytes at ``offset`` of pack
    ``pack``, decompress, compare size ``raw`` and SHA-256 ``sha``. Raises
    ``VaultDamaged`` naming the pack file on any difference."""
    with ObjectReader(home) as r:
        return r.read(pack, offset, stored, raw, sha)


class ObjectReader:
    """``read_object`` for many objects (a version's chunks): each pack opened once and
    one decompressor, every object checked all the same. A context manager (closes
    the packs it opened)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.files: dict[str, BinaryIO] = {}
        self.dctx = zstandard.ZstdDecompressor()

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *exc) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()

    def read(self, pack: str, offset: int, stored: int, raw: int, sha: bytes) -> bytes:
        """``read_object(home, pack, …)``. Raises ``VaultDamaged``."""
        f = self.files.get(pack)
        try:
            if f is None:
                f = self.files[pack] = open(pack_path(self.home, pack), "rb")  # noqa: SIM115  # (closed by ``__exit__``)
            f.seek(offset)
            z = f.read(stored)
        except OSError as e:
            raise _damaged(f"pack unreadable: {type(e).__name__}", pack_path(self.home, pack)) from None
        if len(z) != stored:
            raise _damaged(f"pack shorter than the manifest says (object at {offset})", Path(f.name))
        try:
            data = self.dctx.decompress(z, max_output_size=max(raw, 1))
        except zstandard.ZstdError as e:
            raise _damaged(f"object at {offset} does not decompress ({e})", Path(f.name)) from None
        if len(data) != raw or hashlib.sha256(data).digest() != sha:
            raise _damaged(f"object at {offset} does not match its SHA-256", Path(f.name))
        return data


def read_record(path: Path) -> tuple[dict, list[tuple[bytes, int, int, int]]] | None:
    """A pack's record and its objects ``(sha, offset, stored, raw)``, or None when the
    pack has none or it does not read (``vault verify --full`` names such packs)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            if end < 16:
                return None
            f.seek(end - 16)
            tail = f.read(16)
            if tail[:8] != TRAILER_MAGIC:
                return None
            (n,) = struct.unpack(">Q", tail[8:])
            if n > end - 16:
                return None
            f.seek(end - 16 - n)
            rec = json.loads(zstandard.ZstdDecompressor().decompress(f.read(n), max_output_size=1 << 30))
    except (OSError, ValueError, zstandard.ZstdError):
        return None
    if not isinstance(rec, dict):
        return None
    objs = [(bytes.fromhex(o[0]), o[1], o[2], o[3]) for o in rec.get("objects", [])]
    return rec, objs


def pack_names(home: Path) -> Iterable[tuple[str, Path]]:
    """``(name, path)`` of every pack file on disk."""
    root = vault_dir(home) / "packs"
    if not root.is_dir():
        return []
    return [(p.stem, p) for p in sorted(root.glob("*/*.pack"))]


def check_pack(path: Path, name: str) -> bool:
    """Whether the whole pack file hashes to its name (``vault verify --full``)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError:
        return False
    return h.hexdigest() == name


__all__ = [
    "ObjectReader",
    "PackBuilder",
    "VaultDamaged",
    "ZSTD_LEVEL",
    "check_pack",
    "compress",
    "pack_names",
    "pack_path",
    "read_object",
    "read_record",
    "vault_dir",
    "write_pack",
]

"""Taking what ingest read into the vault, in two steps around the writer's commit:

1. ``Capturer.prepare`` (in the thread that queues a group, beside the load of the group
   before): redact each capture's bytes (``redact_raw``: the secrets replaced in
   place by ``[REDACTED:<kind>]``, so JSON stays valid), cut a document into
   content-defined chunks (FastCDC, ``fastcdc``), compress the objects the vault lacks
   and write them as one durable pack (``packs.write_pack``).
2. ``record`` (in the writer's transaction, before the watermarks): the manifest rows.
   Objects are durable before the rows that name them commit, and the rows commit with
   the watermarks that say the bytes were read: a crash leaves at worst an orphan pack.

Generations (``vault_generations``): an append file (JSONL) is one generation of
segments in file order (``vault_segments``: file offset, length, SHA-256 of the
redacted object and of the original bytes) as long as each capture continues where the
last ended; a capture from byte 0 of a file whose bytes still start with the
generation's (a re-read after a parser change, a replaced file with the same head)
adds only what is past its end; a file that shrank or whose bytes differ starts a new
generation. A document is one generation per version (its chunks' SHA-256s in
``chunks``), skipped when the version is the one held (``doc_sha``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.sinks.vault.packs import PackBuilder, write_pack
from ctxkeep.sources.contract import RawCapture
from ctxkeep.timeutil import now_iso

#: FastCDC sizes for documents (bytes): small chunks, so that a document rewritten
#: after every message stores about its changed bytes per version
CDC_MIN, CDC_AVG, CDC_MAX = 512, 2048, 8192


def redact_raw(data: bytes, whole: bool = False) -> tuple[bytes, Counter]:
    """``data`` with its secrets redacted (``transforms.redact``) and the values
    replaced per kind. JSONL is redacted line by line (no JSON string holds a raw
    newline); ``whole`` documents as one text (a PEM block in Markdown spans lines).
    Bytes that are not UTF-8 pass unchanged around the markers (``surrogateescape``).
    Clean bytes come back as the same object."""
    import polars as pl

    from ctxkeep.transforms.redact import redact_counts, redact_series

    counts: Counter = Counter()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:  # not UTF-8: the exact rules in Python, which take lone surrogates
        parts = [data] if whole else data.splitlines(keepends=True)
        out = []
        for p in parts:
            t, n = redact_counts(p.decode("utf-8", "surrogateescape"))
            counts.update(n)
            out.append(t.encode("utf-8", "surrogateescape"))
        new = b"".join(out)
        return (data if new == data else new), counts
    lines = [text] if whole else text.splitlines(keepends=True)
    s = pl.Series(lines, dtype=pl.String)
    r = redact_series(s, counts)
    if r is s or not counts:
        return data, counts
    return "".join(r.to_list()).encode("utf-8"), counts


def chunks_of(data: bytes) -> list[bytes]:
    """``data`` cut into content-defined chunks (FastCDC, ``CDC_*`` sizes)."""
    if len(data) <= CDC_MIN:
        return [data] if data else []
    from fastcdc import fastcdc

    return [
        data[c.offset : c.offset + c.length]
        for c in fastcdc(data, min_size=CDC_MIN, avg_size=CDC_AVG, max_size=CDC_MAX, fat=False)
    ]


@dataclass
class Prepared:
    """One capture made ready: its ``raw`` (the original bytes stay for ``record``'s
    prefix test), the SHA-256 of its redacted bytes (an append segment's object) or
    of its chunks (a document), the redactions per kind and the redacted size."""

    raw: RawCapture
    sha: bytes
    chunks: list[bytes]
    redactions: Counter
    stored: int


@dataclass
class PreparedGroup:
    """A group's captures and the pack that holds their new objects
    (``(name, bytes)`` or None) with the objects' ``(sha, offset, stored, raw)``."""

    items: list[Prepared] = field(default_factory=list)
    pack: tuple[str, int] | None = None
    objects: list[tuple[bytes, int, int, int]] = field(default_factory=list)


class Capturer:
    """Prepares captures for the vault of ``home`` (``conn``: a connection to its
    store, read to skip objects the vault holds)."""

    def __init__(self, home: Path, conn) -> None:
        self.home, self.conn = Path(home), conn
        #: objects written by this capturer (a group in flight is not committed yet)
        self.written: set[bytes] = set()

    def _held(self, sha: bytes) -> bool:
        if sha in self.written:
            return True
        if self.conn is None:
            return False
        try:
            return (
                self.conn.execute("SELECT 1 FROM vault_objects WHERE sha = ?", (sha,)).fetchone() is not None
            )
        except Exception:  # a store before v11 (read-only plan) or busy: write it again
            return False

    def prepare(self, raws: list[RawCapture]) -> PreparedGroup | None:
        """Redact, chunk, compress and write (one pack, durable) the captures ``raws``.
        Returns None when there are none. Raises OSError when the pack cannot be
        written (the group is then not stored: nothing is lost, the watermark stays)."""
        if not raws:
            return None
        out = PreparedGroup()
        b = PackBuilder()
        for raw in raws:
            red, counts = redact_raw(raw.data, whole=raw.mode == "document")
            if raw.mode == "document":
                parts = chunks_of(red)
                shas = [hashlib.sha256(c).digest() for c in parts]
                for sha, c in zip(shas, parts, strict=True):
                    if not self._held(sha):
                        b.add(sha, c)
                out.items.append(Prepared(raw, hashlib.sha256(red).digest(), shas, counts, len(red)))
            else:
                sha = hashlib.sha256(red).digest()
                if not self._held(sha):
                    b.add(sha, red)
                out.items.append(Prepared(raw, sha, [], counts, len(red)))
        out.pack = write_pack(self.home, b)
        out.objects = b.objects
        self.written.update(o[0] for o in b.objects)
        return out


def tail(home: Path, raw: RawCapture, start: int) -> PreparedGroup:
    """A capture of ``raw``'s bytes from ``start`` on (relative to its offset), written
    as a pack of its own now (``record``'s rare path, in the writer's thread: a re-read
    from 0 that goes past the generation's end)."""
    sub = RawCapture(
        raw.path,
        raw.agent,
        raw.mode,
        raw.offset + start,
        raw.data[start:],
        raw.dev,
        raw.ino,
        raw.size,
        raw.mtime_ns,
        raw.meta,
    )
    g = Capturer(home, None).prepare([sub])
    assert g is not None
    return g


def _insert_objects(conn, g: PreparedGroup) -> None:
    if g.pack is None:
        return
    name, size = g.pack
    conn.execute(
        "INSERT OR IGNORE INTO vault_packs(name, bytes, created_at) VALUES(?,?,?)", (name, size, now_iso())
    )
    pack_id = conn.execute("SELECT pack_id FROM vault_packs WHERE name = ?", (name,)).fetchone()[0]
    conn.executemany(
        "INSERT OR IGNORE INTO vault_objects(sha, pack_id, offset, stored, raw) VALUES(?,?,?,?,?)",
        [(sha, pack_id, off, st, rw) for sha, off, st, rw in g.objects],
    )


def _file_id(conn, raw: RawCapture) -> int:
    row = conn.execute("SELECT vfile_id FROM vault_files WHERE path = ?", (raw.path,)).fetchone()
    if row:
        return row[0]
    mode = "document" if raw.mode == "document" else "append"
    return conn.execute(
        "INSERT INTO vault_files(path, agent, mode, meta) VALUES(?,?,?,?)",
        (raw.path, raw.agent, mode, json.dumps(raw.meta, default=str, sort_keys=True)),
    ).lastrowid


def _new_generation(conn, vfile_id: int, p: Prepared, stamp: str) -> int:
    r = p.raw
    gen = conn.execute(
        "SELECT coalesce(max(gen), 0) + 1 FROM vault_generations WHERE vfile_id = ?", (vfile_id,)
    ).fetchone()[0]
    doc = r.mode == "document"
    return conn.execute(
        "INSERT INTO vault_generations(vfile_id, gen, start, length, stored, dev, ino, size, mtime_ns, "
        "created_at, updated_at, redactions, doc_sha, chunks) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            vfile_id,
            gen,
            r.offset,
            len(r.data) if doc else 0,
            p.stored if doc else 0,
            r.dev,
            r.ino,
            r.size,
            r.mtime_ns,
            stamp,
            stamp,
            json.dumps(dict(p.redactions), sort_keys=True) if doc else "{}",
            hashlib.sha256(r.data).digest() if doc else None,
            b"".join(p.chunks) if doc else None,
        ),
    ).lastrowid


def _append_segment(conn, gen_id: int, p: Prepared, stamp: str) -> None:
    r = p.raw
    seq = conn.execute(
        "SELECT coalesce(max(seq), -1) + 1 FROM vault_segments WHERE gen_id = ?", (gen_id,)
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO vault_segments(gen_id, seq, offset, length, sha, raw_sha) VALUES(?,?,?,?,?,?)",
        (gen_id, seq, r.offset, len(r.data), p.sha, hashlib.sha256(r.data).digest()),
    )
    old = json.loads(
        conn.execute("SELECT redactions FROM vault_generations WHERE gen_id = ?", (gen_id,)).fetchone()[0]
        or "{}"
    )
    merged = Counter(old) + p.redactions
    conn.execute(
        "UPDATE vault_generations SET length = length + ?, stored = stored + ?, dev = ?, ino = ?, size = ?, "
        "mtime_ns = ?, updated_at = ?, redactions = ? WHERE gen_id = ?",
        (
            len(r.data),
            p.stored,
            r.dev,
            r.ino,
            r.size,
            r.mtime_ns,
            stamp,
            json.dumps(dict(merged), sort_keys=True),
            gen_id,
        ),
    )


def _held_prefix(conn, gen_id: int, p: Prepared) -> int | None:
    """How many bytes of ``p``'s capture (from its offset) the generation already holds
    with the same original bytes (each segment's ``raw_sha`` against the capture's
    bytes at its place), or None when a segment differs or the capture starts inside
    a segment."""
    r = p.raw
    segs = conn.execute(
        "SELECT offset, length, raw_sha FROM vault_segments WHERE gen_id = ? AND offset >= ? ORDER BY seq",
        (gen_id, r.offset),
    ).fetchall()
    first = conn.execute(
        "SELECT count(*) FROM vault_segments WHERE gen_id = ? AND offset < ? AND offset + length > ?",
        (gen_id, r.offset, r.offset),
    ).fetchone()[0]
    if first:
        return None
    held = 0
    for off, length, raw_sha in segs:
        if off != r.offset + held:
            return None
        if held + length > len(r.data):
            return held if held else None  # the capture ends inside this segment
        if hashlib.sha256(r.data[held : held + length]).digest() != raw_sha:
            return None
        held += length
    return held


def record(conn, home: Path, g: PreparedGroup | None) -> None:
    """The manifest rows of a prepared group, in the caller's transaction (the one that
    stores the group's watermarks): objects, files, generations, segments (see the
    module doc for when a generation starts)."""
    if g is None:
        return
    stamp = now_iso()
    _insert_objects(conn, g)
    for p in g.items:
        r = p.raw
        vfile_id = _file_id(conn, r)
        cur = conn.execute(
            "SELECT gen_id, start, length, doc_sha FROM vault_generations WHERE vfile_id = ? "
            "ORDER BY gen DESC LIMIT 1",
            (vfile_id,),
        ).fetchone()
        if r.mode == "document":
            if cur is not None and cur[3] == hashlib.sha256(r.data).digest():
                continue  # the version held (a re-read after a parser change)
            _new_generation(conn, vfile_id, p, stamp)
            continue
        if cur is None:
            _append_segment(conn, _new_generation(conn, vfile_id, p, stamp), p, stamp)
            continue
        gen_id, start, length, _ = cur
        end = start + length
        if r.offset == end:
            _append_segment(conn, gen_id, p, stamp)
            continue
        held = _held_prefix(conn, gen_id, p) if start <= r.offset < end else None
        if held is None:  # shrank, replaced, or bytes that differ: a new generation
            _append_segment(conn, _new_generation(conn, vfile_id, p, stamp), p, stamp)
            continue
        if held >= len(r.data):
            continue  # every byte held already
        t = tail(home, r, held)
        _insert_objects(conn, t)
        _append_segment(conn, gen_id, t.items[0], stamp)


__all__ = [
    "CDC_AVG",
    "CDC_MAX",
    "CDC_MIN",
    "Capturer",
    "Prepared",
    "PreparedGroup",
    "chunks_of",
    "record",
    "redact_raw",
]

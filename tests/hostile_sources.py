"""The shared part of the hostile-input property tests (``test_hostile_*.py``) and the
fuzz harness (``tests/bench/fuzz_sources.py``): one sample file per agent and file
mode (the corpus or the agents' fixtures), a way to read a changed copy of it through
the agent's source, and the checks every read must pass.

A read (``read_all``) runs ``source.read(file, None, batch)`` to the end, as the ingest
reader does; it must never raise. What it yields is checked by ``check_accounted``: every
entry carries a text and a record id, every quarantined row a reason and its SHA-256,
and in an append-mode file every complete non-blank line is accounted for: an entry
whose ``source_offset`` is the line's, or a quarantined row at that offset, or the
line is counted in the batch's ``lines`` as read (a known record that holds no
context). Documents and databases must end with a watermark or a quarantined row (no
silent loss, no endless re-read)."""

from __future__ import annotations

import functools
import json
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.sources import SOURCES
from ctxkeep.sources.contract import Batch, DiscoveryContext, ImportOnly, SourceFile

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
#: file name suffixes of JSON and JSONL files (Kiro IDE's ``.chat`` files are JSON documents)
JSON_SUFFIXES = (".json", ".jsonl", ".chat")


@dataclass(frozen=True)
class Sample:
    agent: str
    mode: str  # the file's mode: append, rewrite, sqlite
    path: Path  # the original (never written)
    meta: dict = field(hash=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.agent}-{self.mode}-{self.path.name}"


@functools.cache
def samples(corpus_home: Path, *, every_name: bool = False) -> list[Sample]:
    """The smallest non-empty file of every (agent, file mode) that discovery finds in
    the agent's fixture home, else in the corpus home; with ``every_name``, the
    smallest of every (agent, mode, file name pattern) instead (the Cline family keeps
    two documents per task; JSONL files are one pattern). An import-only source
    (``contract.ImportOnly``: a data export) is never discovered: its sample is the
    smallest file under its fixture dir that its ``matches`` claims."""
    out = []
    for agent, src in SOURCES.items():
        found: dict[tuple, SourceFile] = {}
        if isinstance(src, ImportOnly):
            # a data export is never discovered: its fixture files are the ones its
            # matches() claims, as `ingest --path` takes them
            for p in sorted((FIXTURES / agent).rglob("*")):
                if p.is_file() and src.matches(p) and p.stat().st_size:
                    found.setdefault((src.MODE, p.name if every_name else ""), SourceFile(agent, p, src.MODE))
        for home in (FIXTURES / agent / "home", corpus_home):
            if found:
                break
            if not home.is_dir():
                continue
            for f in src.discover(DiscoveryContext(home=home, env={})).files:
                size = f.path.stat().st_size
                if f.mode == "tree" or size == 0:
                    continue
                kind = (f.mode, f.path.name if every_name and f.path.suffix == ".json" else "")
                best = found.get(kind)
                if best is None or size < best.path.stat().st_size:
                    found[kind] = f
            if found:
                break
        out += [Sample(agent, mode, f.path, dict(f.meta)) for (mode, _), f in sorted(found.items())]
    return out


def place(sample: Sample, workdir: Path) -> Path:
    """A private copy of the sample at ``workdir`` (same file name; a database's
    ``-wal``/``-shm`` are not copied). Returns the copy's path."""
    workdir.mkdir(parents=True, exist_ok=True)
    dst = workdir / sample.path.name
    shutil.copyfile(sample.path, dst)
    if sample.mode == "sqlite":  # fold a -wal into the copy so it stands alone
        src = sqlite3.connect(f"file:{sample.path}?mode=ro&immutable=1", uri=True)
        dst.unlink()
        d = sqlite3.connect(dst)
        try:
            src.backup(d)
        finally:
            d.close()
            src.close()
    return dst


def read_all(sample: Sample, path: Path, batch_bytes: int = 1 << 16) -> list[Batch]:
    """Every batch the agent's source yields for ``path`` read from the start."""
    src = SOURCES[sample.agent]
    f = SourceFile(sample.agent, path, sample.mode, dict(sample.meta))
    return list(src.read(f, None, batch_bytes))


def line_offsets(data: bytes) -> list[int]:
    """Byte offsets of the complete (newline-terminated) non-blank lines of ``data``."""
    out, pos = [], 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return out
        if data[pos:nl].strip():
            out.append(pos)
        pos = nl + 1


def check_accounted(sample: Sample, data: bytes | None, batches: list[Batch]) -> None:
    """The checks of the module doc; ``data`` is the file's bytes (append mode)."""
    entries = [e for b in batches for e in b.entries]
    quarantine = [q for b in batches for q in b.quarantine]
    for e in entries:
        assert isinstance(e.get("text", ""), str | type(None)), e
        assert e.get("record_id"), e
        assert e.get("agent") == sample.agent, e
    for q in quarantine:
        assert q["reason"] and len(q["raw_sha256"]) == 64, q
    if sample.mode == "append" and data is not None:
        seen = {int(e["source_offset"]) for e in entries if e.get("source_offset") is not None}
        seen |= {int(q["offset"]) for q in quarantine}
        lines = sum(b.lines for b in batches)
        missing = [o for o in line_offsets(data) if o not in seen]
        assert len(missing) <= lines, (missing, lines)
        assert sum(b.bytes_read for b in batches) <= len(data)
    else:
        assert quarantine or (batches and batches[-1].watermark is not None), batches


def db_tables(path: Path) -> dict[str, list[str]]:
    """``{table: [column, …]}`` of a database's ordinary tables (no ``sqlite_*``, no
    virtual tables), by name, read from an immutable read-only connection."""
    c = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        names = [
            r[0]
            for r in c.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"
            )
        ]
        return {n: [r[1] for r in c.execute(f'PRAGMA table_info("{n}")')] for n in names}
    finally:
        c.close()


def db_cells(path: Path, limit: int | None = None):
    """``(table, column, rowid, value)`` of every cell of ``db_tables`` (the first
    ``limit`` rows of each)."""
    c = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        for t, cols in db_tables(path).items():
            for col in cols:
                q = f'SELECT rowid, "{col}" FROM "{t}"' + ("" if limit is None else f" LIMIT {int(limit)}")
                for rowid, v in c.execute(q).fetchall():
                    yield t, col, rowid, v
    finally:
        c.close()


def json_leaves(obj, path=()):
    """``(path, value)`` of every string leaf of a decoded JSON value."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from json_leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from json_leaves(v, (*path, i))
    elif isinstance(obj, str):
        yield path, obj


def set_at(obj, path, value):
    """A copy of ``obj`` with the value at ``path`` replaced (``path == ()``: ``value``)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: set_at(obj[head], rest, value)}
    out = list(obj)
    out[head] = set_at(obj[head], rest, value)
    return out


def json_values():
    """A Hypothesis strategy of arbitrary JSON values (nested up to 12 leaves)."""
    from hypothesis import strategies as st

    return st.recursive(
        st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
        max_leaves=12,
    )


def json_paths(obj, path=()):
    """Every path into a decoded JSON value (the root ``()`` included)."""
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from json_paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from json_paths(v, (*path, i))


def dumps_like(original: str, obj) -> str:
    """``obj`` as JSON in the spacing of ``original`` (compact, or with spaces after
    separators as Python's default)."""
    compact = '":' in original.replace(" ", "") and '": ' not in original
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":") if compact else None)

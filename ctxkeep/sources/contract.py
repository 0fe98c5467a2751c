"""What every source shares: discovered files, watermarks, batches and the incremental
JSONL reader with its bad-line quarantine.

A source module (one per agent) provides::

    AGENT: str                      # e.g. "claude-code"
    PARSER_VERSION: int             # bump to re-read every file of the agent
    def discover(ctx: DiscoveryContext) -> Discovery
    def read(file: SourceFile, wm: Watermark | None, batch_bytes: int) -> Iterator[Batch]

and optionally::

    def matches(path: Path) -> bool                 # claims an explicit --path file
    def unchanged(file: SourceFile, wm: Watermark | None) -> bool
        # replaces ``is_unchanged`` in the ingest plan (``sources.file_unchanged``):
        # JSON-tree sources compare a fingerprint of the session's files; files of
        # mode "sqlite" need none (the database and its -wal are compared)

``read`` yields bounded batches. Each batch carries the entry dicts it parsed (keys of
``ctxkeep.schema.SOURCE_SCHEMA``), the lines it quarantined, and the watermark that is
true once the batch is stored, so a crash between batches loses nothing and repeats
nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

HEAD_BYTES = 4096
DEFAULT_BATCH_BYTES = 16 * 1024 * 1024
QUARANTINE_RAW_MAX = 16 * 1024 * 1024  # keep up to 16 MiB of a bad line's bytes


@dataclass
class DiscoveryContext:
    """Where to look: ``home`` (the user's home dir), ``env`` (environment), extra dirs
    from config (``extra_dirs``) and explicit paths from ``--path``."""

    home: Path
    env: dict[str, str]
    extra_dirs: list[Path] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)

    @classmethod
    def from_env(cls, extra_dirs=(), paths=()) -> "DiscoveryContext":
        env = dict(os.environ)
        home = Path(env.get("HOME") or Path.home())
        return cls(home=home, env=env, extra_dirs=list(extra_dirs), paths=list(paths))


@dataclass
class SourceFile:
    """A discovered session file. ``mode``: ``append`` (JSONL, read from the byte
    offset), ``rewrite`` (whole document rewritten in place: re-read on change) or
    ``sqlite`` (agent database, read by row high-water mark). ``meta`` carries
    source-specific facts found at discovery (e.g. the parent session of a sub-agent)."""

    agent: str
    path: Path
    mode: str = "append"
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Discovery:
    """What a source found: files, the places it looked, and why nothing was found."""

    agent: str
    files: list[SourceFile] = field(default_factory=list)
    searched: list[Path] = field(default_factory=list)
    reason: str | None = None


@dataclass
class Watermark:
    """How far a file was read. ``offset`` is the byte offset after the last complete
    line stored; ``head_hash`` the SHA-256 of its first ``head_len`` bytes (at most
    4 KiB); ``state`` the parser's carry-over (JSON-serializable)."""

    path: str
    agent: str
    dev: int = 0
    ino: int = 0
    size: int = 0
    mtime_ns: int = 0
    offset: int = 0
    head_len: int = 0
    head_hash: str = ""
    parser_version: int = 0
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Batch:
    """One bounded unit of work: entries (dicts), quarantined lines (dicts with path,
    offset, length, reason, action, raw), the watermark to store with them (None: an
    intermediate batch of a document, the watermark comes with the last one), the raw
    bytes consumed (``bytes_read``) and status changes of stored entries."""

    entries: list[dict]
    quarantine: list[dict]
    watermark: Watermark | None
    bytes_read: int = 0
    lines: int = 0
    #: requests to change the ``status`` of entries stored earlier (or in this
    #: batch), applied in order after the batch's entries are inserted: dicts
    #: ``{"agent", "session_id", "message_ids": [str], "status": str}`` (e.g. a
    #: Gemini ``$rewindTo`` marks the dropped messages ``rewound``)
    status_changes: list[dict] = field(default_factory=list)


def file_head(path: Path, suffixes: tuple[str, ...], n: int = 4096) -> bytes | None:
    """The first ``n`` bytes of ``path`` when its suffix is one of ``suffixes``, else
    None (also when it cannot be read). What sources' ``matches`` look at."""
    if path.suffix not in suffixes:
        return None
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return None


def head_hash(path: Path, length: int) -> str:
    """SHA-256 hex of the first ``length`` bytes of ``path``."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(length)).hexdigest()


def start_offset(path: Path, st: os.stat_result, wm: Watermark | None,
                 parser_version: int) -> tuple[int, dict, str]:
    """Decide where to resume reading ``path``.

    Returns ``(offset, state, why)``: offset 0 with empty state when the file is new,
    was replaced (device/inode changed), shrank, had its head rewritten, or the parser
    version changed; else the stored offset and state. ``why`` names the reason.
    """
    if wm is None:
        return 0, {}, "new"
    if wm.parser_version != parser_version:
        return 0, {}, "parser changed"
    if (wm.dev, wm.ino) != (st.st_dev, st.st_ino):
        return 0, {}, "replaced"
    if st.st_size < wm.offset:
        return 0, {}, "shrank"
    if wm.head_len and head_hash(path, wm.head_len) != wm.head_hash:
        return 0, {}, "head changed"
    return wm.offset, dict(wm.state), "append"


def is_unchanged(st: os.stat_result, wm: Watermark | None, parser_version: int) -> bool:
    """True when nothing can be new: same inode, size, mtime and parser version."""
    return (wm is not None and wm.parser_version == parser_version
            and (wm.dev, wm.ino, wm.size, wm.mtime_ns)
            == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))


def _scrub(obj):
    """Replace lone surrogates in every string of ``obj`` by U+FFFD (recursively)."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in obj)
    if isinstance(obj, dict):
        return {_scrub(k): _scrub(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj


def parse_line(raw: bytes) -> tuple[Any, str | None]:
    """Parse one JSONL line.

    Returns ``(record, None)`` for valid JSON; ``(record, repair_reason)`` when the line
    parses only leniently (invalid UTF-8 bytes, lone surrogate escapes, raw control
    characters: the record is kept with U+FFFD replacements); ``(None, reason)`` when
    it cannot be parsed (the caller quarantines it).
    """
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as e:
        first_error = str(e)
    if b"\x00" in raw:
        return None, "NUL bytes in line"
    text = raw.decode("utf-8", "replace")
    try:
        rec = json.loads(text, strict=False)
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            return None, f"two JSON values glued on one line (second at char {e.pos})"
        return None, f"malformed JSON: {e.msg} at char {e.pos}"
    reasons = []
    if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
        reasons.append("invalid UTF-8 replaced")
    scrubbed = _scrub(rec)
    if scrubbed != rec:
        reasons.append("lone surrogate replaced")
    if not reasons:
        reasons.append(f"lenient parse ({first_error.split(':')[0]})")
    return scrubbed, "repaired: " + ", ".join(reasons)


_DECODER = json.JSONDecoder(strict=False)
_SALVAGE_MAX_STARTS = 256


def salvage_line(raw: bytes) -> list[tuple[int, bytes]]:
    """Split a line that does not parse into the JSON objects it still holds.

    Handles what a crash or a bad writer leaves: NUL padding (runs of ``\\x00``), two
    or more records glued without a newline, and a torn record followed on the same
    line by a complete one. Returns ``(byte offset within raw, bytes)`` of each
    complete top-level object that runs up to the end of its fragment or directly into
    the next object and does not stand in value position (so a ``{…}`` nested
    inside a torn record is not taken for a record); ``[]`` when nothing can be recovered. Bytes between pieces are lost only
    from the index: the caller quarantines the whole line.
    """
    out: list[tuple[int, bytes]] = []
    for m in re.finditer(rb"[^\x00]+", raw):
        frag = m.group()
        text = frag.decode("utf-8", "surrogateescape")
        # a record starts the fragment or follows garbage/another record; a "{" in
        # value position (after ":", "," or "[") is nested inside a torn record
        starts = [i for i, c in enumerate(text)
                  if c == "{" and text[:i].rstrip()[-1:] not in (":", ",", "[")]
        starts = starts[:_SALVAGE_MAX_STARTS]
        for st in starts:
            pieces = _chain(text, st)
            if pieces:
                for a, b in pieces:
                    lead = len(text[:a].encode("utf-8", "surrogateescape"))
                    blen = len(text[a:b].encode("utf-8", "surrogateescape"))
                    out.append((m.start() + lead, frag[lead:lead + blen]))
                break
    return out


def _chain(text: str, pos: int) -> list[tuple[int, int]] | None:
    """Objects decoded back to back from ``pos`` to the end of ``text`` (trailing
    whitespace allowed), as (start, end) char spans; None when the chain breaks."""
    spans = []
    n = len(text)
    while True:
        try:
            val, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        if not isinstance(val, dict):
            return None
        spans.append((pos, end))
        while end < n and text[end] in " \t\r":
            end += 1
        if end >= n:
            return spans
        if text[end] != "{":
            return None
        pos = end


def quarantine_row(path: Path, offset: int, raw: bytes, reason: str, action: str = "skipped") -> dict:
    """A quarantine record: path, byte offset and length of the line, the reason, the
    action (``skipped``: not ingested; ``repaired``: ingested with replacements, or split
    into the records it held) and up to 16 MiB of the raw bytes."""
    return {"path": str(path), "offset": offset, "length": len(raw), "reason": reason,
            "action": action, "raw": bytes(raw[:QUARANTINE_RAW_MAX])}


ParseFn = Callable[[dict, int, str, dict], list[dict]]


def read_jsonl(file: SourceFile, wm: Watermark | None, parser_version: int,
               parse: ParseFn, batch_bytes: int = DEFAULT_BATCH_BYTES,
               init_state: Callable[[SourceFile], dict] | None = None) -> Iterator[Batch]:
    """Read the complete lines of an append-only JSONL file after its watermark.

    ``parse(record, offset, line_hash, state)`` maps one parsed line (a dict) to entry
    dicts and may update ``state``, which is stored in the watermark; status changes
    it appends to ``state["_status_changes"]`` ride on the batch
    (``Batch.status_changes``). A record that is not a JSON object, or a line that does
    not parse, is quarantined; a parse function that raises quarantines only that line.
    A line that does not parse but still holds complete records (NUL padding, records
    glued without a newline, a torn record followed by a whole one: ``salvage_line``) is
    quarantined as ``repaired`` and its records are ingested with their own byte
    offsets. A last line without ``\\n`` is left for the
    next run (the agent may be writing it). A file that vanished yields nothing.

    Yields batches of at most about ``batch_bytes`` raw bytes (one line may exceed it).
    """
    path = file.path
    try:
        f = open(path, "rb")
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return
    with f:
        st = os.fstat(f.fileno())
        offset, state, _why = start_offset(path, st, wm, parser_version)
        if offset == 0 and init_state:
            state = init_state(file)
        fd = f.fileno()
        f.seek(offset)
        pending = b""
        pos = offset  # file offset of pending[0]
        while True:
            chunk = f.read(batch_bytes)
            data = pending + chunk if pending else chunk
            if not data:
                break
            end = data.rfind(b"\n")
            if end < 0:
                if not chunk:
                    break  # an unterminated last line: leave for the next run
                pending = data
                continue
            complete, pending = data[: end + 1], data[end + 1:]
            entries: list[dict] = []
            quarantine: list[dict] = []
            lines = 0
            start = 0
            n = len(complete)
            while start < n:
                nl = complete.index(b"\n", start)
                raw = complete[start:nl]
                line_off = pos + start
                start = nl + 1
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
                if not raw.strip():
                    continue
                lines += 1
                rec, problem = parse_line(raw)
                if rec is None:
                    pieces = salvage_line(raw)
                    if not pieces:
                        quarantine.append(quarantine_row(path, line_off, raw, problem))
                        continue
                    quarantine.append(quarantine_row(
                        path, line_off, raw,
                        f"{problem}; recovered {len(pieces)} record(s) at line offsets "
                        + ",".join(str(o) for o, _ in pieces), "repaired"))
                    todo = []
                    for rel, piece in pieces:
                        prec, pprob = parse_line(piece)
                        if prec is not None:
                            todo.append((line_off + rel, piece, prec))
                else:
                    if problem:
                        quarantine.append(quarantine_row(path, line_off, raw, problem, "repaired"))
                    todo = [(line_off, raw, rec)]
                for rec_off, rec_raw, rec in todo:
                    if not isinstance(rec, dict):
                        quarantine.append(quarantine_row(
                            path, rec_off, rec_raw, f"not a JSON object ({type(rec).__name__})"))
                        continue
                    lh = hashlib.sha256(rec_raw).hexdigest()
                    try:
                        entries.extend(parse(rec, rec_off, lh, state))
                    except Exception as e:  # a parser bug must not stop the run
                        quarantine.append(quarantine_row(
                            path, rec_off, rec_raw, f"parser error: {type(e).__name__}: {e}"))
            pos += len(complete)
            # a watermark records the file's size only once every byte was seen, so
            # a run stopped between batches resumes instead of skipping the file
            final = pos + len(pending) >= st.st_size
            changes = state.pop("_status_changes", [])  # see Batch.status_changes
            new_wm = _watermark(file, st, fd, pos, parser_version, state, final)
            yield Batch(entries, quarantine, new_wm, bytes_read=len(complete), lines=lines,
                        status_changes=changes)
            if not chunk:
                break
        if pos == offset and (wm is None or (wm.size, wm.mtime_ns) != (st.st_size, st.st_mtime_ns)
                              or wm.offset != pos):
            # nothing complete was read (empty file, or only a partial last line): record
            # the watermark anyway so that an unchanged file is skipped next time
            yield Batch([], [], _watermark(file, st, fd, pos, parser_version, state, True))


def _watermark(file: SourceFile, st: os.stat_result, fd: int, pos: int,
               parser_version: int, state: dict, final: bool) -> Watermark:
    head_len = min(HEAD_BYTES, pos)
    hh = hashlib.sha256(os.pread(fd, head_len, 0)).hexdigest() if head_len else ""
    return Watermark(path=str(file.path), agent=file.agent, dev=st.st_dev, ino=st.st_ino,
                     size=st.st_size if final else pos, mtime_ns=st.st_mtime_ns, offset=pos,
                     head_len=head_len,
                     head_hash=hh, parser_version=parser_version, state=state)


# ---------------------------------------------------------------- whole documents

#: a document whose mtime is older than this is complete (the agent is not writing it);
#: ``$CTXKEEP_IDLE_SECONDS`` overrides it (read at each call)
IDLE_SECONDS = 120


def idle_seconds() -> float:
    """Seconds since its last write after which a file counts as idle (complete):
    ``$CTXKEEP_IDLE_SECONDS`` if set, else ``IDLE_SECONDS``."""
    v = os.environ.get("CTXKEEP_IDLE_SECONDS")
    try:
        return float(v) if v is not None else IDLE_SECONDS
    except ValueError:
        return IDLE_SECONDS
DOC_BATCH_ENTRIES = 5000

DocParseFn = Callable[[bytes, Any, dict, bool], list[dict]]


def read_document(file: SourceFile, wm: Watermark | None, parser_version: int,
                  parse: DocParseFn, batch_bytes: int = DEFAULT_BATCH_BYTES, *,
                  json_doc: bool = True, now: float | None = None) -> Iterator[Batch]:
    """Read a whole document that its agent rewrites in place (mode ``rewrite``).

    The SHA-256 of the file's bytes is kept in the watermark state (``sha256``): an
    unchanged hash yields only a fresh watermark; a changed one re-reads the whole file
    and the stable entry ids (dedup in the store) keep it from doubling.

    ``parse(raw, doc, state, idle)`` maps the document to entry dicts; ``doc`` is the
    parsed JSON value (``json_doc``) or the text decoded as UTF-8 with replacement;
    ``idle`` is True when the file's mtime is at least ``IDLE_SECONDS`` old. A parser
    that holds back a part that may still grow (e.g. the last turn of a live export)
    sets ``state["complete"] = False``; the watermark then records no size, so the next
    run looks again even if the file did not change.

    Bad input never stops a run: a document that is not valid JSON, or a parser that
    raises, quarantines the file at offset 0 (reason, up to 16 MiB of its bytes) and
    stores the hash, so the same bad bytes are not reported twice. Invalid JSON in a
    file modified less than ``IDLE_SECONDS`` ago is taken for a write in progress: it is
    not quarantined, and the next run looks again. A vanished or
    unreadable file yields nothing. Yields batches of at most ``DOC_BATCH_ENTRIES``
    entries; only the last carries the watermark.
    """
    path = file.path
    try:
        f = open(path, "rb")
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return
    with f:
        st = os.fstat(f.fileno())
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    idle = ((now if now is not None else time.time()) - st.st_mtime) >= idle_seconds()

    def _wm(state: dict, complete: bool) -> Watermark:
        hl = min(HEAD_BYTES, len(data))
        return Watermark(path=str(path), agent=file.agent, dev=st.st_dev, ino=st.st_ino,
                         size=len(data) if complete else 0, mtime_ns=st.st_mtime_ns,
                         offset=len(data), head_len=hl,
                         head_hash=hashlib.sha256(data[:hl]).hexdigest(),
                         parser_version=parser_version, state=state)

    old = wm.state if (wm is not None and wm.parser_version == parser_version) else {}
    if old.get("sha256") == digest and old.get("complete", True):
        yield Batch([], [], _wm(dict(old), True))
        return
    state: dict = {"sha256": digest}
    # on bad input the parser's carry-over (e.g. the message ids seen) is kept
    kept = {k: v for k, v in old.items() if k not in ("sha256", "complete")}
    quarantine: list[dict] = []
    doc: Any = None
    if json_doc:
        if not data.strip():
            yield Batch([], [], _wm(state, True), bytes_read=len(data))
            return
        doc, problem = parse_line(data)
        if doc is None:
            if not idle:
                # most likely caught mid-write: look again next run, report nothing yet
                yield Batch([], [], _wm(dict(kept, complete=False), False))
                return
            yield Batch([], [quarantine_row(path, 0, data, problem or "malformed JSON")],
                        _wm(dict(kept, sha256=digest), True), bytes_read=len(data), lines=1)
            return
        if problem:
            quarantine.append(quarantine_row(path, 0, data, problem, "repaired"))
    else:
        doc = data.decode("utf-8", "replace")
    try:
        entries = parse(data, doc, state, idle)
    except Exception as e:  # a parser bug must not stop the run
        yield Batch([], quarantine + [quarantine_row(
            path, 0, data, f"parser error: {type(e).__name__}: {e}")],
            _wm(dict(kept, sha256=digest), True), bytes_read=len(data), lines=1)
        return
    changes = state.pop("_status_changes", [])
    complete = state.get("complete", True)
    for i in range(0, max(len(entries), 1), DOC_BATCH_ENTRIES):
        last = i + DOC_BATCH_ENTRIES >= len(entries)
        yield Batch(entries[i:i + DOC_BATCH_ENTRIES], quarantine if last else [],
                    _wm(state, complete) if last else None,
                    bytes_read=len(data) if last else 0, lines=1 if last else 0,
                    status_changes=changes if last else [])

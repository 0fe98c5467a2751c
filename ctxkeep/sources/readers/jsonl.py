"""The incremental reader of append-only JSONL files (mode ``append``) and its bad-line
quarantine: resume at the byte offset of the watermark, parse leniently, salvage the
records a torn or glued line still holds.

Used by the JSONL agents (Claude Code, Codex, Copilot CLI, Qwen Code, Gemini CLI
``.jsonl``, goose legacy files, Cursor agent transcripts); ``parse_line`` also serves
``readers.document`` and compress.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    OversizeLine,
    RawCapture,
    SourceFile,
    Watermark,
    idle_seconds,
    max_line_bytes,
    quarantine_row,
)
from ctxkeep.sources.coverage import Tally

HEAD_BYTES = 4096

#: files read from elsewhere: ``original path (text) → the file holding its bytes``,
#: set by ``maintenance.reparse`` while it parses the vault's generations again (the
#: agents' files may be gone); the readers report the original path
VIEW: dict[str, Path] = {}


def readable(path: Path) -> bool:
    """Whether ``path`` exists or ``VIEW`` maps it (a reparse from the vault)."""
    return str(path) in VIEW or path.exists()


def stat_of(path: Path) -> os.stat_result:
    """``os.stat`` of ``path``, or of the file ``VIEW`` maps it to (a reparse from the
    vault: that file carries the generation's mtime, the agent's file may be gone).
    Raises OSError. A source that dates entries by its file's mtime uses this, not
    ``path.stat()``: a reparse of a deleted file otherwise lost those entries."""
    return os.stat(VIEW.get(str(path), path))


def open_file(path: Path) -> tuple[BinaryIO, os.stat_result] | None:
    """``path`` opened for binary reading with its ``fstat``, or None when it vanished,
    is a directory or may not be read, or is no regular file (a FIFO swapped in after
    discovery: opened non-blocking, so the open never waits for a writer; a device):
    a source then yields nothing for it. A path in ``VIEW`` opens the file it maps to."""
    try:
        fd = os.open(
            VIEW.get(str(path), path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        )
    except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:  # a symlink loop made after discovery
            return None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), st


def file_head(path: Path, suffixes: tuple[str, ...], n: int = 4096) -> bytes:
    """The first ``n`` bytes of ``path`` when its suffix is one of ``suffixes``, else
    ``b""`` (also when it cannot be read), so a marker test on it is simply False.
    What sources' ``matches`` look at."""
    if path.suffix not in suffixes:
        return b""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def head_hash(path: Path, length: int) -> str:
    """SHA-256 hex of the first ``length`` bytes of ``path`` (``VIEW`` applies)."""
    with open(VIEW.get(str(path), path), "rb") as f:
        return hashlib.sha256(f.read(length)).hexdigest()


def start_offset(
    path: Path, st: os.stat_result, wm: Watermark | None, parser_version: int
) -> tuple[int, dict, str]:
    """Decide where to resume reading ``path``.

    Returns ``(offset, state, why)``: offset 0 with empty state when the file is new,
    was replaced (device/inode changed), shrank, had its head rewritten, was rewritten
    in place so that its watermark no longer ends a line, or the parser version
    changed; else the stored offset and state. ``why`` names the reason.
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
    if wm.offset:
        # a file rewritten in place (same inode, same head, longer: a restored or
        # re-synced copy) puts other bytes before the watermark: reading on would tear
        # a record in two, quarantined as bad JSON (newuser19 F16), or, where the old
        # offset lands on a line boundary of the other content, skip its lines (left20).
        # The bytes before it are those hashed in ``state["_tail"]``; a watermark
        # written before that key (session 19 and older) must at least end a line
        held = wm.state.get(TAIL_KEY)
        if held is None:
            if _bytes_before(path, wm.offset, 1) != b"\n":
                return 0, {}, "rewritten"
        elif tail_hash(_bytes_before(path, wm.offset, TAIL_BYTES)) != held:
            return 0, {}, "rewritten"
    return wm.offset, dict(wm.state), "append"


#: the watermark state's key of the hash of the bytes just before its offset (``tail_hash``)
TAIL_KEY = "_tail"
#: how many bytes before a watermark's offset ``state["_tail"]`` hashes (at most)
TAIL_BYTES = 256


def tail_hash(before: bytes) -> str:
    """``state["_tail"]``: the SHA-256 (first 16 hex digits) of the at most
    ``TAIL_BYTES`` bytes before a watermark's offset (its last line's end, ``\\n``
    included): a file rewritten in place with other content is told from one appended
    to even where the old offset lands on a line boundary of the new content."""
    return hashlib.sha256(before).hexdigest()[:16]


def with_tail(state: dict, data: bytes) -> dict:
    """``state`` with ``state["_tail"]`` of a watermark at the end of ``data`` (the
    file's bytes up to the offset, or at least its last ``TAIL_BYTES``): for the
    watermarks written outside the reader (compress, scrub). ``state`` is modified."""
    if data:
        state[TAIL_KEY] = tail_hash(data[-TAIL_BYTES:])
    else:
        state.pop(TAIL_KEY, None)
    return state


def _bytes_before(path: Path, offset: int, n: int) -> bytes:
    """The at most ``n`` bytes of ``path`` (``VIEW`` applies) before ``offset``; fewer
    past its end, b"" when it cannot be read (the read that follows says why)."""
    n = min(n, offset)
    try:
        with open(VIEW.get(str(path), path), "rb") as f:
            return os.pread(f.fileno(), n, offset - n)
    except OSError:
        return b""


def is_unchanged(st: os.stat_result, wm: Watermark | None, parser_version: int) -> bool:
    """True when nothing can be new: same inode, size, mtime and parser version, and
    no unended last line waiting that the idle time now makes final (``read_jsonl``)."""
    return (
        wm is not None
        and wm.parser_version == parser_version
        and (wm.dev, wm.ino, wm.size, wm.mtime_ns) == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        and not (waiting(wm.offset, wm.size, wm.state) and _idle(st))
    )


def waiting(offset: int, size: int, state: dict) -> bool:
    """Whether a watermark (of an append file) leaves an unended last line not judged
    yet: bytes past its offset, and no ``state["_unended"]`` of their length."""
    held = state.get(UNENDED_KEY) if isinstance(state, dict) else None
    if offset is None or size is None:
        return False
    return offset < size and not (isinstance(held, dict) and held.get("len") == size - offset)


def _idle(st: os.stat_result) -> bool:
    return time.time() - st.st_mtime >= idle_seconds()


def facts_unchanged(st: os.stat_result, facts: tuple | None, parser_version: int) -> bool:
    """``is_unchanged`` against a watermark's stat facts as ``sinks.sqlite.
    watermark_facts`` reads them: ``(path, dev, ino, size, mtime_ns, parser_version,
    waiting)`` (None: no watermark; ``waiting``: ``waiting`` of the watermark)."""
    return (
        facts is not None
        and facts[5] == parser_version
        and (facts[1], facts[2], facts[3], facts[4]) == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        and not (len(facts) > 6 and facts[6] and _idle(st))
    )


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
        # json's messages for a position already end in "at" ("Unterminated string
        # starting at", "Invalid control character at"): one "at" before the char.
        return None, f"malformed JSON: {e.msg.removesuffix(' at')} at char {e.pos}"
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
        starts = [i for i, c in enumerate(text) if c == "{" and text[:i].rstrip()[-1:] not in (":", ",", "[")]
        starts = starts[:_SALVAGE_MAX_STARTS]
        for st in starts:
            pieces = _chain(text, st)
            if pieces:
                for a, b in pieces:
                    lead = len(text[:a].encode("utf-8", "surrogateescape"))
                    blen = len(text[a:b].encode("utf-8", "surrogateescape"))
                    out.append((m.start() + lead, frag[lead : lead + blen]))
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


ParseFn = Callable[[dict, int, str, dict], list[dict]]


def read_jsonl(
    file: SourceFile,
    wm: Watermark | None,
    parser_version: int,
    parse: ParseFn,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    init_state: Callable[[SourceFile], dict] | None = None,
    unique_ids: bool = False,
) -> Iterator[Batch]:
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
    next run (the agent may be writing it) until the file has been idle
    ``CTXKEEP_IDLE_SECONDS`` (``readers.document.idle_seconds``, 120 s: what calls a
    session idle); then it is final (``_judge_unended``): its records ingested when it
    is whole JSON, else quarantined with a reason starting ``UNENDED``. The watermark
    stays at the line's start, with the parser state from before it, and says what
    was judged in ``state["_unended"]`` (``{"len", "sha256"}`` of the line's bytes):
    when the agent ends it as it was (``\\n`` appended) the next read parses it again
    for the state only (nothing stored twice, nothing counted twice); when the agent
    wrote on (the line grew: finished, or a new record glued to a torn one) the whole
    line is read as usual and the judged line's quarantine rows are taken back (a
    ``retract`` row, ``retract_row``). A file that vanished yields nothing.

    Memory stays bounded whatever the file holds: a line longer than the line cap
    (``contract.max_line_bytes``, ``[ingest] max_line_mb``) is quarantined as its
    SHA-256, size and first 4 KiB (``contract.OversizeLine``), read in ``batch_bytes``
    pieces and never held whole; an unterminated last line past the cap is streamed to
    the end of the file, not buffered, and waits for the next run like any other.

    With ``unique_ids`` (the agent gives each record an id that no other record
    shares: Claude Code's ``uuid``), two lines of a batch whose entries carry the same
    ``record_id`` are one record written twice (``_Copies``): a byte-identical repeat
    is stored once (by its ids, as before); otherwise the valid copy is kept and the
    other is quarantined (reason ``duplicate record id``), a damaged copy (a line that
    needed a lenient repair or was salvaged, or one the parser marks with
    ``state["_broken"]``) giving way to a valid one even when it came first.

    Each batch carries its coverage tally (``Batch.coverage``, ``sources.coverage``):
    records per agent version, parsed, quarantined, types not understood; ``reset``
    on the first batch of a read from byte 0.

    Yields batches of at most about ``batch_bytes`` raw bytes (plus one line under the
    cap).
    """
    path = file.path
    opened = open_file(path)
    if opened is None:
        return
    cap = max_line_bytes()
    f, st = opened
    with f:
        offset, state, why = start_offset(path, st, wm, parser_version)
        # the unended last line an earlier read judged final (it starts at ``offset``)
        held: dict | None = state.pop(UNENDED_KEY, None) if why == "append" else None
        if offset == 0 and init_state:
            state = init_state(file)
        retract: list[dict] = []  # the judged line's rows to take back (it grew)
        fd = f.fileno()
        f.seek(offset)
        buf = bytearray()  # the bytes after the last complete line (at most the cap)
        pos = offset  # file offset of buf[0], or of the over-cap line being streamed
        over: OversizeLine | None = None  # an unterminated line past the cap, streamed
        carried: list[dict] = []  # the quarantine row of an over-cap line that just ended
        carried_bytes = 0
        first = True
        while True:
            chunk = f.read(batch_bytes)
            eof = not chunk
            if over is not None:
                nl = chunk.find(b"\n")
                if nl < 0:
                    over.feed(chunk)
                    if eof:
                        break  # an unterminated over-cap last line: waits, never buffered
                    continue
                over.feed(memoryview(chunk)[:nl])
                carried.append(over.row(path))
                carried_bytes = over.size + 1
                pos = over.start + carried_bytes
                over = None
                chunk = chunk[nl + 1 :]
            buf += chunk
            end = buf.rfind(b"\n")
            complete = b""
            if end >= 0:
                complete = bytes(buf[: end + 1])
                del buf[: end + 1]
            if len(buf) > cap:  # the unterminated rest is past the cap: stream it from here
                if held is not None:  # the judged line grew past the cap
                    retract.append(retract_row(path, pos + len(complete), held))
                    held = None
                over = OversizeLine(pos + len(complete), cap)
                over.feed(buf)
                buf = bytearray()
            skip = 0  # bytes of ``complete`` parsed for the state only (a judged line)
            tally = Tally(reset=first and offset == 0)
            if held is not None and complete:
                skip = _ended_as_judged(complete, held)
                if skip:  # the agent ended the judged line as it was: stored already
                    # (counted again only where the tally replaces the file's ledger rows)
                    seen = tally if tally.reset else Tally()
                    _parse_lines(complete[:skip], pos, path, parse, state, cap, seen, unique_ids)
                    state.pop("_status_changes", None)
                else:  # it grew: read whole below; the judgment's quarantine goes
                    retract.append(retract_row(path, pos, held))
                held = None
            if complete or carried:
                first = False
                if carried:
                    tally.bad_line(state.get("_v"), len(carried))
                entries, quarantine, lines = _parse_lines(
                    complete[skip:], pos + skip, path, parse, state, cap, tally, unique_ids
                )
                quarantine = retract + quarantine
                retract = []
                # the complete lines read, for the vault (an over-cap line is not kept:
                # its bytes are a gap, after which the vault starts a new generation)
                raw = RawCapture.of(file, "append", pos, complete, st) if complete else None
                pos += len(complete)
                # a watermark records the file's size only once every byte was seen, so
                # a run stopped between batches resumes instead of skipping the file
                final = over is None and pos + len(buf) >= st.st_size
                changes = state.pop("_status_changes", [])  # see Batch.status_changes
                new_wm = _watermark(file, st, fd, pos, parser_version, state, final)
                yield Batch(
                    entries,
                    carried + quarantine,
                    new_wm,
                    bytes_read=len(complete) + carried_bytes,
                    lines=lines + len(carried),
                    status_changes=changes,
                    raw=raw,
                    coverage=tally,
                )
                carried, carried_bytes = [], 0
            if eof:
                break
        # (a blank tail too: judged, it adds nothing and is no longer waited for)
        idle_now = (bool(buf) or over is not None) and _idle(st)
        if idle_now:
            same = held is not None and (
                _same_line(bytes(buf), held)
                if over is None
                else (over.size, over.sha256) == (held.get("len"), held.get("sha256"))
            )
            if same and held is not None:  # judged before, unchanged since: its watermark stands
                if wm is not None and (wm.size, wm.mtime_ns) == (st.st_size, st.st_mtime_ns):
                    return
                judged = _held_batch(file, st, fd, pos, parser_version, state, held)
            else:
                if held is not None:  # judged before, grown since: judged again
                    retract.append(retract_row(path, pos, held))
                    held = None
                judged = _judge_unended(
                    file, st, fd, pos, parser_version, parse, state, cap, unique_ids, buf, over
                )
                judged.quarantine[:0] = retract
            judged.coverage.reset = first and offset == 0  # (a read from byte 0: rows replaced)
            if pos == offset:  # nothing complete read: the vault knows the file (see below)
                judged.raw = RawCapture.of(file, "append", pos, b"", st)
            yield judged
            return
        if held is not None:  # the judged line still stands (the file grew, not idle yet)
            state = dict(state, **{UNENDED_KEY: held})
        if retract:  # the judged line grew past the cap, unended: its judgment taken back
            yield Batch(
                [], retract, _watermark(file, st, fd, pos, parser_version, state, True), coverage=Tally()
            )
            return
        if over is not None and pos != offset:
            # the file ends inside an over-cap line after lines were read: the watermark
            # records the size, so an unchanged file is not streamed again next run
            yield Batch([], [], _watermark(file, st, fd, pos, parser_version, state, True), coverage=Tally())
        elif pos == offset and (
            wm is None or (wm.size, wm.mtime_ns) != (st.st_size, st.st_mtime_ns) or wm.offset != pos
        ):
            # nothing complete was read (empty file, or only a partial last line): record
            # the watermark anyway so that an unchanged file is skipped next time (and
            # an empty capture, so the vault knows the file: a 0-byte file restores)
            yield Batch(
                [],
                [],
                _watermark(file, st, fd, pos, parser_version, state, True),
                raw=RawCapture.of(file, "append", pos, b"", st),
                coverage=Tally(reset=pos == 0),
            )


#: the watermark state's key of an unended last line judged final (``read_jsonl``)
UNENDED_KEY = "_unended"
#: how the reason of a quarantined unended last line starts (``ctxkeep quarantine``,
#: the ingest summary's count: ``pipeline.writer``)
UNENDED = "unended last line, taken as final after the idle time"


def _line_id(raw: bytes) -> dict:
    return {"len": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _same_line(raw: bytes, held: dict) -> bool:
    """Whether ``raw`` (a line's bytes without its ``\\n``) is the judged line ``held``
    (``state["_unended"]``), also with blanks (spaces, tabs, a ``\\r``) the agent wrote
    after it: JSON ignores them (RFC 8259 section 2), so the line holds the same records
    and its entries, keyed by the judged line's hash, stand (left20: a judged record
    whose line grew by blanks only was counted, and could be stored, twice)."""
    n = held.get("len", -1)
    if 0 <= n < len(raw) and not raw[n:].strip(b" \t\r"):
        raw = raw[:n]
    return len(raw) == held.get("len") and hashlib.sha256(raw).hexdigest() == held.get("sha256")


def _ended_as_judged(complete: bytes, held: dict) -> int:
    """The length of ``complete``'s first line with its ``\\n`` when it is the judged
    line ``held`` ended as it was, else 0."""
    nl = complete.find(b"\n")
    return nl + 1 if nl >= 0 and _same_line(complete[:nl], held) else 0


def retract_row(path: Path, offset: int, held: dict) -> dict:
    """A ``Batch.quarantine`` item that takes back the rows of a judged unended line
    (``held``: its ``state["_unended"]``) at ``offset`` of ``path``: the store deletes
    its rows whose reason starts with ``UNENDED`` between ``offset`` and the line's
    end (``sinks.sqlite.load``); no row is added and nothing is counted."""
    return {"path": str(path), "offset": offset, "length": int(held.get("len", 0)), "retract": UNENDED}


def _held_batch(
    file: SourceFile, st: os.stat_result, fd: int, pos: int, parser_version: int, state: dict, held: dict
) -> Batch:
    """The batch of a file whose judged unended last line (at ``pos``; ``held``: its
    ``state["_unended"]``) is unchanged: its watermark only (the stat facts moved: a
    touch)."""
    wm_state = dict(state, **{UNENDED_KEY: held})
    return Batch([], [], _watermark(file, st, fd, pos, parser_version, wm_state, True), coverage=Tally())


def _judge_unended(
    file: SourceFile,
    st: os.stat_result,
    fd: int,
    pos: int,
    parser_version: int,
    parse: ParseFn,
    state: dict,
    cap: int,
    unique_ids: bool,
    buf: bytearray,
    over: OversizeLine | None,
) -> Batch:
    """The unended last line at ``pos`` (``buf``, or ``over`` when it is past the cap)
    of a file idle for ``CTXKEEP_IDLE_SECONDS``, taken as final: parsed as a line of
    its own (its records ingested when whole, else quarantined, the reason prefixed
    with ``UNENDED``) on a copy of ``state``; the batch's watermark stays at ``pos``
    with the state from before the line and the line's ``_line_id`` in
    ``state["_unended"]`` (an over-cap line: its SHA-256 and size from ``over``)."""
    path = file.path
    tally = Tally()
    if over is not None:
        row = over.row(path)
        row["reason"] = f"{UNENDED}: {row['reason']}"
        tally.bad_line(state.get("_v"))
        held = {"len": over.size, "sha256": row["raw_sha256"]}
        entries: list[dict] = []
        quarantine, lines = [row], 1
        changes: list = []
    else:
        raw = bytes(buf)
        held = _line_id(raw)
        scratch = copy.deepcopy(state)  # the line's effects on the state are not kept
        entries, quarantine, lines = _parse_lines(
            raw + b"\n", pos, path, parse, scratch, cap, tally, unique_ids
        )
        changes = scratch.pop("_status_changes", [])
        for q in quarantine:
            q["reason"] = f"{UNENDED}: {q['reason']}"
    wm_state = dict(state, **{UNENDED_KEY: held})
    return Batch(
        entries,
        quarantine,
        _watermark(file, st, fd, pos, parser_version, wm_state, True),
        bytes_read=held["len"],
        lines=lines,
        status_changes=changes,
        coverage=tally,
    )


def _parse_lines(
    complete: bytes,
    pos: int,
    path: Path,
    parse: ParseFn,
    state: dict,
    cap: int,
    tally: Tally,
    unique_ids: bool = False,
) -> tuple[list[dict], list[dict], int]:
    """Parse the complete lines of ``complete`` (which starts at file offset ``pos`` and
    ends with ``\\n``): ``(entries, quarantine rows, lines)`` (``read_jsonl``'s rules; a
    line over ``cap`` bytes is quarantined as its hash, size and head, unparsed). Each
    record is counted in ``tally`` (``sources.coverage``: the agent version the parser
    notes in ``state["_v"]``, the types it does not understand in ``state["_unknown"]``);
    with ``unique_ids``, copies of one record id are resolved (``_Copies``)."""
    entries: list[dict] = []
    quarantine: list[dict] = []
    copies = _Copies(entries, quarantine, tally, path) if unique_ids else None
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
        if len(raw) > cap:
            big = OversizeLine(line_off, cap)
            big.feed(complete[line_off - pos : nl])
            quarantine.append(big.row(path))
            tally.bad_line(state.get("_v"))
            continue
        rec, problem = parse_line(raw)
        if rec is None and problem is not None:  # (a JSON ``null`` parses to None too)
            pieces = salvage_line(raw)
            if not pieces:
                quarantine.append(quarantine_row(path, line_off, raw, problem))
                tally.bad_line(state.get("_v"))
                continue
            quarantine.append(
                quarantine_row(
                    path,
                    line_off,
                    raw,
                    f"{problem}; recovered {len(pieces)} record(s) at line offsets "
                    + ",".join(str(o) for o, _ in pieces),
                    "repaired",
                )
            )
            todo = []
            for rel, piece in pieces:
                prec, _problem = parse_line(piece)
                if prec is not None:
                    todo.append((line_off + rel, piece, prec))
        else:
            if problem:
                quarantine.append(quarantine_row(path, line_off, raw, problem, "repaired"))
            todo = [(line_off, raw, rec)]
        repaired = problem is not None
        for rec_off, rec_raw, rec in todo:
            if not isinstance(rec, dict):
                quarantine.append(
                    quarantine_row(path, rec_off, rec_raw, f"not a JSON object ({type(rec).__name__})")
                )
                tally.bad_line(state.get("_v"))
                continue
            lh = hashlib.sha256(rec_raw).hexdigest()
            try:
                got = parse(rec, rec_off, lh, state)
            except Exception as e:  # a parser bug must not stop the run
                state.pop("_unknown", None)
                state.pop("_broken", None)
                quarantine.append(
                    quarantine_row(path, rec_off, rec_raw, f"parser error: {type(e).__name__}: {e}")
                )
                tally.quarantined(state.get("_v"))
                continue
            broken = repaired or bool(state.pop("_broken", False))
            version = state.get("_v")
            tally.record(version, len(got), state.pop("_unknown", ()), rec_raw)
            if copies is not None:
                copies.add(got, rec_off, rec_raw, lh, broken, version)
            else:
                entries.extend(got)
    if copies is not None:
        entries = copies.kept()
    return entries, quarantine, lines


class _Copies:
    """The entries of one batch of a source whose record ids are unique
    (``read_jsonl``'s ``unique_ids``): each line's entries are kept until a later line
    of the batch gives entries with one of their ``record_id`` s; then the valid copy
    wins (the first of two valid ones) and the other line is quarantined, its
    entries dropped and its tally moved from parsed to quarantined."""

    def __init__(self, entries: list, quarantine: list, tally: Tally, path: Path) -> None:
        self.entries, self.quarantine, self.tally, self.path = entries, quarantine, tally, path
        #: record id → the line holding it: (offset, raw, line hash, broken, version)
        self.lines: dict[str, tuple] = {}
        self.dropped: set[int] = set()

    def add(self, got: list[dict], off: int, raw: bytes, lh: str, broken: bool, version) -> None:
        ids: set[str] = {str(e["record_id"]) for e in got if e.get("record_id") is not None}
        prev = next((self.lines[i] for i in ids if i in self.lines and self.lines[i][0] != off), None)
        if prev is not None:
            p_off, p_raw, p_lh, p_broken, p_version = prev
            rid = next(i for i in ids if i in self.lines)
            if p_lh == lh:  # the same bytes again: one record, stored once (by its ids)
                self.entries.extend(got)
                return
            if p_broken and not broken:  # the valid copy replaces a damaged one
                self._quarantine(
                    p_off,
                    p_raw,
                    p_version,
                    f"duplicate record id {rid}: a damaged copy; the valid copy at offset {off} is kept",
                )
            else:
                self._quarantine(
                    off,
                    raw,
                    version,
                    f"duplicate record id {rid}: another copy of the record at offset {p_off}, which is kept",
                )
                return
        for i in ids:
            self.lines[i] = (off, raw, lh, broken, version)
        for e in got:
            e.setdefault("_line", off)
        self.entries.extend(got)

    def _quarantine(self, off: int, raw: bytes, version, reason: str) -> None:
        self.dropped.add(off)
        self.quarantine.append(quarantine_row(self.path, off, raw, reason))
        t = self.tally.version(version)
        t.parsed -= 1
        t.quarantined += 1

    def kept(self) -> list[dict]:
        """The batch's entries without those of the quarantined copies."""
        out = [e for e in self.entries if e.get("_line") not in self.dropped]
        for e in out:
            e.pop("_line", None)
        return out


def _watermark(
    file: SourceFile, st: os.stat_result, fd: int, pos: int, parser_version: int, state: dict, final: bool
) -> Watermark:
    head_len = min(HEAD_BYTES, pos)
    hh = hashlib.sha256(os.pread(fd, head_len, 0)).hexdigest() if head_len else ""
    # a copy: the reader parses on while this batch waits for the writer, and a
    # watermark that shared its live state carried a later batch's ``_tail`` (after a
    # kill the file was then read again from byte 0: rss22). Shallow: a nested value a
    # parser grows in place (Claude Code's whole sidechain map) is still shared, a later
    # superset, as every key was before
    state = {k: v for k, v in state.items() if k != TAIL_KEY}
    if pos:  # the bytes before the offset, for ``start_offset``'s rewrite check
        n = min(TAIL_BYTES, pos)
        state[TAIL_KEY] = tail_hash(os.pread(fd, n, pos - n))
    return Watermark(
        path=str(file.path),
        agent=file.agent,
        dev=st.st_dev,
        ino=st.st_ino,
        size=st.st_size if final else pos,
        mtime_ns=st.st_mtime_ns,
        offset=pos,
        head_len=head_len,
        head_hash=hh,
        parser_version=parser_version,
        state=state,
    )


RecordFn = Callable[[dict, int, str, dict, str], list[dict]]


def record_reader(
    parser_version: int,
    parse_record: RecordFn,
    init_state: Callable[[SourceFile], dict] | None = None,
    unique_ids: bool = False,
):
    """The ``read`` of a plain JSONL agent (one record a line, mode ``append``):
    ``read(file, wm, batch_bytes)`` runs ``read_jsonl`` with ``parse_record(rec, offset,
    line_hash, state, src)`` where ``src`` is the file's path as text, the parser
    state at offset 0 from ``init_state(file)`` (None: empty) and ``unique_ids``
    (``read_jsonl``'s). Returns that function."""

    def read(
        file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]:
        src = str(file.path)

        def parse(rec, offset, line_hash, state):
            return parse_record(rec, offset, line_hash, state, src)

        return read_jsonl(file, wm, parser_version, parse, batch_bytes, init_state, unique_ids)

    read.__doc__ = (
        f"Read the new lines of one file into entry dicts "
        f"(``{getattr(parse_record, '__qualname__', 'parse_record')}``)."
    )
    return read

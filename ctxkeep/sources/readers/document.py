"""The reader of whole documents that their agent rewrites in place (mode ``rewrite``):
Gemini CLI and Qwen Code ``.json`` sessions, Continue sessions, the Cline family's task
files, Aider histories and SpecStory exports. A changed document is re-read whole; its
entries dedup by stable ids.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    DOCUMENT_CAP_FACTOR,
    Batch,
    OversizeLine,
    RawCapture,
    SourceFile,
    Watermark,
    idle_seconds,
    max_line_bytes,
    quarantine_row,
)
from ctxkeep.sources.coverage import Tally, from_entries
from ctxkeep.sources.readers.jsonl import HEAD_BYTES, open_file, parse_line


def track_ids(state: dict, agent: str, session_id: str, old_ids: Sequence[str], ids: list[str]) -> None:
    """Keep the message ids a document holds now in ``state["ids"]`` and ask for those
    of ``old_ids`` it no longer holds (a truncated or edited history) to be marked
    ``rewound`` (``state["_status_changes"]``, which ``read_document`` puts on the
    batch as ``Batch.status_changes``)."""
    gone = sorted(set(old_ids) - set(ids))
    if gone:
        state.setdefault("_status_changes", []).append(
            {"agent": agent, "session_id": session_id, "message_ids": gone, "status": "rewound"}
        )
    state["ids"] = ids


DOC_BATCH_ENTRIES = 5000
#: bytes read at a time from a document over the cap (hashed, not kept)
PIECE_BYTES = 16 * 1024 * 1024


def _oversize_document(
    file: SourceFile, st: os.stat_result, wm: Watermark | None, parser_version: int, big: OversizeLine
) -> Iterator[Batch]:
    """The batch of a document over the cap (``read_document``): its quarantine row
    (SHA-256, size, head), once per content (the hash is kept in the watermark state)."""
    old = wm.state if (wm is not None and wm.parser_version == parser_version) else {}
    kept = {k: v for k, v in old.items() if k not in ("sha256", "complete")}
    hl = min(HEAD_BYTES, len(big.head))
    new_wm = Watermark(
        path=str(file.path),
        agent=file.agent,
        dev=st.st_dev,
        ino=st.st_ino,
        size=big.size,
        mtime_ns=st.st_mtime_ns,
        offset=big.size,
        head_len=hl,
        head_hash=hashlib.sha256(big.head[:hl]).hexdigest(),
        parser_version=parser_version,
        state=dict(kept, sha256=big.sha256),
    )
    if old.get("sha256") == big.sha256:
        yield Batch([], [], new_wm)
        return
    yield Batch([], [big.row(file.path, "document")], new_wm, bytes_read=big.size, lines=1)


DocParseFn = Callable[[bytes, Any, dict, bool], list[dict]]


def read_document(
    file: SourceFile,
    wm: Watermark | None,
    parser_version: int,
    parse: DocParseFn,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    *,
    json_doc: bool = True,
    now: float | None = None,
) -> Iterator[Batch]:
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
    unreadable file yields nothing. A document over the line cap
    (``contract.max_line_bytes``) is never held whole: it is hashed in pieces and
    quarantined as its SHA-256, size and head. Yields batches of at most ``DOC_BATCH_ENTRIES``
    entries; only the last carries the watermark.

    Each batch carries its coverage tally (``coverage.from_entries``): the agent version
    the parser noted (``coverage.set_version``: ``state["_v"]``) or the one an entry
    names (``coverage.ENTRY_VERSION_KEY``, a document of several versions); an
    unchanged document (or one caught mid-write) adds nothing and keeps the file's
    ledger rows.
    """
    path = file.path
    opened = open_file(path)
    if opened is None:
        return
    limit = max_line_bytes() * DOCUMENT_CAP_FACTOR
    f, st = opened
    with f:
        data = f.read(limit + 1)
        if len(data) > limit:  # never held whole: hashed in pieces, quarantined
            big = OversizeLine(0, limit)
            big.feed(data)
            del data
            while chunk := f.read(PIECE_BYTES):
                big.feed(chunk)
            yield from _oversize_document(file, st, wm, parser_version, big)
            return
    digest = hashlib.sha256(data).hexdigest()
    idle = ((now if now is not None else time.time()) - st.st_mtime) >= idle_seconds()

    def _wm(state: dict, complete: bool) -> Watermark:
        hl = min(HEAD_BYTES, len(data))
        return Watermark(
            path=str(path),
            agent=file.agent,
            dev=st.st_dev,
            ino=st.st_ino,
            size=len(data) if complete else 0,
            mtime_ns=st.st_mtime_ns,
            offset=len(data),
            head_len=hl,
            head_hash=hashlib.sha256(data[:hl]).hexdigest(),
            parser_version=parser_version,
            state=state,
        )

    old = wm.state if (wm is not None and wm.parser_version == parser_version) else {}
    if old.get("sha256") == digest and old.get("complete", True):
        # the same bytes (touched, or copied back): nothing read, the ledger's rows stand
        yield Batch([], [], _wm(dict(old), True), coverage=Tally())
        return
    raw = RawCapture.of(file, "document", 0, data, st)  # this version, for the vault
    state: dict = {"sha256": digest}
    # on bad input the parser's carry-over (e.g. the message ids seen) is kept
    kept = {k: v for k, v in old.items() if k not in ("sha256", "complete")}
    quarantine: list[dict] = []
    doc: Any = None
    if json_doc:
        if not data.strip():
            yield Batch([], [], _wm(state, True), bytes_read=len(data), raw=raw)
            return
        doc, problem = parse_line(data)
        if doc is None:
            if not idle:
                # most likely caught mid-write: look again next run, report nothing yet
                yield Batch([], [], _wm(dict(kept, complete=False), False), coverage=Tally())
                return
            yield Batch(
                [],
                [quarantine_row(path, 0, data, problem or "malformed JSON")],
                _wm(dict(kept, sha256=digest), True),
                bytes_read=len(data),
                lines=1,
                raw=raw,
            )
            return
        if problem:
            quarantine.append(quarantine_row(path, 0, data, problem, "repaired"))
    else:
        doc = data.decode("utf-8", "replace")
    try:
        entries = parse(data, doc, state, idle)
    except Exception as e:  # a parser bug must not stop the run
        yield Batch(
            [],
            quarantine + [quarantine_row(path, 0, data, f"parser error: {type(e).__name__}: {e}")],
            _wm(dict(kept, sha256=digest), True),
            bytes_read=len(data),
            lines=1,
            raw=raw,
        )
        return
    changes = state.pop("_status_changes", [])
    # parts of the document the parser set aside (``(offset, raw bytes, reason)``: a
    # mutation log's line that is not JSON), quarantined with the document's batch
    quarantine += [quarantine_row(path, o, r, why) for o, r, why in state.pop("_set_aside", [])]
    complete = state.get("complete", True)
    version = state.get("_v")
    for i in range(0, max(len(entries), 1), DOC_BATCH_ENTRIES):
        last = i + DOC_BATCH_ENTRIES >= len(entries)
        part = entries[i : i + DOC_BATCH_ENTRIES]
        nq = sum(q.get("action") != "repaired" for q in quarantine) if last else 0
        yield Batch(
            part,
            quarantine if last else [],
            _wm(state, complete) if last else None,
            bytes_read=len(data) if last else 0,
            lines=1 if last else 0,
            status_changes=changes if last else [],
            raw=raw if last else None,
            # the agent version the parser read (``coverage.set_version``) or each entry names
            coverage=from_entries(part, nq, reset=i == 0, version=version),
        )

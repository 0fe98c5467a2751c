"""The reader of a data export that is one JSON array of conversations (the ChatGPT and
Claude.ai ``conversations.json``): streamed item by item (``ijson``, its C backend),
so an export of hundreds of MB is never held whole and is not cut by the line cap
(``contract.max_line_bytes``) that a document read whole would meet.

Change detection: the SHA-256 of the file's bytes in the watermark state
(``sha256``): an export replaced by the same bytes yields only a fresh watermark; a
new export is read whole and its entries dedup by their stable ids (the
conversations' own ids). The raw bytes are not captured for the vault (an export can
be far larger than a session; the user keeps the export file).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ctxkeep.sources.contract import Batch, SourceFile, Watermark, quarantine_row
from ctxkeep.sources.coverage import Tally
from ctxkeep.sources.readers.jsonl import HEAD_BYTES, open_file

#: items (conversations) per batch; the watermark comes with the last batch
ITEMS_PER_BATCH = 200
_PIECE = 4 * 1024 * 1024

#: ``parse_item(item, index, state)`` → the item's entry dicts; raises for an item it
#: cannot read (the item is quarantined, the read goes on)
ItemFn = Callable[[Any, int, dict], list[dict]]


def read_json_array(
    file: SourceFile,
    wm: Watermark | None,
    parser_version: int,
    parse_item: ItemFn,
    items_per_batch: int = ITEMS_PER_BATCH,
) -> Iterator[Batch]:
    """Read the array's items into entries (see the module doc).

    Bad input never stops a run: a file that is not a JSON array is quarantined at
    offset 0; an item the parser cannot read is quarantined at its index (its JSON,
    redacted, as the raw line); malformed JSON ends the read with one quarantined row
    naming the byte offset reached. A vanished file yields nothing. The watermark
    (with the SHA-256) comes with the last batch, so a run stopped midway reads the
    export again.
    """
    # imported here: every ingest's discovery imports the ChatGPT and Claude.ai sources
    # (import-only: they find nothing), and ijson's import (~0.02 s of CPU) was ~8 % of
    # an ingest with nothing new (docs/design.md, "Latency budget": ≤ 0.3 s)
    import ijson

    opened = open_file(file.path)
    if opened is None:
        return
    f, st = opened
    with f:
        h = hashlib.sha256()
        head = b""
        while chunk := f.read(_PIECE):
            if len(head) < HEAD_BYTES:
                head += chunk[: HEAD_BYTES - len(head)]
            h.update(chunk)
        size = f.tell()
        digest = h.hexdigest()
        old = wm.state if wm is not None and wm.parser_version == parser_version else {}

        def _wm(state: dict) -> Watermark:
            hl = min(HEAD_BYTES, size)
            return Watermark(
                path=str(file.path),
                agent=file.agent,
                dev=st.st_dev,
                ino=st.st_ino,
                size=size,
                mtime_ns=st.st_mtime_ns,
                offset=size,
                head_len=hl,
                head_hash=hashlib.sha256(head[:hl]).hexdigest(),
                parser_version=parser_version,
                state=state,
            )

        if old.get("sha256") == digest:  # the same export again: its ledger rows stand
            yield Batch([], [], _wm(dict(old)), coverage=Tally())
            return
        state: dict = {k: v for k, v in old.items() if k != "sha256"}
        state["sha256"] = digest
        if not head.lstrip().startswith(b"["):
            reason = "not a JSON array of conversations" if head.strip() else "empty export"
            q = [quarantine_row(file.path, 0, head[:4096], reason)] if head.strip() else []
            t = Tally(reset=True)
            if q:
                t.quarantined(None)
            yield Batch([], q, _wm(state), bytes_read=size, lines=1 if q else 0, coverage=t)
            return
        f.seek(0)
        entries: list[dict] = []
        quarantine: list[dict] = []
        changes: list[dict] = []
        tally = Tally(reset=True)
        n = done = 0
        try:
            for n, item in enumerate(ijson.items(f, "item", use_float=True)):
                try:
                    got = parse_item(item, n, state)
                    entries += got
                    unknown = state.pop("_unknown", [])
                    sample = orjson.dumps(item, default=str)[:4096] if unknown else b""
                    tally.record(state.get("_v"), len(got), unknown, sample)
                except Exception as e:  # one bad conversation never stops the export
                    raw = orjson.dumps(item, default=str)
                    quarantine.append(quarantine_row(file.path, n, raw, f"item {n}: {type(e).__name__}: {e}"))
                    state.pop("_unknown", None)
                    tally.quarantined(state.get("_v"))
                changes += state.pop("_status_changes", [])
                done = n + 1
                if done % items_per_batch == 0:
                    yield Batch(
                        entries,
                        quarantine,
                        None,
                        lines=items_per_batch,
                        status_changes=changes,
                        coverage=tally,
                    )
                    entries, quarantine, changes, tally = [], [], [], Tally()
        except (ijson.JSONError, ValueError, OSError) as e:
            pos = f.tell() if not f.closed else 0
            quarantine.append(
                quarantine_row(
                    file.path,
                    min(pos, size),
                    head[:4096] if done == 0 else b"",
                    f"malformed JSON after {done} item(s), near byte {min(pos, size):,}: {e}",
                )
            )
            tally.quarantined(state.get("_v"))
        yield Batch(
            entries,
            quarantine,
            _wm(state),
            bytes_read=size,
            lines=done % items_per_batch,
            status_changes=changes,
            coverage=tally,
        )

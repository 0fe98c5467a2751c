"""Reading session files into a stream of ``ReadItem`` s, and the read-ahead thread
that runs that stream ahead of the transform + load, handing items over in chunks."""

from __future__ import annotations

import functools
import os
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from ctxkeep.pipeline.stable_ids import rekey
from ctxkeep.sources import SOURCES
from ctxkeep.sources.contract import Batch, RawCapture, SourceFile, Watermark
from ctxkeep.sources.coverage import from_entries
from ctxkeep.sources.readers.jsonl import readable

if TYPE_CHECKING:
    import polars as pl


class ReadItem(NamedTuple):
    """One item of the read stream: a batch of ``file`` (``batch`` set), or the
    file's closing item (``batch`` None; ``read`` False: the file vanished before or
    while being read).

    From a reader process (``reader_process.read_in_process``) a batch comes with its
    entries normalized there: ``batch.entries`` is empty, ``rows`` holds
    ``normalized_rows`` of its ``n_entries`` entries, and ``ahead`` (on the first
    batch of a chunk) the contents that process met first in the chunk: a frame
    (content_hash, token_estimate, token_method) and their ``chunks_frame`` rows."""

    file: SourceFile
    batch: Batch | None = None
    read: bool | None = None
    rows: pl.DataFrame | None = None
    n_entries: int | None = None
    ahead: tuple[pl.DataFrame, pl.DataFrame] | None = None

    @property
    def entries(self) -> int:
        """The batch's number of entries (0 for a closing item)."""
        if self.batch is None:
            return 0
        return self.n_entries if self.n_entries is not None else len(self.batch.entries)


class LateRaw:
    """A batch's bytes for the vault that its reader process seals after it sent the
    batch (``reader_process`` ``--seal-late``: a first ingest's early reader, whose
    sealing, ~0.2 CPU s of its ~0.65 on the corpus, then runs while the ingest process
    transforms the batches): ``meta`` (the ``RawCapture``'s, for the engine's choice of
    what the vault keeps) and its ``index`` among the reader's sealed captures, which
    ``seals`` (a Future of that list, set by ``reader_process.read_in_process``) brings.
    ``result()``: the sealed ``RawCapture`` (``sinks.vault.capture.seal``'s), waiting for
    it; raises what the reader raised (or RuntimeError when it ended without them)."""

    __slots__ = ("index", "meta", "seals")

    def __init__(self, meta: dict, index: int) -> None:
        self.meta, self.index = meta, index
        self.seals: Future | None = None

    def __getstate__(self) -> tuple[dict, int]:
        return self.meta, self.index

    def __setstate__(self, state: tuple[dict, int]) -> None:
        self.meta, self.index = state
        self.seals = None

    def result(self) -> RawCapture:
        assert self.seals is not None  # bound by ``read_in_process`` before it is yielded
        return self.seals.result()[self.index]


def sealed_raws(raws: list) -> list[RawCapture]:
    """``raws`` with each ``LateRaw`` replaced by its sealed capture (waits for it)."""
    return [r.result() if isinstance(r, LateRaw) else r for r in raws]


#: path → the batches to yield for it instead of reading it (``maintenance.reparse``:
#: a JSON tree materialized from the vault, read where it was put, its paths set back)
PREREAD: dict[str, list[Batch]] = {}


#: ``read_files`` redacts the raw bytes of consecutive batches together
#: (``stable_ids.rekey``) up to this many bytes (or ``REKEY_ITEMS`` batches): the
#: redaction has a cost per call (Polars' gate regexes compiled, frames built; a gate
#: over texts of less than 512 KiB in total runs per text in Python), and a scaled tree
#: has hundreds of small files. Measured on 54 MB of the 200 MB tree's JSONL
#: (``redact_raw_many``, CPU s): 4 MiB calls 1.68, 16 MiB 1.20, 32 MiB 1.15. A reader
#: process (a big ingest: ``reader_process``) takes ``PROCESS_REKEY`` at a time; read
#: here, the first items wait for fewer bytes (a small ingest starts its load sooner)
REKEY_BYTES = 4 * 1024 * 1024
REKEY_ITEMS = 64
PROCESS_REKEY = (16 * 1024 * 1024, 256)
#: ``read_files(tail=)`` of a reader process: (window, flush) bytes. Once the files
#: after the one being read hold fewer new bytes than the window, a flush ends at the
#: flush size (~16 redaction calls more per reader, on Hyperscan: compiled by the
#: first 16 MiB flush). A reader's last two flushes (16 MiB each, one held by the
#: overlap while the next is read) reached the ingest process only when the reader was
#: done, ~2 groups per reader at once, which the writer then stored alone after the
#: readers ended (the run's tail, issue 26). ``CTXKEEP_READER_TAIL_MB`` (0: off, every
#: flush 16 MiB), ``CTXKEEP_READER_TAIL_FLUSH_MB``
PROCESS_TAIL = (
    int(float(os.environ.get("CTXKEEP_READER_TAIL_MB", "32")) * 1024 * 1024),
    int(float(os.environ.get("CTXKEEP_READER_TAIL_FLUSH_MB", "2")) * 1024 * 1024),
)
#: ``read_files(overlap=True)`` redacts a flush in a thread while the next is read
#: (``CTXKEEP_REKEY_OVERLAP=0``: in line, as before; a benchmark's baseline)
REKEY_OVERLAP = os.environ.get("CTXKEEP_REKEY_OVERLAP", "1") != "0"


def _rekey_sealed(batches: list[Batch], seal: Callable[[RawCapture], RawCapture] | None) -> None:
    """``rekey(batches)``, then (``seal``) each batch's raw bytes sealed for the vault."""
    rekey(batches)
    if seal is not None:
        for b in batches:
            if b.raw is not None:
                b.raw = seal(b.raw)


@functools.cache
def _rekey_pool() -> ThreadPoolExecutor:
    """The one thread ``read_files(overlap=True)`` redacts in (flushes in order)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxkeep-rekey")


def _new_bytes(f: SourceFile, wm: Watermark | None) -> int:
    """The bytes of ``f`` past ``wm``'s offset (its size for a rewrite or no
    watermark; 0 when it is gone): ``plan.pending_bytes``' rule for one file."""
    try:
        full = f.path.stat().st_size
    except OSError:
        return 0
    return full - (wm.offset if wm is not None and f.mode != "rewrite" and full >= wm.offset else 0)


def read_files(
    todo: list[tuple[SourceFile, Watermark | None]],
    rekey_every: tuple[int, int] = (REKEY_BYTES, REKEY_ITEMS),
    overlap: bool = False,
    seal: Callable[[RawCapture], RawCapture] | None = None,
    tail: tuple[int, int] = (0, 0),
) -> Generator[ReadItem, None, None]:
    """Read ``todo`` in order: ``ReadItem(file, batch)`` per batch, then
    ``ReadItem(file, None, read)`` per file. A batch whose source left
    ``Batch.coverage`` unset gets the tally of its entries (``coverage.from_entries``;
    a read from the start, which replaces the file's ledger rows: the first batch of a
    rewritten document or JSON tree, of a file never read, or of a changed parser).

    Items are held back until ``rekey_every[0]`` bytes of batches (or ``rekey_every[1]`` batches;
    default ``REKEY_BYTES``, ``REKEY_ITEMS``) are read,
    so their lines that held a secret are rekeyed in one redaction
    (``stable_ids.rekey``); an error a source raises comes after the items read
    before it.

    ``overlap`` (a reader process: ``reader_process``): each flush's redaction runs in
    a thread of its own (``REKEY_OVERLAP``) while the next flush is read and parsed,
    its items yielded once it is done, in the same order: the redaction is mostly
    Polars' automata, which release the GIL, so it runs beside the parsing (Python)
    on a core the reader process otherwise leaves idle; one flush more is held.
    ``seal`` (``sinks.vault.capture.seal``, a reader process's ``--seal``): each batch's
    ``raw`` replaced by ``seal(raw)`` after the flush's redaction, in the same thread
    (its SHA-256 and zstd release the GIL too). ``tail`` (``PROCESS_TAIL``: window,
    flush bytes; a window of 0: off): once the files after the one being read hold
    fewer new bytes than the window (size minus the watermark's offset), a flush ends
    at ``flush`` bytes, so the last items are not held back in one big flush (the
    items and their order are the same whatever the flush size); ``todo`` of no more
    new bytes than the window is read as without it."""
    window, small = tail
    left = sum(_new_bytes(f, wm) for f, wm in todo) if window > 0 else 0
    if left <= window:  # a small read (a first ingest's early reader): flushes as before
        window = 0
    pending: list[tuple[ReadItem, bool]] = []  # (item, whether a coverage tally resets the ledger)
    size = 0
    pool = _rekey_pool() if overlap and REKEY_OVERLAP else None
    flight: tuple[Future, list[tuple[ReadItem, bool]]] | None = None  # (its rekey, its items)

    def tallied(items: list[tuple[ReadItem, bool]]) -> Iterator[ReadItem]:
        for it, reset in items:
            b = it.batch
            if b is not None and b.coverage is None:  # a source that reports nothing: tallied
                b.coverage = from_entries(
                    b.entries, sum(q.get("action") != "repaired" for q in b.quarantine), reset=reset
                )
            yield it

    def land(done: tuple[Future, list[tuple[ReadItem, bool]]] | None) -> Iterator[ReadItem]:
        """The items of flush ``done``, once its redaction is done."""
        if done is not None:
            fut, items = done
            fut.result()  # its error raised here, after the items before it
            yield from tallied(items)

    def flush(last: bool = False) -> Iterator[ReadItem]:
        nonlocal size, flight
        items = list(pending)
        pending.clear()
        size = 0
        batches = [it.batch for it, _ in items if it.batch is not None]
        if pool is None:
            _rekey_sealed(batches, seal)
            yield from tallied(items)
            return
        before, flight = flight, (pool.submit(_rekey_sealed, batches, seal), items)
        yield from land(before)  # (a close here still waits for the new one: ``finally``)
        if last:
            before, flight = flight, None
            yield from land(before)

    try:
        for f, wm in todo:
            if window > 0:
                left -= _new_bytes(f, wm)
                if left < window:
                    rekey_every = (min(rekey_every[0], small), rekey_every[1])
            pre = PREREAD.pop(str(f.path), None)
            if pre is None and not readable(f.path):
                pending.append((ReadItem(f, None, False), False))
                continue
            got = False
            src = SOURCES[f.agent]
            for batch in pre if pre is not None else src.read(f, wm):
                reset = not got and (
                    f.mode in ("rewrite", "tree") or wm is None or wm.parser_version != src.PARSER_VERSION
                )
                got = True
                pending.append((ReadItem(f, batch), reset))
                size += len(batch.raw.data) if batch.raw is not None else 0
                if size >= rekey_every[0] or len(pending) >= rekey_every[1]:
                    yield from flush()
            pending.append((ReadItem(f, None, got or pre is not None or readable(f.path)), False))
    except Exception:
        yield from flush(last=True)
        raise
    finally:
        if flight is not None:  # the consumer stopped early: the redaction in flight ends first
            flight[0].exception()  # waited for, not raised: the stop is the news
    yield from flush(last=True)


#: source batches the reader thread may hold ahead of the transform + load (0: read
#: in the calling thread)
READ_AHEAD = int(os.environ.get("CTXKEEP_READ_AHEAD", "4"))

#: the reader thread hands items over in chunks of this many raw bytes (or
#: ``READ_CHUNK_ITEMS`` items): one queue hand-off, and one wait for the GIL, per
#: chunk instead of per item (per item, the consumer waited ~5 s for the GIL on a
#: 200 MB tree: ~900 items, each up to a 5 ms switch interval)
READ_CHUNK_BYTES = 4 * 1024 * 1024
READ_CHUNK_ITEMS = 64


#: the stop of the process a read-ahead thread takes its items from, by the thread's
#: ident (``reader_process.read_in_process`` registers it: ``stop_with_thread``):
#: ``ReadAhead.close`` calls it, so a thread blocked on the pipe until the reader's next
#: chunk ends at once (a 1 GB session's reader took seconds to make it, after Ctrl-C:
#: newuser20 F8)
_STOPS: dict[int, Callable[[], None]] = {}


def stop_with_thread(stop: Callable[[], None] | None) -> None:
    """Register ``stop`` (None: forget it) as what ``ReadAhead.close`` calls to stop
    the source of the calling read-ahead thread early."""
    ident = threading.get_ident()
    if stop is None:
        _STOPS.pop(ident, None)
    else:
        _STOPS[ident] = stop


class _End(NamedTuple):
    """The reader thread's last hand-off: the error it raised, if any."""

    error: BaseException | None


def read_ahead(
    todo: list[tuple[SourceFile, Watermark | None]],
    depth: int = READ_AHEAD,
    source: Callable[..., Generator[ReadItem, None, None]] | None = None,
) -> ReadAhead:
    """``read_files(todo)`` (or ``source(todo)``: ``reader_process.read_in_process``)
    run in a reader thread, at most ``depth`` chunks ahead (``READ_CHUNK_BYTES``).

    Reading and parsing (Python) then overlap the consumer's SQLite writes, BPE
    counting and Polars work, which release the GIL. Items arrive in the same order
    as ``read_files`` yields them; an exception in the reader is raised here, after
    the items read before it; when the consumer stops early (an error in a load), the
    reader stops at its next chunk. The thread starts here, not at the first item
    (``reader_process.read_split`` starts several at once); ``close()`` stops it,
    taken or not.
    """
    return ReadAhead(todo, depth, source)


class ReadAhead(Iterator[ReadItem]):
    """The iterator ``read_ahead`` returns: its reader thread runs from construction
    until the stream ends or ``close()``."""

    def __init__(
        self,
        todo: list[tuple[SourceFile, Watermark | None]],
        depth: int,
        source: Callable[..., Generator[ReadItem, None, None]] | None,
    ) -> None:
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._chunk: Iterator[ReadItem] = iter(())
        self._done = False
        self._t = threading.Thread(
            target=self._run, args=(todo, source), name="ctxkeep-read-ahead", daemon=True
        )
        self._t.start()

    def _put(self, chunk) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(chunk, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, todo, source) -> None:
        items = (source or read_files)(todo)
        chunk: list = []
        size = 0
        try:
            for item in items:
                chunk.append(item)
                size += item.batch.bytes_read if item.batch is not None else 0
                if size >= READ_CHUNK_BYTES or len(chunk) >= READ_CHUNK_ITEMS:
                    if not self._put(chunk):
                        return
                    chunk, size = [], 0
        except BaseException as e:  # handed to the consumer, raised there
            if not chunk or self._put(chunk):
                self._put(_End(e))
            return
        finally:
            items.close()  # a reader process is stopped here
        if not chunk or self._put(chunk):
            self._put(_End(None))

    def __next__(self) -> ReadItem:
        while True:
            item = next(self._chunk, None)
            if item is not None:
                return item
            if self._done:
                raise StopIteration
            chunk = self._q.get()
            if isinstance(chunk, _End):
                self.close()
                if chunk.error is not None:
                    raise chunk.error
                raise StopIteration
            self._chunk = iter(chunk)

    def close(self) -> None:
        """Stop the reader thread (at its next chunk; its reader process at once:
        ``stop_with_thread``) and wait for it."""
        self._done = True
        self._chunk = iter(())
        self._stop.set()
        stop = _STOPS.get(self._t.ident) if self._t.ident is not None and self._t.is_alive() else None
        if stop is not None:
            stop()
        self._t.join()

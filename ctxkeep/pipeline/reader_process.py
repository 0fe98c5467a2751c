"""Reading and parsing session files in a separate process (``engine.extract_transform``
on a big ingest).

Parsing JSONL, normalizing entries, chunking new texts and counting their tokens are
Python work (the BPE aside) that holds the GIL; in the ingest process they compete
with the dedup and the writer thread for the one GIL. A reader process does them on
the other core: it parses, normalizes the entries of each chunk of consecutive
batches at once (``transforms.normalize.normalized_rows``), counts the tokens of the
texts it has not met before and cuts them into FTS chunks, and sends all of it as
Arrow IPC (the rest of the batches pickled), which the ingest process reads almost
for free. It counts and chunks every new text of the run; the ingest process uses
those of the contents the store does not hold yet. It does so only while the ingest
process is the slower side (``precompute_now``: sending blocked); else the ingest process counts and
cuts what it is not sent. Measured on the 200 MB scaled
tree (2 shared cores): the ingest process's CPU fell from ~22 s to ~11 s (the reader
process ~12-15 s on the other core), wall from ~20 s to ~15-17 s; store identical.

The process is ``python -m ctxkeep.pipeline.reader_process FD`` (not
``multiprocessing``, whose spawn re-imports the caller's ``__main__``): it gets the
todo list pickled on stdin and writes ``(kind, value)`` pickles to the pipe ``FD``
(inherited, its own: nothing else writes there), one per chunk of items. Its stdout
is the ingest's stderr: whatever a library or a profiler prints there (``py-spy
--subprocesses`` once broke the stream with ``UnpicklingError: invalid load key
'['`` when the protocol was on stdout) cannot corrupt the protocol or the ingest's
``--json``. It
imports ``sources``, ``transforms`` and ``pipeline.readahead`` (no DuckDB, no Prefect,
no SQLite store; with ``--seal``, the vault's ``capture``, which writes nothing) and
only reads session files, so stopping it early leaves nothing behind. With ``--seal``
it also does the vault's work on the bytes it read (redaction, SHA-256, zstd:
``capture.seal``) and sends their compressed objects instead of the raw bytes. ~350-385 MB
peak RSS each of two on that tree (docs/design.md, "Memory of a big ingest").

A big ingest shares its files between two such processes (``read_split``: blocks of
consecutive files in turn, the items taken back in todo order), so both cores work
for the whole run: one reader was the critical path of the 200 MB ingest (issue 26).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from typing import BinaryIO

if __name__ == "__main__":  # the process itself: Ctrl-C and SIGTERM are the ingest's to
    # report (``_main``), also while a reader started with the command (``prestart``) imports
    from ctxkeep.pipeline.prestart import HELD, defer_metadata

    for _sig in HELD:
        signal.signal(_sig, signal.SIG_IGN)

    defer_metadata()  # Polars' import loads it for nothing here

import polars as pl

from ctxkeep.pipeline import prestart, readahead
from ctxkeep.pipeline.prestart import start_child
from ctxkeep.pipeline.readahead import PROCESS_REKEY, PROCESS_TAIL, LateRaw, ReadItem, read_files
from ctxkeep.sources.contract import RawCapture, SourceFile, Watermark
from ctxkeep.sources.readers.sidecar import SHARED

#: the messages on the pipe: a chunk of items; the end; an exception; (``--seal-late``)
#: the number of sealed captures to come, once every item is sent; those captures
_ITEM, _DONE, _FAIL, _LATE, _SEALED = 0, 1, 2, 3, 4


#: the reader process normalizes the entries of consecutive batches together up to
#: this many raw bytes (or ``CHUNK_ITEMS`` items): Polars' cost per call is fixed
#: (~10 ms), and a scaled tree has hundreds of small files
CHUNK_BYTES = 4 * 1024 * 1024
CHUNK_ITEMS = 64


def read_in_process(
    todo: list[tuple[SourceFile, Watermark | None]],
    seal: bool = False,
    precompute: str | None = None,
    seal_rows: bool = False,
    started: tuple[subprocess.Popen, BinaryIO] | None = None,
    seal_late: bool = False,
) -> Generator[ReadItem, None, None]:
    """``read_files(todo)`` run in a reader process: the same items in the same order,
    except that a batch's entries come normalized: ``ReadItem(file, batch, None, rows,
    n_entries, ahead)`` where ``batch.entries`` is empty and ``rows`` is
    ``normalized_rows`` of its ``n_entries`` entries (``schema.ENTRY_SCHEMA``, not
    deduplicated: ``unique_entries`` of the concatenated rows of a group equals its
    ``entries_frame``); ``ahead`` is None or, on the first batch of a chunk, the
    contents the process met first in that chunk: a frame (content_hash,
    token_estimate, token_method) and their ``chunks_frame`` rows, computed there
    (``transform.Precomputed`` keeps them). The closing item of a file is
    ``ReadItem(file, None, read)``. ``seal``: each batch's bytes for the vault come
    sealed (``sinks.vault.capture.seal``: redacted and compressed there, on the other
    core; the raw bytes do not cross the pipe). ``precompute``: "auto", "always",
    "never", "split" (``chunk_mode``) or "chunks" (chunk rows and index terms without
    token counts: the frame of contents holds content_hash alone) for that process
    (``PRECOMPUTE``; None: its environment's). ``seal_rows`` (with ``seal``): a database's whole rows document is
    sealed there too (``capture.seal(rows=True)``; else the ingest process seals it).
    ``started``: the reader started early and sent ``todo`` with these flags already
    (``prestart.take_ahead``): its results are read, nothing is sent. ``seal_late``
    (with ``seal``; a first ingest's early reader): the batches come before their bytes
    are sealed, each ``batch.raw`` a ``readahead.LateRaw`` whose sealed capture a thread
    of this process (``_take_sealed``) receives after the last item, while the caller
    transforms: this generator ends once the last item is yielded, and the capture
    (``Writer.start_capture``) waits for the sealed captures. The reader's sealing of
    the corpus's first ingest (~0.2 CPU s) then no longer comes before the transform of
    its share (~0.13 CPU s) on the critical path (issue 26).

    An exception raised by the reader is raised here (as RuntimeError with its text
    when it cannot be pickled); a reader process that ends without its closing
    message raises RuntimeError naming its exit code, unless it ended before sending
    anything (it could not start: e.g. no importable ctxkeep for ``sys.executable``):
    then ``read_files(todo)`` runs here instead, items in the plain shape. Closing the generator early
    kills the process. The pipe holds the process back when nobody reads (consume it
    in ``readahead.read_ahead``'s thread to let it work ahead).
    """

    from ctxkeep.sinks import vault

    # the vault off here (``CTXKEEP_VAULT=0``, or ``vault.suspended``: a reparse reads the
    # vault's own redacted bytes) is off there too: no redaction of the raw lines
    # (``stable_ids.rekey``), which cost a reparse ~20 % of the reader's CPU
    flags = prestart.reader_flags(seal, vault.enabled(), precompute, seal_rows, seal_late)
    # the sealed captures of the ``LateRaw`` s (``--seal-late``), set by ``_take_sealed``
    seals: Future | None = Future() if seal and seal_late and vault.enabled() else None
    handed = False  # the pipe and the process handed to ``_take_sealed``'s thread
    # started with the command (a first ingest): its flags sent with the todo
    early = started or prestart.take()
    if early is None:
        prestart.trace("ingest", "spawn")
    proc, results = early or start_child("ctxkeep.pipeline.reader_process", *flags)
    ended = received = False
    stopped = [False]

    def stop() -> None:  # ``ReadAhead.close`` from another thread: the pipe's reader sees EOF
        stopped[0] = True
        proc.kill()

    readahead.stop_with_thread(stop)
    try:
        assert proc.stdin is not None  # start_child opens it as a pipe
        try:
            if started is None:
                sent = (flags, todo) if early else todo
                pickle.dump(sent, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                proc.stdin.close()
                prestart.trace("ingest", "todo")
        except BrokenPipeError:
            pass  # reported below as an ended process
        while True:
            try:
                prestart.trace("ingest", "wait")
                kind, val = pickle.load(results)
                prestart.trace("ingest", "got")
            except EOFError:
                if stopped[0]:  # killed by the consumer's close: nothing more is wanted
                    return
                if not received:  # it could not start (its error is on stderr): read here
                    ended = True
                    yield from read_files(todo)
                    return
                raise RuntimeError(
                    f"the reader process ended without a result (exit code {proc.wait()})"
                ) from None
            received = True
            if kind == _ITEM:  # a chunk: items, Arrow IPC of their entries' rows, contents
                items, ipc, pre = val
                rows = pl.read_ipc(io.BytesIO(ipc)) if ipc is not None else None
                if pre is not None:
                    pre = tuple(pl.read_ipc(io.BytesIO(b)) for b in pre)
                at = 0
                for item in items:
                    if item.batch is not None:
                        assert rows is not None  # a chunk with batches carries their rows
                        if isinstance(item.batch.raw, LateRaw):
                            item.batch.raw.seals = seals
                        n = item.n_entries
                        yield item._replace(rows=rows.slice(at, n), ahead=pre)
                        pre = None  # with the chunk's first batch: before any group needs it
                        at += n
                    else:
                        yield item
                continue
            if kind == _LATE and seals is not None:  # every item sent: the sealed captures follow
                handed = True
                prestart.reap_at_exit(proc)
                threading.Thread(
                    target=_take_sealed, args=(proc, results, seals), name="ctxkeep-sealed", daemon=True
                ).start()
                return
            ended = True  # its last message: the process exits by itself
            if kind == _FAIL:
                raise val
            return
    finally:
        readahead.stop_with_thread(None)
        if not handed:  # else ``_take_sealed``'s thread waits for it and closes the pipe
            try:
                proc.wait(timeout=10 if ended else 0)
            except subprocess.TimeoutExpired:
                proc.kill()  # stopped early: it only reads, nothing to clean up
                proc.wait()
            results.close()


def _take_sealed(proc: subprocess.Popen, results: BinaryIO, seals: Future) -> None:
    """Read the sealed captures a reader sends after its last item (``--seal-late``)
    into ``seals`` (its exception instead: the reader's, or RuntimeError when it ended
    without them), then its closing message; wait for it to exit, close the pipe."""
    try:
        kind, val = pickle.load(results)
        prestart.trace("ingest", "got")
        if kind == _SEALED:
            seals.set_result(val)
            kind, val = pickle.load(results)
            prestart.trace("ingest", "got")
        elif kind == _FAIL:
            seals.set_exception(val)
    except BaseException as e:  # EOF (it died), an unpickling error
        if not seals.done():
            seals.set_exception(
                RuntimeError(f"the reader process ended without its sealed captures ({type(e).__name__})")
            )
    finally:
        if not seals.done():
            seals.set_exception(RuntimeError("the reader process sent no sealed captures"))
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        results.close()


#: reader processes ``read_split`` shares a big ingest's files between: one core each
#: beside the ingest process's (``CTXKEEP_READERS``; default 2 on a machine of 2 cores
#: or more, 1 below). On 2 cores the ingest process and one reader left one core idle a
#: third of the time (200 MB tree: 16.5 CPU s in 11.9 s, issue 26)
READERS = int(os.environ.get("CTXKEEP_READERS", "2" if (os.cpu_count() or 1) >= 2 else "1"))
#: ``read_split`` hands consecutive files of about this many new bytes to one reader
#: (a block; blocks alternate between the readers): the ingest takes a block's items
#: from its reader while the other works on the next block
SPLIT_BLOCK_BYTES = int(float(os.environ.get("CTXKEEP_SPLIT_BLOCK_MB", "8")) * 1024 * 1024)


def split_blocks(
    todo: list[tuple[SourceFile, Watermark | None]], readers: int, block_bytes: int
) -> list[tuple[int, int]]:
    """``todo`` cut into blocks of consecutive files of at least ``block_bytes`` new
    bytes (size minus the watermark's offset, as ``plan.pending_bytes``, which this
    process does not import: it pulls in the SQLite store; the last block may hold
    fewer), as (reader, number of files) in ``todo`` order, the readers taking blocks
    in turn (0, 1, .., 0, 1, ..). A file is never cut: a file bigger than a block is a
    block."""
    blocks: list[tuple[int, int]] = []
    n = size = 0
    for f, wm in todo:
        n += 1
        try:
            full = f.path.stat().st_size
        except OSError:
            full = 0  # vanished: read (and counted) by whichever reader gets it
        off = wm.offset if wm is not None and f.mode != "rewrite" and full >= wm.offset else 0
        size += full - off
        if size >= block_bytes:
            blocks.append((len(blocks) % readers, n))
            n = size = 0
    if n:
        blocks.append((len(blocks) % readers, n))
    return blocks


def read_split(
    todo: list[tuple[SourceFile, Watermark | None]],
    seal: bool = False,
    readers: int | None = None,
    block_bytes: int | None = None,
    seal_rows: bool = False,
) -> readahead.ReadAhead | MergedReads:
    """``read_in_process(todo, seal)``'s items, in its order, read by ``readers``
    reader processes at once: ``todo`` is cut into blocks (``split_blocks``), each
    reader reads its blocks (``read_in_process`` of their files, in a read-ahead thread
    here: ``readahead.read_ahead``), and the items are taken block after block from the
    reader that read it. A block ends with the closing item of its last file. Each
    item is what one reader of all of ``todo`` gives for it (a file is read alone, its
    batches normalized, redacted and sealed alone), except that each reader counts the
    tokens of the contents it meets first (``_precompute``): a content both meet comes
    twice, and ``transform.Precomputed`` keeps the first (the same figures). So the
    ingest's groups, entry ids, dedup and watermarks are what one reader gives.

    An error a reader raises is raised when its block is reached, after the items
    before it (a reader that errs stops; the other's later blocks are not taken).
    Closing the iterator early stops every reader. With one block or ``readers`` < 2:
    one reader process (``read_in_process`` in a read-ahead thread). ``readers`` and
    ``block_bytes`` default to ``READERS`` and ``SPLIT_BLOCK_BYTES``. ``seal_rows``:
    ``read_in_process``'s (a database's whole rows document sealed by its reader)."""
    readers = max(1, READERS if readers is None else readers)
    blocks = split_blocks(todo, readers, SPLIT_BLOCK_BYTES if block_bytes is None else block_bytes)
    if readers < 2 or len(blocks) < 2:
        return readahead.read_ahead(
            todo, source=functools.partial(read_in_process, seal=seal, seal_rows=seal_rows)
        )
    readers = min(readers, len(blocks))  # each reader has a block (they take them in turn)
    pre = None if "CTXKEEP_READER_PRECOMPUTE" in os.environ else "split"  # see PRECOMPUTE
    # looked up now: tests spy on it
    one = functools.partial(read_in_process, seal=seal, precompute=pre, seal_rows=seal_rows)
    shares: list[list[tuple[SourceFile, Watermark | None]]] = [[] for _ in range(readers)]
    at = 0
    for k, n in blocks:
        shares[k].extend(todo[at : at + n])
        at += n
    # the chunks read ahead shared too: the ingest process holds no more of them than
    # with one reader (its peak RSS is the 10 GB ingest's bound: 939 MiB of 1 GiB)
    depth = max(2, readahead.READ_AHEAD // readers)
    streams = [readahead.read_ahead(share, depth=depth, source=one) for share in shares]
    return MergedReads(blocks, streams)


def read_shared(
    todo: list[tuple[SourceFile, Watermark | None]], seal: bool = False, share: float | None = None
) -> MergedReads:
    """``read_in_process(todo, seal)``'s items, in its order, with its first files (about
    ``share`` of the new bytes, ``prestart.EARLY_OWN_SHARE``: ``prestart.own_files``)
    read here (``readahead.read_ahead``: a thread, items in the plain shape) and the rest
    by the reader process started with the command (``prestart.take``, through
    ``read_in_process``; it seals the databases' whole rows documents too), both at
    once: the ingest process transforms and stores its own files while the reader reads
    the later ones, so neither waits for the other's first item (a reader of all of them
    left the ingest process idle until its first group came, then the reader idle). The
    groups, entry ids, dedup and watermarks are what one reader gives (as
    ``read_split``'s).

    A reader the service sent its files already (``prestart.send_ahead``) is taken when
    it was sent this todo's later files with these flags (``prestart.take_ahead``; the
    split is then the one it was sent); else it is stopped and every file is read here."""
    from ctxkeep.sinks import vault

    sent = prestart.ahead()
    started = None
    if sent is not None:
        n = len(todo) - len(sent)
        flags = prestart.reader_flags(
            seal, vault.enabled(), prestart.EARLY_PRECOMPUTE, seal_rows=True, seal_late=True
        )
        started = prestart.take_ahead(todo[n:], flags) if n >= 0 else prestart.take_ahead([], flags)
        if started is None:  # the engine's plan is not the service's: read here, as without it
            return MergedReads([(0, len(todo))], [readahead.read_ahead(todo)])
    else:
        n = prestart.own_files(prestart.new_bytes(todo), share)
    # a first ingest's store holds no vault version to build a rows document on: the
    # reader seals the databases' rows documents too (``capture.seal(rows=True)``)
    # it cuts its contents' FTS chunks and index terms too (``--precompute chunks``)
    early = functools.partial(
        read_in_process,
        seal=seal,
        precompute=prestart.EARLY_PRECOMPUTE,
        seal_rows=True,
        started=started,
        seal_late=True,
    )
    if n == 0 or n == len(todo):
        stream = readahead.read_ahead(todo, source=None if n else early)
        return MergedReads([(0, len(todo))], [stream])
    streams = [readahead.read_ahead(todo[:n]), readahead.read_ahead(todo[n:], source=early)]
    return MergedReads([(0, n), (1, len(todo) - n)], streams, frozenset([n]))


class MergedReads(Iterator[ReadItem]):
    """The items of ``streams`` block after block (``read_split``); ``close()`` stops
    every stream, taken from or not."""

    def __init__(
        self,
        blocks: list[tuple[int, int]],
        streams: list[readahead.ReadAhead],
        cuts: frozenset[int] = frozenset(),
    ) -> None:
        #: files read (closing items) after which the ingest's group ends (``read_shared``:
        #: the ingest process's own share, so it transforms it while the reader reads on)
        self.cuts = cuts
        self._streams = streams
        self._items = self._merged(blocks)

    def _merged(self, blocks: list[tuple[int, int]]) -> Generator[ReadItem, None, None]:
        try:
            for i, (k, n) in enumerate(blocks):
                stream = self._streams[k]
                if i:  # the caller takes the next block's items from here on (the bench's critical path)
                    prestart.trace("ingest", "need")
                while n:
                    item = next(stream, None)
                    if item is None:
                        raise RuntimeError("a reader process ended before its last file")
                    yield item
                    if item.batch is None:  # a file's closing item
                        n -= 1
        finally:
            self.close()

    def __next__(self) -> ReadItem:
        return next(self._items)

    def close(self) -> None:
        """Stop every reader (their threads and processes)."""
        for stream in self._streams:
            stream.close()


def _ipc(frame) -> bytes:
    return frame.write_ipc(None).getvalue()


#: contents ``_precompute`` remembers as sent (``known``) before it forgets them all:
#: a content sent again after that is counted twice (the ingest process takes the
#: first), never missed. Unbounded, the set held every content hash of the run (a
#: 10 GB tree: ~5 M strings, ~0.7 GB in this process)
KNOWN_MAX = 500_000
#: hex digits of a content hash (SHA-256 hex) that ``_precompute`` remembers it by: an
#: int of 60 bits (~80 bytes in a set, where the 64-character str took ~160: ~40 MB at
#: ``KNOWN_MAX``). Two contents sharing them (chance ~1e-8 at 5 M contents) cost CPU
#: only: the second is not sent, so the ingest process counts that group's contents
#: itself (``transform.Precomputed.take`` takes all of a group's or none)
KNOWN_DIGITS = 15


def content_keys(hashes: pl.Series) -> list[int]:
    """The ``KNOWN_DIGITS``-digit ints ``_precompute`` remembers contents by, of
    ``hashes`` (SHA-256 hex strings)."""
    return hashes.str.slice(0, KNOWN_DIGITS).str.to_integer(base=16).to_list()


def _precompute(rows, known: set[int], counted: bool = True) -> tuple[bytes, bytes] | None:
    """Token estimates and chunk rows of the contents of ``rows`` (normalized entries)
    this process has not seen before (``known``: their ``content_keys``, updated;
    emptied first when it holds ``KNOWN_MAX``), as Arrow IPC:
    (content_hash, token_estimate, token_method) and ``chunks_frame`` rows with their
    index terms (``index_terms=True``: symbols and vocabulary, ~0.9 CPU s of the ingest
    process's main thread on the 200 MB tree, issue 26); None when there is none.
    Exactly what the ingest process would compute for them (``estimate_tokens``,
    ``chunks_frame`` and the index terms are per text). ``counted`` False: no token
    counts (the first frame holds content_hash alone; ``transform.Precomputed.cut``),
    so no BPE tables are loaded here (``--precompute chunks``)."""

    from ctxkeep.transforms.chunk import chunks_frame

    new = (
        rows.filter(pl.col("content_hash").is_not_null())
        .unique(subset="content_hash", keep="first", maintain_order=True)
        .select("content_hash", "text")
    )
    keys = content_keys(new["content_hash"])
    fresh = [k not in known for k in keys]
    new = new.filter(pl.Series(fresh, dtype=pl.Boolean))
    if not new.height:
        return None
    if len(known) >= KNOWN_MAX:
        known.clear()
    known.update(k for k, f in zip(keys, fresh, strict=True) if f)
    # with the chunks' symbol terms and vocabulary (``index_terms``): per chunk text, so
    # the ingest process takes them for any subset (``sinks.sqlite.with_index_terms``)
    chunks = _ipc(chunks_frame(new, index_terms=True))
    if not counted:
        return _ipc(new.select("content_hash")), chunks
    from ctxkeep.transforms.tokens import estimate_tokens

    counts, methods = estimate_tokens(new["text"].to_list())
    contents = pl.DataFrame(
        {
            "content_hash": new["content_hash"],
            "token_estimate": pl.Series(counts, dtype=pl.Int64),
            "token_method": pl.Series(methods, dtype=pl.String),
        }
    )
    return _ipc(contents), chunks


#: ``_main`` counts tokens and cuts chunks of the new contents (``_precompute``):
#: "auto" only while the ingest process is the slower side (``precompute_now``),
#: "always", or "never" (the ingest process does it all); ``CTXKEEP_READER_PRECOMPUTE``.
#: "chunks" (a first ingest's early reader, ``prestart.EARLY_PRECOMPUTE``): chunks and
#: their index terms always, tokens never (the ingest process counts them: its BPE
#: tables are built for its own files, a second build here cost ~0.2 CPU s, session 23).
#: Unset, readers sharing the files (``read_split``) are started with "split"
#: (``--precompute split``: "always", but "auto" for a big file, ``chunk_mode``): two
#: readers are not the slower side, and what the ingest process counts runs on its
#: GIL-bound critical path; each process that counts loads the BPE tables too (``import
#: bpe_openai``: ~0.3-0.7 CPU s), so with "auto" three processes loaded them, with
#: "always" the two readers
PRECOMPUTE = os.environ.get("CTXKEEP_READER_PRECOMPUTE", "auto")


#: ``chunk_mode``: in a reader sharing the files ("split"), a file of at least this
#: many bytes is read with "auto": while one reader reads a big session file (a 2 GB
#: one, issue 26 target 2) the other waits, so that reader is the slower side
SPLIT_BIG_FILE = 64 * 1024 * 1024


def chunk_mode(items: list[ReadItem], mode: str) -> str:
    """``precompute_now``'s mode for a chunk of ``items``: ``mode``, except "split" (a
    reader of ``read_split``): "always", or "auto" when an item's file is at least
    ``SPLIT_BIG_FILE`` bytes."""
    if mode != "split":
        return mode
    for item in items:
        try:
            if item.file.path.stat().st_size >= SPLIT_BIG_FILE:
                return "auto"
        except OSError:
            continue
    return "always"


#: ``precompute_now``: the ingest process is the slower side when sending the chunk
#: before blocked this process for at least this share of the time it took to make
BEHIND_SHARE = 0.25


def precompute_now(waited: float, worked: float, mode: str = "auto") -> bool:
    """Whether this chunk's contents get their tokens and chunks here (``_precompute``).

    "auto": only when the ingest process is the slower side: sending the chunk before
    (``pickle.dump`` to the pipe, flushed) blocked this process ``waited`` seconds, at
    least ``BEHIND_SHARE`` of the ``worked`` seconds it took to make it (the pipe holds
    64 KiB: a write waits for the ingest to read). When the ingest takes each chunk as
    it comes, the work is left to it (``transform.Precomputed.fill`` computes what is
    not sent: the same figures and chunk order). The work (~2.4 of ~12-13 CPU s of a
    200 MB tree with the vault on, issue 26) was done here always: with the vault's
    redaction here too, this process was the slower one by ~4.5 CPU s (reader 12.3-12.9 s,
    ingest 7.9 s) while the ingest process's core idled (a quiet 200 MB ingest used 1.29
    of the 2 cores). "always" / "never": regardless (``CTXKEEP_READER_PRECOMPUTE``)."""
    if mode != "auto":
        return mode == "always"
    return worked > 0 and waited >= BEHIND_SHARE * worked


#: the reader process's niceness increment (``os.nice``; ``CTXKEEP_READER_NICE``, 0: none):
#: the ingest process, which consumes what the readers make, then gets a core whenever
#: it has work, so it is not left behind with groups to store after the readers end
#: (the run's tail, where one core idles)
NICE = int(os.environ.get("CTXKEEP_READER_NICE", "0"))


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None elsewhere), which ``_main`` calls after each chunk
    it sends (``CTXKEEP_READER_TRIM=0``: never). At a reader's peak on the 200 MB tree
    (2026-12-05, ``mallinfo2``) glibc held 85-127 MB free in its arenas (the main one
    and the redaction thread's) beside 157-180 MB in use; trimmed after each chunk, each
    reader's peak fell from 432-482 to 350-385 MB, the sum over the ingest's processes
    from ~1.30 to ~1.07-1.10 GB (PSS 1.04-1.08 -> 0.86-0.88 GB), the readers' CPU the
    same within noise (13.4 vs 13.2 s, one A/B pair at load 17-30: docs/design.md)."""
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def _main() -> None:
    """The reader process: todo from stdin, ``(kind, value)`` pickles to the pipe
    whose descriptor is ``sys.argv[1]``.

    Ctrl-C reaches the whole process group, ``timeout``'s SIGTERM too: the reader
    ignores both and is stopped by the ingest (which closes the pipe, then kills it),
    so only the ingest reports."""
    for sig in prestart.HELD:
        signal.signal(sig, signal.SIG_IGN)
    if NICE > 0:
        try:
            os.nice(NICE)
        except OSError:
            pass  # not permitted: the default priority
    out = os.fdopen(int(sys.argv[1]), "wb")  # the protocol's own pipe, not stdout
    args = sys.argv[2:]
    if "--later" in args:  # started with the command (``prestart``): imports first, then wait
        import ctxkeep.sinks.vault.capture
        import ctxkeep.transforms.normalize  # noqa: F401 - imported while the ingest process starts

        prestart.trace("reader", "ready")
        try:
            flags, todo = pickle.load(sys.stdin.buffer)
        except EOFError:
            return  # not needed: the command ended without reading
        args = [*args, *flags]
    else:
        prestart.trace("reader", "ready")
        todo = pickle.load(sys.stdin.buffer)
    prestart.trace("reader", "todo")
    if "--no-vault" in args:  # the ingest's vault is off or suspended
        os.environ["CTXKEEP_VAULT"] = "0"
    from ctxkeep.transforms.normalize import normalized_rows  # Polars: only in the process
    from ctxkeep.transforms.tokens import release_counter_pages

    mode = args[args.index("--precompute") + 1] if "--precompute" in args else PRECOMPUTE
    seal: Callable[[RawCapture], RawCapture] | None = None
    if "--seal" in args:
        from ctxkeep.sinks.vault.capture import seal as sealer

        seal = functools.partial(sealer, rows=True) if "--seal-rows" in args else sealer
    # ``--seal-late``: the batches sent with ``LateRaw`` s, their captures sealed after the
    # last item is sent (the ingest transforms meanwhile) and sent in one message
    late = seal is not None and "--seal-late" in args
    held: list[RawCapture] = []  # the captures to seal then, in order

    items: list = []
    entries: list = []
    size = 0
    released = False
    trim = _malloc_trim() if os.environ.get("CTXKEEP_READER_TRIM", "1") != "0" else None

    known: set[int] = set()
    # seconds the last send blocked, and the seconds its chunk took to make
    pace = {"waited": 0.0, "worked": 0.0, "since": time.perf_counter()}

    def send() -> None:
        nonlocal items, entries, size, released
        if items:
            ipc = pre = None
            if any(i.batch is not None for i in items):
                rows = normalized_rows(entries)
                ipc = _ipc(rows)
                if mode == "chunks":  # a first ingest's early reader: no BPE tables here
                    pre = _precompute(rows, known, counted=False)
                elif precompute_now(pace["waited"], pace["worked"], chunk_mode(items, mode)):
                    pre = _precompute(rows, known)
                    if not released:  # the counter is built: its build's ~33 MB of read-only
                        # pages given back (as the hook path does; shared pages: RSS, not PSS)
                        released = True
                        release_counter_pages()
            t0 = time.perf_counter()
            pickle.dump((_ITEM, (items, ipc, pre)), out, protocol=pickle.HIGHEST_PROTOCOL)
            # the message's last bytes out of the buffer: the ingest unpickles the chunk
            # now, not once the next one is written
            out.flush()
            prestart.trace("reader", "sent")
            t1 = time.perf_counter()
            pace.update(waited=t1 - t0, worked=t0 - pace["since"], since=t1)
        items, entries, size = [], [], 0
        if trim is not None:
            trim(0)

    try:
        for item in read_files(
            todo, rekey_every=PROCESS_REKEY, overlap=True, seal=None if late else seal, tail=PROCESS_TAIL
        ):
            batch = item.batch  # its raw sealed by read_files (in its redaction thread)
            if batch is None:
                items.append(item)
            else:
                kept = dataclasses.replace(batch, entries=[])
                # (a shared sidecar's bytes go with their batch: the ingest process takes
                # out what they hold of tombstoned sessions, ``sidecar.captured_without``)
                if late and batch.raw is not None and not batch.raw.meta.get(SHARED):
                    held.append(batch.raw)
                    # a stand-in the ingest resolves (``readahead.sealed_raws``) before the vault sees it
                    kept.raw = LateRaw(batch.raw.meta, len(held) - 1)  # type: ignore[assignment]
                items.append(ReadItem(item.file, kept, n_entries=len(batch.entries)))
                entries.extend(batch.entries)
                size += batch.bytes_read
            if size >= CHUNK_BYTES or len(items) >= CHUNK_ITEMS:
                send()
        send()
        if late:
            assert seal is not None  # ``late`` only with it
            pickle.dump((_LATE, len(held)), out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
            prestart.trace("reader", "sent")
            sealed = [seal(raw) for raw in held]
            held.clear()
            pickle.dump((_SEALED, sealed), out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
            prestart.trace("reader", "sent")
    except BrokenPipeError:
        return  # the ingest stopped reading
    except BaseException as e:  # handed to the ingest, raised there, after the items before it
        try:
            send()
        except Exception:
            pass
        try:
            msg = pickle.dumps((_FAIL, e), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            msg = pickle.dumps((_FAIL, RuntimeError(f"{type(e).__name__}: {e}")))
        out.write(msg)
        out.flush()
        return
    pickle.dump((_DONE, None), out)
    out.flush()


if __name__ == "__main__":
    _main()

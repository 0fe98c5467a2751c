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
``capture.seal``) and sends their compressed objects instead of the raw bytes. ~230 MB RSS on that tree.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import BinaryIO

import polars as pl

from ctxkeep.pipeline.readahead import PROCESS_REKEY, ReadItem, read_files
from ctxkeep.sources.contract import RawCapture, SourceFile, Watermark

_ITEM, _DONE, _FAIL = 0, 1, 2


#: the reader process normalizes the entries of consecutive batches together up to
#: this many raw bytes (or ``CHUNK_ITEMS`` items): Polars' cost per call is fixed
#: (~10 ms), and a scaled tree has hundreds of small files
CHUNK_BYTES = 4 * 1024 * 1024
CHUNK_ITEMS = 64


def start_child(module: str, *args: str) -> tuple[subprocess.Popen, BinaryIO]:
    """``python -P -m module FD ARGS`` (this interpreter, ctxkeep importable from this
    checkout): stdin a pipe, stdout this process's stderr (DEVNULL when it has no
    descriptor, e.g. under pytest's capture), and a pipe of its own whose write end
    is the inherited descriptor FD. Returns the process and the read end (EOF when
    the process ends). Raises OSError when it cannot start."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        stdout = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        stdout = subprocess.DEVNULL
    rfd, wfd = os.pipe()
    try:
        proc = subprocess.Popen(
            # -P: the working directory is not put first on sys.path (Python 3.11+): run
            # from a folder holding another ``ctxkeep`` package (a checkout of another
            # version), the child imported that one, and a mismatched request protocol
            # hung the ingest for good
            [sys.executable, "-P", "-m", module, str(wfd), *args],
            stdin=subprocess.PIPE,
            stdout=stdout,
            env=env,
            pass_fds=(wfd,),
        )
    except BaseException:
        os.close(rfd)
        raise
    finally:
        os.close(wfd)  # the process holds its copy
    return proc, os.fdopen(rfd, "rb")


def read_in_process(
    todo: list[tuple[SourceFile, Watermark | None]], seal: bool = False
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
    core; the raw bytes do not cross the pipe).

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
    flags = (["--seal"] if seal else []) + ([] if vault.enabled() else ["--no-vault"])
    proc, results = start_child("ctxkeep.pipeline.reader_process", *flags)
    ended = received = False
    try:
        assert proc.stdin is not None  # start_child opens it as a pipe
        try:
            pickle.dump(todo, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # reported below as an ended process
        while True:
            try:
                kind, val = pickle.load(results)
            except EOFError:
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
                        n = item.n_entries
                        yield item._replace(rows=rows.slice(at, n), ahead=pre)
                        pre = None  # with the chunk's first batch: before any group needs it
                        at += n
                    else:
                        yield item
                continue
            ended = True  # its last message: the process exits by itself
            if kind == _FAIL:
                raise val
            return
    finally:
        try:
            proc.wait(timeout=10 if ended else 0)
        except subprocess.TimeoutExpired:
            proc.kill()  # stopped early: it only reads, nothing to clean up
            proc.wait()
        results.close()


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


def _precompute(rows, known: set[int]) -> tuple[bytes, bytes] | None:
    """Token estimates and chunk rows of the contents of ``rows`` (normalized entries)
    this process has not seen before (``known``: their ``content_keys``, updated;
    emptied first when it holds ``KNOWN_MAX``), as Arrow IPC:
    (content_hash, token_estimate, token_method) and ``chunks_frame`` rows; None when
    there is none. Exactly what the ingest process would compute for them
    (``estimate_tokens`` and ``chunks_frame`` are per text)."""

    from ctxkeep.transforms.chunk import chunks_frame
    from ctxkeep.transforms.tokens import estimate_tokens

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
    counts, methods = estimate_tokens(new["text"].to_list())
    contents = pl.DataFrame(
        {
            "content_hash": new["content_hash"],
            "token_estimate": pl.Series(counts, dtype=pl.Int64),
            "token_method": pl.Series(methods, dtype=pl.String),
        }
    )
    return _ipc(contents), _ipc(chunks_frame(new))


#: ``_main`` counts tokens and cuts chunks of the new contents (``_precompute``):
#: "auto" only while the ingest process is the slower side (``precompute_now``),
#: "always", or "never" (the ingest process does it all); ``CTXKEEP_READER_PRECOMPUTE``
PRECOMPUTE = os.environ.get("CTXKEEP_READER_PRECOMPUTE", "auto")


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


def _main() -> None:
    """The reader process: todo from stdin, ``(kind, value)`` pickles to the pipe
    whose descriptor is ``sys.argv[1]``.

    Ctrl-C reaches the whole process group: the reader ignores it and is stopped by
    the ingest (which closes the pipe, then kills it), so only the ingest reports."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(int(sys.argv[1]), "wb")  # the protocol's own pipe, not stdout
    todo = pickle.load(sys.stdin.buffer)
    if "--no-vault" in sys.argv[2:]:  # the ingest's vault is off or suspended
        os.environ["CTXKEEP_VAULT"] = "0"
    from ctxkeep.transforms.normalize import normalized_rows  # Polars: only in the process

    seal: Callable[[RawCapture], RawCapture] | None = None
    if "--seal" in sys.argv[2:]:
        from ctxkeep.sinks.vault.capture import seal

    items: list = []
    entries: list = []
    size = 0

    known: set[int] = set()
    # seconds the last send blocked, and the seconds its chunk took to make
    pace = {"waited": 0.0, "worked": 0.0, "since": time.perf_counter()}

    def send() -> None:
        nonlocal items, entries, size
        if items:
            ipc = pre = None
            if any(i.batch is not None for i in items):
                rows = normalized_rows(entries)
                ipc = _ipc(rows)
                if precompute_now(pace["waited"], pace["worked"], PRECOMPUTE):
                    pre = _precompute(rows, known)
            t0 = time.perf_counter()
            pickle.dump((_ITEM, (items, ipc, pre)), out, protocol=pickle.HIGHEST_PROTOCOL)
            # the message's last bytes out of the buffer: the ingest unpickles the chunk
            # now, not once the next one is written
            out.flush()
            t1 = time.perf_counter()
            pace.update(waited=t1 - t0, worked=t0 - pace["since"], since=t1)
        items, entries, size = [], [], 0

    try:
        for item in read_files(todo, rekey_every=PROCESS_REKEY, overlap=True, seal=seal):
            batch = item.batch  # its raw sealed by read_files (in its redaction thread)
            if batch is None:
                items.append(item)
            else:
                items.append(
                    ReadItem(item.file, dataclasses.replace(batch, entries=[]), n_entries=len(batch.entries))
                )
                entries.extend(batch.entries)
                size += batch.bytes_read
            if size >= CHUNK_BYTES or len(items) >= CHUNK_ITEMS:
                send()
        send()
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

"""Reading and parsing session files in a separate process (``pipeline.ingest_files``
on a big ingest).

Parsing JSONL and normalizing entries are Python work that holds the GIL; in the
ingest process they compete with the transform and the writer thread for the one
GIL. A reader process does both on the other core: it parses, normalizes the entries
of each chunk of consecutive batches at once (``transforms.normalize.normalized_rows``)
and sends them as Arrow IPC, the rest of the batches pickled; the ingest process
reads that almost for free (measured on the 200 MB scaled tree: parse 2.55 s in
process; unpickling the entry dicts instead of Arrow cost the ingest process 0.68 s).

The process is ``python -m ctxkeep.flows.read_worker`` (not ``multiprocessing``,
whose spawn re-imports the caller's ``__main__``): it gets the todo list pickled on
stdin and writes ``(kind, value)`` pickles on stdout, one per item. It imports only
``sources`` (no Polars, no Prefect) and only reads session files, so stopping it
early leaves nothing behind.
"""
from __future__ import annotations

import dataclasses
import io
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from ..sources import SOURCES
from ..sources.base import SourceFile, Watermark

_ITEM, _DONE, _FAIL = 0, 1, 2


def read_files(todo: list[tuple[SourceFile, Watermark | None]]) -> Iterator[tuple]:
    """Read ``todo`` in order: ``(file, batch, None)`` per batch, then ``(file, None,
    read)`` per file (``read`` False: the file vanished before or while being read)."""
    for f, wm in todo:
        if not f.path.exists():
            yield f, None, False
            continue
        got = False
        for batch in SOURCES[f.agent].read(f, wm):
            got = True
            yield f, batch, None
        yield f, None, got or f.path.exists()


#: the reader process normalizes the entries of consecutive batches together up to
#: this many raw bytes (or ``CHUNK_ITEMS`` items): Polars' cost per call is fixed
#: (~10 ms), and a scaled tree has hundreds of small files
CHUNK_BYTES = 4 * 1024 * 1024
CHUNK_ITEMS = 64


def read_in_process(todo: list[tuple[SourceFile, Watermark | None]]) -> Iterator[tuple]:
    """``read_files(todo)`` run in a reader process: the same items in the same order,
    except that a batch's entries come normalized: ``(file, batch, None, rows, n)``
    where ``batch.entries`` is empty and ``rows`` is ``normalized_rows`` of its ``n``
    entries (``schema.ENTRY_SCHEMA``, not deduplicated: ``unique_entries`` of the
    concatenated rows of a group equals its ``entries_frame``). The closing item of
    a file is ``(file, None, read)``.

    An exception raised by the reader is raised here (as RuntimeError with its text
    when it cannot be pickled); a reader process that ends without its closing
    message raises RuntimeError naming its exit code. Closing the generator early
    kills the process. The pipe holds the process back when nobody reads (consume it
    in ``pipeline._read_ahead``'s thread to let it work ahead).
    """
    import polars as pl

    root = str(Path(__file__).resolve().parents[2])  # ctxkeep importable from a checkout
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, "-m", "ctxkeep.flows.read_worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    ended = False
    try:
        try:
            pickle.dump(todo, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # reported below as an ended process
        while True:
            try:
                kind, val = pickle.load(proc.stdout)
            except EOFError:
                raise RuntimeError("the reader process ended without a result "
                                   f"(exit code {proc.wait()})") from None
            if kind == _ITEM:  # a chunk: (items, Arrow IPC of their entries' rows)
                items, ipc = val
                rows = pl.read_ipc(io.BytesIO(ipc)) if ipc is not None else None
                at = 0
                for item in items:
                    if item[1] is not None:
                        n = item[3]
                        yield (*item[:3], rows.slice(at, n), n)
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
        proc.stdout.close()


def _main() -> None:
    """The reader process: todo from stdin, ``(kind, value)`` pickles to stdout."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the stream
    todo = pickle.load(sys.stdin.buffer)
    from ..transforms.normalize import normalized_rows  # Polars: only in the process

    items: list = []
    entries: list = []
    size = 0

    def send() -> None:
        nonlocal items, entries, size
        if items:
            ipc = normalized_rows(entries).write_ipc(None).getvalue() if entries or any(
                i[1] is not None for i in items) else None
            pickle.dump((_ITEM, (items, ipc)), out, protocol=pickle.HIGHEST_PROTOCOL)
        items, entries, size = [], [], 0

    try:
        for f, batch, got in read_files(todo):
            if batch is None:
                items.append((f, None, got))
            else:
                items.append((f, dataclasses.replace(batch, entries=[]), None, len(batch.entries)))
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

"""Reading and parsing session files in a separate process (``pipeline.ingest_files``
on a big ingest).

Parsing JSONL is Python work that holds the GIL; in the ingest process it competes
with the transform and the writer thread for the one GIL. A reader process parses on
the other core and sends the items back pickled, which costs the ingest process about
a quarter of the parse (measured on the 200 MB scaled tree: parse 2.55 s in the
process, unpickle 0.68 s).

The process is ``python -m ctxkeep.flows.read_worker`` (not ``multiprocessing``,
whose spawn re-imports the caller's ``__main__``): it gets the todo list pickled on
stdin and writes ``(kind, value)`` pickles on stdout, one per item. It imports only
``sources`` (no Polars, no Prefect) and only reads session files, so stopping it
early leaves nothing behind.
"""
from __future__ import annotations

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


def read_in_process(todo: list[tuple[SourceFile, Watermark | None]]) -> Iterator[tuple]:
    """``read_files(todo)`` run in a reader process: the same items in the same order.

    An exception raised by the reader is raised here (as RuntimeError with its text
    when it cannot be pickled); a reader process that ends without its closing
    message raises RuntimeError naming its exit code. Closing the generator early
    kills the process. The pipe holds the process back when nobody reads (consume it
    in ``pipeline._read_ahead``'s thread to let it work ahead).
    """
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
            if kind == _ITEM:
                yield val
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
    try:
        for item in read_files(todo):
            pickle.dump((_ITEM, item), out, protocol=pickle.HIGHEST_PROTOCOL)
    except BrokenPipeError:
        return  # the ingest stopped reading
    except BaseException as e:  # handed to the ingest, raised there
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

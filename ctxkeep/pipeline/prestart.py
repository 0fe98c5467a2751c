"""A reader process started with the command, before its imports: the first ingest of a
store (issue 26 target 3: the corpus's first ingest <= 1.0 s wall).

A first ingest of a few MB is one process whose ~1.3 CPU s (the CLI's and the engine's
imports, parsing, the raw lines' and texts' redaction, the vault's sealing, the
transform, the load) the GIL serializes, while the machine's second core idles. A reader
process (``reader_process``) does the parse, the redaction and the vault's sealing on
that core, but started by the engine it came after the ingest process's imports and
plan, and its own start (Polars, the sources, the rules: ~0.25 CPU s) was then on the
critical path: it cost more than it took off (docs/design.md, "Latency budget").
Started here, by ``ctxkeep.__main__`` before anything else is imported, its imports
run on the other core while the ingest process imports the CLI and plans; it then waits
for the todo and its flags on stdin (``reader_process`` ``--later``), which the service
sends once it planned (``send_ahead``: the reader reads while the engine, Polars,
loads and plans again; the engine takes it, ``take_ahead``, when its plan holds the
same files), else ``reader_process.read_in_process`` when the engine reads (``take``).

Only a plain ``ctxkeep ingest`` (``--home``, ``--agent``, ``--json``, ``--progress``/
``--no-progress``; no ``--path``: the hook path stays one process, its RSS has a
ceiling) into a home without ``store.db`` (a first ingest: a store that exists has a
no-op path of ~0.1 s that a reader's start would only slow) starts one. A reader not
taken (nothing to read, a Prefect flow run, an error) is stopped at exit: it reads
nothing before its todo comes, so stopping it leaves nothing behind; if this process
dies, its stdin ends and it exits. Imports before the reader starts: ``os``, ``sys``,
``subprocess``, ``pathlib`` and the file names' registry (``sinks.files``); ``config``
(which the CLI loads anyway, after) only when no home is given (``_home``).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import BinaryIO, NoReturn

#: ``trace`` writes its lines (``CTXKEEP_TRACE=1``: ``tests/bench/bench_first_ingest.py``)
TRACE = os.environ.get("CTXKEEP_TRACE") == "1"


def trace(role: str, event: str) -> None:
    """With ``TRACE``: ``CTXKEEP-TRACE ROLE EVENT CPU WALL`` on stderr (this process's
    CPU seconds, ``time.process_time``; the monotonic clock, ``time.perf_counter``,
    which processes share), from which the bench draws the ingest's timeline and its
    critical path (the reader's stdout is the ingest's stderr)."""
    if TRACE:
        sys.stderr.write(
            f"CTXKEEP-TRACE {role} {event} {time.process_time():.4f} {time.perf_counter():.4f}\n"
        )
        sys.stderr.flush()


#: the reader started early and not yet taken: (process, the read end of its pipe)
_early: list[tuple[subprocess.Popen, BinaryIO]] = []
#: what ``send_ahead`` sent that reader: (its flags, its todo)
_ahead: list[tuple[list[str], list]] = []
#: whether the engine took that reader (``take``, ``take_ahead``): an in-process first
#: ingest, which ``exit_now`` ends without the interpreter's teardown
_taken: list[bool] = []
#: whether this process ran a few new lines' ingest in-process (``ran_small``: the hook
#: path, ``ingest --path FILE``), which ``exit_now`` ends without the teardown too
_small: list[bool] = []

#: what a first ingest's early reader computes ahead for its share (its ``--precompute``):
#: "chunks", the FTS chunks and their index terms but no token counts
#: (``reader_process.PRECOMPUTE``), so the ingest process, the longer side by ~0.28 CPU s
#: since session 23, no longer cuts them after the reader's batches come (issue 26);
#: ``CTXKEEP_READER_PRECOMPUTE``, when set, is its mode instead
EARLY_PRECOMPUTE = None if "CTXKEEP_READER_PRECOMPUTE" in os.environ else "chunks"

#: ``read_shared``'s share of a first ingest's new bytes read in the ingest process (its
#: first files); the rest is read by the reader started early (``CTXKEEP_EARLY_SHARE``)
EARLY_OWN_SHARE = float(os.environ.get("CTXKEEP_EARLY_SHARE", "0.4"))
#: ``send_ahead``: a first ingest of at most this many new bytes sends its reader the
#: todo once the service planned (the engine reads a plan of fewer than its
#: ``PROCESS_READ_BYTES``, 64 MiB, with that reader: ``reader_process.read_shared``)
AHEAD_MAX_BYTES = 32 * 1024 * 1024

#: the options of ``ctxkeep ingest`` with which a first ingest starts its reader early
#: (each flag, and the options that take a value)
_FLAGS = {"--json", "--progress", "--no-progress"}
_VALUED = {"--home", "--agent", "-a"}


#: Polars' pools of a first ingest with its early reader (``start_early``; unless
#: ``POLARS_MAX_THREADS`` is set): the reader works on one core while the ingest
#: process uses the others, so the reader's pool is one thread and the ingest
#: process's the cores less one (1 on 2 cores). Each pool's extra thread only took CPU
#: from the other process: the corpus's reader 0.697 -> 0.673 CPU s, the ingest
#: process 0.990 -> 0.971 (alternating runs at load 11-16, issue 26)
POLARS_THREADS = "POLARS_MAX_THREADS"


def start_child(
    module: str, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, BinaryIO]:
    """``python -P -m module FD ARGS`` (this interpreter, ctxkeep importable from this
    checkout; ``env``: variables set for it over this process's):
    stdin a pipe, stdout this process's stderr (DEVNULL when it has no
    descriptor, e.g. under pytest's capture), and a pipe of its own whose write end
    is the inherited descriptor FD. Returns the process and the read end (EOF when
    the process ends). Raises OSError when it cannot start."""
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
    }
    try:
        stdout = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        stdout = subprocess.DEVNULL
    rfd, wfd = os.pipe()
    # SIGINT and SIGTERM blocked from the child's first instruction (a blocked signal
    # stays blocked across fork and exec): Ctrl-C reaches the whole process group, and a
    # reader still importing, before its own SIG_IGN, printed a KeyboardInterrupt
    # traceback over the ingest's output (newuser19 F6's trial); ``timeout`` sends its
    # SIGTERM to the whole group too, which would end a reader under the ingest's own
    # stop. The ingest stops its readers itself. This thread's mask is restored at
    # once: a signal that came meanwhile is taken by another thread (the ingest's main
    # thread and ``cli.said_at_once``'s watcher never block them) or here then; none is
    # lost, and no thread started here inherits the mask (Popen starts none).
    masked = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD) if _MASKS else None
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
        if masked is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, masked)
    return proc, os.fdopen(rfd, "rb")


#: ``signal.pthread_sigmask`` exists (POSIX; not on Windows, where no process group
#: gets a terminal's Ctrl-C the same way)
_MASKS = hasattr(signal, "pthread_sigmask")
#: the signals a reader process starts with blocked (``start_child``); it ignores them too
#: (``reader_process``): the ingest process answers them and stops its readers
HELD = (signal.SIGINT, signal.SIGTERM) if hasattr(signal, "SIGTERM") else (signal.SIGINT,)
_HELD = set(HELD)


def first_ingest_home(argv: list[str]) -> Path | None:
    """The store directory of ``argv`` (the command line after the program's name)
    when it is a plain ``ingest`` (``[--home DIR] ingest`` and only the options in
    ``_FLAGS`` and ``_VALUED``) into a home that holds no ``store.db``; else None.
    The home is ``config.resolve_home``'s (``--home``, ``$CTXKEEP_HOME``, the platform's
    data dir)."""
    home: str | None = None
    seen = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "ingest" and not seen:
            seen = True
        elif a.startswith("--home="):
            home = a.split("=", 1)[1]
        elif a in _VALUED:
            if i + 1 >= len(argv):
                return None
            if a == "--home":
                home = argv[i + 1]
            i += 1
        elif not seen or a not in _FLAGS:
            return None
        i += 1
    if not seen or "PREFECT_API_URL" in os.environ:  # a flow run reads in its own tasks
        return None
    from ctxkeep.sinks.files import STORE_DB  # the file names' registry (0.3 ms)

    try:
        path = _home(home)
    except Exception:  # the CLI says what is wrong with it
        return None
    try:
        if (path / STORE_DB).exists():
            return None
    except OSError:  # a home it may not read (EACCES): the CLI says so in one line
        return None
    return path


def _home(home: str | None) -> Path:
    """``config.resolve_home(home)``: a home given (``--home``, ``$CTXKEEP_HOME``) by its
    rule, here, without importing config (dataclasses, json, ``re``: ~10 ms of CPU,
    which the CLI's imports pay after the reader started, not before); with none given,
    config's (the platform's data dir)."""
    raw = home or os.environ.get("CTXKEEP_HOME")
    if raw:
        return Path(raw).expanduser().resolve()
    from ctxkeep.config import resolve_home

    return resolve_home(None)


def core_free() -> bool:
    """Whether a second core is likely idle: this process may use 2+ cores and the
    1-minute load average is below their number (the rule of the search's lists run
    ahead, ``query.search.ahead.core_free``: not imported here, as this runs before the
    CLI's imports). False where the OS gives neither."""
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return cores >= 2 and os.getloadavg()[0] < cores
    except (OSError, AttributeError):
        return False


def start_early(argv: list[str]) -> bool:
    """Start the reader process for ``argv``'s first ingest (``first_ingest_home``)
    when a second core is likely idle (``core_free``), or always with
    ``CTXKEEP_EARLY_READER=1``; never with ``CTXKEEP_EARLY_READER=0`` or on a machine of
    one core; True when one was started: then Polars' pool is one thread in the reader
    and the cores less one here (``POLARS_THREADS``; a big first ingest's early reader
    is one of ``read_split``'s readers, a process per core there too), and
    ``importlib.metadata`` is deferred (``defer_metadata``). A failure to start is
    silent (the engine reads as usual, its environment as it was). Without a free core the reader only takes time slices from the ingest
    process: at load 18-27 on 2 cores the first ingest of the corpus took 5.4 s with it
    against 3.8 s without (session 16)."""
    setting = os.environ.get("CTXKEEP_EARLY_READER", "")
    if setting == "0" or (os.cpu_count() or 1) < 2:
        return False
    if setting != "1" and not core_free():
        return False
    if first_ingest_home(argv) is None:
        return False
    trace("ingest", "spawn")
    own = POLARS_THREADS not in os.environ  # else the user's, in both processes
    try:
        _early.append(
            start_child(
                "ctxkeep.pipeline.reader_process", "--later", env={POLARS_THREADS: "1"} if own else None
            )
        )
    except (OSError, ValueError):  # no process, or no descriptor passing (``pass_fds``)
        return False
    atexit.register(_stop)
    if own:  # before the CLI's imports (Polars)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
        os.environ[POLARS_THREADS] = str(max(1, cores - 1))
    defer_metadata()
    return True


def take() -> tuple[subprocess.Popen, BinaryIO] | None:
    """The reader started early (``start_early``) for its caller to send the todo to
    (its flags and the todo, pickled, on stdin: ``reader_process._main``), or None;
    once: a second call gets None. None too for a reader sent its todo ahead
    (``send_ahead``: only ``take_ahead`` takes it)."""
    if not _early or _ahead:
        return None
    _taken.append(True)
    return _early.pop()


def reader_flags(
    seal: bool,
    vault_on: bool,
    precompute: str | None = None,
    seal_rows: bool = False,
    seal_late: bool = False,
) -> list[str]:
    """A reader process's flags (``reader_process._main``): ``--seal`` (the vault's work
    done there), ``--seal-rows`` (with it: the databases' whole rows documents too),
    ``--seal-late`` (with it: sealed after the batches are sent, ``readahead.LateRaw``),
    ``--no-vault`` (``vault_on`` False: the vault off or suspended, so no redaction of the
    raw lines), ``--precompute MODE``."""
    return (
        (["--seal"] if seal else [])
        + (["--seal-rows"] if seal and seal_rows else [])
        + (["--seal-late"] if seal and seal_late else [])
        + ([] if vault_on else ["--no-vault"])
        + (["--precompute", precompute] if precompute else [])
    )


def own_files(sizes: list[int], share: float | None = None) -> int:
    """How many first files (of new bytes ``sizes``, in todo order) the ingest process
    reads itself beside the early reader: the most whose bytes stay within ``share``
    (``EARLY_OWN_SHARE``) of the total (``reader_process.read_shared``)."""
    share = EARLY_OWN_SHARE if share is None else share
    total = sum(sizes)
    n = size = 0
    while n < len(sizes) and size + sizes[n] <= share * total:
        size += sizes[n]
        n += 1
    return n


def new_bytes(todo: list) -> list[int]:
    """Each todo file's new bytes (its size less its watermark's offset; a rewritten
    file's whole size; 0 when it vanished), as ``plan.pending_bytes`` counts them."""
    sizes = []
    for f, wm in todo:
        try:
            full = f.path.stat().st_size
        except OSError:
            full = 0
        off = wm.offset if wm is not None and f.mode != "rewrite" and full >= wm.offset else 0
        sizes.append(full - off)
    return sizes


def send_ahead(todo: list, vault_on: bool) -> bool:
    """Send the reader started early its flags and its files of ``todo`` (the service's
    plan of a first ingest: ``service.ingest``) now, not when the engine reads: it then
    reads while this process imports the engine (Polars), takes the store's lock and
    plans again (~0.05 CPU s of the corpus's first ingest: its imports end before that,
    issue 26). The engine takes it with ``take_ahead`` when its own plan holds the same
    files; else it is stopped at exit, having only read. ``vault_on``: the vault
    captures (the engine seals in the reader then: ``reader_process.read_shared``).
    True when sent; False when no reader waits, it was sent already, or the ingest
    process reads every file itself."""
    if not _early or _ahead:
        return False
    n = own_files(new_bytes(todo))
    if n == len(todo):
        return False
    proc = _early[0][0]
    flags = reader_flags(vault_on, vault_on, EARLY_PRECOMPUTE, seal_rows=True, seal_late=True)
    import pickle  # loaded by now (the CLI's imports): not at this module's top

    try:
        assert proc.stdin is not None  # start_child opens it as a pipe
        pickle.dump((flags, todo[n:]), proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        proc.stdin.close()
    except (OSError, ValueError):  # it ended: the engine reads without it
        _stop()
        return False
    _ahead.append((flags, todo[n:]))
    trace("ingest", "todo")
    return True


def ahead() -> list | None:
    """The todo ``send_ahead`` sent the reader still waiting to be taken, or None."""
    return _ahead[0][1] if _ahead and _early else None


def take_ahead(todo: list, flags: list[str]) -> tuple[subprocess.Popen, BinaryIO] | None:
    """The reader sent its todo ahead (``send_ahead``) when it was sent ``todo`` with
    ``flags``, for ``reader_process.read_in_process`` to read its results; else None,
    and it is stopped (it read other files, or with other flags)."""
    if not _early or not _ahead:
        return None
    if _ahead[0] != (flags, todo):
        _stop()
        return None
    _ahead.clear()
    _taken.append(True)
    return _early.pop()


def defer_metadata() -> None:
    """Put a stand-in for ``importlib.metadata`` in ``sys.modules`` that imports the
    real module when one of its attributes is first read (PEP 562's module
    ``__getattr__``), and hands that attribute over; the real module then replaces
    it (in ``sys.modules`` and as ``importlib.metadata``). Polars' import loads it
    at its Iceberg plugin's top for one call a first ingest never makes, and with it
    ``email``, ``socket``, ``uuid`` …: ~8 ms of CPU in each of the first ingest's
    two processes (Python 3.11; issue 26). ``importlib.util.LazyLoader`` does not
    serve: the import system reads a module's ``__spec__``, which loads it. Nothing
    when the module is loaded already."""
    name = "importlib.metadata"
    if name in sys.modules:
        return
    import importlib
    import types

    stub = types.ModuleType(name, "importlib.metadata, imported on first use (prestart.defer_metadata)")

    def __getattr__(attr: str):
        if sys.modules.get(name) is stub:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attr)

    stub.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = stub
    importlib.metadata = stub


def taken() -> bool:
    """Whether the engine took the reader started early (``take``, ``take_ahead``):
    this process is a first ingest that ``exit_now`` ends once the command returns."""
    return bool(_taken)


def ran_small() -> None:
    """Note that this process ran a few new lines' ingest in-process (``service.ingest``,
    the hook path), or an ingest with nothing new and no engine, with every store
    connection closed after it: ``exit_now`` may end it without the interpreter's
    teardown (~0.01 CPU s of the ~0.3 s of ``ingest --path FILE``; a no-op ingest of
    25,728 files freed its plan's objects and every module's, issue 26)."""
    _small.append(True)


#: reader processes to wait for at exit (``reap_at_exit``)
_reap: list[subprocess.Popen] = []


def reap_at_exit(proc: subprocess.Popen) -> None:
    """Wait for ``proc`` (a reader that sent everything and ends by itself:
    ``reader_process._take_sealed`` waits for it in a daemon thread) at this process's
    exit (an atexit handler, which ``exit_now`` runs too; killed after 10 s), so it never
    outlives the ingest: a run's end left it unreaped when that thread had not run yet
    (2 of 30 runs at load 22-30: its CPU missing from the ingest's children's)."""
    if not _reap:
        atexit.register(_wait_reaped)
    _reap.append(proc)


def _wait_reaped() -> None:
    while _reap:
        proc = _reap.pop()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def waiting() -> bool:
    """Whether a reader started early waits for its todo (``take``)."""
    return bool(_early)


def exit_now(e: SystemExit) -> NoReturn:
    """End a first ingest's process with ``e``'s exit status without the interpreter's
    teardown (``os._exit``): what the exit runs that matters here runs first (the atexit
    handlers, logging's flush among them, then stdout and stderr flushed); what it
    skips is freeing every module's objects (Polars, the CLI, the sources: ~0.02-0.03
    CPU s, the last thing the corpus's first ingest waited for, issue 26). Every store
    connection is closed by then (the engine's, checkpointed, and the plan's). Raises
    ``e`` (the usual exit) for a status that is not a number, or while a thread the
    interpreter would wait for still runs, or when the engine did not take the reader
    started early (``take``: a flow run, an error, nothing to read) and no few new
    lines' ingest ran in-process (``ran_small``)."""
    import atexit
    import threading

    code = e.code
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if (
        not (_taken or _small)
        or not (code is None or isinstance(code, int))
        or any(t.is_alive() for t in others)
    ):
        raise e
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, or no stream
            pass
    os._exit(code or 0)


def _stop() -> None:
    """Stop a reader started early and never taken."""
    _ahead.clear()
    while _early:
        proc, results = _early.pop()
        proc.kill()
        proc.wait()
        results.close()
        if proc.stdin is not None:
            proc.stdin.close()

"""The hooks' detached ingest: a hook returns to its agent at once and the ingest it
asks for runs in a process of its own, one at a time per store.

A hook (``runtime.run``) appends its request, one JSON line ``{"agent", "event",
"path"}``, to ``<home>/hook-queue.jsonl`` (``QUEUE_FILE``, under an exclusive
``flock`` of that file while it writes) and starts ``python -P -m
ctxkeep.hooks.worker HOME`` detached (its own session, no stdio: the agent waits for
no descriptor of it) unless a worker of that store runs already. A worker holds
``<home>/hook-worker.lock`` (``WORKER_LOCK``, ``flock``, released by the OS when the
process dies) while it works: it takes every queued request at once (read and
truncate under the queue's lock), ingests each file once however many hooks asked
for it (``ingest_file``: ``service.ingest`` of that path, as ``ingest --path`` does,
DuckDB left to its readers), then looks again. A hook that fires meanwhile only appends its request:
that is the "run again" mark, and the running worker takes it, so there are never
two hook ingests of one store and triggers never stack up. A worker that finds the
lock held exits at once (two hooks may start one each; one runs). After releasing
the lock a worker looks at the queue once more, so a request appended just before is
never left behind.

Without ``fcntl`` (Windows) the request is ingested in the hook's own process, as
before this module. Everything a worker does is logged to ``<home>/hooks.log``
(``log``); it never writes to a terminal.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ctxkeep.hooks.hooklog import LOG_FILE, LOG_MAX_BYTES, log  # noqa: F401 (the worker's log, as before)
from ctxkeep.sinks.files import STORE_DB

try:
    import fcntl
except ImportError:  # Windows: no detached worker (``start`` ingests in the caller)
    fcntl = None  # type: ignore[assignment]

QUEUE_FILE = "hook-queue.jsonl"
WORKER_LOCK = "hook-worker.lock"


def enqueue(home: Path, agent: str, event: str, path: Path) -> None:
    """Append the request to ingest ``path`` for ``agent`` to the store's queue
    (created 0600). Raises OSError when the home cannot be written."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    line = json.dumps({"agent": agent, "event": event, "path": str(path)}) + "\n"
    fd = os.open(home / QUEUE_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)  # releases the flock


def take(home: Path) -> list[dict]:
    """Every queued request (emptied from the queue), oldest first; a line that is not
    a request (a torn write of a killed hook) is dropped."""
    try:
        fd = os.open(home / QUEUE_FILE, os.O_RDWR)
    except FileNotFoundError:
        return []
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    out = []
    for raw in b"".join(chunks).decode("utf-8", "replace").splitlines():
        try:
            req = json.loads(raw)
        except ValueError:
            continue
        if isinstance(req, dict) and {"agent", "event", "path"} <= req.keys():
            out.append(req)
    return out


def queued(home: Path) -> bool:
    """True when the store's queue holds a request."""
    try:
        return (home / QUEUE_FILE).stat().st_size > 0
    except OSError:
        return False


def _try_lock(home: Path) -> int | None:
    """The worker lock's descriptor when this process took it, None when another holds it."""
    fd = os.open(home / WORKER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def running(home: Path) -> bool:
    """True while a worker holds the store's worker lock."""
    if fcntl is None or not (home / WORKER_LOCK).exists():
        return False
    fd = _try_lock(home)
    if fd is None:
        return True
    os.close(fd)
    return False


def start(home: Path) -> str:
    """Have the queue worked off: start a detached worker unless one runs (it takes the
    queue); without ``fcntl``, work it off here. Returns how (``"started"``,
    ``"running"``, ``"in-process"``). Raises OSError when no process can start."""
    if fcntl is None:
        drain(home)
        return "in-process"
    if running(home):
        return "running"
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    subprocess.Popen(
        # -P: the agent's working directory must not shadow this ctxkeep
        [sys.executable, "-P", "-m", "ctxkeep.hooks.worker", str(home)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    return "started"


def wait_idle(home: Path, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds until no worker runs and the queue is empty (a
    SessionStart hook prints its snapshot after the ingest it asked for); True when
    idle."""
    end = time.monotonic() + timeout
    while running(home) or queued(home):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def ingest_file(home: Path, agent: str, path: Path) -> str:
    """Ingest ``path``'s new bytes as ``agent``'s into the store at ``home`` as ``ctxkeep
    ingest --path`` does (``service.ingest``: in-process, never a Prefect flow run; DuckDB
    left to its readers, not caught up when nothing is new); returns the log line's
    detail. Skipped, without importing the service, when the store's watermark of
    ``path`` has its current size and mtime (an earlier hook ingested it). Raises what
    the ingest raised."""
    if unchanged(home, path):
        return f"{path} unchanged since the last ingest"
    from ctxkeep.service.ingest import IngestRequest, ingest  # only when there is work

    req = IngestRequest(agents=(agent,), paths=(path,), prefect=False, catch_up_analytics=False)
    s = ingest(home, req).summary
    n = s.get("entries_new") or 0
    return f"ingested {n:,} new {'entry' if n == 1 else 'entries'} from {path}"  # not "1 new entries"


def unchanged(home: Path, path: Path) -> bool:
    """True when the store's watermark of ``path`` has its current inode, size and
    mtime (the inode: ctxkeep's rewrites keep the mtime and may keep the size,
    ``compress.rewrite.keep_times``)."""

    db = home / STORE_DB
    if not db.exists():
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    from ctxkeep.errors import StoreError
    from ctxkeep.sinks.sqlite.readonly import open_ro

    try:
        conn = open_ro(db)  # (a killed first ingest's hot journal rolled back)
    except (sqlite3.Error, StoreError):
        return False
    try:
        r = conn.execute(
            "SELECT size, mtime_ns, offset, ino FROM watermarks WHERE path = ?", (str(path),)
        ).fetchone()
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return bool(r) and (r[0], r[1], r[2], r[3]) == (st.st_size, st.st_mtime_ns, st.st_size, st.st_ino)


def drain(home: Path) -> int:
    """Work off the store's queue while holding the worker lock (module doc); returns
    the files ingested. Returns 0 at once when another worker holds the lock."""
    done = 0
    while True:
        fd = _try_lock(home) if fcntl is not None else None
        if fcntl is not None and fd is None:
            return done
        try:
            while reqs := take(home):
                for key in dict.fromkeys((r["agent"], r["path"]) for r in reqs):
                    try:
                        line = f"ingested: {ingest_file(home, key[0], Path(key[1]))}"
                    except Exception as e:
                        line = f"error: {type(e).__name__}: {e}"
                    # one line per event that asked (each hook's log line of the outcome)
                    for ev in dict.fromkeys(r["event"] for r in reqs if (r["agent"], r["path"]) == key):
                        log(home, key[0], ev, line)
                    done += 1
        finally:
            if fd is not None:
                os.close(fd)  # releases the lock
        if not queued(home):  # a request appended while the lock was released is taken now
            return done


def main() -> None:
    """``python -m ctxkeep.hooks.worker HOME``: ``drain`` the store's queue."""
    home = Path(sys.argv[1])
    try:
        drain(home)
    except BaseException as e:  # nothing reaches a terminal: the log says it
        log(home, "worker", "drain", f"error: {type(e).__name__}: {e}")
    # no interpreter teardown (Polars, DuckDB: tenths of a second of nothing)
    os._exit(0)


if __name__ == "__main__":
    main()

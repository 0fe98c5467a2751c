"""Giving a store's free pages back to the disk (``ctxkeep purge --compact``).

A purge deletes rows, and SQLite keeps the pages they held as free pages inside
``store.db`` (zeroed: ``secure_delete``), so the file does not shrink and every
``backup`` copies them (newuser21 N9: a 50.6 MB store, 2,429 of its 3,090 16-KiB pages
free after a project's purge). ``free_space`` says how much is free; ``compact`` writes
the store anew without them:

1. under the store lock (no writer), the live store's WAL is checkpointed into it and
   truncated (``wal_checkpoint(TRUNCATE)``; a reader that keeps it busy: StoreBusy);
   the disk must have room for the copy beside the store (``copy_bytes``: the used
   pages, plus ``COPY_SLACK``), else FileSystemError (ENOSPC) before anything is
   written: the copy is as big as the store less its free pages (a 2 GB store with a
   project purged: about 1.6 GB more on that disk for the time of the copy);
2. ``VACUUM INTO store.db.compacting``: a consistent copy holding only the used pages
   (the schema, ``user_version`` and ``application_id`` with them), put in WAL mode,
   checked (``copies.copy_problem``: ``quick_check``, a ctxkeep store; else StoreError
   and the store is unchanged), fsynced;
3. the live store's ``-wal`` and ``-shm`` are deleted (the WAL is empty: step 1), so
   the copy never meets the old store's WAL index, then the copy is renamed over
   ``store.db`` (``os.replace``: atomic) and the folder fsynced. Before step 1 and
   again here, no other process may have the store open (``pool.wait_unopened``: it
   waits up to ``READERS_WAIT``, then StoreBusy and the store is unchanged): an idle
   connection of another process, which the checkpoint does not see, read the new
   files through the old index ("disk I/O error", then "malformed").

Crash consistency: a kill before step 3's rename leaves the old store, whole (its
WAL was checkpointed into it) and at most a ``store.db.compacting`` the next
``compact`` deletes; after it, the new store, complete and synced before the rename.
``tests/maintenance/test_compact_sigkill.py`` kills a compaction at each of these
points (``kill_point("compact", …)``) and at random times. A reader that
opens the store in the instant between that check and the rename reads the old file
until it opens the store again (SQLite does not checkpoint or delete a WAL on close
for a file that has moved).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ctxkeep.errors import FileSystemError, StoreBusy, StoreError
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB, fsync_dir
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite.copies import copy_problem
from ctxkeep.sinks.sqlite.intents import kill_point
from ctxkeep.sinks.sqlite.pool import wait_unopened

#: the copy ``compact`` writes beside ``store.db`` before renaming it over the store
COMPACT_TMP = STORE_DB + ".compacting"
#: free bytes from which ``purge`` says how to give them back: 1 MiB and a tenth of the file
SUGGEST_BYTES = 1 << 20
SUGGEST_SHARE = 0.10
#: bytes beyond the used pages the copy's disk must have free: the copy's own WAL
#: switch and the file system's blocks for its metadata; the disk is not filled to the end
COPY_SLACK = 64 << 20
#: page cache of the connection that writes the copy, KiB (``PRAGMA cache_size``): pages
#: are read and written once, a cache buys nothing (same CPU, 0.16 vs 0.27 s at 143 MB)
COPY_CACHE_KIB = 2048


def disk_free(path: Path) -> int:
    """Bytes an unprivileged process may still write on the file system of ``path``
    (``statvfs``: ``f_bavail`` × ``f_frsize``)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def copy_bytes(pages: int, free_pages: int, page_size: int) -> int:
    """Bytes the compacted copy needs on the store's disk: its used pages (``VACUUM
    INTO`` writes each once) plus ``COPY_SLACK``."""
    return (pages - free_pages) * page_size + COPY_SLACK


def _too_little_room(home: Path, need: int, free: int) -> FileSystemError:
    """The one line of a compaction the disk has no room for (nothing written)."""
    return FileSystemError(
        f"not enough free disk to compact store.db: the copy needs {need / 1e6:,.0f} MB beside it, "
        f"{free / 1e6:,.0f} MB free",
        where=str(home),
        hint="free space on that disk, then run `ctxkeep purge --compact` again (the store is unchanged)",
        kind="ENOSPC",
    )


def free_space(home: Path) -> dict:
    """How much of ``<home>/store.db`` is free pages, changing nothing (a read-only
    connection): ``{"pages", "free_pages", "page_size": bytes, "bytes": the file's
    size, "free_bytes": free_pages × page_size, "worth_compacting": bool (at least
    ``SUGGEST_BYTES`` and ``SUGGEST_SHARE`` of the file)}``. Raises StoreError when
    there is no store."""
    conn = sqlite_store.connect(Path(home), readonly=True)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    free_bytes = free * size
    file_bytes = (Path(home) / STORE_DB).stat().st_size
    return {
        "pages": pages,
        "free_pages": free,
        "page_size": size,
        "bytes": file_bytes,
        "free_bytes": free_bytes,
        "worth_compacting": free_bytes >= SUGGEST_BYTES and free_bytes >= SUGGEST_SHARE * file_bytes,
    }


def compact(home: Path, *, timeout: float = -1, dry_run: bool = False) -> dict:
    """Write ``<home>/store.db`` anew without its free pages (the module's steps).

    ``timeout``: seconds to wait for the store lock (-1 forever, 0 not at all).
    ``dry_run``: only ``free_space``'s figures, nothing written. A real run gives back
    the free pages and more: VACUUM also packs the pages that deletes left partly
    empty, which no page count shows (newuser23 F11: 1.4 MB of free pages, 1.8 MB
    given back); ``reclaimed - free_bytes`` is that part.

    Returns ``{"before": bytes, "after": bytes, "reclaimed": bytes, "free_pages":
    before, "free_bytes": their bytes, "pages": before, "needs": bytes the copy needs free (``copy_bytes``),
    "disk_free": bytes free before it, "dry_run"}`` (a dry run: ``after`` is the size
    without the free pages). Raises StoreError when there is no store, StoreBusy when
    another run holds the lock past ``timeout`` or a reader keeps the WAL from being
    checkpointed, FileSystemError (ENOSPC) when the disk has less than ``needs`` free
    (nothing written; not for a dry run, whose figures say it), StoreError too when
    the copy fails its check (the store is left as it was), OSError from the file
    system (the copy is deleted)."""
    home = Path(home)
    db = home / STORE_DB
    if not db.exists():
        raise StoreError("no store yet", where=str(db), hint="run `ctxkeep ingest` first")
    if dry_run:
        f = free_space(home)
        return {
            "before": f["bytes"],
            "after": f["bytes"] - f["free_bytes"],
            "reclaimed": f["free_bytes"],
            "free_pages": f["free_pages"],
            "free_bytes": f["free_bytes"],
            "pages": f["pages"],
            "needs": copy_bytes(f["pages"], f["free_pages"], f["page_size"]),
            "disk_free": disk_free(home),
            "dry_run": True,
        }
    tmp = home / COMPACT_TMP
    with hold(home, timeout, what="compact"):
        tmp.unlink(missing_ok=True)  # a killed compaction's copy
        wait_unopened(home, "purge --compact")  # refused before the copy, not after it
        conn = sqlite_store.connect(home)
        try:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise StoreBusy(
                    "a reader keeps the store's WAL from being written into it",
                    where=str(db),
                    hint="close the app or MCP server reading the store, then run it again",
                )
            before = db.stat().st_size
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            need = copy_bytes(pages, free, page_size)
            room = disk_free(home)
            if room < need:
                raise _too_little_room(home, need, room)
            # the writer's 64 MiB page cache, which VACUUM INTO also gives the copy's
            # connection: 200 MB peak RSS at 143 MB, 361 MB at 1.4 GB; at 2 MiB: 21 MB
            conn.execute(f"PRAGMA cache_size=-{COPY_CACHE_KIB}")
            try:
                conn.execute("VACUUM INTO ?", (str(tmp),))
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        finally:
            conn.close()
        kill_point("compact", "copied")
        try:
            _finish_copy(tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        why = copy_problem(tmp)
        if why:
            tmp.unlink(missing_ok=True)
            raise StoreError(
                f"the compacted copy failed its check ({why}); the store is unchanged",
                where=str(db),
                hint="run `ctxkeep doctor`",
            )
        kill_point("compact", "checked")
        wait_unopened(home, "purge --compact")  # (a reader that came meanwhile)
        for side in ("-wal", "-shm"):  # empty (checkpointed, no writer): never the copy's
            Path(f"{db}{side}").unlink(missing_ok=True)
        kill_point("compact", "sidecars")
        os.replace(tmp, db)
        fsync_dir(home, strict=True)
        kill_point("compact", "renamed")
    after = db.stat().st_size
    return {
        "before": before,
        "after": after,
        "reclaimed": before - after,
        "free_pages": free,
        "free_bytes": free * page_size,
        "pages": pages,
        "needs": need,
        "disk_free": room,
        "dry_run": False,
    }


def _finish_copy(path: Path) -> None:
    """Put the copy ``VACUUM INTO`` wrote in WAL mode, as a store is kept (its header
    says so; the journal files it leaves are gone once it is closed), 0600, synced."""
    c = sqlite3.connect(path, isolation_level=None)
    try:
        c.execute("PRAGMA journal_mode=WAL")
    finally:
        c.close()
    os.chmod(path, 0o600)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

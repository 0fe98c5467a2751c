"""Store backups: consistent copies of ``store.db`` in ``<home>/backups`` and restore.

``run_backup`` copies the live store with SQLite's online backup API
(``sqlite3.Connection.backup``: a consistent snapshot, readers and the writer go on)
into ``backups/store-<UTC>.db`` (0600, written as a temp file and renamed), checks the
copy (``PRAGMA quick_check``) and keeps the newest ``[backup] keep`` (7) copies.
``restore`` installs one: it checks the file, refuses while the store lock is held,
moves the current ``store.db`` (and its WAL) aside as ``store.db.replaced-<UTC>`` and
rebuilds DuckDB from the restored rows. ``serve`` runs ``backup_flow`` daily.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxkeep.config import load_config
from ctxkeep.errors import NotFound, StoreError
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import BACKUPS_DIR, STORE_DB, STORE_DB_SIDECARS
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite import copies, pool, wiped
from ctxkeep.sinks.sqlite.store_safety import damaged, header_problem
from ctxkeep.timeutil import now_iso

PREFIX, SUFFIX = "store-", ".db"


def stamp() -> str:
    """A UTC timestamp for file names: ``20261201T105800.123456Z``."""
    return now_iso().replace("-", "").replace(":", "")


def backups(home: Path) -> list[Path]:
    """The store backups of ``home``, newest first (``backups/store-<UTC>.db``)."""
    d = Path(home) / BACKUPS_DIR
    if not d.is_dir():
        return []
    return sorted(d.glob(f"{PREFIX}*{SUFFIX}"), reverse=True)


def check_backup(path: Path) -> str | None:
    """Why ``path`` is not a usable store backup, or None: its header
    (``store_safety.header_problem``), ``PRAGMA quick_check``, a ctxkeep store
    (``application_id`` or a ``meta`` table with ``schema_version``)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return "missing or empty"
    why = header_problem(path)
    if why:
        return why
    return copies.copy_problem(path)


def run_backup(home: Path, *, keep: int | None = None) -> dict:
    """Write ``<home>/backups/store-<UTC>.db`` from the live store and prune to the
    newest ``keep`` (default config ``[backup] keep``, 7).

    Returns ``{"path", "bytes", "seconds", "removed": [paths]}``. Raises StoreError when
    there is no store, StoreDamaged when the store (or the copy) fails its check.
    """
    import time

    t0 = time.perf_counter()
    home = Path(home)
    keep = load_config(home).backup.keep if keep is None else keep
    if not (home / STORE_DB).exists():
        raise StoreError("no store to back up", where=str(home / STORE_DB), hint="run `ctxkeep ingest` first")
    d = home / BACKUPS_DIR
    d.mkdir(mode=0o700, exist_ok=True)
    dest = d / f"{PREFIX}{stamp()}{SUFFIX}"
    tmp = dest.with_suffix(".tmp")
    src = sqlite_store.connect(home, readonly=True)
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        os.close(fd)
        copies.copy_store(src, tmp)
    except BaseException:  # a full disk (SQLITE_FULL, ENOSPC): no temp file stays behind
        tmp.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    why = check_backup(tmp)
    if why:
        tmp.unlink(missing_ok=True)
        raise damaged(home / STORE_DB, f"backup copy failed its check: {why}")
    os.chmod(tmp, 0o600)
    os.replace(tmp, dest)
    removed = [str(p) for p in backups(home)[max(keep, 1) :]]
    for p in removed:
        Path(p).unlink(missing_ok=True)
    return {
        "path": str(dest),
        "bytes": dest.stat().st_size,
        "seconds": round(time.perf_counter() - t0, 3),
        "removed": removed,
    }


def move_aside(home: Path, tag: str, what: str) -> list[str]:
    """Move ``store.db`` and its sidecars to ``<name>.<tag>-<UTC>`` (never deleted).
    Returns the new paths. Raises StoreBusy, moving nothing, when another process keeps
    the store open (``pool.wait_unopened``: its connection would read the next
    store through the moved ``-shm``; ``what``: the command, for its line)."""
    pool.wait_unopened(home, what)
    s = stamp()
    out = []
    for name in (STORE_DB, *STORE_DB_SIDECARS):
        p = Path(home) / name
        if p.exists():
            dest = p.with_name(f"{name}.{tag}-{s}")
            os.replace(p, dest)
            out.append(str(dest))
    return out


def install(home: Path, file: Path) -> None:
    """Copy the backup ``file`` to ``<home>/store.db`` (0600, temp file then rename);
    the caller moved the old store aside and holds the lock."""
    import shutil

    dest = Path(home) / STORE_DB
    tmp = dest.with_name(STORE_DB + ".restoring")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out, open(file, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dest)
    except BaseException:  # a full disk: no temp file stays behind
        tmp.unlink(missing_ok=True)
        raise


def restore(home: Path, file: Path) -> dict:
    """Install the store backup ``file`` as ``<home>/store.db``: check it
    (``check_backup``), take the store lock without waiting, move the current store
    aside (``store.db.replaced-<UTC>``), copy the backup in, open it (schema upgrade if
    older), rebuild the vault's manifest from the packs and derive every file the vault
    holds from it (``reparse.from_vault``: what was ingested after the backup comes
    back), and rebuild DuckDB.

    Returns ``{"restored": file, "moved_aside": [paths], "analytics": note, "vault":
    [action lines]}``. Raises
    StoreError for an unusable file, StoreBusy while another run holds the lock."""
    from ctxkeep.maintenance.reindex import rebuild_analytics

    home, file = Path(home), Path(file).expanduser()
    if not file.exists():  # (a relative path from another folder read "missing or empty")
        raise NotFound(
            "no such file",
            where=str(file.absolute()),
            hint="give the backup's path (a relative one is read from the current folder)",
        )
    why = check_backup(file)
    if why:
        raise StoreError(f"not a usable store backup: {why}", where=str(file), hint="pick another backup")
    from ctxkeep.maintenance.reparse import from_vault

    with hold(home, 0, what="restore"):
        moved = move_aside(home, "replaced", "restore")
        # a home `purge --all` wiped: the restore supersedes the wipe (its mark would
        # have the next open delete the store put back), keeping the wipe's tombstones
        kept = wiped.read(home) if wiped.marked(home) else None
        install(home, file)
        if kept is not None:
            wiped.unmark(home)
        # the vault is newer than the backup: its manifest is made again from the packs
        # and every file it holds derived from it (``reparse.from_vault``), so what was
        # ingested after the backup is back, compress's and purge's work included
        vault_actions = from_vault(home)
        conn = sqlite_store.connect(home)
        try:
            if kept:
                wiped.insert_kept(conn, kept)
            note = rebuild_analytics(conn, home)
        finally:
            conn.close()
    return {"restored": str(file), "moved_aside": moved, "analytics": note, "vault": vault_actions}

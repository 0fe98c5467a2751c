"""The mark a whole-store wipe (``purge --all``) leaves: ``<home>/store.wiped``.

A wipe deletes ``store.db`` and everything derived from it, ``store.id`` and
``integrity.ok`` too, so that the next ingest starts a fresh store without calling the
home damaged (newuser23 F2: ``store.id`` left behind made every command say "store.db
is missing - run doctor --repair", and the repair re-ingested every earlier purge's
sessions). Crash-safe in this order:

1. ``write`` the mark (a temporary file renamed, fsynced, 0600) holding the store's
   tombstones and ``purge_files`` rows (``tombstones``, ``purge_files``: lists of rows)
   and ``wiped_at`` (ISO-8601 UTC);
2. delete the store's files (``maintenance.purge.wipe``).

While the mark stands the home is a wiped one, not a damaged one
(``store_safety.held_data`` returns nothing: the backups, which a purge never touches,
no longer make a missing ``store.db`` an error). A writable open (``connection``)
first ``finish`` es a wipe a kill cut short (the files still there are deleted), then
creates the store and ``adopt`` s the mark: the tombstones go into the new store and the
mark is removed in the same transaction's aftermath (a kill before the removal leaves
an empty new store that the next open wipes again: nothing is lost). A read-only open
of a marked home finds "no store yet". ``restore`` of a backup into a wiped home
removes the mark once the backup is in place (``unmark``) and adds the mark's
tombstones to it (``insert_kept``): the restore supersedes the wipe.

Tombstones survive the wipe on purpose: a client's project that was purged must not
come back when the agents' files are read again from the start (docs/design.md,
"Safety"); ``purge --reingest`` lifts one as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from ctxkeep.sinks.files import (
    ARCHIVE_DIR,
    INTEGRITY_STAMP,
    STORE_FILES,
    STORE_ID_FILE,
    VAULT_DIR,
    fsync_dir,
)

WIPE_MARK = "store.wiped"


def marked(home: Path) -> bool:
    """True when a wipe's mark stands in ``home``."""
    return (Path(home) / WIPE_MARK).exists()


def write(home: Path, kept: dict) -> None:
    """Write the mark durably (``kept``: ``{"wiped_at", "tombstones": [[scope, value,
    created_at]], "purge_files": [[scope, value, kind, item]]}``), 0600. Raises
    OSError."""
    p = Path(home) / WIPE_MARK
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(kept, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, p)
    fsync_dir(Path(home))


def read(home: Path) -> dict:
    """The mark's content (``write``); ``{}`` when it is unreadable."""
    try:
        out = json.loads((Path(home) / WIPE_MARK).read_text())
    except (OSError, ValueError):
        return {}
    return out if isinstance(out, dict) else {}


def kept_rows(db: Path) -> dict:
    """The rows a wipe carries over, read from the store ``db`` (read-only):
    ``{"tombstones": [...], "purge_files": [...]}`` (empty lists when it holds none or
    cannot be read)."""
    out: dict = {"tombstones": [], "purge_files": []}
    if not Path(db).exists():
        return out
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            out["tombstones"] = [
                list(r) for r in conn.execute("SELECT scope, value, created_at FROM tombstones")
            ]
            out["purge_files"] = [
                list(r) for r in conn.execute("SELECT scope, value, kind, item FROM purge_files")
            ]
        finally:
            conn.close()
    except sqlite3.Error:
        pass
    return out


def delete_store_files(home: Path, between: Callable[[], None] | None = None) -> None:
    """Delete the store's data files (``STORE_FILES``), the Parquet archive and the
    vault, then ``store.id`` and ``integrity.ok``: what a wipe removes, idempotent.
    ``between``: called once ``store.db`` is gone (the wipe's kill point)."""
    home = Path(home)
    for name in STORE_FILES:
        with contextlib.suppress(FileNotFoundError):
            (home / name).unlink()
    if between is not None:
        between()
    shutil.rmtree(home / ARCHIVE_DIR, ignore_errors=True)
    shutil.rmtree(home / VAULT_DIR, ignore_errors=True)
    for name in (STORE_ID_FILE, INTEGRITY_STAMP, INTEGRITY_STAMP + ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            (home / name).unlink()
    fsync_dir(home)


def finish(home: Path) -> None:
    """Before a writable open of a marked home: complete the wipe (the files a kill
    left are deleted; none when it ran to its end)."""
    delete_store_files(home)


def adopt(conn: sqlite3.Connection, home: Path) -> int:
    """After the new store's schema: put the mark's tombstones and ``purge_files`` rows
    into it (``insert_kept``), then remove the mark. Returns the tombstones adopted."""
    n = insert_kept(conn, read(home))
    unmark(home)
    return n


def insert_kept(conn: sqlite3.Connection, kept: dict) -> int:
    """Insert a mark's ``kept`` rows (``read``) into the store on ``conn``, in one
    transaction (rows it holds already are left). Returns the tombstones given."""
    tombs = [tuple(r) for r in kept.get("tombstones") or [] if len(r) == 3]
    files = [tuple(r) for r in kept.get("purge_files") or [] if len(r) == 4]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("INSERT OR IGNORE INTO tombstones VALUES(?,?,?)", tombs)
        conn.executemany("INSERT OR IGNORE INTO purge_files VALUES(?,?,?,?)", files)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(tombs)


def unmark(home: Path) -> None:
    """Remove the mark (durably): the home holds a store again."""
    with contextlib.suppress(FileNotFoundError):
        (Path(home) / WIPE_MARK).unlink()
    fsync_dir(Path(home))


def watermark_paths(db: Path) -> list[str]:
    """The paths the watermarks of the store ``db`` name (``purge --all``'s "the next
    ingest reads again"), read on a read-only connection (``readonly.open_ro``: a hot
    journal rolled back first); ``[]`` when the store cannot be read."""
    from ctxkeep.errors import StoreError
    from ctxkeep.sinks.sqlite.readonly import open_ro

    try:
        conn = open_ro(Path(db))
        try:
            return [r[0] for r in conn.execute("SELECT path FROM watermarks")]
        finally:
            conn.close()
    except (sqlite3.Error, StoreError):
        return []

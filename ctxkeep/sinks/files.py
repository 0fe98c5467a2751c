"""The one registry of the file names in a ctxkeep home (``config.resolve_home``).

A home holds (names relative to it):

- ``store.db`` (``STORE_DB``): the SQLite store, the system of record, with SQLite's
  ``-wal`` and ``-shm`` sidecars (WAL mode) and, after a crash in rollback mode, a
  ``-journal`` (``STORE_DB_SIDECARS``);
- ``analytics.duckdb`` (``ANALYTICS_DB``): the DuckDB analytics store, derived from
  SQLite, with its ``.wal`` (``ANALYTICS_WAL``);
- ``archive/`` (``ARCHIVE_DIR``): the Parquet archive of retention
  (``agent=<agent>/month=<YYYY-MM>/part-*.parquet``);
- ``store.id`` (``STORE_ID_FILE``): the store's identity (``<store_id> <created UTC>``,
  as ``meta.store_id``), so that a lost or emptied ``store.db`` is known to have held a
  store (``sinks.sqlite.store_safety``);
- ``backups/`` (``BACKUPS_DIR``): consistent copies of ``store.db``
  (``store-<UTC>.db``, ``maintenance.backup``);
- ``ingest.lock`` (``LOCK_FILE``): the maintenance lock (``sinks.lock``);
- ``integrity.ok`` (``INTEGRITY_STAMP``): the identity of ``store.db`` and its WAL when
  ctxkeep last knew the store undamaged (``sinks.sqlite.store_safety.known_good``);
- ``config.toml`` (``CONFIG_FILE``, defined in ``ctxkeep.config``, optional);
- ``prefect/`` (``PREFECT_DIR``): Prefect's own home (``flows.prefect_env``);
- ``vault/`` (``VAULT_DIR``): the vault's pack files (``packs/<2 hex>/<SHA-256>.pack``)
  and its temporary files (``tmp/``), ``sinks.vault``; the manifest is in ``store.db``;
- ``prices.toml`` (``PRICES_FILE``, optional): the user's price overrides.

Named in their own modules, not here: the hooks' ``hook-queue.jsonl``,
``hook-worker.lock`` and ``hooks.log`` (``hooks.worker``) and the status line's cache
``statusline.json`` (``query.statusline``).

Nothing here opens a file on import: importing it costs nothing. ``fsync_dir`` is the
one directory fsync of ctxkeep's durable renames (the store's compaction, the vault's
packs, compress's rewrites, the hooks' settings writes).
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_DB = "store.db"
#: SQLite's files beside ``STORE_DB`` (WAL, shared memory, rollback journal)
STORE_DB_SIDECARS = (STORE_DB + "-wal", STORE_DB + "-shm", STORE_DB + "-journal")
ANALYTICS_DB = "analytics.duckdb"
ANALYTICS_WAL = ANALYTICS_DB + ".wal"
ARCHIVE_DIR = "archive"
STORE_ID_FILE = "store.id"
BACKUPS_DIR = "backups"
LOCK_FILE = "ingest.lock"
INTEGRITY_STAMP = "integrity.ok"
PREFECT_DIR = "prefect"
VAULT_DIR = "vault"
#: the user's price overrides (``transforms.cost.parse_prices_toml``), beside config.toml
PRICES_FILE = "prices.toml"

#: the store's data files (a whole-store wipe removes them, with ``ARCHIVE_DIR``);
#: ``CONFIG_FILE``, ``LOCK_FILE`` and ``PREFECT_DIR`` are not data and stay
STORE_FILES = (STORE_DB, *STORE_DB_SIDECARS, ANALYTICS_DB, ANALYTICS_WAL)

__all__ = [
    "ANALYTICS_DB",
    "ANALYTICS_WAL",
    "ARCHIVE_DIR",
    "BACKUPS_DIR",
    "CONFIG_FILE",  # noqa: F822 - served by __getattr__ (config imported on first read)
    "INTEGRITY_STAMP",
    "LOCK_FILE",
    "PREFECT_DIR",
    "PRICES_FILE",
    "STORE_DB",
    "STORE_DB_SIDECARS",
    "STORE_FILES",
    "STORE_ID_FILE",
    "VAULT_DIR",
    "store_files",
]


def __getattr__(name: str) -> str:
    """``CONFIG_FILE``: ``ctxkeep.config``'s, re-exported when first read, so that
    importing this registry does not import config (dataclasses, json, ``re``: ~10 ms of
    CPU that a first ingest paid before its reader started, ``pipeline.prestart``).
    Raises AttributeError for any other name."""
    if name == "CONFIG_FILE":
        from ctxkeep.config import CONFIG_FILE

        return CONFIG_FILE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def store_files(home: Path) -> dict[str, int]:
    """Sizes in bytes of the store's data files that exist under ``home``: ``{name:
    bytes}`` for each of ``STORE_FILES``, ``"archive/"`` for the whole Parquet archive
    (every file below ``ARCHIVE_DIR``) and ``"vault/"`` for the vault's packs (below
    ``VAULT_DIR``). Missing files are left out."""
    home = Path(home)
    out = {}
    for name in STORE_FILES:
        p = home / name
        if p.exists():
            out[name] = p.stat().st_size
    for d in (ARCHIVE_DIR, VAULT_DIR):
        if (home / d).is_dir():
            out[d + "/"] = sum(p.stat().st_size for p in (home / d).rglob("*") if p.is_file())
    return out


def fsync_dir(d: Path, *, strict: bool = False) -> None:
    """fsync the directory ``d``, so that a rename or a new file in it is durable.
    Without ``strict`` a directory that cannot be opened or synced is left as it is (a
    platform without directory fsync, e.g. Windows; the rename itself stands); with it
    (the store's compaction: its swap must be durable before the old file goes) the
    OSError is raised."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        if strict:
            raise
        return
    try:
        os.fsync(fd)
    except OSError:
        if strict:
            raise
    finally:
        os.close(fd)

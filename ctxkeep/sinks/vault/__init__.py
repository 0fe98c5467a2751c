"""The vault: every byte ingest reads from an agent's files, kept redacted,
deduplicated, zstd-compressed and content-addressed (SHA-256), verified on read, so
that a session outlives its agent's cleanup and every store can be derived again
(docs/design.md, "The vault").

- ``packs``: the objects on disk (``<home>/vault/packs``), written durably, read checked;
- ``capture``: redaction, chunking, packs before the commit, the manifest rows in it;
- ``manifest``: reading the manifest back (files, generations, a generation's bytes,
  verification, status figures).

``CTXKEEP_VAULT=0`` turns capture off (the benchmarks' "vault off"), as does
``[vault] enabled = false`` in the home's ``config.toml`` (``configured``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxkeep.sinks.vault.capture import (
    Capturer,
    PreparedGroup,
    record,
    redact_raw,
    redact_raw_and_texts,
    redact_raw_exact,
    redact_raw_many,
    redact_texts,
)
from ctxkeep.sinks.vault.packs import VaultDamaged, vault_dir

_suspended = [0]


def enabled() -> bool:
    """Whether ingest captures into the vault (``CTXKEEP_VAULT``, default on; off
    inside ``suspended``)."""
    return not _suspended[0] and os.environ.get("CTXKEEP_VAULT", "1") != "0"


@contextmanager
def suspended() -> Iterator[None]:
    """No capture in this block (``maintenance.reparse`` reads the vault's own bytes)."""
    _suspended[0] += 1
    try:
        yield
    finally:
        _suspended[0] -= 1


def home_of(conn) -> Path | None:
    """The ctxkeep home of a store connection (the folder of its ``main`` database
    file), or None for an in-memory database."""
    row = next((r for r in conn.execute("PRAGMA database_list").fetchall() if r[1] == "main"), None)
    if not row or not row[2]:
        return None
    return Path(row[2]).parent


def record_in(conn, g: PreparedGroup | None) -> None:
    """``record(conn, home_of(conn), g)``: the manifest rows of ``g`` in the store of
    ``conn``, which is a file (a prepared group comes from a ``capturer_for`` it).
    Raises ValueError for an in-memory store with a group to record."""
    if g is None:
        return
    home = home_of(conn)
    if home is None:
        raise ValueError("a vault group cannot be recorded in an in-memory store")
    record(conn, home, g)


def configured(home: Path) -> bool:
    """Whether ``<home>/config.toml`` leaves the vault on (``[vault] enabled``, default
    true; a config that does not load leaves it on: the vault loses nothing)."""
    from ctxkeep.config import load_config

    try:
        return load_config(home).vault.enabled
    except Exception:
        return True


def capturer_for(conn) -> Capturer | None:
    """A ``Capturer`` for the store of ``conn`` when the vault is on (``enabled`` and
    ``configured``) and the store is a file (None otherwise: nothing is captured)."""
    if not enabled():
        return None
    home = home_of(conn)
    if home is None or not configured(home):
        return None
    return Capturer(home, conn)


__all__ = [
    "Capturer",
    "PreparedGroup",
    "VaultDamaged",
    "capturer_for",
    "configured",
    "enabled",
    "home_of",
    "record",
    "record_in",
    "redact_raw",
    "redact_raw_and_texts",
    "redact_raw_exact",
    "redact_raw_many",
    "redact_texts",
    "suspended",
    "vault_dir",
]

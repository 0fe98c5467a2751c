"""This machine's identity in a team lake: a name and a stable id.

- **name**: ``machine = "…"`` in ``config.toml`` (checked by
  ``config.check_machine_name``), else the hostname (``socket.gethostname()``). It is
  the lake's first partition (``machine=<name>``) and the ``machine`` column of DuckDB
  ``usage`` and of every exported row.
- **id**: 32 hex digits (uuid4), created once per store (its first writable open)
  and kept in SQLite ``meta.machine_id``; exported rows carry it as ``machine_id`` and the lake's part
  files are named after it, so two stores that were given the same name are told apart
  (``maintenance.export`` refuses to overwrite another store's partitions).

A store moved to another machine keeps its id; rename it with ``machine =``.
"""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import NamedTuple

from ctxkeep.config import check_machine_name, load_config


class Machine(NamedTuple):
    """``name``: the partition value; ``id``: 32 hex digits (None for a store never
    opened writable since machine ids exist)."""

    name: str
    id: str | None


def machine_name(home: Path, *, check: bool = True) -> str:
    """The configured machine name of ``home`` (``config.toml`` ``machine``), else this
    host's name. ``check``: raise ConfigError when the hostname cannot name a lake
    partition (a configured name is checked when the config loads)."""
    configured = load_config(Path(home)).machine
    if configured:
        return configured
    host = socket.gethostname() or "localhost"
    return check_machine_name(host, "hostname (no machine = in config.toml)") if check else host


def machine_id(conn: sqlite3.Connection) -> str | None:
    """The store's machine id (``meta.machine_id``, created by every writable open:
    ``sinks.sqlite.migrations.ensure_identity``); None for a store not opened writable
    since machine ids exist."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'machine_id'").fetchone()
    return row[0] if row else None


def identify(home: Path, conn: sqlite3.Connection) -> Machine:
    """This store's ``Machine``: the checked name (ConfigError for a bad one) and the
    id."""
    return Machine(machine_name(home), machine_id(conn))


__all__ = ["Machine", "identify", "machine_id", "machine_name"]

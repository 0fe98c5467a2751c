"""A store as schema v8 kept its entries (one ``entries`` table with ``source_path``
and ``content_hash`` as text, and its three indexes), made from a current store: the
starting point of the v9 migration's tests and of the older stores' downgrades."""

from __future__ import annotations

import sqlite3

from ctxkeep.schema import STORED_COLUMNS, USAGE_COLUMNS
from tests.sinks.v9_store import as_v9

_INT = {"source_offset", "text_bytes", "token_estimate", "is_sidechain", *USAGE_COLUMNS}
#: the v8 DDL of ``entries`` (``ddl.py`` at schema v8)
V8_ENTRIES = (
    "CREATE TABLE entries(\n  rowid INTEGER PRIMARY KEY,\n  "
    + ", ".join(
        f"{c} {'INTEGER' if c in _INT else 'TEXT'}" + (" NOT NULL UNIQUE" if c == "entry_id" else "")
        for c in STORED_COLUMNS
    )
    + ",\n  ingested_at TEXT\n)"
)
V8_INDEXES = (
    "CREATE INDEX entries_session ON entries(session_id, ts)",
    "CREATE INDEX entries_content ON entries(content_hash, ts)",
    "CREATE INDEX entries_source ON entries(source_path, source_offset)",
)


def entries_as_v8(c: sqlite3.Connection) -> None:
    """Turn the v10 store of ``c`` into v9 (``v9_store.as_v9``), then its
    ``entry_rows`` / ``files`` / view into the v8 ``entries`` table with the same rows
    and rowids, and mark the store v8 (the caller commits)."""
    as_v9(c)
    cols = ", ".join(["rowid", *STORED_COLUMNS, "ingested_at"])
    c.execute(V8_ENTRIES.replace("CREATE TABLE entries(", "CREATE TABLE entries_v8(", 1))
    c.execute(f"INSERT INTO entries_v8({cols}) SELECT {cols} FROM entries")
    c.execute("DROP VIEW entries")
    c.execute("DROP TABLE entry_rows")
    c.execute("DROP TABLE files")
    c.execute("ALTER TABLE entries_v8 RENAME TO entries")
    for stmt in V8_INDEXES:
        c.execute(stmt)
    c.execute("UPDATE meta SET value='8' WHERE key='schema_version'")

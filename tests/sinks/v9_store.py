"""A store as schema v9 kept it (``entry_rows`` with ``project_dir`` and ``ingested_at``
as text, ``entries_session`` on (session_id, ts), the table ``chunks`` with every title
as text), made from a current store: the starting point of the v10 migration's tests
and of the older stores' downgrades (``v8_store``)."""

from __future__ import annotations

import sqlite3

from ctxkeep.schema import STORED_COLUMNS
from ctxkeep.sinks.sqlite import ddl

#: the columns of the v9 ``entry_rows``: today's, with these two as text again
_AS_TEXT = {"project_id": "project_dir", "ingest_id": "ingested_at"}
_V9_COLUMNS = [_AS_TEXT.get(c, c) for c in ddl.ENTRY_ROW_COLUMNS]
_V9_VIEW_EXPR = {
    "source_path": "(SELECT path FROM files WHERE file_id = e.file_id)",
    "content_hash": "(SELECT content_hash FROM contents WHERE content_id = e.content_id)",
}
#: the v9 DDL (``ddl.py`` at schema v9): the view without its triggers, which no
#: migration step reads
V9_DDL = (
    "CREATE TABLE chunks(chunk_id INTEGER PRIMARY KEY, content_id INTEGER NOT NULL, seq INTEGER NOT NULL, "
    "title TEXT NOT NULL DEFAULT '', text TEXT NOT NULL, facets TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX chunks_content ON chunks(content_id, seq)",
    "CREATE INDEX entries_session ON entry_rows(session_id, ts)",
    "CREATE INDEX entries_content ON entry_rows(content_id, ts)",
    "CREATE INDEX entries_source ON entry_rows(file_id, source_offset)",
    "CREATE VIEW entries AS SELECT e.rowid AS rowid, "
    + ", ".join(f"{_V9_VIEW_EXPR.get(c, 'e.' + c)} AS {c}" for c in [*STORED_COLUMNS, "ingested_at"])
    + " FROM entry_rows e",
)


def as_v9(c: sqlite3.Connection) -> None:
    """Turn the v10 ``entry_rows`` / ``projects`` / ``ingests`` / ``chunk_rows`` and
    views of ``c`` into the v9 tables with the same rows and rowids, and mark the store
    v9 (the caller commits)."""
    decl = {r[1]: r[2] for r in c.execute("PRAGMA table_info(entry_rows)")}
    c.execute("DROP VIEW entries")  # and its triggers
    c.execute(
        "CREATE TABLE entry_rows_v9(rowid INTEGER PRIMARY KEY, "
        + ", ".join(
            f"{v9} {'TEXT' if v9 != col else decl[col]}" + (" NOT NULL UNIQUE" if col == "entry_id" else "")
            for col, v9 in zip(ddl.ENTRY_ROW_COLUMNS, _V9_COLUMNS, strict=True)
        )
        + ")"
    )
    src = {
        "project_dir": "(SELECT project_dir FROM projects WHERE project_id = e.project_id)",
        "ingested_at": "(SELECT ingested_at FROM ingests WHERE ingest_id = e.ingest_id)",
    }
    c.execute(
        f"INSERT INTO entry_rows_v9(rowid, {', '.join(_V9_COLUMNS)}) SELECT e.rowid, "
        + ", ".join(src.get(col, f"e.{col}") for col in _V9_COLUMNS)
        + " FROM entry_rows e ORDER BY e.rowid"
    )
    c.execute("DROP TABLE entry_rows")
    c.execute("ALTER TABLE entry_rows_v9 RENAME TO entry_rows")
    c.execute("ALTER TABLE chunk_rows RENAME TO chunk_rows_v10")
    c.execute("DROP VIEW chunks")
    c.execute(V9_DDL[0])
    c.execute(
        "INSERT INTO chunks SELECT chunk_id, content_id, seq, "
        f"{ddl.TITLE_OF_ROW}, text, facets FROM chunk_rows_v10 ORDER BY chunk_id"
    )
    c.execute("DROP TABLE chunk_rows_v10")
    for stmt in V9_DDL[1:]:
        c.execute(stmt)
    c.execute("DROP TABLE projects")
    c.execute("DROP TABLE ingests")
    c.execute("UPDATE meta SET value='9' WHERE key='schema_version'")

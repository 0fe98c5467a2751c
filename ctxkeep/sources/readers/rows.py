"""An agent database's rows as the vault keeps them: one document per session
(issue 27, "agent databases: the rows read, per table and key, as they were").

The document is canonical JSONL, readable as it is (``vault restore --to DIR`` writes
it out):

- a header line ``{"ctxkeep_rows": 1, "agent", "db": <the database's path>,
  "session": <session id>, "tables": {<table>: <its statement from
  sqlite_master>}}``;
- one line per row, ``{"row": {<column>: <value>}, "rowid": <SQLite rowid, or null
  for a WITHOUT ROWID table>, "t": <table>}``, tables in the source's order, rows by
  rowid; a BLOB value is ``{"$blob": <base64>}``.

Keys are sorted (orjson ``OPT_SORT_KEYS``), so the same rows give the same bytes and
the same SHA-256. It cannot be the agent's database byte for byte (pages, free lists,
indexes and other sessions' rows are not kept): ``rebuild`` makes a database with the
same tables (their original statements), rowids and values, which is what the
agent's source reads (``maintenance.reparse``).

Which rows belong to a session is the source's declaration (``VaultTables``: a table
and the SQL expression of a row's session id, e.g. ``("message", "session_id")``);
rows whose expression is NULL are not kept. Each document is redacted line by line by
the vault's capture before a byte is written (``sinks.vault.capture``), so a value
holding a secret keeps its row as JSON.
"""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import orjson

#: ``((table, SQL expression of a row's session id[, SQL expression of its update
#: time]), …)``: what a database source's rows are, per session, for the vault. With an
#: update time (a column the agent sets on every write of the row, e.g. Crush's
#: ``updated_at`` trigger) a session's change is told from aggregates (rows, largest
#: rowid, newest update: ``readers.sqlite``), without reading its rows
VaultTables = tuple[tuple[str, ...], ...]

#: lines at the end of each section of a version whose lengths the vault keeps
#: (``sinks.vault.rows_capture``): a next version may rewrite at most these of the lines
#: held, else its reader sends the section whole
TAIL_LINES = 256

#: the first bytes of every rows document
MARK = b'{"agent":'
#: what separates the database's path from the session id in a document's vault path
SEP = "#session="


def vault_path(db: str, session: str) -> str:
    """The path the vault files a session's rows under: ``<db>#session=<id>``."""
    return f"{db}{SEP}{session}"


def _default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return {"$blob": base64.b64encode(bytes(o)).decode("ascii")}
    raise TypeError(f"not JSON: {type(o).__name__}")


def row_line(table: str, rowid: int | None, cols: list[str], vals: tuple) -> bytes:
    row = dict(zip(cols, vals, strict=True))
    return orjson.dumps(
        {"t": table, "rowid": rowid, "row": row}, default=_default, option=orjson.OPT_SORT_KEYS
    )


def document(agent: str, db: str, session: str, schema: dict[str, str], lines: list[bytes]) -> bytes:
    """The rows document of a session (see the module doc): its header, then ``lines``
    (``row_line``), each ended by a newline."""
    head = {"ctxkeep_rows": 1, "agent": agent, "db": db, "session": session, "tables": schema}
    return b"\n".join([orjson.dumps(head, option=orjson.OPT_SORT_KEYS), *lines]) + b"\n"


def parse(doc: bytes) -> tuple[dict, list[tuple[str, int | None, dict]]]:
    """The header and the ``(table, rowid, row)`` of a rows document. Raises ValueError
    when ``doc`` is not one (orjson's ``JSONDecodeError`` included)."""
    lines = doc.splitlines()
    if not lines or not lines[0].startswith(MARK):
        raise ValueError("not a ctxkeep rows document")
    head = orjson.loads(lines[0])
    if not isinstance(head, dict) or head.get("ctxkeep_rows") != 1:
        raise ValueError("not a ctxkeep rows document")
    rows = []
    for ln in lines[1:]:
        if ln.strip():
            r = orjson.loads(ln)
            rows.append((r["t"], r["rowid"], r["row"]))
    return head, rows


def _value(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"$blob"}:
        return base64.b64decode(v["$blob"])
    if isinstance(v, (dict, list)):  # (never made by ``_line``: a redaction cannot make one)
        return orjson.dumps(v).decode()
    return v


def rebuild(docs: list[bytes], dest: Path) -> int:
    """A SQLite database at ``dest`` holding the rows of ``docs`` (rows documents of one
    database, oldest first: a row a later document holds again, by table and rowid,
    replaces the earlier one) in tables made by their original statements.
    Returns the rows written. Raises ValueError (a document that is not one),
    ``sqlite3.Error``."""
    parsed = [parse(d) for d in docs]
    conn = sqlite3.connect(dest, isolation_level=None)
    try:
        conn.execute("BEGIN")
        made: set[str] = set()
        n = 0
        for head, rows in parsed:
            for table, sql in head.get("tables", {}).items():
                if table not in made:
                    conn.execute(sql)  # (a new file: each table is made once)
                    made.add(table)
            for table, rowid, row in rows:
                cols = list(row)
                names = ", ".join(f'"{c}"' for c in cols)
                vals = [_value(row[c]) for c in cols]
                if rowid is None:
                    conn.execute(
                        f'INSERT OR REPLACE INTO "{table}"({names}) VALUES({",".join("?" * len(cols))})', vals
                    )
                else:
                    conn.execute(
                        f'INSERT OR REPLACE INTO "{table}"(rowid, {names}) VALUES(?, {",".join("?" * len(cols))})',
                        [rowid, *vals],
                    )
                n += 1
        conn.execute("COMMIT")
    finally:
        conn.close()
    return n


__all__ = [
    "MARK",
    "SEP",
    "TAIL_LINES",
    "VaultTables",
    "document",
    "parse",
    "rebuild",
    "row_line",
    "vault_path",
]

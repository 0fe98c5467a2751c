"""Status and location changes of stored entries: one function, ``apply_changes``.

An entry's ``status`` is ``active``, ``archived`` (its line was cut from the session
file by compress; it stays stored and searchable) or ``consumed`` (a source said so,
``Batch.status_changes``). A compress also moves kept lines, so their entries get a new
``source_offset`` (``Relocation``); a restore marks entries ``active`` again.

SQLite is the system of record: every status change is appended to ``status_log``
(entry_id, status, changed_at UTC), which the DuckDB sync replays. Given ``home``, the
same changes are then applied to DuckDB's ``entries`` (``sinks.duckdb``): a DuckDB file
held by another process is reported (``Applied.note``), not fatal — ``reindex``
rebuilds it from SQLite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.sinks.files import ANALYTICS_DB
from ctxkeep.sinks.sqlite.connection import write
from ctxkeep.sinks.sqlite.params import in_parts
from ctxkeep.timeutil import now_iso


@dataclass(frozen=True)
class StatusChange:
    """Set ``status`` of the stored entries ``entry_ids``, or of the entries of
    ``agent``'s session ``session_id`` whose ``message_id`` is in ``message_ids``
    (the form sources give, ``sources.contract.Batch.status_changes``). With
    ``from_status``, only entries that have that status change."""

    status: str
    entry_ids: tuple[str, ...] = ()
    agent: str | None = None
    session_id: str | None = None
    message_ids: tuple[str, ...] = ()
    from_status: str | None = None

    @classmethod
    def of(cls, change: StatusChange | dict) -> StatusChange:
        """A ``StatusChange`` from a source's dict ``{"agent", "session_id",
        "message_ids": [str], "status"}`` or ``{"entry_ids": [str], "status"}``
        (returned as is when it already is one). Empty ids are dropped."""
        if isinstance(change, StatusChange):
            return change
        return cls(
            status=change["status"],
            entry_ids=tuple(i for i in change.get("entry_ids") or () if i),
            agent=change.get("agent"),
            session_id=change.get("session_id"),
            message_ids=tuple(m for m in change.get("message_ids") or () if m),
            from_status=change.get("from_status"),
        )


@dataclass(frozen=True)
class Relocation:
    """New byte offsets of entries of one rewritten file: ``moves`` are
    ``(entry_id, source_offset in bytes)``."""

    source_path: str
    moves: tuple[tuple[str, int], ...]


@dataclass
class EntryChanges:
    """Changes to apply in order: ``status`` (``StatusChange``) then ``moves``
    (``Relocation``). Compress collects them per file and replays them on DuckDB once
    per run."""

    status: list[StatusChange] = field(default_factory=list)
    moves: list[Relocation] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.status or self.moves)

    def extend(self, other: EntryChanges) -> None:
        """Append ``other``'s changes after these."""
        self.status += other.status
        self.moves += other.moves


@dataclass(frozen=True)
class Applied:
    """What ``apply_changes`` changed: ``sqlite`` rows (status changes and offsets),
    ``duckdb`` rows (None: DuckDB not updated, see ``note``; 0 without ``home``) and
    ``note``: ``ok``, ``no analytics store`` or why DuckDB was not updated."""

    sqlite: int
    duckdb: int | None
    note: str


def apply_changes(
    conn: sqlite3.Connection | None,
    changes: EntryChanges | Iterable[StatusChange | dict],
    *,
    home: Path | None = None,
    stamp: str | None = None,
) -> Applied:
    """Apply entry changes to SQLite (``conn``), then, given ``home``, to DuckDB.

    Args:
        conn: the SQLite store; the changes run in the caller's transaction when one is
            open (``load_batch``), else in their own (``write``). None: SQLite already
            has them (compress's replay on DuckDB once per run).
        changes: an ``EntryChanges``, or status changes alone (``StatusChange`` or a
            source's dicts, ``StatusChange.of``). Later changes win.
        home: the ctxkeep home whose ``analytics.duckdb`` gets the same changes
            (status changes by message id reach DuckDB through the sync's replay of
            ``status_log`` instead).
        stamp: ``status_log.changed_at`` (ISO-8601 UTC; default now).

    Returns ``Applied``. Raises StoreBusy when another writer holds SQLite.
    """
    if not isinstance(changes, EntryChanges):
        changes = EntryChanges(status=[StatusChange.of(c) for c in changes])
    n = 0
    if conn is not None:
        if conn.in_transaction:
            n = _apply_sqlite(conn, changes, stamp or now_iso())
        else:
            with write(conn):
                n = _apply_sqlite(conn, changes, stamp or now_iso())
    if home is None:
        return Applied(n, 0, "ok")
    duck, note = _apply_duckdb(Path(home), changes)
    return Applied(n, duck, note)


def _apply_sqlite(conn: sqlite3.Connection, changes: EntryChanges, stamp: str) -> int:
    n = 0
    for ch in changes.status:
        by_entry = not ch.message_ids
        keys = list(dict.fromkeys(ch.entry_ids if by_entry else ch.message_ids))
        cond = "status = ?" if ch.from_status else "status <> ?"
        for part in in_parts(keys, 900):
            marks = ",".join("?" * len(part))
            if by_entry:
                q = f"SELECT entry_id FROM entry_rows WHERE {cond} AND entry_id IN ({marks})"
                args = [ch.from_status or ch.status, *part]
            else:
                q = (
                    f"SELECT entry_id FROM entry_rows WHERE agent=? AND session_id=? AND {cond} "
                    f"AND message_id IN ({marks})"
                )
                args = [ch.agent, ch.session_id, ch.from_status or ch.status, *part]
            ids = [r[0] for r in conn.execute(q, args)]
            if not ids:
                continue
            conn.executemany("UPDATE entry_rows SET status=? WHERE entry_id=?", [(ch.status, i) for i in ids])
            conn.executemany(
                "INSERT INTO status_log(entry_id, status, changed_at) VALUES(?,?,?)",
                [(i, ch.status, stamp) for i in ids],
            )
            n += len(ids)
    for rel in changes.moves:
        row = conn.execute("SELECT file_id FROM files WHERE path = ?", (rel.source_path,)).fetchone()
        if row is None:  # no entry of that file is stored
            continue
        for eid, off in rel.moves:
            cur = conn.execute(
                "UPDATE entry_rows SET source_offset = ? WHERE entry_id = ? AND "
                "file_id = ? AND source_offset IS NOT ?",
                (off, eid, row[0], off),
            )
            n += cur.rowcount
    return n


def _apply_duckdb(home: Path, changes: EntryChanges) -> tuple[int | None, str]:
    """Replay ``changes`` on DuckDB ``entries`` (rows ``sinks.duckdb.sync`` already
    holds). Returns (rows changed or None, note)."""
    if not changes:
        return 0, "ok"
    if not (home / ANALYTICS_DB).exists():
        return None, "no analytics store"
    import pyarrow as pa

    from ctxkeep.sinks import duckdb as duckdb_store

    try:
        con = duckdb_store.connect(home)
    except Exception as e:
        return None, f"analytics store not updated ({type(e).__name__}); run reindex"
    n = 0
    try:
        con.execute("BEGIN")
        for ch in changes.status:
            if not ch.entry_ids:
                continue
            con.register("_ids", pa.table({"entry_id": pa.array(list(set(ch.entry_ids)), pa.string())}))
            cond = "entries.status = ?" if ch.from_status else "entries.status != ?"
            rows = con.execute(
                f"UPDATE entries SET status = ? FROM _ids WHERE entries.entry_id = _ids.entry_id AND {cond}",
                [ch.status, ch.from_status or ch.status],
            ).fetchall()
            n += rows[0][0] if rows else 0
            duckdb_store.resum_session_parts(con, "_ids")  # a rewound entry leaves the session list
            con.unregister("_ids")
        for rel in changes.moves:
            con.register(
                "_mv",
                pa.table(
                    {
                        "entry_id": pa.array([m[0] for m in rel.moves], pa.string()),
                        "off": pa.array([m[1] for m in rel.moves], pa.int64()),
                    }
                ),
            )
            rows = con.execute(
                "UPDATE entries SET source_offset = _mv.off FROM _mv WHERE "
                "entries.entry_id = _mv.entry_id AND entries.source_path = ?",
                [rel.source_path],
            ).fetchall()
            n += rows[0][0] if rows else 0
            con.unregister("_mv")
        con.execute("COMMIT")
        return n, "ok"
    finally:
        con.close()

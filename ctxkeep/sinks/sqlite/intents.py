"""Operation intents: a durable note, in SQLite, of an operation that changes several
stores (SQLite, DuckDB, the Parquet archive, an agent's session file).

An operation writes its intent (``begin``) before it changes a second store, in the
same SQLite transaction as its own SQLite change when it has one (purge: the delete and
the intent commit together), moves it on (``advance``) and deletes it (``finish``) when
every store holds the result. A process killed in between leaves the row: the next
command that opens the store writable (ingest, purge, retention, compress, reindex,
doctor --repair) completes the operation from what the row says (``sinks.recovery``).

Table ``intents`` (schema v7, ``ddl.TABLES``): ``intent_id`` (INTEGER, order of
recovery), ``op`` (``purge``, ``retention``, ``compress``, ``compress-file``, ``scrub-file``,
``reindex``), ``step`` (the last step reached, op-specific), ``payload`` (JSON: what
recovery needs), ``owner`` (``<pid>:<token>`` of the process that wrote it),
``run_id`` (its ``runs`` row, or NULL), ``created_at`` / ``updated_at`` (ISO-8601 UTC).

``owner`` lets recovery skip the intents of the process itself (an operation that runs
another one under the same reentrant store lock); every other writer of intents holds
the store lock (``sinks.lock``) while its intent is open, so an intent that another
process wrote and a lock holder finds belongs to a dead process.

``kill_point(op, step)``: with ``CTXKEEP_KILL_AT=<op>:<step>[:<n>]`` in the environment
the process SIGKILLs itself the ``n``-th time (default 1st) it reaches that point: the
crash-consistency tests kill at exact steps with it (and at random times without it).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import uuid
from contextlib import nullcontext
from dataclasses import dataclass

from ctxkeep.sinks.sqlite.connection import write
from ctxkeep.timeutil import now_iso

KILL_ENV = "CTXKEEP_KILL_AT"

_tokens: dict[int, str] = {}
_kill_counts: dict[str, int] = {}


def owner() -> str:
    """This process's owner tag, ``<pid>:<random token>`` (a new token after a fork)."""
    pid = os.getpid()
    tok = _tokens.get(pid)
    if tok is None:
        tok = _tokens[pid] = uuid.uuid4().hex[:12]
    return f"{pid}:{tok}"


@dataclass
class Intent:
    """One row of ``intents`` (columns in the module doc); ``payload`` decoded."""

    intent_id: int
    op: str
    step: str
    payload: dict
    owner: str
    run_id: int | None
    created_at: str

    @property
    def mine(self) -> bool:
        """True when this process wrote it (it is still in flight here)."""
        return self.owner == owner()


def _tx(conn: sqlite3.Connection):
    """The caller's open transaction, or a new write transaction."""

    return nullcontext(conn) if conn.in_transaction else write(conn)


def begin(
    conn: sqlite3.Connection, op: str, payload: dict, *, step: str = "started", run_id: int | None = None
) -> int:
    """Record an intent of ``op`` (in the caller's transaction when one is open, else in
    its own) and return its ``intent_id``. ``payload`` must be JSON-serializable."""
    now = now_iso()
    with _tx(conn):
        cur = conn.execute(
            "INSERT INTO intents(op, step, payload, owner, run_id, created_at, updated_at) "
            "VALUES(?,?,?,?,?,?,?)",
            (op, step, json.dumps(payload, default=str), owner(), run_id, now, now),
        )
    return _rowid(cur)


def advance(conn: sqlite3.Connection, intent_id: int, step: str, payload: dict | None = None) -> None:
    """Set the intent's ``step`` (and replace its ``payload`` when given), in the
    caller's transaction when one is open, else in its own."""
    with _tx(conn):
        if payload is None:
            conn.execute(
                "UPDATE intents SET step=?, updated_at=? WHERE intent_id=?", (step, now_iso(), intent_id)
            )
        else:
            conn.execute(
                "UPDATE intents SET step=?, payload=?, updated_at=? WHERE intent_id=?",
                (step, json.dumps(payload, default=str), now_iso(), intent_id),
            )


def finish(conn: sqlite3.Connection, *intent_ids: int) -> None:
    """Delete the intents: their operation is complete in every store."""
    if not intent_ids:
        return
    with _tx(conn):
        conn.executemany("DELETE FROM intents WHERE intent_id=?", [(i,) for i in intent_ids])


def get(conn: sqlite3.Connection, intent_id: int) -> Intent | None:
    """The intent ``intent_id``, or None when it is finished."""
    rows = _select(conn, "WHERE intent_id=?", (intent_id,))
    return rows[0] if rows else None


def pending(conn: sqlite3.Connection, op: str | None = None) -> list[Intent]:
    """Open intents (of ``op``, or all), oldest first. An empty list for a store
    without the table (older than schema v7, opened read-only)."""
    try:
        return _select(conn, "WHERE op=?" if op else "", (op,) if op else ())
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return []
        raise


def _select(conn: sqlite3.Connection, where: str, args: tuple) -> list[Intent]:
    rows = conn.execute(
        f"SELECT intent_id, op, step, payload, owner, run_id, created_at FROM intents {where} "
        "ORDER BY intent_id",
        args,
    ).fetchall()
    return [Intent(i, op, st, json.loads(p or "{}"), o or "", r, c) for i, op, st, p, o, r, c in rows]


def kill_point(op: str, step: str) -> None:
    """SIGKILL this process here when ``CTXKEEP_KILL_AT`` names ``<op>:<step>`` (and
    this is the ``n``-th time the point is reached, ``<op>:<step>:<n>``). A no-op
    otherwise (one environment lookup)."""
    want = os.environ.get(KILL_ENV)
    if not want:
        return
    parts = want.split(":")
    if parts[:2] != [op, step]:
        return
    key = f"{op}:{step}"
    _kill_counts[key] = _kill_counts.get(key, 0) + 1
    if _kill_counts[key] >= (int(parts[2]) if len(parts) > 2 and parts[2] else 1):
        os.kill(os.getpid(), signal.SIGKILL)


def _rowid(cur: sqlite3.Cursor) -> int:
    """The rowid an INSERT just wrote (``lastrowid`` is None only for other statements)."""
    if cur.lastrowid is None:
        raise sqlite3.OperationalError("the INSERT wrote no row")
    return cur.lastrowid

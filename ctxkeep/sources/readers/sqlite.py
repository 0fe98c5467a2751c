"""Reading other agents' SQLite databases without getting in their way.

Rules (DESIGN.md, measured facts; SQLite 3.40 docs on URI filenames and WAL):

- open read-only with a ``file:…?mode=ro`` URI, never ``immutable`` for a live
  database (an immutable reader ignores the ``-wal`` and can see torn data while the
  agent writes);
- a ``mode=ro`` open of a WAL database must create/map the ``-shm`` beside it; in a
  folder we may not write (a read-only mount, the test corpus) that fails with
  "attempt to write a readonly database" / "unable to open database file": then,
  and only then, fall back to ``immutable=1`` and say so (``RoConn.note``);
- short read transactions, one per page of rows, and the connection is closed after
  every page, so the agent's writer is never blocked and its checkpoints can run;
- ``PRAGMA query_only`` as a second guard against ever writing.

Change detection is a per-file fingerprint of the main file *and* its ``-wal``
(``db_fingerprint``): a database whose ``-wal`` grew is not unchanged although the
main file's size and mtime did not move.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    RawCapture,
    SourceFile,
    Watermark,
    quarantine_row,
)
from ctxkeep.sources.coverage import Tally

if TYPE_CHECKING:
    from ctxkeep.sources.readers.rows import VaultTables

#: rows per read transaction (each page opens, reads and closes the database)
PAGE_ROWS = 500
#: how long a read waits for a lock (ms); readers of a WAL database rarely wait at all
BUSY_MS = 2000


@dataclass
class RoConn:
    """An open read-only connection: ``immutable`` tells whether the fallback was
    needed; ``note`` says why (for ``ctxkeep sources`` and the run log)."""

    conn: sqlite3.Connection
    immutable: bool
    note: str | None = None


def _uri(path: Path, immutable: bool) -> str:
    q = "mode=ro" + ("&immutable=1" if immutable else "")
    return f"file:{urllib.parse.quote(str(path))}?{q}"


def open_ro(path: Path) -> RoConn:
    """Open ``path`` read-only (see the module doc for the immutable fallback).

    Returns a RoConn whose connection is in autocommit mode with ``query_only`` on.
    Raises ``sqlite3.DatabaseError`` when the file is not a readable SQLite database
    (the caller counts it and goes on).
    """
    last: Exception | None = None
    modes: tuple[bool, ...] = (False, True)
    if read_only_by_mode(path):
        # nobody can be writing it; and even root must not create a -shm there
        modes = (True,)
        last = PermissionError("no write permission bits")
    for immutable in modes:
        conn = sqlite3.connect(
            _uri(path, immutable),
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_MS / 1000,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
            conn.execute("PRAGMA query_only=1")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as e:
            conn.close()
            last = e
            msg = str(e)
            if not immutable and ("readonly" in msg or "unable to open" in msg):
                continue  # a read-only folder: the -shm cannot be created
            raise
        except sqlite3.DatabaseError:
            conn.close()
            raise
        note = None
        if immutable:
            why = "no write permission" if isinstance(last, PermissionError) else str(last)
            note = (
                # no parentheses: `sources` puts the note in its own (newuser16 F16)
                f"read-only database or folder, {why}: opened with immutable=1, "
                "which does not see a -wal the agent has not checkpointed"
            )
        return RoConn(conn, immutable, note)
    assert last is not None  # the loop always returns or raises
    raise last  # pragma: no cover


def read_only_by_mode(path: Path) -> bool:
    """True when the database file or its folder has no write permission bit at all
    (a read-only copy, an archive, the test corpus). Checked before opening because
    ``os.access`` lies for root, who could otherwise create a ``-shm`` there."""
    try:
        return not (path.stat().st_mode & 0o222) or not (path.parent.stat().st_mode & 0o222)
    except OSError:
        return False


def read_pages(
    path: Path, sql: str, params_fn, key_fn, start: Any, page_rows: int = PAGE_ROWS
) -> Iterator[tuple[list[tuple], tuple, RoConn | None]]:
    """Keyset-paginate a query, one short read transaction (and connection) per page.

    Args: ``sql`` selects rows ordered by the key and ends with ``LIMIT ?``;
    ``params_fn(key)`` returns the query parameters (without the limit) for rows after
    ``key``; ``key_fn(row)`` the key of a row; ``start`` the key to start after.
    Yields ``(rows, last_key, ro)`` per page until a short page.
    """
    key = start
    while True:
        ro = open_ro(path)
        try:
            ro.conn.execute("BEGIN")
            rows = ro.conn.execute(sql, (*params_fn(key), page_rows)).fetchall()
            ro.conn.execute("COMMIT")
        finally:
            ro.conn.close()
        if rows:
            key = key_fn(rows[-1])
        yield rows, key, ro
        if len(rows) < page_rows:
            return


def changed_rows(
    path: Path, select: str, rowid: str, ts: str, mark: dict, page_rows: int = PAGE_ROWS
) -> Iterator[list[tuple]]:
    """Pages of rows inserted or updated since ``mark``, with a per-row high-water mark
    that needs no index on the agent's timestamp column.

    ``mark`` is ``{"rowid": the largest rowid read, "ts": the largest update time
    read}`` (empty: read everything). Two keyset passes on the rowid (the table's
    primary key, so each page is a range scan, not a sort of the table):

    1. rows at or below ``mark["rowid"]`` whose ``ts`` is ``>= mark["ts"]`` (rewritten
       since: a message that was still streaming, a renamed session; rows updated at
       exactly ``mark["ts"]`` are read again and dedup downstream);
    2. rows above ``mark["rowid"]`` (new), whatever their timestamp, so a row written
       with a clock that went backwards is still read.

    ``select`` is ``SELECT <rowid expr>, … FROM …`` with the rowid first; ``rowid`` and
    ``ts`` are the SQL expressions of the rowid and the update time. Each page is one
    short read transaction on a fresh connection (``read_pages``).
    """
    old_max = mark.get("rowid") or 0
    if old_max and mark.get("ts") is not None:
        sql = f"{select} WHERE {rowid} > ? AND {rowid} <= ? AND {ts} >= ? ORDER BY {rowid} LIMIT ?"
        for rows, _, _ in read_pages(
            path, sql, lambda k: (k, old_max, mark["ts"]), lambda r: r[0], 0, page_rows
        ):
            yield rows
    sql = f"{select} WHERE {rowid} > ? ORDER BY {rowid} LIMIT ?"
    for rows, _, _ in read_pages(path, sql, lambda k: (k,), lambda r: r[0], old_max, page_rows):
        yield rows


def advance_mark(mark: dict, rowid: int, ts) -> dict:
    """``mark`` moved past a row read (largest rowid and update time)."""
    out = dict(mark)
    if rowid is not None and rowid > (out.get("rowid") or 0):
        out["rowid"] = rowid
    if ts is not None:
        cur = out.get("ts")
        try:
            if cur is None or ts > cur:
                out["ts"] = ts
        except TypeError:  # mixed types in a loosely typed column: keep the newer kind
            out["ts"] = ts
    return out


def db_fingerprint(path: Path) -> dict[str, Any]:
    """Stat facts that change whenever the database may hold new rows: the main
    file's (dev, ino, size, mtime_ns) and the ``-wal``'s (size, mtime_ns) or None."""
    st = path.stat()
    try:
        w = Path(str(path) + "-wal").stat()
        wal = [w.st_size, w.st_mtime_ns]
    except OSError:
        wal = None
    return {"main": [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns], "wal": wal}


def db_unchanged(path: Path, wm: Watermark | None, parser_version: int) -> bool:
    """True when neither the database nor its ``-wal`` changed since ``wm`` was taken
    (the optional ``unchanged`` hook of SQLite sources)."""
    if wm is None or wm.parser_version != parser_version:
        return False
    try:
        fp = db_fingerprint(path)
    except OSError:
        return False
    return wm.state.get("fp") == fp


def db_watermark(path: Path, agent: str, parser_version: int, state: dict, fp: dict) -> Watermark:
    """A watermark for a database: the stat facts of the main file at the time the
    read started (``fp``), ``offset`` 0 (rows, not bytes, are tracked: see
    ``state["hw"]``), the fingerprint in ``state["fp"]``."""
    dev, ino, size, mtime = fp["main"]
    return Watermark(
        path=str(path),
        agent=agent,
        dev=dev,
        ino=ino,
        size=size,
        mtime_ns=mtime,
        offset=0,
        head_len=0,
        head_hash="",
        parser_version=parser_version,
        state=dict(state, fp=fp),
    )


def settle_fingerprint(before: dict, after: dict) -> dict:
    """The fingerprint to store after a read: ``after`` when nothing but our own
    open changed the files (an empty ``-wal`` that appeared), else ``before``, so a
    write that raced with the read makes the next plan read the database again."""
    if after["main"] == before["main"]:
        if after["wal"] == before["wal"]:
            return after
        if before["wal"] is None and after["wal"] is not None and after["wal"][0] == 0:
            return after
    return before


def guarded(path: Path, batches: Iterator) -> Iterator:
    """Run a database reader so that a database error (locked past the busy timeout,
    a table the agent dropped, a file replaced mid-read) never stops the ingest: the
    batches read so far stand, then one batch records the error in the quarantine
    (offset 0) without a watermark, so the next run tries again."""
    try:
        yield from batches
    except (sqlite3.Error, OSError) as e:
        yield Batch(
            [], [quarantine_row(path, 0, b"", f"database read failed: {type(e).__name__}: {e}")], None
        )


def parse_row(
    quarantine: list[dict],
    path: Path,
    rowid: int,
    raw: Any,
    what: str,
    parse: Callable[..., Any],
    *args: Any,
    default: Any = (),
) -> Any:
    """``parse(*args)`` of one database row (its entries); when it raises (a row of a
    shape the parser does not know: another agent version, a damaged value), the row is
    quarantined (``"<what>: parser error: <type>: <message>"`` at offset ``rowid``, with
    its raw value) and ``default`` is returned, so the read goes on with the next row:
    one bad row never stops the database's other rows."""
    try:
        return parse(*args)
    except Exception as e:
        data = raw if isinstance(raw, bytes) else ("" if raw is None else str(raw)).encode("utf-8", "replace")
        quarantine.append(quarantine_row(path, rowid, data, f"{what}: parser error: {type(e).__name__}: {e}"))
        return default


# ---------------------------------------------------------------- one reader for every database source


@dataclass
class DbRead:
    """A read of one agent database under way: ``before`` is its fingerprint when the
    read started (``db_fingerprint``); ``state`` the watermark state carried over (empty
    when the parser version changed or the file was replaced: another dev/inode),
    with ``note`` set when the database had to be opened ``immutable``; ``meta`` the
    file's ``SourceFile.meta`` (what its discovery, or the vault for a reparse, knows
    beside the database: Windsurf's project)."""

    path: Path
    agent: str
    parser_version: int
    before: dict
    state: dict
    meta: dict = field(default_factory=dict)

    def watermark(self, state: dict, fp: dict) -> Watermark:
        """``db_watermark`` of this database with ``state`` and fingerprint ``fp``."""
        return db_watermark(self.path, self.agent, self.parser_version, state, fp)

    def settled(self) -> dict:
        """The fingerprint to store now that the rows were read (``settle_fingerprint``)."""
        return settle_fingerprint(self.before, db_fingerprint(self.path))


#: ``probe(conn)``: what a database reader needs to know before it pages through rows
#: (sessions, table maxima, columns), read in one short transaction
ProbeFn = Callable[[sqlite3.Connection], Any]
#: ``rows(read, probed)``: the batches of new and changed rows
RowsFn = Callable[[DbRead, Any], Iterator[Batch]]
ReadFn = Callable[..., Iterator[Batch]]


def database_reader(
    agent: str,
    parser_version: int,
    probe: ProbeFn,
    rows: RowsFn,
    failure: str = "cannot read database",
    *,
    probe_errors: bool = True,
    vault: VaultTables = (),
) -> ReadFn:
    """The ``read(file, wm, batch_bytes)`` of a database source (``batch_bytes`` is not
    used: rows are paged by count).

    It takes the fingerprint (a vanished file yields nothing), carries the watermark
    state over (``DbRead``), opens the database read-only and runs ``probe`` on it,
    then yields ``rows(read, probed)``. A database that cannot be opened (and, with
    ``probe_errors``, one whose probe fails) yields one batch quarantining it at
    offset 0 (reason ``"<failure>: <error type>: <message>"``) with a watermark, so the
    same file is not reported again until it changes. Everything runs under
    ``guarded``: a database error later on quarantines without a watermark.

    ``vault`` (the tables that hold the sessions' rows, ``readers.rows``): before the
    rows' batches, one batch without entries nor watermark per session whose rows
    changed since the last read, carrying its rows document for the vault
    (``Batch.raw``, mode ``document``, at ``rows.vault_path``); the sessions' digests
    ride in the watermark's ``state["vault"]``, so an unchanged session is not taken
    again. A capture is taken first and committed before the watermark: a kill leaves
    it taken again at worst (the vault skips a version it holds). Off with
    ``CTXKEEP_VAULT=0``.
    """

    def read(
        file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]:
        return guarded(file.path, _read(file, wm))

    def _read(file: SourceFile, wm: Watermark | None) -> Iterator[Batch]:
        path = file.path
        try:
            before = db_fingerprint(path)
        except OSError:
            return
        state = (
            dict(wm.state)
            if wm and wm.parser_version == parser_version and [wm.dev, wm.ino] == before["main"][:2]
            else {}
        )
        rd = DbRead(path, agent, parser_version, before, state, dict(file.meta))
        try:
            ro = open_ro(path)
        except Exception as e:  # not a database, encrypted, unreadable
            yield _failed(rd, failure, e)
            return
        err = None
        try:
            probed = probe(ro.conn)
        except Exception as e:
            if not probe_errors:
                raise
            err = e
        finally:
            ro.conn.close()
        if err is not None:
            yield _failed(rd, failure, err)
            return
        if ro.note:
            state["note"] = ro.note
        digests = None
        if vault and os.environ.get("CTXKEEP_VAULT", "1") != "0":
            try:
                caps, digests = _vault_captures(file, rd, vault)
            except sqlite3.Error:  # taken again at the next read (no digests stored)
                caps = []
            for cap in caps:
                yield Batch([], [], None, raw=cap)
        for b in rows(rd, probed):
            if digests is not None and b.watermark is not None:
                wm = dataclasses.replace(b.watermark, state=dict(b.watermark.state, vault=digests))
                b = dataclasses.replace(b, watermark=wm)
            yield b

    read.vault_tables = vault  # type: ignore[attr-defined]  # (``pipeline.plan``: a database the vault should hold)
    return read


#: rows per read transaction of the vault's scan (each page opens and closes the database)
VAULT_PAGE_ROWS = 2000


def _schema(path: Path, tables: VaultTables) -> dict[str, str]:
    """``table → its statement (``sqlite_master.sql``)`` of the declared tables the database has."""
    ro = open_ro(path)
    try:
        rows = dict(ro.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    finally:
        ro.conn.close()
    return {t[0]: rows[t[0]] for t in tables if t[0] in rows and rows[t[0]]}


def _rowid_table(sql: str) -> bool:
    return "WITHOUT ROWID" not in sql.upper()


def _scan(
    path: Path, table: str, expr: str, sql: str, want: set[str] | None
) -> Iterator[tuple[str, int | None, bytes]]:
    """``(session id, rowid, row line)`` of every row of ``table`` (only sessions in
    ``want`` when given), by rowid; one short read transaction per page
    (``readers.sqlite.read_pages``)."""
    from ctxkeep.sources.readers import rows as rows_doc

    sid = f"CAST(({expr}) AS TEXT)"
    q = f'"{table}"'
    if not _rowid_table(sql):
        ro = open_ro(path)
        try:
            cur = ro.conn.execute(f"SELECT {sid}, NULL, * FROM {q} WHERE ({expr}) IS NOT NULL ORDER BY 1")
            cols = [d[0] for d in cur.description][2:]
            pages: Iterator[list[tuple]] = iter([cur.fetchall()])
        finally:
            ro.conn.close()
    else:
        ro = open_ro(path)
        try:
            cols = [d[0] for d in ro.conn.execute(f"SELECT * FROM {q} LIMIT 0").description]
        finally:
            ro.conn.close()
        select = (
            f"SELECT {sid}, rowid, * FROM {q} WHERE rowid > ? AND ({expr}) IS NOT NULL ORDER BY rowid LIMIT ?"
        )
        pages = (
            rows
            for rows, _, _ in read_pages(path, select, lambda k: (k,), lambda r: r[1], 0, VAULT_PAGE_ROWS)
        )
    for rows in pages:
        for r in rows:
            if want is None or r[0] in want:
                yield r[0], r[1], rows_doc.row_line(table, r[1], cols, r[2:])


def _session_rows(path: Path, table: str, expr: str, sid: str, after: int, top: int) -> list[bytes]:
    """The row lines of session ``sid`` in ``table`` with ``after < rowid <= top``, by
    rowid (a page per short read transaction)."""
    from ctxkeep.sources.readers import rows as rows_doc

    q = f'"{table}"'
    ro = open_ro(path)
    try:
        cols = [d[0] for d in ro.conn.execute(f"SELECT * FROM {q} LIMIT 0").description]
    finally:
        ro.conn.close()
    select = (
        f"SELECT rowid, * FROM {q} WHERE ({expr}) = ? AND rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?"
    )
    out = []
    for rows, _, _ in read_pages(
        path, select, lambda k: (sid, k, top), lambda r: r[0], after, VAULT_PAGE_ROWS
    ):
        out += [rows_doc.row_line(table, r[0], cols, r[1:]) for r in rows]
    return out


def _one(path: Path, sql: str, params: tuple) -> tuple:
    ro = open_ro(path)
    try:
        return ro.conn.execute(sql, params).fetchone()
    finally:
        ro.conn.close()


#: ``state["vault"]`` version: ``{"v": 2, "schema": <token of the tables' statements>,
#: "s": {session: {"m": {table: marks}, "k": <token of the version held>[, "r": 1]}}}``
#: (``"r"``: the session was racy at that read, ``_racy``)
VAULT_STATE_V = 2


def _newest(t: _Table) -> Any:
    """The newest update time of table ``t`` (over every session's marks), None when it
    has no update time or none can be told (no rows, times of types that do not
    compare: a text time beside a number)."""
    if t.ts is None:
        return None
    got = [m[2] for m in t.marks.values() if m[2] is not None]
    try:
        return max(got) if got else None
    except TypeError:
        return None


def _racy(ts: list[_Table], newest: list[Any], sid: str) -> bool:
    """Whether session ``sid``'s marks may stay the same through a later rewrite of one
    of its rows: its newest update time in a table is that table's newest (``newest``),
    so a row the agent rewrites after this read but within the same tick of its clock
    (Crush: whole seconds, ``strftime('%s', 'now')``) keeps every aggregate (rows,
    largest rowid, newest update). A rewrite after the read has a time at least the
    read's, which is at least every time the read saw, so only such a session can miss
    one (units need not be known). Times that do not compare count as racy."""
    for t, top in zip(ts, newest, strict=True):
        m = t.marks.get(sid)
        if t.ts is None or m is None or m[2] is None:
            continue
        if top is None:
            return True
        try:
            if m[2] >= top:
                return True
        except TypeError:
            return True
    return False


def _token(obj: Any) -> str:
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


@dataclass
class _Table:
    """One declared table of a database read for the vault: its marks per session (``rows,
    largest rowid, newest update`` from aggregates when it has an update time; else
    ``rows, largest rowid, digest of its lines``, and ``prefix``: the rows and digest of
    each session's rows up to the largest rowid held, taken in the same pass)."""

    name: str
    expr: str
    ts: str | None
    sql: str
    marks: dict[str, list]
    prefix: dict[str, tuple[int, str]]


def _marks(path: Path, spec: tuple[str, ...], sql: str, old: dict[str, dict]) -> _Table:
    """The marks of one declared table (``_Table``): with an update time one aggregate
    query (``count``, ``max(rowid)``, ``max(ts)`` per session; an index on the session
    column serves it); else every row's line hashed (``_scan``), as before. Raises
    ``sqlite3.Error``."""
    table, expr = spec[0], spec[1]
    ts = spec[2] if len(spec) > 2 and _rowid_table(sql) else None
    if ts is not None:
        ro = open_ro(path)
        try:
            rows = ro.conn.execute(
                # a BLOB time (hostile input) as text: the marks ride in the watermark's JSON
                f"SELECT CAST(({expr}) AS TEXT), count(*), max(rowid), "
                f"max(CASE WHEN typeof({ts}) = 'blob' THEN 'blob:' || hex({ts}) ELSE {ts} END) FROM \"{table}\" "
                f"WHERE ({expr}) IS NOT NULL GROUP BY 1"
            ).fetchall()
        finally:
            ro.conn.close()
        return _Table(table, expr, ts, sql, {r[0]: [r[1], r[2], r[3]] for r in rows}, {})
    hs: dict[str, Any] = {}
    marks: dict[str, list] = {}
    prefix: dict[str, tuple[int, str]] = {}
    for sid, rowid, line in _scan(path, table, expr, sql, None):
        h = hs.get(sid)
        if h is None:
            h = hs[sid] = hashlib.sha256()
            marks[sid] = [0, rowid, ""]
        m = marks[sid]
        held = ((old.get(sid) or {}).get("m") or {}).get(table)
        if held and held[1] is not None and rowid is not None and rowid > held[1] and sid not in prefix:
            prefix[sid] = (m[0], h.hexdigest()[:32])
        h.update(line + b"\n")
        m[0] += 1
        m[1] = rowid if rowid is None or m[1] is None else max(m[1], rowid)
    for sid, h in hs.items():
        marks[sid][2] = h.hexdigest()[:32]
        prefix.setdefault(sid, (marks[sid][0], marks[sid][2]))
    return _Table(table, expr, None, sql, marks, prefix)


def _section(path: Path, t: _Table, sid: str, held: list | None) -> tuple[int, list[bytes]]:
    """``(keep, lines)`` of session ``sid``'s section of ``t``: the first ``keep`` lines
    of the version held (marks ``held``) stay, then ``lines``. ``keep`` is 0 (the section
    whole) when rows held were deleted, one was rewritten more than
    ``rows.TAIL_LINES`` lines before the end, or the table cannot tell."""
    from ctxkeep.sources.readers.rows import TAIL_LINES

    now = t.marks.get(sid)
    if now is None:
        return 0, []
    top = now[1]
    keep, after = 0, None
    if held and held[1] is not None and top is not None:
        if t.ts is not None:
            # rows held: none deleted (their count), the first rewritten (update time)
            n, first = _one(
                path,
                f'SELECT count(*), min(CASE WHEN {t.ts} >= ? THEN rowid END) FROM "{t.name}" '
                f"WHERE ({t.expr}) = ? AND rowid <= ?",
                (held[2], sid, held[1]),
            )
            if n == held[0]:
                start = held[1] + 1 if first is None else first
                keep = _one(
                    path, f'SELECT count(*) FROM "{t.name}" WHERE ({t.expr}) = ? AND rowid < ?', (sid, start)
                )[0]
                after = start - 1
        elif t.prefix.get(sid) == (held[0], held[2]):  # the rows held are unchanged
            keep, after = held[0], held[1]
    if after is not None and held is not None and held[0] - keep <= TAIL_LINES:
        return keep, _session_rows(path, t.name, t.expr, sid, after, top)
    if top is not None and _rowid_table(t.sql):
        return 0, _session_rows(path, t.name, t.expr, sid, -(1 << 63), top)
    return 0, [line for _, _, line in _scan(path, t.name, t.expr, t.sql, {sid})]


def whole_document(path: Path, agent: str, tables: VaultTables, sid: str) -> bytes:
    """The whole rows document (``readers.rows``) of session ``sid`` of the database at
    ``path`` as it is now, every row read: what a version built on the one held must
    equal. Raises ``sqlite3.Error``."""
    from ctxkeep.sources.readers import rows as rows_doc

    schema = _schema(path, tables)
    lines = [
        line
        for spec in tables
        if spec[0] in schema
        for _, _, line in _scan(path, spec[0], spec[1], schema[spec[0]], {sid})
    ]
    return rows_doc.document(agent, str(path), sid, schema, lines)


def _vault_captures(file: SourceFile, rd: DbRead, tables: VaultTables) -> tuple[list[RawCapture], dict]:
    """The rows documents (``readers.rows``) of the sessions of ``file`` that changed since
    ``rd.state["vault"]`` (``VAULT_STATE_V``), as document captures, and the state to
    store. A session whose version is held sends only what changed: per table, the
    lines from the first row rewritten or added on (``rows_layout``, built on by
    ``sinks.vault.rows_capture``); a session new to the state, or of a changed schema,
    sends its whole document. Raises ``sqlite3.Error``."""
    from ctxkeep.sources.readers import rows as rows_doc

    schema = _schema(rd.path, tables)
    schema_tok = _token([schema, [list(spec) for spec in tables]])
    old = rd.state.get("vault")
    if not isinstance(old, dict) or old.get("v") != VAULT_STATE_V or old.get("schema") != schema_tok:
        old = {}
    old_s: dict[str, dict] = old.get("s") or {}
    specs = [spec for spec in tables if spec[0] in schema]
    ts = [_marks(rd.path, spec, schema[spec[0]], old_s) for spec in specs]
    sessions = sorted({sid for t in ts for sid in t.marks})
    newest = [_newest(t) for t in ts]
    new_s: dict[str, dict] = {}
    caps = []
    dev, ino, size, mtime_ns = rd.before["main"]
    for sid in sessions:
        m = {t.name: t.marks[sid] for t in ts if sid in t.marks}
        entry: dict[str, Any] = {"m": m, "k": _token([schema_tok, m])}
        if _racy(ts, newest, sid):
            entry["r"] = 1
        held = old_s.get(sid)
        # the same marks tell nothing changed, unless the session was racy at the read
        # that took them (``_racy``): then its rows from its newest update time on are
        # read again (``_section``); a version equal to the one held adds no generation
        if held and held.get("m") == m and held.get("k") and not held.get("r"):
            new_s[sid] = held
            continue
        base = held.get("k") if held else None
        layout, lines = [], []
        for t in ts:
            keep, got = _section(rd.path, t, sid, (held or {}).get("m", {}).get(t.name) if base else None)
            layout.append([t.name, keep, len(got)])
            lines += got
        if base is None:  # (a whole document: nothing kept)
            layout = [[name, 0, n] for name, _, n in layout]
        doc = rows_doc.document(rd.agent, str(rd.path), sid, schema, lines)
        caps.append(
            RawCapture(
                rows_doc.vault_path(str(rd.path), sid),
                rd.agent,
                "document",
                0,
                doc,
                dev,
                ino,
                size,
                mtime_ns,
                {
                    "vault_rows": 1,
                    "db": str(rd.path),
                    "session": sid,
                    "file_meta": dict(file.meta),
                    "rows_layout": layout,
                    "rows_base": base,
                    "rows_marks": entry["k"],
                },
            )
        )
        new_s[sid] = entry
    return caps, {"v": VAULT_STATE_V, "schema": schema_tok, "s": new_s}


def resume_mark(state: dict, top: int, key: str = "mark") -> dict:
    """The ``changed_rows`` mark kept in ``state[key]``, or ``{}`` (read everything
    again) when the table's largest rowid ``top`` is below it: the table was emptied or
    replaced."""
    mark = dict(state.get(key) or {})
    return {} if top < (mark.get("rowid") or 0) else mark


class RowCollector:
    """What one read of a database's rows gathers, for sources whose rows each hold a
    JSON value (a conversation, a message): entries, quarantined rows, the coverage
    tally and the counts of rows and bytes. ``add`` parses one row; ``batch`` makes the
    read's batch. ``reset`` as in ``coverage.Tally`` (the read started from scratch)."""

    def __init__(self, path: Path, reset: bool) -> None:
        self.path = path
        self.entries: list[dict] = []
        self.quarantine: list[dict] = []
        self.tally = Tally(reset=reset)
        self.rows = 0
        self.bytes = 0

    def add(self, rowid: int, raw: bytes, what: str, parse: Callable[..., list[dict]]) -> list[dict] | None:
        """Count row ``rowid`` (its value ``raw``) and keep ``parse(unknown_types)``'s
        entries (the list it is given collects the record types it did not
        understand, for the coverage ledger). When ``parse`` raises (damaged JSON, a
        shape the parser does not know), the row is quarantined (``"<what> row
        <rowid>: <error>"``, with ``raw``) and None is returned: the read goes on."""
        self.rows += 1
        self.bytes += len(raw)
        unknown_types: list[str] = []
        try:
            got = parse(unknown_types)
        except Exception as e:
            self.quarantine.append(
                quarantine_row(self.path, rowid, raw, f"{what} row {rowid}: {type(e).__name__}: {e}")
            )
            self.tally.quarantined(None)
            return None
        self.entries += got
        self.tally.record(None, len(got), unknown_types, raw[:2000])
        return got

    def batch(self, wm: Watermark) -> Batch:
        """The read's one batch, with watermark ``wm``."""
        return Batch(
            self.entries, self.quarantine, wm, lines=self.rows, bytes_read=self.bytes, coverage=self.tally
        )


def as_bytes(value: Any, empty: str = "") -> bytes:
    """A row's value as bytes: a BLOB as it is, text UTF-8 encoded (unpaired surrogates
    replaced), NULL as ``empty``."""
    if isinstance(value, bytes):
        return value
    return (empty if value is None else str(value)).encode("utf-8", "replace")


#: ``each(*row)`` of ``ChangedRows.read``: ``(raw, parse)`` for a row to parse
#: (``RowCollector.add``), or None for a row only counted
EachFn = Callable[..., "tuple[bytes, Callable[[list[str]], list[dict]]] | None"]


class ChangedRows(RowCollector):
    """The rows of a database read by ``changed_rows`` (new and updated since the marks
    kept in the watermark state), gathered as ``RowCollector`` does: ``read`` pages one
    table, ``batch_now`` makes the read's batch with the marks moved on. The read starts
    from scratch (``reset``) when the state has no ``"mark"``."""

    def __init__(self, rd: DbRead) -> None:
        super().__init__(rd.path, reset=not rd.state.get("mark"))
        self.rd = rd
        self.marks: dict[str, dict] = {}

    def read(
        self,
        table: str,
        cols: str,
        each: EachFn,
        *,
        top: int,
        rowid: str = "rowid",
        ts: str = "updated_at",
        key: str = "mark",
    ) -> None:
        """Page ``SELECT <rowid>, <cols>, <ts> FROM <table>`` by ``changed_rows`` from the
        mark ``state[key]`` (``resume_mark`` against the table's largest rowid ``top``)
        and hand each row to ``each(rowid, *cols, ts)``; a row ``each`` parses is
        quarantined as a ``<table>`` row when its parse raises."""
        mark = resume_mark(self.rd.state, top, key)
        select = f"SELECT {rowid}, {cols}, {ts} FROM {table}"
        for rows in changed_rows(self.path, select, rowid, ts, mark):
            for row in rows:
                mark = advance_mark(mark, row[0], row[-1])
                got = each(*row)
                if got is None:
                    self.rows += 1
                else:
                    self.add(row[0], got[0], table, got[1])
        self.marks[key] = mark

    def batch_now(self) -> Batch:
        """The read's one batch, its watermark holding the marks moved on."""
        return self.batch(self.rd.watermark(dict(self.rd.state, **self.marks), self.rd.settled()))


def json_object_of(raw: bytes, what: str) -> dict:
    """The JSON object a row's value holds. Raises ValueError (orjson's
    ``JSONDecodeError`` included) when it is not one."""
    doc = orjson.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError(f"{what} is not a JSON object")
    return doc


def _failed(rd: DbRead, failure: str, e: Exception) -> Batch:
    q = quarantine_row(rd.path, 0, b"", f"{failure}: {type(e).__name__}: {e}")
    return Batch([], [q], rd.watermark(rd.state, rd.before))


def by_mode(mode_for: Callable[[Path], str], read_db: ReadFn, read_other: ReadFn) -> ReadFn:
    """The ``read`` of a source with a database and files of another mode (goose's
    legacy JSONL, Cursor's transcripts, sst/opencode's JSON tree): ``read_db`` for a
    file whose ``mode_for(path)`` is ``sqlite``, else ``read_other(file, wm,
    batch_bytes)``."""

    def read(
        file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]:
        fn = read_db if mode_for(file.path) == "sqlite" else read_other
        return fn(file, wm, batch_bytes)

    read.vault_tables = getattr(read_db, "vault_tables", ())  # type: ignore[attr-defined]
    return read

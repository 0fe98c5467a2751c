"""The SQLite store (``store.db``): the system of record.

Tables:

- ``entries``: one row per entry (``schema.STORED_COLUMNS``; ``ts`` as ISO-8601 UTC
  text, ``is_sidechain`` 0/1); ``rowid`` orders rows for the DuckDB sync;
- ``contents``: one row per distinct text (``content_hash``, ``bytes``,
  ``token_estimate``, ``token_method``); the text itself lives in ``chunks``
  (≤ 4 KiB each, concatenating back to the exact text);
- ``fts_words``: FTS5 ``porter unicode61`` over ``chunks`` (columns ``title``, the
  chunk's first line or heading, ``text``, and ``facets``, the filter tokens of the
  entries holding the text, ``transforms.facets``; external content: the text is
  stored once); its default rank is ``bm25(TITLE_WEIGHT, 1.0, 0.0)``: facets never
  rank;
- ``fts_grams``: FTS5 over CJK bigrams and identifier parts of chunks
  (``transforms.grams``; rowid = chunk_id) and the same ``facets``; rank
  ``bm25(1.0, 0.0)``;
- ``usage``: one row per counted API response (``usage_key``);
- ``watermarks``, ``quarantine``, ``runs``, ``tombstones``, ``meta``;
- ``status_log``: every status change of a stored entry, in order (``seq``), so the
  DuckDB sync (rowid high-water mark) can replay changes to rows it already holds.

WAL, ``synchronous=NORMAL``, a 30 s busy timeout; one writer at a time (writes use
``BEGIN IMMEDIATE``; maintenance runs also take ``ingest.lock``). The file is created
0600.
"""
from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Polars is imported where frames are loaded, not by readers
    import polars as pl

    from ctxkeep.schema import Watermark

from ctxkeep import timeutil
from ctxkeep.config import ensure_home
from ctxkeep.errors import StoreBusy, StoreError
from ctxkeep.schema import STORED_COLUMNS, USAGE_COLUMNS

#: v2: chunks.title, fts_words(title, text) with a weighted rank;
#: v3: chunks.facets and a facets column in both FTS tables (filters inside the MATCH),
#: entries_content on (content_hash, ts)
SCHEMA_VERSION = 3
TITLE_WEIGHT = 4.0  # BM25 weight of fts_words.title relative to text
DB_NAME = "store.db"
#: page cache of a writing connection, KiB (``PRAGMA cache_size``; memory, not disk)
CACHE_KIB = 64 * 1024

_ENTRY_DDL_TYPES = {
    "source_offset": "INTEGER", "text_bytes": "INTEGER", "token_estimate": "INTEGER",
    "is_sidechain": "INTEGER", **{c: "INTEGER" for c in USAGE_COLUMNS},
}

DDL = f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS entries(
  rowid INTEGER PRIMARY KEY,
  {", ".join(f"{c} {_ENTRY_DDL_TYPES.get(c, 'TEXT')}" + (" NOT NULL UNIQUE" if c == "entry_id" else "")
             for c in STORED_COLUMNS)},
  ingested_at TEXT
);
-- entries indexes, each for a query that needs it (every index costs ingest time:
-- ~20 % of the entry insert for the two dropped below): session (status changes by
-- session, purge, search filter), (content_hash, ts) (search loads the newest entries
-- holding a hit's text; purge),
-- source (purge's files-left check). project_dir and (agent, kind) are not
-- indexed: search filters them inside the FTS match (facets), purge by project and
-- stats scan every row anyway.
CREATE INDEX IF NOT EXISTS entries_session ON entries(session_id, ts);
CREATE INDEX IF NOT EXISTS entries_content ON entries(content_hash, ts);
DROP INDEX IF EXISTS entries_project;
DROP INDEX IF EXISTS entries_agent_kind;
CREATE INDEX IF NOT EXISTS entries_source ON entries(source_path, source_offset);
CREATE TABLE IF NOT EXISTS contents(
  content_id INTEGER PRIMARY KEY,
  content_hash TEXT NOT NULL UNIQUE,
  bytes INTEGER NOT NULL,
  token_estimate INTEGER,
  token_method TEXT
);
CREATE TABLE IF NOT EXISTS chunks(
  chunk_id INTEGER PRIMARY KEY,
  content_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL,
  facets TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS chunks_content ON chunks(content_id, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS fts_words USING fts5(
  title, text, facets, content='chunks', content_rowid='chunk_id',
  tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_grams USING fts5(
  grams, facets, tokenize='unicode61 remove_diacritics 0');
CREATE TABLE IF NOT EXISTS usage(
  usage_key TEXT PRIMARY KEY, agent TEXT, session_id TEXT, project_dir TEXT, ts TEXT,
  model TEXT, {", ".join(f"{c} INTEGER" for c in USAGE_COLUMNS)}, entry_id TEXT);
CREATE INDEX IF NOT EXISTS usage_ts ON usage(ts);
CREATE TABLE IF NOT EXISTS watermarks(
  path TEXT PRIMARY KEY, agent TEXT, dev INTEGER, ino INTEGER, size INTEGER,
  mtime_ns INTEGER, offset INTEGER, head_len INTEGER, head_hash TEXT,
  parser_version INTEGER, state TEXT, updated_at TEXT);
CREATE TABLE IF NOT EXISTS quarantine(
  id INTEGER PRIMARY KEY, agent TEXT, path TEXT, offset INTEGER, length INTEGER,
  reason TEXT, action TEXT, raw BLOB, first_seen TEXT, UNIQUE(path, offset, reason));
CREATE TABLE IF NOT EXISTS runs(
  run_id INTEGER PRIMARY KEY, flow TEXT, started_at TEXT, finished_at TEXT, status TEXT,
  files INTEGER, bytes INTEGER, entries_new INTEGER, quarantined INTEGER,
  seconds REAL, detail TEXT);
CREATE TABLE IF NOT EXISTS tombstones(
  scope TEXT, value TEXT, created_at TEXT, PRIMARY KEY(scope, value));
CREATE TABLE IF NOT EXISTS status_log(
  seq INTEGER PRIMARY KEY, entry_id TEXT NOT NULL, status TEXT NOT NULL, changed_at TEXT);
CREATE INDEX IF NOT EXISTS status_log_entry ON status_log(entry_id, changed_at);
"""


def now_iso() -> str:
    """Current UTC time as ISO-8601 text with microseconds and ``Z``."""
    return timeutil.now_iso()


def _create_private(path: Path) -> None:
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)


def connect(home: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open (creating if needed, unless ``readonly``) ``<home>/store.db``.

    Returns a connection in autocommit mode (use ``write()`` for transactions).
    Raises StoreError when a read-only open finds no store, or the schema is newer
    than this version of ctxkeep.
    """
    path = Path(home) / DB_NAME
    if readonly:
        if not path.exists():
            raise StoreError("no store yet", where=str(path), hint="run `ctxkeep ingest` first")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False)
    else:
        ensure_home(Path(home))
        _create_private(path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=30000")
    if not readonly:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # a 64 MiB page cache (default 2 MiB): the random-keyed indexes of a big
        # ingest group (entry_id, content_hash) otherwise spill and re-read pages
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        ensure_schema(conn)
    else:
        check_version(conn, readonly=True)
    return conn


#: the oldest schema a reader can search (v2 lacks only the facets: filters are checked
#: per chunk); older stores are upgraded by the first writable open (``ctxkeep ingest``)
MIN_READ_VERSION = 2


def check_version(conn: sqlite3.Connection, *, readonly: bool = False) -> None:
    """Raise StoreError when the store's schema is newer than this ctxkeep, or (for a
    reader, which never migrates) older than ``MIN_READ_VERSION``."""
    v = schema_version(conn)
    if v > SCHEMA_VERSION:
        raise StoreError(f"store schema v{v} is newer than this ctxkeep (v{SCHEMA_VERSION})",
                         hint="upgrade ctxkeep")
    if readonly and 0 < v < MIN_READ_VERSION:
        raise StoreError(f"store schema v{v} is older than this ctxkeep reads (v{SCHEMA_VERSION})",
                         hint="run `ctxkeep ingest` once to upgrade the store")


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables if missing, migrate an older schema, record the version."""
    check_version(conn)
    with write(conn):
        _migrate(conn)
        for stmt in DDL.split(";\n"):
            if stmt.strip():
                conn.execute(stmt)
        conn.execute("INSERT OR IGNORE INTO meta VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
        _set_ranks(conn)


def _set_ranks(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO fts_words(fts_words, rank) VALUES('rank', ?)",
                 (f"bm25({TITLE_WEIGHT}, 1.0, 0.0)",))
    conn.execute("INSERT INTO fts_grams(fts_grams, rank) VALUES('rank', 'bm25(1.0, 0.0)')")


def schema_version(conn: sqlite3.Connection) -> int:
    """The store's schema version (0 for a store without a ``meta`` table)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0]) if row else 0


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring an older store to ``SCHEMA_VERSION`` (in the caller's transaction).

    v1 → v2: add ``chunks.title`` (filled from the chunk texts). v2 → v3: add
    ``chunks.facets`` (``refresh_facets``); ``entries_content`` gains ``ts``. Either
    rebuilds both FTS tables from ``chunks`` (``rebuild_fts_tables``): ~20 s for a
    450 MB store."""
    version = schema_version(conn)
    if not version or version >= SCHEMA_VERSION:
        return
    import logging

    logging.getLogger(__name__).warning(
        "ctxkeep: upgrading the store from schema v%d to v%d (the search indexes are rebuilt "
        "once; ~20 s per 500 MB)", version, SCHEMA_VERSION)
    if version < 2:
        from ctxkeep.transforms.chunk import chunk_title

        conn.execute("ALTER TABLE chunks ADD COLUMN title TEXT NOT NULL DEFAULT ''")
        tools = dict(conn.execute("SELECT content_hash, min(tool_name) FROM entries "
                                  "WHERE tool_name IS NOT NULL GROUP BY content_hash").fetchall())
        rows = conn.execute("SELECT ch.chunk_id, ch.seq, ch.text, c.content_hash FROM chunks ch "
                            "JOIN contents c ON c.content_id = ch.content_id").fetchall()
        conn.executemany("UPDATE chunks SET title=? WHERE chunk_id=?",
                         [((f"{tools[h]} " if s == 0 and h in tools else "") + chunk_title(t, s), cid)
                          for cid, s, t, h in rows])
    if version < 3:
        conn.execute("DROP INDEX IF EXISTS entries_content")  # now (content_hash, ts); DDL recreates it
        conn.execute("ALTER TABLE chunks ADD COLUMN facets TEXT NOT NULL DEFAULT ''")
        refresh_facets(conn)
    rebuild_fts_tables(conn)
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))


def _fts_ddl(table: str) -> str:
    start = DDL.index(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} ")
    return DDL[start:DDL.index(";", start)]


def rebuild_fts_tables(conn: sqlite3.Connection, batch: int = 5000) -> dict:
    """Drop, recreate (from ``DDL``) and fill ``fts_words`` (FTS5 ``'rebuild'`` from
    ``chunks``) and ``fts_grams`` (``transforms.grams`` of the chunk texts, with the
    chunks' facets), inside the caller's transaction. Returns ``{"chunks": n,
    "grams_rows": n}``."""
    from ctxkeep.transforms.grams import grams_batch

    conn.execute("DROP TABLE IF EXISTS fts_words")
    conn.execute("DROP TABLE IF EXISTS fts_grams")
    conn.execute(_fts_ddl("fts_words"))
    conn.execute(_fts_ddl("fts_grams"))
    conn.execute("INSERT INTO fts_words(fts_words) VALUES('rebuild')")
    n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    n_grams, last = 0, 0
    while True:
        rows = conn.execute("SELECT chunk_id, text, facets FROM chunks WHERE chunk_id > ? "
                            "ORDER BY chunk_id LIMIT ?", (last, batch)).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        terms = grams_batch([r[1] for r in rows])
        g = [(r[0], gr, r[2]) for r, gr in zip(rows, terms) if gr]
        conn.executemany("INSERT INTO fts_grams(rowid, grams, facets) VALUES(?,?,?)", g)
        n_grams += len(g)
    conn.execute("INSERT INTO fts_words(fts_words) VALUES('optimize')")
    conn.execute("INSERT INTO fts_grams(fts_grams) VALUES('optimize')")
    _set_ranks(conn)
    return {"chunks": n_chunks, "grams_rows": n_grams}


_FACET_COLUMNS = "content_hash, agent, kind, role, tool_name, session_id, project_dir"


def refresh_facets(conn: sqlite3.Connection) -> int:
    """Recompute ``chunks.facets`` of every chunk from the entries now holding its
    text (drops tokens of purged entries), in the caller's transaction. The FTS tables
    are not updated: rebuild them after (``rebuild_fts_tables``). Returns the number of
    chunks whose facets changed."""
    from ctxkeep.transforms import facets as fx

    by = fx.facets_by_content(conn.execute(
        f"SELECT DISTINCT {_FACET_COLUMNS} FROM entries WHERE content_hash IS NOT NULL"))
    rows = conn.execute("SELECT ch.chunk_id, ch.facets, c.content_hash FROM chunks ch "
                        "JOIN contents c ON c.content_id = ch.content_id").fetchall()
    changed = []
    for cid, old, h in rows:
        new = fx.merge(by.get(h, ()))
        if new != old:
            changed.append((new, cid))
    conn.executemany("UPDATE chunks SET facets=? WHERE chunk_id=?", changed)
    return len(changed)


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction (``BEGIN IMMEDIATE``), committed on success, rolled back on
    error. Raises StoreBusy when another writer holds the database past the timeout."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise StoreBusy("the store is locked by another writer", hint="retry later") from None
        raise
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def sibling(conn: sqlite3.Connection) -> sqlite3.Connection | None:
    """A second writing connection to the database file of ``conn`` (its ``main``
    schema) with the pragmas of ``connect`` (busy timeout, ``synchronous=NORMAL``, the
    page cache), in autocommit mode, usable from another thread (the ingest's writer
    thread). The schema is not touched (``conn`` made it). Returns None for an
    in-memory or temporary database (nothing to share)."""
    row = next((r for r in conn.execute("PRAGMA database_list").fetchall() if r[1] == "main"), None)
    if not row or not row[2]:
        return None
    other = sqlite3.connect(row[2], isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA busy_timeout=30000")
    other.execute("PRAGMA synchronous=NORMAL")
    other.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    return other


# ---------------------------------------------------------------- analytics marks

def mark_analytics_synced(conn: sqlite3.Connection, entries_rowid: int, status_seq: int) -> None:
    """Record how far DuckDB holds SQLite (``duckdb_store.sync``'s return), so that
    ``analytics_behind`` can tell without opening DuckDB."""
    with write(conn):
        conn.executemany("INSERT OR REPLACE INTO meta VALUES(?, ?)",
                         [("analytics_entries_rowid", str(entries_rowid)),
                          ("analytics_status_seq", str(status_seq))])


def analytics_behind(conn: sqlite3.Connection) -> bool:
    """True when SQLite holds entries or status changes past what the last complete
    DuckDB sync recorded (``mark_analytics_synced``): a sync failed or was
    interrupted, and even an ingest with nothing new must catch DuckDB up."""
    marks = dict(conn.execute("SELECT key, value FROM meta WHERE key IN "
                              "('analytics_entries_rowid', 'analytics_status_seq')").fetchall())
    rowid = conn.execute("SELECT coalesce(max(rowid), 0) FROM entries").fetchone()[0]
    seq = conn.execute("SELECT coalesce(max(seq), 0) FROM status_log").fetchone()[0]
    return rowid > int(marks.get("analytics_entries_rowid", 0)) or seq > int(marks.get("analytics_status_seq", 0))


# ---------------------------------------------------------------- watermarks

def load_watermarks(conn: sqlite3.Connection) -> dict[str, Watermark]:
    """All watermarks, keyed by path."""
    from ctxkeep.schema import Watermark

    out = {}
    for r in conn.execute("SELECT path, agent, dev, ino, size, mtime_ns, offset, head_len, "
                          "head_hash, parser_version, state FROM watermarks"):
        out[r[0]] = Watermark(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                              json.loads(r[10] or "{}"))
    return out


def _save_watermark(conn: sqlite3.Connection, wm: Watermark) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO watermarks VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
        (wm.path, wm.agent, wm.dev, wm.ino, wm.size, wm.mtime_ns, wm.offset, wm.head_len,
         wm.head_hash, wm.parser_version, json.dumps(wm.state, ensure_ascii=False), now_iso()))


# ---------------------------------------------------------------- lookups

def _chunks(values: list, n: int = 30000) -> Iterable[list]:
    for i in range(0, len(values), n):
        yield values[i:i + n]


def existing_entry_ids(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """The subset of ``ids`` already stored in ``entries``."""
    found: set[str] = set()
    for part in _chunks(ids):
        q = f"SELECT entry_id FROM entries WHERE entry_id IN ({','.join('?' * len(part))})"
        found.update(r[0] for r in conn.execute(q, part))
    return found


def existing_contents(conn: sqlite3.Connection, hashes: list[str]) -> dict[str, int]:
    """``content_hash → token_estimate`` for the subset of ``hashes`` already stored."""
    found: dict[str, int] = {}
    for part in _chunks(hashes):
        q = (f"SELECT content_hash, token_estimate FROM contents "
             f"WHERE content_hash IN ({','.join('?' * len(part))})")
        found.update((h, t) for h, t in conn.execute(q, part))
    return found


def tombstoned(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Purged scopes that ingest must skip: ``{"session": {...}, "project": {...}}``."""
    out: dict[str, set[str]] = {"session": set(), "project": set()}
    for scope, value in conn.execute("SELECT scope, value FROM tombstones"):
        out.setdefault(scope, set()).add(value)
    return out


# ---------------------------------------------------------------- load

def _ts_text(df: pl.DataFrame) -> pl.DataFrame:
    import polars as pl
    return df.with_columns(pl.col("ts").dt.strftime(timeutil.UTC_FORMAT_POLARS))


def apply_status_changes(conn: sqlite3.Connection, changes: list[dict], stamp: str | None = None) -> int:
    """Change the ``status`` of stored entries, in order, inside the caller's transaction.

    Args: ``changes``, dicts ``{"agent", "session_id", "message_ids": [str], "status"}``
    (``sources.base.Batch.status_changes``): every entry of that agent and session whose
    ``message_id`` is listed gets ``status``; or ``{"entry_ids": [str], "status"}`` for
    entries known by id (e.g. lines a compression removed). Each changed entry is
    appended to ``status_log`` (entry_id, status, changed_at UTC), which the DuckDB
    sync replays. Returns the number of entries whose status changed.
    """
    stamp = stamp or now_iso()
    n = 0
    for ch in changes:
        by_entry = "entry_ids" in ch
        keys = [m for m in (ch.get("entry_ids") if by_entry else ch.get("message_ids")) or [] if m]
        for part in _chunks(keys, 900):
            marks = ",".join("?" * len(part))
            if by_entry:
                q = f"SELECT entry_id FROM entries WHERE status<>? AND entry_id IN ({marks})"
                args = [ch["status"], *part]
            else:
                q = (f"SELECT entry_id FROM entries WHERE agent=? AND session_id=? AND status<>? "
                     f"AND message_id IN ({marks})")
                args = [ch["agent"], ch["session_id"], ch["status"], *part]
            ids = [r[0] for r in conn.execute(q, args)]
            if not ids:
                continue
            conn.executemany("UPDATE entries SET status=? WHERE entry_id=?",
                             [(ch["status"], i) for i in ids])
            conn.executemany("INSERT INTO status_log(entry_id, status, changed_at) VALUES(?,?,?)",
                             [(i, ch["status"], stamp) for i in ids])
            n += len(ids)
    return n


def _tool_names(entries: pl.DataFrame) -> dict[str, str]:
    """``content_hash → tool_name`` of the entries that have one (first seen wins)."""
    import polars as pl
    if not entries.height or "tool_name" not in entries.columns:
        return {}
    return dict(entries.filter(pl.col("tool_name").is_not_null() & pl.col("content_hash").is_not_null())
                .unique(subset="content_hash", keep="first", maintain_order=True)
                .select("content_hash", "tool_name").iter_rows())


def _add_facets(conn: sqlite3.Connection, facets: dict[str, set[str]]) -> int:
    """Merge ``content_hash → tokens`` into the stored chunks of those contents and
    re-index the chunks whose ``facets`` changed (FTS5 ``'delete'`` with the old
    values, then insert). Returns the number of chunks changed."""
    from ctxkeep.transforms import facets as fx

    changed = []
    hashes = list(facets)
    for part in _chunks(hashes):
        for cid, old, h in conn.execute(
                f"SELECT ch.chunk_id, ch.facets, c.content_hash FROM contents c JOIN chunks ch "
                f"ON ch.content_id = c.content_id WHERE c.content_hash IN ({','.join('?' * len(part))})",
                part):
            new = fx.merge(set(old.split()) | facets[h])
            if new != old:
                changed.append((new, cid))
    for part in _chunks(changed):
        ids = [cid for _, cid in part]
        marks = ",".join("?" * len(ids))
        conn.execute(f"INSERT INTO fts_words(fts_words, rowid, title, text, facets) SELECT 'delete', "
                     f"chunk_id, title, text, facets FROM chunks WHERE chunk_id IN ({marks})", ids)
        conn.executemany("UPDATE chunks SET facets=? WHERE chunk_id=?", part)
        conn.execute(f"INSERT INTO fts_words(rowid, title, text, facets) SELECT chunk_id, title, text, "
                     f"facets FROM chunks WHERE chunk_id IN ({marks})", ids)
        conn.executemany("UPDATE fts_grams SET facets=? WHERE rowid=?", part)
    return len(changed)


def load_batch(conn: sqlite3.Connection, *, entries: pl.DataFrame, contents: pl.DataFrame,
               chunks: pl.DataFrame, usage: pl.DataFrame, quarantine: list[dict],
               watermark: Watermark | None, status_changes: list[dict] | None = None,
               watermarks: Iterable[Watermark] = ()) -> int:
    """Store one batch in a single transaction and return the number of new entries.

    Args:
        entries: new entries, columns ``STORED_COLUMNS`` (extra columns ignored).
        contents: new contents: content_hash, bytes, token_estimate, token_method.
        chunks: content_hash (str), seq (int), title (str), text (str), grams (str;
            '' for none) from ``transforms.chunk.chunks_frame``. The first chunk's title
            is prefixed with the tool name of the entry holding the text, if any, so
            tool names weigh like titles in the word index.
        usage: usage rows (``transforms.normalize.usage_frame``); on a key already
            stored, the row with the larger total wins (a Claude response logged again
            with more output), except for Codex keys: they name the cumulative session
            total, so the first row stored is the true delta and a later one computed
            from a partial read (a compressed rollout re-read from offset 0, a fork's
            replay) must not replace it.
        quarantine: rows from ``sources.base.quarantine_row`` (+ ``agent``).
        watermark: saved with the batch, so the batch is stored exactly once.
        status_changes: applied after the entries (``apply_status_changes``).
        watermarks: more watermarks saved in the same transaction (a batch that groups
            the new bytes of several small files).
    """
    import polars as pl

    from ctxkeep.transforms import facets as fx

    stamp = now_iso()
    facets = fx.facets_by_content(
        entries.select(*_FACET_COLUMNS.split(", ")).unique().iter_rows()) if entries.height else {}
    with write(conn):
        if contents.height:
            conn.executemany(
                "INSERT OR IGNORE INTO contents(content_hash, bytes, token_estimate, token_method) "
                "VALUES(?,?,?,?)",
                contents.select("content_hash", "bytes", "token_estimate", "token_method").rows())
        if chunks.height:
            hashes = chunks["content_hash"].unique().to_list()
            ids = {}
            for part in _chunks(hashes):
                q = (f"SELECT content_hash, content_id FROM contents WHERE content_hash IN "
                     f"({','.join('?' * len(part))})")
                ids.update(conn.execute(q, part).fetchall())
            first = conn.execute("SELECT coalesce(max(chunk_id), 0) FROM chunks").fetchone()[0] + 1
            tools = _tool_names(entries)
            rows = []
            grams_rows = []
            merged: dict[str, str] = {}
            for i, (h, seq, title, text, grams) in enumerate(chunks.select(
                    "content_hash", "seq", "title", "text", "grams").iter_rows()):
                cid = first + i
                if seq == 0 and tools.get(h):  # tool names weigh like titles
                    title = f"{tools[h]} {title or ''}".strip()
                fac = merged.get(h)
                if fac is None:
                    fac = merged[h] = fx.merge(facets.pop(h, ()))
                rows.append((cid, ids[h], seq, title or "", text, fac))
                if grams:
                    grams_rows.append((cid, grams, fac))
            conn.executemany("INSERT INTO chunks(chunk_id, content_id, seq, title, text, facets) "
                             "VALUES(?,?,?,?,?,?)", rows)
            conn.execute("INSERT INTO fts_words(rowid, title, text, facets) SELECT chunk_id, title, "
                         "text, facets FROM chunks WHERE chunk_id >= ?", (first,))
            if grams_rows:
                conn.executemany("INSERT INTO fts_grams(rowid, grams, facets) VALUES(?,?,?)", grams_rows)
        if facets:  # new entries holding texts stored before: their chunks gain tokens
            _add_facets(conn, facets)
        n_new = 0
        if entries.height:
            e = _ts_text(entries.select(STORED_COLUMNS)).with_columns(
                pl.col("is_sidechain").cast(pl.Int64), pl.lit(stamp).alias("ingested_at"))
            cols = STORED_COLUMNS + ["ingested_at"]
            before = conn.total_changes
            conn.executemany(
                f"INSERT OR IGNORE INTO entries({','.join(cols)}) VALUES({','.join('?' * len(cols))})",
                e.rows())
            n_new = conn.total_changes - before
        if usage.height:
            cols = ["usage_key", "agent", "session_id", "project_dir", "ts", "model",
                    *USAGE_COLUMNS, "entry_id"]
            total = " + ".join(f"coalesce(usage.{c},0)" for c in USAGE_COLUMNS)
            xtotal = " + ".join(f"coalesce(excluded.{c},0)" for c in USAGE_COLUMNS)
            conn.executemany(
                f"INSERT INTO usage({','.join(cols)}) VALUES({','.join('?' * len(cols))}) "
                f"ON CONFLICT(usage_key) DO UPDATE SET "
                + ", ".join(f"{c}=excluded.{c}" for c in cols[1:])
                + f" WHERE {xtotal} > {total} AND usage.usage_key NOT LIKE 'codex:%'",
                _ts_text(usage.select(cols)).rows())
        if quarantine:
            conn.executemany(
                "INSERT OR IGNORE INTO quarantine(agent, path, offset, length, reason, action, raw, first_seen) "
                "VALUES(?,?,?,?,?,?,?,?)",
                [(q.get("agent"), q["path"], q["offset"], q["length"], q["reason"], q["action"],
                  q["raw"], stamp) for q in quarantine])
        if status_changes:
            apply_status_changes(conn, status_changes, stamp)
        if watermark is not None:
            _save_watermark(conn, watermark)
        for wm in watermarks:
            _save_watermark(conn, wm)
    return n_new


def start_run(conn: sqlite3.Connection, flow: str) -> int:
    """Record a run's start in ``runs``; returns its run_id."""
    with write(conn):
        cur = conn.execute("INSERT INTO runs(flow, started_at, status) VALUES(?,?,'running')",
                           (flow, now_iso()))
        return cur.lastrowid


def finish_run(conn: sqlite3.Connection, run_id: int, status: str, summary: dict) -> None:
    """Record a run's end: status (``ok``/``failed``) and its summary figures."""
    with write(conn):
        conn.execute(
            "UPDATE runs SET finished_at=?, status=?, files=?, bytes=?, entries_new=?, "
            "quarantined=?, seconds=?, detail=? WHERE run_id=?",
            (now_iso(), status, summary.get("files"), summary.get("bytes"),
             summary.get("entries_new"), summary.get("quarantined"), summary.get("seconds"),
             json.dumps(summary, default=str), run_id))


# ---------------------------------------------------------------- read side

def content_text(conn: sqlite3.Connection, content_hash: str) -> str | None:
    """The full text of a content (its chunks joined), or None."""
    rows = conn.execute(
        "SELECT ch.text FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
        "WHERE c.content_hash = ? ORDER BY ch.seq", (content_hash,)).fetchall()
    if not rows:
        return None
    return "".join(r[0] for r in rows)


def store_files(home: Path) -> dict[str, int]:
    """Sizes in bytes of the store's files (db, -wal, -shm, analytics, archives)."""
    out = {}
    for name in (DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm", "analytics.duckdb",
                 "analytics.duckdb.wal"):
        p = Path(home) / name
        if p.exists():
            out[name] = p.stat().st_size
    arch = Path(home) / "archive"
    if arch.is_dir():
        out["archive/"] = sum(p.stat().st_size for p in arch.rglob("*") if p.is_file())
    return out

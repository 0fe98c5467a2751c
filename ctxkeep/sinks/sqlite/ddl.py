"""The one DDL registry of the SQLite store: every table, index and FTS5 table, by name.

``TABLES``, ``FTS_TABLES`` and ``INDEXES`` map a name to its ``CREATE ... IF NOT
EXISTS`` statement; ``DROPPED_INDEXES`` were created by older versions and are
dropped. ``create_all`` runs them all (``connection.ensure_schema``, after the
migrations); ``DDL`` is the same as one script. Tables (columns and what they hold)
are described in the package doc (``ctxkeep.sinks.sqlite``).

Stored timestamps are ISO-8601 UTC text with microseconds and ``Z``
(``timeutil.UTC_FORMAT``; ``now_iso``).
"""

from __future__ import annotations

import sqlite3

from ctxkeep.schema import CACHE_SPLIT_COLUMNS, STORED_COLUMNS, USAGE_COLUMNS

#: v2: chunks.title, fts_words(title, text) with a weighted rank;
#: v3: chunks.facets and a facets column in both FTS tables (filters inside the MATCH),
#: entries_content on (content_hash, ts); v4: quarantine.raw_sha256 (the raw line's
#: SHA-256; ``raw`` holds the redacted bytes); v5: usage.cache_creation_5m_tokens,
#: cache_creation_1h_tokens and cost_usd (the cost the agent logged); v6: ``intents``
#: (operations in flight across the stores, ``sinks.sqlite.intents``); v7: fts_grams
#: keeps ``+ # .`` in tokens (``c++``, ``c#``, ``.net``), the vocabulary ``vocab`` and
#: its trigram index ``fts_vocab`` (inner substrings). Steps: ``migrations.MIGRATIONS``.
SCHEMA_VERSION = 7
TITLE_WEIGHT = 4.0  # BM25 weight of fts_words.title relative to text

_ENTRY_DDL_TYPES = {
    "source_offset": "INTEGER",
    "text_bytes": "INTEGER",
    "token_estimate": "INTEGER",
    "is_sidechain": "INTEGER",
    **dict.fromkeys(USAGE_COLUMNS, "INTEGER"),
}
_ENTRY_COLUMNS = ", ".join(
    f"{c} {_ENTRY_DDL_TYPES.get(c, 'TEXT')}" + (" NOT NULL UNIQUE" if c == "entry_id" else "")
    for c in STORED_COLUMNS
)

TABLES: dict[str, str] = {
    "meta": "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)",
    "entries": f"CREATE TABLE IF NOT EXISTS entries(\n  rowid INTEGER PRIMARY KEY,\n  {_ENTRY_COLUMNS},\n"
    "  ingested_at TEXT\n)",
    "contents": """CREATE TABLE IF NOT EXISTS contents(
  content_id INTEGER PRIMARY KEY,
  content_hash TEXT NOT NULL UNIQUE,
  bytes INTEGER NOT NULL,
  token_estimate INTEGER,
  token_method TEXT
)""",
    "chunks": """CREATE TABLE IF NOT EXISTS chunks(
  chunk_id INTEGER PRIMARY KEY,
  content_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL,
  facets TEXT NOT NULL DEFAULT ''
)""",
    "usage": "CREATE TABLE IF NOT EXISTS usage(\n  usage_key TEXT PRIMARY KEY, agent TEXT, session_id TEXT, "
    "project_dir TEXT, ts TEXT,\n  model TEXT, "
    f"{', '.join(f'{c} INTEGER' for c in USAGE_COLUMNS)}, entry_id TEXT, "
    f"{', '.join(f'{c} INTEGER' for c in CACHE_SPLIT_COLUMNS)}, cost_usd REAL)",
    "watermarks": """CREATE TABLE IF NOT EXISTS watermarks(
  path TEXT PRIMARY KEY, agent TEXT, dev INTEGER, ino INTEGER, size INTEGER,
  mtime_ns INTEGER, offset INTEGER, head_len INTEGER, head_hash TEXT,
  parser_version INTEGER, state TEXT, updated_at TEXT)""",
    "quarantine": """CREATE TABLE IF NOT EXISTS quarantine(
  id INTEGER PRIMARY KEY, agent TEXT, path TEXT, offset INTEGER, length INTEGER,
  reason TEXT, action TEXT, raw BLOB, first_seen TEXT, raw_sha256 TEXT,
  UNIQUE(path, offset, reason))""",
    "runs": """CREATE TABLE IF NOT EXISTS runs(
  run_id INTEGER PRIMARY KEY, flow TEXT, started_at TEXT, finished_at TEXT, status TEXT,
  files INTEGER, bytes INTEGER, entries_new INTEGER, quarantined INTEGER,
  seconds REAL, detail TEXT)""",
    "tombstones": """CREATE TABLE IF NOT EXISTS tombstones(
  scope TEXT, value TEXT, created_at TEXT, PRIMARY KEY(scope, value))""",
    "status_log": """CREATE TABLE IF NOT EXISTS status_log(
  seq INTEGER PRIMARY KEY, entry_id TEXT NOT NULL, status TEXT NOT NULL, changed_at TEXT)""",
    # entry ids retention moved to the Parquet archive (``sinks.parquet``)
    "archived": "CREATE TABLE IF NOT EXISTS archived(entry_id TEXT PRIMARY KEY, archived_at TEXT)",
    # values compress moved out of kept lines of a session file (``media``)
    "media": """CREATE TABLE IF NOT EXISTS media(
  entry_id TEXT NOT NULL, seq INTEGER NOT NULL, media_type TEXT, bytes INTEGER, sha256 TEXT,
  data BLOB, added_at TEXT, PRIMARY KEY(entry_id, seq))""",
    # what a tombstone covered (session ids, source paths), so that a purge with
    # --reingest can lift it (``maintenance.purge``)
    # every distinct identifier-like token of the chunk texts once (``transforms.grams``
    # vocabulary), for inner-substring search through ``fts_vocab``
    "vocab": "CREATE TABLE IF NOT EXISTS vocab(term_id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE)",
    "purge_files": "CREATE TABLE IF NOT EXISTS purge_files("
    "scope TEXT, value TEXT, kind TEXT, item TEXT, PRIMARY KEY(scope, value, kind, item))",
    # what a Parquet lake holds of this store, per partition (``maintenance.export``):
    # the export watermark of each table (row count and digest of the rows written)
    "lake_exports": """CREATE TABLE IF NOT EXISTS lake_exports(
  dest TEXT, tbl TEXT, machine TEXT, agent TEXT, month TEXT, rows INTEGER, digest TEXT,
  files TEXT, exported_at TEXT, PRIMARY KEY(dest, tbl, machine, agent, month))""",
    # operations in flight across SQLite, DuckDB, Parquet and session files, completed
    # after a crash by the next writable command (``intents``, ``sinks.recovery``)
    "intents": """CREATE TABLE IF NOT EXISTS intents(
  intent_id INTEGER PRIMARY KEY, op TEXT NOT NULL, step TEXT NOT NULL, payload TEXT NOT NULL,
  owner TEXT, run_id INTEGER, created_at TEXT, updated_at TEXT)""",
}

FTS_TABLES: dict[str, str] = {
    # FTS5 over chunks (external content: the text is stored once); facets never rank
    "fts_words": """CREATE VIRTUAL TABLE IF NOT EXISTS fts_words USING fts5(
  title, text, facets, content='chunks', content_rowid='chunk_id',
  tokenize='porter unicode61 remove_diacritics 2')""",
    # CJK bigrams and identifier parts of chunks (rowid = chunk_id)
    "fts_grams": """CREATE VIRTUAL TABLE IF NOT EXISTS fts_grams USING fts5(
  grams, facets, tokenize="unicode61 remove_diacritics 0 tokenchars '+#.'")""",
    # trigrams of the vocabulary (external content: the terms are stored once, in vocab)
    "fts_vocab": """CREATE VIRTUAL TABLE IF NOT EXISTS fts_vocab USING fts5(
  term, content='vocab', content_rowid='term_id', tokenize='trigram', columnsize=0)""",
}

#: the default rank (BM25 column weights) of each FTS table, set by ``set_ranks``
FTS_RANKS: dict[str, str] = {
    "fts_words": f"bm25({TITLE_WEIGHT}, 1.0, 0.0)",
    "fts_grams": "bm25(1.0, 0.0)",
}

# Entries indexes, each for a query that needs it (every index costs ingest time: ~20 %
# of the entry insert for the two dropped below): session (status changes by session,
# purge, search filter), (content_hash, ts) (search loads the newest entries holding a
# hit's text; purge), source (purge's files-left check). project_dir and (agent, kind)
# are not indexed: search filters them inside the FTS match (facets), purge by project
# and stats scan every row anyway.
INDEXES: dict[str, str] = {
    "entries_session": "CREATE INDEX IF NOT EXISTS entries_session ON entries(session_id, ts)",
    "entries_content": "CREATE INDEX IF NOT EXISTS entries_content ON entries(content_hash, ts)",
    "entries_source": "CREATE INDEX IF NOT EXISTS entries_source ON entries(source_path, source_offset)",
    "chunks_content": "CREATE INDEX IF NOT EXISTS chunks_content ON chunks(content_id, seq)",
    "usage_ts": "CREATE INDEX IF NOT EXISTS usage_ts ON usage(ts)",
    "status_log_entry": "CREATE INDEX IF NOT EXISTS status_log_entry ON status_log(entry_id, changed_at)",
}
DROPPED_INDEXES = ("entries_project", "entries_agent_kind")

#: the whole schema as one script (tables, FTS tables, indexes, dropped indexes)
DDL = (
    ";\n".join(
        [
            *TABLES.values(),
            *FTS_TABLES.values(),
            *INDEXES.values(),
            *(f"DROP INDEX IF EXISTS {name}" for name in DROPPED_INDEXES),
        ]
    )
    + ";\n"
)


def create_all(conn: sqlite3.Connection) -> None:
    """Create every table, FTS table and index that is missing and drop the old
    indexes, in the caller's transaction (existing tables are left as they are: the
    migrations change them)."""
    for stmt in (*TABLES.values(), *FTS_TABLES.values(), *INDEXES.values()):
        conn.execute(stmt)
    for name in DROPPED_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")


def set_ranks(conn: sqlite3.Connection) -> None:
    """Store the default rank (``FTS_RANKS``) in both FTS tables' configuration."""
    for table, rank in FTS_RANKS.items():  # fts_vocab is never ranked
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('rank', ?)", (rank,))


__all__ = [
    "DDL",
    "DROPPED_INDEXES",
    "FTS_RANKS",
    "FTS_TABLES",
    "INDEXES",
    "SCHEMA_VERSION",
    "TABLES",
    "TITLE_WEIGHT",
    "create_all",
    "set_ranks",
]

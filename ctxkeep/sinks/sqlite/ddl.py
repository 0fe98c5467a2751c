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
#: its trigram index ``fts_vocab`` (inner substrings); v8: symbol terms move to their own
#: ``fts_symbols`` (``fts_grams`` is as in v6 again: its BM25 statistics without them);
#: v9: the entries are stored in ``entry_rows`` with the source path as ``file_id`` (into
#: ``files``) and the text as ``content_id`` (into ``contents``); ``entries`` is a view
#: with the columns of v8 (``ENTRY_ROW_COLUMNS``, ``ENTRIES_VIEW``); v10: ``project_dir``
#: and ``ingested_at`` are stored as ``project_id`` and ``ingest_id`` (into ``projects``
#: and ``ingests``), ``entries_session`` is on the session id
#: alone, and the chunks are stored in ``chunk_rows`` with a title found in the text as
#: its span (``title_stored``); ``chunks`` is a view with the v9 columns (``CHUNKS_VIEW``);
#: v11: the vault's manifest (``sinks.vault``); v12: the coverage ledger ``coverage``
#: (``sinks.sqlite.coverage``); v13: ``vault_media``, the media compress moved out of
#: a file, kept in the vault with the generation compress wrote; v14: Claude Code's usage
#: keys of lines without ``requestId`` (``migrations._claude_usage_keys``); v15:
#: ``vault_generations.rows_state``, the running state of a database session's rows
#: document (``sinks.vault.rows_capture``); v16: ``chunks_id_content``, the chunks'
#: content ids by chunk id (``INDEXES``).
#: Steps: ``migrations.MIGRATIONS``.
SCHEMA_VERSION = 16
TITLE_WEIGHT = 4.0  # BM25 weight of fts_words.title relative to text

_ENTRY_DDL_TYPES = {
    "source_offset": "INTEGER",
    "text_bytes": "INTEGER",
    "token_estimate": "INTEGER",
    "is_sidechain": "INTEGER",
    **dict.fromkeys(USAGE_COLUMNS, "INTEGER"),
}
#: entry columns stored as an integer id (v9): ``source_path`` → ``files.file_id``,
#: ``content_hash`` → ``contents.content_id`` (104 and 64 bytes per row as text, in the
#: table and in ``entries_source`` / ``entries_content``; ~0.15x of the raw JSONL)
#: (v10) ``project_dir`` → ``projects.project_id`` and ``ingested_at`` →
#: ``ingests.ingest_id`` (21 directories and 20 load stamps for 97,941 entries of the 200
#: MB bench tree: 33 and 27 bytes per row as text, 1-3 as an id)
STORED_AS_ID = {
    "source_path": "file_id",
    "content_hash": "content_id",
    "project_dir": "project_id",
    "ingested_at": "ingest_id",
}
#: (v10) the table of values of each id column that is not ``content_id`` (whose table,
#: ``contents``, holds more than the hash): ``(table, value column)``
ID_TABLES = {
    "file_id": ("files", "path"),
    "project_id": ("projects", "project_dir"),
    "ingest_id": ("ingests", "ingested_at"),
}
#: the columns of the ``entries`` view after its ``rowid``
VIEW_COLUMNS = [*STORED_COLUMNS, "ingested_at"]
#: the columns of ``entry_rows`` after its ``rowid``, in ``VIEW_COLUMNS`` order
ENTRY_ROW_COLUMNS = [STORED_AS_ID.get(c, c) for c in VIEW_COLUMNS]
_ENTRY_COLUMNS = ", ".join(
    f"{c} {'INTEGER' if c in STORED_AS_ID.values() else _ENTRY_DDL_TYPES.get(c, 'TEXT')}"
    + (" NOT NULL UNIQUE" if c == "entry_id" else "")
    for c in ENTRY_ROW_COLUMNS
)
#: what each column of the ``entries`` view is, over ``entry_rows e``: those looked
#: up by id are scalar subqueries, which SQLite evaluates only for a query that reads
#: the column (LEFT JOINs were evaluated for every row of an aggregate: ``count(*)``
#: 442 ms instead of 1 ms on the 200 MB store)
_VIEW_EXPR = {
    **{
        c: f"(SELECT {ID_TABLES[i][1]} FROM {ID_TABLES[i][0]} WHERE {i} = e.{i})"
        for c, i in STORED_AS_ID.items()
        if i in ID_TABLES
    },
    "content_hash": "(SELECT content_hash FROM contents WHERE content_id = e.content_id)",
}

#: (v10) ``chunk_rows.title`` holds a title found in its chunk's text as an integer span,
#: ``(start << 8) | length`` in characters (a title is at most
#: ``transforms.chunk.TITLE_MAX_CHARS`` = 200 < 256 characters): 32,352 of 41,405 titles
#: of the 200 MB bench tree, 4.2 MB of text; any other title (a tool name before it, or
#: none) as text. ``title_stored(t, x)`` is the SQL value stored for title ``t`` of text
#: ``x`` (the span only when SQLite's own ``substr`` gives the title back);
#: ``TITLE_OF_ROW`` the title of a ``chunk_rows`` row.
TITLE_SPAN_BITS = 8


def title_stored(t: str, x: str) -> str:
    """The SQL expression stored in ``chunk_rows.title`` for title ``t`` and chunk text
    ``x`` (two SQL expressions, e.g. ``?4``, ``c.title``): the span of ``t``'s first
    occurrence in ``x`` when ``t`` is 1-255 characters and ``substr`` gives it back
    exactly, else ``t``."""
    at = f"instr({x}, {t})"
    return (
        f"CASE WHEN length({t}) BETWEEN 1 AND {(1 << TITLE_SPAN_BITS) - 1} AND {at} > 0 "
        f"AND substr({x}, {at}, length({t})) = {t} "
        f"THEN (({at} - 1) << {TITLE_SPAN_BITS}) | length({t}) ELSE {t} END"
    )


TITLE_OF_ROW = (
    "CASE WHEN typeof(title) = 'integer' THEN "
    f"substr(text, (title >> {TITLE_SPAN_BITS}) + 1, title & {(1 << TITLE_SPAN_BITS) - 1}) ELSE title END"
)

TABLES: dict[str, str] = {
    "meta": "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)",
    # the entries (v9; before: the table ``entries``, now a view over this one)
    "entry_rows": f"CREATE TABLE IF NOT EXISTS entry_rows(\n  rowid INTEGER PRIMARY KEY,\n  {_ENTRY_COLUMNS}\n)",
    # the session files entries were read from, once each (``entry_rows.file_id``)
    "files": "CREATE TABLE IF NOT EXISTS files(file_id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)",
    # the project directories of entries, once each (``entry_rows.project_id``; v10)
    "projects": "CREATE TABLE IF NOT EXISTS projects(project_id INTEGER PRIMARY KEY, project_dir TEXT NOT NULL UNIQUE)",
    # the stamps entries were loaded at, once each (``entry_rows.ingest_id``; v10)
    "ingests": "CREATE TABLE IF NOT EXISTS ingests(ingest_id INTEGER PRIMARY KEY, ingested_at TEXT NOT NULL UNIQUE)",
    "contents": """CREATE TABLE IF NOT EXISTS contents(
  content_id INTEGER PRIMARY KEY,
  content_hash TEXT NOT NULL UNIQUE,
  bytes INTEGER NOT NULL,
  token_estimate INTEGER,
  token_method TEXT
)""",
    # the chunks (v10; before: the table ``chunks``, now a view over this one). ``title``
    # has no type: a span (integer) or a text, kept as given (``TITLE_OF_ROW``)
    "chunk_rows": """CREATE TABLE IF NOT EXISTS chunk_rows(
  chunk_id INTEGER PRIMARY KEY,
  content_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  title NOT NULL DEFAULT '',
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
    # the usage keys updated in place or deleted (``USAGE_LOG_TRIGGERS``): what a DuckDB
    # sync compares beside the rows above its rowid mark (``sinks.duckdb.sync_usage``);
    # ``gone_rowid``: a deleted row's rowid (a new row may take it again); a NULL key:
    # compare every row (a migration ran); rows below the seq DuckDB holds are pruned
    # (``sync_marks.mark_analytics_synced``), the last kept (its seq is the mark)
    "usage_log": """CREATE TABLE IF NOT EXISTS usage_log(
  seq INTEGER PRIMARY KEY, usage_key TEXT, gone_rowid INTEGER)""",
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
    # the coverage ledger (v12): per session file and agent version, what its reader
    # saw, parsed, quarantined and did not understand (``sinks.sqlite.coverage``)
    "coverage": """CREATE TABLE IF NOT EXISTS coverage(
  agent TEXT NOT NULL, path TEXT NOT NULL, agent_version TEXT NOT NULL, parser_version INTEGER,
  records INTEGER NOT NULL DEFAULT 0, parsed INTEGER NOT NULL DEFAULT 0, entries INTEGER NOT NULL DEFAULT 0,
  quarantined INTEGER NOT NULL DEFAULT 0, unknown TEXT NOT NULL DEFAULT '{}', updated_at TEXT,
  PRIMARY KEY(path, agent_version))""",
    "intents": """CREATE TABLE IF NOT EXISTS intents(
  intent_id INTEGER PRIMARY KEY, op TEXT NOT NULL, step TEXT NOT NULL, payload TEXT NOT NULL,
  owner TEXT, run_id INTEGER, created_at TEXT, updated_at TEXT)""",
    # the vault's manifest (v11, ``sinks.vault``): pack files of zstd objects, the
    # objects by SHA-256 of their (redacted) bytes, the agents' files and their
    # generations, an append file's segments in order
    # the old entry ids of the files ``reparse --rekey`` keyed anew, each with its new id
    # (``query.fetch.resolve_ids`` follows them; session 17, no schema version: made
    # empty by every writable open, a rekey fills it)
    "entry_aliases": "CREATE TABLE IF NOT EXISTS entry_aliases(old_id TEXT NOT NULL, new_id TEXT NOT NULL, "
    "PRIMARY KEY (old_id, new_id)) WITHOUT ROWID",
    "vault_packs": """CREATE TABLE IF NOT EXISTS vault_packs(
  pack_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, bytes INTEGER NOT NULL, created_at TEXT)""",
    "vault_objects": """CREATE TABLE IF NOT EXISTS vault_objects(
  sha BLOB PRIMARY KEY, pack_id INTEGER NOT NULL, offset INTEGER NOT NULL, stored INTEGER NOT NULL,
  raw INTEGER NOT NULL) WITHOUT ROWID""",
    "vault_files": """CREATE TABLE IF NOT EXISTS vault_files(
  vfile_id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, agent TEXT NOT NULL, mode TEXT NOT NULL,
  meta TEXT)""",
    "vault_generations": """CREATE TABLE IF NOT EXISTS vault_generations(
  gen_id INTEGER PRIMARY KEY, vfile_id INTEGER NOT NULL, gen INTEGER NOT NULL, start INTEGER NOT NULL,
  length INTEGER NOT NULL, stored INTEGER NOT NULL, dev INTEGER, ino INTEGER, size INTEGER,
  mtime_ns INTEGER, created_at TEXT, updated_at TEXT, redactions TEXT, doc_sha BLOB, chunks BLOB,
  rows_state TEXT, UNIQUE(vfile_id, gen))""",
    "vault_segments": """CREATE TABLE IF NOT EXISTS vault_segments(
  gen_id INTEGER NOT NULL, seq INTEGER NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL,
  sha BLOB NOT NULL, skip INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(gen_id, seq)) WITHOUT ROWID""",
    # (v13) what compress moved out of a file into the store's ``media`` table, kept
    # with the generation it wrote: the entry, its seq, the media type, the object's
    # SHA-256 and whether the value was text (stored UTF-8)
    "vault_media": """CREATE TABLE IF NOT EXISTS vault_media(
  gen_id INTEGER NOT NULL, entry_id TEXT NOT NULL, seq INTEGER NOT NULL, media_type TEXT NOT NULL,
  sha BLOB NOT NULL, text INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(gen_id, entry_id, seq)) WITHOUT ROWID""",
}

#: the tokenizer of the word index ``fts_words`` (``vocab.index_terms`` stems words with it)
WORDS_TOKENIZE = "porter unicode61 remove_diacritics 2"
#: the ``temp`` tables of "did you mean" (``vocab``; per connection, in memory, so a
#: read-only connection makes them too): the word index's terms with the chunks holding
#: each (``fts5vocab`` of type ``row``: a row counts its term's whole posting list, ~40 ms
#: for ``the`` on a 10 GB store), its term instances (type ``instance``: the first row of
#: a term range answers whether the index holds a term, without counting: ~0.1 ms), and
#: a probe table with the word index's tokenizer and its tokens (``fts5vocab`` of type
#: ``instance``), which stems words
TEMP_VOCAB_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_words_terms USING fts5vocab(main, fts_words, row)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_words_instances USING fts5vocab(main, fts_words, instance)",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.term_probe USING fts5(w, tokenize='{WORDS_TOKENIZE}')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.term_probe_terms USING fts5vocab(temp, term_probe, instance)",
)

FTS_TABLES: dict[str, str] = {
    # FTS5 over chunks (external content: the text is stored once); facets never rank
    "fts_words": f"""CREATE VIRTUAL TABLE IF NOT EXISTS fts_words USING fts5(
  title, text, facets, content='chunks', content_rowid='chunk_id',
  tokenize='{WORDS_TOKENIZE}')""",
    # CJK bigrams and identifier parts of chunks (rowid = chunk_id). Contentless (v8):
    # the terms are never read back, only matched and ranked; a row is deleted with
    # the values it was inserted with, recomputed from the chunk (``fts.delete_chunk_rows``)
    "fts_grams": """CREATE VIRTUAL TABLE IF NOT EXISTS fts_grams USING fts5(
  grams, facets, content='', tokenize='unicode61 remove_diacritics 0')""",
    # symbol terms (c++, c#, .net) and the ASCII words of the chunks holding one
    # (rowid = chunk_id; ``transforms.grams.symbols``); contentless as fts_grams, and
    # never queried by phrase (detail=column)
    "fts_symbols": """CREATE VIRTUAL TABLE IF NOT EXISTS fts_symbols USING fts5(
  terms, facets, content='', tokenize="unicode61 remove_diacritics 0 tokenchars '+#.'", detail=column)""",
    # trigrams of the vocabulary (external content: the terms are stored once, in vocab)
    "fts_vocab": """CREATE VIRTUAL TABLE IF NOT EXISTS fts_vocab USING fts5(
  term, content='vocab', content_rowid='term_id', tokenize='trigram', columnsize=0)""",
}

#: ``entries``: the entries with the columns of the v8 table (``rowid``, ``STORED_COLUMNS``,
#: ``ingested_at``; ``source_path`` and ``content_hash`` looked up by their ids), for
#: every reader. A filter on either of those two scans the entries (their indexes are on
#: the ids): the readers that filter or join on them read ``entry_rows`` with the ids
#: (``delete``, ``status``, search, ``doctor``). Writers write
#: ``entry_rows`` (``load``, ``status``, ``delete``, ``retext``); the view is writable
#: too (``ENTRIES_TRIGGERS``), for the odd statement that is not on a hot path.
ENTRIES_VIEW = (
    "CREATE VIEW IF NOT EXISTS entries AS SELECT e.rowid AS rowid, "
    + ", ".join(f"{_VIEW_EXPR.get(c, 'e.' + c)} AS {c}" for c in VIEW_COLUMNS)
    + " FROM entry_rows e"
)
#: ``chunks``: the chunks with the columns of the v9 table, titles as text (v10), for
#: every reader and as ``fts_words``' external content. Writers write ``chunk_rows``.
CHUNKS_VIEW = (
    "CREATE VIEW IF NOT EXISTS chunks AS SELECT chunk_id, content_id, seq, "
    f"{TITLE_OF_ROW} AS title, text, facets FROM chunk_rows"
)

_VIEW_OF_ID = {i: c for c, i in STORED_AS_ID.items()}
_VALUES_OF_NEW = "".join(
    f"INSERT OR IGNORE INTO {t}({v}) SELECT NEW.{_VIEW_OF_ID[i]} WHERE NEW.{_VIEW_OF_ID[i]} IS NOT NULL;\n"
    for i, (t, v) in ID_TABLES.items()
)
_ID_OF_NEW = {
    **{i: f"(SELECT {i} FROM {t} WHERE {v} = NEW.{_VIEW_OF_ID[i]})" for i, (t, v) in ID_TABLES.items()},
    # a hash without a ``contents`` row has no id: the entry keeps no text
    "content_id": "(SELECT content_id FROM contents WHERE content_hash = NEW.content_hash)",
}
_ID_KEEP = {
    i: f"CASE WHEN NEW.{c} IS OLD.{c} THEN {i} ELSE {_ID_OF_NEW[i]} END" for c, i in STORED_AS_ID.items()
}
_IDS = set(STORED_AS_ID.values())
#: INSTEAD OF triggers that make the ``entries`` view writable (INSERT, UPDATE,
#: DELETE through ``entry_rows``; an INSERT's or UPDATE's conflict clause applies to
#: the statements inside, SQLite's rule for triggers)
ENTRIES_TRIGGERS: dict[str, str] = {
    "entries_insert": "CREATE TRIGGER IF NOT EXISTS entries_insert INSTEAD OF INSERT ON entries BEGIN\n"
    + _VALUES_OF_NEW
    + f"INSERT INTO entry_rows(rowid, {', '.join(ENTRY_ROW_COLUMNS)}) VALUES(NEW.rowid, "
    + ", ".join(_ID_OF_NEW[c] if c in _IDS else f"NEW.{c}" for c in ENTRY_ROW_COLUMNS)
    + ");\nEND",
    "entries_update": "CREATE TRIGGER IF NOT EXISTS entries_update INSTEAD OF UPDATE ON entries BEGIN\n"
    + _VALUES_OF_NEW
    + "UPDATE entry_rows SET "
    + ", ".join(f"{c} = {_ID_KEEP[c] if c in _IDS else 'NEW.' + c}" for c in ENTRY_ROW_COLUMNS)
    + " WHERE rowid = OLD.rowid;\nEND",
    "entries_delete": "CREATE TRIGGER IF NOT EXISTS entries_delete INSTEAD OF DELETE ON entries BEGIN\n"
    "DELETE FROM entry_rows WHERE rowid = OLD.rowid;\nEND",
}

#: AFTER triggers that log every in-place change of ``usage`` (UPDATE: the old key, and
#: the new one when it differs; DELETE: the key and its rowid) in ``usage_log``, whatever
#: the path (an ingest's upsert, purge, retention, a migration's re-keying, doctor, a
#: wholly new statement), so that DuckDB's sync compares only those rows and the rows
#: above the rowid it holds (an insert gets a new rowid: not logged). In the schema
#: from session 23 without a version (added by ``create_all`` on a writable open, as
#: ``usage_log``; an older ctxkeep writing the store fires them too)
USAGE_LOG_TRIGGERS: dict[str, str] = {
    "usage_logged_update": "CREATE TRIGGER IF NOT EXISTS usage_logged_update AFTER UPDATE ON usage BEGIN\n"
    "INSERT INTO usage_log(usage_key) VALUES(OLD.usage_key);\n"
    "INSERT INTO usage_log(usage_key) SELECT NEW.usage_key WHERE NEW.usage_key IS NOT OLD.usage_key;\nEND",
    "usage_logged_delete": "CREATE TRIGGER IF NOT EXISTS usage_logged_delete AFTER DELETE ON usage BEGIN\n"
    "INSERT INTO usage_log(usage_key, gone_rowid) VALUES(OLD.usage_key, OLD.rowid);\nEND",
}

#: the default rank (BM25 column weights) of each FTS table, set by ``set_ranks``
FTS_RANKS: dict[str, str] = {
    "fts_words": f"bm25({TITLE_WEIGHT}, 1.0, 0.0)",
    "fts_grams": "bm25(1.0, 0.0)",
    "fts_symbols": "bm25(1.0, 0.0)",
}

#: the contentless FTS tables keyed by chunk id, each with its terms column (``fts_words``
#: is external content over ``chunks``); their terms are ``transforms.grams`` functions
#: of the chunk text (``fts.CHUNK_TERMS``)
CHUNK_FTS_TABLES: dict[str, str] = {"fts_grams": "grams", "fts_symbols": "terms"}

# Entries indexes, each for a query that needs it (every index costs ingest time: ~20 %
# of the entry insert for the two dropped below): session (status changes by session,
# purge, search filter, session id prefixes; v10: without ``ts``, which no query reads
# from it: 3 MB of the 200 MB bench store), (content_id, ts) (search loads the newest entries holding a
# hit's text; purge), source (purge's files-left check). project_dir and (agent, kind)
# are not indexed: search filters them inside the FTS match (facets), purge by project
# and stats scan every row anyway.
#: the agents whose lines Claude Code's parser keys (``sources.claude_code.IDS_META``)
UUID_KEYED_AGENTS = ("claude-code", "openclaude", "cowork")
#: a ``watermarks`` row of a file its store keyed by uuid alone (``claude_code.legacy_ids``:
#: a state without ``ids``, or ``"uuid"``), the WHERE of the partial index
#: ``watermarks_uuid_keyed`` (session 17: no schema version; every writable open makes
#: it) that ``lookup.uuid_keyed_files`` searches: empty once ``reparse --rekey`` ran or
#: in a store made since, so the ingest's and doctor's question costs ~5 µs (a scan of
#: the 200 MB tree's 523 rows: ~1 ms)
UUID_KEYED_WHERE = (
    f"agent IN ({', '.join(repr(a) for a in UUID_KEYED_AGENTS)}) "
    "AND coalesce(json_extract(state, '$.ids'), 'uuid') = 'uuid'"
)

#: the index of (chunk id, content id) (v16): SQLite's planner prefers the table's
#: rowid, so its readers name it (``INDEXED BY``)
CHUNK_ID_INDEX = "chunks_id_content"

INDEXES: dict[str, str] = {
    "entries_session": "CREATE INDEX IF NOT EXISTS entries_session ON entry_rows(session_id)",
    "entries_content": "CREATE INDEX IF NOT EXISTS entries_content ON entry_rows(content_id, ts)",
    "entries_source": "CREATE INDEX IF NOT EXISTS entries_source ON entry_rows(file_id, source_offset)",
    "chunks_content": "CREATE INDEX IF NOT EXISTS chunks_content ON chunk_rows(content_id, seq)",
    # (v16) a chunk's content id without a seek into its 6.7 GB table at 10 GB, where each
    # chunk is a random leaf (search's filter check, ``retrieve.passing``): 5,000 random
    # chunks 30 -> 12 ms CPU; 24 MB for 2.0 M chunks. SQLite keeps it on every insert and
    # delete, so no delete path (purge, retention, reparse, reindex, compress, restore)
    # has anything to do for it.
    "chunks_id_content": f"CREATE INDEX IF NOT EXISTS {CHUNK_ID_INDEX} ON chunk_rows(chunk_id, content_id)",
    "usage_ts": "CREATE INDEX IF NOT EXISTS usage_ts ON usage(ts)",
    "status_log_entry": "CREATE INDEX IF NOT EXISTS status_log_entry ON status_log(entry_id, changed_at)",
    "watermarks_uuid_keyed": f"CREATE INDEX IF NOT EXISTS watermarks_uuid_keyed ON watermarks(agent) WHERE {UUID_KEYED_WHERE}",
}
DROPPED_INDEXES = ("entries_project", "entries_agent_kind")

#: the whole schema as one script (tables, FTS tables, indexes, dropped indexes)
DDL = (
    ";\n".join(
        [
            *TABLES.values(),
            *FTS_TABLES.values(),
            ENTRIES_VIEW,
            CHUNKS_VIEW,
            *ENTRIES_TRIGGERS.values(),
            *USAGE_LOG_TRIGGERS.values(),
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
    for stmt in (
        *TABLES.values(),
        *FTS_TABLES.values(),
        ENTRIES_VIEW,
        CHUNKS_VIEW,
        *ENTRIES_TRIGGERS.values(),
        *USAGE_LOG_TRIGGERS.values(),
        *INDEXES.values(),
    ):
        conn.execute(stmt)
    for name in DROPPED_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")


def set_ranks(conn: sqlite3.Connection) -> None:
    """Store the default rank (``FTS_RANKS``) in the ranked FTS tables' configuration."""
    for table, rank in FTS_RANKS.items():  # fts_vocab is never ranked
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('rank', ?)", (rank,))


__all__ = [
    "CHUNKS_VIEW",
    "CHUNK_FTS_TABLES",
    "DDL",
    "DROPPED_INDEXES",
    "ENTRIES_TRIGGERS",
    "USAGE_LOG_TRIGGERS",
    "ENTRIES_VIEW",
    "ENTRY_ROW_COLUMNS",
    "FTS_RANKS",
    "FTS_TABLES",
    "ID_TABLES",
    "INDEXES",
    "SCHEMA_VERSION",
    "STORED_AS_ID",
    "TABLES",
    "TEMP_VOCAB_TABLES",
    "TITLE_OF_ROW",
    "TITLE_WEIGHT",
    "VIEW_COLUMNS",
    "WORDS_TOKENIZE",
    "create_all",
    "set_ranks",
    "title_stored",
]

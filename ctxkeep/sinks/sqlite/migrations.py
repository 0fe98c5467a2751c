"""Named, ordered migrations of the SQLite store's schema.

``MIGRATIONS`` lists ``(version, name, step)``: ``step(conn)`` brings a store at
``version - 1`` to ``version`` (columns and data; new tables and indexes come from
``ddl.create_all``, which runs after). ``migrate`` runs the steps a store lacks, in
order, in the caller's transaction, then rebuilds both FTS tables once (unless every
step run has ``rebuilds_fts`` False) and records
``ddl.SCHEMA_VERSION``. v1 was the first schema: every store has a step to today.

``ensure_identity`` is the one step that runs on every writable open rather than by
version ("store identity": it adds rows and header fields, no column, so no version
bump and no FTS rebuild): a store without ``meta.store_id`` gets one, and one without
``meta.machine_id`` (``sinks.machine``) gets that.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import uuid
from collections.abc import Callable
from typing import NamedTuple

from ctxkeep.sinks.sqlite import ddl
from ctxkeep.sinks.sqlite.ddl import SCHEMA_VERSION, TABLES
from ctxkeep.sinks.sqlite.fts import rebuild_fts_tables, refresh_facets
from ctxkeep.sinks.sqlite.store_safety import APPLICATION_ID, header_id
from ctxkeep.timeutil import now_iso

log = logging.getLogger(__name__)
#: an upgrade's phases, one INFO record each (``phase``), for a front end to show while
#: it runs (the CLI's status line, ``cli.upgrade``); nothing is shown without a handler
phases = logging.getLogger("ctxkeep.upgrade")


def phase(text: str, done: int | None = None, total: int | None = None) -> None:
    """Report an upgrade phase (``text``, e.g. ``"copying entries"``) on the
    ``ctxkeep.upgrade`` logger, with ``done`` of ``total`` rows when the phase counts
    them; the record's ``progress`` is ``(done, total)`` or None."""
    phases.info(text, extra={"progress": None if total is None else (done or 0, total)})


class Migration(NamedTuple):
    """One schema step: ``version`` it produces, a short ``name``, the ``step``, and
    whether the FTS tables must be rebuilt after it (``fts``; a step that only adds a
    table does not touch them)."""

    version: int
    name: str
    step: Callable[[sqlite3.Connection], None]
    #: False: the step touches no text, chunk or facet (the FTS tables stay valid)
    rebuilds_fts: bool = True
    #: True: the step frees a good part of the file (a table rewritten smaller): the
    #: store is vacuumed once after the migration commits (``connection.ensure_schema``)
    frees_space: bool = False


def _chunk_titles(conn: sqlite3.Connection) -> None:
    """v1 → v2: add ``chunks.title``, filled from the chunk texts
    (``transforms.chunk.chunk_title``; the first chunk of a tool's text is prefixed
    with the tool name)."""
    from ctxkeep.transforms.chunk import chunk_title

    conn.execute("ALTER TABLE chunks ADD COLUMN title TEXT NOT NULL DEFAULT ''")
    tools = dict(
        conn.execute(
            "SELECT content_hash, min(tool_name) FROM entries "
            "WHERE tool_name IS NOT NULL GROUP BY content_hash"
        ).fetchall()
    )
    rows = conn.execute(
        "SELECT ch.chunk_id, ch.seq, ch.text, c.content_hash FROM chunks ch "
        "JOIN contents c ON c.content_id = ch.content_id"
    ).fetchall()
    conn.executemany(
        "UPDATE chunks SET title=? WHERE chunk_id=?",
        [
            ((f"{tools[h]} " if s == 0 and h in tools else "") + chunk_title(t, s), cid)
            for cid, s, t, h in rows
        ],
    )


def _chunk_facets(conn: sqlite3.Connection) -> None:
    """v2 → v3: add ``chunks.facets`` (``fts.refresh_facets``); ``entries_content``
    becomes (content_hash, ts) (dropped here, recreated by ``ddl.create_all``)."""
    conn.execute("DROP INDEX IF EXISTS entries_content")
    conn.execute("ALTER TABLE chunks ADD COLUMN facets TEXT NOT NULL DEFAULT ''")
    refresh_facets(conn, "chunks")  # a table until v10


def _quarantine_redacted(conn: sqlite3.Connection) -> None:
    """v3 → v4: add ``quarantine.raw_sha256`` (SHA-256 hex of the raw line, computed
    from the stored bytes while they are still raw and complete) and redact the stored
    ``raw`` bytes and ``reason`` (``transforms.redact``): before v4 a quarantined line
    was stored as read, secrets included."""

    from ctxkeep.transforms.redact import redact, redact_bytes

    if "raw_sha256" not in {r[1] for r in conn.execute("PRAGMA table_info(quarantine)")}:
        conn.execute("ALTER TABLE quarantine ADD COLUMN raw_sha256 TEXT")
    rows = conn.execute("SELECT id, raw, length, reason FROM quarantine").fetchall()
    conn.executemany(
        "UPDATE quarantine SET raw_sha256=?, raw=?, reason=? WHERE id=?",
        [
            (
                hashlib.sha256(raw).hexdigest() if raw is not None and len(raw) == length else None,
                None if raw is None else redact_bytes(bytes(raw)),
                None if reason is None else redact(reason),
                qid,
            )
            for qid, raw, length, reason in rows
        ],
    )


def _usage_split_and_cost(conn: sqlite3.Connection) -> None:
    """v4 → v5: add ``usage.cache_creation_5m_tokens``, ``cache_creation_1h_tokens``
    (tokens) and ``cost_usd`` (USD, the cost the agent logged), all NULL for the rows
    stored before: ``ctxkeep backfill`` re-reads their files and fills them
    (``load.load_batch`` fills a NULL from a re-read row)."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(usage)")}
    for col, typ in (
        ("cache_creation_5m_tokens", "INTEGER"),
        ("cache_creation_1h_tokens", "INTEGER"),
        ("cost_usd", "REAL"),
    ):
        if col not in have:
            conn.execute(f"ALTER TABLE usage ADD COLUMN {col} {typ}")


def _intents(conn: sqlite3.Connection) -> None:
    """v5 → v6: the ``intents`` table (``sinks.sqlite.intents``), created by
    ``ddl.create_all``; no existing row changes."""


def _symbol_grams_vocab(conn: sqlite3.Connection) -> None:
    """v6 → v7: ``fts_grams`` keeps ``+ # .`` in its tokens (``c++``, ``c#``,
    ``.net``: ``transforms.grams``) and the vocabulary tables ``vocab`` / ``fts_vocab``
    appear. Both FTS tables are recreated and filled by the rebuild that follows every
    migration (``fts.rebuild_fts_tables``); the ``vocab`` table is created here so the
    rebuild can fill it."""

    conn.execute(TABLES["vocab"])


def _symbols_table(conn: sqlite3.Connection) -> None:
    """v7 → v8: symbol terms move from ``fts_grams`` to their own ``fts_symbols``
    (``transforms.grams.symbols``), and ``fts_grams`` gets back the v6 tokenizer and
    rows, so its BM25 statistics are what they were before v7. Both tables are
    recreated and filled by the rebuild that follows (``fts.rebuild_fts_tables``); no
    other table changes."""


def _entry_ids(conn: sqlite3.Connection) -> None:
    """v8 → v9: the table ``entries`` becomes ``entry_rows`` with the source path as
    ``file_id`` (into the new ``files``, one row per path, numbered in the order the
    paths were first stored) and the content hash as ``content_id`` (``contents``); the
    view ``entries`` (``ddl.ENTRIES_VIEW``) has the v8 columns. Rowids are kept (the
    DuckDB sync's mark is a rowid). An entry whose hash has no ``contents`` row (a
    damaged store; ``doctor`` names them) keeps its hash: the hash gets a ``contents``
    row without chunks (``bytes`` the entry's ``text_bytes``). A store whose ``entries``
    is already the view is left alone. Rows are copied in one ``INSERT … SELECT``, in
    the caller's transaction: a crash leaves the v8 store as it was. The table made is
    today's ``entry_rows`` (v10: with the project dirs and load stamps as ids too,
    which step 10 then leaves alone)."""

    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = 'entries'").fetchone()
    if kind is None or kind[0] == "view":
        return
    for table in ("files", "projects", "ingests", "entry_rows"):
        conn.execute(ddl.TABLES[table])
    orphans = conn.execute(
        "INSERT INTO contents(content_hash, bytes, token_estimate) SELECT e.content_hash, "
        "coalesce(max(e.text_bytes), 0), max(e.token_estimate) FROM entries e WHERE e.content_hash IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM contents c WHERE c.content_hash = e.content_hash) GROUP BY e.content_hash"
    ).rowcount
    if orphans > 0:
        log.warning("ctxkeep: %d content hashes of entries had no contents row; kept without text", orphans)
    _fill_entry_rows(conn, "entries", set(ddl.STORED_AS_ID))
    conn.execute("DROP TABLE entries")  # and its indexes
    # the view and the indexes now, not in ``create_all``: the FTS rebuild of an older
    # store's migration reads ``entries`` before ``create_all`` runs
    for stmt in (ddl.ENTRIES_VIEW, *ddl.ENTRIES_TRIGGERS.values()):
        conn.execute(stmt)
    for name in _ENTRY_INDEXES:
        conn.execute(ddl.INDEXES[name])


_ENTRY_INDEXES = ("entries_session", "entries_content", "entries_source")


def _fill_entry_rows(conn: sqlite3.Connection, src: str, as_text: set[str]) -> None:
    """Copy every row of table ``src`` into the (new, empty) ``entry_rows``, rowids
    kept, in rowid order; the columns of ``as_text`` (of ``ddl.STORED_AS_ID``) are text
    in ``src`` and become their ids: ``files`` and ``contents`` hold their values
    already (the caller adds them), ``ingests`` gets the load stamps here, numbered in
    the order they were first stored."""

    tables = {**ddl.ID_TABLES, "content_id": ("contents", "content_hash")}
    ids = {ddl.STORED_AS_ID[c]: c for c in as_text}  # id column -> its text column in src
    for i, c in ids.items():
        table, col = tables[i]
        if i in ddl.ID_TABLES:
            conn.execute(
                f"INSERT OR IGNORE INTO {table}({col}) SELECT {c} FROM {src} WHERE {c} IS NOT NULL "
                f"GROUP BY {c} ORDER BY min(rowid)"
            )
    conn.execute(
        f"INSERT INTO entry_rows(rowid, {', '.join(ddl.ENTRY_ROW_COLUMNS)}) SELECT s.rowid, "
        + ", ".join(f"{col}.{col}" if col in ids else f"s.{col}" for col in ddl.ENTRY_ROW_COLUMNS)
        + f" FROM {src} s "
        + " ".join(f"LEFT JOIN {tables[i][0]} {i} ON {i}.{tables[i][1]} = s.{c}" for i, c in ids.items())
        + " ORDER BY s.rowid"
    )


def _stamp_ids_chunk_spans(conn: sqlite3.Connection) -> None:
    """v9 → v10: ``entry_rows.project_dir`` and ``ingested_at`` (text) become
    ``project_id`` and ``ingest_id`` (into the new ``projects`` and ``ingests``, one row
    per directory and load stamp), ``entries_session`` loses ``ts``, and the table
    ``chunks`` becomes ``chunk_rows`` with each title found in its text stored as its
    span (``ddl.title_stored``); ``chunks`` becomes the view ``ddl.CHUNKS_VIEW``, whose
    titles are the stored ones, so ``fts_words`` (external content ``chunks``) stays
    valid without a rebuild. Rowids and chunk ids are kept (the DuckDB sync's mark is a
    rowid). A store already in this shape (a v8 store's step 9 made the v10
    ``entry_rows``) is left as it is. In the caller's transaction: a crash leaves the
    v9 store as it was."""

    conn.execute(ddl.TABLES["projects"])
    conn.execute(ddl.TABLES["ingests"])
    cols = {r[1] for r in conn.execute("PRAGMA table_info(entry_rows)")}
    if "ingested_at" in cols:
        phase("copying entries")
        conn.execute("DROP VIEW IF EXISTS entries")  # and its triggers
        conn.execute("ALTER TABLE entry_rows RENAME TO entry_rows_v9")
        conn.execute(ddl.TABLES["entry_rows"])
        _fill_entry_rows(conn, "entry_rows_v9", {"project_dir", "ingested_at"})
        phase("indexing entries")
        conn.execute("DROP TABLE entry_rows_v9")  # and its indexes
        for stmt in (ddl.ENTRIES_VIEW, *ddl.ENTRIES_TRIGGERS.values()):
            conn.execute(stmt)
        for name in _ENTRY_INDEXES:
            conn.execute(ddl.INDEXES[name])
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = 'chunks'").fetchone()
    if kind is not None and kind[0] == "table":
        phase("copying chunks")
        conn.execute(ddl.TABLES["chunk_rows"])
        conn.execute(
            "INSERT INTO chunk_rows(chunk_id, content_id, seq, title, text, facets) SELECT chunk_id, "
            f"content_id, seq, {ddl.title_stored('title', 'text')}, text, facets FROM chunks ORDER BY chunk_id"
        )
        conn.execute("DROP TABLE chunks")  # and chunks_content
        conn.execute(ddl.CHUNKS_VIEW)
        conn.execute(ddl.INDEXES["chunks_content"])


def _vault_manifest(conn: sqlite3.Connection) -> None:
    """v11: the vault's manifest tables (``vault_packs``, ``vault_objects``,
    ``vault_files``, ``vault_generations``, ``vault_segments``), created empty by
    ``ddl.create_all``; no existing row changes. The next ingest reads every session
    file the vault does not hold once from byte 0 (``pipeline.plan``), so the vault
    takes in what the agents still keep."""


def _coverage(conn: sqlite3.Connection) -> None:
    """v12: the coverage ledger (``coverage``), empty: files read before it are
    counted when read again (a parser change re-reads them whole)."""
    from ctxkeep.sinks.sqlite import ddl

    conn.execute(ddl.TABLES["coverage"])


def _vault_media(conn: sqlite3.Connection) -> None:
    """v13: the vault's ``vault_media`` (media compress moves out of a file), empty:
    a compress run before it kept its media in ``media`` only."""
    from ctxkeep.sinks.sqlite import ddl

    conn.execute(ddl.TABLES["vault_media"])


def _claude_usage_keys(conn: sqlite3.Connection) -> None:
    """v14: Claude Code's usage of a response whose lines carry no ``requestId`` is
    keyed by ``"<message.id>:"`` (parser v4; it was ``"line:<record id>"``, one row per
    line, each repeating the response's usage: counted once per line). Per message id,
    the row of the first line (file order) is kept under the new key, the others go,
    and every entry that named one of the old keys names the new one: the store is as
    a v4 parse makes it, so the re-read the parser bump starts (or a reparse) adds
    nothing and doubles nothing."""
    rows = conn.execute(
        "SELECT u.usage_key, e.message_id FROM usage u JOIN entry_rows e ON e.entry_id = u.entry_id "
        "WHERE u.agent = 'claude-code' AND u.usage_key LIKE 'line:%' AND e.message_id IS NOT NULL "
        "AND e.message_id != '' AND (e.request_id IS NULL OR e.request_id = '') "
        "ORDER BY e.message_id, e.file_id, e.source_offset, e.entry_id"
    ).fetchall()
    if not rows:
        return
    conn.execute("CREATE TEMP TABLE _v14(old TEXT PRIMARY KEY, new TEXT, keep INTEGER)")
    seen: set[str] = set()
    vals = []
    for old, mid in rows:
        new = f"{mid}:"
        vals.append((old, new, int(new not in seen)))
        seen.add(new)
    conn.executemany("INSERT OR IGNORE INTO _v14 VALUES(?,?,?)", vals)
    # a key a v4 read stored already (the same message in another file) keeps its row
    conn.execute("UPDATE _v14 SET keep = 0 WHERE new IN (SELECT usage_key FROM usage)")
    conn.execute("DELETE FROM usage WHERE usage_key IN (SELECT old FROM _v14 WHERE keep = 0)")
    conn.execute(
        "UPDATE usage SET usage_key = (SELECT new FROM _v14 WHERE old = usage.usage_key) "
        "WHERE usage_key IN (SELECT old FROM _v14 WHERE keep = 1)"
    )
    conn.execute(
        "UPDATE entry_rows SET usage_key = (SELECT new FROM _v14 WHERE old = entry_rows.usage_key) "
        "WHERE usage_key IN (SELECT old FROM _v14)"
    )
    conn.execute("DROP TABLE _v14")


def _rows_state(conn: sqlite3.Connection) -> None:
    """v15: ``vault_generations.rows_state`` (``sinks.vault.rows_capture``), NULL for
    every generation held: their ``doc_sha`` stays the SHA-256 of their bytes and they
    read as before; a database session's next version is then captured whole, and the
    ones after it are built on it."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(vault_generations)")}
    if "rows_state" not in cols:
        conn.execute("ALTER TABLE vault_generations ADD COLUMN rows_state TEXT")


def _chunk_id_index(conn: sqlite3.Connection) -> None:
    """v16: ``chunks_id_content`` (``ddl.INDEXES``), the chunks' content ids by chunk
    id, built from ``chunk_rows`` (10 GB store, 2.0 M chunks: 4.4 CPU s, 18 s wall on a
    busy host, 24 MB); no row changes."""
    from ctxkeep.sinks.sqlite import ddl

    phase("indexing the chunks' content ids")
    conn.execute(ddl.INDEXES["chunks_id_content"])


MIGRATIONS: list[Migration] = [
    Migration(2, "chunk titles", _chunk_titles),
    Migration(3, "chunk facets", _chunk_facets),
    Migration(4, "quarantine redacted, raw_sha256", _quarantine_redacted),
    Migration(5, "usage cache-write split and logged cost", _usage_split_and_cost, rebuilds_fts=False),
    Migration(6, "operation intents", _intents, rebuilds_fts=False),
    Migration(7, "symbol terms and the vocabulary", _symbol_grams_vocab),
    Migration(8, "symbol terms in their own FTS table", _symbols_table),
    Migration(9, "entries store file and content ids", _entry_ids, rebuilds_fts=False, frees_space=True),
    Migration(
        10,
        "project dirs and load stamps as ids, chunk titles as spans",
        _stamp_ids_chunk_spans,
        rebuilds_fts=False,
        frees_space=True,
    ),
    Migration(11, "the vault manifest", _vault_manifest, rebuilds_fts=False),
    Migration(12, "the coverage ledger", _coverage, rebuilds_fts=False),
    Migration(13, "the vault's media", _vault_media, rebuilds_fts=False),
    Migration(14, "Claude Code usage keyed by message id", _claude_usage_keys, rebuilds_fts=False),
    Migration(15, "the rows documents' running state", _rows_state, rebuilds_fts=False),
    Migration(16, "the chunks' content ids by chunk id", _chunk_id_index, rebuilds_fts=False),
]
assert MIGRATIONS[-1].version == SCHEMA_VERSION, "a schema version without its migration"


def migrate(conn: sqlite3.Connection, version: int) -> list[str]:
    """Bring a store at schema ``version`` to ``SCHEMA_VERSION`` in the caller's
    transaction: each step of ``MIGRATIONS`` past ``version``, then one rebuild of both
    FTS tables (``fts.rebuild_fts_tables``: ~2 min for a 500 MB store on 2 busy cores; skipped when no
    step run needs it), then the new
    version in ``meta``. A new store (``version`` 0) or a current one is left alone.
    Returns the names of the steps run (logged as a warning, the rebuild takes time)."""
    todo = [m for m in MIGRATIONS if m.version > version]
    if not version or not todo:
        return []
    fts = any(m.rebuilds_fts for m in todo)
    log.warning(
        "ctxkeep: upgrading the store from schema v%d to v%d%s",
        version,
        SCHEMA_VERSION,
        " (the search indexes are rebuilt once; 1-2 min per 500 MB)" if fts else "",
    )
    for i, m in enumerate(todo, 1):
        phase(f"step {i}/{len(todo)}: v{m.version} {m.name}")
        m.step(conn)
    if fts:
        phase("rebuilding the search indexes")
        rebuild_fts_tables(
            conn, progress=lambda done, total: phase("rebuilding the search indexes", done, total)
        )
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
    return [m.name for m in todo]


def frees_space(names: list[str]) -> bool:
    """Whether one of the migration steps ``names`` (``migrate``'s answer) freed a good
    part of the file (``Migration.frees_space``)."""
    return any(m.frees_space for m in MIGRATIONS if m.name in names)


def ensure_identity(conn: sqlite3.Connection) -> tuple[str, str]:
    """The "store identity" step, in the caller's write transaction: give a store
    without one a random ``meta.store_id`` (32 hex digits, uuid4) and ``meta.created_at``
    (ISO-8601 UTC), a store without a ``meta.machine_id`` one (32 hex digits, uuid4: the
    id a team lake knows it by, ``sinks.machine``), and write the header fields that name it (``application_id`` =
    ``store_safety.APPLICATION_ID``, ``user_version`` = ``store_safety.header_id``).
    Returns ``(store_id, created_at)``; an existing identity is kept."""
    rows = dict(
        conn.execute("SELECT key, value FROM meta WHERE key IN ('store_id', 'created_at')").fetchall()
    )
    if "store_id" not in rows:
        rows = {"store_id": uuid.uuid4().hex, "created_at": now_iso()}
        conn.executemany("INSERT OR REPLACE INTO meta VALUES(?, ?)", list(rows.items()))
        log.info("ctxkeep: store identity %s created", rows["store_id"])
    # the machine id a team lake knows this store by (``sinks.machine``)
    conn.execute("INSERT OR IGNORE INTO meta VALUES('machine_id', ?)", (uuid.uuid4().hex,))
    if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
    hid = header_id(rows["store_id"])
    if conn.execute("PRAGMA user_version").fetchone()[0] != hid:
        conn.execute(f"PRAGMA user_version={hid}")
    return rows["store_id"], rows.get("created_at", "")

"""Cascade delete: remove chosen entries from the SQLite store and what only they use.

The one deletion path of the store, shared by purge (``maintenance.purge``), retention
(``sinks.parquet.archive_entries``) and notes (``pipeline.notes.delete_label``). Two
steps on one connection:

1. a *selection* fills TEMP tables (``temp_store=MEMORY`` keeps them off the disk):
   ``_p_entries(entry_id, session_id, content_hash, source_path)`` the chosen entries,
   ``_p_sessions(session_id)`` sessions chosen as a whole (their ``usage`` rows go
   even when not tied to an entry), and, derived from these, ``_p_contents(content_id)``
   the contents no remaining entry references and ``_p_files(path, whole)`` the source
   files concerned (``whole``: none of their entries remains);
2. ``delete_selected`` removes, in the caller's write transaction: the entries, their
   ``status_log`` rows, ``usage`` rows of the entries and whole sessions, ``quarantine``
   and ``files`` rows of whole files, the ``projects`` and ``ingests`` rows (v10) no entry
   left holds, and the contents with their ``chunks`` and both FTS5 indexes'
   rows (``fts_words`` through FTS5's ``'delete'`` command before the chunk rows go, it
   being an external-content table; ``fts_grams`` and ``fts_symbols`` by rowid).

Select with ``select_where`` (any WHERE over ``entries``), ``select_session`` (a
session and its sub-agents), ``select_project`` (a project dir and below, plus the
dir-less records of sessions wholly in it) or ``select_all``; ``counts`` previews;
``drop_selection`` drops the TEMP tables; ``scrub`` makes the deleted rows unrecoverable
from the files (with ``PRAGMA secure_delete=ON``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ctxkeep.paths import under_sql
from ctxkeep.sinks.sqlite import write
from ctxkeep.sinks.sqlite.ddl import ID_TABLES
from ctxkeep.sinks.sqlite.fts import delete_chunk_rows, prune_vocab, rebuild_fts_tables
from ctxkeep.sinks.sqlite.readonly import open_ro
from ctxkeep.transforms.grams import vocab_terms

_TEMP_TABLES = ("_p_entries", "_p_sessions", "_p_contents", "_p_files")
_COLS = "entry_id, session_id, content_hash, source_path"


def _new_selection(conn: sqlite3.Connection) -> None:
    conn.execute("DROP TABLE IF EXISTS temp._p_entries")
    conn.execute("DROP TABLE IF EXISTS temp._p_sessions")
    conn.execute(
        "CREATE TEMP TABLE _p_entries(entry_id TEXT PRIMARY KEY, session_id TEXT, "
        "content_hash TEXT, source_path TEXT)"
    )
    conn.execute("CREATE TEMP TABLE _p_sessions(session_id TEXT PRIMARY KEY)")


def select_where(conn: sqlite3.Connection, where_sql: str, params: dict | tuple | list = ()) -> None:
    """Choose the entries matching ``where_sql`` (an SQL condition over ``entries``,
    with ``params``) for ``delete_selected``. No session is chosen as a whole, so
    ``usage`` rows are matched by entry only (retention, notes)."""
    _new_selection(conn)
    conn.execute(f"INSERT INTO _p_entries SELECT {_COLS} FROM entries WHERE {where_sql}", params)
    _derive(conn)


def select_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Choose session ``session_id`` as a whole: its entries and those of its
    sub-agents (``parent_session_id`` = the id); the sub-agent sessions count as whole
    sessions too."""
    _new_selection(conn)
    conn.execute("INSERT INTO _p_sessions VALUES(?)", (session_id,))
    conn.execute(
        f"INSERT INTO _p_entries SELECT {_COLS} FROM entries WHERE session_id = :s OR parent_session_id = :s",
        {"s": session_id},
    )
    conn.execute("INSERT OR IGNORE INTO _p_sessions SELECT DISTINCT session_id FROM _p_entries")
    _derive(conn)


def select_project(conn: sqlite3.Connection, project_dir: str) -> None:
    """Choose project ``project_dir`` (a normalized absolute dir): entries whose
    ``project_dir`` is the dir or below it (``paths.under_sql``), plus the dir-less
    records (summaries) of the sessions all of whose located entries lie in it, and
    those sessions as whole sessions. Raises ValueError for an empty ``project_dir``."""
    under, params = under_sql("project_dir", project_dir)
    # the project's dirs by id (v10): the entries are matched by id, not by a lookup each
    ids = f"(SELECT project_id FROM projects WHERE {under})"
    _new_selection(conn)
    # sessions whose every located entry lies in the project
    conn.execute(
        "INSERT INTO _p_sessions SELECT session_id FROM entry_rows WHERE project_id IS NOT NULL "
        f"GROUP BY session_id HAVING min(project_id IN {ids}) = 1",
        params,
    )
    conn.execute(
        f"INSERT INTO _p_entries SELECT {_COLS} FROM entries WHERE rowid IN (SELECT rowid FROM entry_rows "
        f"WHERE project_id IN {ids} OR (project_id IS NULL AND "
        "(session_id IN (SELECT session_id FROM _p_sessions) OR "
        "parent_session_id IN (SELECT session_id FROM _p_sessions))))",
        params,
    )
    _derive(conn)


def select_all(conn: sqlite3.Connection) -> None:
    """Choose every entry and every session."""
    _new_selection(conn)
    conn.execute(f"INSERT INTO _p_entries SELECT {_COLS} FROM entries")
    conn.execute("INSERT OR IGNORE INTO _p_sessions SELECT DISTINCT session_id FROM entries")
    _derive(conn)


def prepare(conn: sqlite3.Connection, *, secure: bool = False) -> None:
    """Set up ``conn`` for a selection: ``temp_store=MEMORY`` (the TEMP tables stay off
    the disk); ``secure``: ``secure_delete=ON`` too (freed cells and pages are zeroed,
    as ``scrub`` needs)."""
    if secure:
        conn.execute("PRAGMA secure_delete=ON")
    conn.execute("PRAGMA temp_store=MEMORY")


def select_scope(conn: sqlite3.Connection, scope: str, value: str) -> None:
    """Choose a purge scope: ``session`` (``select_session``), ``project``
    (``select_project``) or anything else (``select_all``)."""
    if scope == "session":
        select_session(conn, value)
    elif scope == "project":
        select_project(conn, value)
    else:
        select_all(conn)


def store_counts(db: Path) -> dict:
    """The whole store's rows, from a read-only connection to ``db`` (a wipe's
    preview): ``{"entries", "sessions", "contents", "chunks", "usage", "quarantine",
    "archived_entries"}`` (``archived_entries``: entries of status ``archived``, cut from their files by
    ``compress`` or moved out by retention: no agent's file holds them any more).
    Raises sqlite3.Error for a store that cannot be read."""
    conn = open_ro(db)  # (a hot journal rolled back first)
    try:
        one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
        return {
            "entries": one("SELECT count(*) FROM entries"),
            "sessions": one("SELECT count(DISTINCT session_id) FROM entries"),
            "contents": one("SELECT count(*) FROM contents"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "usage": one("SELECT count(*) FROM usage"),
            "quarantine": one("SELECT count(*) FROM quarantine"),
            "archived_entries": one("SELECT count(*) FROM entries WHERE status = 'archived'"),
        }
    finally:
        conn.close()


def entries_in_copy(path: Path, scopes: list[tuple[str, str]]) -> int:
    """The entries of ``scopes`` (``(scope, value)`` pairs as ``select_scope``; scope
    ``all``: every entry) in the store copy at ``path`` (a backup), opened read-only
    and immutable (only TEMP tables, in memory, are written). Raises sqlite3.Error
    for a copy that cannot be read."""
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        conn.execute("PRAGMA temp_store=MEMORY")
        n = 0
        for scope, value in scopes:
            if scope == "all":
                n += conn.execute("SELECT count(*) FROM entries").fetchone()[0]
                continue
            select_scope(conn, scope, value)
            n += conn.execute("SELECT count(*) FROM _p_entries").fetchone()[0]
            drop_selection(conn)
        return n
    finally:
        conn.close()


def _derive(conn: sqlite3.Connection) -> None:
    # contents only these entries reference
    conn.execute("DROP TABLE IF EXISTS temp._p_contents")
    conn.execute("CREATE TEMP TABLE _p_contents(content_id INTEGER PRIMARY KEY)")
    conn.execute(
        "INSERT INTO _p_contents SELECT c.content_id FROM contents c WHERE c.content_hash IN "
        "(SELECT content_hash FROM _p_entries WHERE content_hash IS NOT NULL) AND NOT EXISTS "
        "(SELECT 1 FROM entry_rows e WHERE e.content_id = c.content_id AND e.entry_id NOT IN "
        "(SELECT entry_id FROM _p_entries))"
    )
    # source files none of whose entries remain
    conn.execute("DROP TABLE IF EXISTS temp._p_files")
    conn.execute("CREATE TEMP TABLE _p_files(path TEXT PRIMARY KEY, whole INTEGER)")
    conn.execute(
        "INSERT INTO _p_files SELECT p.source_path, NOT EXISTS (SELECT 1 FROM files f JOIN entry_rows e "
        "ON e.file_id = f.file_id WHERE f.path = p.source_path AND e.entry_id NOT IN "
        "(SELECT entry_id FROM _p_entries)) "
        "FROM (SELECT DISTINCT source_path FROM _p_entries WHERE source_path IS NOT NULL) p"
    )


def _usage_where() -> str:
    return (
        "entry_id IN (SELECT entry_id FROM _p_entries) OR session_id IN (SELECT session_id FROM _p_sessions)"
    )


def counts(conn: sqlite3.Connection) -> dict:
    """What ``delete_selected`` would remove from the current selection, changing
    nothing: ``{"entries", "sessions", "contents", "chunks", "usage", "quarantine",
    "source_files": int, "text_bytes": UTF-8 bytes of the contents that would go,
    "token_estimate": tokens of the entries that would go}``."""
    one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
    return {
        "entries": one("SELECT count(*) FROM _p_entries"),
        "sessions": one("SELECT count(DISTINCT session_id) FROM _p_entries"),
        "contents": one("SELECT count(*) FROM _p_contents"),
        "chunks": one("SELECT count(*) FROM chunks WHERE content_id IN (SELECT content_id FROM _p_contents)"),
        "usage": one(f"SELECT count(*) FROM usage WHERE {_usage_where()}"),
        "quarantine": one(
            "SELECT count(*) FROM quarantine WHERE path IN (SELECT path FROM _p_files WHERE whole)"
        ),
        "source_files": one("SELECT count(*) FROM _p_files"),
        "text_bytes": one(
            "SELECT coalesce(sum(bytes), 0) FROM contents WHERE content_id IN "
            "(SELECT content_id FROM _p_contents)"
        ),
        "token_estimate": one(
            "SELECT coalesce(sum(e.token_estimate), 0) FROM entries e WHERE "
            "e.entry_id IN (SELECT entry_id FROM _p_entries)"
        ),
    }


def selected_files(conn: sqlite3.Connection) -> list[str]:
    """The source paths of the selected entries, sorted."""
    return [r[0] for r in conn.execute("SELECT path FROM _p_files ORDER BY path")]


def whole_files(conn: sqlite3.Connection) -> list[str]:
    """The source paths none of whose entries stay after the selection is deleted,
    sorted."""
    return [r[0] for r in conn.execute("SELECT path FROM _p_files WHERE whole ORDER BY path")]


def purged_files(conn: sqlite3.Connection) -> set[str]:
    """Source paths a purge removed wholly and whose tombstone still stands
    (``purge_files`` kind ``file``): the ingest plan does not read them again. Empty
    for a store without the table."""
    try:
        return {r[0] for r in conn.execute("SELECT item FROM purge_files WHERE kind='file'")}
    except sqlite3.OperationalError:
        return set()


def purges_of_files(conn: sqlite3.Connection) -> dict[str, str]:
    """Source path → the purge that removed it wholly, in words (``session <id>``,
    ``project <dir>``; ``purge_files`` kind ``file``, its tombstone still standing).
    Empty for a store without the table."""
    try:
        rows = conn.execute("SELECT item, scope, value FROM purge_files WHERE kind='file'").fetchall()
    except sqlite3.OperationalError:
        return {}
    return {path: f"{scope} {value}" for path, scope, value in rows}


def selected_sessions(conn: sqlite3.Connection) -> set[str]:
    """The sessions chosen as a whole (``select_session``, ``select_project``)."""
    return {r[0] for r in conn.execute("SELECT session_id FROM _p_sessions")}


def drop_selection(conn: sqlite3.Connection) -> None:
    """Drop the TEMP tables of a selection (a no-op when there is none)."""
    for t in _TEMP_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS temp.{t}")


def fts_words_columns(conn: sqlite3.Connection) -> list[str]:
    """The indexed columns of the external-content ``fts_words`` table, which are also
    columns of ``chunks`` (``["text"]`` in schema v1, ``["title", "text"]`` in v2,
    ``["title", "text", "facets"]`` in v3)."""
    return [r[1] for r in conn.execute("PRAGMA table_info(fts_words)")]


#: ``delete_selected`` builds the search indexes again from the chunks kept when they
#: are at most 1 in this many of the store's chunks (a reparse of the whole vault: its
#: per-chunk FTS5 'delete' rows, each with its terms recomputed, and the vocabulary
#: pruned term by term were 14 of the 32 s its deletion took on the 200 MB scaled tree,
#: cProfile under load; ``reindex``'s rebuild costs in the chunks kept)
REBUILD_KEPT_SHARE = 4


def delete_selected(
    conn: sqlite3.Connection, *, usage: bool = True, quarantine: bool = True, media: bool = True
) -> dict:
    """Delete the selected entries and what only they reference (the caller holds a
    write transaction). ``usage``/``quarantine``/``media`` False keep those rows
    (retention keeps token figures, and the ``media`` of the entries it archives: the
    Parquet archive holds only their text). Returns the removed counts (the keys of ``counts``; ``usage`` and
    ``quarantine`` 0 when kept) plus ``files``: the source paths concerned (sorted)."""
    removed = counts(conn)
    files = selected_files(conn)
    if usage:
        conn.execute(f"DELETE FROM usage WHERE {_usage_where()}")
    else:
        removed["usage"] = 0
    if quarantine:
        conn.execute("DELETE FROM quarantine WHERE path IN (SELECT path FROM _p_files WHERE whole)")
    else:
        removed["quarantine"] = 0
    if media:
        conn.execute("DELETE FROM media WHERE entry_id IN (SELECT entry_id FROM _p_entries)")
    # the project dirs and load stamps (v10) of the entries that go, for those no entry keeps
    held = {
        i: [
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT {i} FROM entry_rows WHERE {i} IS NOT NULL AND entry_id IN "
                "(SELECT entry_id FROM _p_entries)"
            )
        ]
        for i in ("project_id", "ingest_id")
    }
    conn.execute("DELETE FROM entry_rows WHERE entry_id IN (SELECT entry_id FROM _p_entries)")
    conn.execute("DELETE FROM files WHERE path IN (SELECT path FROM _p_files WHERE whole)")
    for i, ids in held.items():
        if not ids:
            continue
        # the ids still held, found in one scan of entry_rows (no index on these columns:
        # a NOT EXISTS per id scanned the table once for each id that went)
        table, cand = ID_TABLES[i][0], "(SELECT value FROM json_each(?1))"
        conn.execute(
            f"DELETE FROM {table} WHERE {i} IN {cand} AND {i} NOT IN "
            f"(SELECT {i} FROM entry_rows WHERE {i} IN {cand})",
            (json.dumps(ids),),
        )
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='status_log'").fetchone():
        # the status-change log some versions keep for the DuckDB sync: no rows for gone entries
        conn.execute("DELETE FROM status_log WHERE entry_id IN (SELECT entry_id FROM _p_entries)")
    gone_chunks = "SELECT chunk_id FROM chunks WHERE content_id IN (SELECT content_id FROM _p_contents)"
    has_vocab = conn.execute("SELECT 1 FROM sqlite_master WHERE name='vocab'").fetchone()
    total, kept = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE content_id NOT IN (SELECT content_id FROM _p_contents)) "
        "FROM chunk_rows"
    ).fetchone()
    gone_vocab: set[str] = set()
    current = has_vocab and fts_words_columns(conn) == [
        "title",
        "text",
        "facets",
    ]  # not a migration's old shape
    if current and total and kept * REBUILD_KEPT_SHARE <= total:
        # most chunks go (a reparse of the whole vault, a purge of nearly everything): the
        # search indexes and the vocabulary are built again from the chunks kept
        # (``fts.rebuild_fts_tables``, as ``reindex`` does) instead of a 'delete' per chunk
        # gone with its values recomputed and each of its terms looked up
        conn.execute("DELETE FROM chunk_rows WHERE content_id IN (SELECT content_id FROM _p_contents)")
        rebuild_fts_tables(conn)
    else:
        # external-content FTS5: the 'delete' command needs the indexed text, so before the chunks go
        # (every indexed column's value is needed: schema v1 indexes text, v2 title and text)
        cols = ", ".join(fts_words_columns(conn))
        conn.execute(
            f"INSERT INTO fts_words(fts_words, rowid, {cols}) SELECT 'delete', chunk_id, {cols} "
            "FROM chunks WHERE content_id IN (SELECT content_id FROM _p_contents)"
        )
        delete_chunk_rows(conn, gone_chunks)
        if has_vocab:
            gone_vocab = vocab_terms(
                [r[0] for r in conn.execute(f"SELECT text FROM chunks WHERE chunk_id IN ({gone_chunks})")]
            )
        conn.execute("DELETE FROM chunk_rows WHERE content_id IN (SELECT content_id FROM _p_contents)")
    if gone_vocab:  # after the chunks and their fts_words rows are gone
        prune_vocab(conn, gone_vocab)
    conn.execute("DELETE FROM contents WHERE content_id IN (SELECT content_id FROM _p_contents)")
    removed["files"] = files
    return removed


def scrub(conn: sqlite3.Connection) -> None:
    """Make deleted rows unrecoverable from the files: merge both FTS5 indexes (deleted
    tokens otherwise stay in older segments) and checkpoint + truncate the WAL (old page
    images live there). Needs ``PRAGMA secure_delete=ON`` on ``conn`` beforehand."""
    with write(conn):
        conn.execute("INSERT INTO fts_words(fts_words) VALUES('optimize')")
        for table in ("fts_grams", "fts_symbols", "fts_vocab"):
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name=?", (table,)).fetchone():
                conn.execute(f"INSERT INTO {table}({table}) VALUES('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def scope_partitions(
    conn: sqlite3.Connection, scope: str, value: str | None, no_month: str
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """``({(agent, month)}, {(agent, session_id)})`` of the entries a purge of ``scope``
    (``select_scope``; ``"all"``: every entry) would remove, ``month`` as a lake
    partitions it (``YYYY-MM`` of ``ts``, ``no_month`` without one). Read only (the
    selection is a TEMP table, dropped)."""
    prepare(conn)
    if scope == "all":
        sel = "SELECT agent, ts, session_id FROM entry_rows"
    else:
        select_scope(conn, scope, value or "")
        sel = "SELECT e.agent, e.ts, e.session_id FROM temp._p_entries p JOIN entry_rows e ON e.entry_id = p.entry_id"
    pairs: set[tuple[str, str]] = set()
    sessions: set[tuple[str, str]] = set()
    try:
        for agent, month, sid in conn.execute(
            f"SELECT DISTINCT agent, coalesce(strftime('%Y-%m', ts), ?), session_id FROM ({sel})", (no_month,)
        ):
            pairs.add((agent, month))
            sessions.add((agent, sid))
    finally:
        if scope != "all":
            drop_selection(conn)
    return pairs, sessions

"""Schema v9 (issue 14, store size): entries keep their source path as ``files.file_id``
and their text as ``contents.content_id`` (``entry_rows``); ``entries`` is a view with
the v8 columns. A v8 store upgrades in place, once, to what a fresh ingest makes; a
failure inside the step leaves the v8 store as it was."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from ctxkeep.schema import STORED_COLUMNS
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import ddl, migrations
from tests.sinks.v8_store import entries_as_v8
from tests.store_digest import store_digest

_V8_COLS = ", ".join(["rowid", *STORED_COLUMNS, "ingested_at"])


def _v8_copy(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
    c = sqlite3.connect(dst / "store.db")
    entries_as_v8(c)
    c.commit()
    kind = c.execute("SELECT type FROM sqlite_master WHERE name='entries'").fetchone()[0]
    rows = c.execute(f"SELECT {_V8_COLS} FROM entries ORDER BY rowid").fetchall()
    c.close()
    assert kind == "table" and rows
    return rows


def _pages(home) -> int:
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        return c.execute("PRAGMA page_count").fetchone()[0]
    finally:
        c.close()


def _kind(home, name):
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        r = c.execute("SELECT type FROM sqlite_master WHERE name=?", (name,)).fetchone()
        return r and r[0]
    finally:
        c.close()


def test_a_fresh_store_keeps_ids_not_paths_and_hashes(corpus_store):
    home, _ = corpus_store
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        cols = [r[1] for r in c.execute("PRAGMA table_info(entry_rows)")]
        assert "source_path" not in cols and "content_hash" not in cols
        assert {"file_id", "content_id"} <= set(cols)
        types = set(c.execute("SELECT DISTINCT typeof(file_id), typeof(content_id) FROM entry_rows"))
        assert types <= {("integer", "integer"), ("integer", "null"), ("null", "integer"), ("null", "null")}
        # the view gives every stored path and hash back: each path once in files
        n_paths, n_files = c.execute(
            "SELECT (SELECT count(DISTINCT source_path) FROM entries), (SELECT count(*) FROM files)"
        ).fetchone()
        assert n_paths == n_files > 10
        # every entry with a text points at the contents row of its hash
        assert c.execute(
            "SELECT count(*) FROM entry_rows e LEFT JOIN contents c ON c.content_id = e.content_id "
            "WHERE e.content_id IS NOT NULL AND c.content_id IS NULL"
        ).fetchone() == (0,)
    finally:
        c.close()


def test_a_v8_store_is_migrated_in_place_to_what_a_fresh_ingest_makes(corpus_store, tmp_path):
    fresh, _ = corpus_store
    home = tmp_path / "v8"
    before = _v8_copy(fresh, home)
    v8_pages = _pages(home)
    conn = sqlite_store.connect(home)  # the writable open migrates, then vacuums
    try:
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)
        assert _pages(home) < v8_pages
        assert sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION >= 10
        # same rows, same rowids (the DuckDB sync's mark), v8 columns through the view
        assert conn.execute(f"SELECT {_V8_COLS} FROM entries ORDER BY rowid").fetchall() == before
        assert migrations.migrate(conn, sqlite_store.SCHEMA_VERSION) == []  # once
    finally:
        conn.close()
    assert _kind(home, "entries") == "view" and _kind(home, "entry_rows") == "table"
    assert store_digest(home) == store_digest(fresh)
    # a second open changes nothing
    sqlite_store.connect(home).close()
    assert store_digest(home) == store_digest(fresh)


def test_the_upgrade_sorts_and_vacuums_on_disk_not_in_memory(corpus_store, tmp_path, monkeypatch):
    """The load pragmas keep temporary b-trees in memory (temp_store=MEMORY); the
    migration and its VACUUM (a copy of the whole store) run with temp_store=FILE, or
    upgrading a 1.9 GB store peaks at 1.67 GB RSS. After the upgrade the connection is
    back to MEMORY for its loads."""
    from ctxkeep.sinks.sqlite import connection

    fresh, _ = corpus_store
    home = tmp_path / "v8"
    _v8_copy(fresh, home)
    seen = []
    real = connection.migrate

    def migrate(conn, version):
        seen.append(conn.execute("PRAGMA temp_store").fetchall()[0][0])
        return real(conn, version)

    monkeypatch.setattr(connection, "migrate", migrate)
    conn = sqlite_store.connect(home)
    try:
        assert seen == [1]  # FILE while migrating (0 default, 2 MEMORY)
        assert conn.execute("PRAGMA temp_store").fetchall() == [(2,)]
        assert sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)  # vacuumed
    finally:
        conn.close()


def test_a_failed_migration_leaves_the_v8_store_as_it_was(corpus_store, tmp_path, monkeypatch):
    fresh, _ = corpus_store
    home = tmp_path / "v8"
    before = _v8_copy(fresh, home)
    # the last statement of the step fails: everything before it (files, entry_rows
    # filled, entries dropped) must roll back
    monkeypatch.setitem(ddl.INDEXES, "entries_source", "CREATE INDEX entries_source ON no_such_table(x)")
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        sqlite_store.connect(home)
    monkeypatch.undo()
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        assert c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("8",)
        assert c.execute(f"SELECT {_V8_COLS} FROM entries ORDER BY rowid").fetchall() == before
        assert c.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('entry_rows', 'files')"
        ).fetchone() == (0,)
    finally:
        c.close()
    sqlite_store.connect(home).close()  # the next open migrates
    assert store_digest(home) == store_digest(fresh)


def test_an_entry_whose_content_row_is_gone_keeps_its_hash(corpus_store, tmp_path):
    fresh, _ = corpus_store
    home = tmp_path / "v8"
    _v8_copy(fresh, home)
    c = sqlite3.connect(home / "store.db")
    h, n = c.execute(
        "SELECT content_hash, count(*) FROM entries WHERE content_hash IS NOT NULL GROUP BY 1 LIMIT 1"
    ).fetchone()
    c.execute(
        "DELETE FROM chunks WHERE content_id = (SELECT content_id FROM contents WHERE content_hash=?)", (h,)
    )
    c.execute("DELETE FROM contents WHERE content_hash = ?", (h,))
    c.commit()
    c.close()
    sqlite_store.connect(home).close()
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        assert c.execute("SELECT count(*) FROM entries WHERE content_hash = ?", (h,)).fetchone() == (n,)
    finally:
        c.close()


def test_the_entries_view_is_writable(store_home):
    conn = sqlite_store.connect(store_home)
    try:
        with sqlite_store.write(conn):
            conn.execute("INSERT INTO contents(content_hash, bytes) VALUES('h1', 3)")
            conn.execute(
                "INSERT INTO entries(entry_id, agent, session_id, source_path, content_hash, status) "
                "VALUES('e1', 'codex', 's1', '/a.jsonl', 'h1', 'active')"
            )
            conn.execute(
                "UPDATE entries SET status = 'archived', source_path = '/b.jsonl' WHERE entry_id = 'e1'"
            )
        assert conn.execute("SELECT source_path, content_hash, status FROM entries").fetchall() == [
            ("/b.jsonl", "h1", "archived")
        ]
        assert conn.execute("SELECT path FROM files ORDER BY file_id").fetchall() == [
            ("/a.jsonl",),
            ("/b.jsonl",),
        ]
        with sqlite_store.write(conn):
            conn.execute("DELETE FROM entries WHERE entry_id = 'e1'")
        assert conn.execute("SELECT count(*) FROM entry_rows").fetchone() == (0,)
    finally:
        conn.close()

"""Schema v2 (retrieval): chunks.title and fts_words(title, text); a v1 store is
migrated on open (titles filled, word index rebuilt) — now to v3 (facets, see
test_facets.py), in the same step."""

from __future__ import annotations

import sqlite3

import pytest

from ctxkeep.errors import StoreError
from ctxkeep.pipeline.notes import index_note
from ctxkeep.query.search import search
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import migrations
from tests.sinks.v8_store import entries_as_v8


def _downgrade_to_v1(path):
    c = sqlite3.connect(path)
    entries_as_v8(c)
    c.execute("DROP TABLE fts_words")
    c.execute("DROP TABLE fts_grams")
    c.execute("ALTER TABLE chunks DROP COLUMN title")
    c.execute("ALTER TABLE chunks DROP COLUMN facets")
    c.execute("CREATE VIRTUAL TABLE fts_grams USING fts5(grams, tokenize='unicode61 remove_diacritics 0')")
    c.execute(
        "CREATE VIRTUAL TABLE fts_words USING fts5(text, content='chunks', content_rowid='chunk_id', "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    c.execute("INSERT INTO fts_words(fts_words) VALUES('rebuild')")
    c.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    c.commit()
    c.close()


def test_v1_store_is_migrated(store_home):
    conn = sqlite_store.connect(store_home)
    r = index_note(conn, "n", text="Deploy notes\nthe staging cluster uses zebrafish")
    conn.close()
    _downgrade_to_v1(store_home / "store.db")
    # a reader never migrates: it says what to do instead of failing on a missing column
    with pytest.raises(StoreError, match="store schema v1 is older") as ei:
        sqlite_store.connect(store_home, readonly=True)
    assert "ctxkeep ingest" in ei.value.hint
    conn = sqlite_store.connect(store_home)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
        sqlite_store.SCHEMA_VERSION
    )
    assert conn.execute("SELECT title FROM chunks").fetchone()[0] == "Deploy notes"
    assert [r[1] for r in conn.execute("PRAGMA table_info(fts_words)")] == ["title", "text", "facets"]
    assert [h.entry_id for h in search(conn, "zebrafish").hits] == [r["entry_id"]]
    assert [h.entry_id for h in search(conn, "deploy").hits] == [r["entry_id"]]


def test_tool_name_goes_into_the_title(corpus_store):
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    title = conn.execute(
        "SELECT ch.title FROM entries e JOIN contents c ON c.content_hash = e.content_hash "
        "JOIN chunks ch ON ch.content_id = c.content_id AND ch.seq = 0 "
        "WHERE e.tool_name = 'WebFetch' LIMIT 1"
    ).fetchone()[0]
    assert title.startswith("WebFetch {")


# ---------------------------------------------------------------- named migrations


def _downgrade_to_v2(path):
    """What a v2 store looked like: no ``chunks.facets``, FTS tables without a facets
    column, ``entries_content`` on content_hash alone."""
    c = sqlite3.connect(path)
    entries_as_v8(c)
    c.execute("DROP TABLE fts_words")
    c.execute("DROP TABLE fts_grams")
    c.execute("ALTER TABLE chunks DROP COLUMN facets")
    c.execute("DROP INDEX entries_content")
    c.execute("CREATE INDEX entries_content ON entries(content_hash)")
    c.execute("CREATE VIRTUAL TABLE fts_grams USING fts5(grams, tokenize='unicode61 remove_diacritics 0')")
    c.execute(
        "CREATE VIRTUAL TABLE fts_words USING fts5(title, text, content='chunks', "
        "content_rowid='chunk_id', tokenize='porter unicode61 remove_diacritics 2')"
    )
    c.execute("INSERT INTO fts_words(fts_words) VALUES('rebuild')")
    c.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    c.commit()
    c.close()


def test_migrations_are_named_and_ordered():
    assert [(m.version, m.name) for m in migrations.MIGRATIONS] == [
        (2, "chunk titles"),
        (3, "chunk facets"),
        (4, "quarantine redacted, raw_sha256"),
        (5, "usage cache-write split and logged cost"),
        (6, "operation intents"),
        (7, "symbol terms and the vocabulary"),
        (8, "symbol terms in their own FTS table"),
        (9, "entries store file and content ids"),
        (10, "project dirs and load stamps as ids, chunk titles as spans"),
        (11, "the vault manifest"),
        (12, "the coverage ledger"),
        (13, "the vault's media"),
        (14, "Claude Code usage keyed by message id"),
        (15, "the rows documents' running state"),
        (16, "the chunks' content ids by chunk id"),
    ]
    assert migrations.MIGRATIONS[-1].version == sqlite_store.SCHEMA_VERSION


def test_v2_store_is_migrated_to_v3(store_home):
    conn = sqlite_store.connect(store_home)
    r = index_note(conn, "n", text="Deploy notes\nthe staging cluster uses zebrafish")
    facets = conn.execute("SELECT facets FROM chunks").fetchone()[0]
    conn.close()
    assert facets  # what ingest wrote, which the migration must compute again
    _downgrade_to_v2(store_home / "store.db")
    # a reader needs v9 (entries over file and content ids): it says what to do
    with pytest.raises(StoreError, match="store schema v2 is older"):
        sqlite_store.connect(store_home, readonly=True)
    conn = sqlite_store.connect(store_home)
    try:
        assert sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION
        assert conn.execute("SELECT facets FROM chunks").fetchone()[0] == facets
        assert [r[1] for r in conn.execute("PRAGMA table_info(fts_words)")] == ["title", "text", "facets"]
        assert [r[1] for r in conn.execute("PRAGMA table_info(fts_grams)")] == ["grams", "facets"]
        assert [r[2] for r in conn.execute("PRAGMA index_info(entries_content)")] == ["content_id", "ts"]
        assert [h.entry_id for h in search(conn, "zebrafish").hits] == [r["entry_id"]]
    finally:
        conn.close()


def test_migrate_runs_only_the_missing_steps(store_home):
    conn = sqlite_store.connect(store_home)
    index_note(conn, "n", text="Deploy notes\nthe staging cluster uses zebrafish")
    conn.close()
    _downgrade_to_v2(store_home / "store.db")
    c = sqlite3.connect(store_home / "store.db", isolation_level=None)
    try:
        c.execute("BEGIN")
        assert migrations.migrate(c, 2) == [m.name for m in migrations.MIGRATIONS if m.version > 2]
        c.execute("COMMIT")
        assert sqlite_store.schema_version(c) == sqlite_store.SCHEMA_VERSION
        assert migrations.migrate(c, sqlite_store.SCHEMA_VERSION) == []
        assert migrations.migrate(c, 0) == []  # a new store: the DDL makes it current
    finally:
        c.close()


def test_a_newer_store_is_refused(store_home):
    sqlite_store.connect(store_home).close()
    c = sqlite3.connect(store_home / "store.db")
    c.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    c.commit()
    c.close()
    for readonly in (False, True):
        with pytest.raises(StoreError, match="store schema v99 is newer"):
            sqlite_store.connect(store_home, readonly=readonly)

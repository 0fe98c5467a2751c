"""Schema v10 (issue 14, store size): entries keep their project dir and load stamp as
ids (``projects``, ``ingests``), ``entries_session`` is on the session id alone, and a
chunk title found in its text is stored as its span (``chunk_rows``; ``chunks`` is a
view with the v9 columns). A v9 store upgrades in place, once, to what a fresh ingest
makes; a failure inside the step leaves the v9 store as it was; readers refuse it."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from ctxkeep.errors import StoreError
from ctxkeep.schema import STORED_COLUMNS
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import ddl, migrations
from ctxkeep.transforms.chunk import chunk_title
from tests.sinks.v9_store import as_v9
from tests.store_digest import store_digest

_COLS = ", ".join(["rowid", *STORED_COLUMNS, "ingested_at"])


def _ro(home):
    return sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)


def _rows(c):
    """The entries and the chunks of ``c`` through the views' (v9) columns, with ids."""
    return (
        c.execute(f"SELECT {_COLS} FROM entries ORDER BY rowid").fetchall(),
        c.execute("SELECT chunk_id, content_id, seq, title, text, facets FROM chunks ORDER BY 1").fetchall(),
    )


def _v9_copy(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
    c = sqlite3.connect(dst / "store.db")
    as_v9(c)
    c.commit()
    rows, chunks = _rows(c)
    kinds = dict(c.execute("SELECT name, type FROM sqlite_master WHERE name IN ('chunks', 'entries')"))
    c.close()
    assert kinds == {"chunks": "table", "entries": "view"} and rows and chunks
    return rows, chunks


def test_a_fresh_store_keeps_ids_and_title_spans(corpus_store):
    home, _ = corpus_store
    c = _ro(home)
    try:
        cols = [r[1] for r in c.execute("PRAGMA table_info(entry_rows)")]
        assert "project_dir" not in cols and "ingested_at" not in cols
        assert set(c.execute("SELECT DISTINCT typeof(project_id), typeof(ingest_id) FROM entry_rows")) <= {
            ("integer", "integer"),
            ("null", "integer"),
        }
        # the view gives each dir and stamp back; each is stored once
        assert (
            c.execute("SELECT count(DISTINCT project_dir) FROM entries").fetchone()
            == c.execute("SELECT count(*) FROM projects").fetchone()
        )
        stamps = [r[0] for r in c.execute("SELECT DISTINCT ingested_at FROM entries")]
        assert stamps and all(s.endswith("Z") and len(s) == 27 for s in stamps)
        # titles: a first chunk's title is its first non-blank line (transforms.chunk), found
        # in the text, so stored as a span; the view gives the text back
        rows = c.execute(
            "SELECT r.title, v.title, v.text, v.seq FROM chunk_rows r JOIN chunks v USING (chunk_id)"
        ).fetchall()
        spans = [r for r in rows if isinstance(r[0], int)]
        assert len(spans) > len(rows) // 2
        for _, title, text, seq in spans:
            assert title and title in text
            if seq == 0 and title == chunk_title(text, 0):
                break
        else:
            pytest.fail("no first-chunk title stored as a span")
        assert all(isinstance(t, str) for _, t, _, _ in rows)
    finally:
        c.close()


def test_a_v9_store_is_migrated_in_place_to_what_a_fresh_ingest_makes(corpus_store, tmp_path):
    fresh, _ = corpus_store
    home = tmp_path / "v9"
    rows, chunks = _v9_copy(fresh, home)
    with pytest.raises(StoreError, match=r"store schema v9 is older than this ctxkeep reads \(v\d+\)"):
        sqlite_store.connect(home, readonly=True)
    size = (home / "store.db").stat().st_size
    conn = sqlite_store.connect(home)  # the writable open migrates, then vacuums
    try:
        assert sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION >= 10
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)
        # same rows and rowids, same chunks and ids, v9 columns through the views
        assert _rows(conn) == (rows, chunks)
        assert (
            conn.execute("SELECT count(*) FROM chunk_rows WHERE typeof(title) = 'integer'").fetchone()[0] > 0
        )
        # fts_words (external content: the view) is consistent without a rebuild
        conn.execute("INSERT INTO fts_words(fts_words, rank) VALUES('integrity-check', 1)")
        assert [r[2] for r in conn.execute("PRAGMA index_info(entries_session)")] == ["session_id"]
        assert migrations.migrate(conn, sqlite_store.SCHEMA_VERSION) == []  # once
    finally:
        conn.close()
    assert (home / "store.db").stat().st_size < size
    assert store_digest(home) == store_digest(fresh)
    sqlite_store.connect(home).close()  # a second open changes nothing
    assert store_digest(home) == store_digest(fresh)


def test_a_failed_migration_leaves_the_v9_store_as_it_was(corpus_store, tmp_path, monkeypatch):
    fresh, _ = corpus_store
    home = tmp_path / "v9"
    rows, chunks = _v9_copy(fresh, home)
    # the step's last statement fails: the entries and chunks it rewrote roll back
    monkeypatch.setitem(ddl.INDEXES, "chunks_content", "CREATE INDEX chunks_content ON no_such_table(x)")
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        sqlite_store.connect(home)
    monkeypatch.undo()
    c = _ro(home)
    try:
        assert c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("9",)
        assert _rows(c) == (rows, chunks)
        assert c.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('chunk_rows', 'projects', 'ingests')"
        ).fetchone() == (0,)
    finally:
        c.close()
    sqlite_store.connect(home).close()  # the next open migrates
    assert store_digest(home) == store_digest(fresh)


def test_the_entries_view_writes_project_dirs_and_stamps_as_ids(store_home):
    conn = sqlite_store.connect(store_home)
    try:
        with sqlite_store.write(conn):
            conn.execute(
                "INSERT INTO entries(entry_id, agent, session_id, project_dir, status, ingested_at) "
                "VALUES('e1', 'codex', 's1', '/p/a', 'active', '2026-01-02T03:04:05.000006Z')"
            )
            conn.execute("UPDATE entries SET project_dir = '/p/b' WHERE entry_id = 'e1'")
        assert conn.execute("SELECT project_dir, ingested_at FROM entries").fetchall() == [
            ("/p/b", "2026-01-02T03:04:05.000006Z")
        ]
        assert conn.execute("SELECT project_dir FROM projects ORDER BY project_id").fetchall() == [
            ("/p/a",),
            ("/p/b",),
        ]
        assert conn.execute("SELECT typeof(project_id), typeof(ingest_id) FROM entry_rows").fetchall() == [
            ("integer", "integer")
        ]
    finally:
        conn.close()


def test_a_title_not_in_its_text_is_stored_as_text(store_home):
    conn = sqlite_store.connect(store_home)
    try:
        with sqlite_store.write(conn):
            conn.executemany(
                "INSERT INTO chunk_rows(chunk_id, content_id, seq, title, text) "
                f"VALUES(?1, 1, 0, {ddl.title_stored('?2', '?3')}, ?3)",
                [(1, "Bash ls -la", "ls -la\nx"), (2, "b é", "a\n  b é\n"), (3, "", "text")],
            )
        assert conn.execute("SELECT title FROM chunk_rows ORDER BY chunk_id").fetchall() == [
            ("Bash ls -la",),
            ((4 << 8) | 3,),
            ("",),
        ]
        assert conn.execute("SELECT title FROM chunks ORDER BY chunk_id").fetchall() == [
            ("Bash ls -la",),
            ("b é",),
            ("",),
        ]
    finally:
        conn.close()


def test_a_batch_of_entries_stored_before_leaves_no_load_stamp(store_home):
    import polars as pl

    from ctxkeep.schema import ENTRY_SCHEMA
    from ctxkeep.sinks.sqlite.load import load_batch

    row = dict.fromkeys(STORED_COLUMNS) | {
        "entry_id": "e1",
        "agent": "codex",
        "session_id": "s1",
        "project_dir": "/p/a",
        "status": "active",
        "is_sidechain": False,
        "source_offset": 0,
    }
    entries = pl.DataFrame([row], schema={c: ENTRY_SCHEMA[c] for c in STORED_COLUMNS})
    empty = pl.DataFrame()
    conn = sqlite_store.connect(store_home)
    try:
        for _ in range(2):  # the second load stores nothing new
            load_batch(conn, entries=entries, contents=empty, chunks=empty, usage=empty, quarantine=[])
        assert conn.execute("SELECT count(*) FROM entry_rows").fetchone() == (1,)
        assert (
            conn.execute("SELECT i.ingested_at FROM ingests i").fetchall()
            == conn.execute("SELECT ingested_at FROM entries").fetchall()
        )
        assert conn.execute("SELECT project_dir FROM projects").fetchall() == [("/p/a",)]
    finally:
        conn.close()

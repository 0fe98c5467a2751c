"""The one DDL registry (``sinks.sqlite.ddl``): a new store holds exactly its tables,
FTS tables and indexes; no module creates a permanent table elsewhere; a store made
before ``archived`` and ``purge_files`` joined the DDL gains them on the next open."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import ddl

PKG = Path(__file__).resolve().parents[2] / "ctxkeep"


def _objects(conn, kind: str) -> set[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type=? AND name NOT LIKE 'sqlite_%'", (kind,)
    ).fetchall()
    return {r[0] for r in rows}


def _user_tables(conn) -> set[str]:
    shadow = re.compile(r"^fts_(words|grams|symbols|vocab)_(data|idx|content|docsize|config)$")
    return {t for t in _objects(conn, "table") if not shadow.match(t)}


def test_a_new_store_holds_exactly_the_registry(store_home):
    conn = sqlite_store.connect(store_home)
    try:
        assert _user_tables(conn) == set(ddl.TABLES) | set(ddl.FTS_TABLES)
        assert _objects(conn, "index") == set(ddl.INDEXES)
        assert "archived" in ddl.TABLES and "purge_files" in ddl.TABLES
        assert [r[1] for r in conn.execute("PRAGMA table_info(archived)")] == ["entry_id", "archived_at"]
        assert [r[1] for r in conn.execute("PRAGMA table_info(purge_files)")] == [
            "scope",
            "value",
            "kind",
            "item",
        ]
        # v9: the entries indexes key the integer ids, the v8 columns are a view's
        assert [r[2] for r in conn.execute("PRAGMA index_info(entries_content)")] == ["content_id", "ts"]
        assert [r[2] for r in conn.execute("PRAGMA index_info(entries_source)")] == [
            "file_id",
            "source_offset",
        ]
        # v10: the session index without ts; the chunks are a view's too
        assert [r[2] for r in conn.execute("PRAGMA index_info(entries_session)")] == ["session_id"]
        assert _objects(conn, "view") == {"entries", "chunks"}
        assert _objects(conn, "trigger") == set(ddl.ENTRIES_TRIGGERS) | set(ddl.USAGE_LOG_TRIGGERS)
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
            ddl.SCHEMA_VERSION
        )
        ranks = dict(conn.execute("SELECT k, v FROM fts_words_config WHERE k='rank'").fetchall())
        assert ranks == {"rank": f"bm25({ddl.TITLE_WEIGHT}, 1.0, 0.0)"}
    finally:
        conn.close()


def test_the_ddl_script_makes_the_same_objects_as_create_all():
    a, b = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    a.executescript(ddl.DDL)
    ddl.create_all(b)
    assert _user_tables(a) == _user_tables(b) == set(ddl.TABLES) | set(ddl.FTS_TABLES)
    assert _objects(a, "index") == _objects(b, "index") == set(ddl.INDEXES)
    assert _objects(a, "view") == _objects(b, "view") == {"entries", "chunks"}


def test_no_permanent_table_is_created_outside_the_registry():
    made = re.compile(r"CREATE\s+(VIRTUAL\s+)?TABLE", re.IGNORECASE)
    found = []
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG).as_posix()
        if rel == "sinks/sqlite/ddl.py" or rel.startswith("sinks/duckdb"):  # the DuckDB store's own tables
            continue
        found += [f"{rel}:{i}" for i, line in enumerate(p.read_text().splitlines(), 1) if made.search(line)]
    assert found == []


def test_a_store_without_the_late_tables_gains_them_on_open(store_home):
    sqlite_store.connect(store_home).close()
    c = sqlite3.connect(store_home / "store.db")
    c.execute("DROP TABLE archived")
    c.execute("DROP TABLE purge_files")
    c.commit()
    c.close()
    ro = sqlite_store.connect(store_home, readonly=True)  # a reader does not need them
    assert not {"archived", "purge_files"} & _user_tables(ro)
    ro.close()
    conn = sqlite_store.connect(store_home)
    try:
        assert {"archived", "purge_files"} <= _user_tables(conn)
        assert sqlite_store.schema_version(conn) == ddl.SCHEMA_VERSION
    finally:
        conn.close()


def test_now_iso_is_utc_text_with_microseconds():
    from ctxkeep.sinks import sqlite as sqlite_store  # the store's stamp is timeutil's

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", sqlite_store.now_iso())

"""Schema v16 (issue 26, 10 GB search): ``chunks_id_content`` gives a chunk's content id
without a seek into ``chunk_rows`` (search's filter check, ``retrieve.passing``). A v15
store upgrades in place to what a fresh ingest makes; a reader of a v15 store (never
migrating) checks its filters from the table, with the same answers."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from ctxkeep.query.search import Filters, retrieve, search
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import ddl, migrations
from tests.store_digest import chunk_index_exact, store_digest


def _as_v15(home):
    c = sqlite3.connect(home / "store.db")
    c.execute("DROP INDEX chunks_id_content")
    c.execute("UPDATE meta SET value='15' WHERE key='schema_version'")
    c.commit()
    c.close()


def _statements(conn, fn):
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        conn.set_trace_callback(None)
    return seen


def test_a_fresh_store_indexes_every_chunk_id_with_its_content_id(corpus_store):
    home, _ = corpus_store
    assert chunk_index_exact(home) > 1000
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        assert [r[2] for r in c.execute("PRAGMA index_info(chunks_id_content)")] == ["chunk_id", "content_id"]
    finally:
        c.close()


def test_the_filter_check_reads_content_ids_from_the_index(corpus_store):
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    try:
        ids = [r[0] for r in conn.execute("SELECT chunk_id FROM chunk_rows ORDER BY chunk_id DESC LIMIT 300")]
        where = Filters(since="2025-07-01").sql("e")  # these chunks' entries: 2025-05-28 .. 08-22
        for sql in (retrieve.passing_sql(ids, where), retrieve.passing_chunks_sql(ids, where)):
            plan = " ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql.text}", sql.params))
            assert "USING COVERING INDEX chunks_id_content (chunk_id=?)" in plan
        # the same answers as from the table, both ways
        want = {r[0] for r in conn.execute(*retrieve.passing_sql(ids, where, indexed=False))}
        assert 0 < len(want) < len(ids)
        assert retrieve.passing(conn, ids, where) == want
        content_of: dict[int, int] = {}
        assert retrieve.passing(conn, ids, where, content_of) == want
        assert content_of == dict(
            conn.execute(
                f"SELECT chunk_id, content_id FROM chunk_rows WHERE chunk_id IN ({','.join(map(str, ids))})"
            )
        )
    finally:
        conn.close()


def test_a_v15_store_is_searched_by_a_reader_and_upgraded_in_place(corpus_store, tmp_path):
    fresh, _ = corpus_store
    home = tmp_path / "v15"
    shutil.copytree(fresh, home, ignore=shutil.ignore_patterns("*.lock"))
    _as_v15(home)
    f = Filters(since="2025-09-01")
    conn = sqlite_store.connect(fresh, readonly=True)
    want = [vars(h) for h in search(conn, "the", filters=f, parallel=False).hits]
    conn.close()
    # a reader never migrates: the filter check reads the table (SQLite refuses INDEXED BY
    # an unknown index), with the same hits
    conn = sqlite_store.connect(home, readonly=True)
    try:
        assert sqlite_store.schema_version(conn) == 15
        got: list = []
        seen = _statements(conn, lambda: got.append(search(conn, "the", filters=f, parallel=False)))
        assert [vars(h) for h in got[0].hits] == want and want
        assert any("FROM chunk_rows ch WHERE ch.chunk_id IN (" in s for s in seen)
    finally:
        conn.close()
    conn = sqlite_store.connect(home)  # the writable open migrates
    try:
        assert sqlite_store.schema_version(conn) == ddl.SCHEMA_VERSION == 16
        assert migrations.migrate(conn, 16) == []
    finally:
        conn.close()
    assert chunk_index_exact(home) == chunk_index_exact(fresh)
    assert store_digest(home) == store_digest(fresh)
    conn = sqlite_store.connect(home, readonly=True)
    try:
        got = []
        seen = _statements(conn, lambda: got.append(search(conn, "the", filters=f, parallel=False)))
        assert [vars(h) for h in got[0].hits] == want
        assert any("INDEXED BY chunks_id_content" in s for s in seen)
    finally:
        conn.close()


def test_the_fallback_is_for_the_missing_index_alone():
    conn = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retrieve._by_chunk_ids(conn, lambda indexed: retrieve.Sql("SELECT * FROM chunk_rows", []))

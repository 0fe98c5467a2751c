"""The store's cascade delete (``ctxkeep.sinks.sqlite.delete``), on a copy of the corpus
store: what a selection chooses, what ``delete_selected`` removes and keeps, and that the
FTS5 indexes stay consistent. Purge-level behaviour: ``tests/maintenance/test_purge.py``."""

from __future__ import annotations

import sqlite3

import pytest

from conftest import chunk_fts_index, fts_entries, rebuilt_chunk_fts_index
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import delete as delete_store

SID = "0d3a8e6f-290f-4105-a327-a2496e5e2a83"  # claude-code-log sample, 69 entries, one file
PARENT = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"  # sample-project: 405 entries in 5 sub-agent sessions


@pytest.fixture
def conn(store):
    c = sqlite_store.connect(store)
    c.execute("PRAGMA temp_store=MEMORY")
    yield c
    c.close()


def one(conn, sql, *args):
    return conn.execute(sql, args).fetchone()[0]


def fts_consistent(conn) -> None:
    conn.execute("INSERT INTO fts_words(fts_words, rank) VALUES('integrity-check', 1)")
    conn.execute("INSERT INTO fts_grams(fts_grams) VALUES('integrity-check')")
    # the contentless tables were deleted from with the values each row was indexed
    # with: term for term what a fresh index of the chunks left holds
    assert chunk_fts_index(conn) == rebuilt_chunk_fts_index(conn)
    assert one(conn, "SELECT count(*) FROM fts_grams") == one(
        conn, "SELECT count(*) FROM chunks WHERE chunk_id IN (SELECT rowid FROM fts_grams)"
    )
    assert (
        one(conn, "SELECT count(*) FROM chunks WHERE content_id NOT IN (SELECT content_id FROM contents)")
        == 0
    )


def test_select_session_takes_its_sub_agents_as_whole_sessions(conn):
    subs = {
        r[0]
        for r in conn.execute("SELECT DISTINCT session_id FROM entries WHERE parent_session_id=?", (PARENT,))
    }
    assert len(subs) == 5
    n = one(conn, "SELECT count(*) FROM entries WHERE session_id=? OR parent_session_id=?", PARENT, PARENT)
    delete_store.select_session(conn, PARENT)
    c = delete_store.counts(conn)
    assert c["entries"] == n
    assert delete_store.selected_sessions(conn) == subs | {PARENT}
    assert c["sessions"] == len({r[0] for r in conn.execute("SELECT DISTINCT session_id FROM _p_entries")})
    delete_store.drop_selection(conn)


def test_counts_are_what_delete_selected_removes(conn, store):
    entries_before = one(conn, "SELECT count(*) FROM entries")
    usage_sid = one(conn, "SELECT count(*) FROM usage WHERE session_id=?", SID)
    assert usage_sid > 0
    delete_store.select_session(conn, SID)
    preview = delete_store.counts(conn)
    files = delete_store.selected_files(conn)
    with sqlite_store.write(conn):
        removed = delete_store.delete_selected(conn)
    delete_store.drop_selection(conn)
    assert removed.pop("files") == files and len(files) == 1 and files[0].endswith(SID + ".jsonl")
    assert removed == preview
    assert removed["entries"] == 69 and removed["usage"] == usage_sid
    assert one(conn, "SELECT count(*) FROM entries") == entries_before - 69
    assert one(conn, "SELECT count(*) FROM usage WHERE session_id=?", SID) == 0
    assert (
        one(
            conn,
            "SELECT count(*) FROM contents c WHERE NOT EXISTS "
            "(SELECT 1 FROM entries e WHERE e.content_hash = c.content_hash)",
        )
        == 0
    )
    fts_consistent(conn)
    assert fts_entries(store, "timeline filtering hide group") == set()
    # the TEMP tables are gone: nothing is selected any more
    assert one(conn, "SELECT count(*) FROM temp.sqlite_master WHERE name LIKE '\\_p\\_%' ESCAPE '\\'") == 0


def test_shared_contents_stay_and_usage_quarantine_status_log_as_asked(conn):
    path = one(conn, "SELECT source_path FROM entries WHERE session_id=? LIMIT 1", SID)
    eid = one(conn, "SELECT entry_id FROM entries WHERE session_id=? ORDER BY rowid LIMIT 1", SID)
    with sqlite_store.write(conn):
        conn.execute(
            "INSERT INTO quarantine(agent, path, offset, length, reason) "
            "VALUES('claude-code', ?, 0, 1, 'test')",
            (path,),
        )
        conn.execute(
            "INSERT INTO status_log(entry_id, status, changed_at) VALUES(?, 'archived', 'x')", (eid,)
        )
    shared = one(
        conn,
        "SELECT count(DISTINCT e.content_hash) FROM entries e WHERE e.session_id=? AND EXISTS "
        "(SELECT 1 FROM entries o WHERE o.content_hash = e.content_hash AND o.session_id <> ?)",
        SID,
        SID,
    )
    distinct = one(conn, "SELECT count(DISTINCT content_hash) FROM entries WHERE session_id=?", SID)
    assert shared > 0
    usage_before = one(conn, "SELECT count(*) FROM usage")
    delete_store.select_where(conn, "session_id = ?", (SID,))
    with sqlite_store.write(conn):
        removed = delete_store.delete_selected(conn, usage=False, quarantine=False)
    delete_store.drop_selection(conn)
    assert removed["contents"] == distinct - shared
    assert removed["usage"] == 0 and removed["quarantine"] == 0
    assert one(conn, "SELECT count(*) FROM usage") == usage_before  # token figures kept
    assert one(conn, "SELECT count(*) FROM quarantine WHERE path=?", path) == 1
    assert one(conn, "SELECT count(*) FROM status_log WHERE entry_id=?", eid) == 0
    fts_consistent(conn)


def test_quarantine_rows_go_only_with_the_whole_file(conn):
    path = one(conn, "SELECT source_path FROM entries WHERE session_id=? LIMIT 1", SID)
    with sqlite_store.write(conn):
        conn.execute(
            "INSERT INTO quarantine(agent, path, offset, length, reason) "
            "VALUES('claude-code', ?, 0, 1, 'test')",
            (path,),
        )
    first = one(conn, "SELECT entry_id FROM entries WHERE source_path=? ORDER BY rowid LIMIT 1", path)
    delete_store.select_where(conn, "entry_id = ?", (first,))
    assert delete_store.counts(conn)["quarantine"] == 0  # the file keeps 68 entries
    with sqlite_store.write(conn):
        assert delete_store.delete_selected(conn)["entries"] == 1
    assert one(conn, "SELECT count(*) FROM quarantine WHERE path=?", path) == 1
    delete_store.select_where(conn, "source_path = ?", (path,))
    assert delete_store.counts(conn)["quarantine"] == 1
    with sqlite_store.write(conn):
        assert delete_store.delete_selected(conn)["entries"] == 68
    delete_store.drop_selection(conn)
    assert one(conn, "SELECT count(*) FROM quarantine WHERE path=?", path) == 0


def test_select_project_takes_dirless_records_of_sessions_wholly_inside(conn):
    with sqlite_store.write(conn):
        # a dir-less record of SID (wholly in its project) and one of a session that is not
        sid_dir = one(
            conn, "SELECT project_dir FROM entries WHERE session_id=? AND project_dir IS NOT NULL", SID
        )
        conn.execute(
            "INSERT INTO entries(entry_id, agent, session_id, kind, role, status) "
            "VALUES('t-in', 'claude-code', ?, 'summary', 'system', 'active')",
            (SID,),
        )
        conn.execute(
            "INSERT INTO entries(entry_id, agent, session_id, project_dir, kind, role, status) "
            "VALUES('t-out', 'claude-code', 't-mixed', ?, 'message', 'user', 'active')",
            (sid_dir,),
        )
        conn.execute(
            "INSERT INTO entries(entry_id, agent, session_id, project_dir, kind, role, status) "
            "VALUES('t-elsewhere', 'claude-code', 't-mixed', '/elsewhere', 'message', 'user', 'active')"
        )
        conn.execute(
            "INSERT INTO entries(entry_id, agent, session_id, kind, role, status) "
            "VALUES('t-mixed-dirless', 'claude-code', 't-mixed', 'summary', 'system', 'active')"
        )
    n_under = one(
        conn,
        "SELECT count(*) FROM entries WHERE project_dir = ? OR project_dir LIKE ?",
        sid_dir,
        sid_dir + "/%",
    )
    delete_store.select_project(conn, sid_dir)
    picked = {r[0] for r in conn.execute("SELECT entry_id FROM _p_entries")}
    assert "t-in" in picked and "t-out" in picked
    assert "t-elsewhere" not in picked and "t-mixed-dirless" not in picked
    assert len(picked) == n_under + 1
    assert SID in delete_store.selected_sessions(conn) and "t-mixed" not in delete_store.selected_sessions(
        conn
    )
    delete_store.drop_selection(conn)


def test_scrub_merges_fts_and_truncates_the_wal(conn, store):
    conn.execute("PRAGMA secure_delete=ON")
    delete_store.select_session(conn, SID)
    with sqlite_store.write(conn):
        delete_store.delete_selected(conn)
    delete_store.drop_selection(conn)
    assert (store / "store.db-wal").stat().st_size > 0
    delete_store.scrub(conn)
    assert (store / "store.db-wal").stat().st_size == 0
    fts_consistent(conn)


def test_fts_words_columns(conn):
    cols = delete_store.fts_words_columns(conn)
    assert cols == ["title", "text", "facets"]  # schema v3
    bare = sqlite3.connect(":memory:")
    bare.execute("CREATE VIRTUAL TABLE fts_words USING fts5(text)")
    assert delete_store.fts_words_columns(bare) == ["text"]


def test_a_purged_project_leaves_no_projects_row(conn):
    # the project dir of the session, read through the view; other dirs stay
    (pdir,) = conn.execute(
        "SELECT DISTINCT project_dir FROM entries WHERE session_id=? AND project_dir IS NOT NULL", (SID,)
    ).fetchone()
    others = {r[0] for r in conn.execute("SELECT project_dir FROM projects")} - {pdir}
    assert others and one(conn, "SELECT count(*) FROM projects WHERE project_dir=?", pdir) == 1
    delete_store.select_project(conn, pdir)
    with sqlite_store.write(conn):
        delete_store.delete_selected(conn)
    delete_store.drop_selection(conn)
    assert one(conn, "SELECT count(*) FROM entries WHERE project_dir=?", pdir) == 0
    assert {r[0] for r in conn.execute("SELECT project_dir FROM projects")} == {
        r[0] for r in conn.execute("SELECT DISTINCT project_dir FROM entries WHERE project_dir IS NOT NULL")
    }
    assert one(conn, "SELECT count(*) FROM projects WHERE project_dir=?", pdir) == 0
    # every load stamp left is one an entry holds
    assert (
        one(conn, "SELECT count(*) FROM ingests WHERE ingest_id NOT IN (SELECT ingest_id FROM entry_rows)")
        == 0
    )
    fts_consistent(conn)

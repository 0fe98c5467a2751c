"""DuckDB's usage marks (``duckdb_store.usage_marks``, ``_logged_changes``): a sync
whose SQLite ``usage`` did not change compares no usage row, one whose usage changed
compares only the rows above DuckDB's rowid mark and the keys ``usage_log`` got since
(``ddl.USAGE_LOG_TRIGGERS``), and every path that changes usage in SQLite moves the
mark: DuckDB always ends up what a sync from scratch builds."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ctxkeep.pipeline import engine as pipeline
from ctxkeep.pipeline.analytics_sync import sync_analytics
from ctxkeep.pipeline.notes import index_note
from ctxkeep.pipeline.plan import plan
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import synced_from_scratch
from session_lines import claude_lines

A, B, C, D = (f"5e55a000-0000-4000-8000-0000000000{x}" for x in ("aa", "bb", "cc", "dd"))


def _session(proj: Path, name: str, sid: str, start: dt.datetime, fork_of: str | None = None) -> None:
    """A Claude Code session file of 60 responses; ``fork_of``: a file name in
    ``proj`` whose responses (same usage keys) this one logs with twice the output (its
    rows then update the stored ones in place: ``load_batch``'s upsert)."""
    lines = (proj / fork_of).read_text().splitlines() if fork_of else claude_lines(sid, 120, start)
    out = []
    for line in lines:
        rec = json.loads(line)
        rec["sessionId"] = sid
        if fork_of and rec["type"] == "assistant":
            rec["message"]["usage"]["output_tokens"] *= 2
        out.append(json.dumps(rec))
    (proj / name).write_text("\n".join(out) + "\n")


def _ingest(home: Path, src: Path) -> None:
    """Ingest ``src`` (a HOME) into ``home``'s SQLite without any DuckDB sync."""
    conn = sqlite_store.connect(home)
    try:
        p = plan(home, conn, ctx=DiscoveryContext(home=src, env={}))
        pipeline.ingest_files(conn, p.todo, sqlite_store.tombstoned(conn), writer=True)
    finally:
        conn.close()


def _usage(home: Path) -> list[tuple]:
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        return con.execute("SELECT * EXCLUDE (machine) FROM usage ORDER BY usage_key").fetchall()
    finally:
        con.close()


def _reference(home: Path, ref: Path) -> list[tuple]:
    """``home``'s SQLite synced into a new DuckDB from scratch."""
    return _usage(synced_from_scratch(home, ref))


@pytest.fixture
def spied(monkeypatch) -> list[dict]:
    """What each ``sync_usage`` returned (the outermost call: a fallback to every row
    calls it again inside)."""
    got: list[dict] = []
    real = duckdb_store.sync_usage
    depth = [0]

    def spy(*a, **k):
        depth[0] += 1
        try:
            r = real(*a, **k)
        finally:
            depth[0] -= 1
        if not depth[0]:
            got.append(r)
        return r

    monkeypatch.setattr(duckdb_store, "sync_usage", spy)
    return got


@pytest.fixture
def synced(tmp_path) -> tuple[Path, Path]:
    """A store holding sessions A and D (120 usage rows), DuckDB synced (its usage
    marks recorded); and the HOME it was read from."""
    src, home = tmp_path / "src", tmp_path / "store"
    proj = src / ".claude" / "projects" / "-tmp-demo"
    proj.mkdir(parents=True)
    _session(proj, "a.jsonl", A, dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
    _session(proj, "d.jsonl", D, dt.datetime(2026, 3, 2, tzinfo=dt.UTC))
    _ingest(home, src)
    conn = sqlite_store.connect(home)
    try:
        sync_analytics(conn, home)
        assert conn.execute("SELECT count(*) FROM usage").fetchone()[0] == 120
    finally:
        conn.close()
    return home, src


def _sync(home: Path) -> None:
    conn = sqlite_store.connect(home)
    try:
        assert sync_analytics(conn, home).startswith("analytics: ")
    finally:
        conn.close()


def test_a_note_adds_no_usage_and_the_sync_compares_no_usage_row(synced, spied, tmp_path):
    home, _ = synced
    conn = sqlite_store.connect(home)
    try:
        index_note(conn, "a-note", text="a note about nothing in particular")
    finally:
        conn.close()
    _sync(home)
    assert spied[-1]["usage_compared"] == 0 and spied[-1]["usage_rows"] == 120
    assert _usage(home) == _reference(home, tmp_path / "ref")


def test_an_ingest_that_updates_in_place_and_inserts_compares_those_rows_only(synced, spied, tmp_path):
    """``load_batch``: B logs A's 60 responses again with more output (updated in
    place, logged), C adds 60 rows (new rowids); D's 60 rows are not compared."""
    home, src = synced
    proj = src / ".claude" / "projects" / "-tmp-demo"
    _session(proj, "b.jsonl", B, dt.datetime(2026, 3, 1, tzinfo=dt.UTC), fork_of="a.jsonl")
    _session(proj, "c.jsonl", C, dt.datetime(2026, 3, 3, tzinfo=dt.UTC))
    _ingest(home, src)
    _sync(home)
    assert spied[-1]["usage_rows"] == 180
    assert spied[-1]["usage_compared"] == 120 and spied[-1]["usage_changed"] == 120
    got = _usage(home)
    assert len(got) == 180 and got == _reference(home, tmp_path / "ref")


def test_without_the_log_an_update_in_place_would_be_missed(synced, spied, tmp_path):
    """What the triggers guard: an update in place with the trigger dropped leaves
    DuckDB's rows stale (the marks say nothing changed)."""
    home, _ = synced
    conn = sqlite3_plain(home)
    conn.execute("DROP TRIGGER usage_logged_update")
    conn.execute("UPDATE usage SET output_tokens = output_tokens * 2 WHERE session_id = ?", (A,))
    conn.commit()
    assert conn.execute("SELECT count(*) FROM usage_log").fetchone()[0] == 0
    conn.close()
    # (a read-only open: a writable one makes the triggers again)
    conn = sqlite_store.connect(home, readonly=True)
    try:
        duckdb_store.sync(conn, home)
    finally:
        conn.close()
    assert spied[-1]["usage_compared"] == 0
    assert _usage(home) != _reference(home, tmp_path / "ref")


def sqlite3_plain(home: Path):
    import sqlite3

    return sqlite3.connect(home / "store.db")


def test_a_purge_leaves_duckdb_as_sqlite_and_marked(synced, spied, tmp_path):
    """``purge``: D's usage rows deleted in SQLite (logged with their rowids); purge
    rebuilds DuckDB, and the sync after it compares no row."""
    from ctxkeep.maintenance.purge import run_purge
    from ctxkeep.maintenance.purge_request import PurgeRequest

    home, _ = synced
    r = run_purge(home, PurgeRequest("session", session_id=D))
    assert r["removed"]["usage"] == 60
    _sync(home)
    assert spied[-1]["usage_rows"] == 60
    # purge rebuilds DuckDB (no deleted row left in its free blocks: every row
    # compared), and records the marks: the next sync compares none
    assert [u["usage_compared"] for u in spied] == [60, 0]
    got = _usage(home)
    assert len(got) == 60 and got == _reference(home, tmp_path / "ref")


def test_a_deleted_top_row_whose_rowid_is_taken_again_is_compared(synced, spied, tmp_path):
    """The row at DuckDB's rowid mark deleted and a new row given its rowid (SQLite
    reuses the top rowid): the sync compares from below the lowest rowid deleted."""
    home, _ = synced
    conn = sqlite3_plain(home)
    top, key = conn.execute("SELECT rowid, usage_key FROM usage ORDER BY rowid DESC LIMIT 1").fetchone()
    conn.execute("DELETE FROM usage WHERE rowid = ?", (top,))
    conn.execute(
        "INSERT INTO usage(usage_key, agent, session_id, ts, model, input_tokens, output_tokens) "
        "VALUES('claude:new-key', 'claude', ?, '2026-03-05T00:00:00.000000Z', 'claude-sonnet-4-20250514', 10, 20)",
        (D,),
    )
    assert conn.execute("SELECT max(rowid) FROM usage").fetchone()[0] == top
    conn.commit()
    conn.close()
    _sync(home)
    assert spied[-1]["usage_compared"] == 1
    got = _usage(home)
    assert got == _reference(home, tmp_path / "ref")
    assert "claude:new-key" in {r[0] for r in got} and key not in {r[0] for r in got}


def test_deleted_rows_below_the_mark_are_deleted_from_duckdb_comparing_none(synced, spied, tmp_path):
    """A delete (retention or a tool's statement) of A's rows, not at the top: logged,
    and the sync deletes those keys from DuckDB without reading a row."""
    home, _ = synced
    conn = sqlite3_plain(home)
    conn.execute("DELETE FROM usage WHERE session_id = ?", (A,))
    conn.commit()
    conn.close()
    _sync(home)
    assert spied[-1]["usage_compared"] == 0 and spied[-1]["usage_rows"] == 60
    assert _usage(home) == _reference(home, tmp_path / "ref")


def test_a_row_the_marks_do_not_show_makes_the_sync_compare_every_row(synced, spied, tmp_path):
    """A change the log did not see (the triggers dropped: a VACUUM's renumbered
    rowids, a store written by a tool without them): DuckDB's count then differs from
    SQLite's after the partial compare, and every row is compared."""
    home, _ = synced
    conn = sqlite3_plain(home)
    conn.execute("DROP TRIGGER usage_logged_delete")
    conn.execute("DELETE FROM usage WHERE session_id = ?", (D,))
    conn.commit()
    conn.close()
    conn = sqlite_store.connect(home, readonly=True)
    try:
        duckdb_store.sync(conn, home)
    finally:
        conn.close()
    assert spied[-1]["usage_compared"] == 60 and spied[-1]["usage_rows"] == 60
    assert _usage(home) == _reference(home, tmp_path / "ref")


def test_a_migration_makes_the_next_sync_compare_every_row(synced, spied, tmp_path):
    """A migration step may change usage before the triggers exist (v14 re-keyed
    Claude's rows): ``ensure_schema`` logs a NULL key, and the sync compares all."""
    home, _ = synced
    conn = sqlite3_plain(home)
    conn.execute("UPDATE meta SET value = '15' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    _sync(home)  # (connect migrates v15 -> v16)
    assert spied[-1]["usage_compared"] == 120
    _sync(home)
    assert spied[-1]["usage_compared"] == 0


def test_a_rebuild_compares_every_row_whatever_the_marks(synced, spied, tmp_path):
    """``sync(rebuild=True)`` (reparse, restore, doctor --repair, reindex rebuild
    DuckDB) forgets the usage marks."""
    home, _ = synced
    conn = sqlite3_plain(home)
    conn.execute("DROP TRIGGER usage_logged_update")
    conn.execute("UPDATE usage SET output_tokens = output_tokens + 7 WHERE session_id = ?", (A,))
    conn.commit()
    conn.close()
    conn = sqlite_store.connect(home, readonly=True)
    try:
        duckdb_store.sync(conn, home, rebuild=True)
    finally:
        conn.close()
    assert spied[-1]["usage_compared"] == 120
    assert _usage(home) == _reference(home, tmp_path / "ref")


def test_the_log_is_pruned_to_the_mark_duckdb_holds(synced, spied):
    home, _ = synced
    conn = sqlite3_plain(home)
    conn.execute("UPDATE usage SET output_tokens = output_tokens + 1 WHERE session_id = ?", (A,))
    conn.commit()
    assert conn.execute("SELECT count(*), max(seq) FROM usage_log").fetchone() == (60, 60)
    conn.close()
    _sync(home)
    conn = sqlite3_plain(home)
    assert conn.execute("SELECT seq FROM usage_log").fetchall() == [(60,)]  # the mark's row kept
    conn.execute("UPDATE usage SET output_tokens = output_tokens + 1 WHERE session_id = ?", (D,))
    conn.commit()
    conn.close()
    _sync(home)
    assert spied[-1]["usage_compared"] == 60


_KILLED_CHILD = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_usage_marks import _ingest
_ingest(Path({home!r}), Path({src!r}))
os.kill(os.getpid(), signal.SIGKILL)  # after SQLite's commit, before any DuckDB sync
"""


def test_a_kill_between_sqlites_commit_and_duckdbs_sync_leaves_a_mark_to_compare(synced, spied, tmp_path):
    """SIGKILL trial: a process commits an ingest that updates A's rows in place and
    is killed before DuckDB's sync; the next sync compares those rows."""
    home, src = synced
    proj = src / ".claude" / "projects" / "-tmp-demo"
    _session(proj, "b.jsonl", B, dt.datetime(2026, 3, 1, tzinfo=dt.UTC), fork_of="a.jsonl")
    code = _KILLED_CHILD.format(tests=str(Path(__file__).parent), home=str(home), src=str(src))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]), *sys.path]))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()[-2000:]
    _sync(home)
    assert spied[-1]["usage_compared"] == 60 and spied[-1]["usage_changed"] == 60
    assert _usage(home) == _reference(home, tmp_path / "ref")

"""Purge: the ctx_purge contract (one test per case) and what a purge removes.

Stores are copies of the session-wide corpus store (tests/conftest.py ``corpus_store``),
so each test mutates its own copy in tmp_path; the corpus itself is only read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3

import duckdb
import pytest

from conftest import CORPUS_HOME, corpus, fts_entries, hold_lock_in_subprocess, scalar
from ctxkeep.errors import PurgeCancelled, StoreBusy, UsageError
from ctxkeep.maintenance.purge import preview
from ctxkeep.maintenance.purge import run_purge as purge
from ctxkeep.maintenance.purge_request import PurgeRequest, parse_purge_request
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.lock import hold
from ctxkeep.sources.contract import DiscoveryContext
from tests.store_digest import chunk_index_exact

SID = "0d3a8e6f-290f-4105-a327-a2496e5e2a83"  # claude-code-log sample, 69 entries
SID_FILE = ".claude/projects/-Users-dain-workspace-claude-code-log-sample/" + SID + ".jsonl"
PHRASE = b"timeline filtering so that we hide the group"  # only in that session
DEMO = "/path/to/Demo"  # sample-project (fe5e1c67…), with sidechains
DEMO_SID = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"


# ---------------------------------------------------------------- the contract


def test_session_id_with_confirm_true_is_session_scope():
    r = parse_purge_request(session_id=SID, confirm=True, cwd="/x")
    assert r == PurgeRequest("session", session_id=SID)
    assert r.describe() == f"session {SID}"


def test_confirm_as_string_true_is_accepted():
    r = parse_purge_request(session_id=SID, scope="session", confirm="true", cwd="/x")
    assert r.scope == "session" and r.session_id == SID
    assert parse_purge_request(scope="project", confirm="TRUE", cwd="/x").project_dir == "/x"


@pytest.mark.parametrize("confirm", [False, "false", "False"])
def test_confirm_false_cancels_with_the_seed_message(confirm):
    with pytest.raises(PurgeCancelled) as ei:
        parse_purge_request(session_id=SID, confirm=confirm, cwd="/x")
    assert str(ei.value) == "Purge cancelled. Pass confirm: true to proceed."


def test_confirm_missing_is_refused():
    with pytest.raises(UsageError, match="confirm"):
        parse_purge_request(session_id=SID, cwd="/x")
    with pytest.raises(UsageError, match="true or false"):
        parse_purge_request(session_id=SID, confirm="maybe", cwd="/x")


def test_session_id_with_scope_project_is_ambiguous():
    with pytest.raises(UsageError) as ei:
        parse_purge_request(session_id=SID, scope="project", confirm=True, cwd="/x")
    assert str(ei.value).startswith("Ambiguous purge")


def test_scope_session_without_id_is_an_error():
    with pytest.raises(UsageError, match="session id"):
        parse_purge_request(scope="session", confirm=True, cwd="/x")
    with pytest.raises(UsageError, match="session id"):
        parse_purge_request(scope="session", session_id="  ", confirm="true", cwd="/x")


def test_bare_confirm_true_is_refused_naming_both_scopes():
    with pytest.raises(UsageError) as ei:
        parse_purge_request(confirm=True, cwd="/home/u/proj")
    msg = str(ei.value)
    assert "a session (its id)" in msg and "a project (its directory" in msg


def test_scope_project_defaults_to_cwd_and_resolves_relative_dirs():
    assert (
        parse_purge_request(scope="project", confirm=True, cwd="/home/u/proj/").project_dir == "/home/u/proj"
    )
    r = parse_purge_request(scope="project", project_dir="sub/../app", confirm=True, cwd="/home/u")
    assert r == PurgeRequest("project", project_dir="/home/u/app")
    # a project dir alone is explicit enough
    assert parse_purge_request(project_dir="/srv/x", confirm=True, cwd="/").scope == "project"


@pytest.mark.parametrize(
    "cwd,pdir", [("/", None), ("/tmp", "/"), ("/x", "~"), ("/x", "C:\\"), ("/x", "~/.."), ("/", ".")]
)
def test_project_purge_of_the_root_or_home_is_refused(cwd, pdir, monkeypatch, tmp_path):
    # a project tombstone at / or ~ would drop every future session: refused, whatever the route
    monkeypatch.setenv("HOME", str(tmp_path / "u"))
    with pytest.raises(UsageError, match="refusing to purge project") as ei:
        parse_purge_request(scope="project", project_dir=pdir, confirm=True, cwd=cwd)
    assert "purge --all" in ei.value.hint
    if pdir is None:
        assert "no project directory was given" in str(ei.value)
    # one project below home is fine
    r = parse_purge_request(scope="project", project_dir="~/code/app", confirm=True, cwd=cwd)
    assert r.project_dir == str(tmp_path / "u" / "code" / "app")


def test_unknown_scope_is_refused():
    with pytest.raises(UsageError, match="unknown purge scope"):
        parse_purge_request(scope="everything", confirm=True, cwd="/x")


# ---------------------------------------------------------------- what it removes


def test_session_purge_removes_rows_fts_usage_and_duckdb(store):
    before_entries = scalar(store, "SELECT count(*) FROM entries")
    assert scalar(store, "SELECT count(*) FROM entries WHERE session_id=?", SID) == 69
    conn = sqlite_store.connect(store, readonly=True)
    hits = fts_entries(store, "timeline filtering hide group")
    assert len(hits) == 10 and {
        scalar(store, "SELECT session_id FROM entries WHERE entry_id=?", h) for h in hits
    } == {SID}
    dry = preview(conn, PurgeRequest("session", session_id=SID))
    conn.close()

    rep = purge(store, parse_purge_request(session_id=SID, confirm="true", cwd="/"))
    assert rep["resolved"] == f"session {SID}"
    assert {k: rep["removed"][k] for k in dry} == dry  # the preview counted exactly this
    assert rep["removed"]["archived"] == 0
    assert rep["removed"]["entries"] == 69
    assert rep["removed"]["usage"] == 15
    assert rep["removed"]["contents"] == 57 and rep["removed"]["chunks"] == 60
    assert rep["files"] == [str(CORPUS_HOME / SID_FILE)]
    assert rep["tombstone"] == "added"

    assert scalar(store, "SELECT count(*) FROM entries") == before_entries - 69
    assert scalar(store, "SELECT count(*) FROM entries WHERE session_id=?", SID) == 0
    assert scalar(store, "SELECT count(*) FROM usage WHERE session_id=?", SID) == 0
    # no orphan contents/chunks, both FTS indexes consistent with chunks
    assert (
        scalar(
            store,
            "SELECT count(*) FROM contents c WHERE NOT EXISTS "
            "(SELECT 1 FROM entries e WHERE e.content_hash=c.content_hash)",
        )
        == 0
    )
    assert (
        scalar(store, "SELECT count(*) FROM chunks WHERE content_id NOT IN (SELECT content_id FROM contents)")
        == 0
    )
    conn = sqlite3.connect(store / "store.db")
    conn.execute("INSERT INTO fts_words(fts_words, rank) VALUES('integrity-check', 1)")
    conn.execute("INSERT INTO fts_grams(fts_grams) VALUES('integrity-check')")
    assert (
        conn.execute("SELECT count(*) FROM fts_grams").fetchone()[0]
        == conn.execute(
            "SELECT count(*) FROM chunks WHERE chunk_id IN (SELECT rowid FROM fts_grams)"
        ).fetchone()[0]
    )
    conn.close()
    assert fts_entries(store, "timeline filtering hide group") == set()
    d = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    assert d.execute("SELECT count(*) FROM entries WHERE session_id=?", [SID]).fetchone()[0] == 0
    assert d.execute("SELECT count(*) FROM usage WHERE session_id=?", [SID]).fetchone()[0] == 0
    assert d.execute("SELECT count(*) FROM entries").fetchone()[0] == before_entries - 69
    d.close()
    assert chunk_index_exact(store) > 0  # (v16) the chunk id -> content id index as its table


def test_shared_contents_stay(store):
    # a text present in this session and in another one must survive the purge
    shared = scalar(
        store,
        "SELECT count(DISTINCT e.content_hash) FROM entries e WHERE e.session_id=? AND "
        "EXISTS (SELECT 1 FROM entries o WHERE o.content_hash=e.content_hash AND o.session_id<>?)",
        SID,
        SID,
    )
    assert shared > 0
    distinct = scalar(store, "SELECT count(DISTINCT content_hash) FROM entries WHERE session_id=?", SID)
    rep = purge(store, PurgeRequest("session", session_id=SID))
    assert rep["removed"]["contents"] == distinct - shared


def test_deleted_text_does_not_linger_in_the_files(store):
    raw = b"".join(p.read_bytes() for p in store.glob("store.db*"))
    assert PHRASE in raw
    purge(store, PurgeRequest("session", session_id=SID))
    for p in list(store.glob("store.db*")) + list(store.glob("analytics.duckdb*")):
        assert PHRASE not in p.read_bytes(), p.name


def test_purge_is_idempotent(store):
    first = purge(store, PurgeRequest("session", session_id=SID))
    n = scalar(store, "SELECT count(*) FROM entries")
    second = purge(store, PurgeRequest("session", session_id=SID))
    assert first["removed"]["entries"] == 69
    assert all(v == 0 for v in second["removed"].values())
    assert scalar(store, "SELECT count(*) FROM entries") == n
    assert scalar(store, "SELECT count(*) FROM tombstones WHERE scope='session' AND value=?", SID) == 1


def test_dry_run_changes_nothing(store):
    digest = hashlib.sha256((store / "store.db").read_bytes()).hexdigest()
    rep = purge(store, PurgeRequest("project", project_dir=DEMO), dry_run=True)
    assert rep["dry_run"] is True and rep["removed"]["entries"] == 438
    assert rep["removed"]["sessions"] == 6
    assert hashlib.sha256((store / "store.db").read_bytes()).hexdigest() == digest
    assert scalar(store, "SELECT count(*) FROM tombstones") == 0


def test_project_purge_covers_subdirs_sidechains_and_dirless_records(store):
    assert scalar(store, "SELECT count(*) FROM entries WHERE session_id LIKE ?", DEMO_SID + "%") == 438
    rep = purge(store, parse_purge_request(scope="project", project_dir=DEMO + "/", confirm=True, cwd="/"))
    assert rep["resolved"] == f"project {DEMO}"
    assert rep["removed"]["entries"] == 438
    assert scalar(store, "SELECT count(*) FROM entries WHERE session_id LIKE ?", DEMO_SID + "%") == 0
    assert scalar(store, "SELECT count(*) FROM usage WHERE project_dir LIKE ?", DEMO + "%") == 0
    # a project whose name merely starts with the same characters is not touched
    assert scalar(store, "SELECT count(*) FROM entries WHERE project_dir LIKE '/path/to/Demo%'") == 0


def test_project_purge_then_ingest_does_not_bring_data_back(store):
    purge(store, PurgeRequest("project", project_dir=DEMO))
    ctx = DiscoveryContext(home=CORPUS_HOME, env={})
    s = run_ingest(store, ctx=ctx)
    assert s.entries_new == 0
    s = run_ingest(store, ctx=ctx, force=True)  # re-read every file from byte 0
    assert s.entries_new == 0
    assert scalar(store, "SELECT count(*) FROM entries WHERE session_id LIKE ?", DEMO_SID + "%") == 0
    assert scalar(store, "SELECT count(*) FROM entries WHERE project_dir LIKE ?", DEMO + "%") == 0


def test_reingest_lifts_the_tombstone(store):
    rep = purge(store, PurgeRequest("project", project_dir=DEMO))
    assert scalar(store, "SELECT count(*) FROM tombstones") == 7  # the project + 6 sessions
    # the project's one session file went wholly: its watermark row went with it, and it
    # is not read again while the tombstone stands
    assert rep["removed"]["watermarks"] == 1
    assert scalar(store, "SELECT count(*) FROM purge_files WHERE kind='file'") == 1
    rep = purge(store, PurgeRequest("project", project_dir=DEMO), reingest=True)
    assert rep["tombstone"] == "lifted" and rep["watermarks_dropped"] == 0
    assert scalar(store, "SELECT count(*) FROM purge_files") == 0
    assert scalar(store, "SELECT count(*) FROM tombstones") == 0
    s = run_ingest(store, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
    assert s.entries_new == 438
    assert s.files_read == 1


def test_purge_never_touches_session_files(tmp_path, store_home):
    src = corpus(SID_FILE)
    f = tmp_path / "proj" / src.name
    f.parent.mkdir()
    shutil.copy2(src, f)
    st = f.stat()
    run_ingest(store_home, paths=[f])
    purge(store_home, PurgeRequest("session", session_id=SID))
    assert f.read_bytes() == src.read_bytes()
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_ino == st.st_ino


def test_purge_all_removes_store_files_and_sidecars(store):
    (store / "archive" / "agent=codex").mkdir(parents=True)
    (store / "archive" / "agent=codex" / "x.parquet").write_bytes(b"PAR1")
    conn = sqlite_store.connect(store)  # keep -wal / -shm present
    conn.execute("INSERT INTO meta VALUES('t', 'x')")
    names = {p.name for p in store.iterdir()}
    assert {"store.db", "store.db-wal", "store.db-shm", "analytics.duckdb"} <= names
    dry = purge(store, PurgeRequest("all"), dry_run=True)
    assert dry["removed"]["entries"] == scalar(store, "SELECT count(*) FROM entries") > 3000
    assert set(dry["files_removed"]) >= {
        "store.db",
        "store.db-wal",
        "store.db-shm",
        "analytics.duckdb",
        "archive/",
        "vault/",  # the corpus store's ingest filled the vault
    }
    assert any((store / "vault").rglob("*.pack"))
    assert (store / "store.db").exists()
    conn.close()
    rep = purge(store, PurgeRequest("all"))
    assert rep["resolved"] == "the whole store"
    left = {p.name for p in store.iterdir()}
    assert not left & {"store.db", "store.db-wal", "store.db-shm", "analytics.duckdb", "archive", "vault"}
    assert purge(store, PurgeRequest("all"))["files_removed"] == []  # idempotent


def test_purge_refuses_a_lock_held_by_another_process(store):
    holder = hold_lock_in_subprocess(store)
    try:
        with pytest.raises(StoreBusy, match="holds the store"):
            purge(store, PurgeRequest("session", session_id=SID), timeout=0)
        assert scalar(store, "SELECT count(*) FROM entries WHERE session_id=?", SID) == 69
    finally:
        holder.communicate(b"\n", timeout=30)
    assert purge(store, PurgeRequest("session", session_id=SID), timeout=0)["removed"]["entries"] == 69


def test_lock_is_reentrant_within_a_process(store):
    with hold(store, 0):
        rep = purge(store, PurgeRequest("session", session_id=SID), timeout=0)
    assert rep["removed"]["entries"] == 69


def test_purge_of_missing_store_dry_run_is_zero(store_home):
    rep = purge(store_home, PurgeRequest("session", session_id=SID), dry_run=True)
    assert rep["removed"]["entries"] == 0 and not (store_home / "store.db").exists()
    assert os.listdir(store_home) == []


def test_purge_removes_the_scope_from_the_parquet_archive(store):
    from ctxkeep.maintenance.retention import run_retention
    from ctxkeep.sinks import parquet as archive

    conn = sqlite3.connect(store / "store.db")
    with conn:  # archive this session and two entries of the Demo project
        conn.execute(
            "UPDATE entries SET status='archived' WHERE session_id=? OR rowid IN "
            "(SELECT rowid FROM entries WHERE session_id=? AND ts IS NOT NULL ORDER BY rowid LIMIT 2)",
            (SID, DEMO_SID),
        )
    conn.close()
    assert (
        run_retention(store, ctx=DiscoveryContext(home=CORPUS_HOME, env={}), archive_after_days=7)[
            "archived"
        ]["entries"]
        == 71
    )
    assert archive.read_archive(store).height == 71
    dry = purge(store, PurgeRequest("session", session_id=SID), dry_run=True)
    assert dry["removed"]["entries"] == 0 and dry["removed"]["archived"] == 69
    rep = purge(store, PurgeRequest("session", session_id=SID))
    assert rep["removed"]["archived"] == 69
    left = archive.read_archive(store)
    assert left.height == 2 and set(left["session_id"]) == {DEMO_SID}
    assert not (store / "archive" / "agent=claude-code" / "month=2025-07").exists()
    for f in (store / "archive").rglob("*.parquet"):
        assert PHRASE not in f.read_bytes()
    assert scalar(store, "SELECT count(*) FROM archived") == 2
    rep = purge(store, PurgeRequest("project", project_dir=DEMO))
    assert rep["removed"]["archived"] == 2 and rep["removed"]["entries"] == 436
    assert archive.read_archive(store).height == 0


def test_purge_drops_the_coverage_rows_of_the_files_it_removed_wholly(store):
    # newuser18 F5: the coverage ledger kept the purged file's path (a client's name is
    # often in it) and its counts; only the tombstone keeps identifying data, on purpose
    path = str(CORPUS_HOME / SID_FILE)
    assert scalar(store, "SELECT count(*) FROM coverage WHERE path=?", path) >= 1
    others = scalar(store, "SELECT count(*) FROM coverage WHERE path<>?", path)
    rep = purge(store, PurgeRequest("session", session_id=SID))
    assert rep["removed"]["coverage"] >= 1
    assert scalar(store, "SELECT count(*) FROM coverage WHERE path=?", path) == 0
    assert scalar(store, "SELECT count(*) FROM coverage") == others  # no other file's row
    # the path is left only in the tombstone's purge_files rows (what stops a re-ingest)
    assert _tables_naming(store, path) == {"purge_files": 2}  # kind 'path' and kind 'file'
    assert rep["kept"] == (
        "kept on purpose: a tombstone naming the session id and 1 file path, so the next ingest "
        "does not bring it back (`purge --reingest` lifts it)"
    )
    # a purge --reingest lifts the tombstone: the ledger row comes back with the data
    purge(store, PurgeRequest("session", session_id=SID), reingest=True)
    run_ingest(store, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
    assert scalar(store, "SELECT count(*) FROM coverage WHERE path=?", path) >= 1


def test_project_purge_says_what_its_tombstone_keeps(store):
    rep = purge(store, PurgeRequest("project", project_dir=DEMO))
    assert rep["kept"] == (
        "kept on purpose: a tombstone naming the project dir, 6 session ids and 1 file path, "
        "so the next ingest does not bring it back (`purge --reingest` lifts it)"
    )
    assert scalar(store, "SELECT count(*) FROM coverage WHERE path LIKE '%sample-project%'") == 0
    lifted = purge(store, PurgeRequest("project", project_dir=DEMO), reingest=True)
    assert lifted["kept"] is None  # no tombstone, nothing kept


def _tables_naming(store, needle: str) -> dict[str, int]:
    """Table → rows of it with a text column holding ``needle`` (every ordinary table of
    store.db; FTS5's shadow tables hold no paths)."""
    conn = sqlite3.connect(store / "store.db")
    out = {}
    for (t,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND sql NOT LIKE '%VIRTUAL%'"
    ):
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
        where = " OR ".join(f'instr(CAST("{c}" AS TEXT), ?)' for c in cols)
        n = conn.execute(f'SELECT count(*) FROM "{t}" WHERE {where}', [needle] * len(cols)).fetchone()[0]
        if n:
            out[t] = n
    conn.close()
    return out

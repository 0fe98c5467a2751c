"""Retention, reindex and backfill (plain functions; the Prefect flows wrap these)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
from pathlib import Path

import duckdb
import polars as pl
import pytest

from conftest import CORPUS_HOME, chunk_fts_index, corpus, fts_entries, scalar
from ctxkeep.maintenance.backfill import record_span, run_backfill, select_backfill
from ctxkeep.maintenance.reindex import run_reindex
from ctxkeep.maintenance.retention import old_backups, run_retention
from ctxkeep.sinks import parquet as archive
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from tests.store_digest import chunk_index_exact

SID = "0d3a8e6f-290f-4105-a327-a2496e5e2a83"
CODEX_BIG = "c61729d4-da6d-46a4-9a29-ec2c614e5e23"


@pytest.fixture
def ctx():
    return DiscoveryContext(home=CORPUS_HOME, env={})


def grams_rows(home: Path) -> list[tuple]:
    """The indexed ``(term, rowid, column, offset)`` instances of ``fts_grams`` (a
    contentless table: its terms are in the index only)."""
    conn = sqlite3.connect(home / "store.db")
    try:
        return chunk_fts_index(conn)["fts_grams"]
    finally:
        conn.close()


def execute(home: Path, sql: str, *args) -> None:
    conn = sqlite3.connect(home / "store.db")
    with conn:
        conn.execute(sql, args)
    conn.close()


# ---------------------------------------------------------------- retention


def test_retention_archives_old_consumed_and_archived_entries(store, ctx):
    # the compress flow marks removed lines `archived`; mark one session so, and two
    # entries of another `consumed`
    execute(store, "UPDATE entries SET status='archived' WHERE session_id=?", SID)
    execute(
        store,
        "UPDATE entries SET status='consumed' WHERE rowid IN "
        "(SELECT rowid FROM entries WHERE session_id LIKE ? ORDER BY rowid LIMIT 2)",
        "019a802a%",
    )
    total = scalar(store, "SELECT count(*) FROM entries")
    first_user = scalar(
        store,
        "SELECT content_hash FROM entries WHERE session_id=? AND role='user' "
        "AND kind='message' ORDER BY rowid LIMIT 1",
        SID,
    )
    conn = sqlite_store.connect(store, readonly=True)
    text = sqlite_store.content_text(conn, first_user)
    conn.close()

    # by default no entry leaves the store (newuser15 F16: what compress cut stays searchable)
    kept = run_retention(store, ctx=ctx)
    assert (kept["cutoff"], kept["entries_to_archive"], kept["archived"]["entries"]) == (None, 0, 0)
    assert scalar(store, "SELECT count(*) FROM entries WHERE status <> 'active'") == 71

    dry = run_retention(store, dry_run=True, ctx=ctx, archive_after_days=7)
    assert dry["entries_to_archive"] == 71
    assert {(r["agent"], r["month"], r["entries"]) for r in dry["archive"]} == {
        ("claude-code", "2025-07", 69),
        ("codex", "2025-11", 2),
    }
    assert scalar(store, "SELECT count(*) FROM entries") == total  # dry run: nothing moved

    rep = run_retention(store, ctx=ctx, archive_after_days=7)
    assert rep["archived"]["entries"] == 71
    assert chunk_index_exact(store) > 0  # (v16) the chunk id -> content id index as its table
    assert scalar(store, "SELECT count(*) FROM entries") == total - 71
    assert scalar(store, "SELECT count(*) FROM entries WHERE status <> 'active'") == 0
    files = sorted((store / "archive").rglob("*.parquet"))
    assert [f.relative_to(store / "archive").parent.as_posix() for f in files] == [
        "agent=claude-code/month=2025-07",
        "agent=codex/month=2025-11",
    ]
    df = archive.read_archive(store)
    assert df.height == 71
    assert df.filter(pl.col("session_id") == SID).height == 69
    assert df.filter(pl.col("content_hash") == first_user)["text"][0] == text
    assert df.schema["ts"] == pl.Datetime("us", "UTC")
    # gone from search and from DuckDB, still counted in usage
    assert fts_entries(store, "timeline filtering hide group") == set()
    assert scalar(store, "SELECT count(*) FROM usage WHERE session_id=?", SID) == 15
    d = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    assert d.execute("SELECT count(*) FROM entries").fetchone()[0] == total - 71
    d.close()
    # DuckDB reads the archive with its partitions
    d = duckdb.connect()
    got = d.execute(
        f"SELECT agent, count(*) FROM read_parquet('{store}/archive/**/*.parquet', "
        "hive_partitioning=true) GROUP BY agent ORDER BY agent"
    ).fetchall()
    assert got == [("claude-code", 69), ("codex", 2)]
    # idempotent: a second run has nothing to do
    assert run_retention(store, ctx=ctx, archive_after_days=7)["archived"]["entries"] == 0
    # re-reading the files (backfill) does not bring the archived entries back
    rep = run_backfill(store, ctx=ctx)
    assert rep["ingest"]["entries_new"] == 0
    assert scalar(store, "SELECT count(*) FROM entries") == total - 71


def test_retention_keeps_recent_and_active_entries(store, ctx):
    execute(store, "UPDATE entries SET status='archived' WHERE session_id=?", SID)
    rep = run_retention(store, ctx=ctx, archive_after_days=100000)  # nothing is that old
    assert rep["archived"]["entries"] == 0
    assert scalar(store, "SELECT count(*) FROM entries WHERE session_id=?", SID) == 69


def test_retention_removes_old_archives_and_old_backups(store, tmp_path):
    old = store / "archive" / "agent=codex" / "month=2025-01" / "part-x.parquet"
    old.parent.mkdir(parents=True)
    pl.DataFrame({"entry_id": ["a"]}).write_parquet(old)
    t = (dt.datetime.now(dt.UTC) - dt.timedelta(days=40)).timestamp()
    os.utime(old, (t, t))
    fresh = store / "archive" / "agent=codex" / "month=2025-02" / "part-y.parquet"
    fresh.parent.mkdir(parents=True)
    pl.DataFrame({"entry_id": ["b"]}).write_parquet(fresh)
    # a session dir with a file and compress backups (HOME → tmp)
    home = tmp_path / "user"
    proj = home / ".claude" / "projects" / "-p"
    proj.mkdir(parents=True)
    src = corpus(".claude/projects/-Users-dain-workspace-claude-code-log-sample/" + SID + ".jsonl")
    f = proj / src.name
    shutil.copy2(src, f)
    for suffix in (".backup", ".backup.1", ".backup-20260101T000000Z"):
        shutil.copy2(src, proj / (src.name + suffix))
    (proj / "notes.txt").write_text("not a backup")
    user_ctx = DiscoveryContext(home=home, env={})
    # backups were just made: nothing to remove today
    assert run_retention(store, ctx=user_ctx, dry_run=True)["old_backups"] == []
    rep = run_retention(store, ctx=user_ctx)
    assert rep["archives_removed"] == 1 and not old.exists() and fresh.exists()
    assert not old.parent.exists()  # empty partition dir pruned
    assert rep["backups_removed"] == 0
    # 31 days later the backups are past backup_max_age_days (30); the session file stays
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=31)
    rep = run_retention(store, ctx=user_ctx, now=later)
    assert rep["backups_removed"] == 3
    assert sorted(p.name for p in proj.iterdir()) == [src.name, "notes.txt"]
    assert f.read_bytes() == src.read_bytes()


def test_old_backups_pattern_only_matches_backups(tmp_path):
    for n in (
        "a.jsonl.backup",
        "a.jsonl.backup.2",
        "a.jsonl.backup-1",
        "a.jsonl",
        "backup.jsonl",
        "a.jsonl.bak",
    ):
        (tmp_path / n).write_text("x")
    future = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    assert [p.name for p in old_backups([tmp_path], future)] == [
        "a.jsonl.backup",
        "a.jsonl.backup-1",
        "a.jsonl.backup.2",
    ]


# ---------------------------------------------------------------- reindex


def test_reindex_rebuilds_fts_and_duckdb(store):
    before = fts_entries(store, "timeline filtering")
    assert len(before) > 0
    grams_before = grams_rows(store)
    camel = fts_entries(store, '"user input"', "fts_grams")  # validateUserInput-style parts
    n_chunks = scalar(store, "SELECT count(*) FROM chunks")
    n_grams = scalar(store, "SELECT count(*) FROM fts_grams")
    # wreck both indexes and DuckDB
    execute(store, "INSERT INTO fts_grams(fts_grams) VALUES('delete-all')")
    execute(store, "INSERT INTO fts_words(fts_words) VALUES('delete-all')")
    (store / "analytics.duckdb").unlink()
    assert fts_entries(store, "timeline filtering") == set()

    rep = run_reindex(store)
    assert rep["chunks"] == n_chunks and rep["grams_rows"] == n_grams
    assert chunk_index_exact(store) == n_chunks
    assert fts_entries(store, "timeline filtering") == before
    assert grams_rows(store) == grams_before
    assert fts_entries(store, '"user input"', "fts_grams") == camel
    conn = sqlite3.connect(store / "store.db")
    conn.execute("INSERT INTO fts_words(fts_words, rank) VALUES('integrity-check', 1)")
    conn.close()
    d = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    assert d.execute("SELECT count(*) FROM entries").fetchone()[0] == scalar(
        store, "SELECT count(*) FROM entries"
    )
    d.close()


def test_reindex_without_store_is_a_clear_error(store_home):
    from ctxkeep.errors import StoreError

    with pytest.raises(StoreError, match="no store to reindex"):
        run_reindex(store_home)


# ---------------------------------------------------------------- backfill


def test_backfill_everything_again_duplicates_nothing(store, ctx):
    counts = [
        scalar(store, f"SELECT count(*) FROM {t}")
        for t in ("entries", "contents", "chunks", "usage", "quarantine", "fts_grams")
    ]
    n_files = scalar(store, "SELECT count(*) FROM watermarks")  # every file the corpus ingest read
    rep = run_backfill(store, ctx=ctx)
    assert len(rep["files"]) == n_files
    assert rep["ingest"]["files_read"] == n_files and rep["ingest"]["entries_new"] == 0
    assert [
        scalar(store, f"SELECT count(*) FROM {t}")
        for t in ("entries", "contents", "chunks", "usage", "quarantine", "fts_grams")
    ] == counts


def test_backfill_restores_deleted_rows_of_given_paths(store):
    f = corpus(".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-" + CODEX_BIG + ".jsonl")
    n = scalar(store, "SELECT count(*) FROM entries WHERE session_id=?", CODEX_BIG)
    assert n == 1487
    execute(store, "DELETE FROM entries WHERE session_id=? AND kind='tool_call'", CODEX_BIG)
    lost = n - scalar(store, "SELECT count(*) FROM entries WHERE session_id=?", CODEX_BIG)
    assert lost > 300
    # a normal ingest does not see them: the watermark says the file is done
    from ctxkeep.pipeline.engine import run_ingest

    assert run_ingest(store, paths=[f]).entries_new == 0
    rep = run_backfill(store, paths=[f])
    assert rep["files"] == [str(f)]
    assert rep["ingest"]["entries_new"] == lost
    assert scalar(store, "SELECT count(*) FROM entries WHERE session_id=?", CODEX_BIG) == 1487
    conn = sqlite3.connect(store / "store.db")  # recorded by the ingest engine, as backfill
    assert conn.execute("SELECT flow, status FROM runs ORDER BY run_id DESC LIMIT 2").fetchall() == [
        ("backfill", "ok"),
        ("ingest", "ok"),
    ]
    conn.close()


def test_backfill_date_range_selects_files(ctx, store_home):
    cc = ["claude-code", "codex"]  # the JSONL agents, whose first-record times are known here
    files, _ = select_backfill(store_home, ctx=ctx, until="2025-10-01", agents=cc)
    assert sorted(f.path.name for f in files) == sorted(
        [
            "d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl",
            "ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl",
            "2c5941bd-b9de-41d6-9414-221d175776f7.jsonl",
            SID + ".jsonl",
            # (a95fea4a's records are of 2026-02: its time is nested in a snapshot, which
            # the old head scan missed, so it was listed)
            "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
            "rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl",
        ]
    )
    # `since` is about the last record: every corpus file's records are after 2020
    # (16 transcripts and the sub-agent's .meta.json, a sidecar, with its transcript)
    assert len(select_backfill(store_home, ctx=ctx, since="2020-01-01", agents=cc)[0]) == 17
    future = (dt.date.today() + dt.timedelta(days=2)).isoformat()
    assert select_backfill(store_home, ctx=ctx, since=future, agents=cc)[0] == []
    rep = run_backfill(store_home, ctx=ctx, until="2025-10-01", agents=cc)
    assert rep["ingest"]["files_read"] == 6
    assert (
        scalar(store_home, "SELECT count(DISTINCT source_path) FROM entries") == 5
    )  # the 0-byte file has none
    from ctxkeep.errors import UsageError

    with pytest.raises(UsageError, match="--since 2025-10-02 is after --until 2025-10-01"):
        select_backfill(store_home, ctx=ctx, since="2025-10-02", until="2025-10-01")


def test_first_timestamp_reads_claude_and_codex_heads():
    def first_timestamp(path):
        return record_span(path)[0]

    assert first_timestamp(
        corpus(".claude/projects/-Users-dain-workspace-claude-code-log-sample/" + SID + ".jsonl")
    ) == dt.datetime(2025, 7, 5, 19, 36, 37, 219000, tzinfo=dt.UTC)  # its earliest line (a snapshot)
    assert (
        first_timestamp(
            corpus(
                ".claude/projects/-Users-dain-workspace-JSSoundRecorder/"
                "2c5941bd-b9de-41d6-9414-221d175776f7.jsonl"
            )
        )
        is None
    )


def test_backfill_days_take_ages_like_search():
    import datetime as dt

    from ctxkeep.errors import UsageError
    from ctxkeep.timeutil import when_bound

    now = dt.datetime.now(dt.UTC)
    t = when_bound("7d")
    assert abs((now - t) - dt.timedelta(days=7)) < dt.timedelta(seconds=5)
    assert when_bound("2025-06-01", upper=True) == dt.datetime(2025, 6, 2, tzinfo=dt.UTC)
    with pytest.raises(UsageError):
        when_bound("yesterday")

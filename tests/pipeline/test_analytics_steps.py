"""The usage rows and texts of an ingest synced to DuckDB as its groups commit
(``duckdb_store.UsageSteps``, run by ``AnalyticsSyncer`` after each group's entries),
so that the closing sync, the run's single-core tail, only compares them (issue 26):
the DuckDB file ends up what a sync from SQLite after the run builds."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import threading
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import analytics_sync
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.pipeline import writer as writer_mod
from ctxkeep.pipeline.analytics_sync import AnalyticsSyncer
from ctxkeep.pipeline.plan import plan
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import synced_from_scratch
from session_lines import claude_lines

#: raw bytes per group: the corpus (~9 MB) in many groups, so most usage rows are
#: synced by the steps between commits
SMALL_GROUP = 256 * 1024

_TABLES = {
    "entries": "sqlite_rowid",
    "usage": "usage_key",
    "usage_buckets": "ALL",
    "session_text": "agent, session_id",
    "tool_errors": "entry_id",
}


def _duck(home: Path) -> dict:
    """Every derived table of ``home``'s DuckDB, sorted, and its price mark."""
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        out = {t: con.execute(f"SELECT * FROM {t} ORDER BY {k}").fetchall() for t, k in _TABLES.items()}
        out["meta"] = con.execute(
            "SELECT key, value FROM meta WHERE key IN ('price_version', 'text_rowid', 'entries_rowid') "
            "ORDER BY key"
        ).fetchall()
    finally:
        con.close()
    return out


def _reference(home: Path, ref: Path) -> dict:
    """``home``'s SQLite store synced to a new DuckDB from scratch (``duckdb_store.sync``)."""
    return _duck(synced_from_scratch(home, ref))


def _closing_usage(monkeypatch) -> list[dict]:
    """What each ``sync_usage`` (the closing sync's usage) returned."""
    got: list[dict] = []
    real = duckdb_store.sync_usage

    def spy(*a, **k):
        r = real(*a, **k)
        got.append(r)
        return r

    monkeypatch.setattr(duckdb_store, "sync_usage", spy)
    return got


@pytest.mark.parametrize("step_rows", [10**9, 40])
def test_an_ingest_syncs_usage_as_it_commits_and_ends_as_a_sync_from_sqlite(tmp_path, monkeypatch, step_rows):
    """Steps at the end of the reading (``reading_done``) and, with ``step_rows``, after
    a group once that many new usage rows wait (``USAGE_STEP_ROWS``)."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    monkeypatch.setattr(analytics_sync, "USAGE_STEP_ROWS", step_rows)
    # transactions of ~300 new entries (the corpus's 3,890 would fit one of TXN_ROWS):
    # a step follows a COMMIT
    monkeypatch.setattr(writer_mod, "TXN_ROWS", 300)
    closing = _closing_usage(monkeypatch)
    steps: list[int] = []
    real_step = duckdb_store.UsageSteps.step

    def counted(self, sq):
        steps.append(real_step(self, sq))
        return steps[-1]

    monkeypatch.setattr(duckdb_store.UsageSteps, "step", counted)
    home = tmp_path / "store"
    conn = sqlite_store.connect(home)
    try:
        syncer = AnalyticsSyncer(home, usage_after=sqlite_store.usage_top(conn))
        p = plan(home, conn, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
        r = pipeline.ingest_files(
            conn,
            p.todo,
            sqlite_store.tombstoned(conn),
            group_bytes=SMALL_GROUP,
            on_commit=syncer.on_commit,
            writer=True,
            on_read=syncer.reading_done,
        )
        assert syncer.finish() == f"analytics: {r['entries_new']} entries synced"
        rows = conn.execute("SELECT count(*) FROM usage").fetchone()[0]
    finally:
        conn.close()
    assert rows > 100
    # the steps synced most usage rows before the last commits: the closing sync found
    # them there (it priced and wrote every row before)
    assert len(closing) == 1 and closing[0]["usage_rows"] == rows
    assert sum(steps) + closing[0]["usage_changed"] == rows
    assert closing[0]["usage_changed"] < rows // 3
    assert len(steps) == 1 if step_rows > rows else len(steps) > 3
    got, want = _duck(home), _reference(home, tmp_path / "ref")
    assert len(got["usage"]) == rows and got["session_text"] and got["usage_buckets"]
    assert got == want


def test_steps_leave_stale_prices_and_older_rows_to_the_closing_sync(tmp_path, corpus_store, monkeypatch):
    """DuckDB holding rows priced with other prices: a step writes the rows above its
    ``after`` mark but not the price mark, so the closing sync re-prices every row; the
    file ends up what a sync from scratch builds."""
    src, _ = corpus_store
    home = tmp_path / "store"
    home.mkdir()
    shutil.copy(src / "store.db", home / "store.db")
    sq = sqlite_store.connect(home, readonly=True)
    try:
        keys = [k for (k,) in sq.execute("SELECT usage_key FROM usage ORDER BY rowid")]
        half = sq.execute(
            "SELECT rowid FROM usage ORDER BY rowid LIMIT 1 OFFSET ?", (len(keys) // 2,)
        ).fetchone()[0]
        con = duckdb_store.connect(home)
        try:
            duckdb_store.sync(sq, home, con=con)
            want_all = con.execute("SELECT * FROM usage ORDER BY usage_key").fetchall()
            # rows of an older sync: the later half missing, the rest priced otherwise
            con.execute(
                "DELETE FROM usage WHERE usage_key IN (SELECT unnest(?::VARCHAR[]))", [keys[len(keys) // 2 :]]
            )
            con.execute(
                "UPDATE usage SET cost_usd = cost_usd + 1, calculated_cost_usd = calculated_cost_usd + 1"
            )
            con.execute("INSERT OR REPLACE INTO meta VALUES('price_version', 12345)")
            steps = duckdb_store.UsageSteps(con, home, half - 1)
            written = steps.step(sq)
            assert written == len(keys) - len(keys) // 2
            assert con.execute("SELECT value FROM meta WHERE key = 'price_version'").fetchall() == [(12345,)]
            closing = _closing_usage(monkeypatch)
            duckdb_store.sync(sq, home, con=con)
            assert closing[0]["usage_changed"] == len(keys)  # all re-priced
            assert con.execute("SELECT * FROM usage ORDER BY usage_key").fetchall() == want_all
        finally:
            con.close()
    finally:
        sq.close()


def _forked_home(root: Path) -> Path:
    """A HOME with two Claude Code session files: ``a.jsonl`` (60 responses) and
    ``b.jsonl``, a copy of it under another session whose responses log twice the output
    (the same ``message.id:requestId`` keys: a response logged again with more output
    updates its usage row in place, ``load_batch``'s upsert)."""
    proj = root / ".claude" / "projects" / "-tmp-demo"
    proj.mkdir(parents=True)
    lines = claude_lines("5e55a000-0000-4000-8000-0000000000aa", 120, dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
    (proj / "a.jsonl").write_text("\n".join(lines) + "\n")
    fork = []
    for line in lines:
        rec = json.loads(line)
        rec["sessionId"] = "5e55a000-0000-4000-8000-0000000000bb"
        if rec["type"] == "assistant":
            rec["message"]["usage"]["output_tokens"] *= 2
        fork.append(json.dumps(rec))
    (proj / "b.jsonl").write_text("\n".join(fork) + "\n")
    return root


def _ingest_in_steps(
    tmp_path: Path, monkeypatch, held: set[str] | None, writer_held: set[str] | None
) -> tuple[Path, list[dict], int]:
    """``_forked_home`` ingested fresh, a group per file, a step once 40 new usage rows
    wait (after ``a.jsonl``'s group: its rows in DuckDB before ``b.jsonl`` updates
    them); ``held`` given to the syncer, ``writer_held`` to the writer. The writer
    waits after its first commit until that step is done, so the step reads
    ``a.jsonl``'s rows before ``b.jsonl``'s group updates them. Returns the store, the
    closing ``sync_usage`` results and SQLite's usage rows."""
    monkeypatch.setattr(analytics_sync, "USAGE_STEP_ROWS", 40)
    # a transaction a group: a.jsonl's committed (and stepped) before b.jsonl's is stored
    monkeypatch.setattr(writer_mod, "TXN_ROWS", 1)
    closing = _closing_usage(monkeypatch)
    stepped = threading.Event()
    real_step = duckdb_store.UsageSteps.step

    def step(self, sq):
        try:
            return real_step(self, sq)
        finally:
            stepped.set()

    monkeypatch.setattr(duckdb_store.UsageSteps, "step", step)
    src, home = _forked_home(tmp_path / "home"), tmp_path / "store"
    conn = sqlite_store.connect(home)
    try:
        syncer = AnalyticsSyncer(home, usage_after=sqlite_store.usage_top(conn), usage_held=held)
        real_commit = syncer.on_commit

        def on_commit(*a):  # the writer thread, after a group's commit
            real_commit(*a)
            assert stepped.wait(30)

        p = plan(home, conn, ctx=DiscoveryContext(home=src, env={}))
        assert [t[0].path.name for t in p.todo] == ["a.jsonl", "b.jsonl"]
        r = pipeline.ingest_files(
            conn,
            p.todo,
            sqlite_store.tombstoned(conn),
            group_bytes=1024,
            on_commit=on_commit,
            writer=True,
            on_read=syncer.reading_done,
            usage_held=writer_held,
        )
        assert syncer.finish() == f"analytics: {r['entries_new']} entries synced"
        rows = conn.execute("SELECT count(*) FROM usage").fetchone()[0]
        assert conn.execute("SELECT DISTINCT output_tokens FROM usage").fetchall() == [(90,)]
    finally:
        conn.close()
    assert rows == 60
    return home, closing, rows


def test_a_fresh_ingest_closes_comparing_only_new_rows_and_the_keys_updated_in_place(tmp_path, monkeypatch):
    """A fresh store: the writer collects the usage keys each group found stored
    (``load_batch``'s ``usage_held``: rows it may update in place, here a fork's copy
    logging its responses with more output); the closing sync compares those and the
    rows above the last step, not every row, and DuckDB ends up what a sync from
    scratch builds (the updated rows re-priced)."""
    held: set[str] = set()
    home, closing, rows = _ingest_in_steps(tmp_path, monkeypatch, held, held)
    assert len(held) == rows  # b.jsonl's group found every key of a.jsonl's stored
    assert len(closing) == 1 and closing[0]["usage_rows"] == rows
    assert closing[0]["usage_compared"] == rows and closing[0]["usage_changed"] == rows
    got, want = _duck(home), _reference(home, tmp_path / "ref")
    assert got == want


def test_a_fresh_ingest_without_updates_in_place_compares_no_stepped_row(tmp_path, monkeypatch):
    """Only ``a.jsonl``: its rows synced by the steps, nothing updated in place, so the
    closing sync reads no usage row; DuckDB as a sync from scratch."""
    monkeypatch.setattr(analytics_sync, "USAGE_STEP_ROWS", 40)
    closing = _closing_usage(monkeypatch)
    src, home = _forked_home(tmp_path / "home"), tmp_path / "store"
    (src / ".claude" / "projects" / "-tmp-demo" / "b.jsonl").unlink()
    held: set[str] = set()
    conn = sqlite_store.connect(home)
    try:
        syncer = AnalyticsSyncer(home, usage_after=sqlite_store.usage_top(conn), usage_held=held)
        p = plan(home, conn, ctx=DiscoveryContext(home=src, env={}))
        pipeline.ingest_files(
            conn,
            p.todo,
            sqlite_store.tombstoned(conn),
            group_bytes=1024,
            on_commit=syncer.on_commit,
            writer=True,
            on_read=syncer.reading_done,
            usage_held=held,
        )
        syncer.finish()
    finally:
        conn.close()
    assert not held
    assert closing[0]["usage_rows"] == 60 and closing[0]["usage_compared"] == 0
    assert _duck(home) == _reference(home, tmp_path / "ref")


def test_without_the_writers_keys_the_closing_sync_compares_every_row(tmp_path, monkeypatch):
    """A syncer not given the set the writer fills compares every row, as before."""
    home, closing, rows = _ingest_in_steps(tmp_path, monkeypatch, None, set())
    assert closing[0]["usage_compared"] == rows
    assert _duck(home) == _reference(home, tmp_path / "ref")


def test_the_keys_updated_in_place_are_what_keeps_duckdb_exact(tmp_path, monkeypatch):
    """What the first test guards against: had the writer not collected the keys (an
    empty set given to the syncer), the rows ``b.jsonl`` updated after a step synced
    them would stay stale in DuckDB."""
    home, closing, rows = _ingest_in_steps(tmp_path, monkeypatch, set(), None)
    assert closing[0]["usage_compared"] == 0
    got, want = _duck(home), _reference(home, tmp_path / "ref")
    assert got["usage"] != want["usage"]


def test_too_many_keys_held_and_the_closing_sync_compares_every_row(tmp_path, monkeypatch):
    """Past ``writer.USAGE_HELD_MAX`` keys the writer stops collecting (the set holds
    ``HELD_OVERFLOW`` alone) and the closing sync compares every row, as before."""
    from ctxkeep.pipeline import writer

    monkeypatch.setattr(writer, "USAGE_HELD_MAX", 10)
    held: set[str] = set()
    home, closing, rows = _ingest_in_steps(tmp_path, monkeypatch, held, held)
    assert held == {writer.HELD_OVERFLOW}
    assert closing[0]["usage_compared"] == rows
    assert _duck(home) == _reference(home, tmp_path / "ref")

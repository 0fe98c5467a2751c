"""A bulk load turns FTS5's automerge off inside the writer thread's transactions
(issue 26, target 2: ``engine.FTS_BULK_BYTES``, ``writer.Writer(fts_bulk=)``,
``fts.bulk_begin``/``bulk_end``/``settle_segments``):

- inside each transaction the FTS tables' automerge is 0, and every committed state
  holds the setting found (4): the segments pile up as the load goes (up to FTS5's
  crisis merge) where a plain load merges them, and the run's end settles them (fewer
  than 4 a level); the FTS rows equal a plain load's;
- an ingest below the threshold (the hook path, a small ingest) never touches the
  setting nor settles;
- a SIGKILL inside a bulk transaction leaves the committed setting (never 0), and the
  next ingest ends with the store and FTS rows of an ingest never killed.

The corpus (``conftest.CORPUS_HOME``) in small groups, as ``test_writer_txn``."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.pipeline import writer as writer_mod
from ctxkeep.pipeline.plan import plan
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import fts
from ctxkeep.sinks.sqlite.ddl import FTS_TABLES
from ctxkeep.sources.contract import DiscoveryContext
from store_digest import store_digest

ROOT = Path(__file__).resolve().parents[2]
SMALL_GROUP = 128 * 1024


def _corpus_ctx() -> DiscoveryContext:
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    return DiscoveryContext(home=CORPUS_HOME, env={})


def _ro(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)


def _config(home: Path) -> dict[str, str | None]:
    """Each FTS table's committed ``automerge`` row (None: no row, FTS5's default)."""
    c = _ro(home)
    try:
        return {
            t: (
                r[0] if (r := c.execute(f"SELECT v FROM {t}_config WHERE k='automerge'").fetchone()) else None
            )
            for t in FTS_TABLES
        }
    finally:
        c.close()


def _fts(home: Path) -> tuple:
    c = _ro(home)
    try:
        return tuple(
            c.execute(q).fetchall()
            for q in (
                "SELECT rowid, title, text FROM fts_words ORDER BY rowid",
                "SELECT rowid, grams FROM fts_grams ORDER BY rowid",
                "SELECT term_id, term FROM vocab ORDER BY term_id",
                "SELECT rowid FROM fts_words WHERE fts_words MATCH 'error' ORDER BY rowid",
                "SELECT rowid, bm25(fts_words) FROM fts_words WHERE fts_words MATCH 'file AND test' ORDER BY rowid",
            )
        )
    finally:
        c.close()


def _bulk_ingest(home: Path, ctx: DiscoveryContext, monkeypatch, bulk: bool) -> list[tuple]:
    """``ingest_files`` of the corpus in small groups, ``fts_bulk=bulk``; returns, for each
    COMMIT of the writer thread, (fts_words' automerge inside the transaction, its
    committed automerge row read by another connection after the COMMIT, its segments
    then)."""
    seen: list[tuple] = []
    real = writer_mod.Writer._commit

    def commit(self, conn):
        inside = sqlite_store.automerge_settings(conn, ("fts_words",)) if conn.in_transaction else None
        real(self, conn)
        if inside is not None:
            c = _ro(home)
            try:
                row = c.execute("SELECT v FROM fts_words_config WHERE k='automerge'").fetchone()
                seen.append((inside["fts_words"], row and row[0], sum(fts.level_segments(c, "fts_words"))))
            finally:
                c.close()

    monkeypatch.setattr(writer_mod.Writer, "_commit", commit)
    monkeypatch.setattr(writer_mod, "TXN_ROWS", 150)
    monkeypatch.setattr(writer_mod, "TXN_SECONDS", 600)  # the same transactions under load
    conn = sqlite_store.connect(home)
    try:
        p = plan(home, conn, ctx=ctx)
        pipeline.ingest_files(
            conn, p.todo, sqlite_store.tombstoned(conn), group_bytes=SMALL_GROUP, fts_bulk=bulk
        )
    finally:
        conn.close()
    monkeypatch.setattr(writer_mod.Writer, "_commit", real)
    return seen


def test_a_bulk_load_puts_off_its_merges_commits_the_setting_it_found_and_settles(tmp_path, monkeypatch):
    ctx = _corpus_ctx()
    plain = _bulk_ingest(tmp_path / "plain", ctx, monkeypatch, bulk=False)
    bulk = _bulk_ingest(tmp_path / "bulk", ctx, monkeypatch, bulk=True)
    assert len(plain) >= 5 and len(bulk) == len(plain)  # several transactions each
    assert {inside for inside, _, _ in plain} == {4} and {row for _, row, _ in plain} == {None}
    assert {inside for inside, _, _ in bulk} == {0}  # off inside every transaction
    assert {row for _, row, _ in bulk} == {4}  # and FTS5's default at every COMMIT
    # the segments pile up (up to FTS5's crisis merge) where a plain load merges them as
    # it goes (seen: 4, 6, 9, 10, 13, 1, ... against 4, 6, 10, 11, 3, ...)
    assert max(n for _, _, n in bulk) >= 13 > max(n for _, _, n in plain), (bulk, plain)
    assert _fts(tmp_path / "bulk") == _fts(tmp_path / "plain")
    assert store_digest(tmp_path / "bulk") == store_digest(tmp_path / "plain")
    conn = sqlite_store.connect(tmp_path / "bulk")
    try:
        assert max(fts.level_segments(conn, "fts_words")) >= 4
        with sqlite_store.write(conn):
            assert sqlite_store.settle_segments(conn) > 0
        for t in FTS_TABLES:
            assert max(fts.level_segments(conn, t), default=0) < 4, t
    finally:
        conn.close()
    assert _fts(tmp_path / "bulk") == _fts(tmp_path / "plain")


def test_only_an_ingest_above_the_threshold_is_a_bulk_load(tmp_path, monkeypatch):
    ctx = _corpus_ctx()
    bulks: list[bool] = []
    settled: list[object] = []
    real_init, real_settle = writer_mod.Writer.__init__, fts.settle_segments

    def init(self, *a, **k):
        real_init(self, *a, **k)
        bulks.append(self.fts_bulk)

    monkeypatch.setattr(writer_mod.Writer, "__init__", init)
    monkeypatch.setattr(
        sqlite_store, "settle_segments", lambda conn, **k: settled.append(k) or real_settle(conn, **k)
    )
    pipeline.run_ingest(tmp_path / "small", ctx=ctx)  # the corpus, ~17 MB: below 64 MiB
    assert bulks == [False] and settled == []
    assert set(_config(tmp_path / "small").values()) == {None}  # never written
    monkeypatch.setattr(pipeline, "FTS_BULK_BYTES", 1024 * 1024)
    pipeline.run_ingest(tmp_path / "bulk", ctx=ctx)
    assert bulks == [False, True] and len(settled) == 1
    assert set(_config(tmp_path / "bulk").values()) == {4}
    assert _fts(tmp_path / "bulk") == _fts(tmp_path / "small")


# ---------------------------------------------------------------- SIGKILL trial

#: the CLI's ingest as a bulk load in small groups, several a transaction; with
#: ``KILL_AFTER`` = C it SIGKILLs itself once C transactions are committed and the open
#: one holds two groups with automerge 0 (it exits 3 if the setting is not 0 there)
_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from ctxkeep.pipeline import engine, writer
    from ctxkeep.sinks import sqlite as sqlite_store

    real_files = engine.ingest_files
    engine.ingest_files = lambda *a, **k: real_files(*a, group_bytes=128 * 1024, **k)
    engine.FTS_BULK_BYTES = 0
    writer.TXN_ROWS, writer.TXN_SECONDS = 600, 600
    kill = int(os.environ.get("KILL_AFTER", "-1"))
    real_store = writer.Writer._store

    def store(self, conn, g, several):
        real_store(self, conn, g, several)
        if self.commits >= kill >= 0 and len(self.pending) >= 2 and conn.in_transaction:
            if set(sqlite_store.automerge_settings(conn).values()) != {0}:
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL)

    writer.Writer._store = store
    from ctxkeep.cli import main

    sys.argv = ["ctxkeep", "ingest", "--no-progress", "--home", os.environ["STORE"]]
    main()
    """
)
_SCRUB = ("CTXKEEP_", "PREFECT_API", "CODEX_", "CLAUDE_", "GEMINI_", "XDG_DATA", "XDG_CONFIG")


def _child(store: Path, kill: int | None) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env.update(HOME=str(CORPUS_HOME), STORE=str(store), CTXKEEP_IDLE_SECONDS="0", CTXKEEP_EARLY_READER="0")
    if kill is not None:
        env["KILL_AFTER"] = str(kill)
    p = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT, capture_output=True)
    if kill is None:
        assert p.returncode == 0, p.stderr[-3000:].decode(errors="replace")
    return p.returncode


@pytest.mark.parametrize("kill_after", [0, 2])
def test_a_bulk_ingest_sigkilled_never_leaves_automerge_off(tmp_path, kill_after):
    """SIGKILL inside a bulk transaction (automerge 0 there) after ``kill_after``
    COMMITs: the store holds the setting it had (no row before any COMMIT, 4 after),
    never 0; the next ingest (a bulk load again) ends with the store and FTS rows of an
    ingest never killed, settled, its setting 4."""
    _corpus_ctx()
    ref = tmp_path / "ref"
    _child(ref, None)
    want = (store_digest(ref), _fts(ref))
    assert set(_config(ref).values()) == {4}

    store = tmp_path / "killed"
    assert _child(store, kill_after) == -signal.SIGKILL
    c = _ro(store)
    try:
        assert (c.execute("SELECT count(*) FROM entries").fetchone()[0] > 0) == (kill_after > 0)
    finally:
        c.close()
    assert set(_config(store).values()) == ({4} if kill_after else {None})
    _child(store, None)
    assert (store_digest(store), _fts(store)) == want
    assert set(_config(store).values()) == {4}
    c = _ro(store)
    try:
        assert all(max(fts.level_segments(c, t), default=0) < 4 for t in FTS_TABLES)
    finally:
        c.close()

"""A run that replaces ``store.db`` or moves its ``-wal``/``-shm`` (a reparse's swap,
``restore``, ``doctor --repair``, ``purge --compact``) waits for another process's connection to close and
then refuses with one line, changing nothing (session 23: it deleted them under the
reader, whose connection then read the new files through the old WAL index: "disk I/O
error", then "database disk image is malformed", measured)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import child_env
from ctxkeep.cli import app
from ctxkeep.errors import StoreBusy
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.sinks.sqlite import pool, store_safety
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.bad_input import line, rec


@pytest.fixture
def store(tmp_path) -> Path:
    proj = tmp_path / "home" / ".claude" / "projects" / "-tmp-x"
    proj.mkdir(parents=True)
    (proj / "s.jsonl").write_bytes(b"".join(line(rec(i, f"line {i} of the session")) for i in range(1, 30)))
    store = tmp_path / "store"
    pipeline.run_ingest(store, ctx=DiscoveryContext(home=tmp_path / "home", env={}))
    return store


class Reader:
    """Another process holding a read transaction on ``store.db`` (``BEGIN``; a
    ``SELECT``): a search between two of its statements, the app's connection."""

    def __init__(self, store: Path):
        code = (
            "import sqlite3, sys\n"
            f"c = sqlite3.connect('file:{store / 'store.db'}?mode=ro', uri=True, isolation_level=None)\n"
            "c.execute('BEGIN'); print(c.execute('SELECT count(*) FROM entries').fetchone()[0], flush=True)\n"
            "sys.stdin.readline()\n"
            "print(c.execute('SELECT count(*) FROM entries').fetchone()[0], c.execute('PRAGMA quick_check')"
            ".fetchone()[0], flush=True)\n"
            "c.execute('COMMIT'); c.close(); print('closed', flush=True)\n"
        )
        self.p = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self.count = int(self.p.stdout.readline())

    def finish(self) -> tuple[str, str]:
        """Read again in the same transaction, then close: (its line, "closed")."""
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        got = self.p.stdout.readline().strip(), self.p.stdout.readline().strip()
        self.p.wait(timeout=30)
        return got


def _files(store: Path) -> dict:
    """The inode of ``store.db`` and of its ``-wal`` and ``-shm`` (the same file, not
    moved nor replaced; a run's own writes, its run record, may add to them)."""
    return {
        n: os.stat(store / n).st_ino
        for n in ("store.db", "store.db-wal", "store.db-shm")
        if (store / n).exists()
    }


def test_the_probe_tells_an_open_store(store):
    assert not store_safety.live(store)
    r = Reader(store)
    try:
        assert store_safety.live(store)
        t0 = time.monotonic()
        with pytest.raises(StoreBusy):
            pool.wait_unopened(store, "reparse", wait=0.3)
        assert 0.3 <= time.monotonic() - t0 < 5
    finally:
        r.finish()
    assert not store_safety.live(store)
    pool.wait_unopened(store, "reparse", wait=0)  # returns at once


def test_a_reparse_under_a_reader_refuses_with_one_line_and_changes_nothing(store, monkeypatch):
    from ctxkeep.maintenance.reparse import reparse

    monkeypatch.setattr(pool, "READERS_WAIT", 0.5)
    r = Reader(store)
    try:
        before = _files(store)
        assert "store.db-shm" in before
        c = CliRunner().invoke(app, ["reparse", "--home", str(store)], env={"COLUMNS": "400"})
        assert c.exit_code == 1, c.output
        assert c.stderr.strip().splitlines() == [
            "error: another process has the store open (the MCP server, the app, a search): reparse would "
            f"replace its files under it ({store / 'store.db'}) - close the app or MCP server using this "
            "store (or let the search end), then run it again"
        ], c.stderr
        assert _files(store) == before  # not swapped, -wal and -shm where they were
        assert not list(store.glob("reparse*")) and not list(store.glob("*.reparse*"))
        # the reader reads on, in the same transaction, a sound store
        assert r.finish() == (f"{r.count} ok", "closed")
    finally:
        if r.p.poll() is None:
            r.finish()
    # nobody reads it now: the reparse runs, and puts a new file in place
    out = reparse(store)
    assert out["files"] >= 1 and os.stat(store / "store.db").st_ino != before["store.db"]


def test_a_reader_that_closes_within_the_wait_lets_the_reparse_run(store, monkeypatch):
    from ctxkeep.maintenance.reparse import reparse

    monkeypatch.setattr(pool, "READERS_WAIT", 60)
    r = Reader(store)
    ino = os.stat(store / "store.db").st_ino
    import threading

    t = threading.Timer(1.0, r.finish)
    t.start()
    t0 = time.monotonic()
    reparse(store)
    t.join()
    assert time.monotonic() - t0 >= 0.9 and os.stat(store / "store.db").st_ino != ino
    assert r.p.returncode == 0


def test_restore_and_doctor_repair_under_a_reader_move_nothing(store, monkeypatch):
    from ctxkeep.maintenance import backup, doctor

    monkeypatch.setattr(pool, "READERS_WAIT", 0.3)
    backup.run_backup(store)
    (b,) = backup.backups(store)
    r = Reader(store)
    try:
        before = _files(store)
        names = sorted(p.name for p in store.iterdir())
        with pytest.raises(StoreBusy, match="restore would replace its files"):
            backup.restore(store, b)
        damaged = [doctor.Finding("sqlite-integrity", str(store / "store.db"), "damaged", "test")]
        with pytest.raises(StoreBusy, match="doctor --repair would replace its files"):
            doctor.repair(store, damaged)
        assert _files(store) == before and sorted(p.name for p in store.iterdir()) == names
        assert r.finish() == (f"{r.count} ok", "closed")
    finally:
        if r.p.poll() is None:
            r.finish()
    assert backup.restore(store, b)["restored"] == str(b)
    c = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        assert c.execute("SELECT count(*) FROM entries").fetchone()[0] == r.count
    finally:
        c.close()


def test_a_compaction_under_a_reader_refuses_and_changes_nothing(store, monkeypatch):
    from ctxkeep.sinks.sqlite.compact import COMPACT_TMP, compact

    monkeypatch.setattr(pool, "READERS_WAIT", 0.3)
    r = Reader(store)
    try:
        before = _files(store)
        with pytest.raises(StoreBusy, match="purge --compact would replace its files"):
            compact(store)
        assert _files(store) == before and not (store / COMPACT_TMP).exists()
        assert r.finish() == (f"{r.count} ok", "closed")
    finally:
        if r.p.poll() is None:
            r.finish()
    assert compact(store)["after"] == (store / "store.db").stat().st_size
    assert os.stat(store / "store.db").st_ino != before["store.db"]

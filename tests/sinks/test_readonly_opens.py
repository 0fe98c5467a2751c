"""The read-only opens of the store outside ``connection.connect`` (the statusline,
the hooks' worker, ``service.analytics.open_lite``, a wipe's counts, the integrity
check, reparse's copy) roll back a killed writer's hot journal (``readonly.open_ro``)
instead of failing on it (SQLITE_READONLY_ROLLBACK): each reads the committed row."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

#: a child that makes a store file in rollback-journal mode (the schema, one committed
#: watermark of argv[2] at argv[3] bytes), then is SIGKILLed inside a transaction whose
#: pages spilled into the file: the hot journal a first ingest killed while switching
#: its new store to WAL leaves (``test_readonly_store._KILLED_IN_A_TRANSACTION``)
_KILLED = """
import os, sqlite3, sys
from ctxkeep.sinks.sqlite import ddl
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.executescript(ddl.DDL)
st = os.stat(sys.argv[2])
c.execute("INSERT INTO meta VALUES('schema_version', ?)", (str(ddl.SCHEMA_VERSION),))
c.execute("INSERT INTO watermarks(path, agent, size, mtime_ns, offset, ino) VALUES(?, 'claude', ?, ?, ?, ?)",
          (sys.argv[2], st.st_size, st.st_mtime_ns, st.st_size, st.st_ino))
c.execute("PRAGMA cache_size=1")
c.execute("BEGIN")
c.execute("CREATE TABLE t(x)")
for _ in range(2000):
    c.execute("INSERT INTO t VALUES (randomblob(1000))")
os.kill(os.getpid(), 9)
"""


@pytest.fixture
def hot(tmp_path) -> tuple[Path, Path]:
    """``(home, transcript)``: ``home/store.db`` with a hot journal beside it (checked:
    a plain ``mode=ro`` open refuses it) and a watermark of ``transcript`` (its whole
    size) committed before."""
    home = tmp_path / "home"
    home.mkdir()
    transcript = tmp_path / "s.jsonl"
    transcript.write_text('{"a": 1}\n' * 10)
    db = home / "store.db"
    p = subprocess.run([sys.executable, "-c", _KILLED, str(db), str(transcript)], capture_output=True)
    assert p.returncode == -9, p.stderr
    assert Path(f"{db}-journal").stat().st_size > 0
    with pytest.raises(sqlite3.OperationalError) as e:
        sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("SELECT 1 FROM sqlite_master").fetchall()
    assert e.value.sqlite_errorcode == sqlite3.SQLITE_READONLY_ROLLBACK
    return home, transcript


def _rolled_back(home: Path) -> bool:
    return not Path(f"{home / 'store.db'}-journal").exists()


def test_the_statusline_reads_the_watermark(hot):
    from ctxkeep.query.statusline import _watermark

    home, transcript = hot
    assert _watermark(home, transcript) == (90, None)
    assert _rolled_back(home)


def test_the_hooks_worker_sees_the_file_unchanged(hot):
    from ctxkeep.hooks.worker import unchanged

    home, transcript = hot
    assert unchanged(home, transcript) is True
    assert _rolled_back(home)


def test_open_lite_reads(hot):
    from ctxkeep.service.analytics import open_lite

    home, transcript = hot
    conn = open_lite(home)
    try:
        assert conn.execute("SELECT path, offset FROM watermarks").fetchall() == [(str(transcript), 90)]
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 't'").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_wipes_counts_read(hot):
    from ctxkeep.sinks.sqlite.delete import store_counts

    home, _ = hot
    assert store_counts(home / "store.db")["entries"] == 0
    assert _rolled_back(home)


def test_the_integrity_check_reads(hot):
    from ctxkeep.sinks.sqlite.checks import integrity

    home, _ = hot
    assert integrity(home / "store.db") == ["ok"]
    assert _rolled_back(home)


def test_reparses_copy_holds_the_committed_rows(hot, tmp_path):
    from ctxkeep.maintenance.reparse import _copy_store

    home, transcript = hot
    _copy_store(home, tmp_path / "copy.db")
    conn = sqlite3.connect(tmp_path / "copy.db")
    try:
        assert conn.execute("SELECT path FROM watermarks").fetchall() == [(str(transcript),)]
    finally:
        conn.close()

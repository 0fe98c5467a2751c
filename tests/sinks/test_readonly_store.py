"""Read commands on a read-only store (a new user's defect): a store copied to a
read-only mount without its ``store.db-shm`` (as a backup or a shared folder holds it)
failed every read command with "unable to open database file": a ``mode=ro`` open of
a WAL-mode database must create the WAL index beside it. Readers now fall back to an
``immutable`` open (``sinks.sqlite.connection._open_readonly``).

Root writes through permission bits, so as root the store is put on a read-only bind
mount; otherwise its folder and files are made read-only with chmod. Skipped (with the
reason) when neither can be made.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME, cannot_mount
from ctxkeep.cli import app
from ctxkeep.errors import StoreError
from ctxkeep.sinks.sqlite import connection as sqlite_connection

runner = CliRunner()


@contextmanager
def _made_read_only(src: Path, tmp_path: Path) -> Iterator[Path]:
    """``src`` where it cannot be written: a read-only bind mount of it as root (root
    writes through permission bits), else ``src`` itself chmod'ed read-only."""
    if os.geteuid() == 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        r = subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True)
        if r.returncode:
            cannot_mount(f"cannot bind-mount here: {r.stderr.decode().strip()}")
        r = subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True)
        if r.returncode:
            subprocess.run(["umount", "-l", str(ro)], check=False)
            cannot_mount(f"cannot remount a bind mount read-only here: {r.stderr.decode().strip()}")
        try:
            yield ro
        finally:
            subprocess.run(["umount", "-l", str(ro)], check=False)
        return
    for p in [*src.rglob("*"), src]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield src
    finally:
        for p in [src, *src.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


@pytest.fixture
def read_only_store(corpus_store, tmp_path):
    """A copy of the corpus store (no ``-shm``, no ``-wal``, no lock) in a folder that
    cannot be written."""
    src = tmp_path / "src"
    shutil.copytree(corpus_store[0], src, ignore=shutil.ignore_patterns("*-shm", "*-wal", "*.lock"))
    assert not list(src.glob("store.db-*"))
    with _made_read_only(src, tmp_path) as ro:
        yield ro


def _cannot_write(d: Path) -> None:
    with pytest.raises(OSError):
        (d / "probe").write_text("x")


def test_mode_ro_alone_cannot_open_it(read_only_store):
    """The condition itself (so the test below tests something): SQLite's ``mode=ro``
    open fails here for want of the WAL index."""
    _cannot_write(read_only_store)
    c = sqlite3.connect(f"file:{read_only_store / 'store.db'}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError, match="unable to open database file"):
        c.execute("SELECT count(*) FROM meta").fetchall()
    c.close()


@pytest.mark.parametrize(
    "args",
    [
        ("search", "python: command not found", "--json"),
        ("search", "python: command not found"),
        ("sessions", "--json"),
        ("stats", "--json"),
        ("sources", "--json"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_read_commands_work_on_a_read_only_store(read_only_store, args):
    before = {p.name: p.stat().st_mtime_ns for p in read_only_store.iterdir()}
    r = runner.invoke(app, [*args, "--home", str(read_only_store)], env={"HOME": str(CORPUS_HOME)})
    assert r.exit_code == 0, r.output
    if "--json" in args:
        d = json.loads(r.stdout)
        assert d["schema"] == 1
    if args[0] == "search":
        assert "codex  019a" in r.stdout or "019a802a" in r.stdout  # the Codex session holding the error
    elif args[0] == "sessions":
        assert len(d["sessions"]) >= 10
    elif args[0] == "stats":
        assert d["entries"] > 1000
    assert {p.name: p.stat().st_mtime_ns for p in read_only_store.iterdir()} == before


def test_show_reads_an_entry_on_a_read_only_store(read_only_store):
    r = runner.invoke(app, ["search", "python: command not found", "--json", "--home", str(read_only_store)])
    assert r.exit_code == 0, r.output
    eid = json.loads(r.stdout)["hits"][0]["entry_id"]
    r = runner.invoke(app, ["show", eid, "--home", str(read_only_store)])
    assert r.exit_code == 0, r.output
    assert "command not found" in r.stdout


def test_a_wal_it_cannot_apply_is_said_once(corpus_store, tmp_path, capsys):
    """A WAL copied beside the store (commits not yet checkpointed) but no WAL index:
    the store is read as of its last checkpoint, and one warning line says so."""
    from ctxkeep.sinks.sqlite import connect

    live = tmp_path / "live"
    shutil.copytree(corpus_store[0], live, ignore=shutil.ignore_patterns("*-shm", "*-wal", "*.lock"))
    w = sqlite3.connect(live / "store.db", isolation_level=None)
    w.execute("PRAGMA wal_autocheckpoint=0")
    w.execute("INSERT INTO meta VALUES('nub-probe', 'in the WAL only')")
    assert (live / "store.db-wal").stat().st_size > 0
    # copied while the writer has it open, as a backup of a store in use is: the WAL
    # beside the database, without the WAL index
    src = tmp_path / "src"
    shutil.copytree(live, src, ignore=shutil.ignore_patterns("*-shm", "*.lock"))
    w.close()
    assert (src / "store.db-wal").stat().st_size > 0 and not (src / "store.db-shm").exists()
    with _made_read_only(src, tmp_path) as ro:
        capsys.readouterr()
        conn = connect(ro, readonly=True)
        try:
            n = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
            probe = conn.execute("SELECT value FROM meta WHERE key = 'nub-probe'").fetchone()
        finally:
            conn.close()
        err = capsys.readouterr().err.splitlines()
    assert n > 1000
    assert probe is None  # the WAL's commit: not applied
    assert len(err) == 1 and err[0].startswith("warning: ") and "store.db-wal" in err[0], err
    assert "last checkpoint" in err[0]


#: a child that commits one row of ``t`` in a rollback-journal database (argv[2] "1"), then is
#: SIGKILLed inside a transaction whose pages spilled into the file: the hot journal a
#: first ingest killed while switching its new store to WAL leaves (CI met it in the
#: vault's SIGKILL trials: every read-only open failed "attempt to write a readonly database")
_KILLED_IN_A_TRANSACTION = """
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA cache_size=1")
if sys.argv[2] == "1":
    c.execute("CREATE TABLE t(x)")
    c.execute("INSERT INTO t VALUES ('committed')")
c.execute("BEGIN")
c.execute("CREATE TABLE IF NOT EXISTS t(x)")
for _ in range(2000):
    c.execute("INSERT INTO t VALUES (randomblob(1000))")
os.kill(os.getpid(), 9)
"""


def _hot_journal(home: Path, *, committed: bool = True) -> Path:
    """``home/store.db`` with a hot journal beside it (checked: ``mode=ro`` refuses it);
    without ``committed``, the file holds nothing once the journal is rolled back."""
    home.mkdir()
    db = home / "store.db"
    p = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_A_TRANSACTION, str(db), "1" if committed else "0"],
        capture_output=True,
    )
    assert p.returncode == -9, p.stderr
    assert Path(f"{db}-journal").stat().st_size > 0
    with pytest.raises(sqlite3.OperationalError) as e:
        sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("SELECT 1 FROM sqlite_master").fetchall()
    assert e.value.sqlite_errorcode == sqlite3.SQLITE_READONLY_ROLLBACK
    return db


def test_a_killed_writers_hot_journal_is_rolled_back_by_a_reader(tmp_path):
    db = _hot_journal(tmp_path / "home")
    conn = sqlite_connection._open_readonly(db)
    try:
        assert conn.execute("SELECT x FROM t").fetchall() == [("committed",)]
    finally:
        conn.close()
    assert not Path(f"{db}-journal").exists()


def test_a_store_killed_before_its_schema_reads_as_no_store_yet(tmp_path):
    home = tmp_path / "home"
    _hot_journal(home, committed=False)
    with pytest.raises(StoreError) as e:
        sqlite_connection.connect(home, readonly=True)
    assert e.value.what == "no store yet"
    conn = sqlite_connection.connect(home)  # the next ingest's open makes the store
    try:
        assert sqlite_connection.schema_version(conn) > 0
    finally:
        conn.close()


def test_a_hot_journal_on_a_read_only_store_is_one_error_line(tmp_path):
    src = tmp_path / "home"
    _hot_journal(src)
    with _made_read_only(src, tmp_path) as ro, pytest.raises(StoreError) as e:
        sqlite_connection._open_readonly(ro / "store.db")
    assert "a killed write left store.db-journal to roll back" in e.value.what
    assert e.value.hint == "run `ctxkeep ingest` once where the store is writable"
    assert Path(f"{src / 'store.db'}-journal").exists()

"""Each kind of damage of issue 11, tried as a new user would (``.venv/bin/ctxkeep`` in a
subprocess): one error line, no traceback, the right exit code; ``doctor`` names the
damaged file and ``doctor --repair`` brings the store back."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CORPUS_HOME, ROOT

CTXKEEP = str(ROOT / ".venv" / "bin" / "ctxkeep")


def cli(*args, home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(CORPUS_HOME), CTXKEEP_IDLE_SECONDS="0", COLUMNS="300")
    return subprocess.run(
        [CTXKEEP, *map(str, args), "--home", str(home)], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    h = tmp_path_factory.mktemp("base") / "home"
    r = cli("ingest", "--no-prefect", "--no-progress", home=h)
    assert r.returncode == 0, r.stderr
    # a small first ingest leaves DuckDB's first build to its first reader
    r = cli("report", "daily", home=h)
    assert r.returncode == 0, r.stderr
    assert (h / "analytics.duckdb").exists()
    return h


@pytest.fixture
def home(base, tmp_path) -> Path:
    h = tmp_path / "home"
    shutil.copytree(base, h, ignore=shutil.ignore_patterns("*.lock", "prefect"))
    return h


def n_entries(db: Path) -> int:
    c = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return c.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        c.close()


def damage(home: Path, kind: str) -> None:
    db = home / "store.db"
    size = db.stat().st_size
    if kind == "truncated":
        os.truncate(db, size // 3 + 100)
    elif kind == "garbage":
        db.write_bytes(os.urandom(size))
    elif kind == "zero":
        db.write_bytes(b"")
    elif kind == "middle":  # 64 KiB of random bytes in the middle, header intact
        with open(db, "r+b") as f:
            f.seek((size // 2) & ~0xFFFF)
            f.write(os.urandom(65536))


def real_args(home: Path, cmd: tuple) -> tuple:
    """``cmd`` with ``ENTRY`` replaced by an entry id of the store (read before damage)."""
    if "ENTRY" not in cmd:
        return cmd
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro&immutable=1", uri=True)
    eid = c.execute("SELECT entry_id FROM entries ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    c.close()
    return tuple(eid if a == "ENTRY" else a for a in cmd)


def one_line(r: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


COMMANDS = [
    ("stats",),
    ("search", "error"),
    ("show", "ENTRY"),
    ("ingest", "--no-prefect", "--no-progress"),
    ("reindex", "--no-prefect"),
    ("reindex",),  # through the Prefect flow: refused before Prefect starts
    ("backup",),
]


@pytest.mark.parametrize("kind", ["truncated", "garbage", "zero"])
@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c))
def test_damaged_header_is_one_line_and_exit_1(home, kind, cmd):
    cmd = real_args(home, cmd)
    damage(home, kind)
    before = (home / "store.db").read_bytes()
    r = cli(*cmd, home=home)
    assert r.returncode == 1
    assert one_line(r) == f"error: store.db is damaged ({home / 'store.db'}) - run 'ctxkeep doctor'"
    assert (home / "store.db").read_bytes() == before  # never rebuilt over it


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c))
def test_random_bytes_in_the_middle(home, cmd):
    """A command that reads a damaged page says so in one line; reindex and backup
    check the whole file first. Commands that read no damaged page succeed (SQLite
    cannot see damage it does not read; doctor finds it)."""
    cmd = real_args(home, cmd)
    damage(home, "middle")
    r = cli(*cmd, home=home)
    assert "Traceback" not in r.stderr + r.stdout
    if cmd[0] in ("reindex", "backup"):
        assert r.returncode == 1
        assert one_line(r) == f"error: store.db is damaged ({home / 'store.db'}) - run 'ctxkeep doctor'"
    elif r.returncode:
        assert r.returncode == 1 and one_line(r).startswith("error: ")


def test_doctor_names_each_damage_and_repair_restores_the_backup(home):
    n = n_entries(home / "store.db")
    assert cli("backup", home=home).returncode == 0
    for kind in ("truncated", "middle", "zero", "garbage"):
        damage(home, kind)
        r = cli("doctor", home=home)
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert f"damaged: {home / 'store.db'}" in r.stdout, (kind, r.stdout)
        r = cli("doctor", "--repair", "--json", home=home)
        assert r.returncode == 0, (kind, r.stdout, r.stderr)
        assert n_entries(home / "store.db") == n
        assert any(
            "restored the store backup" in a for a in __import__("json").loads(r.stdout)["repair"]["actions"]
        )
    moved = sorted(p.name for p in home.glob("store.db.damaged-*"))
    assert len(moved) == 4  # every damaged file kept, none deleted


def test_repair_without_a_backup_reingests_and_says_what_is_lost(home):
    n = n_entries(home / "store.db")
    damage(home, "garbage")
    r = cli("doctor", "--repair", home=home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no usable store backup" in r.stdout and "not recovered:" in r.stdout
    assert n_entries(home / "store.db") == n  # the corpus files are all still there


def test_garbage_duckdb(home):
    duck = home / "analytics.duckdb"
    duck.write_bytes(os.urandom(duck.stat().st_size))
    r = cli("stats", home=home)
    assert "Traceback" not in r.stderr + r.stdout
    r = cli("doctor", home=home)
    assert r.returncode == 1 and f"damaged: {duck}" in r.stdout
    r = cli("doctor", "--repair", home=home)
    assert r.returncode == 0, r.stdout
    import duckdb

    con = duckdb.connect(str(duck), read_only=True)
    assert con.execute("SELECT count(*) FROM entries").fetchall()[0][0] == n_entries(home / "store.db")
    con.close()


def test_missing_parquet_file(home):
    import pyarrow as pa
    import pyarrow.parquet as pq

    part = home / "archive" / "agent=codex" / "month=2025-01" / "part-0.parquet"
    part.parent.mkdir(parents=True)
    pq.write_table(pa.table({"entry_id": ["a", "b"]}), part)
    c = sqlite3.connect(home / "store.db")
    c.executemany("INSERT INTO archived VALUES(?, '2025-02-01T00:00:00.000000Z')", [("a",), ("b",)])
    c.commit()
    c.close()
    assert cli("doctor", home=home).returncode == 0
    part.unlink()
    r = cli("doctor", home=home)
    assert r.returncode == 1
    assert "the archive holds 0 rows, SQLite lists 2 archived entries" in r.stdout
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(b"PAR1 not really")
    r = cli("doctor", home=home)
    assert r.returncode == 1 and f"damaged: {part}" in r.stdout


def test_read_only_store_dir(home):
    os.chmod(home, 0o500)
    try:
        for cmd in COMMANDS[:4]:
            r = cli(*real_args(home, cmd), home=home)
            assert "Traceback" not in r.stderr + r.stdout, cmd
            assert r.returncode in (0, 1), cmd
    finally:
        os.chmod(home, 0o700)


def test_duckdb_locked_by_another_process(home):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb,sys,time; c=duckdb.connect(sys.argv[1]); print('x', flush=True); time.sleep(60)",
            str(home / "analytics.duckdb"),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        holder.stdout.readline()
        for cmd in (
            ("stats",),
            ("ingest", "--no-prefect", "--no-progress"),
            ("doctor",),
            ("search", "error"),
        ):
            r = cli(*cmd, home=home)
            assert "Traceback" not in r.stderr + r.stdout, (cmd, r.stderr)
            assert r.returncode == 0, (cmd, r.stdout, r.stderr)
    finally:
        holder.kill()
        holder.wait()


def test_backup_keeps_n_copies_0600_and_restore(home):
    for _ in range(3):
        r = cli("backup", "--keep", "2", home=home)
        assert r.returncode == 0, r.stderr
        time.sleep(0.01)
    copies = sorted((home / "backups").glob("store-*.db"))
    assert len(copies) == 2
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in copies)
    n = n_entries(home / "store.db")
    c = sqlite3.connect(home / "store.db")
    c.execute("DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries LIMIT 10)")
    c.commit()
    c.close()
    assert n_entries(home / "store.db") == n - 10
    r = cli("restore", copies[-1], home=home)
    assert r.returncode == 0, r.stderr
    assert n_entries(home / "store.db") == n
    assert list(home.glob("store.db.replaced-*"))
    bad = home / "bad.db"
    bad.write_bytes(os.urandom(8192))
    r = cli("restore", bad, home=home)
    assert r.returncode == 1 and one_line(r).startswith("error: not a usable store backup")


def test_restore_refuses_while_the_lock_is_held(home):
    assert cli("backup", home=home).returncode == 0
    copy = next((home / "backups").glob("store-*.db"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time; from ctxkeep.sinks.lock import StoreLock; "
            "lk = StoreLock(sys.argv[1]).acquire(); print('x', flush=True); time.sleep(60)",
            str(home),
        ],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        holder.stdout.readline()
        r = cli("restore", copy, home=home)
        assert r.returncode == 1 and "another ctxkeep maintenance run holds the store" in one_line(r)
    finally:
        holder.kill()
        holder.wait()

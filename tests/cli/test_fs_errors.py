"""One line, always (issue 24, item 6): a full disk, a read-only file system, a path
through a file and a permission error give ``error: what (where) - what to do`` and
exit 1 for every command, never a traceback; compress leaves no temp file after
ENOSPC. Before: a full disk during ingest printed "store.db is damaged" (and the next
run too), a read-only file system 32-162-line tracebacks (purge, retention, reindex,
backfill, doctor --repair, backup, redact --rescan), ``--home FILE/sub`` a 32-line
``NotADirectoryError`` for ingest, an unreadable home exit 2, and compress left 30 of
30 temp files after ENOSPC.

The full-disk and read-only cases mount a small tmpfs (root only: skipped with the
reason otherwise); the permission case drops CAP_DAC_OVERRIDE with ``setpriv``."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import CORPUS_HOME, ROOT, cannot_mount, child_env
from ctxkeep.errors import CtxkeepError, FileSystemError, StoreError, from_os_error

CTXKEEP = str(ROOT / ".venv" / "bin" / "ctxkeep")
CLAUDE_SRC = ".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"

WRITERS = [
    ("purge", "--session", "0d3a8e6f-290f-4105-a327-a2496e5e2a83", "--yes"),
    ("retention", "--no-prefect"),
    ("reindex",),
    ("backfill", "--no-prefect"),
    ("backup",),
    ("redact", "--rescan"),
]
READERS = [("search", "error"), ("stats",), ("sessions",)]


def run(*args, home: Path, env_home: Path = CORPUS_HOME, prefix: tuple = ()) -> tuple[int, list[str]]:
    env = child_env(HOME=str(env_home), COLUMNS="200")
    p = subprocess.run(
        [*prefix, CTXKEEP, *map(str, args), "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    return p.returncode, [x for x in p.stderr.splitlines() if x.strip()]


def assert_one_line(rc: int, lines: list[str], start: str) -> None:
    assert rc == 1, (start, lines[-3:])
    assert len(lines) == 1, lines[-3:]
    assert lines[0].startswith(f"error: {start}"), lines
    assert " - " in lines[0]


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(size_mb)``: a fresh tmpfs of that size (unmounted after the test)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (full-disk and read-only file system cases)")
    mounted = []

    def mount(size_mb: int) -> Path:
        m = tmp_path / f"mnt{len(mounted)}"
        m.mkdir()
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(m)], capture_output=True
        )
        if r.returncode:
            cannot_mount(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        mounted.append(m)
        return m

    yield mount
    for m in reversed(mounted):
        subprocess.run(["umount", "-l", str(m)], check=False)


def _fill(m: Path) -> None:
    # unbuffered: a buffered file's close flushed its last block after the write loop
    # had met ENOSPC, and raised it again out of the ``with`` (the CI trial)
    with open(m / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as e:
            assert e.errno == errno.ENOSPC


def _store_mb(store: Path) -> int:
    return sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) // 1_000_000 + 8


# ---------------------------------------------------------------- the mapping


def test_from_os_error_maps_the_chain():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise sqlite3.OperationalError("database or disk is full") from None
    except sqlite3.OperationalError as e:
        fs = from_os_error(e, where="/store")
    assert isinstance(fs, FileSystemError) and fs.kind == "ENOSPC" and fs.stops
    assert str(fs).startswith("no space left on the device (/store) - free space")
    e = NotADirectoryError(errno.ENOTDIR, "Not a directory", "/f/sub/store.db")
    assert str(from_os_error(e)) == (
        "a part of the path is a file, not a directory (/f/sub/store.db) - give a path whose folders "
        "are directories (e.g. --home DIR)"
    )
    assert from_os_error(ValueError("x")) is None
    assert from_os_error(StoreError("its own words")) is None  # a ctxkeep error says what it has to
    try:  # ... unless a full disk caused it
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise StoreError("store.db is damaged") from inner
    except CtxkeepError as e:
        assert from_os_error(e).kind == "ENOSPC"
    import pickle

    assert pickle.loads(pickle.dumps(fs)).kind == "ENOSPC"


# ---------------------------------------------------------------- the commands


@pytest.mark.slow
def test_full_disk_during_ingest_is_one_line_twice(tmpfs):
    m = tmpfs(2)
    for _ in range(2):  # the second run must not call the store damaged
        assert_one_line(*run("ingest", "--no-progress", home=m / "s"), "no space left on the device")


@pytest.mark.slow
def test_full_disk_for_every_writing_command(tmpfs, store):
    m = tmpfs(_store_mb(store))
    shutil.copytree(store, m / "s")
    _fill(m)
    for args in WRITERS:
        assert_one_line(*run(*args, home=m / "s"), "no space left on the device")
    for args in READERS:  # they read, unless SQLite must create the WAL index (-shm) first
        rc, lines = run(*args, home=m / "s")
        if rc:
            assert_one_line(rc, lines, "no space left on the device")


@pytest.mark.slow
def test_read_only_file_system_for_every_writing_command(tmpfs, store):
    m = tmpfs(_store_mb(store))
    shutil.copytree(store, m / "s")
    subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True)
    for args in WRITERS:
        assert_one_line(*run(*args, home=m / "s"), "the file system is read-only")
    # doctor: read-only, not damaged (nothing to repair); before: fts "damaged", a traceback
    rc, lines = run("doctor", "--repair", home=m / "s")
    assert (rc, lines) == (0, []), lines
    for args in READERS:  # they read (without a WAL index: immutable, connection._open_readonly)
        rc, lines = run(*args, home=m / "s")
        # no error or warning; a command's own notes (whose figure a cost is) are not about the disk
        assert (rc, [x for x in lines if not x.startswith("note:")]) == (0, []), (args, lines)


@pytest.mark.slow
def test_compress_on_a_full_disk_leaves_no_temp_file(tmpfs, tmp_path):
    m = tmpfs(12)
    proj = m / "home" / ".claude" / "projects" / "-x"
    proj.mkdir(parents=True)
    src = (CORPUS_HOME / CLAUDE_SRC).read_text()
    for i in range(5):
        sid = f"d3ad4cdc-5657-435d-98fa-00000000000{i}"
        (proj / f"{sid}.jsonl").write_text(src.replace("d3ad4cdc-5657-435d-98fa-0035d53e383d", sid))
        os.utime(proj / f"{sid}.jsonl", (1e9, 1e9))  # long idle
    store = tmp_path / "store"
    assert run("ingest", "--no-progress", "--no-prefect", home=store, env_home=m / "home")[0] == 0
    _fill(m)
    assert_one_line(*run("compress", home=store, env_home=m / "home"), "no space left on the device")
    assert [p.name for p in proj.iterdir() if "ctxkeep-tmp" in p.name] == []
    assert len(list(proj.glob("*.jsonl"))) == 5 and not list(proj.glob("*.backup*"))


COMMANDS = [
    ("ingest", "--no-progress"),
    ("search", "x"),
    ("stats",),
    ("sources",),
    ("doctor",),
    ("backup",),
    ("compress", "--check"),
    ("purge", "--session", "abc", "--yes"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_home_through_a_file(tmp_path, args):
    (tmp_path / "afile").write_text("x")
    rc, lines = run(*args, home=tmp_path / "afile" / "sub")
    assert_one_line(rc, lines, f"cannot use {tmp_path / 'afile' / 'sub'} as the store: ")
    assert "is a file, not a directory" in lines[0]


@pytest.mark.slow
def test_permission_denied_is_one_line_exit_1(store, tmp_path):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (root without CAP_DAC_OVERRIDE obeys file modes)")
    drop = (
        "setpriv",
        "--bounding-set",
        "-dac_override,-dac_read_search",
        "--inh-caps=-dac_override,-dac_read_search",
    )
    os.chown(store, 65534, 65534)
    os.chmod(store, 0o700)
    for args in [
        ("ingest", "--no-progress"),
        ("search", "x"),
        ("stats",),
        ("doctor",),
        ("purge", "--session", "abc", "--yes"),
    ]:
        assert_one_line(*run(*args, home=store, prefix=drop), "permission denied")


@pytest.mark.slow
def test_reparse_dry_run_reads_a_read_only_store(tmpfs, tmp_path):
    """A dry run writes nothing, so a read-only store does not stop it (before: "the
    file system is read-only (ingest.lock)", rc 1): the diff, rc 0, nothing under the
    mount changed and no work folder left in the temp dir."""
    from typer.testing import CliRunner

    from conftest import ingest
    from ctxkeep.cli import app

    home = tmp_path / "home"
    shutil.copytree(CORPUS_HOME / ".codex", home / ".codex")
    ingest(home, tmp_path / "s", agents="codex")
    m = tmpfs(_store_mb(tmp_path / "s"))
    # copied while a reader has it open, as a store in use is (its WAL index, -shm,
    # there: SQLite cannot make one on a read-only mount, so no reader opens a store
    # without it; the READERS above meet the same)
    with sqlite3.connect(tmp_path / "s" / "store.db") as c:
        c.execute("SELECT count(*) FROM meta").fetchall()
        shutil.copytree(tmp_path / "s", m / "s")
    c.close()
    subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True)
    before = {p: p.stat().st_mtime_ns for p in (m / "s").rglob("*")}
    import tempfile

    left = set(Path(tempfile.gettempdir()).glob("ctxkeep-reparse-*"))
    r = CliRunner().invoke(app, ["reparse", "--dry-run", "--json", "--home", str(m / "s")])
    assert r.exit_code == 0, r.output
    import json

    d = json.loads(r.stdout)
    assert d["dry_run"] and d["agents"] == ["codex"] and d["files"] == 6
    assert before == {p: p.stat().st_mtime_ns for p in (m / "s").rglob("*")}
    assert set(Path(tempfile.gettempdir()).glob("ctxkeep-reparse-*")) == left
    # without --dry-run it stays one line: a reparse writes the store
    assert_one_line(*run("reparse", home=m / "s"), "the file system is read-only")

"""A relative FILE or --path is stored absolute (newuser24 F1): stored as typed it was a
second name of the file beside discovery's absolute one, and a later ``vault restore
--all-missing`` from another directory wrote session files there."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app
from ctxkeep.paths import absolute_file, is_relative_stored
from ctxkeep.service.compress import CompressRequest, RestoreFileRequest
from ctxkeep.service.compress_check import CheckRequest
from ctxkeep.service.ingest import IngestRequest
from ctxkeep.service.maintenance import BackfillRequest
from ctxkeep.service.secrets import ScrubRequest

ROLLOUT = ".codex/sessions/2025/10/31/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"


def _user(tmp_path: Path) -> Path:
    user = tmp_path / "user"
    dst = user / ROLLOUT
    dst.parent.mkdir(parents=True)
    shutil.copyfile(CORPUS_HOME / ROLLOUT, dst)
    return user


def _paths(db: Path, sql: str) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute(sql)]
    finally:
        con.close()


def test_absolute_file_is_lexical_and_folds_dots(tmp_path):
    assert absolute_file("a/../b/./c.jsonl", "/x/y") == "/x/y/b/c.jsonl"
    assert absolute_file("/abs/f.jsonl", "/x") == "/abs/f.jsonl"
    assert absolute_file("~/f.jsonl", "/x") == os.path.expanduser("~/f.jsonl")
    # a symlink is kept as named (discovery's confinement must still see the link)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert absolute_file("link/f.jsonl", str(tmp_path)) == str(tmp_path / "link" / "f.jsonl")
    assert is_relative_stored(".codex/x.jsonl") and not is_relative_stored("/a/x.jsonl")
    assert not is_relative_stored("C:\\Users\\x.jsonl")


def test_every_request_with_a_user_path_makes_it_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    want = tmp_path / "a" / "s.jsonl"
    assert IngestRequest(paths=(Path("a/s.jsonl"),)).paths == (want,)
    assert CheckRequest((Path("a/./s.jsonl"),)).files == (want,)
    assert CompressRequest.parse(files=["a/s.jsonl"]).files == [want]
    assert RestoreFileRequest.parse(file="b/../a/s.jsonl").file == want
    assert BackfillRequest.parse(paths=["a/s.jsonl"]).paths == [want]
    assert ScrubRequest.parse(paths=["a/s.jsonl"]).paths == [want]
    # an MCP caller's directory (parse's cwd) is the base when given
    assert CompressRequest.parse(files=["s.jsonl"], cwd="/elsewhere").files == [Path("/elsewhere/s.jsonl")]


def test_ingest_of_a_relative_path_stores_the_absolute_one(tmp_path, monkeypatch):
    user = _user(tmp_path)
    home = tmp_path / "store"
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.chdir(user)
    monkeypatch.setenv("PWD", str(user))
    r = CliRunner().invoke(app, ["ingest", "--home", str(home), "--no-prefect", "--path", ROLLOUT])
    assert r.exit_code == 0, r.output
    want = str(user / ROLLOUT)
    db = home / "store.db"
    assert _paths(db, "SELECT path FROM watermarks") == [want]
    assert _paths(db, "SELECT DISTINCT path FROM coverage") == [want]
    assert _paths(db, "SELECT path FROM files") == [want]
    assert _paths(db, "SELECT path FROM vault_files") == [want]
    # the plain ingest that follows reads the same file under the same name: one row each
    r = CliRunner().invoke(app, ["ingest", "--home", str(home), "--no-prefect", "--agent", "codex"])
    assert r.exit_code == 0, r.output
    assert _paths(db, "SELECT path FROM watermarks") == [want]
    assert _paths(db, "SELECT path FROM vault_files") == [want]

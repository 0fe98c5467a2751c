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


def _as_old_ctxkeep_stored_it(db: Path, abs_: str, rel: str) -> int:
    """Make the store hold ``rel`` beside ``abs_`` as a relative ``compress FILE`` /
    ``ingest --path`` then a plain ingest left it before F1: the entries and the vault's
    generation under the relative name, watermark and coverage under both. Returns the
    number of entries."""
    con = sqlite3.connect(db)
    try:
        with con:
            cur = con.execute("INSERT INTO files(path) VALUES (?)", (rel,))
            fid = cur.lastrowid
            con.execute("UPDATE entry_rows SET file_id = ?", (fid,))
            con.execute(
                "INSERT INTO watermarks SELECT ?, agent, dev, ino, size, mtime_ns, offset, head_len, "
                "head_hash, parser_version, state, updated_at FROM watermarks WHERE path = ?",
                (rel, abs_),
            )
            cols = "agent_version, parser_version, records, parsed, entries, quarantined, unknown, updated_at"
            con.execute(
                f"INSERT INTO coverage(agent, path, {cols}) SELECT agent, ?, {cols} FROM coverage WHERE path = ?",
                (rel, abs_),
            )
            vf = con.execute(
                "INSERT INTO vault_files(path, agent, mode, meta) SELECT ?, agent, mode, meta FROM vault_files "
                "WHERE path = ?",
                (rel, abs_),
            ).lastrowid
            con.execute("UPDATE vault_generations SET vfile_id = ?", (vf,))
            # and one relative path nothing else names (its folder is recorded nowhere)
            con.execute(
                "INSERT INTO watermarks(path, agent, offset) VALUES ('orphan/rollout-x.jsonl', 'codex', 0)"
            )
        return con.execute("SELECT count(*) FROM entry_rows").fetchone()[0]
    finally:
        con.close()


def test_restore_refuses_a_relative_path_and_doctor_repair_merges_it(tmp_path, monkeypatch):
    user = _user(tmp_path)
    home = tmp_path / "store"
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    want = str(user / ROLLOUT)
    r = CliRunner().invoke(app, ["ingest", "--home", str(home), "--no-prefect", "--path", want])
    assert r.exit_code == 0, r.output
    db = home / "store.db"
    n = _as_old_ctxkeep_stored_it(db, want, ROLLOUT)
    assert n > 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("PWD", str(elsewhere))
    r = CliRunner().invoke(app, ["vault", "restore", "--all-missing", "--home", str(home)])
    # nothing written where the command ran (before: the session file, under .codex/)
    assert list(elsewhere.iterdir()) == []
    assert "relative path" in r.output, r.output
    r = CliRunner().invoke(app, ["doctor", "--home", str(home), "--json"])
    import json

    found = [f for f in json.loads(r.stdout)["findings"] if f["check"] == "paths"]
    assert [f["status"] for f in found] == ["damaged", "warning"], found
    assert f"e.g. {ROLLOUT} = {want}" in found[0]["detail"]
    assert "orphan/rollout-x.jsonl" in found[1]["detail"]
    r = CliRunner().invoke(app, ["doctor", "--repair", "--home", str(home)])
    assert "merged 1 relative session file path into the absolute path" in r.output, r.output
    assert "orphan/rollout-x.jsonl: stored relative with no single absolute twin" in r.output
    assert _paths(db, "SELECT path FROM files") == [want]
    assert _paths(db, "SELECT DISTINCT path FROM coverage") == [want]
    assert _paths(db, "SELECT path FROM watermarks ORDER BY path") == [want, "orphan/rollout-x.jsonl"]
    assert _paths(db, "SELECT path FROM vault_files") == [want]
    assert _paths(
        db, "SELECT count(*) FROM entry_rows e JOIN files f USING(file_id) WHERE f.path = '" + want + "'"
    ) == [n]
    assert _paths(db, "SELECT gen FROM vault_generations") == [1]
    # the vault restores it by its absolute name again
    r = CliRunner().invoke(app, ["vault", "restore", "--all-missing", "--dry-run", "--home", str(home)])
    assert list(elsewhere.iterdir()) == []

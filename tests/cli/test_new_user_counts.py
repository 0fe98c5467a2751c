"""Counts a new user saw disagree (session 13's trial): `reparse --dry-run` said 29
files where `vault status` said 28 (Crush's database is held as one rows document per
session), and `ingest` counted two Aider Markdown files as "2 lines" (a whole document
is one record)."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from ctxkeep.cli import app
from tests.conftest import CORPUS_HOME

runner = CliRunner()


def _json(*args: str) -> dict:
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_reparse_counts_files_as_vault_status_does_and_labels_the_documents(store):
    status = _json("vault", "status", "--home", str(store))
    rep = _json("reparse", "--dry-run", "--home", str(store))
    crush = next(a for a in status["agents"] if a["agent"] == "crush")
    assert (crush["files"], crush["sessions"]) == (1, 2)  # one database, two sessions
    files = sum(a["files"] for a in status["agents"])
    assert rep["agent_files"] == files
    assert rep["files"] == files + crush["sessions"] - crush["files"]  # a rows document per session
    r = runner.invoke(app, ["reparse", "--dry-run", "--home", str(store)], env={"COLUMNS": "200"})
    assert r.stdout.splitlines()[0] == (
        f"ctxkeep reparse --dry-run: {files} files ({rep['files']} in the vault: a database's sessions "
        f"are one document each), {rep['generations']} generations from the vault"
    )


def test_ingest_counts_an_aider_markdown_file_as_one_record_not_a_line(tmp_path):
    src = CORPUS_HOME / "code" / "zen-mcp-server"
    home = tmp_path / "home"
    shutil.copytree(src, home / "code" / "zen-mcp-server")
    # the chat history (Markdown) and the input history: both many lines long
    files = sorted((home / "code" / "zen-mcp-server").iterdir())
    assert len(files) == 2 and all(p.read_text().count("\n") > 2 for p in files)
    env = {"HOME": str(home), "CTXKEEP_IDLE_SECONDS": "0"}
    store = tmp_path / "store"
    r = runner.invoke(app, ["ingest", "--agent", "aider", "--home", str(store), "--no-progress"], env=env)
    assert r.exit_code == 0, r.output
    first = r.stdout.splitlines()[0]
    assert ", 2 records) in " in first and "lines)" not in first, first

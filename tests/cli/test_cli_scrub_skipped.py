"""``secrets --scrub`` on the files it does not rewrite (newuser18 F2): an Aider history
(plain text) is skipped with the values' kinds, the numbers of the lines holding them
and what to do; an agent's SQLite database with "rotate the keys"."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


def run80(e: dict, *args: str):
    """A whole ``ctxkeep`` process at 80 columns (the console reads COLUMNS once per
    process: an in-process run takes the width of the first test that printed)."""
    import subprocess
    import sys

    env = {**os.environ, **e, "COLUMNS": "80", "TZ": "UTC"}
    cmd = [sys.executable, "-m", "ctxkeep", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


SECRET = "PwEvEzUz+BMHaRZCZSIIMoK9s+uyA3q09mzHR8l/"  # fake, 40 base64 characters
HISTORY = (
    "# aider chat started at 2025-06-08 12:00:00\n\n> Aider v0.86.1  \n> Main model: gpt-4o  \n\n"
    "#### configure boto  \n\nSure.\n\n"
    f"#### my aws secret is {SECRET} please use it  \n\nI will read it from the environment.\n\n"
)


def _home(tmp_path: Path) -> tuple[dict, Path]:
    home = tmp_path / "home"
    md = home / "code" / "proj" / ".aider.chat.history.md"
    md.parent.mkdir(parents=True)
    md.write_text(HISTORY)
    t = time.time() - 3600
    os.utime(md, (t, t))
    e = {
        "HOME": str(home),
        "CTXKEEP_HOME": str(tmp_path / "store"),
        "CTXKEEP_IDLE_SECONDS": "0",
        "COLUMNS": "80",
    }
    r = runner.invoke(app, ["ingest"], env=e)
    assert r.exit_code == 0, r.output
    return e, md


def test_a_plain_text_history_is_skipped_naming_kinds_lines_and_what_to_do(tmp_path):
    e, md = _home(tmp_path)
    before = md.read_bytes()
    r = runner.invoke(app, ["secrets", "--scrub", "--dry-run", "--json"], env=e)
    assert r.exit_code == 0, r.output
    (f,) = [x for x in json.loads(r.stdout)["files"] if x["path"] == str(md)]
    assert f["status"] == "skipped" and f["values"] == {"aws-secret-key": 1} and f["lines"] == [10]
    assert f["reason"] == (
        "plain text, not rewritten (ctxkeep rewrites JSON and JSONL sessions only): aws-secret-key 1 "
        "on line 10; edit it out by hand, then rotate the keys"
    )
    r = run80(e, "secrets", "--scrub")
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert "skipped: " in flat
    assert "aws-secret-key 1 on line 10; edit it out by hand, then rotate the keys" in flat
    assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout
    assert md.read_bytes() == before  # never written


def test_an_agents_database_says_rotate(tmp_path):
    from ctxkeep.maintenance.scrub import ScrubFile, _not_rewritten

    db = tmp_path / "crush.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100 + b"password=hunter2secretABC")
    r = _not_rewritten(ScrubFile(str(db), "crush"), db)
    assert r.status == "skipped"
    assert r.reason == "an agent's database: ctxkeep never writes one; rotate the keys it holds"


def test_a_databases_sessions_are_answered_once_as_the_database(tmp_path):
    """newuser21 M3: the sessions of Crush's database are held as ``<db>#session=<id>``
    documents; `secrets --scrub --dry-run` answered each as "skipped: the file is gone"
    beside the database's own line. Now one line: the database, rotate the keys."""
    from tests.conftest import CORPUS_HOME
    from tests.dbhelpers import corpus_part

    rel = "code/dbos-transact-golang/.crush/crush.db"
    home = tmp_path / "home"
    db = corpus_part(rel, home)
    t = time.time() - 3600
    os.utime(db, (t, t))
    e = {"HOME": str(home), "CTXKEEP_HOME": str(tmp_path / "store"), "CTXKEEP_IDLE_SECONDS": "0"}
    r = runner.invoke(app, ["ingest"], env=e)
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["secrets", "--json"], env=e)
    assert json.loads(r.stdout)["agents"]["crush"]["sessions"] == 2  # the corpus's sessions hold values
    r = runner.invoke(app, ["secrets", "--scrub", "--dry-run", "--json"], env=e)
    assert r.exit_code == 0, r.output
    files = json.loads(r.stdout)["files"]
    assert not [f for f in files if "#session=" in f["path"] or "gone" in (f.get("reason") or "")], files
    (one,) = [f for f in files if f["path"] == str(db)]
    assert one["status"] == "skipped"
    assert one["reason"] == "an agent's database: ctxkeep never writes one; rotate the keys it holds"
    assert (CORPUS_HOME / rel).read_bytes() == db.read_bytes()

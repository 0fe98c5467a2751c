"""What a new user found in session 21's trial (newuser21), each a CLI run:

- N7: a closed pipe (``ctxkeep search x | head -1``) ended the command with a silent
  exit 1 (Click's and Rich's EPIPE handling), which fails a ``set -o pipefail`` script.
  It now ends quietly with 0, as ripgrep does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import CORPUS_HOME, child_env


def _into_closed_pipe(home, *args: str) -> tuple[int, str]:
    """``ctxkeep ARGS`` writing its stdout into a pipe whose reader has gone (what
    ``| head -1`` leaves once head exits): exit code and stderr."""
    r, w = os.pipe()
    os.close(r)  # every write to w now fails with EPIPE
    try:
        p = subprocess.run(
            [sys.executable, "-m", "ctxkeep", *args, "--home", str(home)],
            stdout=w,
            stderr=subprocess.PIPE,
            env=child_env(HOME=str(CORPUS_HOME)),
            timeout=300,
            text=True,
        )
    finally:
        os.close(w)
    return p.returncode, p.stderr


@pytest.mark.parametrize(
    "args",
    [("sessions", "--all"), ("search", "the"), ("report", "daily"), ("search", "the", "--json")],
    ids=["sessions", "search", "report", "search-json"],
)
def test_a_closed_pipe_ends_quietly_with_0(corpus_store, args):
    home, _ = corpus_store
    code, err = _into_closed_pipe(home, *args)
    assert code == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_purge_dry_run_counts_deleted_agent_files_apart(tmp_path):
    """N8: `purge --project P --dry-run` counted 508 agent files as "left on disk",
    494 of them deleted already. A file deleted since its ingest is counted apart."""
    import json
    import shutil

    from typer.testing import CliRunner

    from ctxkeep.cli import app
    from tests.conftest import corpus, ingest

    home, store = tmp_path / "home", tmp_path / "store"
    proj = home / ".claude" / "projects" / "-tmp-vanish"
    proj.mkdir(parents=True)
    src = corpus(".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl")
    kept, gone = proj / "a.jsonl", proj / "b.jsonl"
    shutil.copy(src, kept)
    # the same session under another id: a second file of the project
    gone.write_text(src.read_text().replace("d3ad4cdc-5657-435d-98fa-0035d53e383d", "d3ad4cdc-0000-435d-98fa-0035d53e383d"))
    ingest(home, store)
    project = json.loads(
        CliRunner().invoke(app, ["sessions", "--all", "--json", "--home", str(store)]).stdout
    )["sessions"][0]["project_dir"]
    gone.unlink()
    args = ["purge", "--project", project, "--dry-run", "--home", str(store)]
    r = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    rows = {" ".join(x.strip("│┃ ").split()) for x in r.stdout.splitlines()}
    assert "agent files it came from (left on disk) 1" in rows, r.stdout
    assert "agent files it came from (deleted already) 1" in rows, r.stdout
    j = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert (j["removed"]["source_files"], j["removed"]["source_files_gone"]) == (2, 1), j["removed"]

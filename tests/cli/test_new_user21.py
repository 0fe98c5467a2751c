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
    gone.write_text(
        src.read_text().replace(
            "d3ad4cdc-5657-435d-98fa-0035d53e383d", "d3ad4cdc-0000-435d-98fa-0035d53e383d"
        )
    )
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


def _blocks(home, *args):
    import json

    from typer.testing import CliRunner

    from ctxkeep.cli import app

    r = CliRunner().invoke(app, ["report", "blocks", "--home", str(home), "-z", "UTC", "--json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_blocks_notes_are_those_of_the_blocks_shown(corpus_store):
    """N6: `report blocks --since 1d` showed one Claude Code block under notes about
    Codex, Crush, opencode-go and opencode, none of which had a row in it."""
    home, _ = corpus_store
    every = _blocks(home)["notes"]
    assert any(n.startswith("codex:") for n in every) and any(n.startswith("crush:") for n in every)
    day = _blocks(home, "--since", "2025-09-03", "--until", "2025-09-03")
    assert [b["agents"] for b in day["rows"] if not b["is_gap"]] == [["claude-code"]]
    assert day["notes"] == []
    crush = _blocks(home, "--since", "2025-08-09", "--until", "2025-08-09")
    assert [b["agents"] for b in crush["rows"] if not b["is_gap"]] == [["crush"]]
    assert [n.split(":")[0] for n in crush["notes"]] == ["crush"], crush["notes"]
    codex = _blocks(home, "--since", "2025-11-01", "--until", "2025-11-01")
    assert {a for b in codex["rows"] for a in b["agents"]} == {"codex"}
    assert [n.split(":")[0] for n in codex["notes"]] == ["codex"], codex["notes"]


def test_blocks_of_every_provider_come_in_order_of_start_then_provider(corpus_store):
    """N11: the blocks are per provider; the rows of all providers come in order of
    start, then provider, and the help says per provider (it said "across all agents")."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    home, _ = corpus_store
    rows = _blocks(home)["rows"]
    keys = [(b["start"], b["provider"]) for b in rows]
    assert keys == sorted(keys) and len({p for _, p in keys}) >= 3
    h = CliRunner().invoke(app, ["report", "blocks", "--help"], env={"COLUMNS": "200"}).stdout
    assert "per provider" in h and "across all agents" not in h


@pytest.mark.parametrize("name", ["daily", "session", "blocks"])
def test_report_json_keeps_its_notes_in_the_json_only(corpus_store, name):
    """N5: `report … --json` printed its notes on stderr too (they are in "notes");
    with `2>&1` the JSON no longer parsed. `sessions --json` printed none: one rule."""
    import json

    home, _ = corpus_store
    p = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "report", name, "--json", "--home", str(home)],
        capture_output=True, text=True, env=child_env(), timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert any(n.startswith("codex:") for n in got["notes"]) and got["warnings"] == []
    assert p.stderr == ""
    both = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "report", name, "--json", "--home", str(home)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(), timeout=300,
    )  # fmt: skip
    assert json.loads(both.stdout) == got

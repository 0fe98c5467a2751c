"""``purge --policy --compact`` compacts after the rules' purge (session 23: it used to
purge and skip the compaction), says so in ``--dry-run`` and ``--json``; a compaction
the disk has no room for fails with one line before writing anything."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from conftest import CORPUS_HOME, ROOT
from ctxkeep.cli import app
from ctxkeep.sinks.sqlite import compact as compact_mod
from ctxkeep.sinks.sqlite.compact import COMPACT_TMP, COPY_SLACK, free_space

CTXKEEP = str(ROOT / ".venv" / "bin" / "ctxkeep")
#: the corpus's biggest project (by entries): its purge frees pages
PROJECT = "/Users/chip/dev/ai-music"


def cli(*args, home):
    env = dict(os.environ, HOME=str(CORPUS_HOME), CTXKEEP_IDLE_SECONDS="0", COLUMNS="300")
    return subprocess.run(
        [CTXKEEP, *args, "--home", str(home)], capture_output=True, text=True, env=env, timeout=600
    )


def _entries(home: Path, project: str | None = None) -> int:
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        if project is None:
            return c.execute("SELECT count(*) FROM entries").fetchone()[0]
        return c.execute(
            "SELECT count(*) FROM entries WHERE project_dir = ? OR project_dir LIKE ?",
            (project, project + "/%"),
        ).fetchone()[0]
    finally:
        c.close()


def test_policy_purge_then_compacts_and_says_so(store):
    (store / "config.toml").write_text(f'[purge]\nprojects = ["{PROJECT}"]\n')
    n, in_project = _entries(store), _entries(store, PROJECT)
    assert in_project > 100
    size0 = (store / "store.db").stat().st_size
    f0 = free_space(store)

    # --dry-run --json: the rules' plan and the compaction's figures as of now; nothing changes
    r = cli("purge", "--policy", "--compact", "--dry-run", "--json", home=store)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["dry_run"] is True and p["totals"]["entries"] >= in_project
    c = p["compacted"]
    assert c["dry_run"] is True and c["before"] == size0 and c["reclaimed"] == f0["free_bytes"]
    assert c["needs"] == (f0["pages"] - f0["free_pages"]) * f0["page_size"] + COPY_SLACK
    assert c["disk_free"] > c["needs"]
    # --dry-run in words: the same, one more line
    r = cli("purge", "--policy", "--compact", "--dry-run", home=store)
    assert r.returncode == 0, r.stderr
    assert "then would compact store.db:" in r.stdout and "free now" in r.stdout, r.stdout
    assert _entries(store) == n and (store / "store.db").stat().st_size == size0

    # the run: purged, then compacted (no free page left, the file smaller than before)
    r = cli("purge", "--policy", "--compact", "--yes", "--json", home=store)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    removed = rep["totals"]["entries"]
    assert removed >= in_project and _entries(store) == n - removed and _entries(store, PROJECT) == 0
    c = rep["compacted"]
    assert c["dry_run"] is False and c["free_pages"] > 50, c  # the purge's free pages, given back
    after = (store / "store.db").stat().st_size
    assert c["after"] == after < size0 and c["reclaimed"] == c["before"] - after > 0
    assert free_space(store)["free_pages"] == 0 and not (store / COMPACT_TMP).exists()


def test_policy_compact_in_words_and_with_nothing_to_purge(store):
    (store / "config.toml").write_text(f'[purge]\nprojects = ["{PROJECT}"]\n')
    r = cli("purge", "--policy", "--compact", "--yes", home=store)
    assert r.returncode == 0, r.stderr
    words = " ".join(r.stdout.split())
    assert "compacted store.db:" in words and "given back" in words, r.stdout
    assert free_space(store)["free_pages"] == 0
    # the rules remove nothing now: the compaction asked for still runs (and says so)
    r = cli("purge", "--policy", "--compact", "--yes", "--json", home=store)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["totals"]["entries"] == 0 and rep["compacted"]["dry_run"] is False
    assert (
        rep["compacted"]["free_pages"] == 0
        and rep["compacted"]["after"] == (store / "store.db").stat().st_size
    )


def test_a_compaction_without_room_on_the_disk_is_one_line_and_changes_nothing(store, monkeypatch):
    # a named purge's --dry-run --compact says the compaction too (figures as of now)
    size0, f0 = (store / "store.db").stat().st_size, free_space(store)
    r = CliRunner().invoke(
        app, ["purge", "--project", PROJECT, "--compact", "--dry-run", "--json", "--home", str(store)]
    )
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["removed"]["entries"] > 100 and got["compacted"]["dry_run"] is True
    assert got["compacted"]["before"] == size0 and got["compacted"]["free_pages"] == f0["free_pages"]
    r = CliRunner().invoke(app, ["purge", "--project", PROJECT, "--yes", "--home", str(store)])
    assert r.exit_code == 0, r.output
    f = free_space(store)
    size, need = (
        (store / "store.db").stat().st_size,
        (f["pages"] - f["free_pages"]) * f["page_size"] + COPY_SLACK,
    )
    monkeypatch.setattr(compact_mod, "disk_free", lambda path: need - 1)
    r = CliRunner().invoke(app, ["purge", "--compact", "--home", str(store)], env={"COLUMNS": "400"})
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"error: not enough free disk to compact store.db: the copy needs {need / 1e6:,.0f} MB beside it, "
        f"{(need - 1) / 1e6:,.0f} MB free ({store}) - free space on that disk, then run "
        "`ctxkeep purge --compact` again (the store is unchanged)"
    ], r.stderr
    assert (store / "store.db").stat().st_size == size and free_space(store)["free_pages"] == f["free_pages"]
    assert not (store / COMPACT_TMP).exists()
    # the dry run says it too
    r = CliRunner().invoke(
        app, ["purge", "--compact", "--dry-run", "--home", str(store)], env={"COLUMNS": "400"}
    )
    assert r.exit_code == 0 and ": not enough)" in r.stdout, r.stdout
    # with room, it runs
    monkeypatch.setattr(compact_mod, "disk_free", lambda path: need)
    r = CliRunner().invoke(app, ["purge", "--compact", "--home", str(store), "--json"])
    assert r.exit_code == 0, r.output
    assert free_space(store)["free_pages"] == 0

"""``purge --compact`` (``sinks.sqlite.compact``; newuser21 N9: a purged store kept
2,429 of its 3,090 pages free and every backup copied them): the store written anew
without its free pages, the same rows, and crash consistency: a compaction SIGKILLed
at each of its steps (``kill_point("compact", …)``) and at random times leaves the
old store or the new one, whole, and the next compaction sweeps what the kill left."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import child_env
from ctxkeep.cli import app
from ctxkeep.maintenance.purge import run_purge
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.sinks.sqlite.compact import COMPACT_TMP, compact, free_space
from store_digest import store_digest

#: the corpus's biggest project (by entries): its purge frees pages
PROJECT = "/Users/chip/dev/ai-music"
STEPS = ["compact:copied", "compact:checked", "compact:sidecars", "compact:renamed"]


def _header(home: Path) -> tuple:
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        return tuple(
            c.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version", "journal_mode")
        )
    finally:
        c.close()


def _check(home: Path) -> str:
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        return c.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        c.close()


@pytest.fixture(scope="module")
def purged(corpus_store, tmp_path_factory) -> Path:
    """A copy of the corpus store with a project purged: free pages inside."""
    src, _ = corpus_store
    home = tmp_path_factory.mktemp("purged") / "store"
    shutil.copytree(src, home, ignore=shutil.ignore_patterns("*.lock"))
    r = run_purge(home, PurgeRequest("project", project_dir=PROJECT))
    assert r["removed"]["entries"] > 100, r["removed"]
    return home


def _copy(purged: Path, tmp_path: Path) -> Path:
    home = tmp_path / "store"
    shutil.copytree(purged, home, ignore=shutil.ignore_patterns("*.lock"))
    return home


def test_compact_gives_the_free_pages_back_and_keeps_every_row(purged, tmp_path):
    home = _copy(purged, tmp_path)
    digest, header = store_digest(home), _header(home)
    f = free_space(home)
    assert f["worth_compacting"] and f["free_pages"] > 50, f
    dry = compact(home, dry_run=True)
    assert dry["reclaimed"] == f["free_bytes"] and (home / "store.db").stat().st_size == f["bytes"]
    r = compact(home)
    assert r["before"] == f["bytes"] and r["reclaimed"] >= f["free_bytes"], (r, f)
    assert (home / "store.db").stat().st_size == r["after"] <= f["bytes"] - f["free_bytes"]
    assert free_space(home)["free_pages"] == 0
    assert store_digest(home) == digest and _header(home) == header and header[2] == "wal"
    assert _check(home) == "ok" and not (home / COMPACT_TMP).exists()
    assert oct((home / "store.db").stat().st_mode & 0o777) == "0o600"
    # the store works on: a search finds what it found, an ingest-less doctor is sound
    hits = CliRunner().invoke(app, ["search", "experiment", "--home", str(home), "--json"])
    assert hits.exit_code == 0 and '"hits"' in hits.stdout


def test_purge_says_how_much_a_compaction_gives_back_and_compact_does_it(corpus_store, tmp_path):
    src, _ = corpus_store
    home = tmp_path / "store"
    shutil.copytree(src, home, ignore=shutil.ignore_patterns("*.lock"))
    r = CliRunner().invoke(
        app, ["purge", "--project", PROJECT, "--yes", "--home", str(home)], env={"COLUMNS": "300"}
    )
    assert r.exit_code == 0, r.output
    f = free_space(home)
    want = (
        f"store.db keeps {f['free_bytes'] / 1e6:,.1f} MB of free pages ({f['free_pages']:,} of {f['pages']:,}; "
        "a backup copies them): `ctxkeep purge --compact` gives them back"
    )
    assert want in " ".join(r.stdout.split()), r.stdout
    before = (home / "store.db").stat().st_size
    c = CliRunner().invoke(app, ["purge", "--compact", "--home", str(home), "--json"])
    assert c.exit_code == 0, c.output
    import json

    got = json.loads(c.stdout)["compacted"]
    assert got["before"] == before and got["after"] == (home / "store.db").stat().st_size < before


def _run_child(home: Path, kill_at: str | None) -> subprocess.Popen:
    code = (
        "import sys; from ctxkeep.sinks.sqlite.compact import compact\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        f"compact({str(home)!r}); print('done', flush=True)\n"
    )
    env = child_env(**({"CTXKEEP_KILL_AT": kill_at} if kill_at else {}))
    p = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    assert p.stdout.readline().strip() == "ready"
    return p


def _after_kill(home: Path, digest: dict, sizes: tuple[int, int]) -> str:
    """The store after a kill: the old one or the new one, whole, with every row; then
    a compaction again (it sweeps a left copy) gives the compacted store."""
    size = (home / "store.db").stat().st_size
    assert size in sizes, (size, sizes)
    assert _check(home) == "ok"
    assert store_digest(home) == digest
    state = "old" if size == sizes[0] else "new"
    compact(home)
    assert not (home / COMPACT_TMP).exists()
    assert (home / "store.db").stat().st_size == sizes[1] and store_digest(home) == digest
    return state


@pytest.mark.parametrize("step", STEPS)
def test_a_compaction_killed_at_each_step_leaves_a_whole_store(purged, tmp_path, step):
    ref = _copy(purged, tmp_path / "ref")
    digest = store_digest(ref)
    sizes = ((ref / "store.db").stat().st_size, compact(ref)["after"])
    home = _copy(purged, tmp_path / "trial")
    p = _run_child(home, step)
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.wait(timeout=120) == -signal.SIGKILL
    # the copy is left beside the store until the rename (then swept by the next run)
    assert (home / COMPACT_TMP).exists() == (step != "compact:renamed"), step
    state = _after_kill(home, digest, sizes)
    assert state == ("new" if step == "compact:renamed" else "old"), step


def test_compactions_killed_at_random_times_leave_a_whole_store(purged, tmp_path):
    ref = _copy(purged, tmp_path / "ref")
    digest = store_digest(ref)
    t0 = time.monotonic()
    sizes = ((ref / "store.db").stat().st_size, compact(ref)["after"])
    span = time.monotonic() - t0
    rng = random.Random(22)
    states = []
    for i in range(8):
        home = _copy(purged, tmp_path / f"t{i}")
        p = _run_child(home, None)
        p.stdin.write("\n")
        p.stdin.flush()
        time.sleep(rng.uniform(0, span * 1.5))
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=60)
        states.append(_after_kill(home, digest, sizes))
    assert set(states) <= {"old", "new"} and len(states) == 8
    print("random kills:", states)

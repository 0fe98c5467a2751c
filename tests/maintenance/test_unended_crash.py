"""SIGKILL trials of the path of an unended last line taken as final
(``sources.readers.jsonl``: F18's ingest half): an ingest killed at a random time
while it judges the idle files' unended last lines, and again while it reads them
once the agent ended or continued them, leaves a vault that reads back and agrees
with the watermarks, and the next ingest ends with the same store (entries,
quarantine, watermarks: ``store_digest``) and vault bytes as a run never killed."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from ctxkeep.maintenance.vault import vault_verify
from tests import phase_kill
from tests.conftest import CORPUS_HOME
from tests.maintenance.test_vault_crash import (
    _agrees,
    _has_schema,
    _ingest,
    _kill_trials,
    _killed,
    _reference,
    _vault_state,
)
from tests.store_digest import store_digest

TRIALS = 5


def _tails(home: Path) -> list[tuple[Path, bytes]]:
    """Leave every Claude Code and Codex session file of ``home`` with an unended last
    line: every other one a copy of its last line without its ``\\n`` (a whole record:
    Claude Code's ``uuid`` changed so it is a record of its own), the others its first
    60 bytes (torn). Returns ``(file, the bytes that finish the line)``."""
    out = []
    files = sorted([*home.glob(".claude/projects/*/*.jsonl"), *home.glob(".codex/sessions/**/*.jsonl")])
    files = [f for f in files if f.stat().st_size > 200]  # (one is empty)
    assert len(files) >= 6
    for i, f in enumerate(files):
        data = f.read_bytes()
        last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if i % 2:
            whole = last.replace(b'"uuid":"', b'"uuid":"f18', 1)
            f.write_bytes(data + whole)
            out.append((f, b"\n"))
        else:
            f.write_bytes(data + last[:60])
            out.append((f, last[60:] + b"\n"))
    return out


@pytest.mark.slow
def test_sigkilled_ingests_of_unended_lines_judged_then_finished(tmp_path):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared corpus missing")
    home = tmp_path / "home"
    home.mkdir()
    for d in (".claude", ".codex"):
        shutil.copytree(CORPUS_HOME / d, home / d)
    rest = _tails(home)
    # 1. the judgment (CTXKEEP_IDLE_SECONDS=0: the files are idle)
    _kill_trials(home, tmp_path, seed=19, agrees=_agrees, trials=TRIALS)
    base = tmp_path / "ref"
    n_unended = _quarantined_unended(base)
    assert n_unended == sum(more != b"\n" for _f, more in rest) >= 3  # the torn ones only
    before = tmp_path / "before"
    shutil.copytree(base, before)
    # 2. the agents end or continue the lines
    for f, more in rest:
        with open(f, "ab") as fh:
            fh.write(more)
    # the reference: the same ingest from the judged store, whole, with its phases
    ref2 = tmp_path / "ref2"
    shutil.copytree(before, ref2)
    traced = _reference("ingest", home, ref2)
    assert _quarantined_unended(ref2) == 0
    want_store, want_vault = store_digest(ref2), _vault_state(ref2)
    # one kill in each phase of it (suite19's scheme: tests/phase_kill.py)
    kills = phase_kill.plan(phase_kill.traced_marks(traced), random.Random(18), TRIALS)
    killed = 0
    for i, (phase, delay) in enumerate(kills):
        store = tmp_path / f"c{i}"
        shutil.copytree(before, store)
        if _killed("ingest", home, store, phase, delay):
            killed += 1
            if _has_schema(store):
                assert vault_verify(store)["ok"]
                _agrees(store)
        assert _ingest(home, store)
        assert store_digest(store) == want_store
        assert _vault_state(store) == want_vault
        shutil.rmtree(store)
    assert killed >= 1, killed


def _quarantined_unended(store: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(store / "store.db")
    try:
        return conn.execute(
            "SELECT count(*) FROM quarantine WHERE reason LIKE 'unended last line%'"
        ).fetchone()[0]
    finally:
        conn.close()

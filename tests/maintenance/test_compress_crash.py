"""Crash safety of compress (issue 5): SIGKILL a compressing process in each phase of
its run, timed by its own marks (``phase_kill``, ``forkserver.Child``): to the write,
inside the write (backup, temp file, fsyncs, rename: located by the child announcing
it just before ``make_backup``; ``WRITE_EXTRA`` more trials there), the store's
bookkeeping between the kill points after the rename, to the end; each at a random
point of the phase, for both files. After each kill the session file is either the
original or the complete new file, and any ``.backup`` is a complete copy of the
original (the new file never exists without one). Children are forked from a
multiprocessing forkserver that imported ctxkeep once (``crash_child``). A last,
unkilled run then finishes the job and leaves no temp file, no duplicate entry.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

import crash_child
from conftest import CORPUS_HOME
from ctxkeep.maintenance.compress import rewrite
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store
from forkserver import Child, forkserver
from tests import phase_kill

pytestmark = pytest.mark.slow

#: trials inside the write phase beyond the one each phase gets, per file
WRITE_EXTRA = 2
FILES = {
    "claude": ".claude/projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
    "codex": ".codex/sessions/2025/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl",
}


def _reset(path: Path, original: bytes) -> None:
    for p in path.parent.iterdir():
        if p != path:
            p.unlink()
    tmp = path.with_name(path.name + ".reset")
    tmp.write_bytes(original)
    os.chmod(tmp, 0o640)
    os.replace(tmp, path)


def test_sigkill_at_random_points_leaves_original_or_new(tmp_path, monkeypatch):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    ctx = forkserver(monkeypatch, "crash_child")
    t0 = time.monotonic()
    store = tmp_path / "store"
    setups = {}
    for name, rel in FILES.items():
        path = tmp_path / name / Path(rel).name
        path.parent.mkdir()
        original = (CORPUS_HOME / rel).read_bytes()
        _reset(path, original)
        run_ingest(store, paths=[path])
        # calibration: unkilled runs give the new file and the phase timings (the
        # faster of two: a slow first run would time most kills after the end)
        cal = []
        for _ in range(2):
            _reset(path, original)
            child = Child(ctx, crash_child.run, str(store), str(path))
            code = child.finish()
            assert code == 0 and child.done and child.done[2] == "compressed", (code, child.done)
            cal.append(child.marks)
        marks = min(cal, key=lambda m: m[-1][1] - m[0][1])
        at = dict(marks)
        new = path.read_bytes()
        # (keep_messages 10 counts prompts and replies: ef958aa1 has 10, so its copy
        # loses only its repeated state lines; the rewrite is still a whole new file)
        assert new != original and len(new) < len(original)
        # the run's phases: to the write, the write to its rename, the store's
        # bookkeeping between the kill points after it, to the end
        assert [k for k, _ in marks][:3] == ["ready", "write", "compress:renamed#1"], marks
        setups[name] = {
            "path": path,
            "original": original,
            "new": new,
            "marks": marks,
            "run": at["done"] - at["ready"],
            "write_at": at["write"] - at["ready"],
            "write_len": at["compress:renamed#1"] - at["write"],
        }
    conn = sqlite_store.connect(store)
    n_entries = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    conn.close()
    outcomes = {"original": 0, "new": 0}
    rng = random.Random(20261129)
    # each file's phases once at a random point of each, and WRITE_EXTRA more inside
    # the write (backup, temp file, fsyncs, rename), the files in turn
    plans = {
        name: phase_kill.plan(s["marks"], rng)
        + [("write", rng.uniform(0.0, s["write_len"])) for _ in range(WRITE_EXTRA)]
        for name, s in setups.items()
    }
    kills = [
        (name, k)
        for ks in zip(*([(n, k) for k in p] for n, p in plans.items()), strict=False)
        for name, k in ks
    ]
    killed = 0
    t1 = time.monotonic()
    for trial, (name, phase) in enumerate(kills):
        s = setups[name]
        path, original, new = s["path"], s["original"], s["new"]
        _reset(path, original)
        child = Child(ctx, crash_child.run, str(store), str(path))
        child.kill_after(*phase)
        code = child.finish(30)
        assert code in (-signal.SIGKILL, 0)
        killed += code == -signal.SIGKILL
        now = path.read_bytes()
        assert now in (original, new), f"trial {trial} ({name}, {phase}): torn file ({len(now)} bytes)"
        assert oct(os.stat(path).st_mode & 0o777) == "0o640"
        backup = Path(str(path) + rewrite.BACKUP_SUFFIX)
        if now == new:
            assert backup.exists(), f"trial {trial}: new file without a backup"
        if backup.exists():
            assert backup.read_bytes() == original, f"trial {trial}: backup not the original"
        outcomes["original" if now == original else "new"] += 1
        print(
            f"{name} {phase[0]} + {phase[1]:.3f} s: {'killed' if code else 'ended'}, {'original' if now == original else 'new'}"
        )
    trials = len(kills)
    # both outcomes were hit: the kills did land on both sides of the rename
    assert outcomes["original"] > 0 and outcomes["new"] > 0, outcomes
    assert killed >= trials * 2 // 3, (killed, trials)
    print(
        "\n"
        + "; ".join(
            f"{k}: run {v['run']:.2f} s, write at {v['write_at']:.2f} s for {v['write_len']:.2f} s"
            for k, v in setups.items()
        )
    )
    print(f"setup {t1 - t0:.1f} s, trials {time.monotonic() - t1:.1f} s")
    print(f"{trials} trials, {killed} killed by SIGKILL while compressing: {outcomes}")
    # a later run completes the job: the original is compressed (a file that already
    # is may be cut once more between exchanges); no temp file is left, nothing doubles
    for s in setups.values():
        before = s["path"].read_bytes()
        child = Child(ctx, crash_child.run, str(store), str(s["path"]))
        assert child.finish() == 0
        done = child.done
        assert done and done[2] in ("compressed", "skipped"), done
        after = s["path"].read_bytes()
        if before == s["original"]:
            assert after == s["new"]
        assert len(after) <= len(s["new"])
        assert [p.name for p in s["path"].parent.iterdir() if rewrite.TMP_MARK in p.name] == []
        assert Path(str(s["path"]) + ".backup").read_bytes() in (s["original"], s["new"])
    conn = sqlite_store.connect(store)
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == n_entries
    assert (
        conn.execute(
            "SELECT count(*) FROM (SELECT entry_id FROM entries GROUP BY entry_id HAVING count(*) > 1)"
        ).fetchone()[0]
        == 0
    )
    conn.close()

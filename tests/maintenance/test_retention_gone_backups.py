"""Retention expires a scrub's ``.backup`` (the original secrets) whose session file is
gone from its folder (newuser18 F19: retention looked only in folders that still hold a
discovered session file, so such a backup stayed for ever), and the backups of the
agents' prompt histories (``secrets --scrub`` writes ``~/.claude/history.jsonl.backup``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.maintenance.retention import backup_dirs, old_backups
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.bad_input import line, rec

runner = CliRunner()
PAT = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"  # fake


def test_a_backup_whose_session_file_is_gone_still_expires(tmp_path):
    home = tmp_path / "home"
    proj = home / ".claude/projects/-tmp-gone"
    proj.mkdir(parents=True)
    f = proj / "00000000-0000-4000-8000-00000000abcd.jsonl"
    f.write_bytes(line(rec(1, f"here it is: {PAT} ok")) + line(rec(2, "thanks", parent=1)))
    hist = home / ".claude/history.jsonl"
    hist.write_text(json.dumps({"display": f"token {PAT}", "timestamp": 1749384000000}) + "\n")
    t = time.time() - 3600
    for p in (f, hist):
        os.utime(p, (t, t))
    store = tmp_path / "store"
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0"}
    assert runner.invoke(app, ["ingest"], env=e).exit_code == 0
    d = json.loads(runner.invoke(app, ["secrets", "--scrub", "--json"], env=e).stdout)
    assert d["scrubbed"] == 2, d
    backup = Path(str(f) + ".backup")
    assert backup.exists() and Path(str(hist) + ".backup").exists()
    moved = tmp_path / "moved"
    moved.mkdir()
    f.rename(moved / f.name)  # the agent's cleanup (or the user) removed the session file
    ctx = DiscoveryContext(home=home, env={})
    dirs = backup_dirs(store, ctx)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=40)
    due = old_backups(dirs, later - dt.timedelta(days=30))
    assert backup in due, (dirs, due)
    assert Path(str(hist) + ".backup") in due

"""One-line outputs over 80 columns with absolute paths (newuser16 F9, F13): `purge --all
--dry-run` (118 columns), `backup` (143), `purge --session` (its files), and the hooks'
"ingested 1 new entries". Whole processes: the console reads COLUMNS once per process."""

from __future__ import annotations

import os
import subprocess
import sys


def _run(home, *args: str, user) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="80", CTXKEEP_IDLE_SECONDS="0", TZ="UTC", HOME=str(user))
    return subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", str(home)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_purge_dry_run_and_backup_fit_80_columns_with_tilde_paths(store, tmp_path):
    user = store.parent  # the store under the home: printed as ~/store
    r = _run(store, "purge", "--all", "--dry-run", user=user)
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert "would wipe the store at ~/store: " in flat and str(user) not in r.stdout
    assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout
    r = _run(store, "backup", user=user)
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert (
        flat.startswith("backed up the store to ~/store/backups/store-") and "removed 0 older copies" in flat
    )
    assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout
    r = _run(store, "purge", "--session", "d3ad4cdc", "--dry-run", user=user)
    assert r.returncode == 0, r.stderr
    assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout


def test_the_hook_log_says_1_new_entry(tmp_path, monkeypatch):
    from ctxkeep.hooks import worker

    class _Res:
        summary = {"entries_new": 1}

    monkeypatch.setattr(worker, "unchanged", lambda home, path: False)
    import ctxkeep.service.ingest as ing

    monkeypatch.setattr(ing, "ingest", lambda home, req: _Res())
    assert worker.ingest_file(tmp_path, "claude-code", "/x.jsonl") == "ingested 1 new entry from /x.jsonl"

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


def test_purge_says_what_its_tombstone_keeps_at_80_columns(store, tmp_path):
    """newuser18 F5: the purge summary names the identifying data it keeps on purpose."""
    user = store.parent
    r = _run(store, "purge", "--project", "/path/to/Demo", "--yes", user=user)
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert (
        "tombstone added kept on purpose: a tombstone naming the project dir, 6 session ids and "
        "1 file path, so the next ingest does not bring it back (`purge --reingest` lifts it)"
    ) in flat, r.stdout
    assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout


def test_the_hook_log_says_1_new_entry(tmp_path, monkeypatch):
    from ctxkeep.hooks import worker

    class _Res:
        summary = {"entries_new": 1}

    monkeypatch.setattr(worker, "unchanged", lambda home, path: False)
    import ctxkeep.service.ingest as ing

    monkeypatch.setattr(ing, "ingest", lambda home, req: _Res())
    assert worker.ingest_file(tmp_path, "claude-code", "/x.jsonl") == "ingested 1 new entry from /x.jsonl"


def test_scrub_folds_the_files_an_agent_may_be_writing_into_one_line(monkeypatch, capsys):
    """newuser16 F13: `secrets --scrub --dry-run` printed 123 lines `skipped: /tmp/.../
    rollout-....jsonl (modified 3.6 min ago (< active_minutes 10): the agent may be
    writing it)` (~240 columns, absolute paths, nested parentheses): one line in
    compress's verb, the list with -v (~/ paths, folded)."""
    from types import SimpleNamespace as NS

    from ctxkeep import cli
    from ctxkeep.cli.secrets import _print_scrub

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(cli.out, "_console", None)
    user = os.path.expanduser("~")
    busy = [
        NS(
            status="skipped",
            path=f"{user}/.codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-12622d6a-{i:04d}.jsonl",
            reason=f"modified {3.6 + i / 10:.1f} min ago (< active_minutes 10): the agent may be writing it",
        )
        for i in range(123)
    ]
    gone = NS(status="skipped", path=f"{user}/x.jsonl", reason="the file is gone")
    res = NS(
        dry_run=True, values={"password": 1}, would_scrub=1, scrubbed=0, skipped=124, failed=0,
        files=[NS(status="would-scrub", path=f"{user}/a.jsonl", reason="", values={"password": 1}), *busy, gone], note="", backups=[],
    )  # fmt: skip
    _print_scrub(res)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "would scrub 1 value in 1 file; 124 skipped, 0 failed"
    assert "skipped: ~/x.jsonl: the file is gone" in lines
    flat = " ".join(" ".join(lines).split())
    assert "refused 123 files modified in the last 10 min" in flat and "-v lists them" in flat
    assert len(lines) <= 5 and max(map(len, lines)) <= 80, lines
    _print_scrub(res, verbose=True)
    lines = capsys.readouterr().out.splitlines()
    refused = [x for x in lines if x.startswith("refused: ") and "/rollout-2025-10-31T19-02-58-" in x]
    assert len(refused) == 123 and max(map(len, lines)) <= 80 and "((" not in "".join(lines)


def test_the_read_only_note_has_no_parentheses_of_its_own(tmp_path):
    """newuser16 F16: `sources` printed `~/code/x/.crush (read-only database or folder
    (no write permission): opened with immutable=1, ...)`: parentheses in parentheses."""
    import sqlite3

    from ctxkeep.sources.readers.sqlite import open_ro

    d = tmp_path / ".crush"
    d.mkdir()
    db = d / "crush.db"
    sqlite3.connect(db).execute("create table t(x)").connection.commit()
    db.chmod(0o444)
    d.chmod(0o555)
    try:
        ro = open_ro(db)  # (a 0444 file: the immutable fallback, even for root)
        assert ro.note is not None
        assert "(" not in ro.note and ro.note.startswith("read-only database or folder, ")
        ro.conn.close()
    finally:
        d.chmod(0o755)


def test_vault_verify_full_names_the_orphan_packs(store, tmp_path):
    """newuser16 F16: `vault verify --full` said `1 orphan pack` and nothing else
    (`--help`: "list orphan packs"): which file, how big, may it go."""
    import hashlib
    import json

    data = b"x" * 1234
    name = hashlib.sha256(data).hexdigest()
    orphan = store / "vault" / "packs" / name[:2] / f"{name}.pack"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(data)
    r = _run(store, "vault", "verify", "--full", user=store.parent)
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert "1 orphan pack" in flat
    assert f"orphan pack ~/store/vault/packs/{name[:2]}/{name}.pack (1.2 KB)" in flat, r.stdout
    assert "`ctxkeep vault verify --repair` removes those whose contents the store holds" in flat
    d = json.loads(_run(store, "vault", "verify", "--full", "--json", user=store.parent).stdout)
    assert d["orphan_packs"] == [{"path": str(orphan), "bytes": 1234}]


def test_a_hit_head_that_fits_with_single_spaces_is_not_folded():
    """newuser16 F9: a hit's head folded its `~13 tok` onto a line of its own when two
    spaces between fields made it a few columns too wide."""
    from ctxkeep.cli.core import _fold_fields

    head = "a1df84d44d2f0123456789abcdef01  claude-code  d3ad  2025-06-08 12:10  message  ~13 tok"
    assert len(head) > 80
    assert _fold_fields(head, 80, "   ") == [" ".join(head.split("  "))]
    # wider still: folded between fields, as before
    assert _fold_fields(head, 60, "   ") == [
        "a1df84d44d2f0123456789abcdef01  claude-code  d3ad",
        "   2025-06-08 12:10  message  ~13 tok",
    ]

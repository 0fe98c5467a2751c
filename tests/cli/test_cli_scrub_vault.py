"""``ctxkeep secrets --scrub`` and the vault (newuser15 F18, F17, F12), through the CLI
on handmade Claude Code sessions (``fixtures.bad_input``):

- F18: a scrubbed file's rewrite is the vault's newest generation, so after the agent
  appends and deletes the file, ``vault restore`` writes back the scrubbed file with
  what came after it, byte for byte; ``vault restore --all-missing`` (and its dry run)
  restores every file it can and names the one it cannot (exit 1 at the end);
- F17: after a scrub ``vault status`` finds nothing at risk; for a file the vault lost
  the start of while the store read it to its end (a scrub before the fix: the vault
  off during the scrub stands in for it), the advice is the one that clears it
  (``backfill --path``), and it does;
- F12: a secret in a line that does not parse (quarantined) is redacted on the line's
  bytes; the line stays where it was, as unparsable as it was.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from fixtures.bad_input import line, rec

runner = CliRunner()

PAT = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"  # 40 characters: its marker is shorter
PASSWORD = "password=hunter2secretABC"  # its marker is longer: the file grows
BAD = b'{"broken json line, password=hunter2secretXYZ\n'
PROJECT = ".claude/projects/-tmp-scrub"


def _old(p: Path) -> None:
    """Modified an hour ago: past scrub's ``active_minutes``."""
    t = time.time() - 3600
    os.utime(p, (t, t))


def _home(tmp_path: Path, secret: str, bad: bool = False) -> tuple[dict, Path, Path]:
    """A home with two Claude Code sessions: ``f`` holds ``secret`` in a valid line
    (and, with ``bad``, ``BAD`` after it), ``g`` holds none; ingested."""
    home = tmp_path / "home"
    (home / PROJECT).mkdir(parents=True)
    f = home / PROJECT / "00000000-0000-4000-8000-00000000abcd.jsonl"
    g = home / PROJECT / "00000000-0000-4000-8000-00000000beef.jsonl"
    f.write_bytes(
        line(rec(1, "hello"))
        + line(rec(2, f"here it is: {secret} ok", parent=1))
        + (BAD if bad else b"")
        + line(rec(3, "thanks", parent=2))
    )
    g.write_bytes(line(rec(11, "another session")) + line(rec(12, "its second line", parent=11)))
    _old(f)
    _old(g)
    e = {"HOME": str(home), "CTXKEEP_HOME": str(tmp_path / "store"), "CTXKEEP_IDLE_SECONDS": "0"}
    _run(e, "ingest")
    return e, f, g


def _run(e: dict, *args: str, code: int = 0):
    r = runner.invoke(app, list(args), env=e)
    assert r.exit_code == code, (args, r.exit_code, r.output)
    return r


def _append(f: Path, i: int) -> None:
    with open(f, "ab") as fh:
        fh.write(line(rec(i, f"appended after the scrub {i}", parent=3)))
    _old(f)


def _at_risk(e: dict) -> list[dict]:
    d = json.loads(_run(e, "vault", "status", "--json").stdout)
    return [x for a in d["agents"] for x in a["at_risk"]]


@pytest.mark.parametrize("secret", [PAT, PASSWORD], ids=["file-shrinks", "file-grows"])
def test_scrub_then_append_then_delete_restores_the_scrubbed_file_and_what_came_after(tmp_path, secret):
    e, f, g = _home(tmp_path, secret)
    before = f.read_bytes()
    d = json.loads(_run(e, "secrets", "--scrub", "--json", str(f)).stdout)
    assert d["scrubbed"] == 1 and d["files"][0]["lines_changed"] == 1
    scrubbed = f.read_bytes()
    assert secret.encode() not in scrubbed and b"[REDACTED:" in scrubbed
    assert len(scrubbed) != len(before)  # the watermark's offset moved
    # F17: nothing at risk right after the scrub (the vault holds the scrubbed file)
    assert _at_risk(e) == []
    _append(f, 4)
    r = json.loads(_run(e, "ingest", "--json").stdout)
    assert r["entries_new"] == 1
    assert _at_risk(e) == []
    expected_f, expected_g = f.read_bytes(), g.read_bytes()
    f.unlink()
    g.unlink()
    dry = json.loads(_run(e, "vault", "restore", "--all-missing", "--dry-run", "--json").stdout)
    assert sorted(x["path"] for x in dry["files"]) == sorted([str(f), str(g)]) and dry["not_restored"] == []
    assert not f.exists()
    _run(e, "vault", "restore", "--all-missing")
    assert f.read_bytes() == expected_f  # the scrubbed bytes, then the appended line
    assert g.read_bytes() == expected_g
    assert secret.encode() not in f.read_bytes()
    # the store: one entry per line, none twice, each at its offset in the scrubbed file
    stats = json.loads(_run(e, "stats", "--json").stdout)
    assert stats["entries"] == 4 + 2


def test_scrub_keeps_the_files_mtime_and_the_next_run_does_not_call_it_active(tmp_path):
    """newuser18 F4: a scrubbed file got mtime "now": the next run refused it as a file
    "the agent may be writing", and Claude Code's ``cleanupPeriodDays`` (which reads the
    mtime) kept the session longer. The rewrite is a new inode with the old mtime."""
    e, f, _g = _home(tmp_path, PAT)
    st = f.stat()
    d = json.loads(_run(e, "secrets", "--scrub", "--json", str(f)).stdout)
    assert d["scrubbed"] == 1
    new = f.stat()
    assert new.st_ino != st.st_ino and new.st_mtime_ns == st.st_mtime_ns
    assert PAT.encode() not in f.read_bytes()
    again = json.loads(_run(e, "secrets", "--scrub", "--dry-run", "--json", str(f)).stdout)
    assert (again["skipped"], again["would_scrub"]) == (0, 0), again
    assert [x["status"] for x in again["files"]] == ["clean"]
    r = _run(e, "secrets", "--scrub", "--dry-run", str(f))
    assert "refused" not in r.output and "may be writing" not in r.output, r.output
    # the watermark holds the rewritten file as it is: an ingest reads nothing
    assert json.loads(_run(e, "ingest", "--json").stdout)["entries_new"] == 0
    import sqlite3

    c = sqlite3.connect(f"file:{Path(e['CTXKEEP_HOME']) / 'store.db'}?mode=ro", uri=True)
    try:
        wm = c.execute("SELECT ino, mtime_ns FROM watermarks WHERE path = ?", (str(f),)).fetchone()
    finally:
        c.close()
    assert tuple(wm) == (new.st_ino, st.st_mtime_ns)


def test_scrub_redacts_a_secret_in_an_unparsable_line_in_place(tmp_path):
    e, f, _g = _home(tmp_path, PAT, bad=True)
    assert json.loads(_run(e, "secrets", "--json").stdout)["quarantine"]["lines"] == 1
    before = f.read_bytes()
    d = json.loads(_run(e, "secrets", "--scrub", "--dry-run", "--json", str(f)).stdout)
    (x,) = d["files"]
    assert x["status"] == "would-scrub" and x["lines_changed"] == 2 and x["bad_lines_changed"] == 1
    assert f.read_bytes() == before
    d = json.loads(_run(e, "secrets", "--scrub", "--json", str(f)).stdout)
    assert d["scrubbed"] == 1 and d["failed"] == 0
    after = f.read_bytes()
    assert b"hunter2secretXYZ" not in after and PAT.encode() not in after
    old_lines, new_lines = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(new_lines) == len(old_lines) == 4
    # the bad line: at its place, only its value replaced, still not JSON
    assert new_lines[2] == b'{"broken json line, password=[REDACTED:password]\n'
    with pytest.raises(ValueError):
        json.loads(new_lines[2])
    assert [json.loads(x)["uuid"] for i, x in enumerate(new_lines) if i != 2] == [
        json.loads(x)["uuid"] for i, x in enumerate(old_lines) if i != 2
    ]
    assert new_lines[0] == old_lines[0] and new_lines[3] == old_lines[3]
    assert (f.parent / (f.name + ".backup")).read_bytes() == before
    # scrubbed: a second run finds it clean; the vault holds the file whole
    _old(f)
    again = json.loads(_run(e, "secrets", "--scrub", "--json", str(f)).stdout)
    assert again["scrubbed"] == 0 and again["files"][0]["status"] == "clean"
    assert _at_risk(e) == []


def _lost_start(tmp_path: Path) -> tuple[dict, Path, Path]:
    """A home whose file ``f`` the vault holds only from an offset while the store read
    it to its end: a scrub whose rewrite was not captured (as before the fix: here the
    vault off during it), then the agent appended and an ingest read that."""
    e, f, g = _home(tmp_path, PAT)
    _run({**e, "CTXKEEP_VAULT": "0"}, "secrets", "--scrub", str(f))
    _append(f, 4)
    _run(e, "ingest")
    return e, f, g


def test_status_advice_for_a_file_an_ingest_cannot_complete_is_backfill_and_it_clears(tmp_path):
    e, f, _g = _lost_start(tmp_path)
    (risk,) = _at_risk(e)
    assert risk["path"] == str(f) and risk["vaulted_bytes"] == 0 and risk["read_all"] is True
    warned = " ".join(_run(e, "vault", "status").stderr.split())
    assert f"`ctxkeep backfill --path {f}`" in warned and "run `ctxkeep ingest`" not in warned
    # the vault off, a backfill captures nothing either: not advised then
    off = " ".join(_run({**e, "CTXKEEP_VAULT": "0"}, "vault", "status").stderr.split())
    assert "backfill" not in off
    _run(e, "ingest")
    assert [x["path"] for x in _at_risk(e)] == [str(f)]  # (what the old advice did: nothing)
    _run(e, "backfill", "--path", str(f))
    assert _at_risk(e) == []
    f_bytes = f.read_bytes()
    f.unlink()
    _run(e, "vault", "restore", "--all-missing")
    assert f.read_bytes() == f_bytes


def test_all_missing_restores_what_it_can_and_names_what_it_cannot(tmp_path):
    e, f, g = _lost_start(tmp_path)
    expected_g = g.read_bytes()
    f.unlink()
    g.unlink()
    for dry in (["--dry-run"], []):
        r = _run(e, "vault", "restore", "--all-missing", "--json", *dry, code=1)
        d = json.loads(r.stdout)
        assert [x["path"] for x in d["files"]] == [str(g)]
        assert [x["path"] for x in d["not_restored"]] == [str(f)]
        assert "only from byte" in d["not_restored"][0]["reason"]
    assert g.read_bytes() == expected_g and not f.exists()
    g.unlink()
    r = _run(e, "vault", "restore", "--all-missing", code=1)
    assert g.read_bytes() == expected_g and not f.exists()
    assert f"not restored: {f}" in " ".join(r.stderr.split())
    assert r.stderr.rstrip().splitlines()[-1].startswith("error: 1 file of the missing")


#: the steps of a scrub after which another store changes (``CTXKEEP_KILL_AT``)
SCRUB_KILL_POINTS = ["scrub:renamed", "scrub:watermark", "intents:analytics", "intents:finish"]


def _entry_offsets(store: Path, path: Path) -> dict[str, int]:
    """Entry id → byte offset of the entries of ``path`` in SQLite."""
    import sqlite3

    c = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        return dict(
            c.execute("SELECT entry_id, source_offset FROM entries WHERE source_path = ?", (str(path),))
        )
    finally:
        c.close()


def _duck_offsets(store: Path, path: Path) -> dict[str, int]:
    """As ``_entry_offsets``, in DuckDB."""
    import duckdb

    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    try:
        q = "SELECT entry_id, source_offset FROM entries WHERE source_path = ?"
        return dict(con.execute(q, [str(path)]).fetchall())
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", SCRUB_KILL_POINTS)
def test_sigkill_during_scrub_then_ingest_leaves_the_vault_able_to_restore(tmp_path, kill_at):
    """SIGKILL ``secrets --scrub`` (a subprocess) at each step, then one ``ingest``: no
    intent left, no entry added or lost, SQLite and DuckDB hold the entries at their
    offsets in the scrubbed file, nothing at risk, and after an append and the file's
    deletion the vault restores it byte for byte."""
    import subprocess
    import sys

    from conftest import child_env

    e, f, _g = _home(tmp_path, PAT)
    store = Path(e["CTXKEEP_HOME"])
    before = _entry_offsets(store, f)
    mtime = f.stat().st_mtime_ns
    env = child_env(HOME=e["HOME"], CTXKEEP_HOME=e["CTXKEEP_HOME"], CTXKEEP_KILL_AT=kill_at)
    p = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "secrets", "--scrub", str(f)],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == -9, (kill_at, p.returncode, p.stderr[-2000:])
    scrubbed = f.read_bytes()
    assert PAT.encode() not in scrubbed  # every kill point is past the rename
    assert f.stat().st_mtime_ns == mtime  # the new file had the old mtime before its rename
    r = _run(e, "ingest", "--json")
    assert json.loads(r.stdout)["entries_new"] == 0
    import sqlite3

    c = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        assert c.execute("SELECT count(*) FROM intents").fetchone()[0] == 0, r.stderr
        wm = c.execute("SELECT offset FROM watermarks WHERE path = ?", (str(f),)).fetchone()[0]
    finally:
        c.close()
    assert wm == len(scrubbed)
    after = _entry_offsets(store, f)
    assert set(after) == set(before)
    # one entry per line, each at its line's offset in the scrubbed file (moved)
    starts = [0] + [i + 1 for i, b in enumerate(scrubbed) if b == ord("\n")][:-1]
    assert sorted(after.values()) == starts and sorted(before.values()) != starts
    assert _duck_offsets(store, f) == after
    assert _at_risk(e) == []
    _append(f, 4)
    _run(e, "ingest")
    expected = f.read_bytes()
    f.unlink()
    _run(e, "vault", "restore", "--all-missing")
    assert f.read_bytes() == expected

"""What a purge's tombstone keeps out, made visible (newuser23 findings 1, 2, 6, 11).

Handmade Claude Code sessions (a few user records each) in tmp_path, a fresh store:
a project purge blocks the project's future sessions too (by design), and every
ingest counts what it drops; ``purge --all`` is a wipe, not damage.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import scalar
from ctxkeep.maintenance.purge import run_purge as purge
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.pipeline.engine import run_ingest

BIG = "/nowhere/big"


def session_file(root: Path, cwd: str, n: int, sid: str | None = None) -> Path:
    """A Claude Code session of ``n`` user records in project ``cwd`` under ``root``."""
    sid = sid or str(uuid.uuid4())
    d = root / ".claude" / "projects" / cwd.replace("/", "-")
    d.mkdir(parents=True, exist_ok=True)
    f = d / f"{sid}.jsonl"
    lines = []
    for i in range(n):
        lines.append(
            json.dumps(
                {
                    "parentUuid": None,
                    "isSidechain": False,
                    "userType": "external",
                    "cwd": cwd,
                    "sessionId": sid,
                    "version": "1.0.43",
                    "type": "user",
                    "message": {"role": "user", "content": f"tomb word {sid[:8]} number {i}"},
                    "uuid": str(uuid.uuid4()),
                    "timestamp": f"2026-12-06T10:00:{i:02d}.000Z",
                }
            )
        )
    f.write_text("\n".join(lines) + "\n")
    return f


def test_ingest_counts_what_a_project_tombstone_drops(tmp_path, store_home):
    first = session_file(tmp_path, BIG, 3)
    assert run_ingest(store_home, paths=[first]).entries_new == 3
    rep = purge(store_home, PurgeRequest("project", project_dir=BIG))
    assert rep["tombstone"] == "added" and rep["removed"]["entries"] == 3
    # new sessions: in the project, below it, and beside it (a longer name)
    inside = session_file(tmp_path, BIG, 4)
    below = session_file(tmp_path, BIG + "/sub", 5)
    beside = session_file(tmp_path, BIG + "ger", 2)
    s = run_ingest(store_home, paths=[inside, below, beside])
    assert s.entries_new == 2  # only the one beside it
    assert len(s.tombstoned) == 1
    t = s.tombstoned[0]
    assert (t["scope"], t["value"], t["records"], t["sessions"]) == ("project", BIG, 9, 2)
    assert t["purged_at"] == scalar(store_home, "SELECT created_at FROM tombstones WHERE scope='project'")
    # the dropped files' watermarks advanced: the next run reads none of their bytes
    again = run_ingest(store_home, paths=[inside, below, beside])
    assert again.files_read == 0 and again.bytes == 0 and again.tombstoned == []
    # a file that grows is read from where it stopped: only its new records are dropped
    with inside.open("a") as f:
        f.write(session_file(tmp_path / "more", BIG, 1, sid=inside.stem).read_text())
    grown = run_ingest(store_home, paths=[inside])
    assert [(x["records"], x["sessions"]) for x in grown.tombstoned] == [(1, 1)]


def test_ingest_counts_a_session_tombstone(tmp_path, store_home):
    f = session_file(tmp_path, "/nowhere/p", 3)
    run_ingest(store_home, paths=[f])
    purge(store_home, PurgeRequest("session", session_id=f.stem))
    # the same session continued in a new file (a resume): its records stay out, counted
    g = session_file(tmp_path / "again", "/nowhere/p", 2, sid=f.stem)
    s = run_ingest(store_home, paths=[g])
    assert s.entries_new == 0
    assert [(t["scope"], t["value"], t["records"], t["sessions"]) for t in s.tombstoned] == [
        ("session", f.stem, 2, 1)
    ]


# ---------------------------------------------------------------- the CLI's words


def _cli(home: Path, *args: str, user: Path, **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ, COLUMNS="400", CTXKEEP_IDLE_SECONDS="0", TZ="UTC", HOME=str(user), **env)
    return subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", str(home)],
        capture_output=True, text=True, env=e, timeout=180,
    )  # fmt: skip


def test_ingest_line_and_json_say_what_a_tombstone_skipped(tmp_path, store_home):
    first = session_file(tmp_path, BIG, 3)
    run_ingest(store_home, paths=[first])
    pre = _cli(store_home, "purge", "--project", BIG, "--dry-run", "--json", user=tmp_path)
    assert pre.returncode == 0, pre.stderr
    p = json.loads(pre.stdout)
    # the dry run says which tombstone the run adds, and what it blocks (newuser23 F6)
    assert p["tombstone"] == "would add" and p["tombstones"] == [f"project {BIG}"]
    assert "new sessions too" in p["tombstone_note"]
    text = _cli(store_home, "purge", "--project", BIG, "--dry-run", user=tmp_path)
    assert f"tombstone: would add (project {BIG}); from now on every ingest skips the records of {BIG} " in (
        " ".join(text.stdout.split())
    )
    done = _cli(store_home, "purge", "--project", BIG, "--yes", user=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tombstone added" in done.stdout and "new sessions too" in done.stdout
    stamp = scalar(store_home, "SELECT created_at FROM tombstones WHERE scope='project'")
    session_file(tmp_path, BIG, 4)
    session_file(tmp_path, BIG + "/sub", 5)
    r = _cli(store_home, "ingest", user=tmp_path)
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert (
        f"skipped 9 records of 2 sessions under {BIG}: purged on {stamp[:10]} "
        f"(`ctxkeep purge --reingest --project {BIG}` lifts it)"
    ) in flat, r.stdout
    # --reingest's preview: the standing tombstone would be lifted, none added
    lift = _cli(store_home, "purge", "--project", BIG, "--reingest", "--dry-run", "--json", user=tmp_path)
    assert json.loads(lift.stdout)["tombstone"] == "would lift", lift.stdout
    session_file(tmp_path, BIG, 2)
    j = _cli(store_home, "ingest", "--json", user=tmp_path)
    got = json.loads(j.stdout)["tombstoned"]
    assert [(t["scope"], t["value"], t["records"], t["sessions"], t["purged_at"]) for t in got] == [
        ("project", BIG, 2, 1, stamp)
    ]
    # `sources` lists the standing tombstones (the project first, its session counted)
    src = json.loads(_cli(store_home, "sources", "--json", user=tmp_path).stdout)
    assert [(t["scope"], t["value"]) for t in src["tombstones"]] == [
        ("project", BIG),
        ("session", first.stem),
    ]
    assert src["tombstones"][0]["sessions"] == [first.stem]
    assert src["tombstones"][1]["project"] == BIG
    out = _cli(store_home, "sources", user=tmp_path).stdout
    assert f"\n  project {BIG} (purged on {stamp[:10]}, 1 session)\n" in out, out
    assert f"session {first.stem}" not in out  # its project's purge tombstoned it


def test_sources_says_a_purged_project_is_skipped_not_waiting(tmp_path, store_home):
    """newuser24 F4: after `purge --project`, `sources` said the project's files were
    "found but not ingested yet: run `ctxkeep ingest`" (every ingest skips them), and
    its footer counted an unrelated session tombstone into the project's."""
    a, b = session_file(tmp_path, BIG, 3), session_file(tmp_path, BIG, 2)
    other = session_file(tmp_path, "/nowhere/other", 2)
    assert _cli(store_home, "ingest", user=tmp_path).returncode == 0
    assert _cli(store_home, "purge", "--session", other.stem, "--yes", user=tmp_path).returncode == 0
    assert _cli(store_home, "purge", "--project", BIG, "--yes", user=tmp_path).returncode == 0
    assert _cli(store_home, "ingest", user=tmp_path).returncode == 0
    day = scalar(store_home, "SELECT created_at FROM tombstones WHERE scope='project'")[:10]
    src = json.loads(_cli(store_home, "sources", "--json", user=tmp_path).stdout)
    (row,) = [r for r in src["rows"] if r["agent"] == "claude-code"]
    assert row["files"] == 3 and row["entries"] == 0
    assert row["reason"] == (
        f"purged (tombstone, {day}): skipped by every ingest - "
        "`ctxkeep purge --reingest --project DIR` or `--session ID` lifts one (2 tombstones)"
    )
    proj = {t["value"]: t for t in src["tombstones"]}
    assert sorted(proj[BIG]["sessions"]) == sorted([a.stem, b.stem]) and "project" not in proj[other.stem]
    out = _cli(store_home, "sources", user=tmp_path).stdout
    assert "not ingested yet" not in out
    assert (
        f"\n  project {BIG} (purged on {day}, 2 sessions)\n  session {other.stem} (purged on {day})\n" in out
    )
    # the project alone: its lifting command named
    other.unlink()
    src = json.loads(_cli(store_home, "sources", "--json", user=tmp_path).stdout)
    (row,) = [r for r in src["rows"] if r["agent"] == "claude-code"]
    assert row["reason"] == (
        f"purged (tombstone, {day}): skipped by every ingest - `ctxkeep purge --reingest --project {BIG}` lifts it"
    )


# ---------------------------------------------------------------- purge --all is a wipe


def test_ingest_after_purge_all_starts_a_fresh_store_keeping_the_tombstones(tmp_path, store_home):
    gone = session_file(tmp_path, BIG, 3)
    kept = session_file(tmp_path, "/nowhere/kept", 2)
    assert run_ingest(store_home, paths=[gone, kept]).entries_new == 5
    purge(store_home, PurgeRequest("project", project_dir=BIG))
    (store_home / "backups").mkdir()  # a backup the wipe leaves: no "damage" either
    (store_home / "backups" / "store-20261206T000000Z.db").write_bytes(b"x")
    old_id = (store_home / "store.id").read_text()
    pre = _cli(store_home, "purge", "--all", "--dry-run", "--json", user=tmp_path)
    p = json.loads(pre.stdout)
    # the purged file's watermark went with it (remembered: never read again)
    assert p["reread"] == {"files": 1, "bytes": kept.stat().st_size, "gone": 0}
    assert p["tombstones_kept"] == 2  # the project's and its one session's
    w = _cli(store_home, "purge", "--all", "--yes", user=tmp_path)
    assert w.returncode == 0, w.stderr
    flat = " ".join(w.stdout.split())
    assert "the next ingest reads the agents' files again from the start (1 file, " in flat
    assert "the 2 tombstones of earlier purges are kept for the new store" in flat
    assert not (store_home / "store.id").exists() and not (store_home / "integrity.ok").exists()
    st = _cli(store_home, "stats", user=tmp_path)
    assert st.returncode == 1 and "no store yet (`ctxkeep purge --all` wiped it)" in st.stderr
    assert "doctor --repair" not in st.stderr
    r = _cli(store_home, "ingest", "--json", user=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["entries_new"] == 2  # the project purged before stays out: its file is not even read
    assert s["files_read"] == 1 and s["tombstoned"] == []
    newer = session_file(tmp_path, BIG, 4)  # and a new session of it is counted as skipped
    s = json.loads(_cli(store_home, "ingest", "--json", user=tmp_path).stdout)
    assert newer.exists() and [(t["value"], t["records"]) for t in s["tombstoned"]] == [(BIG, 4)]
    assert not (store_home / "store.wiped").exists()
    assert (store_home / "store.id").read_text() != old_id
    assert scalar(store_home, "SELECT count(*) FROM tombstones WHERE scope='project'") == 1


def test_purge_all_says_what_only_the_store_holds_does_not_come_back(tmp_path, store_home):
    """newuser24 F10: the wipe's dry run said everything comes back from the agents'
    files; entries compress cut from their files (status archived) and files the agent
    deleted (only the vault held them) do not: counted, with `ctxkeep backup` named."""
    deleted = session_file(tmp_path, "/nowhere/a", 3)
    cut = session_file(tmp_path, "/nowhere/b", 4)
    assert run_ingest(store_home, paths=[deleted, cut]).entries_new == 7
    deleted.unlink()
    with sqlite3.connect(store_home / "store.db") as c:  # as a compress of `cut` leaves them
        sid = cut.stem
        c.execute(
            "UPDATE entries SET status = 'archived' WHERE session_id = ? AND rowid IN "
            "(SELECT rowid FROM entries WHERE session_id = ? LIMIT 2)",
            (sid, sid),
        )
    p = json.loads(_cli(store_home, "purge", "--all", "--dry-run", "--json", user=tmp_path).stdout)
    assert p["reread"] == {"files": 1, "bytes": cut.stat().st_size, "gone": 1}
    assert p["removed"]["archived_entries"] == 2 and p["removed"]["entries"] == 7
    assert "archived" not in p["removed"]  # that key is a scoped purge's Parquet rows
    pre = _cli(store_home, "purge", "--all", "--dry-run", user=tmp_path)
    flat = " ".join(pre.stdout.split())
    assert (
        "; 2 archived entries (cut from their files) and 1 file the agents deleted (kept only in the vault) "
        "are only in this store and do not come back: `ctxkeep backup` first keeps them"
    ) in flat
    w = _cli(store_home, "purge", "--all", "--yes", user=tmp_path)
    assert "were only in this store and are gone" in " ".join(w.stdout.split())


@pytest.mark.parametrize("point", ["wipe:marked", "wipe:store_db"])
def test_a_wipe_killed_midway_is_finished_not_called_damage(tmp_path, store_home, point):
    f = session_file(tmp_path, "/nowhere/p", 3)
    run_ingest(store_home, paths=[f])
    purge(store_home, PurgeRequest("session", session_id=f.stem))  # a tombstone to carry
    g = session_file(tmp_path, "/nowhere/q", 2)
    run_ingest(store_home, paths=[g])
    k = _cli(store_home, "purge", "--all", "--yes", user=tmp_path, CTXKEEP_KILL_AT=point)
    assert k.returncode == -signal.SIGKILL, (k.returncode, k.stderr)
    assert (store_home / "store.wiped").exists()
    # a reader sees no store (never the old one, never "damaged")
    st = _cli(store_home, "stats", user=tmp_path)
    assert "no store yet" in st.stderr and "doctor --repair" not in st.stderr, st.stderr
    r = _cli(store_home, "ingest", "--json", user=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["entries_new"] == 2  # a fresh store: q again; p stays out (its tombstone was carried)
    assert scalar(store_home, "SELECT count(*) FROM entries") == 2
    assert not (store_home / "store.wiped").exists()


# ---------------------------------------------------------------- free pages vs. compaction


def test_compaction_line_explains_more_than_the_free_pages(tmp_path, store_home):
    files = [session_file(tmp_path, f"/nowhere/p{i}", 40) for i in range(6)]
    run_ingest(store_home, paths=files)
    purge(store_home, PurgeRequest("project", project_dir="/nowhere/p0"))
    c = _cli(store_home, "purge", "--compact", "--json", user=tmp_path)
    got = json.loads(c.stdout)["compacted"]
    assert got["free_bytes"] == got["free_pages"] * scalar(store_home, "PRAGMA page_size")
    assert got["reclaimed"] >= got["free_bytes"]  # the free pages and what packing gave
    purge(store_home, PurgeRequest("project", project_dir="/nowhere/p1"))
    t = _cli(store_home, "purge", "--compact", user=tmp_path)
    flat = " ".join(t.stdout.split())
    assert "given back" in flat, t.stdout
    # either the free pages were all it gave, or the line says where the rest came from
    assert (
        flat.endswith("given back)")
        or "of free pages, " in flat
        and "from packing partly empty pages" in flat
    )


def test_restore_into_a_wiped_home_supersedes_the_wipe(tmp_path, store_home):
    f = session_file(tmp_path, "/nowhere/p", 3)
    g = session_file(tmp_path, "/nowhere/q", 2)
    run_ingest(store_home, paths=[f, g])
    b = _cli(store_home, "backup", "--json", user=tmp_path)
    assert b.returncode == 0, b.stderr
    purge(store_home, PurgeRequest("session", session_id=g.stem))  # after the backup
    assert _cli(store_home, "purge", "--all", "--yes", user=tmp_path).returncode == 0
    backup = next((store_home / "backups").glob("store-*.db"))
    r = _cli(store_home, "restore", str(backup), user=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    assert not (store_home / "store.wiped").exists()
    # the backup's 5 entries are back (the wipe's mark did not delete the store put back)
    assert _cli(store_home, "ingest", user=tmp_path).returncode == 0
    assert scalar(store_home, "SELECT count(*) FROM entries") == 5
    # and the wipe's tombstone (a purge after the backup) came with the restore
    assert scalar(store_home, "SELECT count(*) FROM tombstones WHERE value=?", g.stem) == 1

"""`vault verify --repair` removes the orphan packs whose contents the store holds
(session 16's closing note: `--full` listed them, nothing removed them), says first
what it would do with `--dry-run`, keeps an orphan that holds captures the store lacks
(a lost or older store.db: `doctor --repair` replays it), and judges nothing while
another run holds the store (an ingest's pack is an orphan until its commit, or an
orphan it is about to reuse: ``packs.write_pack``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.vault import packs


def _run(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="80", CTXKEEP_IDLE_SECONDS="0", TZ="UTC", HOME=str(home.parent))
    return subprocess.run(
        [sys.executable, "-m", "ctxkeep", "vault", "verify", *args, "--home", str(home)],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip


def _named(home: Path) -> list[str]:
    conn = sqlite_store.connect(home, readonly=True)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM vault_packs ORDER BY pack_id")]
    finally:
        conn.close()


def _copy_of_a_pack(home: Path, name: str) -> Path:
    """A pack written again with the same captures and objects (its record's time one
    nanosecond later, so another name): what a run killed between its pack and its
    commit leaves once the group has been read again and committed in another pack."""
    rec, objects = packs.read_record(packs.pack_path(home, name))
    b = packs.PackBuilder()
    for sha, off, stored, raw in objects:
        b.add(sha, packs.read_object(home, name, off, stored, raw, sha))
    b.record = {k: v for k, v in rec.items() if k != "objects"} | {"t": rec.get("t", 0) + 1}
    new, _ = packs.write_pack(home, b)
    assert new != name
    return packs.pack_path(home, new)


def test_repair_removes_an_orphan_the_store_holds_after_a_dry_run(store):
    before = _named(store)
    orphans = [_copy_of_a_pack(store, n) for n in before]  # the corpus store: 2 packs
    assert len(orphans) == 2
    size = sum(p.stat().st_size for p in orphans)
    r = _run(store, "--full")
    assert r.returncode == 0, r.stderr
    assert "2 orphan packs" in r.stdout and "vault verify --repair" in " ".join(r.stdout.split())

    r = _run(store, "--repair", "--dry-run")
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert flat.count("would remove orphan pack ~/store/vault/packs/") == 2, r.stdout
    assert "vault repair: would remove 2 orphan packs" in flat and "(dry run: nothing removed)" in flat
    assert all(p.exists() for p in orphans)

    d = json.loads(_run(store, "--repair", "--json").stdout)
    assert d["ok"] and d["repair"]["removed"] == 2 and d["repair"]["removed_bytes"] == size
    assert d["repair"]["kept"] == 0 and not d["repair"]["dry_run"]
    assert sorted(o["path"] for o in d["repair"]["orphan_packs"]) == sorted(map(str, orphans))
    assert not any(p.exists() for p in orphans)
    assert _named(store) == before  # the manifest untouched
    d = json.loads(_run(store, "--full", "--json").stdout)
    assert d["ok"] and d["orphans"] == [] and d["problems"] == []


def test_an_orphan_holding_what_the_store_lacks_stays(store, tmp_path):
    """A store.db made new beside the vault (lost, or restored from before the packs):
    every pack is an orphan that a replay makes rows of: none may go."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    sqlite_store.connect(fresh).close()  # a new store, then the vault beside it
    shutil.copytree(store / "vault", fresh / "vault")
    n = len(packs.pack_names(fresh))
    assert n == 2
    d = json.loads(_run(fresh, "--repair", "--json").stdout)
    assert d["repair"]["removed"] == 0 and d["repair"]["kept"] == n, d["repair"]
    assert all("doctor --repair" in o["why"] for o in d["repair"]["orphan_packs"])
    assert len(packs.pack_names(fresh)) == n


def test_a_pack_without_a_record_is_left_in_place(store):
    junk = packs.vault_dir(store) / "packs" / "ab" / ("ab" + "0" * 62 + ".pack")
    junk.parent.mkdir(parents=True, exist_ok=True)
    junk.write_bytes(b"x" * 1234)
    d = json.loads(_run(store, "--repair", "--json").stdout)
    assert [(o["path"], o["removable"]) for o in d["repair"]["orphan_packs"]] == [(str(junk), False)]
    assert junk.exists()


def test_repair_waits_for_no_run_and_removes_nothing_while_one_holds_the_store(store):
    orphan = _copy_of_a_pack(store, _named(store)[0])
    with hold(store, 0):  # an ingest between its pack and its commit
        r = _run(store, "--repair")
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "holds the store" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert orphan.exists()
    r = _run(store, "--dry-run")
    assert r.returncode == 2 and "--dry-run goes with --repair" in r.stderr

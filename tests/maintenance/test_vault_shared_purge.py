"""A purge of one Kiro IDE session leaves no byte of it in the vault's copy of its
folder's shared ``sessions.json`` (``sinks.vault.shared``; side23 left the purged
session's title there until the folder's last session went): the index is written
again without it, its older versions pruned and swept out of the packs, a replay of
the packs does not bring them back, and a later version the IDE writes (still listing
the session) is captured without it while the tombstone stands. ``vault restore``
names the index it leaves alone on disk. SIGKILL trials at each step of the rewrite.

Fixture: ``tests/fixtures/kiro-ide`` (handmade), a second and third session added here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.maintenance.reparse import from_vault
from ctxkeep.maintenance.vault import vault_verify
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest, packs
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.sources.kiro_ide import shared_without

runner = CliRunner()

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KIRO_ROOT = ".config/Kiro/User/globalStorage/kiro.kiroagent"
KIRO_WS = f"{KIRO_ROOT}/workspace-sessions/L2hvbWUvZGV2L3Nob3A"
KEPT = "7e6d5c4b-3a29-4817-a6b5-c4d3e2f1a0b9"  # the fixture's session
GONE = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"  # the one purged
THIRD = "5f4e3d2c-1b0a-4987-8654-3210fedcba98"
TITLE = "Move the payroll export to the Quillfeather bucket"  # GONE's: must leave the vault
MTIME_NS = 1_764_493_290_123_456_789


def _cli(*args: str):
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The fixture's home with GONE beside KEPT, the index listing both (version 1),
    ingested; then the IDE adds THIRD to the index (version 2), ingested. Returns (user
    home, store, workspace folder)."""
    user = tmp_path / "user"
    shutil.copytree(FIXTURES / "kiro-ide" / "home", user)
    ws = user / KIRO_WS
    doc = json.loads((ws / f"{KEPT}.json").read_bytes())
    doc.update(sessionId=GONE, title=TITLE)
    for h in doc["history"]:  # (its own execution, of no log: KEPT's log stays KEPT's)
        if "executionId" in h:
            h["executionId"] = "exec-99"
    (ws / f"{GONE}.json").write_text(json.dumps(doc))
    index = json.loads((ws / "sessions.json").read_bytes())
    index.append(dict(index[0], sessionId=GONE, title=TITLE, dateCreated="1781700000000"))
    (ws / "sessions.json").write_text(json.dumps(index, indent=1) + "\n")
    for p in user.rglob("*"):
        if p.is_file():
            os.utime(p, ns=(MTIME_NS, MTIME_NS))
    store = tmp_path / "store"
    ctx = DiscoveryContext(home=user, env={})
    run_ingest(store, ctx=ctx, agents=["kiro-ide"])
    index.append(dict(index[0], sessionId=THIRD, title="Third one", dateCreated="1781800000000"))
    (ws / "sessions.json").write_text(json.dumps(index, indent=1) + "\n")
    os.utime(ws / "sessions.json", ns=(MTIME_NS + 10**9, MTIME_NS + 10**9))
    run_ingest(store, ctx=ctx, agents=["kiro-ide"])
    return user, store, ws


def _vault_bytes(store: Path) -> list[bytes]:
    """Every object of every pack file on disk (orphans too), and each pack's record."""
    out = []
    for name, path in packs.pack_names(store):
        got = packs.read_record(path)
        assert got is not None, path
        rec, objects = got
        out.append(json.dumps(rec).encode())
        with packs.ObjectReader(store) as r:
            out += [r.read(name, off, stored, raw, sha) for sha, off, stored, raw in objects]
    return out


def _index_gens(store: Path, ws: Path) -> list[tuple[int, list]]:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return [
            (g.gen, json.loads(manifest.gen_bytes(conn, store, g)))
            for g in manifest.generations_of(conn, str(ws / "sessions.json"))
        ]
    finally:
        conn.close()


def _assert_gone_from_the_vault(store: Path) -> None:
    held = _vault_bytes(store)
    assert held and not [b for b in held if TITLE.encode() in b or GONE.encode() in b]


def test_the_index_filter_keeps_its_layout():
    data = json.dumps([{"sessionId": "a", "title": "x"}, {"sessionId": "b", "title": "y"}], indent=1) + "\n"
    got = shared_without(data.encode(), {"b"})
    assert got.decode() == json.dumps([{"sessionId": "a", "title": "x"}], indent=1) + "\n"
    assert shared_without(b'[{"sessionId":"a"},{"sessionId":"b"}]', {"a"}) == b'[{"sessionId":"b"}]'
    assert shared_without(data.encode(), {"c"}) == data.encode()  # the bytes themselves
    assert shared_without(b"not json", {"a"}) == b"not json"


def test_a_purge_rewrites_the_shared_index_without_the_session(tmp_path, monkeypatch):
    user, store, ws = _setup(tmp_path)
    monkeypatch.setenv("HOME", str(user))
    idx = ws / "sessions.json"
    assert [g for g, _ in _index_gens(store, ws)] == [1, 2]
    assert any(TITLE.encode() in b for b in _vault_bytes(store))  # (held before the purge)
    dry = json.loads(_cli("purge", "--session", GONE, "--dry-run", "--json", "--home", str(store)).stdout)
    assert dry["removed"]["vault_shared"] == 1 and dry["removed"]["vault_files"] == 1
    out = _cli("purge", "--session", GONE, "--yes", "--home", str(store)).stdout
    assert "sessions.json) rewritten without it" in " ".join(out.split())
    # one generation, the newest without GONE; the older ones pruned and swept
    ((gen, newest),) = _index_gens(store, ws)
    assert gen == 3 and [x["sessionId"] for x in newest] == [KEPT, THIRD]
    _assert_gone_from_the_vault(store)
    assert vault_verify(store, full=True)["problems"] == []
    assert TITLE.encode() in idx.read_bytes()  # the agent's own file is never touched
    # the IDE writes the index again, GONE still in it: the new version leaves it out
    index = json.loads(idx.read_bytes())
    index.append(dict(index[0], sessionId="6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d", title="Fourth"))
    idx.write_text(json.dumps(index, indent=1) + "\n")
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}), agents=["kiro-ide"])
    gens = _index_gens(store, ws)
    assert [g for g, _ in gens] == [3, 4] and [x["title"] for x in gens[-1][1]][-1] == "Fourth"
    _assert_gone_from_the_vault(store)
    # a restore of KEPT leaves the index on disk alone, and says so
    (ws / f"{KEPT}.json").unlink()
    r = json.loads(_cli("vault", "restore", KEPT[:8], "--json", "--home", str(store)).stdout)
    assert [Path(f["to"]).name for f in r["files"]] == [f"{KEPT}.json"]
    assert r["left_shared"] == [str(idx)]
    (ws / f"{KEPT}.json").unlink()
    text = _cli("vault", "restore", KEPT[:8], "--home", str(store)).stdout
    assert "left as it is:" in text and "sessions.json" in text
    # with the folder gone, the restore writes the vault's index: without GONE
    shutil.rmtree(ws)
    _cli("vault", "restore", KEPT[:8], "--home", str(store))
    assert GONE not in idx.read_text() and json.loads(idx.read_bytes())[-1]["title"] == "Fourth"
    # a manifest rebuilt from the packs alone brings no pruned version back
    from_vault(store)
    assert [g for g, _ in _index_gens(store, ws)] == [3, 4]
    assert vault_verify(store, full=True)["problems"] == []


def test_a_purge_of_the_last_session_still_takes_the_index(tmp_path, monkeypatch):
    user, store, ws = _setup(tmp_path)
    monkeypatch.setenv("HOME", str(user))
    r = json.loads(_cli("purge", "--session", GONE, "--yes", "--json", "--home", str(store)).stdout)
    assert r["removed"]["vault_shared"] == 1
    r = json.loads(_cli("purge", "--session", KEPT, "--yes", "--json", "--home", str(store)).stdout)
    # (the session, the index and the session's execution log)
    assert r["removed"]["vault_shared"] == 0 and r["removed"]["vault_files"] == 3
    assert _index_gens(store, ws) == []


#: the rewrite's kill points (``CTXKEEP_KILL_AT``): the filtered version's pack written
#: (in the purge's transaction), the prune's cuts written (in it too), the purge
#: committed, its completion before the sweep
KILL_POINTS = ["purge:shared-captured", "vault-prune:cuts", "purge:sqlite", "purge:vault"]
BEFORE_COMMIT = {"purge:shared-captured", "vault-prune:cuts"}


@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_a_purge_killed_at_each_step_of_the_rewrite_then_run_again(tmp_path, monkeypatch, kill_at):
    """SIGKILL at each point, then the purge again (killed before its commit) or an
    ingest (the next writable command completes a committed purge): the vault reads back (an orphan pack
    of the kill allowed), the index holds KEPT and THIRD only, no byte of GONE in any
    pack on disk, and a manifest rebuilt from the packs agrees."""
    user, store, ws = _setup(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXKEEP_", "PREFECT_API"))}
    env.update(HOME=str(user), CTXKEEP_IDLE_SECONDS="0", CTXKEEP_KILL_AT=kill_at)
    argv = [sys.executable, "-m", "ctxkeep", "purge", "--session", GONE, "--yes", "--home", str(store)]
    p = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, (kill_at, p.returncode, p.stderr[-2000:])
    v = vault_verify(store, full=True)
    assert all("orphan pack" in x for x in v["problems"]), v["problems"]
    del env["CTXKEEP_KILL_AT"]
    if kill_at in BEFORE_COMMIT:  # rolled back: the purge again
        p = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    else:  # committed: the next writable command (an ingest) completes it
        p = subprocess.run(
            [*argv[:3], "ingest", "--home", str(store)], env=env, capture_output=True, timeout=120
        )
    assert p.returncode == 0, p.stderr[-2000:]
    conn = sqlite_store.connect(store, readonly=True)
    try:
        assert GONE in sqlite_store.tombstoned(conn)["session"]
    finally:
        conn.close()
    v = vault_verify(store, full=True)
    assert all("orphan pack" in x for x in v["problems"]), v["problems"]
    ((_, newest),) = _index_gens(store, ws)
    assert [x["sessionId"] for x in newest] == [KEPT, THIRD]
    _assert_gone_from_the_vault(store)
    from_vault(store)
    ((_, newest),) = _index_gens(store, ws)
    assert [x["sessionId"] for x in newest] == [KEPT, THIRD]

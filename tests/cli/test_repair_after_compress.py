"""``doctor --repair`` of a lost ``store.db`` after a compress gives back the store, the
vault's manifest and the quarantine as they were (newuser15 F5), through the CLI: a
torn line with a secret in a Claude Code file (quarantined), ``compress --force``, the
store deleted, ``doctor --repair``. Before: the compress backups became vault files of
their own (vault status counted them; deleted, ``vault restore --all-missing`` would
restore them), the quarantine held the torn line twice and ``secrets`` counted its
value twice, and the repaired row's raw sha256 was the hash of the redacted line."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app

runner = CliRunner()

FILES = (
    ".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl",
    ".claude/projects/-Users-chip-dev-ai-music/ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl",
    ".codex/sessions/2025/11/13/rollout-2025-11-13T18-21-11-019a802a-aab1-7c31-9831-d2510c7a74a2.jsonl",
)
TORN = b'{"broken json line, password=hunter2secretXYZ'


def _run(store: Path, *args: str) -> dict:
    r = runner.invoke(app, [*args, "--json", "--home", str(store)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, (args, r.output)
    return json.loads(r.stdout)


def _state(store: Path) -> dict:
    """What the user sees of the store, less what a rebuild may change: file sizes,
    times, row ids."""
    st = _run(store, "stats")
    for k in ("files", "last_ingest"):
        st.pop(k)
    q = _run(store, "quarantine")
    for row in q["lines"]:
        row.pop("id")
        row.pop("first_seen")
    v = _run(store, "vault", "status")
    for k in ("pack_bytes", "stored_bytes", "shared_bytes", "per_reference_bytes", "vault_dir"):
        v.pop(k)
    return {
        "stats": st,
        "quarantine": q,
        "secrets": _run(store, "secrets"),
        "vault": v,
        "sessions": _run(store, "sessions", "--all"),
    }


@pytest.fixture
def user(tmp_path, monkeypatch) -> Path:
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    user = tmp_path / "user"
    old = time.time() - 3 * 86400
    for rel in FILES:
        p = user / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CORPUS_HOME / rel, p)
        if rel == FILES[0]:  # a torn line, as a crash mid-write leaves it
            with open(p, "ab") as f:
                f.write(TORN + b"\n")
        os.utime(p, (old, old))
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    return user


def test_repair_after_compress_gives_back_the_same_store(tmp_path, user):
    store = tmp_path / "store"
    (store).mkdir()
    (store / "config.toml").write_text("[compress]\nmax_lines = 50\nmax_size_kb = 100\nkeep_messages = 10\n")
    _run(store, "ingest", "--no-prefect", "--no-progress")
    c = _run(store, "compress", "--force", "--no-prefect", "--no-progress")
    status = {Path(f["path"]).name: f["status"] for f in c["files"]}
    assert status[Path(FILES[0]).name] == "compressed", c["files"]  # the torn line kept (F2)
    assert c["compressed"] == 2 and c["refused"] == 0, [
        (f["path"], f["status"], f["reason"]) for f in c["files"]
    ]
    backups = sorted(user.rglob("*.jsonl.backup"))
    assert len(backups) == 2
    before = _state(store)
    # the quarantine names the raw line by its own hash (redacted in the store)
    (row,) = before["quarantine"]["lines"]
    assert row["raw_sha256"] == hashlib.sha256(TORN).hexdigest()
    assert before["secrets"]["quarantine"]["lines"] == 1

    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (store / name).unlink(missing_ok=True)
    r = runner.invoke(app, ["doctor", "--repair", "--home", str(store)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "compress backup" not in r.stdout  # the vault held every line of them
    after = _state(store)
    # the raw line's hash and length are not in the vault's redacted bytes: the
    # repaired row says the hash is unknown (null), never the redacted line's hash (it
    # was c061fa64…, the hash of `…password=[REDACTED:password]`); its length is of
    # the bytes the vault gave back (as entries' offsets in a redacted file: reparse)
    (arow,) = after["quarantine"]["lines"]
    assert arow.pop("raw_sha256") is None and row.pop("raw_sha256") is not None
    assert (arow.pop("length"), row.pop("length")) == (len(TORN) + 3, len(TORN))
    for k in before:
        assert after[k] == before[k], k

    # the user deletes the backups (as `secrets` tells once keys are rotated): nothing
    # is missing, nothing to restore
    for b in backups:
        b.unlink()
    v = _run(store, "vault", "status")
    assert v["missing"] == [] and v["at_risk"] == 0
    # a compress after the repair is not refused for the torn line it kept
    c = _run(store, "compress", "--force", "--no-prefect", "--no-progress", "--keep-messages", "5")
    assert {f["status"] for f in c["files"]} <= {"compressed", "skipped"}, c["files"]


def test_reparse_keeps_the_quarantine_rows_raw_hash_and_first_seen(tmp_path, user):
    """A reparse of a live store keeps what the vault's redacted bytes cannot give back
    (``sinks.sqlite.requarantine``): the raw line's hash, when it was first seen."""
    store = tmp_path / "store"
    _run(store, "ingest", "--no-prefect", "--no-progress")
    before = _run(store, "quarantine")["lines"]
    assert [r["raw_sha256"] for r in before] == [hashlib.sha256(TORN).hexdigest()]
    _run(store, "reparse")
    assert _run(store, "quarantine")["lines"] == before

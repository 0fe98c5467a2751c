"""Doctor's gaps of issue 11, each reproduced: a garbage ``analytics.duckdb`` is rebuilt
by the next ingest; a damaged page of ``store.db`` makes every command that reads it
(or writes) fail with the one damaged-store line; ``doctor --repair`` of a lost store
reloads the Parquet archive's ids and the compress backups' entries; a read-only open
moves a foreign WAL aside too."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess

import duckdb
import pytest

from conftest import CORPUS_HOME, ROOT
from ctxkeep.maintenance import compress, doctor
from ctxkeep.maintenance.retention import run_retention
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import parquet

CTXKEEP = str(ROOT / ".venv" / "bin" / "ctxkeep")
CLAUDE = ".claude/projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
CODEX = ".codex/sessions/2025/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl"
DAMAGED = "error: store.db is damaged ({}) - run 'ctxkeep doctor'"


def ro(home):
    return sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)


def cli(*args, home):
    env = dict(os.environ, HOME=str(CORPUS_HOME), CTXKEEP_IDLE_SECONDS="0", COLUMNS="200")
    return subprocess.run(
        [CTXKEEP, *map(str, args), "--home", str(home)], capture_output=True, text=True, env=env, timeout=600
    )


def test_garbage_analytics_is_rebuilt_by_the_next_ingest(store, capsys):
    n = ro(store).execute("SELECT count(*) FROM entries").fetchone()[0]
    (store / "analytics.duckdb").write_bytes(os.urandom(300_000))
    run_ingest(store, paths=[CORPUS_HOME / CLAUDE])  # nothing new: a no-op ingest
    assert "analytics.duckdb is damaged" in capsys.readouterr().err
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM entries").fetchall()[0][0] == n
    con.close()
    assert len(list(store.glob("analytics.duckdb.damaged-*"))) == 1  # kept, not deleted


def _damage_page(home, table: str, holding: str | None = None) -> tuple[int, int]:
    """Random bytes over one leaf page of ``table``'s b-tree: the middle one, or the one
    whose bytes hold ``holding`` (an entry id: a row a command must read); returns
    (offset, length) of the page."""
    c = sqlite3.connect(home / "store.db")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ps = c.execute("PRAGMA page_size").fetchone()[0]
    pages = [r[0] for r in c.execute("SELECT pageno FROM dbstat WHERE name=? AND pagetype='leaf'", (table,))]
    c.close()
    assert len(pages) > 4, table
    data = (home / "store.db").read_bytes()
    if holding is None:
        page = pages[len(pages) // 2]
    else:
        (page,) = [p for p in pages if holding.encode() in data[(p - 1) * ps : p * ps]]
    off = (page - 1) * ps
    with open(home / "store.db", "r+b") as f:
        f.seek(off)
        f.write(os.urandom(ps))
    return off, ps


COMMANDS = [
    ("stats",),
    ("search", "error"),  # the page of its first hit's entry is the damaged one
    # (not `sessions`: its titles come from DuckDB, and SQLite's first prompts are read
    # only for sessions DuckDB has no title for: in the corpus none has a user message)
    ("ingest", "--no-prefect", "--no-progress", "--path", "NEWFILE"),  # it has a file to store
    ("purge", "--session", "0d3a8e6f-290f-4105-a327-a2496e5e2a83", "--yes"),
    ("retention", "--no-prefect"),
    ("compress", "--no-prefect", "--force", "NEWFILE"),
    ("reindex", "--no-prefect"),
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_damaged_entries_page_is_one_line_and_exit_1(store, tmp_path, cmd):
    new = tmp_path / "new" / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    new.parent.mkdir()
    shutil.copy(CORPUS_HOME / CLAUDE, new)
    holding = None
    if cmd[0] == "search":  # a search reads the entries of its hits only
        hits = json.loads(cli(*cmd, "--json", home=store).stdout)["hits"]
        holding = hits[0]["entry_id"]
    off, ps = _damage_page(store, "entry_rows", holding)  # the table of the entries (v9)
    before = (store / "store.db").read_bytes()[off : off + ps]
    r = cli(*(str(new) if a == "NEWFILE" else a for a in cmd), home=store)
    assert "Traceback" not in r.stderr + r.stdout
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == DAMAGED.format(store / "store.db")
    # nothing written over the damaged page (a writable open still stamps page 1)
    assert (store / "store.db").read_bytes()[off : off + ps] == before


@pytest.mark.parametrize("vault_on", [False, True])
def test_repair_of_a_lost_store_reloads_backups_and_the_archive(tmp_path, monkeypatch, vault_on):
    """Vault off: the lines compress cut are only in the backups, which the repair
    reads. Vault on: the vault gives them back and the backups are not read (read,
    they became vault files of their own: newuser15 F5)."""
    monkeypatch.setenv("CTXKEEP_VAULT", "1" if vault_on else "0")
    user = tmp_path / "user"
    files = {}
    for rel in (CLAUDE, CODEX):
        p = user / rel
        p.parent.mkdir(parents=True)
        shutil.copy(CORPUS_HOME / rel, p)
        os.utime(p, (1e9, 1e9))
        files[rel] = p
    monkeypatch.setenv("HOME", str(user))
    home = tmp_path / "ctxkeep"
    run_ingest(home)
    all_ids = {r[0] for r in ro(home).execute("SELECT entry_id FROM entries")}
    # codex: compressed, then its removed entries go to Parquet; claude: compressed only
    compress.run_compress(home, paths=[files[CODEX]], keep_messages=3, force=True)
    run_retention(home, archive_after_days=0, delete_archives_after_days=10_000, backup_max_age_days=10_000)
    compress.run_compress(home, paths=[files[CLAUDE]], keep_messages=3, force=True)
    archived_claude = {r[0] for r in ro(home).execute("SELECT entry_id FROM entries WHERE status='archived'")}
    in_archive = set(parquet.read_archive(home)["entry_id"].to_list())
    assert archived_claude and in_archive and not archived_claude & in_archive
    # the store is lost (no store backup): garbage over it
    (home / "store.db").write_bytes(os.urandom((home / "store.db").stat().st_size))
    for s in ("store.db-wal", "store.db-shm"):
        (home / s).unlink(missing_ok=True)
    findings = doctor.check(home)
    rep = doctor.repair(home, findings)
    assert any("reloaded" in a and f"{len(in_archive):,} archived entry ids" in a for a in rep["actions"]), (
        rep
    )
    assert any("compress backup" in a for a in rep["actions"]) is not vault_on, rep
    c = ro(home)
    rows = dict(c.execute("SELECT entry_id, status FROM entries").fetchall())
    archived_table = {r[0] for r in c.execute("SELECT entry_id FROM archived")}
    c.close()
    # nothing lost: every entry is in the hot store or (only) in the archive
    assert all_ids <= set(rows) | in_archive
    assert not set(rows) & in_archive and archived_table == in_archive
    # what compress cut from the claude file is back, archived as before
    assert all(rows[e] == "archived" for e in archived_claude)
    assert [f.status for f in doctor.check(home) if f.status == "damaged"] == []


@pytest.mark.parametrize("cmd", [("stats",), ("search", "error"), ("vault", "verify"), ("sessions",)])
def test_a_store_killed_before_its_first_commit_is_no_store_yet(tmp_path, cmd):
    """A store.db holding no schema (a first ingest SIGKILLed between creating the file
    and committing its tables: the vault's kill trials met it) reads as "no store yet",
    exit 1, one line; it was a traceback of "no such table"."""
    home = tmp_path / "h"
    home.mkdir()
    sqlite3.connect(home / "store.db").execute("PRAGMA journal_mode=WAL").close()
    r = cli(*cmd, home=home)
    assert "Traceback" not in r.stderr + r.stdout
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: no store yet ({home / 'store.db'}) - run `ctxkeep ingest` first"
    )

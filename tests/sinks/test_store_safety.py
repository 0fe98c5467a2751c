"""Store identity and WAL safety (issue 11): a WAL left by another database is moved
aside and never applied; this store's own WAL of a killed writer is applied. Each case
runs the command as a user would (``.venv/bin/ctxkeep`` in a subprocess)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS_HOME, ROOT

CTXKEEP = str(ROOT / ".venv" / "bin" / "ctxkeep")

#: a writer that commits ``n`` transactions through ``connection.write`` and dies
#: without closing (SIGKILL-like ``os._exit``), leaving its WAL behind
_KILLED_WRITER = """
import os, sys
from pathlib import Path
from ctxkeep.sinks import sqlite as s
conn = s.connect(Path(sys.argv[1]))
conn.execute("PRAGMA wal_autocheckpoint=0")
for i in range(int(sys.argv[2])):
    with s.write(conn):
        conn.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (f"note{i}", "x" * 3000))
os._exit(0)
"""


def ro(db: Path) -> sqlite3.Connection:
    """Read ``db`` without touching it or its sidecars (immutable: the WAL is ignored)."""
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


def entry_ids(home: Path) -> set[str]:
    conn = sqlite3.connect(home / "store.db")
    try:
        return {r[0] for r in conn.execute("SELECT entry_id FROM entries")}
    finally:
        conn.close()


def killed_writer(home: Path, n: int = 3) -> Path:
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(home), str(n)], check=True, cwd=ROOT)
    wal = home / "store.db-wal"
    assert wal.exists() and wal.stat().st_size > 32
    return wal


def cli(*args, home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(CORPUS_HOME), CTXKEEP_IDLE_SECONDS="0", COLUMNS="200")
    return subprocess.run(
        [CTXKEEP, *map(str, args), "--home", str(home)], capture_output=True, text=True, env=env, timeout=600
    )


def test_foreign_wal_is_moved_aside_and_every_entry_stays(store, tmp_path):
    """The issue's case: another store's ``store.db-wal`` beside ``store.db`` (a smaller
    store: applied, it would shrink this one to its own size)."""
    before = entry_ids(store)
    size_before = (store / "store.db").stat().st_size
    assert len(before) > 1000
    other = tmp_path / "other"
    killed_writer(other, 5)
    for name in ("store.db-wal", "store.db-shm"):
        (store / name).unlink(missing_ok=True)
    shutil.copy(other / "store.db-wal", store / "store.db-wal")
    # applied, the WAL would replace page 1 and cut the database to the other's size
    conn = ro(other / "store.db")
    assert (
        conn.execute("PRAGMA user_version").fetchone()[0]
        != ro(store / "store.db").execute("PRAGMA user_version").fetchone()[0]
    )
    r = cli("ingest", "--no-prefect", "--no-progress", home=store)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    warn = [ln for ln in r.stderr.splitlines() if "store.db-wal belongs to another database" in ln]
    assert len(warn) == 1, r.stderr
    moved = list(store.glob("store.db-wal.foreign-*"))
    assert len(moved) == 1 and moved[0].stat().st_size == (other / "store.db-wal").stat().st_size
    assert entry_ids(store) >= before
    assert (store / "store.db").stat().st_size >= size_before
    conn = sqlite3.connect(store / "store.db")
    assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'note%'").fetchone()[0] == 0


def test_own_wal_of_a_killed_writer_is_applied(store_home):
    killed_writer(store_home, 4)
    r = cli("stats", "--json", home=store_home)
    assert r.returncode == 0, r.stderr
    conn = sqlite3.connect(store_home / "store.db")
    notes = conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'note%'").fetchone()[0]
    assert notes == 4
    assert not list(store_home.glob("*.foreign-*"))
    # a writable open checks the WAL too and keeps it
    killed_writer(store_home, 2)
    r = cli("ingest", "--no-prefect", "--no-progress", "--agent", "codex", home=store_home)
    assert r.returncode == 0, r.stderr
    assert not list(store_home.glob("*.foreign-*")) and "warning: store.db-wal" not in r.stderr


def test_identity_is_recorded(store_home):
    from ctxkeep.sinks import sqlite as s
    from ctxkeep.sinks.sqlite.store_safety import APPLICATION_ID, header_id

    conn = s.connect(store_home)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    conn.close()
    assert len(meta["store_id"]) == 32 and meta["created_at"].endswith("Z")
    c = ro(store_home / "store.db")
    assert c.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert c.execute("PRAGMA user_version").fetchone()[0] == header_id(meta["store_id"])
    assert (store_home / "store.id").read_text().split() == [meta["store_id"], meta["created_at"]]
    assert oct((store_home / "store.id").stat().st_mode & 0o777) == "0o600"
    # a second open keeps the identity
    conn = s.connect(store_home)
    assert conn.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0] == meta["store_id"]
    conn.close()


def test_live_wal_is_not_examined(store_home, tmp_path):
    """A WAL that a live connection holds is never moved, whatever it holds."""
    from ctxkeep.sinks import sqlite as s
    from ctxkeep.sinks.sqlite import store_safety

    conn = s.connect(store_home)
    with s.write(conn):
        conn.execute("INSERT INTO meta VALUES('k', 'v')")
    assert store_safety.live(store_home)
    assert store_safety.check_wal(store_home) is None
    conn.close()
    assert not store_safety.live(store_home)


@pytest.mark.parametrize("n", [1])
def test_wal_verdict_on_page_size_mismatch(store_home, tmp_path, n):
    from ctxkeep.sinks import sqlite as s
    from ctxkeep.sinks.sqlite.store_safety import wal_verdict

    s.connect(store_home).close()
    other = tmp_path / "o.db"
    c = sqlite3.connect(other)
    c.execute("PRAGMA page_size=8192")
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute("CREATE TABLE t(x)")
    c.execute("INSERT INTO t VALUES(1)")
    shutil.copy(str(other) + "-wal", store_home / "x-wal")
    c.close()
    assert wal_verdict(store_home / "store.db", store_home / "x-wal")[0] == "foreign"


def test_a_new_stores_identity_still_in_its_wal_is_own(tmp_path):
    """Two first ingests at once: the creator's schema and identity are still only in its
    WAL (nothing checkpointed) when the other opens. That WAL is the store's own, never
    moved aside (it was: 'belongs to another database', new-user trial)."""
    import sqlite3

    from ctxkeep.sinks.sqlite.store_safety import APPLICATION_ID, wal_verdict

    db = tmp_path / "store.db"
    c = sqlite3.connect(db)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute(f"PRAGMA application_id={APPLICATION_ID}")
    c.execute("CREATE TABLE t(x)")
    c.commit()
    with open(db, "rb") as f:
        assert f.read(72)[68:72] != APPLICATION_ID.to_bytes(4, "big")  # not in the file yet
    assert wal_verdict(db, tmp_path / "store.db-wal")[0] == "own"
    c.close()

"""The registry of store file names (``sinks.files``): the names are spelled there
only, and ``store_files`` gives the sizes of what exists."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from ctxkeep.sinks import files
from ctxkeep.sinks import sqlite as sqlite_store

PKG = Path(__file__).resolve().parents[2] / "ctxkeep"
#: modules allowed to spell a name: the registry, and config.py (CONFIG_FILE, re-exported
#: by files.py: config is below sinks)
ALLOWED = {"sinks/files.py", "config.py"}
#: spelled as a whole string; ``archive`` and ``prefect`` are common words (a dict key,
#: the ``prefect`` executable), so they count only as a path part (``home / "archive"``)
NAMES = {
    files.STORE_DB,
    files.ANALYTICS_DB,
    files.ANALYTICS_WAL,
    files.LOCK_FILE,
    files.CONFIG_FILE,
    *files.STORE_DB_SIDECARS,
}
DIRS = {files.ARCHIVE_DIR, files.PREFECT_DIR}
#: an agent's own file that has the name of one of ctxkeep's: (module, name)
AGENT_FILES = {("hooks/install.py", "config.toml")}  # Codex's $CODEX_HOME/config.toml


def test_file_names_are_spelled_only_in_the_registry():
    found = []
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG).as_posix()
        if rel in ALLOWED:
            continue
        for tok in tokenize.generate_tokens(io.StringIO(p.read_text()).readline):
            if tok.type != tokenize.STRING:
                continue
            name = tok.string.strip("\"'")
            before = tok.line[: tok.start[1]].rstrip()
            if (rel, name) in AGENT_FILES:
                continue
            if name in NAMES or (name in DIRS and before.endswith("/")):
                found.append(f"{rel}:{tok.start[0]} {tok.string}")
    assert found == []


def test_store_files_sizes(store_home):
    assert files.store_files(store_home) == {}
    sqlite_store.connect(store_home).close()
    (store_home / files.ANALYTICS_DB).write_bytes(b"x" * 10)
    part = store_home / files.ARCHIVE_DIR / "agent=a" / "month=2026-01"
    part.mkdir(parents=True)
    (part / "p1.parquet").write_bytes(b"y" * 7)
    (part / "p2.parquet").write_bytes(b"z" * 5)
    (store_home / files.LOCK_FILE).write_bytes(b"")  # not data: not listed
    got = files.store_files(store_home)
    want = {
        files.STORE_DB: (store_home / files.STORE_DB).stat().st_size,
        files.ANALYTICS_DB: 10,
        "archive/": 12,
    }
    for side in files.STORE_DB_SIDECARS:
        if (store_home / side).exists():
            want[side] = (store_home / side).stat().st_size
    assert got == want and want[files.STORE_DB] > 0
    assert set(files.STORE_FILES) == {
        "store.db",
        "store.db-wal",
        "store.db-shm",
        "store.db-journal",
        "analytics.duckdb",
        "analytics.duckdb.wal",
    }

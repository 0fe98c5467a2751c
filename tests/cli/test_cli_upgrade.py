"""A store upgrade shows its phases on stderr (``cli.upgrade``, fed by
``sinks.sqlite.migrations.phase``): a v9 store's first writable open (here
``ctxkeep ingest``) prints each phase of the v9 → v10 step in order, then how long it
took; a current store prints none; a failed upgrade stops the live line and says no
"upgraded"."""

from __future__ import annotations

import io
import logging
import re
import shutil
import sqlite3

from rich.console import Console
from typer.testing import CliRunner

from ctxkeep.cli import app, upgrade
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import ddl
from tests.sinks.v9_store import as_v9

PHASES = [
    "step 1/7: v10 project dirs and load stamps as ids, chunk titles as spans",
    "copying entries",
    "indexing entries",
    "copying chunks",
    "step 2/7: v11 the vault manifest",
    "step 3/7: v12 the coverage ledger",
    "step 4/7: v13 the vault's media",
    "step 5/7: v14 Claude Code usage keyed by message id",
    "step 6/7: v15 the rows documents' running state",
    "step 7/7: v16 the chunks' content ids by chunk id",
    "indexing the chunks' content ids",
    "committing the upgrade",
    "compacting the store (VACUUM)",
]


def _v9(corpus_store, tmp_path):
    home = tmp_path / "v9"
    shutil.copytree(corpus_store[0], home, ignore=shutil.ignore_patterns("*.lock"))
    c = sqlite3.connect(home / "store.db")
    as_v9(c)
    c.commit()
    c.close()
    return home


def _ingest(home, tmp_path, monkeypatch):
    empty = tmp_path / "empty-home"  # no session files: the run only opens the store
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(empty))
    return CliRunner().invoke(app, ["ingest", "--home", str(home), "--no-prefect"])


def test_an_upgrade_prints_its_phases_in_order_then_its_time(corpus_store, tmp_path, monkeypatch):
    home = _v9(corpus_store, tmp_path)
    r = _ingest(home, tmp_path, monkeypatch)
    assert r.exit_code == 0, r.output
    lines = [
        ln.removeprefix("upgrading the store: ")
        for ln in r.stderr.splitlines()
        if ln.startswith("upgrading the store: ")
    ]
    assert lines == PHASES
    assert re.search(r"^store upgraded in \d+ s$", r.stderr, re.M)
    conn = sqlite_store.connect(home, readonly=True)
    assert sqlite_store.schema_version(conn) == ddl.SCHEMA_VERSION == 16
    conn.close()
    again = _ingest(home, tmp_path, monkeypatch)  # current: nothing to show
    assert again.exit_code == 0 and "upgrad" not in again.stderr


def test_a_failed_upgrade_stops_the_live_line_and_says_no_upgraded(corpus_store, tmp_path, monkeypatch):
    home = _v9(corpus_store, tmp_path)
    buf = io.StringIO()
    handler = upgrade.install(Console(file=buf, force_terminal=True, width=100))
    # the step's last statement fails, after the live line started
    monkeypatch.setitem(ddl.INDEXES, "chunks_content", "CREATE INDEX chunks_content ON no_such_table(x)")
    try:
        try:
            sqlite_store.connect(home)
        except sqlite3.OperationalError as e:
            assert "no_such_table" in str(e)
        else:
            raise AssertionError("the upgrade did not fail")
        assert handler._status is None  # stopped: the error line is not drawn over
        assert "upgrading the store: copying chunks" in buf.getvalue()
        assert "store upgraded" not in buf.getvalue()
    finally:
        logging.getLogger("ctxkeep.upgrade").removeHandler(handler)

"""``report`` during a first ingest says an ingest is running and to try again when it
ends (newuser17 F13: "no usage stored yet ... `ctxkeep sources` shows where ctxkeep looks
for session files", a hint that the agents were not found). With the lock free, the
empty store's message stands."""

from __future__ import annotations

import html
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


def _store(home: Path, entries: int) -> None:
    home.mkdir(mode=0o700)
    c = sqlite3.connect(home / "store.db")
    c.execute("CREATE TABLE entries (id INTEGER)")
    c.executemany("INSERT INTO entries VALUES (?)", [(i,) for i in range(entries)])
    c.commit()
    c.close()


@pytest.mark.parametrize("entries", [0, 3], ids=["nothing-yet", "entries-no-duckdb-yet"])
def test_report_while_an_ingest_runs_says_so(tmp_path, entries):
    from ctxkeep.sinks.lock import StoreLock

    home = tmp_path / "h"
    _store(home, entries)
    lock = StoreLock(home).acquire(timeout=0)
    try:
        r = runner.invoke(app, ["report", "daily", "--home", str(home)])
    finally:
        lock.release()
    both = r.stdout + r.stderr
    assert r.exit_code == 0, both
    assert "an ingest is running" in both and "try again when it ends" in both, both
    assert "ctxkeep sources" not in both and "run `ctxkeep ingest`" not in both
    r = runner.invoke(app, ["report", "daily", "--home", str(home)])  # no ingest: as before
    assert "an ingest is running" not in r.stdout + r.stderr


def test_the_app_says_to_reload_when_it_ends(tmp_path):
    from ctxkeep.errors import NothingStored
    from ctxkeep.render.app_views import store_unavailable

    e = NothingStored("no usage stored yet: an ingest is running", where="x", hint="try again when it ends")
    text = store_unavailable(str(tmp_path), e).text
    assert "an ingest is running" in text and "Reload this page when it ends" in text
    assert "Run `ctxkeep ingest`" not in text


def test_the_apps_empty_page_names_the_store_and_the_command_that_fills_it(tmp_path, monkeypatch):
    """newuser24 F20: `ctxkeep ui --home DIR` on an empty store said to run a plain
    `ctxkeep ingest`, which fills the default store, not DIR."""
    from ctxkeep.errors import NothingStored
    from ctxkeep.render.app_views import store_unavailable

    other, default = tmp_path / "other store", tmp_path / "default"
    monkeypatch.setenv("CTXKEEP_HOME", str(default))
    e = NothingStored("no store yet", where="x")

    def shown(store) -> str:  # the page's words, as a person reads them
        return " ".join(html.unescape(re.sub(r"<[^>]+>", "", store_unavailable(str(store), e).text)).split())

    assert f"no store yet in {other}. Run ctxkeep ingest --home '{other}' (it finds" in shown(other)
    assert f"no store yet in {default}. Run ctxkeep ingest (it finds" in shown(default)

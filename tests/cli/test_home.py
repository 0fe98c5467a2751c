"""Where the store lives, and that it is never created inside a read-only tree."""

from __future__ import annotations

import os
import stat

import pytest

from ctxkeep.config import ensure_home, resolve_home
from ctxkeep.errors import StoreError
from ctxkeep.sinks import sqlite as sqlite_store


def test_home_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKEEP_HOME", str(tmp_path / "env"))
    assert resolve_home(tmp_path / "flag") == (tmp_path / "flag").resolve()
    assert resolve_home(None) == (tmp_path / "env").resolve()
    monkeypatch.delenv("CTXKEEP_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "h" / ".local" / "share"))
    assert resolve_home(None) == tmp_path / "h" / ".local" / "share" / "ctxkeep"


def test_store_files_are_user_only(tmp_path):
    home = tmp_path / "new" / "home"
    conn = sqlite_store.connect(home)
    conn.close()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "store.db").stat().st_mode) == 0o600


def test_read_only_tree_is_refused_even_for_root(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    try:
        with pytest.raises(StoreError) as e:
            ensure_home(ro / ".local" / "share" / "ctxkeep")
        assert "is read-only" in str(e.value) and "CTXKEEP_HOME" in str(e.value)
        assert not (ro / ".local").exists()
    finally:
        os.chmod(ro, 0o755)


def test_home_that_is_a_file_is_a_clear_error(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(StoreError) as e:
        ensure_home(f)
    assert str(e.value) == (
        f"cannot use {f} as the store: it is a file, not a directory - "
        "pass --home DIR (or CTXKEEP_HOME) naming a directory"
    )


def test_an_existing_read_only_store_is_named_as_such(tmp_path):
    """``ingest --home <a store made read-only>`` says the store is read-only, not that
    it cannot be created; reading it still works."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    home = tmp_path / "store"
    sqlite_store.connect(home).close()
    os.chmod(home, 0o555)
    try:
        r = CliRunner().invoke(app, ["ingest", "--home", str(home), "--agent", "aider"])
        assert r.exit_code == 1
        line = r.stderr.strip()
        assert line.startswith(f"error: the store at {home} is read-only: "), line
        assert f"chmod u+w {home}" in line and "--home DIR" in line and "cannot create" not in line
        assert "\n" not in line
        assert CliRunner().invoke(app, ["stats", "--home", str(home)]).exit_code == 0
    finally:
        os.chmod(home, 0o755)

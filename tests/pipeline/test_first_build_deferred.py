"""A small first ingest leaves DuckDB's first build to its first reader (issue 26: first
ingest of the corpus <= 1.0 s; ``engine.FIRST_BUILD_DEFER_BYTES``), and every reader of
DuckDB builds it before it reads: reports, ``sessions``, ``doctor``. A DuckDB file
deleted after its first build is still reported missing (a reader does not rebuild a
store of any size); a first ingest bigger than the bound syncs DuckDB in the run.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import uuid
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.errors import StoreError
from ctxkeep.pipeline import engine
from ctxkeep.service.ingest import IngestRequest, ingest
from ctxkeep.sinks import analytics_current
from ctxkeep.sinks.analytics_read import open_readonly
from session_lines import USAGE, claude_lines

START = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


def _session(tmp_path: Path, n: int) -> Path:
    """A Claude Code session file of ``n`` lines (every second one an assistant line
    with ``USAGE``)."""
    sid = str(uuid.uuid4())
    path = tmp_path / "user" / ".claude" / "projects" / "-tmp-first" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(claude_lines(sid, n, START)) + "\n")
    return path


def _first_ingest(tmp_path: Path, n: int = 10) -> tuple[Path, Path, dict]:
    home = tmp_path / "home"
    path = _session(tmp_path, n)
    out = ingest(home, IngestRequest(paths=(path,), prefect=False))
    return home, path, out.summary


def _sqlite_entries(home: Path) -> int:
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        return c.execute("SELECT count(*) FROM entries").fetchone()[0]


def _duck_entries(home: Path) -> int:
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        con.close()


def test_a_small_first_ingest_leaves_duckdb_to_its_first_report(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home, _path, summary = _first_ingest(tmp_path)
    assert summary["entries_new"] == 10
    assert "deferred" in summary["analytics"]
    assert not (home / "analytics.duckdb").exists()
    assert analytics_current.behind(home)  # never built: a reader builds it
    r = CliRunner().invoke(app, ["report", "daily", "--home", str(home), "--json", "-z", "UTC"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert sum(row["output_tokens"] for row in rows) == 5 * USAGE["output_tokens"]
    assert _duck_entries(home) == _sqlite_entries(home) == 10
    assert not analytics_current.behind(home)  # the marks recorded: current


def test_sessions_and_doctor_build_it_too(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home, _path, _ = _first_ingest(tmp_path)
    r = CliRunner().invoke(app, ["sessions", "--home", str(home), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["total"] == 1 and got["sessions"][0]["cost_usd"] is not None  # DuckDB's rows carry cost
    assert _duck_entries(home) == 10

    home2, _path2, _ = _first_ingest(tmp_path / "b")
    r = CliRunner().invoke(app, ["doctor", "--home", str(home2)])
    assert "analytics.duckdb: 10 entries" in r.stdout, r.stdout
    assert _duck_entries(home2) == 10


def test_a_hook_path_ingest_after_it_defers_as_well(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home, _path, _ = _first_ingest(tmp_path)
    other = _session(tmp_path, 4)
    s = engine.run_ingest(home, paths=[other], defer_analytics=None)
    assert s.entries_new == 4 and "deferred" in s.analytics
    assert not (home / "analytics.duckdb").exists()
    con, note = open_readonly(home)
    con.close()
    assert note is None and _duck_entries(home) == 14


def test_a_deleted_duckdb_is_still_reported_missing_not_rebuilt_by_a_reader(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home = tmp_path / "home"
    engine.run_ingest(home, paths=[_session(tmp_path, 10)])  # synced in the run
    (home / "analytics.duckdb").unlink()
    assert not analytics_current.behind(home)
    with pytest.raises(StoreError, match="missing"):
        open_readonly(home)
    # and an ingest rebuilds it in the run, whatever its size
    s = engine.run_ingest(home, paths=[_session(tmp_path, 2)], defer_analytics=None)
    assert "deferred" not in s.analytics and _duck_entries(home) == 12


def test_a_first_ingest_past_the_bound_syncs_in_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setattr(engine, "FIRST_BUILD_DEFER_BYTES", 1)
    home, _path, summary = _first_ingest(tmp_path)
    assert "deferred" not in summary["analytics"]
    assert _duck_entries(home) == 10

"""The maintenance commands through the CLI (Typer's CliRunner, in-process, no Prefect)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from conftest import ROOT, corpus
from ctxkeep.cli import app

SID = "0d3a8e6f-290f-4105-a327-a2496e5e2a83"
runner = CliRunner()


def n_entries(home: Path, where: str = "1", *args) -> int:
    conn = sqlite3.connect(home / "store.db")
    try:
        return conn.execute(f"SELECT count(*) FROM entries WHERE {where}", args).fetchone()[0]
    finally:
        conn.close()


class Out:
    """A CLI result whose ``output`` has its whitespace collapsed (Rich wraps lines)."""

    def __init__(self, r):
        self.exit_code = r.exit_code
        self.raw = r.output
        self.output = " ".join(r.output.split())


def run(*args, input=None):
    return Out(runner.invoke(app, [str(a) for a in args], input=input))


def test_purge_needs_exactly_one_scope(store):
    r = run("purge", "--home", store, "--yes")
    assert r.exit_code == 2 and "exactly one of --session ID, --project DIR or --all" in r.output
    r = run("purge", "--home", store, "--session", SID, "--project", "/x", "--yes")
    assert r.exit_code == 2 and "got --session, --project" in r.output
    r = run("purge", "--home", store, "--all", "--reingest", "--yes")
    assert r.exit_code == 2
    assert "Traceback" not in r.output


def test_purge_dry_run_json_changes_nothing(store):
    before = n_entries(store)
    r = run("purge", "--home", store, "--session", SID, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.raw)
    assert rep["removed"]["entries"] == 69 and rep["resolved"] == f"session {SID}"
    assert n_entries(store) == before


def test_purge_dry_run_says_the_agents_files_stay(store):
    """`source_files` counts the agent files the purged entries came from; purge
    removes ctxkeep's rows of them, never the files: the table says so (before: "source
    files 1", read as a file to be deleted)."""
    r = runner.invoke(
        app, ["purge", "--home", str(store), "--session", SID, "--dry-run"], env={"COLUMNS": "200"}
    )
    assert r.exit_code == 0, r.output
    rows = {" ".join(x.strip("│┃ ").split()) for x in r.output.splitlines()}
    assert "agent files it came from (left on disk) 1" in rows, r.output
    assert "source files" not in r.output


def test_purge_without_yes_is_refused_when_not_interactive(store):
    r = run("purge", "--home", store, "--session", SID)
    assert r.exit_code == 2  # wrong usage: a script must pass --yes
    assert "refusing to purge session" in r.output and "--yes" in r.output
    assert n_entries(store, "session_id=?", SID) == 69


def test_purge_asks_when_interactive(store, monkeypatch):
    import ctxkeep.cli.maintenance as m

    monkeypatch.setattr(m, "_interactive", lambda: True)
    r = run("purge", "--home", store, "--session", SID, input="n\n")
    assert r.exit_code == 1 and "would remove" in r.output and "cancelled" in r.output
    assert n_entries(store, "session_id=?", SID) == 69
    r = run("purge", "--home", store, "--session", SID, input="y\n")
    assert r.exit_code == 0, r.output
    assert f"purged session {SID}: 69 entries" in r.output
    assert n_entries(store, "session_id=?", SID) == 0


def test_purge_yes_json_and_project(store, tmp_path, monkeypatch):
    r = run("purge", "--home", store, "--session", SID, "--yes", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.raw)["removed"]["entries"] == 69
    # --project resolves a relative dir against the working directory
    monkeypatch.chdir("/")
    r = run("purge", "--home", store, "--project", "path/to/Demo", "--yes", "--json")
    rep = json.loads(r.raw)
    assert rep["project_dir"] == "/path/to/Demo" and rep["removed"]["entries"] == 438


def test_purge_all(store):
    r = run("purge", "--home", store, "--all", "--yes")
    assert r.exit_code == 0, r.output
    assert "wiped the store" in r.output
    assert not (store / "store.db").exists() and not (store / "analytics.duckdb").exists()


def test_purge_of_a_busy_store_is_one_line(store, monkeypatch):
    import ctxkeep.maintenance.purge as p
    from conftest import hold_lock_in_subprocess

    orig = p.run_purge
    # the CLI waits for the lock; make this call give up at once
    monkeypatch.setattr(p, "run_purge", lambda *a, **k: orig(*a, **{**k, "timeout": 0}))
    holder = hold_lock_in_subprocess(store)
    try:
        r = run("purge", "--home", store, "--session", SID, "--yes")
    finally:
        holder.communicate(b"\n", timeout=30)
    assert r.exit_code == 1
    assert "another ctxkeep maintenance run holds the store" in r.output and "Traceback" not in r.output


def test_retention_reindex_backfill_commands(store):
    conn = sqlite3.connect(store / "store.db")
    with conn:
        conn.execute("UPDATE entries SET status='archived' WHERE session_id=?", (SID,))
    conn.close()
    r = run("retention", "--home", store, "--no-prefect")  # by default they stay (F16)
    assert r.exit_code == 0, r.output
    assert "entries stay in the store (retention.archive_after_days is not set)" in r.output
    assert n_entries(store, "session_id=?", SID) == 69
    r = run("retention", "--home", store, "--dry-run", "--json", "--archive-after-days", "7")
    assert r.exit_code == 0, r.output
    assert json.loads(r.raw)["entries_to_archive"] == 69
    r = run("retention", "--home", store, "--no-prefect", "--archive-after-days", "7")
    assert r.exit_code == 0, r.output
    assert "archived 69 entries" in r.output
    assert n_entries(store, "session_id=?", SID) == 0
    r = run("reindex", "--home", store, "--no-prefect", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.raw)["chunks"] > 1000
    f = corpus(".claude/projects/-Users-dain-workspace-claude-code-log-sample/" + SID + ".jsonl")
    r = run("backfill", "--home", store, "--path", f, "--dry-run", "--json")
    assert json.loads(r.raw)["files"] == [str(f)]
    r = run("backfill", "--home", store, "--path", f, "--no-prefect", "--json")
    assert r.exit_code == 0, r.output
    # backfill re-reads the file, but archived entries stay in the archive
    assert json.loads(r.raw)["ingest"]["entries_new"] == 0 and json.loads(r.raw)["ingest"]["files_read"] == 1
    r = run("backfill", "--home", store, "--since", "last tuesday")
    assert r.exit_code == 2 and "cannot read the time 'last tuesday'" in r.output


def test_every_maintenance_command_is_documented():
    docs = (ROOT / "docs" / "maintenance.md").read_text() + (ROOT / "docs" / "schedules.md").read_text()
    for cmd in ("purge", "retention", "reindex", "backfill", "serve"):
        assert f"ctxkeep {cmd}" in docs, cmd


def test_unit_files_start_ctxkeep_serve():
    import configparser
    import plistlib
    import xml.etree.ElementTree as ET

    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(ROOT / "deploy" / "systemd" / "ctxkeep.service")
    assert unit["Service"]["ExecStart"] == "%h/.local/bin/ctxkeep serve"
    assert unit["Install"]["WantedBy"] == "default.target"
    plist = plistlib.loads((ROOT / "deploy" / "launchd" / "dev.ctxkeep.serve.plist").read_bytes())
    assert plist["ProgramArguments"] == ["__HOME__/.local/bin/ctxkeep", "serve"]
    assert plist["Label"] == "dev.ctxkeep.serve" and plist["RunAtLoad"] is True
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    task = ET.parse(ROOT / "deploy" / "windows" / "ctxkeep-serve.xml").getroot()
    assert task.find("t:Actions/t:Exec/t:Command", ns).text.endswith(r"\ctxkeep.exe")
    assert task.find("t:Actions/t:Exec/t:Arguments", ns).text == "serve"

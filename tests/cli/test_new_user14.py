"""Findings of session 14's new-user trial (/work/team/newuser14.md) marked for nuc:
each assertion failed before its fix."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


def test_sessions_all_with_limit_or_offset_is_a_usage_error(store):
    """`sessions --all --limit 3` printed all 38 sessions, rc 0 (F2)."""
    for extra in (["--limit", "3"], ["--offset", "5"]):
        r = runner.invoke(app, ["sessions", "--all", *extra, "--home", str(store)])
        assert r.exit_code == 2, r.output
        assert r.stderr.splitlines() == [f"error: --all and {extra[0]} exclude each other - give one"]
    assert runner.invoke(app, ["sessions", "--limit", "3", "--home", str(store)]).exit_code == 0


def test_retention_names_the_vault_setting_it_reads(store):
    """`retention --dry-run` printed "(no  keep_generations …)": Rich read "[vault]" as
    markup (F12)."""
    r = runner.invoke(app, ["retention", "--dry-run", "--home", str(store)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "vault: every generation kept (no [vault] keep_generations / generation_max_age_days)" in r.stdout
    assert "  keep_generations" not in r.stdout


def test_a_missing_file_is_named_as_missing(store, tmp_path, monkeypatch):
    """`restore home/…db` from another folder said "not a usable store backup: missing or
    empty", `compress --restore home/….jsonl` "no backup to restore" (F13)."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["restore", "home/store-x.db", "--home", str(store)])
    assert r.exit_code == 1 and r.stderr.startswith(
        f"error: no such file ({tmp_path / 'home/store-x.db'}) - give the backup's path"
    ), r.stderr
    r = runner.invoke(app, ["compress", "--restore", "home/x.jsonl", "--home", str(store)])
    assert r.exit_code == 1 and r.stderr.startswith(
        f"error: no such file ({tmp_path / 'home/x.jsonl'}) - give the session file's path"
    ), r.stderr


def test_doctor_counts_one_session_and_one_file_in_the_singular():
    """ "SQLite lost 1,312 entries of 1 sessions (1 files)" (F9)."""
    from ctxkeep.maintenance.doctor import _n

    assert (_n(1, "session"), _n(2, "file"), _n(1, "entry", "entries")) == ("1 session", "2 files", "1 entry")


def test_search_says_when_project_names_no_stored_project(store, tmp_path, monkeypatch):
    """`search error --project dbos-transact-golang` from a folder where that relative
    path is no stored project: a bare "no matches", rc 0 (F3/F12)."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["search", "error", "--project", "dbos-transact-golang", "--home", str(store)])
    assert r.exit_code == 0 and r.stdout.strip() == "no matches", r.output
    flat = " ".join(r.stderr.split())
    assert f"note: no stored session's project is {tmp_path / 'dbos-transact-golang'} or below it" in flat
    # a stored project: its hits and no note
    proj = json.loads(runner.invoke(app, ["search", "error", "--home", str(store), "--json"]).stdout)["hits"][
        0
    ]
    r = runner.invoke(app, ["search", "error", "--project", proj["project_dir"], "--home", str(store)])
    assert (
        r.exit_code == 0
        and "no stored session's project" not in r.stderr
        and r.stdout.strip() != "no matches"
    )


def test_vault_restore_all_missing_has_a_dry_run(home_copy, tmp_path):
    """`vault restore --all-missing --dry-run` was "No such option" (F5): it names what
    would be written and writes nothing."""
    from tests.conftest import ingest

    store = tmp_path / "store"
    ingest(home_copy, store, "claude-code")
    gone = home_copy / ".claude/projects/-Users-dain-workspace-claude-code-log-sample"
    gone = gone / "0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl"
    before = gone.read_bytes()
    gone.unlink()
    env = {"HOME": str(home_copy), "COLUMNS": "300"}
    args = ["vault", "restore", "--all-missing", "--home", str(store)]
    r = runner.invoke(app, [*args, "--dry-run", "--json"], env=env)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["dry_run"] is True and [(f["to"], f["exists"]) for f in rep["files"]] == [(str(gone), False)]
    assert not gone.exists()
    r = runner.invoke(app, [*args, "--dry-run"], env=env)
    assert r.stdout.splitlines()[-1] == "dry run: nothing written" and not gone.exists()
    r = runner.invoke(app, args, env=env)
    assert r.exit_code == 0 and gone.read_bytes() == before


def test_tables_take_one_style(store):
    """Heavy boxes (`reparse --dry-run`, `purge --dry-run`) beside light rules (`stats`,
    `sessions`): one style now, a rule under the header (F14)."""
    for args in (["reparse", "--dry-run"], ["purge", "--session", "0d3a8e6f", "--dry-run"], ["stats"]):
        r = runner.invoke(app, [*args, "--home", str(store)], env={"COLUMNS": "200"})
        assert r.exit_code == 0, r.output
        assert not set("┏┃┡│└┗━") & set(r.stdout), (args, r.stdout[:400])
        assert any(set(x.strip()) == {"─"} for x in r.stdout.splitlines()), args

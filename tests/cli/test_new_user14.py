"""Findings of session 14's new-user trial (/work/team/newuser14.md) marked for nuc:
each assertion failed before its fix."""

from __future__ import annotations

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

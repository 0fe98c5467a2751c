"""``ctxkeep serve``'s line, help and docs name every deployment it registers
(newuser19 F9: they said ingest, compress, retention; serve also runs the store backup
daily and, with ``[purge]`` rules, the purge policies)."""

from __future__ import annotations

from ctxkeep.flows.serve import policy_schedules, schedules
from ctxkeep.service.maintenance import ServeRequest


def test_the_line_names_the_backup_and_the_purge_policies(tmp_path):
    req = ServeRequest.parse()
    assert req.every(tmp_path) == (
        "ingest every 15 min, compress every 60 min, retention every 24 h, backup every 24 h"
    )
    (tmp_path / "config.toml").write_text('[purge]\nprojects = ["~/clients/acme"]\nevery_hours = 12\n')
    assert req.every(tmp_path).endswith(", backup every 24 h, purge policies every 12 h")
    # the line says what serve registers: one phrase per deployment
    names = [s.name for s in schedules() + policy_schedules(tmp_path)]
    assert names == [
        "ctxkeep-ingest",
        "ctxkeep-compress",
        "ctxkeep-retention",
        "ctxkeep-backup",
        "ctxkeep-purge-policy",
    ]


def test_the_help_and_the_docs_name_them(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from ctxkeep.cli import app

    r = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert "ingest, compress, retention, backup" in " ".join(r.stdout.split()), r.stdout
    doc = (Path(__file__).resolve().parents[2] / "docs" / "schedules.md").read_text()
    assert "`backup/ctxkeep-backup`" in doc and "`purge-policy/ctxkeep-purge-policy`" in doc


def test_serve_says_at_once_that_it_starts_prefect(tmp_path, monkeypatch):
    """`ctxkeep serve` printed nothing until Prefect's server answered (>100 s under
    load: newuser19 F8). Its first line now comes before Prefect is imported or started
    (here the flows' serve is a stub that only reports what came before it)."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app
    from ctxkeep.flows import serve as serve_mod

    order = []

    def fake_serve(home, *, host, port, on_ready, scheds, run):
        order.append("prefect")
        on_ready(f"http://{host}:{port}/api")

    monkeypatch.setattr(serve_mod, "serve", fake_serve)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    r = CliRunner().invoke(
        app, ["serve", "--home", str(tmp_path / "h"), "--port", "4319"], env={"COLUMNS": "200"}
    )
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert (
        lines[0] == "ctxkeep serve: starting Prefect's server on 127.0.0.1:4319 (20-30 s, longer under load)…"
    )
    assert lines[1].startswith("ctxkeep serve: store ") and order == ["prefect"]
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4555/api")
    r = CliRunner().invoke(app, ["serve", "--home", str(tmp_path / "h")], env={"COLUMNS": "200"})
    assert r.stderr.splitlines()[0].startswith(
        "ctxkeep serve: connecting to the Prefect server at http://127.0.0.1:4555/api"
    ), r.stderr

"""``ctxkeep serve --work-pool`` without a server: what fails before any Prefect server
starts (one line each), and the names and commands of flows/team.py. The run across
three machines is tests/flows/test_team.py."""

from __future__ import annotations

import datetime as dt

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app


def _serve(*args, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return CliRunner().invoke(app, ["serve", *map(str, args)])


def test_deploy_only_needs_a_team_server(store_home, monkeypatch):
    r = _serve("--work-pool", "team", "--deploy-only", "--home", store_home, monkeypatch=monkeypatch)
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [
        "error: --deploy-only needs --work-pool and PREFECT_API_URL (the team server)"
    ]


def test_a_lake_that_cannot_be_written_stops_serve_before_a_server_starts(store_home, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    r = _serve(
        "--work-pool", "team", "--lake", blocker / "lake", "--home", store_home, monkeypatch=monkeypatch
    )
    assert r.exit_code == 1
    (line,) = r.stderr.splitlines()
    assert line.startswith("error: ") and str(blocker) in line
    assert not (store_home / "prefect" / "server.log").exists()  # no server was started


def test_a_machine_name_that_cannot_name_a_partition_stops_serve(store_home, monkeypatch):
    (store_home / "config.toml").write_text('machine = "lab/box"\n', encoding="utf-8")
    r = _serve("--work-pool", "team", "--home", store_home, monkeypatch=monkeypatch)
    assert r.exit_code == 1
    (line,) = r.stderr.splitlines()
    assert "'lab/box'" in line and "machine" in line
    assert not (store_home / "prefect" / "server.log").exists()


def test_names_and_the_worker_command():
    from ctxkeep.flows import team

    assert team.deployment_name("ingest", "laptop") == "ingest-laptop"
    cmd = team.worker_command("team", "laptop")
    assert cmd[-10:] == [
        "worker",
        "start",
        "--pool",
        "team",
        "--work-queue",
        "laptop",
        "--type",
        "process",
        "--name",
        "ctxkeep-laptop",
    ]
    s = team.export_schedule("/mnt/lake", 30)
    assert (s.entrypoint, s.interval, s.parameters) == (
        "ctxkeep.flows.export:export_flow",
        dt.timedelta(minutes=30),
        {"dest": "/mnt/lake"},
    )


@pytest.mark.slow
def test_the_export_deployment_carries_its_lake(tmp_path):
    """serve's deployments with ``--lake``: the export flow with ``home`` and ``dest``."""
    from ctxkeep.flows import serve, team

    deps = serve.build_deployments(tmp_path, [*serve.schedules(), team.export_schedule("/mnt/lake")])
    by_name = {d.name: d for d in deps}
    assert by_name["ctxkeep-export"].parameters == {"home": str(tmp_path), "dest": "/mnt/lake"}
    assert by_name["ctxkeep-export"].entrypoint == "ctxkeep.flows.export.export_flow"
    assert by_name["ctxkeep-ingest"].parameters == {"home": str(tmp_path)}

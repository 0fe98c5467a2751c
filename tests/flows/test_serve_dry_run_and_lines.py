"""newuser19 F8, second half (the lead's decision): `ctxkeep serve --dry-run` lists each
deployment, its schedule and its next run times without Prefect (the only way to see
them was to start a server: 100 s under load), and serve prints one line per
scheduled run as it ends (``flows.serve_lines``; the whole path through a real server:
``tests/flows/test_serve.py``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys

import pytest

#: runs `serve --dry-run` in a fresh interpreter and fails if Prefect got imported
_NO_PREFECT = """
import sys
from typer.testing import CliRunner
from ctxkeep.cli import app
r = CliRunner().invoke(app, ["serve", "--dry-run", *sys.argv[1:]])
sys.stdout.write(r.stdout)
mods = sorted(m for m in sys.modules if m == "prefect" or m.startswith("prefect."))
assert not mods, mods[:5]
sys.exit(r.exit_code)
"""


def _dry(home, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    e.update(env or {}, COLUMNS="200", CTXKEEP_IDLE_SECONDS="0")
    return subprocess.run(
        [sys.executable, "-c", _NO_PREFECT, *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=e,
        timeout=180,
    )


def test_dry_run_lists_the_deployments_and_next_runs_without_prefect(tmp_path):
    home = tmp_path / "store"
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    r = _dry(home, "--json", "--ingest-minutes", "5", "--lake", str(tmp_path / "lake"))
    assert r.returncode == 0, r.stderr[-2000:]
    plan = json.loads(r.stdout)
    got = {d["deployment"]: (d["every_seconds"], d["every"]) for d in plan["deployments"]}
    assert got == {
        "ingest/ctxkeep-ingest": (300, "5 min"),
        "compress/ctxkeep-compress": (3600, "1 h"),
        "retention/ctxkeep-retention": (86400, "24 h"),
        "backup/ctxkeep-backup": (86400, "24 h"),
        "export/ctxkeep-export": (3600, "1 h"),
    }
    assert plan["api"] == "http://127.0.0.1:4200/api" and plan["starts_server"] is True
    ing = plan["deployments"][0]
    assert ing["parameters"] == {"home": str(home)}
    times = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in ing["next_runs"]]
    assert before <= times[0] <= before + dt.timedelta(seconds=60)  # the first at the start
    assert [b - a for a, b in zip(times, times[1:], strict=False)] == [dt.timedelta(minutes=5)] * 2
    assert plan["deployments"][-1]["parameters"]["dest"] == str(tmp_path / "lake")
    assert not home.exists()  # a dry run writes nothing, not even the home


def test_dry_run_text_and_the_purge_policy_from_config(tmp_path):
    home = tmp_path / "store"
    home.mkdir()
    (home / "config.toml").write_text("[purge]\nevery_hours = 12\nolder_than_days = 400\n")
    r = _dry(home, env={"PREFECT_API_URL": "http://127.0.0.1:4999/api"})
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    lines = r.stdout.splitlines()
    assert "Prefect API http://127.0.0.1:4999/api:" in lines[0] and "started by serve" not in lines[0]
    rows = [x.split(":")[0].strip() for x in lines[1:-1]]
    assert rows == [
        "ingest/ctxkeep-ingest",
        "compress/ctxkeep-compress",
        "retention/ctxkeep-retention",
        "backup/ctxkeep-backup",
        "purge-policy/ctxkeep-purge-policy",
    ], r.stdout
    assert "every 12 h; next " in lines[5] and lines[1].count(":") >= 4
    assert lines[-1] == "(the first runs when serve starts; nothing was started)"


def test_json_without_dry_run_is_refused():
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    r = CliRunner().invoke(app, ["serve", "--json"])
    assert r.exit_code == 2 and "--json goes with --dry-run" in r.output


def test_a_run_prints_its_line_only_under_serve(monkeypatch, capsys):
    from ctxkeep.flows import serve_lines

    @serve_lines.announced("ingest")
    def fake(home: str) -> dict:
        return {"entries_new": 1234, "files_read": 3}

    monkeypatch.delenv(serve_lines.ENV, raising=False)
    assert fake("h") == {"entries_new": 1234, "files_read": 3}
    assert capsys.readouterr().err == ""  # `ctxkeep ingest`, a test: nothing
    monkeypatch.setenv(serve_lines.ENV, "1")
    fake(home="h")
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"ctxkeep serve: ingest \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, \d+\.\d s: ok, "
        r"1,234 new entries from 3 files read\n",
        err,
    ), err

    @serve_lines.announced("backup")
    def broken(home: str) -> dict:
        raise OSError("No space left on device\nmore")

    with pytest.raises(OSError):
        broken("h")
    assert capsys.readouterr().err.endswith(": failed: OSError: No space left on device\n")


def test_every_scheduled_flow_prints_its_line():
    """Each flow serve schedules is wrapped (its signature kept for Prefect's
    parameters), and its report reads in words."""
    import inspect

    from ctxkeep.flows import serve as serve_mod
    from ctxkeep.flows import serve_lines

    scheds = [*serve_mod.schedules(), serve_mod.export_schedule("/l")]
    scheds.append(
        serve_mod.Schedule(
            "ctxkeep-purge-policy", "ctxkeep.flows.maintenance:purge_policy_flow", dt.timedelta(hours=1)
        )
    )
    for s in scheds:
        fl = serve_mod.load_flow(s.entrypoint)
        assert hasattr(fl.fn, "__wrapped__"), s.entrypoint
        assert "home" in inspect.signature(fl.fn).parameters
    d = serve_lines.describe
    assert d("compress", {"compressed": 1, "refused": 2}) == "1 file compressed, 2 refused"
    assert (
        d("retention", {"archived": {"entries": 5}, "backups_removed": 1})
        == "5 entries archived, 1 old backup removed"
    )
    assert d("purge-policy", {"totals": {"entries": 0}}) == "0 entries purged"
    assert d("backup", {"path": "/s/backups/b.db", "bytes": 2048}) == "/s/backups/b.db (2,048 bytes)"

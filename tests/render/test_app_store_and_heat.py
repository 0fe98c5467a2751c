"""newuser18 F9, F11: the app's Store tab says of a purged project's file what `vault
status` says (purged on purpose, not "1 files at risk"), and the Overview's heatmap has
all 7 days and 24 hours on its axes (it held only those with data)."""

from __future__ import annotations

import os
import time

import polars as pl

from ctxkeep.maintenance.purge_named import purge_named
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.render import app_views
from ctxkeep.service.vault import VaultStatusRequest, vault_status
from ctxkeep.sources.contract import DiscoveryContext
from tests.maintenance.test_scrub_vault import _line

SID = "33333333-1d4f-4b6e-9a3c-0f1e2d3c4b5a"


def test_the_heatmap_has_every_weekday_and_hour():
    heat = pl.DataFrame({"weekday": ["Mon", "Fri"], "hour": [3, 17], "responses": [2, 5]})
    spec = app_views.activity_heatmap(heat, "UTC").to_dict()
    assert spec["encoding"]["x"]["scale"]["domain"] == list(range(24))
    assert spec["encoding"]["y"]["scale"]["domain"] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def test_a_purged_projects_file_is_not_called_at_risk(tmp_path, monkeypatch):
    user = tmp_path / "user"
    p = user / ".claude" / "projects" / "-tmp-client" / f"{SID}.jsonl"
    p.parent.mkdir(parents=True)
    p.write_bytes(
        _line(1, "user", "plan for the client", sid=SID, cwd="/tmp/client")
        + _line(2, "assistant", "ok", sid=SID, cwd="/tmp/client")
    )
    os.utime(p, (time.time() - 3600, time.time() - 3600))
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}))
    purge_named(store, PurgeRequest("project", project_dir="/tmp/client"))
    v = vault_status(VaultStatusRequest(home=store, user_home=user))
    assert v.at_risk == 1 and [x.purged for a in v.agents for x in a.at_risk] == ["project /tmp/client"]
    words = app_views.at_risk_words(v)
    assert words.startswith("no file at risk; 1 file of what you purged"), words
    assert "files at risk" not in words


def test_a_purge_run_has_its_real_start_and_seconds_and_empty_cells_show_a_dash(tmp_path, monkeypatch):
    """newuser24 F23: a purge's run row was written after the work with a fresh
    started_at (finished_at 0.2 ms later), seconds None, and the app showed ``None``."""
    from ctxkeep.service import runs as svc_runs
    from ctxkeep.sinks.sqlite import intents
    from ctxkeep.timeutil import parse_utc

    user = tmp_path / "user"
    p = user / ".claude" / "projects" / "-tmp-client" / f"{SID}.jsonl"
    p.parent.mkdir(parents=True)
    p.write_bytes(
        _line(1, "user", "plan", sid=SID, cwd="/tmp/client")
        + _line(2, "assistant", "ok", sid=SID, cwd="/tmp/client")
    )
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}))
    real_begin = intents.begin

    def slow_begin(*a, **k):  # the purge's work after its intent takes 0.3 s
        out = real_begin(*a, **k)
        time.sleep(0.3)
        return out

    monkeypatch.setattr(intents, "begin", slow_begin)
    purge_named(store, PurgeRequest("project", project_dir="/tmp/client"))
    (run,) = [r for r in svc_runs.recent_runs(svc_runs.RunsRequest(home=store)).runs if r.flow == "purge"]
    took = (parse_utc(run.finished_at) - parse_utc(run.started_at)).total_seconds()
    assert took >= 0.3 and run.seconds is not None and abs(run.seconds - took) < 0.05
    (cells,) = app_views.run_cells([run])
    assert run.bytes is None and cells["bytes"] == "-" and cells["seconds"] == round(run.seconds, 1)
    assert "None" not in str(cells)

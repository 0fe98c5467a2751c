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

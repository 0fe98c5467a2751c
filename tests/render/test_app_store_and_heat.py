"""newuser18 F9, F11: the app's Store tab says of a purged project's file what `vault
status` says (purged on purpose, not "1 files at risk"), and the Overview's heatmap has
all 7 days and 24 hours on its axes (it held only those with data)."""

from __future__ import annotations

import json
import os
import time

import polars as pl

from ctxkeep.maintenance.purge_named import purge_named
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.render import app_views
from ctxkeep.service.vault import VaultStatusRequest, vault_status
from ctxkeep.sources.contract import DiscoveryContext

SID = "33333333-1d4f-4b6e-9a3c-0f1e2d3c4b5a"


def test_the_heatmap_has_every_weekday_and_hour():
    heat = pl.DataFrame({"weekday": ["Mon", "Fri"], "hour": [3, 17], "responses": [2, 5]})
    spec = app_views.activity_heatmap(heat, "UTC").to_dict()
    assert spec["encoding"]["x"]["scale"]["domain"] == list(range(24))
    assert spec["encoding"]["y"]["scale"]["domain"] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def _line(n: int, kind: str) -> bytes:
    rec: dict = {
        "type": kind,
        "sessionId": SID,
        "uuid": f"33333333-0000-4000-8000-{n:012d}",
        "parentUuid": f"33333333-0000-4000-8000-{n - 1:012d}" if n > 1 else None,
        "timestamp": f"2025-06-01T10:00:{n:02d}.000Z",
        "cwd": "/tmp/client",
        "version": "2.0.1",
        "message": {"role": "user", "content": "plan for the client"}
        if kind == "user"
        else {
            "id": f"msg_{n}",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [{"type": "text", "text": "ok"}],
        },
    }
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def test_a_purged_projects_file_is_not_called_at_risk(tmp_path, monkeypatch):
    user = tmp_path / "user"
    p = user / ".claude" / "projects" / "-tmp-client" / f"{SID}.jsonl"
    p.parent.mkdir(parents=True)
    p.write_bytes(_line(1, "user") + _line(2, "assistant"))
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

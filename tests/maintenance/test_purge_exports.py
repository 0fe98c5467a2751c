"""newuser18 F15: a purge names the exports written from the store that still hold the
purged data (an HTML/Markdown site's pages, a Parquet lake's partitions), with the
command that refreshes each, in its dry run and in its report: before, it named only
the store backups, and the exported pages kept the client's text."""

from __future__ import annotations

import os
import time

from ctxkeep.maintenance.purge_named import purge_named
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.render.site import ExportRequest, export
from ctxkeep.service.export import ExportParquetRequest, export_parquet
from ctxkeep.sources.contract import DiscoveryContext
from tests.maintenance.test_scrub_vault import _line

SIDS = {
    "/tmp/acme": "11111111-1d4f-4b6e-9a3c-0f1e2d3c4b5a",
    "/tmp/other": "22222222-1d4f-4b6e-9a3c-0f1e2d3c4b5a",
}


def _session(sid: str, cwd: str, month: str) -> bytes:
    return _line(1, "user", f"acme secret plan {sid[:4]}", sid=sid, cwd=cwd, day=f"2025-{month}-01") + _line(
        2, "assistant", "noted", sid=sid, cwd=cwd, day=f"2025-{month}-01"
    )


def test_a_purge_names_the_site_pages_and_lake_partitions_that_hold_it(tmp_path, monkeypatch):
    user = tmp_path / "user"
    for (cwd, sid), month in zip(SIDS.items(), ("05", "06"), strict=True):
        p = user / ".claude" / "projects" / cwd.replace("/", "-") / f"{sid}.jsonl"
        p.parent.mkdir(parents=True)
        p.write_bytes(_session(sid, cwd, month))
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}))
    site, lake = tmp_path / "site", tmp_path / "lake"
    export(ExportRequest(home=store, dest=site, fmt="html"))
    export_parquet(store, ExportParquetRequest(dest=str(lake), with_text=True))
    req = PurgeRequest("project", project_dir="/tmp/acme")

    preview = purge_named(store, req, dry_run=True)
    got = {(x["kind"], x["dest"], x["holds"], x["unit"]) for x in preview["exports"]}
    # one page (the acme session's), and the lake's 2025-05 claude-code partition of the entries and
    # the sessions (no usage: these replies carry none)
    assert got == {("html", str(site), 1, "page"), ("parquet", str(lake), 2, "partition")}, preview["exports"]
    assert f"ctxkeep export html {site}" in preview["exports_note"]

    done = purge_named(store, req)
    assert {(x["kind"], x["holds"]) for x in done["exports"]} == {("html", 1), ("parquet", 2)}
    assert "acme secret plan" in "".join(p.read_text() for p in site.glob("*.html"))  # the export as it was

    # refreshed: nothing left to name
    export(ExportRequest(home=store, dest=site, fmt="html"))
    export_parquet(store, ExportParquetRequest(dest=str(lake), with_text=True))
    assert "1111" not in "".join(p.read_text() for p in site.glob("*.html"))
    other = purge_named(store, PurgeRequest("project", project_dir="/tmp/other"), dry_run=True)
    assert {(x["kind"], x["holds"]) for x in other["exports"]} == {("html", 1), ("parquet", 2)}
    again = purge_named(store, req, dry_run=True)
    assert again["exports"] == [] and not again.get("exports_note")


def test_a_session_ingested_after_the_lake_export_is_not_said_to_be_in_it(tmp_path, monkeypatch):
    """newuser21 M2: a project ingested after `export parquet` fell in a partition the
    lake held (same agent, same month) and the purge said the lake "still holds this
    data", though the lake held none of its rows."""
    user = tmp_path / "user"

    def put(cwd: str, sid: str) -> None:
        p = user / ".claude" / "projects" / cwd.replace("/", "-") / f"{sid}.jsonl"
        p.parent.mkdir(parents=True)
        p.write_bytes(_session(sid, cwd, "05"))
        os.utime(p, (time.time() - 3600, time.time() - 3600))

    put("/tmp/acme", SIDS["/tmp/acme"])
    monkeypatch.setenv("HOME", str(user))
    store, lake = tmp_path / "store", tmp_path / "lake"
    ctx = DiscoveryContext(home=user, env={})
    run_ingest(store, ctx=ctx)
    export_parquet(store, ExportParquetRequest(dest=str(lake), with_text=True))
    put("/tmp/other", SIDS["/tmp/other"])  # same agent and month, after the export
    run_ingest(store, ctx=ctx)

    late = purge_named(store, PurgeRequest("project", project_dir="/tmp/other"), dry_run=True)
    assert late["exports"] == [], late["exports"]
    held = purge_named(store, PurgeRequest("project", project_dir="/tmp/acme"), dry_run=True)
    assert {(x["kind"], x["holds"]) for x in held["exports"]} == {("parquet", 2)}, held["exports"]

"""The exports written from a store that still hold what a purge removes (newuser18
F15): a purge changes the store, never a copy written from it, so it names them, as it
names the store backups (``purge.backups_holding``), with the command that refreshes
each (a whole export of a site removes the pages of sessions no longer stored; an
export to a lake rewrites or removes the partitions whose rows changed).

- Parquet lakes: the partitions ``lake_exports`` records (per destination, table,
  agent and month, ``sinks.lake_marks``) of the agents and months of the purged
  entries (``coalesce(strftime(ts, '%Y-%m'), lake.NO_MONTH)``, the lake's partition key)
  whose files hold a purged session's rows (their ``session_id`` column read; newuser21
  M2: a session ingested after the export fell in a partition the lake held and was
  named though the lake held none of it). A partition whose files cannot be read here
  (an object store, a file gone, no ``session_id`` column) is named: it may hold them;
- HTML/Markdown sites: the destinations ``runs`` records (flow ``export-site``, detail
  ``{"dest", "format"}``, written by ``service.export.record_site``) whose marker
  (``sinks.site_names.MARKER``) still lists a page of a purged session
  (``sinks.site_names.page_name``).

Computed before the purge (the entries are needed), read-only."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.lake import NO_MONTH
from ctxkeep.sinks.site_names import FORMATS, MARKER, page_name
from ctxkeep.sinks.sqlite import delete as delete_store
from ctxkeep.sinks.sqlite import lake_marks
from ctxkeep.sinks.sqlite.runs import run_details

#: ``runs.flow`` of an HTML/Markdown export (``service.export.record_site``)
SITE_FLOW = "export-site"


def _purged(conn: sqlite3.Connection, requests: list[PurgeRequest]) -> tuple[set, set]:
    """``({(agent, month)}, {(agent, session_id)})`` of the entries ``requests`` select."""
    pairs: set[tuple[str, str]] = set()
    sessions: set[tuple[str, str]] = set()
    for r in requests:
        p, s = delete_store.scope_partitions(conn, r.scope, None if r.scope == "all" else r.value, NO_MONTH)
        pairs |= p
        sessions |= s
    return pairs, sessions


def _lake_holds(files: list[str], sids: set[str]) -> bool:
    """Whether the local Parquet ``files`` of one partition hold a row of a session in
    ``sids`` (their ``session_id`` column); True when that cannot be told here (a file
    not on this file system or unreadable, a table without ``session_id``): the caller
    names the partition as one that may hold them."""
    import pyarrow.parquet as pq

    for f in files:
        if "://" in f:  # an object store: not read from here (no network in a purge's check)
            return True
        try:
            pf = pq.ParquetFile(f)
            if "session_id" not in pf.schema_arrow.names:
                return True
            col = pf.read(columns=["session_id"]).column("session_id")
        except (OSError, ValueError):
            return True
        if not sids.isdisjoint(col.unique().to_pylist()):
            return True
    return False


def exports_holding(home: Path, requests: list[PurgeRequest]) -> list[dict]:
    """``[{"kind": "parquet" | "html" | "markdown", "dest", "holds": n, "unit":
    "partition" | "page", "refresh": the command}]`` of the exports that hold rows of
    ``requests``, sorted by dest; [] without a store or when none does."""
    home = Path(home)
    if not (home / STORE_DB).exists():
        return []
    conn = sqlite_store.connect(home, readonly=True)
    try:
        pairs, sessions = _purged(conn, requests)
        if not pairs:
            return []
        out: list[dict] = []
        lake: dict[str, int] = defaultdict(int)
        for dest, agent, month, files in lake_marks.partitions(conn):
            if (agent, month) in pairs and _lake_holds(files, {s for a, s in sessions if a == agent}):
                lake[dest] += 1
        for dest, n in lake.items():
            out.append(
                {
                    "kind": "parquet",
                    "dest": dest,
                    "holds": n,
                    "unit": "partition",
                    "refresh": f"ctxkeep export parquet {dest}",
                }
            )
        sites = {
            (str(d["dest"]), str(d["format"]))
            for d in run_details(conn, SITE_FLOW)
            if "dest" in d and "format" in d
        }
        for dest, fmt in sites:
            ext = FORMATS.get(fmt)
            try:
                marked = set(json.loads((Path(dest) / MARKER).read_text(encoding="utf-8"))["pages"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if ext is None:
                continue
            n = sum(
                page_name(a, s, ext) in marked and (Path(dest) / page_name(a, s, ext)).is_file()
                for a, s in sessions
            )
            if n:
                out.append(
                    {
                        "kind": fmt,
                        "dest": dest,
                        "holds": n,
                        "unit": "page",
                        "refresh": f"ctxkeep export {fmt} {dest}",
                    }
                )
        return sorted(out, key=lambda x: (x["dest"], x["kind"]))
    finally:
        conn.close()

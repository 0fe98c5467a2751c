"""The exports written from a store that still hold what a purge removes (newuser18
F15): a purge changes the store, never a copy written from it, so it names them, as it
names the store backups (``purge.backups_holding``), with the command that refreshes
each (a whole export of a site removes the pages of sessions no longer stored; an
export to a lake rewrites or removes the partitions whose rows changed).

- Parquet lakes: the partitions ``lake_exports`` records (per destination, table,
  agent and month, ``sinks.lake_marks``) of the agents and months of the purged
  entries (``coalesce(strftime(ts, '%Y-%m'), lake.NO_MONTH)``, the lake's partition key);
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

#: ``runs.flow`` of an HTML/Markdown export (``service.export.record_site``)
SITE_FLOW = "export-site"


def _purged(conn: sqlite3.Connection, requests: list[PurgeRequest]) -> tuple[set, set]:
    """``({(agent, month)}, {(agent, session_id)})`` of the entries ``requests`` select."""
    pairs: set[tuple[str, str]] = set()
    sessions: set[tuple[str, str]] = set()
    delete_store.prepare(conn)
    for r in requests:
        if r.scope == "all":
            sel = "SELECT agent, ts, session_id FROM entries"
        else:
            delete_store.select_scope(conn, r.scope, r.value)
            sel = (
                "SELECT e.agent, e.ts, e.session_id FROM temp._p_entries p JOIN entry_rows e "
                "ON e.entry_id = p.entry_id"
            )
        for agent, month, sid in conn.execute(
            f"SELECT DISTINCT agent, coalesce(strftime('%Y-%m', ts), ?), session_id FROM ({sel})", (NO_MONTH,)
        ):
            pairs.add((agent, month))
            sessions.add((agent, sid))
        if r.scope != "all":
            delete_store.drop_selection(conn)
    return pairs, sessions


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
        try:
            rows = conn.execute("SELECT dest, agent, month FROM lake_exports").fetchall()
        except sqlite3.OperationalError:
            rows = []
        for dest, agent, month in rows:
            if (agent, month) in pairs:
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
        sites: set[tuple[str, str]] = set()
        for (detail,) in conn.execute("SELECT detail FROM runs WHERE flow = ?", (SITE_FLOW,)):
            try:
                d = json.loads(detail or "{}")
                sites.add((str(d["dest"]), str(d["format"])))
            except (ValueError, KeyError, TypeError):
                continue
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

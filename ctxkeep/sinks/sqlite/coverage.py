"""The coverage ledger (table ``coverage``, schema v12): per session file and agent
version, the records its reader saw, parsed into entries, quarantined, and the record
types it did not understand, with the parser version that read it.

Rows are written with the batch they describe (``load.load_batch``, same
transaction as the entries and the watermark), so the ledger is as crash-consistent
as the store. A tally with ``reset`` (a read from the file's first byte: a new file, a
rewritten document, a changed parser) replaces the file's rows; otherwise it adds to
them. ``ledger`` sums the rows per agent, agent version and parser version.

Columns: ``agent``, ``path``, ``agent_version`` (``""``: the records name none or the
source does not report it), ``parser_version``, ``records``, ``parsed`` (records the
parser understood), ``entries``, ``quarantined``, ``unknown`` (JSON
``{type: [count, redacted sample line]}``), ``updated_at`` (ISO-8601 UTC).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from ctxkeep.sources.coverage import UNKNOWN_TYPES_MAX, Tally
from ctxkeep.transforms.drift import version_key


def store(conn: sqlite3.Connection, items: Iterable[tuple[str, str, int, Tally]], stamp: str) -> None:
    """Add ``(agent, path, parser_version, tally)`` items to the ledger in the
    caller's transaction (in order: a ``reset`` tally first deletes the file's rows)."""
    for agent, path, pv, tally in items:
        if tally is None:
            continue
        if tally.reset:
            conn.execute("DELETE FROM coverage WHERE path = ?", (path,))
        for version, t in tally.versions.items():
            row = conn.execute(
                "SELECT records, parsed, entries, quarantined, unknown, parser_version FROM coverage "
                "WHERE path = ? AND agent_version = ?",
                (path, version),
            ).fetchone()
            if row is None or row[5] != pv:
                rec, parsed, ent, quar, unk = t.records, t.parsed, t.entries, t.quarantined, dict(t.unknown)
            else:
                unk = json.loads(row[4] or "{}")
                for k, (n, sample) in t.unknown.items():
                    if k in unk:
                        unk[k][0] += n
                    elif len(unk) < UNKNOWN_TYPES_MAX:
                        unk[k] = [n, sample]
                rec, parsed, ent, quar = (
                    row[0] + t.records,
                    row[1] + t.parsed,
                    row[2] + t.entries,
                    row[3] + t.quarantined,
                )
            conn.execute(
                "INSERT OR REPLACE INTO coverage(agent, path, agent_version, parser_version, records, parsed, "
                "entries, quarantined, unknown, updated_at) VALUES(?,?,?,?,?,?,?,?,?,?)",
                (
                    agent,
                    path,
                    version,
                    pv,
                    rec,
                    parsed,
                    ent,
                    quar,
                    json.dumps(unk, ensure_ascii=False),
                    stamp,
                ),
            )


def coverage_ledger(conn: sqlite3.Connection, agents: Iterable[str] | None = None) -> list[dict]:
    """The ledger summed per (agent, agent version, parser version), sorted by agent
    then version: dicts ``{"agent", "agent_version", "parser_version", "files" (the
    files whose newest records are of this version: each file counted once),
    "records", "parsed", "entries", "quarantined", "parse_rate" (parsed / records,
    None for no records), "unknown": {type: {"count", "sample"}}, "updated_at"}``.
    An empty list for a store without the table (older than schema v12)."""
    want = set(agents) if agents else None
    try:
        rows = conn.execute(
            "SELECT agent, agent_version, parser_version, path, records, parsed, entries, quarantined, "
            "unknown, updated_at FROM coverage ORDER BY agent, agent_version, parser_version, path"
        ).fetchall()
    except sqlite3.OperationalError:
        return []

    # a file is counted once, in the row of the newest version it holds (a file holding
    # records of two versions, e.g. a session resumed after an upgrade, is not two
    # files); records that name no version ("") count only where nothing else does
    def newer(v: str) -> tuple:
        return (v != "", version_key(v))

    newest: dict[str, str] = {}
    for agent, version, _pv, path, *_ in rows:
        if (want is None or agent in want) and (path not in newest or newer(version) > newer(newest[path])):
            newest[path] = version
    out: dict[tuple, dict] = {}
    for agent, version, pv, path, rec, parsed, ent, quar, unk, at in rows:
        if want is not None and agent not in want:
            continue
        r = out.get((agent, version, pv))
        if r is None:
            r = out[(agent, version, pv)] = {
                "agent": agent,
                "agent_version": version,
                "parser_version": pv,
                "files": 0,
                "records": 0,
                "parsed": 0,
                "entries": 0,
                "quarantined": 0,
                "parse_rate": None,
                "unknown": {},
                "updated_at": at,
            }
        r["files"] += newest[path] == version
        r["records"] += rec or 0
        r["parsed"] += parsed or 0
        r["entries"] += ent or 0
        r["quarantined"] += quar or 0
        r["updated_at"] = max(r["updated_at"] or "", at or "")
        for k, (n, sample) in json.loads(unk or "{}").items():
            u = r["unknown"].setdefault(k, {"count": 0, "sample": sample})
            u["count"] += n
    for r in out.values():
        r["parse_rate"] = round(r["parsed"] / r["records"], 4) if r["records"] else None
        r["unknown"] = dict(sorted(r["unknown"].items(), key=lambda kv: (-kv[1]["count"], kv[0])))
    return sorted(
        out.values(), key=lambda r: (r["agent"], version_key(r["agent_version"]), r["parser_version"])
    )


def forget(conn: sqlite3.Connection, paths: Iterable[str]) -> int:
    """Delete the ledger rows of ``paths`` (files a purge removed wholly: their path and
    counts must not outlive their data, newuser18 F5) in the caller's transaction.
    Returns the rows deleted (0 for a store without the table)."""
    n = 0
    try:
        for path in paths:
            n += conn.execute("DELETE FROM coverage WHERE path = ?", (path,)).rowcount
    except sqlite3.OperationalError:  # older than schema v12: no ledger
        return 0
    return n

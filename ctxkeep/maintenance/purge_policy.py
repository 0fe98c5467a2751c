"""Scheduled purge policies: the ``[purge]`` rules of ``config.toml`` as purges.

The rules (``config.PurgeConfig``; ``cfg.purge`` is None without the section):

- ``projects``: directories never to keep (a client's repository): each is a project
  purge (``purge_request.parse_purge_request``, so a too broad dir is refused; also
  through symlinks, ``purge_request.project_spellings``). It runs on every policy run,
  even when the store holds nothing there yet: its tombstone keeps later sessions out;
- ``agents``: agents whose sessions are never kept: each session of the agent in the
  store is a session purge (sessions the agent writes later go at the next run);
- ``older_than_days``: sessions whose newest entry time (``ts``; for a session whose
  entries have none, when it was ingested; a session's sub-agents count with it) is
  older than this many days (24 h periods before now, UTC) are purged.

A session is named by its root (``coalesce(parent_session_id, session_id)``): a
purge of a session removes its sub-agents too. ``plan_policy`` lists what the rules
would remove now (``ctxkeep purge --policy --dry-run``); ``run_policy`` purges it in one
run (``purge.run_purges``: one lock, one intent per scope, one scrub and DuckDB rebuild)
and records it in ``runs`` as flow ``purge-policy`` with what each rule removed (counts
only: the record does not name what it purged). ``flows.maintenance.purge_policy_flow``
runs it from ``serve`` every ``every_hours`` (24) when the section has a rule.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import TypeGuard

from ctxkeep import config as cfgmod
from ctxkeep.maintenance import purge
from ctxkeep.maintenance.purge_request import PurgeRequest, parse_purge_request, project_spellings
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.sqlite import lookup
from ctxkeep.timeutil import format_utc, utc_now

#: the counts a policy report sums per rule (``purge.preview`` keys)
COUNTS = ("entries", "sessions", "contents", "usage", "quarantine", "text_bytes", "token_estimate")


def has_rules(pc: cfgmod.PurgeConfig | None) -> TypeGuard[cfgmod.PurgeConfig]:
    """True when ``[purge]`` names at least one rule (a project, an agent or an age)."""
    return bool(pc and (pc.projects or pc.agents or pc.older_than_days))


def requests(
    conn, pc: cfgmod.PurgeConfig, *, now: dt.datetime | None = None
) -> list[tuple[str, PurgeRequest]]:
    """``(rule, request)`` pairs the rules make against the store on ``conn`` (read-only
    is enough), each scope once, in rule order: ``project <dir>`` rules, then ``agent
    <name>``, then ``older than <n> days``. Raises UsageError for a project dir that is
    too broad (the filesystem root, the home dir)."""
    out: list[tuple[str, PurgeRequest]] = []
    seen: set[tuple[str, str]] = set()

    def add(rule: str, req: PurgeRequest) -> None:
        key = (req.scope, req.value)
        if key not in seen:
            seen.add(key)
            out.append((rule, req))

    for d in pc.projects:
        req = parse_purge_request(scope="project", project_dir=d, confirm=True, cwd=os.getcwd())
        for r in project_spellings(conn, req):
            add(f"project {d}", r)
    for agent in pc.agents:
        for sid in lookup.root_sessions_of_agent(conn, agent):
            add(f"agent {agent}", PurgeRequest("session", session_id=sid))
    if pc.older_than_days:
        cutoff = (now or utc_now()) - dt.timedelta(days=pc.older_than_days)
        for sid in lookup.root_sessions_before(conn, format_utc(cutoff)):
            add(f"older than {pc.older_than_days} days", PurgeRequest("session", session_id=sid))
    return out


def plan_policy(home: Path, *, now: dt.datetime | None = None, pc: cfgmod.PurgeConfig | None = None) -> dict:
    """What the ``[purge]`` rules would remove now, changing nothing (read-only).

    Returns ``{"rules": {"projects", "agents", "older_than_days", "every_hours"} or
    None, "scopes": [{"rule", "scope", "resolved", "removed": purge.preview counts}],
    "per_rule": {rule: summed counts (``COUNTS``) and "scopes"}, "totals": summed
    counts}``. Without rules or without a store: no scopes."""
    home = Path(home)
    pc = pc if pc is not None else cfgmod.load_config(home).purge
    report: dict = {
        "rules": None
        if pc is None
        else {
            "projects": list(pc.projects),
            "agents": list(pc.agents),
            "older_than_days": pc.older_than_days,
            "every_hours": pc.every_hours,
        },
        "scopes": [],
        "per_rule": {},
        "totals": dict.fromkeys(COUNTS, 0),
    }
    if pc is None or not has_rules(pc) or not (home / STORE_DB).exists():
        return report
    conn = sqlite_store.connect(home, readonly=True)
    try:
        for rule, req in requests(conn, pc, now=now):
            counts = purge.preview(conn, req)
            report["scopes"].append(
                {
                    "rule": rule,
                    "scope": req.scope,
                    "resolved": req.describe(),
                    "removed": counts,
                    "request": req,
                }
            )
    finally:
        conn.close()
    _sum(report)
    return report


def _sum(report: dict) -> None:
    per: dict[str, dict] = {}
    for s in report["scopes"]:
        r = per.setdefault(s["rule"], {**dict.fromkeys(COUNTS, 0), "scopes": 0})
        r["scopes"] += 1
        for k in COUNTS:
            r[k] += s["removed"].get(k, 0)
            report["totals"][k] += s["removed"].get(k, 0)
    report["per_rule"] = per


def public(report: dict) -> dict:
    """``report`` JSON-ready (without the request objects)."""
    return {**report, "scopes": [{k: v for k, v in s.items() if k != "request"} for s in report["scopes"]]}


def run_policy(
    home: Path, *, dry_run: bool = False, now: dt.datetime | None = None, timeout: float = -1
) -> dict:
    """Apply the ``[purge]`` rules: purge every scope ``plan_policy`` lists
    (``purge.run_purges``; tombstones keep the data out of later ingests) and record the
    run as flow ``purge-policy`` (``runs.detail``: the rules and, per rule, the scopes
    and counts removed; never the session ids or paths). ``dry_run``: the plan only.
    Returns ``public(plan)`` with ``dry_run``, the counts actually removed per scope and
    ``seconds``. Raises StoreBusy when the store lock is not free within ``timeout``,
    UsageError for a too broad project dir."""
    t0 = time.perf_counter()
    home = Path(home)
    plan = plan_policy(home, now=now)
    if dry_run or not plan["scopes"]:
        return {**public(plan), "dry_run": dry_run, "seconds": round(time.perf_counter() - t0, 3)}
    with sqlite_store.recorded_run(home, "purge-policy", t0=t0) as run:
        done = purge.run_purges(home, [s["request"] for s in plan["scopes"]], timeout=timeout)
        for s, d in zip(plan["scopes"], done, strict=True):
            s["removed"] = d["removed"]
        plan["totals"] = dict.fromkeys(COUNTS, 0)
        _sum(plan)
        run.summary = {
            "rules": plan["rules"],
            "per_rule": plan["per_rule"],
            "totals": plan["totals"],
            "entries_new": 0,
            "files": sum(s["removed"].get("source_files", 0) for s in plan["scopes"]),
        }
    return {**public(plan), "dry_run": False, "seconds": run.seconds}

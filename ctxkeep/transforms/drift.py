"""Format drift, told from the coverage ledger (``sinks.sqlite.coverage``; pure
functions of its rows): what an
ingest says when an agent's records stop parsing as they did, and what ``doctor``
reports from the ledger alone.

An alert is a dict ``{"agent", "agent_version", "kind", "message", "parse_rate",
"previous_rate", "unknown": [type, ...]}`` with ``kind``:

- ``new_version_unknown_types``: an agent version the ledger did not hold before this
  run, whose records include types the parser does not understand;
- ``new_unknown_types``: a known version whose records now include types not seen
  before (a format change within a version);
- ``parse_rate_dropped``: the share of this run's records of a known version (one
  its records named) that parsed is ``DROP`` or more below the share stored before
  (at least ``MIN_RECORDS`` records read), or, in the ledger, below the agent's
  previous version's. Records of no known version failing is no drift of a format:
  a file in an agent's folder that is not in its format at all (garbage) is counted
  as unreadable by the ingest (``pipeline.writer.unreadable_files``), not here;
  nor are bad lines (torn, not a JSON object, over the line cap): quarantined and
  counted as such, no record of the version (``sources.coverage.Tally.bad_line``).

Rates are fractions (0..1).
"""

from __future__ import annotations

import re

#: a parse rate this much lower (fraction of records) is a drop
DROP = 0.05
#: records a run must read of a version before its rate is compared
MIN_RECORDS = 5


def version_key(v: str) -> tuple:
    """Sort key of a version string: numeric parts as numbers (``2.0.9`` < ``2.0.10``)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.\-+]", v or ""))


def _fmt_types(types: dict) -> str:
    """``"a (3), b (1)"`` from ``{type: count}``, the most frequent first, at most 5."""
    items = sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))
    more = f", +{len(items) - 5} more" if len(items) > 5 else ""
    return ", ".join(f"{k} ({n:,})" for k, n in items[:5]) + more


def _label(agent: str, version: str) -> str:
    return f"{agent} {version}" if version else f"{agent} (version not recorded)"


def _prior(before: list[dict]) -> tuple[dict[tuple[str, str], dict], dict[str, set]]:
    """The ledger before the run summed per (agent, version), and per agent the record
    types not understood in any of its versions (an agent absent: never read)."""
    prior: dict[tuple[str, str], dict] = {}
    agents: dict[str, set] = {}
    for r in before:
        acc = prior.setdefault(
            (r["agent"], r["agent_version"]), {"records": 0, "parsed": 0, "unknown": set()}
        )
        acc["records"] += r["records"]
        acc["parsed"] += r["parsed"]
        acc["unknown"] |= set(r["unknown"])
        if r["records"]:
            agents.setdefault(r["agent"], set()).update(r["unknown"])
    return prior, agents


def run_alerts(before: list[dict], run: dict) -> list[dict]:
    """The alerts of one ingest: ``before`` is ``coverage_ledger`` as it stood before
    the run, ``run`` the run's own tallies (``writer.empty_totals()["coverage"]``:
    ``{(agent, version): VersionTally}``). Sorted by agent and version. Drift is a
    change against what the store read before: an agent it never read raises none
    (its types not understood are ``run_not_understood``), and a new version of a
    known agent only for types none of the agent's versions held."""
    prior, agents = _prior(before)
    out = []
    for (agent, version), t in sorted(run.items(), key=lambda kv: (kv[0][0], version_key(kv[0][1]))):
        if not t.records or agent not in agents:
            continue
        rate = t.parsed / t.records
        unknown = {k: v[0] for k, v in t.unknown.items()}
        p = prior.get((agent, version))
        base = {
            "agent": agent,
            "agent_version": version,
            "parse_rate": round(rate, 4),
            "unknown": sorted(unknown),
        }
        if p is None or not p["records"]:
            new = {k: n for k, n in unknown.items() if k not in agents[agent]}
            if new:
                out.append(
                    dict(
                        base,
                        unknown=sorted(new),
                        kind="new_version_unknown_types",
                        previous_rate=None,
                        message=f"{_label(agent, version)}: a version not read before, with record types "
                        f"ctxkeep does not understand: {_fmt_types(new)}",
                    )
                )
            continue
        prev = p["parsed"] / p["records"]
        new = {k: n for k, n in unknown.items() if k not in p["unknown"]}
        if new:
            out.append(
                dict(
                    base,
                    kind="new_unknown_types",
                    previous_rate=round(prev, 4),
                    message=f"{_label(agent, version)}: record types not met before: {_fmt_types(new)}",
                )
            )
        elif version and t.records >= MIN_RECORDS and rate < prev - DROP:
            out.append(
                dict(
                    base,
                    kind="parse_rate_dropped",
                    previous_rate=round(prev, 4),
                    message=f"{_label(agent, version)}: {rate:.1%} of {t.records:,} records parsed in this run, "
                    f"{prev:.1%} before",
                )
            )
    return out


def run_not_understood(before: list[dict], run: dict) -> list[dict]:
    """The record types not understood of the agents the store had never read (their
    first ingest: no drift, nothing to compare with), ``[{"agent", "agent_version",
    "unknown": {type: records}}]`` sorted by agent and version; the records are kept
    as ``meta`` entries."""
    _, agents = _prior(before)
    return [
        {"agent": agent, "agent_version": version, "unknown": {k: v[0] for k, v in t.unknown.items()}}
        for (agent, version), t in sorted(run.items(), key=lambda kv: (kv[0][0], version_key(kv[0][1])))
        if t.unknown and agent not in agents
    ]


def kept_as_meta(records: int, types: int) -> str:
    """The neutral line of record types not understood (no drift): ``"3 records of 2
    types not understood, kept as meta: `ctxkeep sources --coverage`"``."""
    return (
        f"{records:,} record{'s' if records != 1 else ''} of {types:,} type{'s' if types != 1 else ''} "
        "not understood, kept as meta: `ctxkeep sources --coverage`"
    )


def ledger_alerts(ledger: list[dict]) -> list[dict]:
    """What the ledger alone shows (``doctor``): per agent, each version holding record
    types not understood that none of the agent's earlier versions held (the agent's
    first version, or records naming none, are no change),
    and each version whose parse rate is ``DROP`` or more below the agent's previous
    version's (versions in order, at least ``MIN_RECORDS`` records each). ``doctor``
    warns for the drops only: the ledger holds no history of runs."""
    return _ledger(ledger)


def _ledger(ledger: list[dict]) -> list[dict]:
    out: list[dict] = []
    prev: dict[str, dict] = {}
    earlier: dict[str, set] = {}  # agent → types not understood by its versions before
    seen: dict[str, set] = {}  # the same, including the version at hand
    current: dict[str, str] = {}
    for r in ledger:  # sorted by agent, version, parser version
        agent, version = r["agent"], r["agent_version"]
        if version and current.get(agent) != version:
            current[agent] = version
            if agent in seen:
                earlier[agent] = set(seen[agent])
        rate = r["parse_rate"]
        base = {"agent": agent, "agent_version": version, "parse_rate": rate, "unknown": list(r["unknown"])}
        counts = {k: u["count"] for k, u in r["unknown"].items()}
        new = (
            {k: n for k, n in counts.items() if k not in earlier[agent]}
            if version and agent in earlier
            else {}
        )
        if new:
            out.append(
                dict(
                    base,
                    unknown=sorted(new),
                    kind="new_unknown_types",
                    previous_rate=None,
                    message=f"{_label(agent, version)}: record types ctxkeep does not understand, "
                    f"not met in its earlier versions: {_fmt_types(new)}",
                )
            )
        if version:
            seen.setdefault(agent, set()).update(counts)
        p = prev.get(agent)
        if (
            not r["unknown"]  # a rate lowered by types not understood is said above
            and p is not None
            and version
            and rate is not None
            and p["parse_rate"] is not None
            and r["records"] >= MIN_RECORDS
            and p["records"] >= MIN_RECORDS
            and rate < p["parse_rate"] - DROP
        ):
            out.append(
                dict(
                    base,
                    kind="parse_rate_dropped",
                    previous_rate=p["parse_rate"],
                    message=f"{_label(agent, version)}: {rate:.1%} of {r['records']:,} records parsed, "
                    f"{p['parse_rate']:.1%} for {p['agent_version'] or 'the version before'}",
                )
            )
        if version:
            prev[agent] = r
    return out

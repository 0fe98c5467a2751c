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


def run_alerts(before: list[dict], run: dict) -> list[dict]:
    """The alerts of one ingest: ``before`` is ``coverage_ledger`` as it stood before
    the run, ``run`` the run's own tallies (``writer.empty_totals()["coverage"]``:
    ``{(agent, version): VersionTally}``). Sorted by agent and version."""
    prior: dict[tuple[str, str], dict] = {}
    for r in before:
        acc = prior.setdefault(
            (r["agent"], r["agent_version"]), {"records": 0, "parsed": 0, "unknown": set()}
        )
        acc["records"] += r["records"]
        acc["parsed"] += r["parsed"]
        acc["unknown"] |= set(r["unknown"])
    out = []
    for (agent, version), t in sorted(run.items(), key=lambda kv: (kv[0][0], version_key(kv[0][1]))):
        if not t.records:
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
            if unknown:
                out.append(
                    dict(
                        base,
                        kind="new_version_unknown_types",
                        previous_rate=None,
                        message=f"{_label(agent, version)}: a version not read before, with record types "
                        f"ctxkeep does not understand: {_fmt_types(unknown)}",
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


def ledger_alerts(ledger: list[dict]) -> list[dict]:
    """What the ledger alone shows (``doctor``): per agent, each version whose records
    hold types not understood, and each version whose parse rate is ``DROP`` or more
    below the agent's previous version's (versions in order, at least
    ``MIN_RECORDS`` records each)."""
    out = []
    prev: dict[str, dict] = {}
    for r in ledger:  # sorted by agent, version, parser version
        agent, version = r["agent"], r["agent_version"]
        rate = r["parse_rate"]
        base = {"agent": agent, "agent_version": version, "parse_rate": rate, "unknown": list(r["unknown"])}
        if r["unknown"]:
            out.append(
                dict(
                    base,
                    kind="new_unknown_types",
                    previous_rate=None,
                    message=f"{_label(agent, version)}: record types ctxkeep does not understand: "
                    + _fmt_types({k: u["count"] for k, u in r["unknown"].items()}),
                )
            )
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

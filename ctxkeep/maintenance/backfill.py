"""Backfill: ingest chosen session files again from byte 0, ignoring their watermarks
(plain functions, no Prefect).

``select_backfill`` picks the files (paths, agents, a date range); ``run_backfill`` hands
them to the one ingest engine (``pipeline.engine.run_ingest`` with ``force``), so a
backfill reads, dedups, loads, syncs DuckDB and records its run exactly as an ingest
does. ``flows.maintenance.backfill_flow`` wraps ``run_backfill`` in a Prefect flow;
``ctxkeep backfill --dry-run``/``--no-prefect`` and the tests call it directly.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.errors import UsageError
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.sinks.lock import hold
from ctxkeep.sources import SOURCES, discover_all, files_for_paths
from ctxkeep.sources.contract import DiscoveryContext, SourceFile

_TS_KEYS = ("timestamp", "startTime", "created_at", "createdAt", "ts", "time")


def first_timestamp(path: Path, head_bytes: int = 65536) -> dt.datetime | None:
    """The earliest-looking record time of a session file: the first ISO-8601 value of
    a ``timestamp``/``startTime``/``created_at``/``ts`` key (top level or in ``payload``)
    among the JSON lines (or the JSON document) in its first ``head_bytes``. Claude Code
    and Codex write ``timestamp`` on every line; Gemini CLI ``startTime`` at the top.
    None when no such value is found (binary databases, empty files)."""
    try:
        with open(path, "rb") as f:
            head = f.read(head_bytes)
    except OSError:
        return None
    for raw in head.split(b"\n") or [head]:
        raw = raw.strip()
        if not raw.startswith(b"{"):
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            m = re.search(rb'"(?:timestamp|startTime|created_at)"\s*:\s*"([0-9T:.\-+Z ]{10,40})"', raw)
            obj = {"timestamp": m.group(1).decode()} if m else None
        if not isinstance(obj, dict):
            continue
        for d in (obj, obj.get("payload") if isinstance(obj.get("payload"), dict) else {}):
            for k in _TS_KEYS:
                v = d.get(k)
                if isinstance(v, str) and len(v) >= 10:
                    try:
                        t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
                    except ValueError:
                        continue
                    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)
    return None


def parse_day(d: dt.date | dt.datetime | str | None, end: bool = False) -> dt.datetime | None:
    """A date (``YYYY-MM-DD``: that UTC day's start, or with ``end`` the next day's
    start) or an ISO-8601 datetime (naive = UTC) as an aware UTC datetime, or an age
    (``7d``, ``12h``, ``30m``, ``2w``: that long before now, as search's ``--since``);
    None stays None. Raises ValueError for text that is none of these."""
    if d is None:
        return None
    if isinstance(d, str) and re.fullmatch(r"\d+\s*[mhdw]", d.strip()):
        from ctxkeep.query.search import parse_when

        return dt.datetime.fromisoformat(parse_when(d).replace("Z", "+00:00"))
    if isinstance(d, str):
        d = (
            dt.date.fromisoformat(d[:10])
            if len(d) <= 10
            else dt.datetime.fromisoformat(d.replace("Z", "+00:00"))
        )
    if isinstance(d, dt.datetime):
        return d if d.tzinfo else d.replace(tzinfo=dt.UTC)
    t = dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC)
    return t + dt.timedelta(days=1) if end else t


def select_backfill(
    home: Path,
    *,
    paths: list[Path] | None = None,
    since=None,
    until=None,
    agents: list[str] | None = None,
    ctx: DiscoveryContext | None = None,
) -> tuple[list[SourceFile], list[str]]:
    """The files a backfill reads: the given ``paths`` (files or dirs), else every
    enabled agent's discovered files; with a date range, only those that may hold
    records in it: last written (mtime) on or after ``since`` and first record
    (``first_timestamp``) on or before ``until`` (dates are whole UTC days, ``until``
    inclusive; datetimes are exact). Files whose first record time cannot be read are
    kept. Returns ``(files, problems)``.
    """
    problems: list[str] = []
    if paths:
        files, problems = files_for_paths([Path(p) for p in paths], agents)
    else:
        cfg = cfgmod.load_config(Path(home))
        ds = discover_all(
            ctx or DiscoveryContext.from_env(),
            agents,
            enabled={a: cfg.agent(a).enabled for a in SOURCES},
            extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES},
        )
        files = [f for d in ds for f in d.files]
    lo, hi = parse_day(since), parse_day(until, end=True)
    if lo and hi and lo >= hi:
        raise UsageError(f"empty date range: since {since} is not before until {until}")
    out = []
    for f in files:
        try:
            st = f.path.stat()
        except OSError:
            continue
        if lo and dt.datetime.fromtimestamp(st.st_mtime, dt.UTC) < lo:
            continue
        if hi and f.mode == "append":
            t = first_timestamp(f.path)
            if t is not None and t >= hi:
                continue
        out.append(f)
    return out, problems


def total_bytes(files: list[SourceFile]) -> int:
    """The summed size of ``files`` in bytes (what a backfill reads: each file whole);
    files gone since the selection count 0."""
    size = 0
    for f in files:
        try:
            size += f.path.stat().st_size
        except OSError:
            pass
    return size


def run_backfill(
    home: Path,
    *,
    paths: list[Path] | None = None,
    since=None,
    until=None,
    agents: list[str] | None = None,
    ctx: DiscoveryContext | None = None,
    dry_run: bool = False,
    timeout: float = -1,
) -> dict:
    """Ingest the ``select_backfill`` files again from byte 0, ignoring their watermarks,
    under the store lock, through the ingest engine (``pipeline.engine.run_ingest`` with
    ``files`` and ``force``). Nothing doubles: entries are keyed by a stable
    ``entry_id``, contents by hash, usage by ``usage_key``, quarantine rows by (path,
    offset, reason); tombstoned (purged) sessions and archived entries stay out. Each
    file's watermark is saved with its entries.

    Returns ``{"files": [paths], "problems": [...], "dry_run", "bytes": total size in
    bytes}`` plus, unless ``dry_run`` or no file was selected, ``"ingest":
    pipeline.Summary.as_dict()`` (its ``problems`` start with the selection's; recorded
    in ``runs`` as flow ``backfill``). Raises UsageError for an empty date range,
    StoreBusy when the lock stays taken past ``timeout`` seconds (-1: wait forever).
    """
    home = cfgmod.ensure_home(Path(home))
    files, problems = select_backfill(home, paths=paths, since=since, until=until, agents=agents, ctx=ctx)
    out = {
        "dry_run": dry_run,
        "files": [str(f.path) for f in files],
        "problems": problems,
        "bytes": total_bytes(files),
    }
    if dry_run or not files:
        return out
    # the engine takes the lock again (reentrant in this process): held here so that
    # ``timeout`` and the StoreBusy message are backfill's own
    with hold(home, timeout, what="backfill"):
        s = pipeline.run_ingest(
            home, files=files, force=True, flow="backfill", on_bytes=pipeline.hooks.on_bytes
        )
    rep = s.as_dict()
    rep["problems"] = list(problems) + [p for p in rep["problems"] if p not in problems]
    out["ingest"] = rep
    return out

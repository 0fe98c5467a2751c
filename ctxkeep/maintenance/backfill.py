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
import re
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.sinks.lock import hold
from ctxkeep.sources import SOURCES, discover_all, files_for_paths
from ctxkeep.sources.contract import DiscoveryContext, SourceFile
from ctxkeep.sources.readers.sidecar import belongs, is_sidecar

#: a record time in a session file's bytes: an ISO-8601 value of a time key of
#: Claude Code / Codex lines (``timestamp``), Gemini CLI documents (``startTime``,
#: ``lastUpdated``, message ``timestamp``) and other JSON (``created_at``, ``createdAt``,
#: ``updated_at``, ``updatedAt``, ``time``, ``ts``), not inside an escaped string
#: (``\"timestamp\"`` is text quoted in a message, not a record's time)
_ISO_TIME = re.compile(
    rb'(?<!\\)"(?:timestamp|startTime|lastUpdated|created_at|createdAt|updated_at|updatedAt|time|ts)"'
    rb'\s*:\s*"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)"'
)
#: OpenCode's JSON tree: ``"time": {"created": <Unix ms>, "updated": <Unix ms>}``
_EPOCH_MS = re.compile(rb'(?<!\\)"(?:created|updated)"\s*:\s*(1\d{12})\b')
#: Markdown transcripts in local time: Aider ``# aider chat started at 2025-10-20
#: 21:49:17`` and its input history's ``# 2025-10-20 21:49:20.123456``, SpecStory
#: ``# Title (2025-04-28 12:22:37)``
_MD_TIME = re.compile(
    rb"(?m)^#\s(?:aider chat started at |.*\()?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\)?[ \t\r]*$"
)
#: bytes read at each end of a file for its record times
SPAN_BYTES = 65536


def _times(chunk: bytes) -> list[dt.datetime]:
    out = []
    for m in _ISO_TIME.finditer(chunk):
        try:
            t = dt.datetime.fromisoformat(m.group(1).decode().replace("Z", "+00:00"))
        except ValueError:
            continue
        out.append(t if t.tzinfo else t.replace(tzinfo=dt.UTC))
    for m in _EPOCH_MS.finditer(chunk):
        out.append(dt.datetime.fromtimestamp(int(m.group(1)) / 1000, dt.UTC))
    for m in _MD_TIME.finditer(chunk):
        try:  # local time, as the Aider and SpecStory sources read it
            out.append(dt.datetime.fromisoformat(m.group(1).decode()).astimezone(dt.UTC))
        except ValueError:
            continue
    return out


def record_span(path: Path, span_bytes: int = SPAN_BYTES) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The record times of a session file, read from its bytes (never its mtime, which a
    copy or a restore changes): ``(first, last)`` as aware UTC datetimes, the earliest
    and the latest time in its first and last ``span_bytes`` (a Gemini document names
    its ``lastUpdated`` at the top). Times
    are the ISO values of the time keys (``_ISO_TIME``: Claude Code and Codex
    ``timestamp`` on every line, Gemini CLI ``startTime``/``lastUpdated``), OpenCode's
    Unix-ms ``created``/``updated`` and the Aider/SpecStory Markdown headers (local
    time). Either is None when its end holds none (binary databases, empty files); a
    file that cannot be read gives ``(None, None)``."""
    try:
        with open(path, "rb") as f:
            head = f.read(span_bytes)
            size = f.seek(0, 2)
            if size > span_bytes:
                f.seek(max(span_bytes, size - span_bytes))
                tail = f.read(span_bytes)
            else:
                tail = head
    except OSError:
        return None, None
    times = _times(head) + (_times(tail) if tail is not head else [])
    return (min(times), max(times)) if times else (None, None)


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
    enabled agent's discovered files; with a date range, only those whose records may
    fall in it. One rule for both ends, on the file's own record times
    (``record_span``: first and last record, read from its bytes): a file is kept
    unless its last record is before ``since`` or its first record is after ``until``.
    Both ends are inclusive, in ``timeutil.when_bound`` forms (a date is a whole UTC
    day; an age such as ``7d``). A file with no readable record time counts its mtime
    as its last record (nothing in it can be newer) and is never excluded by
    ``until``; a SQLite database (many sessions) is always kept.
    Returns ``(files, problems)``. Raises UsageError for an unreadable time or an
    empty range.
    """
    from ctxkeep.timeutil import check_window

    lo, hi = check_window(since, until)
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
    out = []
    for f in files:
        try:
            mtime = dt.datetime.fromtimestamp(f.path.stat().st_mtime, dt.UTC)
        except OSError:
            continue
        if (lo or hi) and f.mode != "sqlite":
            first, last = record_span(f.path)
            # no record time at all: nothing in it is newer than its last write
            last = last or mtime
            if lo and last < lo:
                continue
            if hi and first is not None and first >= hi:
                continue
        out.append(f)
    if lo or hi:  # a sidecar (no record time) goes with its transcript (``readers.sidecar``)
        kept = {str(f.path) for f in out}
        out = [f for f in out if not is_sidecar(f) or belongs(f.meta, kept)]
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

    Files the vault holds that are gone from disk (``vaulted_gone``: the agent deleted
    them) are derived from the vault (``reparse.reparse`` of those paths), since no
    file is left to read.

    Returns ``{"files": [paths], "problems": [...], "dry_run", "bytes": total size in
    bytes, "from_vault": [paths gone from disk, derived from the vault]}`` plus
    ``"reparse": {"files", "diff"}`` when some were, and, unless ``dry_run`` or no file was selected, ``"ingest":
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
    gone = vaulted_gone(home, paths=paths, since=since, until=until, agents=agents)
    out["from_vault"] = gone
    if dry_run or not (files or gone):
        return out
    # the engine takes the lock again (reentrant in this process): held here so that
    # ``timeout`` and the StoreBusy message are backfill's own
    with hold(home, timeout, what="backfill"):
        if files:
            s = pipeline.run_ingest(
                home, files=files, force=True, flow="backfill", on_bytes=pipeline.hooks.on_bytes
            )
            rep = s.as_dict()
            rep["problems"] = list(problems) + [p for p in rep["problems"] if p not in problems]
            out["ingest"] = rep
        if gone:  # files the agents deleted: derived from the vault
            from ctxkeep.maintenance.reparse import reparse

            r = reparse(home, paths=gone)
            out["reparse"] = {"files": r["files"], "diff": r["diff"]}
    return out


def vaulted_gone(
    home: Path,
    *,
    paths: list[Path] | None = None,
    since=None,
    until=None,
    agents: list[str] | None = None,
) -> list[str]:
    """The files the vault holds that are gone from disk, as a backfill selects them:
    under one of ``paths`` (files or dirs), of ``agents``, and (with a date range) whose
    newest generation's mtime falls in it (the vault keeps the file's mtime, not its
    record times). ``[]`` when there is no store or no vault."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.vault import manifest
    from ctxkeep.timeutil import check_window

    lo, hi = check_window(since, until)
    try:
        conn = sqlite_store.connect(Path(home), readonly=True)
    except Exception:
        return []
    try:
        latest = manifest.generations(conn, latest=True, agents=agents)
    except Exception:  # a store before the vault
        return []
    finally:
        conn.close()
    roots = [Path(p).expanduser().absolute() for p in paths or []]
    out = []
    for g in latest:
        p = Path(g.disk_path)  # (a database's rows: the database)
        if p.exists():
            continue
        if roots and not any(p == r or r in p.parents for r in roots):
            continue
        if lo or hi:
            t = dt.datetime.fromtimestamp((g.mtime_ns or 0) / 1e9, dt.UTC)
            if (lo and t < lo) or (hi and t > hi):
                continue
        out.append(g.path)
    return sorted(out)

"""Maintenance runs as plain functions (no Prefect): retention, backfill (purge and
reindex: ``maintenance.purge``, ``maintenance.reindex``).

``flows.maintenance_flows`` wraps each in a Prefect flow (schedules, API runs); the CLI
calls these directly for ``--dry-run`` and ``--no-prefect``; tests call them without a
server. Every run that changes the store holds the store lock (``sinks.lock``) and is
recorded in the ``runs`` table.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.sinks import parquet as archive
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.maintenance import reindex as reindex_mod
from ctxkeep.sinks.lock import hold
from ctxkeep.sources import SOURCES, discover_all, files_for_paths
from ctxkeep.sources.contract import DiscoveryContext, SourceFile
from ctxkeep.pipeline import engine as pipeline

#: Backups written by the compress flow next to a session file. The compress flow owns
#: their naming (``<file>.backup``, possibly with a ``.N`` or ``-<stamp>`` suffix); this
#: glob-like pattern matches every variant so retention need not know which one.
BACKUP_RE = re.compile(r"^.+\.backup(?:[.\-_][^/\\]*)?$")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


# ---------------------------------------------------------------- retention

@dataclass
class RetentionPlan:
    """What retention would do: ``cutoff`` (entries before it are archived),
    ``archive`` rows per (agent, month) from ``archive.due``, ``old_archives`` and
    ``old_backups`` (paths), ``archive_cutoff`` and ``backup_cutoff`` (UTC)."""

    cutoff: dt.datetime
    archive: list[dict]
    archive_cutoff: dt.datetime
    old_archives: list[Path]
    backup_cutoff: dt.datetime
    old_backups: list[Path]
    backup_dirs: int = 0

    def as_dict(self) -> dict:
        def size(p: Path) -> int:
            try:
                return p.stat().st_size
            except OSError:
                return 0
        return {
            "cutoff": self.cutoff.isoformat(), "archive": self.archive,
            "entries_to_archive": sum(r["entries"] for r in self.archive),
            "archive_cutoff": self.archive_cutoff.isoformat(),
            "old_archives": [str(p) for p in self.old_archives],
            "old_archives_bytes": sum(size(p) for p in self.old_archives),
            "backup_cutoff": self.backup_cutoff.isoformat(),
            "old_backups": [str(p) for p in self.old_backups],
            "old_backups_bytes": sum(size(p) for p in self.old_backups),
            "backup_dirs_scanned": self.backup_dirs,
        }


def backup_dirs(home: Path, ctx: DiscoveryContext | None = None) -> list[Path]:
    """Directories that hold discovered session files of enabled agents (where the
    compress flow writes its backups)."""
    cfg = cfgmod.load_config(home)
    ctx = ctx or DiscoveryContext.from_env()
    ds = discover_all(ctx, None, enabled={a: cfg.agent(a).enabled for a in SOURCES},
                      extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES})
    return sorted({f.path.parent for d in ds for f in d.files})


def old_backups(dirs: list[Path], older_than: dt.datetime) -> list[Path]:
    """Compress backups (names matching ``BACKUP_RE``) in ``dirs`` whose age is past
    ``older_than``. The age is the later of mtime and ctime: a backup copied with its
    original's mtime (``shutil.copy2``) still counts from when it was made."""
    limit = older_than.timestamp()
    out = []
    for d in dirs:
        try:
            names = list(d.iterdir())
        except OSError:
            continue
        for p in names:
            if not BACKUP_RE.match(p.name) or not p.is_file():
                continue
            st = p.stat()
            if max(st.st_mtime, st.st_ctime) < limit:
                out.append(p)
    return sorted(out)


def plan_retention(home: Path, *, now: dt.datetime | None = None, ctx: DiscoveryContext | None = None,
                   archive_after_days: int | None = None, delete_archives_after_days: int | None = None,
                   backup_max_age_days: int | None = None) -> RetentionPlan:
    """Work out what retention would do, changing nothing. Thresholds default to
    ``config.RetentionConfig`` (``archive_after_days`` 7, ``delete_archives_after_days``
    30) and ``CompressConfig.backup_max_age_days`` (30); days are 24 h periods before
    ``now`` (UTC)."""
    home = Path(home)
    cfg = cfgmod.load_config(home)
    now = now or _utcnow()
    a_days = cfg.retention.archive_after_days if archive_after_days is None else archive_after_days
    d_days = (cfg.retention.delete_archives_after_days if delete_archives_after_days is None
              else delete_archives_after_days)
    b_days = cfg.compress.backup_max_age_days if backup_max_age_days is None else backup_max_age_days
    cutoff = now - dt.timedelta(days=a_days)
    rows: list[dict] = []
    if (home / sqlite_store.DB_NAME).exists():
        conn = sqlite_store.connect(home, readonly=True)
        try:
            rows = archive.due(conn, cutoff)
        finally:
            conn.close()
    a_cut = now - dt.timedelta(days=d_days)
    b_cut = now - dt.timedelta(days=b_days)
    dirs = backup_dirs(home, ctx)
    return RetentionPlan(cutoff, rows, a_cut, archive.old_archives(home, a_cut), b_cut,
                         old_backups(dirs, b_cut), len(dirs))


def run_retention(home: Path, *, dry_run: bool = False, now: dt.datetime | None = None,
                  ctx: DiscoveryContext | None = None, timeout: float = -1, **days) -> dict:
    """Retention: archive consumed/archived entries older than ``archive_after_days`` to
    Parquet (``sinks.archive``) and remove them from the hot store (SQLite, FTS, then
    DuckDB is rebuilt); delete archive files older than ``delete_archives_after_days``
    and compress backups older than ``backup_max_age_days``.

    ``days`` may override the three thresholds (keyword names as in config).
    Returns the plan (``RetentionPlan.as_dict``) plus, unless ``dry_run``: ``archived``
    (``archive.archive_entries`` report), ``archives_removed``/``backups_removed``
    (counts) and ``bytes_freed``. Raises StoreBusy when the lock stays taken past
    ``timeout`` seconds.
    """
    t0 = time.perf_counter()
    home = Path(home)
    p = plan_retention(home, now=now, ctx=ctx, **days)
    out = {"dry_run": dry_run, **p.as_dict()}
    if dry_run:
        return out
    with hold(home, timeout, what="retention"):
        archived = {"entries": 0, "contents": 0, "chunks": 0, "files": [], "partitions": []}
        conn = sqlite_store.connect(home) if (home / sqlite_store.DB_NAME).exists() else None
        run_id = sqlite_store.start_run(conn, "retention") if conn else None
        status = "failed"
        try:
            if conn:
                archived = archive.archive_entries(conn, home, p.cutoff)
                if archived["entries"]:
                    out["analytics"] = reindex_mod.rebuild_analytics(conn, home)
            freed = archive.remove_files(p.old_archives, home / archive.ARCHIVE_DIR)
            # a backup goes only if it is still old (it may have been rewritten since the plan)
            backups = old_backups(sorted({b.parent for b in p.old_backups}), p.backup_cutoff)
            freed += archive.remove_files(backups)
            out.update(archived=archived, archives_removed=len(p.old_archives),
                       backups_removed=len(backups), bytes_freed=freed)
            status = "ok"
        finally:
            out["seconds"] = round(time.perf_counter() - t0, 3)
            if conn:
                try:
                    sqlite_store.finish_run(conn, run_id, status, {
                        "entries_new": 0, "files": len(archived["files"]), "seconds": out["seconds"],
                        "archived_entries": archived["entries"],
                        "archives_removed": out.get("archives_removed", 0),
                        "backups_removed": out.get("backups_removed", 0)})
                finally:
                    conn.close()
    return out


# ---------------------------------------------------------------- backfill

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
                    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
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
        d = dt.date.fromisoformat(d[:10]) if len(d) <= 10 else dt.datetime.fromisoformat(d.replace("Z", "+00:00"))
    if isinstance(d, dt.datetime):
        return d if d.tzinfo else d.replace(tzinfo=dt.timezone.utc)
    t = dt.datetime(d.year, d.month, d.day, tzinfo=dt.timezone.utc)
    return t + dt.timedelta(days=1) if end else t


def select_backfill(home: Path, *, paths: list[Path] | None = None, since=None, until=None,
                    agents: list[str] | None = None,
                    ctx: DiscoveryContext | None = None) -> tuple[list[SourceFile], list[str]]:
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
        ds = discover_all(ctx or DiscoveryContext.from_env(), agents,
                          enabled={a: cfg.agent(a).enabled for a in SOURCES},
                          extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES})
        files = [f for d in ds for f in d.files]
    lo, hi = parse_day(since), parse_day(until, end=True)
    if lo and hi and lo >= hi:
        from ctxkeep.errors import UsageError
        raise UsageError(f"empty date range: since {since} is not before until {until}")
    out = []
    for f in files:
        try:
            st = f.path.stat()
        except OSError:
            continue
        if lo and dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc) < lo:
            continue
        if hi and f.mode == "append":
            t = first_timestamp(f.path)
            if t is not None and t >= hi:
                continue
        out.append(f)
    return out, problems


def run_backfill(home: Path, *, paths: list[Path] | None = None, since=None, until=None,
                 agents: list[str] | None = None, ctx: DiscoveryContext | None = None,
                 dry_run: bool = False, timeout: float = -1) -> dict:
    """Ingest the ``select_backfill`` files again from byte 0, ignoring their watermarks,
    under the store lock. Nothing doubles: entries are keyed by a stable ``entry_id``,
    contents by hash, usage by ``usage_key``, quarantine rows by (path, offset, reason);
    tombstoned (purged) sessions stay out. Each file's watermark is saved as it is read.

    Returns ``{"files": [paths], "problems": [...], "dry_run", "bytes": total size in
    bytes}`` plus, unless ``dry_run``, ``"ingest": pipeline.Summary.as_dict()`` (recorded
    in ``runs`` as flow ``backfill``). Raises UsageError for an empty date range,
    StoreBusy when the lock stays taken past ``timeout`` seconds.
    """
    t0 = time.perf_counter()
    home = cfgmod.ensure_home(Path(home))
    files, problems = select_backfill(home, paths=paths, since=since, until=until, agents=agents, ctx=ctx)
    size = 0
    for f in files:
        try:
            size += f.path.stat().st_size
        except OSError:
            pass
    out = {"dry_run": dry_run, "files": [str(f.path) for f in files], "problems": problems, "bytes": size}
    if dry_run or not files:
        return out
    with hold(home, timeout, what="backfill"):
        conn = sqlite_store.connect(home)
        s = pipeline.Summary(files=len(files), problems=list(problems))
        run_id = sqlite_store.start_run(conn, "backfill")
        status = "failed"
        try:
            tombs = sqlite_store.tombstoned(conn)
            for f in files:
                r = pipeline.ingest_file(conn, f, None, tombs, pipeline.hooks.on_bytes)
                if r["vanished"]:
                    s.files_vanished += 1
                    continue
                s.files_read += 1
                s.bytes += r["bytes"]
                s.lines += r["lines"]
                s.entries_new += r["entries_new"]
                s.quarantined += r["quarantined"]
                s.per_agent[f.agent] = s.per_agent.get(f.agent, 0) + r["entries_new"]
            if s.entries_new or not (home / "analytics.duckdb").exists():
                s.analytics = pipeline.sync_analytics(conn, home)
            status = "ok"
        finally:
            s.seconds = round(time.perf_counter() - t0, 3)
            sqlite_store.finish_run(conn, run_id, status, s.as_dict())
            conn.close()
    out["ingest"] = s.as_dict()
    return out

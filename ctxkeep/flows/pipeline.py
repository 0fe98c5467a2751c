"""The ingest pipeline as plain functions: plan → read batches → transform → load.

No Prefect here: ``flows.ingest`` wraps these in a flow and tasks; tests and the
fast paths of the CLI call them directly.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import polars as pl
from filelock import Timeout

from .. import config as cfgmod
from ..errors import StoreBusy
from ..sinks import duckdb_store, sqlite_store
from ..sinks.lock import LOCK_NAME, StoreLock, store_lock
from ..sources import SOURCES, discover_all, files_for_paths
from ..sources.base import Batch, Discovery, DiscoveryContext, SourceFile, Watermark, is_unchanged
from ..transforms.chunk import chunks_frame
from ..transforms.normalize import contents_frame, entries_frame, usage_frame
from ..transforms.tokens import estimate_tokens


@dataclass
class Hooks:
    """Progress callbacks of the running process (the CLI's progress bar): set them
    here rather than pass callables through Prefect parameters."""

    on_plan: Callable[["Plan"], None] | None = None
    on_bytes: Callable[[int], None] | None = None


hooks = Hooks()


@dataclass
class Plan:
    """What an ingest will read: ``todo`` files (with their watermark), the number of
    ``unchanged`` files skipped, discoveries per agent, and problems with --path."""

    todo: list[tuple[SourceFile, Watermark | None]]
    unchanged: int
    discoveries: list[Discovery]
    problems: list[str] = field(default_factory=list)

    @property
    def pending_bytes(self) -> int:
        total = 0
        for f, wm in self.todo:
            try:
                size = f.path.stat().st_size
            except OSError:
                continue
            total += max(size - (wm.offset if wm else 0), 0) if wm and size >= wm.offset else size
        return total


@dataclass
class Summary:
    """A run's figures: files seen/read, raw bytes read, lines, new entries, quarantined
    lines, seconds, per-agent new entries, and a DuckDB sync note."""

    files: int = 0
    files_read: int = 0
    files_vanished: int = 0
    bytes: int = 0
    lines: int = 0
    entries_new: int = 0
    quarantined: int = 0
    seconds: float = 0.0
    per_agent: dict = field(default_factory=dict)
    analytics: str = ""
    problems: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def lock(home: Path, timeout: float = -1) -> StoreLock:
    """The store's maintenance lock (``<home>/ingest.lock``): one ingest, compress,
    purge, retention or reindex at a time (``sinks.lock.store_lock``, so the purge core
    shares it without importing flows). ``timeout`` -1 waits forever, 0 fails at once
    (``filelock.Timeout``)."""
    cfgmod.ensure_home(home)
    return store_lock(home, timeout)


def plan(home: Path, conn, *, agents: list[str] | None = None, paths: list[Path] | None = None,
         ctx: DiscoveryContext | None = None, force: bool = False) -> Plan:
    """Discover files and keep those that may hold new bytes.

    With ``paths``, only those files/dirs are considered; otherwise every enabled
    agent's default and configured locations. ``force`` ignores watermarks (backfill).
    """
    cfg = cfgmod.load_config(home)
    ctx = ctx or DiscoveryContext.from_env()
    problems: list[str] = []
    if paths:
        files, problems = files_for_paths(paths, agents)
        discoveries = [Discovery(a, files=[f for f in files if f.agent == a]) for a in SOURCES]
    else:
        discoveries = discover_all(
            ctx, agents, enabled={a: cfg.agent(a).enabled for a in SOURCES},
            extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES})
        files = [f for d in discoveries for f in d.files]
    wms = sqlite_store.load_watermarks(conn)
    todo, unchanged = [], 0
    for f in files:
        wm = wms.get(str(f.path))
        try:
            st = f.path.stat()
        except OSError:
            continue
        pv = SOURCES[f.agent].PARSER_VERSION
        if not force and is_unchanged(st, wm, pv):
            unchanged += 1
            continue
        todo.append((f, None if force else wm))
    return Plan(todo, unchanged, discoveries, problems)


def transform_batch(conn, batch: Batch, tombs: dict[str, set[str]]) -> dict:
    """Turn a source batch into the frames ``sqlite_store.load_batch`` takes.

    Entries already stored are dropped (dedup across runs and files), as are entries
    of purged sessions/projects (tombstones). Token estimates are computed only for
    contents the store does not hold yet.
    """
    frame = entries_frame(batch.entries)
    if tombs.get("session"):
        frame = frame.filter(~pl.col("session_id").is_in(list(tombs["session"]))
                             & ~pl.col("parent_session_id").fill_null("").is_in(list(tombs["session"])))
    for proj in tombs.get("project", ()):
        pd = pl.col("project_dir").fill_null("")
        frame = frame.filter(~((pd == proj) | pd.str.starts_with(proj.rstrip("/\\") + "/")
                               | pd.str.starts_with(proj.rstrip("/\\") + "\\")))
    existing = sqlite_store.existing_entry_ids(conn, frame["entry_id"].to_list()) if frame.height else set()
    new = frame.filter(~pl.col("entry_id").is_in(list(existing))) if existing else frame
    contents = contents_frame(new)
    known = sqlite_store.existing_contents(conn, contents["content_hash"].to_list()) if contents.height else {}
    fresh = contents.filter(~pl.col("content_hash").is_in(list(known))) if known else contents
    counts, methods = estimate_tokens(fresh["text"].to_list())
    fresh = fresh.with_columns(pl.Series("token_estimate", counts, dtype=pl.Int64),
                               pl.Series("token_method", methods, dtype=pl.String))
    tok = pl.concat([fresh.select("content_hash", "token_estimate"),
                     pl.DataFrame({"content_hash": list(known), "token_estimate": list(known.values())},
                                  schema={"content_hash": pl.String, "token_estimate": pl.Int64})])
    new = new.drop("token_estimate").join(tok, on="content_hash", how="left", maintain_order="left") \
        .with_columns(pl.col("token_estimate").fill_null(0))
    return {"entries": new, "contents": fresh, "chunks": chunks_frame(fresh),
            "usage": usage_frame(frame)}


def ingest_file(conn, file: SourceFile, wm: Watermark | None, tombs: dict,
                on_bytes: Callable[[int], None] | None = None) -> dict:
    """Read one file's new bytes in batches, transform and load each batch with its
    watermark. Returns ``{"entries_new", "quarantined", "bytes", "lines", "vanished"}``."""
    mod = SOURCES[file.agent]
    res = {"entries_new": 0, "quarantined": 0, "bytes": 0, "lines": 0, "vanished": False}
    if not file.path.exists():
        res["vanished"] = True
        return res
    for batch in mod.read(file, wm):
        frames = transform_batch(conn, batch, tombs)
        q = [dict(row, agent=file.agent) for row in batch.quarantine]
        res["entries_new"] += sqlite_store.load_batch(conn, quarantine=q, watermark=batch.watermark, **frames)
        res["quarantined"] += len(batch.quarantine)
        res["bytes"] += batch.bytes_read
        res["lines"] += batch.lines
        if on_bytes:
            on_bytes(batch.bytes_read)
    return res


def sync_analytics(conn, home: Path) -> str:
    """Sync DuckDB from SQLite; returns a one-line note (never raises for a busy file)."""
    try:
        r = duckdb_store.sync(conn, home)
        return f"analytics: {r['entries_synced']} entries synced"
    except Exception as e:  # a notebook holding the file must not fail the ingest
        return (f"analytics store not updated ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "the next ingest catches up")


def run_ingest(home: Path, *, agents=None, paths=None, ctx: DiscoveryContext | None = None,
               force: bool = False, on_plan: Callable[[Plan], None] | None = None,
               on_bytes: Callable[[int], None] | None = None, wait: bool = True) -> Summary:
    """The whole ingest without Prefect: lock, plan, read every changed file, sync
    DuckDB, record the run. Raises StoreBusy when ``wait`` is False and another
    maintenance run holds the lock."""
    t0 = time.perf_counter()
    home = cfgmod.ensure_home(Path(home))
    try:
        with lock(home, -1 if wait else 0):
            conn = sqlite_store.connect(home)
            try:
                return _run_locked(conn, home, agents, paths, ctx, force, on_plan, on_bytes, t0)
            finally:
                conn.close()
    except Timeout:
        raise StoreBusy("another ctxkeep maintenance run holds the store", where=str(home / LOCK_NAME),
                        hint="wait for it to finish") from None


def _run_locked(conn, home, agents, paths, ctx, force, on_plan, on_bytes, t0) -> Summary:
    p = plan(home, conn, agents=agents, paths=paths, ctx=ctx, force=force)
    if on_plan:
        on_plan(p)
    s = Summary(files=len(p.todo) + p.unchanged, problems=list(p.problems))
    run_id = sqlite_store.start_run(conn, "ingest")
    tombs = sqlite_store.tombstoned(conn)
    status = "failed"
    try:
        for f, wm in p.todo:
            r = ingest_file(conn, f, wm, tombs, on_bytes)
            if r["vanished"]:
                s.files_vanished += 1
                continue
            s.files_read += 1
            s.bytes += r["bytes"]
            s.lines += r["lines"]
            s.entries_new += r["entries_new"]
            s.quarantined += r["quarantined"]
            s.per_agent[f.agent] = s.per_agent.get(f.agent, 0) + r["entries_new"]
        if s.entries_new or not (home / duckdb_store.DB_NAME).exists():
            s.analytics = sync_analytics(conn, home)
        status = "ok"
    finally:
        s.seconds = round(time.perf_counter() - t0, 3)
        sqlite_store.finish_run(conn, run_id, status, s.as_dict())
    return s

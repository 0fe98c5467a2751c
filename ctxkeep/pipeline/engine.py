"""The ingest pipeline as plain functions: plan → read batches → transform → load.

No Prefect here: ``flows.ingest`` wraps these in a flow and tasks; tests and the
fast paths of the CLI call them directly.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import polars as pl

from ctxkeep import config as cfgmod
from ctxkeep.paths import under_expr
from ctxkeep.schema import STORED_COLUMNS
from ctxkeep.sinks import parquet as archive
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sources import SOURCES, discover_all, file_unchanged, files_for_paths
from ctxkeep.sources.contract import Batch, Discovery, DiscoveryContext, SourceFile, Watermark
from ctxkeep.transforms.chunk import chunks_frame
from ctxkeep.transforms.normalize import (contents_frame, entries_frame, normalized_rows, unique_entries,
                                    usage_frame)
from ctxkeep.transforms.tokens import estimate_tokens
from ctxkeep.pipeline import reader_process as read_worker

@dataclass
class Hooks:
    """Progress callbacks of the running process (the CLI's progress bar): set them
    here rather than pass callables through Prefect parameters."""

    on_plan: Callable[["Plan"], None] | None = None
    on_bytes: Callable[[int], None] | None = None
    #: called with the lock file's path when another run holds the store and this one waits
    on_wait: Callable[[str], None] | None = None


hooks = Hooks()


@dataclass
class Plan:
    """What an ingest will read: ``todo`` files (with their watermark), the number of
    ``unchanged`` files skipped, discoveries per agent, and problems (with --path, and
    agents config.toml names that have no source)."""

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
            if f.mode == "rewrite":  # a changed document is read whole
                total += size
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
    status_changed: int = 0
    seconds: float = 0.0
    per_agent: dict = field(default_factory=dict)
    analytics: str = ""
    problems: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def plan(home: Path, conn, *, agents: list[str] | None = None, paths: list[Path] | None = None,
         ctx: DiscoveryContext | None = None, force: bool = False,
         files: list[SourceFile] | None = None) -> Plan:
    """Discover files and keep those that may hold new bytes.

    With ``files``, exactly those source files are considered (no discovery; a
    backfill's selection); with ``paths``, only those files/dirs; otherwise every
    enabled agent's default and configured locations. ``force`` ignores watermarks
    (backfill).
    """
    cfg = cfgmod.load_config(home)
    ctx = ctx or DiscoveryContext.from_env()
    problems: list[str] = [
        f"config.toml names agent {name!r}, which ctxkeep has no source for (known: {', '.join(SOURCES)})"
        for name in cfgmod.unknown_agents(cfg, SOURCES)]
    if files is not None:
        discoveries = [Discovery(a, files=[f for f in files if f.agent == a]) for a in SOURCES]
    elif paths:
        files, path_problems = files_for_paths(paths, agents)
        problems += path_problems
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
        if not f.path.exists():
            continue
        if not force and file_unchanged(f, wm):
            unchanged += 1
            continue
        todo.append((f, None if force else wm))
    return Plan(todo, unchanged, discoveries, problems)


class Precomputed:
    """Token estimates and chunk rows of contents computed ahead, by a reader process
    (``read_worker.read_in_process``), kept until a group's transform takes them."""

    def __init__(self) -> None:
        self.tokens: dict[str, tuple[int, str]] = {}
        self.chunks: list[pl.DataFrame] = []

    def add(self, contents: pl.DataFrame, chunks: pl.DataFrame) -> None:
        """``contents``: content_hash, token_estimate, token_method; ``chunks``: their
        ``chunks_frame`` rows."""
        self.tokens.update(zip(contents["content_hash"].to_list(),
                               zip(contents["token_estimate"].to_list(), contents["token_method"].to_list())))
        self.chunks.append(chunks)

    def take(self, hashes: list[str]) -> tuple[list[int], list[str], pl.DataFrame] | None:
        """``(counts, methods, chunk rows)`` for ``hashes``, exactly as
        ``estimate_tokens`` and ``chunks_frame`` make them for these contents in this
        order; None unless every hash was computed ahead. Taken rows are dropped."""
        if not hashes or any(h not in self.tokens for h in hashes):
            return None
        counts = [self.tokens[h][0] for h in hashes]
        methods = [self.tokens[h][1] for h in hashes]
        allc = pl.concat(self.chunks, how="vertical") if len(self.chunks) > 1 else self.chunks[0]
        idx = pl.DataFrame({"content_hash": hashes, "_i": list(range(len(hashes)))},
                           schema={"content_hash": pl.String, "_i": pl.Int64})
        rows = idx.join(allc, on="content_hash", how="inner").sort("_i", "seq", maintain_order=True) \
            .select(allc.columns)
        self.chunks = [allc.join(idx, on="content_hash", how="anti")]
        for h in hashes:
            del self.tokens[h]
        return counts, methods, rows


def transform_batch(conn, batch: Batch, tombs: dict[str, set[str]], seen: dict | None = None,
                    frame: pl.DataFrame | None = None, pre: Precomputed | None = None) -> dict:
    """Turn a source batch into the frames ``sqlite_store.load_batch`` takes.

    Entries already stored are dropped (dedup across runs and files), as are entries
    of purged sessions/projects (tombstones) and entries retention archived. Token
    estimates are computed only for contents the store does not hold yet.

    ``seen`` (``{"entries": set[entry_id], "contents": {content_hash: token_estimate}}``)
    holds what earlier groups of this run returned and a writer thread may not have
    committed yet (``ingest_files``): those entries count as stored and those
    contents as known, exactly as if the earlier groups were committed, so a content
    new in two groups gets its chunks once. This call adds its new entries and
    contents to ``seen``.

    ``frame``: ``entries_frame(batch.entries)`` when it was built already (from the
    rows a reader process normalized: ``read_worker.read_in_process``);
    ``batch.entries`` is then ignored. ``pre``: token estimates and chunk rows that
    reader process computed; used when it holds every new content, else they are
    computed here.

    Returns ``{"entries", "contents", "chunks", "usage": pl.DataFrame}``.
    """
    frame = entries_frame(batch.entries) if frame is None else frame
    if tombs.get("session"):
        frame = frame.filter(~pl.col("session_id").is_in(list(tombs["session"]))
                             & ~pl.col("parent_session_id").fill_null("").is_in(list(tombs["session"])))
    for proj in tombs.get("project", ()):
        frame = frame.filter(~under_expr(pl.col("project_dir"), proj).fill_null(False))
    existing = sqlite_store.existing_entry_ids(conn, frame["entry_id"].to_list()) if frame.height else set()
    if frame.height:  # entries retention moved to the Parquet archive stay there
        existing |= archive.archived_ids(conn, frame["entry_id"].to_list())
    if seen is not None and seen["entries"] and frame.height:
        existing |= seen["entries"].intersection(frame["entry_id"].to_list())
    new = frame.filter(~pl.col("entry_id").is_in(list(existing))) if existing else frame
    contents = contents_frame(new)
    known = sqlite_store.existing_contents(conn, contents["content_hash"].to_list()) if contents.height else {}
    if seen is not None and seen["contents"] and contents.height:
        sc = seen["contents"]
        known.update((h, sc[h]) for h in contents["content_hash"].to_list() if h in sc)
    fresh = contents.filter(~pl.col("content_hash").is_in(list(known))) if known else contents
    ahead = pre.take(fresh["content_hash"].to_list()) if pre is not None else None
    counts, methods = ahead[:2] if ahead is not None else estimate_tokens(fresh["text"].to_list())
    fresh = fresh.with_columns(pl.Series("token_estimate", counts, dtype=pl.Int64),
                               pl.Series("token_method", methods, dtype=pl.String))
    tok = pl.concat([fresh.select("content_hash", "token_estimate"),
                     pl.DataFrame({"content_hash": list(known), "token_estimate": list(known.values())},
                                  schema={"content_hash": pl.String, "token_estimate": pl.Int64})])
    new = new.drop("token_estimate").join(tok, on="content_hash", how="left", maintain_order="left") \
        .with_columns(pl.col("token_estimate").fill_null(0))
    if seen is not None:
        seen["entries"].update(new["entry_id"].to_list())
        seen["contents"].update(zip(fresh["content_hash"].to_list(), counts))
    return {"entries": new, "contents": fresh,
            "chunks": ahead[2] if ahead is not None else chunks_frame(fresh),
            "usage": usage_frame(frame)}


#: new raw bytes grouped into one transform + load (several small files share one
#: transaction; a big file is read in ``DEFAULT_BATCH_BYTES`` batches)
GROUP_BYTES = 16 * 1024 * 1024
#: entries grouped into one transform + load at most
GROUP_ENTRIES = 50_000


def _empty_totals() -> dict:
    return {"entries_new": 0, "quarantined": 0, "bytes": 0, "lines": 0, "files_read": 0,
            "vanished": 0, "per_agent": {}, "status_changed": 0}


def ingest_files(conn, todo: list[tuple[SourceFile, Watermark | None]], tombs: dict,
                 on_bytes: Callable[[int], None] | None = None,
                 group_bytes: int = GROUP_BYTES,
                 on_commit: Callable[..., None] | None = None,
                 writer: bool | None = None) -> dict:
    """Read the new bytes of ``todo`` files, transform and load them.

    Batches of consecutive files are grouped until ``group_bytes`` raw bytes (or
    ``GROUP_ENTRIES`` entries) and stored in one transaction together with each file's
    watermark, so the per-batch cost of Polars and SQLite is paid once per group, not
    once per file; a crash loses no data and repeats nothing (a group's watermarks are
    stored with its entries). A file that vanished after discovery is counted, not an
    error. Files are read and parsed in a read-ahead thread (``_read_ahead``, at most
    ``READ_AHEAD`` chunks ahead; ``CTXKEEP_READ_AHEAD=0`` reads in this thread; from
    ``PROCESS_READ_BYTES`` new bytes on the thread takes the items from a reader
    process, ``read_worker.read_in_process``), in ``todo`` order, so results are those
    of a sequential read.

    With ``writer`` (default ``WRITER``, ``CTXKEEP_WRITER=0`` turns it off) groups are
    stored by a writer thread on its own connection to the same database file
    (``sqlite_store.sibling``) while this thread transforms the next group, at most
    ``WRITE_AHEAD`` groups behind; groups commit one by one in order, each with its
    watermarks, as without it. The transform then dedups against the store and
    against the groups still in flight (``transform_batch``'s ``seen``), so the store
    ends up the same as after a sequential run. An in-memory database is loaded here.

    Status changes of the batches (``Batch.status_changes``) are applied after the
    group's entries, in the same transaction. ``on_bytes(raw bytes)`` is called after
    each group's commit; so is ``on_commit(n, first_rowid, entries)`` when the group
    stored anything (``n``: new entries + status changes; ``entries``: the new
    entries, ``STORED_COLUMNS``, whose SQLite rowids run from ``first_rowid`` on, or
    both None when that is not certain), e.g. ``AnalyticsSyncer.on_commit``. Both
    may run in the writer thread, in commit order.

    Returns ``{"entries_new", "quarantined", "bytes", "lines", "files_read",
    "vanished", "status_changed": int, "per_agent": {agent: new entries}}``.
    Raises what a transform or a load raised (groups before it stay committed).
    """
    tot = _empty_totals()
    group: list[tuple[str, Batch, pl.DataFrame | None]] = []  # agent, batch, normalized rows
    size = count = 0
    use_writer = WRITER if writer is None else writer
    w = _Writer(conn, tot, on_bytes, on_commit) if use_writer else None
    if w is not None and not w.ok:
        w = None
    seen = {"entries": set(), "contents": {}} if w is not None else None
    ahead = Precomputed()

    def flush() -> None:
        nonlocal group, size, count
        if not group:
            return
        entries = [e for _, b, _ in group for e in b.entries]
        quarantine = [dict(q, agent=a) for a, b, _ in group for q in b.quarantine]
        # last batch per file wins; a document read in several batches has its
        # watermark on the last one only
        wms = {b.watermark.path: b.watermark for _, b, _ in group if b.watermark is not None}
        changes = [c for _, b, _ in group for c in b.status_changes]
        merged = Batch(entries, [], None)
        pre = None
        if any(rows is not None for _, _, rows in group):  # normalized by a reader process
            pre = unique_entries(pl.concat(
                [rows if rows is not None else normalized_rows(b.entries) for _, b, rows in group],
                how="vertical"))
        frames = transform_batch(conn, merged, tombs, seen, frame=pre, pre=ahead)
        job = _Group(frames, quarantine, list(wms.values()), changes, size,
                     sum(b.bytes_read for _, b, _ in group), sum(b.lines for _, b, _ in group))
        if w is not None:
            w.put(job)
        else:
            _store_group(conn, job, tot, on_bytes, on_commit)
        group, size, count = [], 0, 0

    try:
        if READ_AHEAD > 0 and _pending_bytes(todo) >= PROCESS_READ_BYTES:
            items = _read_ahead(todo, source=read_worker.read_in_process)
        else:
            items = _read_ahead(todo) if READ_AHEAD > 0 else _read_files(todo)
        for item in items:
            f, batch, got = item[:3]
            if batch is not None:  # (file, batch, None[, normalized rows, entries, ahead])
                group.append((f.agent, batch, item[3] if len(item) > 3 else None))
                if len(item) > 5 and item[5] is not None:
                    ahead.add(*item[5])
                size += batch.bytes_read
                count += item[4] if len(item) > 3 else len(batch.entries)
                if size >= group_bytes or count >= GROUP_ENTRIES:
                    flush()
            elif got:
                tot["files_read"] += 1
            else:
                tot["vanished"] += 1
        flush()
    except BaseException:
        if w is not None:
            w.close(raise_error=False)
        raise
    if w is not None:
        w.close()
    return tot


#: groups transformed ahead of the writer thread at most (besides the one it loads)
WRITE_AHEAD = 1
#: store groups in a writer thread (``ingest_files``); ``CTXKEEP_WRITER=0`` turns it off
WRITER = os.environ.get("CTXKEEP_WRITER", "1") != "0"


@dataclass
class _Group:
    """One transformed group, ready for ``sqlite_store.load_batch``."""

    frames: dict
    quarantine: list
    watermarks: list
    changes: list
    size: int
    bytes_read: int
    lines: int


def _store_group(conn, g: _Group, tot: dict, on_bytes, on_commit) -> None:
    """Load one group in one transaction and add its figures to ``tot``."""
    n = sqlite_store.load_batch(conn, quarantine=g.quarantine, watermarks=g.watermarks,
                                status_changes=g.changes, **g.frames)
    tot["status_changed"] += len(g.changes)
    tot["entries_new"] += n
    if n:
        for agent, k in g.frames["entries"].group_by("agent").len().iter_rows():
            tot["per_agent"][agent] = tot["per_agent"].get(agent, 0) + k
    tot["quarantined"] += len(g.quarantine)
    tot["bytes"] += g.bytes_read
    tot["lines"] += g.lines
    if on_bytes:
        on_bytes(g.size)
    if on_commit and (n or g.changes):
        first = _first_rowid(conn, g.frames["entries"], n)
        on_commit(n + len(g.changes), first,
                  None if first is None else g.frames["entries"].select(STORED_COLUMNS))


def _first_rowid(conn, entries: pl.DataFrame, n: int) -> int | None:
    """The SQLite rowid of the first of the ``n`` entries a load just inserted, when
    they are all of ``entries`` and hold consecutive rowids in frame order (one
    writer, INSERT in order); else None."""
    if not n or n != entries.height:
        return None
    ids = entries["entry_id"]
    rows = dict(conn.execute("SELECT entry_id, rowid FROM entries WHERE entry_id IN (?, ?)",
                             (ids[0], ids[-1])).fetchall())
    first, last = rows.get(ids[0]), rows.get(ids[-1])
    if first is None or last is None or last - first != n - 1:
        return None
    return first


class _Writer:
    """The writer thread of ``ingest_files``: loads queued groups in order on its own
    write connection (``sqlite_store.sibling``). ``ok`` is False when ``conn`` is an
    in-memory database (the caller then loads in its own thread). The first error
    stops it: later groups are not loaded (as in a sequential run, where the error
    ends the run), and ``put``/``close`` raise it in the caller's thread."""

    def __init__(self, conn, tot: dict, on_bytes, on_commit) -> None:
        self.conn = sqlite_store.sibling(conn)
        self.ok = self.conn is not None
        if not self.ok:
            return
        self.tot, self.on_bytes, self.on_commit = tot, on_bytes, on_commit
        self.q: queue.Queue = queue.Queue(maxsize=WRITE_AHEAD)
        self.error: BaseException | None = None
        self.t = threading.Thread(target=self._run, name="ctxkeep-writer", daemon=True)
        self.t.start()

    def _run(self) -> None:
        while True:
            g = self.q.get()
            if g is _END:
                return
            if self.error is not None:
                continue  # drain: nothing after a failed group is stored
            try:
                _store_group(self.conn, g, self.tot, self.on_bytes, self.on_commit)
            except BaseException as e:  # raised in the caller's thread
                self.error = e

    def put(self, g: _Group) -> None:
        """Queue a group (waits while ``WRITE_AHEAD`` groups wait); raises the writer's
        error, if any."""
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.q.put(g, timeout=0.1)
                return
            except queue.Full:
                continue

    def close(self, raise_error: bool = True) -> None:
        """Wait until every queued group is stored, stop the thread, close its
        connection; raise its error (``raise_error``)."""
        self.q.put(_END)
        self.t.join()
        self.conn.close()
        if raise_error and self.error is not None:
            raise self.error


#: new bytes from which ``ingest_files`` reads in a reader process
#: (``read_worker.read_in_process``) instead of in the read-ahead thread itself:
#: below, starting a process (~0.2 s) costs more than it saves;
#: ``CTXKEEP_READ_PROCESS_MB`` overrides (MiB)
PROCESS_READ_BYTES = int(float(os.environ.get("CTXKEEP_READ_PROCESS_MB", "64")) * 1024 * 1024)


def _pending_bytes(todo: list[tuple[SourceFile, Watermark | None]]) -> int:
    """New bytes of ``todo``: size minus watermark offset per file (the whole size for
    a file read again from the start or a rewritten document); vanished files count 0."""
    total = 0
    for f, wm in todo:
        try:
            size = f.path.stat().st_size
        except OSError:
            continue
        off = wm.offset if wm is not None and f.mode != "rewrite" and size >= wm.offset else 0
        total += size - off
    return total


#: source batches the reader thread may hold ahead of the transform + load (0: read
#: in the calling thread)
READ_AHEAD = int(os.environ.get("CTXKEEP_READ_AHEAD", "4"))
_END = object()


_read_files = read_worker.read_files


#: the reader thread hands items over in chunks of this many raw bytes (or
#: ``READ_CHUNK_ITEMS`` items): one queue hand-off, and one wait for the GIL, per
#: chunk instead of per item (per item, the consumer waited ~5 s for the GIL on a
#: 200 MB tree: ~900 items, each up to a 5 ms switch interval)
READ_CHUNK_BYTES = 4 * 1024 * 1024
READ_CHUNK_ITEMS = 64


def _read_ahead(todo: list[tuple[SourceFile, Watermark | None]], depth: int = READ_AHEAD,
                source: Callable | None = None):
    """``_read_files(todo)`` (or ``source(todo)``: ``read_worker.read_in_process``) run
    in a reader thread, at most ``depth`` chunks ahead (``READ_CHUNK_BYTES``).

    Reading and parsing (Python) then overlap the consumer's SQLite writes, BPE
    counting and Polars work, which release the GIL. Items arrive in the same order
    as ``_read_files`` yields them; an exception in the reader is raised here, after
    the items read before it; when the consumer stops early (an error in a load), the
    reader stops at its next chunk.
    """
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        items = (source or _read_files)(todo)
        chunk: list = []
        size = 0
        try:
            for item in items:
                chunk.append(item)
                size += item[1].bytes_read if item[1] is not None else 0
                if size >= READ_CHUNK_BYTES or len(chunk) >= READ_CHUNK_ITEMS:
                    if not put(chunk):
                        return
                    chunk, size = [], 0
        except BaseException as e:  # handed to the consumer, raised there
            if not chunk or put(chunk):
                put([(_END, e)])
            return
        finally:
            items.close()  # a reader process is stopped here
        if not chunk or put(chunk):
            put([(_END, None)])

    t = threading.Thread(target=run, name="ctxkeep-read-ahead", daemon=True)
    t.start()
    try:
        while True:
            for item in q.get():
                if item[0] is _END:
                    if item[1] is not None:
                        raise item[1]
                    return
                yield item
    finally:
        stop.set()
        t.join()


def ingest_file(conn, file: SourceFile, wm: Watermark | None, tombs: dict,
                on_bytes: Callable[[int], None] | None = None) -> dict:
    """Read one file's new bytes in batches, transform and load each batch with its
    watermark and status changes. Returns ``{"entries_new", "quarantined", "bytes",
    "lines", "vanished", "status_changed"}``."""
    r = ingest_files(conn, [(file, wm)], tombs, on_bytes)
    return {"entries_new": r["entries_new"], "quarantined": r["quarantined"],
            "bytes": r["bytes"], "lines": r["lines"], "vanished": bool(r["vanished"]),
            "status_changed": r["status_changed"]}


def sync_analytics(conn, home: Path) -> str:
    """Sync DuckDB from SQLite; returns a one-line note (never raises for a busy file)."""
    from ctxkeep.sinks import duckdb as duckdb_store  # imported here: a no-op ingest never needs DuckDB

    try:
        r = duckdb_store.sync(conn, home)
        sqlite_store.mark_analytics_synced(conn, r["entries_rowid"], r["status_seq"])
        return f"analytics: {r['entries_synced']} entries synced"
    except Exception as e:  # a notebook holding the file must not fail the ingest
        return (f"analytics store not updated ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "the next ingest catches up")


class AnalyticsSyncer:
    """Keeps DuckDB in step with SQLite during an ingest, in a background thread.

    ``on_commit`` (``ingest_files``'s callback, called in commit order) hands the
    thread each committed group: its new entries (as loaded, with their first SQLite
    rowid) go to DuckDB straight from Arrow (``duckdb_store.append_entries``) without
    reading SQLite back; a group that does not follow DuckDB's high-water mark (or
    comes without its rows) makes a ``duckdb_store.sync`` from SQLite instead, on a
    read-only connection of the thread's own. One DuckDB connection is kept open:
    the thread is the run's only DuckDB writer. ``finish()`` makes the closing
    ``sync`` (the entries left, status changes, usage) in that thread and returns the
    note of ``sync_analytics``. DuckDB work releases the GIL, so the sync overlaps
    the ingest. An error never fails the ingest: a failed step is caught up by the
    next one, and a failing closing sync is reported in the note (the next ingest
    catches up). The thread starts at the first commit.
    """

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.synced = 0
        self.appended = 0
        self.note = ""
        #: (entries rowid, status_log seq) DuckDB holds after a complete closing sync
        self.marks: tuple[int, int] | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def on_commit(self, n: int, first_rowid: int | None = None, entries=None) -> None:
        """A group with ``n`` new entries or status changes was committed; ``entries``
        (pl.DataFrame, ``STORED_COLUMNS``) are its new entries with SQLite rowids
        from ``first_rowid`` on, when known."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ctxkeep-analytics",
                                                daemon=True)
                self._thread.start()
        self._q.put((first_rowid, entries))

    def finish(self) -> str:
        """Run the closing sync (the tail of the entries, status changes, usage), stop
        the thread and return the note; '' when nothing was committed."""
        if self._thread is None:
            return ""
        self._q.put(_END)
        self._thread.join()
        return self.note

    def _run(self) -> None:
        from ctxkeep.sinks import duckdb as duckdb_store  # imported here: a no-op ingest never needs DuckDB

        con = sq = None
        while True:
            item = self._q.get()
            final = item is _END
            try:
                if con is None:
                    con = duckdb_store.connect(self.home)
                got = None
                if not final and item[1] is not None:
                    got = duckdb_store.append_entries(con, item[0], item[1].to_arrow())
                if got is None:
                    if sq is None:
                        sq = sqlite_store.connect(self.home, readonly=True)
                    r = duckdb_store.sync(sq, self.home, con=con, usage=final)
                    got = r["entries_synced"]
                    if final:
                        self.marks = (r["entries_rowid"], r["status_seq"])
                else:
                    self.appended += got
                self.synced += got
                if final:
                    self.note = f"analytics: {self.synced} entries synced"
            except BaseException as e:  # a notebook holding the file must not fail the ingest;
                # nothing escapes the thread (an interrupted process must not print a traceback)
                self.note = (f"analytics store not updated ({type(e).__name__}: "
                             f"{(str(e).splitlines() or [''])[0]}); the next ingest catches up")
                if con is not None:
                    _close_quietly(con)
                    con = None
                if not isinstance(e, Exception):
                    final = True
            if final:
                break
        for c in (con, sq):
            if c is not None:
                _close_quietly(c)


def _close_quietly(c) -> None:
    try:
        c.close()
    except Exception:
        pass


def run_ingest(home: Path, *, agents=None, paths=None, ctx: DiscoveryContext | None = None,
               force: bool = False, on_plan: Callable[[Plan], None] | None = None,
               on_bytes: Callable[[int], None] | None = None, wait: bool = True,
               files: list[SourceFile] | None = None, flow: str = "ingest") -> Summary:
    """The whole ingest without Prefect: lock, plan, read every changed file, sync
    DuckDB, record the run (``runs.flow`` = ``flow``). ``files``: read exactly these
    (see ``plan``; backfill passes its selection with ``force``). Raises StoreBusy when
    ``wait`` is False and another maintenance run holds the lock."""
    t0 = time.perf_counter()
    home = cfgmod.ensure_home(Path(home))
    with hold(home, -1 if wait else 0, what=flow, on_wait=hooks.on_wait):
        conn = sqlite_store.connect(home)
        try:
            return _run_locked(conn, home, agents, paths, ctx, force, on_plan, on_bytes, t0,
                               files, flow)
        finally:
            conn.close()


def _run_locked(conn, home, agents, paths, ctx, force, on_plan, on_bytes, t0, files=None,
                flow="ingest") -> Summary:
    p = plan(home, conn, agents=agents, paths=paths, ctx=ctx, force=force, files=files)
    if on_plan:
        on_plan(p)
    s = Summary(files=len(p.todo) + p.unchanged, problems=list(p.problems))
    with sqlite_store.recorded_run(conn, flow, t0=t0) as run:
        run.summary = s.as_dict
        tombs = sqlite_store.tombstoned(conn)
        syncer = AnalyticsSyncer(home)
        try:
            r = ingest_files(conn, p.todo, tombs, on_bytes, on_commit=syncer.on_commit)
        finally:  # the groups committed before an error are synced too
            s.analytics = syncer.finish()
            if syncer.marks:
                sqlite_store.mark_analytics_synced(conn, *syncer.marks)
        s.files_read, s.files_vanished = r["files_read"], r["vanished"]
        s.bytes, s.lines = r["bytes"], r["lines"]
        s.entries_new, s.quarantined = r["entries_new"], r["quarantined"]
        s.status_changed = r["status_changed"]
        s.per_agent = r["per_agent"]
        if not syncer.started and (s.entries_new or s.status_changed
                                   or not (home / ANALYTICS_DB).exists()
                                   or sqlite_store.analytics_behind(conn)):
            s.analytics = sync_analytics(conn, home)
    s.seconds = run.seconds
    return s

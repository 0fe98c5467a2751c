"""The ingest engine without Prefect: lock → plan → extract + transform (per part) →
load (one writer, in order) → DuckDB sync → run record.

The CLI, ``flows.ingest`` (a Prefect flow whose tasks are the parts' extract +
transform) and backfill all run ``run_ingest``. The stages live beside this module:
``plan`` (what to read, parts), ``readahead`` and ``reader_process`` (extract),
``transform`` (dedup, tokens, chunks), ``writer`` (the load), ``analytics_sync``
(DuckDB).
"""

from __future__ import annotations

import collections
import itertools
import os
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from contextlib import closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import polars as pl

from ctxkeep import config as cfgmod
from ctxkeep.pipeline import prestart, readahead, reader_process, transform
from ctxkeep.pipeline import writer as writer_mod
from ctxkeep.pipeline.analytics_sync import AnalyticsSyncer, sync_analytics
from ctxkeep.pipeline.plan import Part, Plan, Todo, pending_bytes, plan, split_parts
from ctxkeep.pipeline.readahead import ReadItem
from ctxkeep.pipeline.summary import Summary
from ctxkeep.pipeline.transform import InFlight, Precomputed, drop_written
from ctxkeep.pipeline.writer import Group, Writer, drop_unreadable, empty_totals, unreadable_files
from ctxkeep.sinks import recovery, vault
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB, STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite import store_safety
from ctxkeep.sources import SOURCES
from ctxkeep.sources.contract import Batch, DiscoveryContext, SourceFile, Watermark
from ctxkeep.sources.readers.sidecar import captured_without
from ctxkeep.transforms import drift, tokens
from ctxkeep.transforms.normalize import normalized_rows, unique_entries


@dataclass
class Hooks:
    """Progress callbacks of the running process (the CLI's progress bar): set them
    here rather than pass callables through Prefect parameters."""

    on_plan: Callable[[Plan], None] | None = None
    on_bytes: Callable[[int], None] | None = None
    #: called with the lock file's path when another run holds the store and this one waits
    on_wait: Callable[[str], None] | None = None
    #: called with a phase's name when the run's tail begins (``"analytics"``: the
    #: closing DuckDB sync, after every byte was read), so a progress bar at its total
    #: says what the run still does (newuser24 F7: 48.2/48.2 MB redrawn for the tail)
    on_phase: Callable[[str], None] | None = None


hooks = Hooks()


#: new raw bytes grouped into one transform + load (several small files share one
#: transaction; a big file is read in ``DEFAULT_BATCH_BYTES`` batches)
GROUP_BYTES = 16 * 1024 * 1024
#: entries grouped into one transform + load at most
GROUP_ENTRIES = 50_000
#: a part's last group ends with the part only when it holds this many raw bytes;
#: a smaller one takes the next part's files too (the few small files of most agents
#: share a group, so one transform, one transaction, one vault pack and its fsyncs,
#: where each agent had its own: a first ingest of the 9 MB corpus made 9 groups,
#: now 2, -0.17 CPU s of ~1.7; docs/design.md, "Latency budget");
#: ``CTXKEEP_PART_GROUP_MB`` overrides (MiB; 0: a group ends with each part, as before)
PART_GROUP_BYTES = int(float(os.environ.get("CTXKEEP_PART_GROUP_MB", "4")) * 1024 * 1024)

#: new bytes from which ``extract_transform`` reads in a reader process
#: (``reader_process.read_in_process``) instead of in the read-ahead thread itself:
#: below, starting a process (~0.2 s) costs more than it saves;
#: ``CTXKEEP_READ_PROCESS_MB`` overrides (MiB)
PROCESS_READ_BYTES = int(float(os.environ.get("CTXKEEP_READ_PROCESS_MB", "64")) * 1024 * 1024)
#: new bytes from which those files are shared between ``reader_process.READERS``
#: reader processes (``reader_process.read_split``): each costs ~0.4 CPU s to start
#: (its imports, the rules compiled); ``CTXKEEP_SPLIT_READ_MB`` overrides (MiB)
SPLIT_READ_BYTES = int(float(os.environ.get("CTXKEEP_SPLIT_READ_MB", "64")) * 1024 * 1024)

#: ``run_ingest(defer_analytics=None)``: an ingest of at most this many new bytes into
#: a store that has a DuckDB file leaves the DuckDB sync to its readers
#: (``sinks.analytics_current.bring_current``): the hook path's few new lines are
#: searchable without importing DuckDB and pyarrow (~0.15-0.25 s of CPU) and opening
#: the file (docs/design.md, "Latency budget")
DEFER_ANALYTICS_BYTES = 1024 * 1024
#: ``run_ingest(defer_analytics=None)``: an ingest into a store for which DuckDB was never
#: built (``sqlite_store.analytics_built``: a first ingest) leaves DuckDB's first build
#: to its first reader (``sinks.analytics_current.bring_current``) when the store and
#: the new bytes come to at most this many bytes: the first ingest of a new user's few
#: MB paid ~0.45 s of CPU for DuckDB, pyarrow and genai-prices' imports and the sync
#: (issue 26: first ingest of the corpus <= 1.0 s), which the first report pays instead
#: (``ctxkeep report daily`` after a first ingest of the corpus: ``bench_interactive``).
#: A bigger first ingest syncs as it commits (``AnalyticsSyncer``), so no reader ever
#: waits for a large first build.
FIRST_BUILD_DEFER_BYTES = 32 * 1024 * 1024
#: an ingest of at most this many new bytes into a store ``store_safety.known_good``
#: skips ``check_integrity``'s read of every page (~3 s at 2 GB): the hook path
INCREMENTAL_CHECK_BYTES = DEFER_ANALYTICS_BYTES
#: an ingest of more new bytes than this is a bulk load: the writer thread turns FTS5's
#: automerge off inside its transactions (``writer.Writer(fts_bulk=)``,
#: ``sqlite_store.bulk_begin``) and the run's end merges what it skipped
#: (``sqlite_store.settle_segments``, after ``merge_segments``). A transaction's worth
#: (``writer.TXN_BYTES``, 64 MiB): a smaller run is mostly one transaction and the hook
#: path never pays a closing merge
FTS_BULK_BYTES = 64 * 1024 * 1024
#: the unreadable files an ingest summary names (all are counted)
UNREADABLE_LISTED = 10


def extract_transform(
    conn,
    parts: list[Part],
    tombs: dict,
    *,
    seen: InFlight | None = None,
    group_bytes: int = GROUP_BYTES,
    start_capture: Callable[[list], Future | None] | None = None,
) -> Generator[Group, None, None]:
    """Read the new bytes of the ``parts``' files (in order) and transform them into
    ``Group`` s for the writer, in order.

    Batches of consecutive files are grouped until ``group_bytes`` raw bytes (or
    ``GROUP_ENTRIES`` entries), and a group ends with a part that brought it to
    ``PART_GROUP_BYTES`` (else the next part's files join it; a part alone, as a
    Prefect task extracts it, ends its last group): the per-batch cost of Polars and
    SQLite is paid once per group, not once per file or per agent, and a group is
    stored in one transaction with its files' watermarks. Files are read and parsed in a read-ahead thread
    (``readahead.read_ahead``; ``CTXKEEP_READ_AHEAD=0`` reads in this thread); from
    ``PROCESS_READ_BYTES`` new bytes on, that thread takes the items from a reader
    process (``reader_process.read_in_process``).

    Each group is deduplicated against the store on ``conn`` (read only) and, with
    ``seen``, against the groups yielded before it, which need not be committed
    (``transform.transform_batch``). ``tombs``: ``sqlite_store.tombstoned``. A file
    that vanished after the plan is counted in the next group, not an error. Raises
    what a reader or a transform raised (after the groups before it).

    ``start_capture`` (``Writer.start_capture``): called with a group's bytes for the
    vault before its transform, so the capture runs beside it; what it returns is the
    group's ``vault_pending`` (None: the group keeps its ``raws`` for ``Writer.put``).
    """
    todo = [t for p in parts for t in p.todo]
    ends = set(itertools.accumulate(len(p.todo) for p in parts))
    ahead = Precomputed()
    group: list[tuple[ReadItem, Batch]] = []  # items with a batch, and the batch
    size = count = closed = files_read = vanished = 0
    release = [False]  # a big ingest: the counter's build pages given back once built

    def flush() -> Group:
        nonlocal group, size, count, files_read, vanished
        frames = pending = None
        quarantine, wms, changes, coverage, raws = [], {}, [], [], []
        late = False  # its raws sealed by the early reader after it sent them (``Group.pack_late``)
        skipped: dict = {}  # what tombstones dropped (``transform.drop_tombstoned``)
        if group:
            entries = [e for it, b in group for e in b.entries]
            quarantine = [dict(q, agent=it.file.agent) for it, b in group for q in b.quarantine]
            # last batch per file wins; a document read in several batches has its
            # watermark on the last one only
            wms = {b.watermark.path: b.watermark for it, b in group if b.watermark is not None}
            changes = [c for it, b in group for c in b.status_changes]
            coverage = [
                (it.file.agent, str(it.file.path), SOURCES[it.file.agent].PARSER_VERSION, b.coverage)
                for it, b in group
                if b.coverage is not None
            ]
            # a purged session's rows document stays out of the vault (its tombstone), and
            # so does what a shared sidecar (Kiro IDE's index) holds of it
            purged = tombs.get("session", ())
            raws = [
                captured_without(b.raw, purged)
                for it, b in group
                if b.raw is not None
                and not (b.raw.meta.get("vault_rows") and b.raw.meta.get("session") in purged)
            ]
            pending = start_capture(raws) if start_capture is not None else None
            if pending is not None:
                late = any(isinstance(r, readahead.LateRaw) for r in raws)
                raws = []
            merged = Batch(entries, [], None)
            pre = None
            if any(it.rows is not None for it, b in group):  # normalized by a reader process
                pre = unique_entries(
                    pl.concat(
                        [it.rows if it.rows is not None else normalized_rows(b.entries) for it, b in group],
                        how="vertical",
                    )
                )
            # a file its store keyed by uuid alone (``transform.twins``)
            legacy = any(
                it.file.agent in sqlite_store.UUID_KEYED_AGENTS
                and b.watermark is not None
                and (b.watermark.state or {}).get("ids", "uuid") == "uuid"
                for it, b in group
            )
            frames = transform.transform_batch(
                conn, merged, tombs, seen, frame=pre, pre=ahead, legacy=legacy, skipped=skipped
            )
            if release[0] and tokens.counter_built():
                # the counter's build read ~33 MB of its extension's read-only pages, which
                # stayed resident for the run (``tokens.release_counter_pages``; one read of
                # /proc/self/smaps, ~7-35 ms, once per big ingest)
                release[0] = False
                tokens.release_counter_pages()
        g = Group(
            frames,
            quarantine,
            list(wms.values()),
            changes,
            size,
            sum(b.bytes_read for it, b in group),
            sum(b.lines for it, b in group),
            files_read,
            vanished,
            raws=raws,
            coverage=coverage,
            vault_pending=pending,
            skipped=skipped,
            pack_late=late,
        )
        group, size, count, files_read, vanished = [], 0, 0, 0, 0
        return g

    pending = pending_bytes(todo)
    release[0] = pending >= PROCESS_READ_BYTES
    items: readahead.ReadAhead | reader_process.MergedReads | Generator[ReadItem, None, None]
    if readahead.READ_AHEAD > 0 and pending < PROCESS_READ_BYTES and prestart.waiting():
        # a first ingest: its first files read here, the rest by the reader started with the command
        seal = vault.enabled() and vault.home_of(conn) is not None
        items = reader_process.read_shared(todo, seal=seal)
    elif readahead.READ_AHEAD > 0 and pending >= PROCESS_READ_BYTES:
        # the vault's work on the bytes read (redaction, zstd) done there too
        seal = vault.enabled() and vault.home_of(conn) is not None
        readers = reader_process.READERS if pending >= SPLIT_READ_BYTES else 1
        # a database's whole rows document (none held to build on) sealed there too
        # (``capture.seal(rows=True)``: the same pack and rows wherever it is sealed):
        # the 200 MB tree's last group, ~0.13 CPU s of the ingest process's tail
        items = reader_process.read_split(todo, seal=seal, readers=readers, seal_rows=True)
    else:
        items = readahead.read_ahead(todo) if readahead.READ_AHEAD > 0 else readahead.read_files(todo)
    cuts: frozenset[int] = getattr(items, "cuts", frozenset())
    with closing(items):
        for item in items:
            if item.batch is not None:
                group.append((item, item.batch))
                if item.ahead is not None:
                    ahead.add(*item.ahead)
                size += item.batch.bytes_read
                count += item.entries
                if size >= group_bytes or count >= GROUP_ENTRIES:
                    yield flush()
                continue
            if item.read:
                files_read += 1
            else:
                vanished += 1
            closed += 1
            # a part ends with a group of its own; so do the files the ingest reads itself
            # beside an early reader (``reader_process.read_shared``: transformed while it reads)
            if closed in ends and size >= PART_GROUP_BYTES or closed in cuts:
                yield flush()
    if group or files_read or vanished:
        yield flush()


def extract_transform_part(
    home: Path, part: Part, tombs: dict, group_bytes: int = GROUP_BYTES
) -> list[Group]:
    """``extract_transform`` of one part on a read-only connection of its own, so it
    can run in any thread or process (a Prefect task): the part's groups, deduplicated
    against the store at ``home`` and within the part; ``ingest_files`` drops what
    earlier parts of the run stored (``transform.drop_written``). Raises StoreError
    for a store that does not exist, and what ``extract_transform`` raises."""
    conn = sqlite_store.connect(Path(home), readonly=True)
    try:
        return list(extract_transform(conn, [part], tombs, seen=InFlight(), group_bytes=group_bytes))
    finally:
        conn.close()


class PartFuture(Protocol):
    """What ``Submit`` returns: ``concurrent.futures.Future`` or a Prefect future."""

    def result(self) -> list[Group]: ...


#: starts the extract + transform of a part (``extract_transform_part(home, part,
#: tombs)``, e.g. as a Prefect task) and returns its future
Submit = Callable[[Part, dict], PartFuture]

#: parts submitted ahead of the one the writer stores (their groups wait in memory)
PARTS_AHEAD = 2
#: new bytes from which a part (then one file: ``split_parts`` cuts before a file that
#: would pass ``PART_BYTES``) is not submitted but streamed in the writer's process
#: (``extract_transform``, bounded by the read-ahead): a submitted part's groups are
#: held whole until the writer takes them, and one Claude Code session can hold
#: several GB (anthropics/claude-code#88983: 8.15 GB; issue 26's 2 GB file)
STREAM_PART_BYTES = 128 * 1024 * 1024


def _submitted(
    parts: list[Part],
    tombs: dict,
    submit: Submit,
    ahead: int = PARTS_AHEAD,
    committed: Callable[[], int] | None = None,
    stream: Callable[[Part, InFlight], Iterator[Group]] | None = None,
) -> Generator[Group, None, None]:
    """The groups of ``parts`` extracted and transformed by ``submit`` (at most
    ``ahead`` + 1 parts at a time), in part order, without what earlier parts hold
    (``drop_written``). A part of more than ``STREAM_PART_BYTES`` new bytes is not
    submitted: ``stream(part, seen)`` (``extract_transform`` here, ``seen`` its
    record of its own groups in flight) yields its groups one at a time, so memory
    stays bounded however big one session file is.

    ``committed()``: the groups yielded here that the writer has committed
    (``Writer.stored``). A part is transformed after its submission, so it saw in the
    store every group committed before it was submitted: what ``drop_written`` must
    still drop for it are the groups from that count on, and the older generations
    are forgotten (without ``committed`` every entry id of the run is kept)."""
    floor = [0]
    done = committed if committed is not None else (lambda: 0)
    written = InFlight((lambda: floor[0]) if committed is not None else None)
    yielded = 0

    def start(p: Part):
        if stream is not None and pending_bytes(p.todo) > STREAM_PART_BYTES:
            return done(), p  # streamed when its turn comes
        return done(), submit(p, tombs)

    rest = iter(parts)
    pending = collections.deque(start(p) for p in itertools.islice(rest, ahead + 1))
    while pending:
        floor[0], fut = pending.popleft()
        if isinstance(fut, Part):
            assert stream is not None

            def own(first: int = yielded) -> int:  # the stream's groups are the writer's from here on
                return max(0, done() - first)

            seen = InFlight(own if committed is not None else None)
            groups: Iterator[Group] = stream(fut, seen)
        else:
            groups = iter(fut.result())
        nxt = next(rest, None)
        if nxt is not None:
            pending.append(start(nxt))
        written.prune()
        while True:
            now = done()  # every store read of the next group starts after these commits
            g = next(groups, None)
            if g is None:
                break
            if isinstance(fut, Part):
                floor[0] = now
                written.prune()
            if g.frames is not None:
                g.frames = drop_written(g.frames, written)
            yielded += 1
            yield g


def ingest_files(
    conn,
    todo: Todo,
    tombs: dict,
    on_bytes: Callable[[int], None] | None = None,
    group_bytes: int = GROUP_BYTES,
    on_commit: Callable[..., None] | None = None,
    writer: bool | None = None,
    submit: Submit | None = None,
    parts_ahead: int = PARTS_AHEAD,
    on_read: Callable[[], None] | None = None,
    usage_held: set[str] | None = None,
    fts_bulk: bool = False,
) -> dict:
    """Read the new bytes of ``todo`` files, transform and load them: the one loop.

    ``todo`` is split into parts (``plan.split_parts``: one agent's files, in plan
    order); ``extract_transform`` makes their groups (in this thread), or, with
    ``submit``, one ``extract_transform_part`` per part run elsewhere (Prefect tasks,
    ``parts_ahead`` parts ahead, e.g. one per worker of a Dask cluster) whose groups
    are taken in part order. Either way the store ends up the same; a crash loses no
    data and repeats nothing (a group's watermarks are stored with its entries).

    With ``writer`` (default ``writer.WRITER``, ``CTXKEEP_WRITER=0`` turns it off)
    groups are stored by a writer thread on its own connection to the same database
    file (``sqlite_store.sibling``) while this thread transforms the next group, at
    most ``WRITE_AHEAD`` groups behind; groups are stored in order, each with its
    watermarks, several to a SQLite transaction (``writer.TXN_ROWS``, ``TXN_BYTES``,
    ``TXN_SECONDS``; without the thread, one a transaction). The transform then dedups
    against the store and against the groups not committed yet (``transform_batch``'s
    ``seen``), so the store ends up the same as after a sequential run. An in-memory
    database is loaded here.

    Status changes of the batches (``Batch.status_changes``) are applied after the
    group's entries, in the same transaction. ``on_bytes(raw bytes)`` is called after
    each group's commit (the COMMIT of the transaction that holds it); so is ``on_commit(n, first_rowid, entries)`` when the group
    stored anything (``n``: new entries + status changes; ``entries``: the new
    entries, ``STORED_COLUMNS``, whose SQLite rowids run from ``first_rowid`` on, or
    both None when that is not certain), e.g. ``AnalyticsSyncer.on_commit``. Both
    may run in the writer thread, in commit order. ``on_read()`` is called once the
    last group is handed to the writer, before its last commits (in this thread;
    ``AnalyticsSyncer.reading_done``). ``usage_held``: a set each group adds the
    usage keys it may update in place to (``Writer``'s; ``AnalyticsSyncer.usage_held``).
    ``fts_bulk``: FTS5's automerge off inside the writer thread's transactions
    (``Writer``'s); the caller then merges the FTS segments at the end
    (``sqlite_store.settle_segments``).

    Returns ``writer.empty_totals()`` filled: ``{"entries_new", "quarantined",
    "bytes", "lines", "files_read", "vanished", "status_changed": int, "per_agent":
    {agent: new entries}}``. Raises what a read, a transform or a load raised (groups
    before it stay committed).
    """
    tot = empty_totals()
    w = Writer(
        conn,
        tot,
        on_bytes,
        on_commit,
        thread=writer_mod.WRITER if writer is None else writer,
        usage_held=usage_held,
        fts_bulk=fts_bulk,
    )
    # this connection only reads while the writer thread stores (the dedup lookups):
    # a small page cache (``sqlite_store.reading_cache``; the writer's is its own)
    with sqlite_store.reading_cache(conn) if w.threaded else nullcontext():
        parts = split_parts(todo)
        if submit is None:
            seen = InFlight(lambda: w.stored) if w.threaded else None
            groups = extract_transform(
                conn, parts, tombs, seen=seen, group_bytes=group_bytes, start_capture=w.start_capture
            )
        else:
            groups = _submitted(
                parts,
                tombs,
                submit,
                parts_ahead,
                committed=lambda: w.stored,
                stream=lambda p, seen: extract_transform(
                    conn, [p], tombs, seen=seen, group_bytes=group_bytes
                ),
            )
        try:
            with closing(groups):
                for g in groups:
                    prestart.trace("ingest", "group")
                    w.put(g)
        except BaseException as e:  # Ctrl-C: what is not committed yet is dropped at once
            w.close(raise_error=False, abandon=isinstance(e, KeyboardInterrupt))
            raise
        prestart.trace("ingest", "read")
        try:
            if on_read is not None:
                on_read()
            w.close()
        except KeyboardInterrupt:  # while the last groups were stored: the rest dropped
            w.close(raise_error=False, abandon=True)
            raise
    prestart.trace("ingest", "written")
    return tot


def ingest_file(
    conn, file: SourceFile, wm: Watermark | None, tombs: dict, on_bytes: Callable[[int], None] | None = None
) -> dict:
    """Read one file's new bytes in batches, transform and load each batch with its
    watermark and status changes. Returns ``{"entries_new", "quarantined", "bytes",
    "lines", "vanished", "status_changed"}``."""
    r = ingest_files(conn, [(file, wm)], tombs, on_bytes)
    return {
        "entries_new": r["entries_new"],
        "quarantined": r["quarantined"],
        "bytes": r["bytes"],
        "lines": r["lines"],
        "vanished": bool(r["vanished"]),
        "status_changed": r["status_changed"],
    }


def run_ingest(
    home: Path,
    *,
    agents=None,
    paths=None,
    ctx: DiscoveryContext | None = None,
    force: bool = False,
    on_plan: Callable[[Plan], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    wait: bool = True,
    files: list[SourceFile] | None = None,
    flow: str = "ingest",
    submit: Submit | None = None,
    parts_ahead: int = PARTS_AHEAD,
    defer_analytics: bool | None = False,
) -> Summary:
    """The whole ingest: lock, plan, read every changed file (``ingest_files``), sync
    DuckDB (in a background thread as groups commit, ``AnalyticsSyncer``), record the
    run in ``runs`` as ``flow``.

    ``agents``/``paths``/``ctx``/``force``/``files``: ``plan``'s (backfill passes its
    selection as ``files`` with ``force``, which ignores watermarks).
    ``on_plan``/``on_bytes`` default to ``hooks``'; ``submit`` runs each part's
    extract + transform elsewhere (``flows.ingest`` submits Prefect tasks,
    ``pipeline.cluster`` Dask tasks), ``parts_ahead`` parts ahead of the writer.
    ``defer_analytics``: True leaves DuckDB to its readers
    (``sinks.analytics_current.bring_current``; the summary's ``analytics`` note says
    so), None defers as ``_defers_analytics`` decides (at most ``DEFER_ANALYTICS_BYTES``
    new bytes into a DuckDB that exists; a first ingest of at most
    ``FIRST_BUILD_DEFER_BYTES``), False (the default) syncs DuckDB in the run.
    Returns the ``Summary``. Raises StoreBusy when ``wait`` is False and another
    maintenance run holds the lock; else what the run raised (recorded as failed)."""
    on_plan = on_plan or hooks.on_plan
    on_bytes = on_bytes or hooks.on_bytes
    t0 = time.perf_counter()
    home = cfgmod.ensure_home(Path(home))
    with hold(home, -1 if wait else 0, what=flow, on_wait=hooks.on_wait):
        # known undamaged at the start (``store_safety.known_good``; before this run's own
        # open writes), or checked by ``_run_locked``: then still so once it committed
        good = [store_safety.known_good(home)]
        conn = sqlite_store.connect(home)
        try:
            s = _run_locked(
                conn,
                home,
                agents,
                paths,
                ctx,
                force,
                on_plan,
                on_bytes,
                t0,
                files,
                flow,
                submit,
                parts_ahead,
                defer_analytics,
                good,
            )
        finally:
            conn.close()
        if good[0]:
            store_safety.mark_good(home)
        prestart.trace("ingest", "end")
        return s


def _run_locked(
    conn,
    home,
    agents,
    paths,
    ctx,
    force,
    on_plan,
    on_bytes,
    t0,
    files=None,
    flow="ingest",
    submit=None,
    parts_ahead=PARTS_AHEAD,
    defer_analytics: bool | None = False,
    good: list[bool] | None = None,
) -> Summary:
    """``run_ingest``'s work under the lock; ``good[0]`` says whether the store was
    known undamaged at the start, set True once ``check_integrity`` passed."""
    good = good if good is not None else [False]
    prestart.trace("ingest", "engine")
    recovery.recover(conn, home)  # an operation a crash interrupted is completed first
    p = plan(home, conn, agents=agents, paths=paths, ctx=ctx, force=force, files=files)
    if on_plan:
        on_plan(p)
    # about to write: never into a damaged b-tree. A few new bytes into a store known
    # undamaged since its last full check and untouched but by ctxkeep (the hook path)
    # skip the whole-store read; every bigger run reads every page
    if p.todo and not (good[0] and p.pending_bytes <= INCREMENTAL_CHECK_BYTES):
        store_safety.check_integrity(conn, Path(home) / STORE_DB)
        good[0] = True
    s = Summary(files=len(p.todo) + p.unchanged, problems=list(p.problems))
    with sqlite_store.recorded_run(conn, flow, t0=t0) as run:
        run.summary = s.as_dict
        tombs = sqlite_store.tombstoned(conn)
        before = sqlite_store.coverage_ledger(conn) if p.todo else []  # the drift alerts' base
        if defer_analytics is None:
            defer_analytics = _defers_analytics(conn, Path(home), p)
        if defer_analytics:
            _fill(
                s,
                ingest_files(
                    conn,
                    p.todo,
                    tombs,
                    on_bytes,
                    submit=submit,
                    parts_ahead=parts_ahead,
                    fts_bulk=_bulk(p),
                ),
                before,
            )
            if s.entries_new or s.status_changed:
                s.analytics = "analytics: deferred (the next report brings DuckDB current)"
        else:
            _ingest_synced(conn, home, p, tombs, s, on_bytes, submit, parts_ahead, before)
        if s.tombstoned:  # when each tombstone was set (the summary's "purged on")
            from ctxkeep.sinks.sqlite.tombstones import created

            dates = created(conn)
            for t in s.tombstoned:
                t["purged_at"] = dates.get((t["scope"], t["value"]))
        # a bigger run (one that reads every page for ``check_integrity``) merges the FTS
        # segments when they are spread (``sqlite_store.merge_segments``: once each time
        # an index grew by half; searches walk fewer segments); the hook path never does
        # (an index merged into one needs no settling); a bulk load, its FTS5 automerge
        # off, merges the levels it left with 4 segments or more (``settle_segments``)
        if s.entries_new and (p.pending_bytes > INCREMENTAL_CHECK_BYTES or _bulk(p)):
            with sqlite_store.write(conn):
                merged = sqlite_store.merge_segments(conn)
                if _bulk(p):
                    sqlite_store.settle_segments(conn, skip=merged)
    s.seconds = run.seconds
    prestart.trace("ingest", "recorded")
    return s


def _bulk(p: Plan) -> bool:
    """Whether the run of plan ``p`` is a bulk load (``FTS_BULK_BYTES``)."""
    return p.pending_bytes > FTS_BULK_BYTES


def _defers_analytics(conn, home: Path, p: Plan) -> bool:
    """``run_ingest(defer_analytics=None)``'s choice: leave DuckDB to its readers when
    it exists and the plan holds at most ``DEFER_ANALYTICS_BYTES`` new bytes (the hook
    path), or when it was never built and the store with the plan's new bytes comes to
    at most ``FIRST_BUILD_DEFER_BYTES`` (a small first ingest)."""
    if (home / ANALYTICS_DB).exists():
        return p.pending_bytes <= DEFER_ANALYTICS_BYTES
    if sqlite_store.analytics_built(conn):  # deleted since its first build: rebuilt here
        return False
    try:
        held = (home / STORE_DB).stat().st_size
    except OSError:
        held = 0
    return held + p.pending_bytes <= FIRST_BUILD_DEFER_BYTES


def _ingest_synced(
    conn, home: Path, p: Plan, tombs: dict, s: Summary, on_bytes, submit, parts_ahead, before: list
) -> None:
    """``ingest_files`` of the plan ``p`` with DuckDB synced as groups commit
    (``AnalyticsSyncer``) and at the end; fills ``s``."""
    # the run's new usage rows and texts synced as groups commit (``duckdb_store.UsageSteps``)
    # the usage keys its groups update in place (the writer fills it): the closing
    # sync of a fresh store compares those and the rows above the last step
    held: set[str] = set()
    syncer = AnalyticsSyncer(home, usage_after=sqlite_store.usage_top(conn), usage_held=held)
    stopped = False
    try:
        r = ingest_files(
            conn,
            p.todo,
            tombs,
            on_bytes,
            on_commit=syncer.on_commit,
            submit=submit,
            parts_ahead=parts_ahead,
            on_read=syncer.reading_done,
            usage_held=held,
            fts_bulk=_bulk(p),
        )
    except KeyboardInterrupt:  # Ctrl-C: no closing sync (DuckDB catches up next time)
        stopped = True
        raise
    finally:  # the groups committed before an error are synced too
        if hooks.on_phase and not stopped:
            hooks.on_phase("analytics")
        s.analytics = syncer.finish(abandon=stopped)
        if syncer.marks:
            sqlite_store.mark_analytics_synced(conn, *syncer.marks)
    _fill(s, r, before)
    if not syncer.started and (
        s.entries_new
        or s.status_changed
        or not (home / ANALYTICS_DB).exists()
        or sqlite_store.analytics_behind(conn)
    ):
        if hooks.on_phase:
            hooks.on_phase("analytics")
        s.analytics = sync_analytics(conn, home)


def _fill(s: Summary, r: dict, before: list) -> None:
    """Copy ``ingest_files``' totals ``r`` into the summary ``s``, with the format
    drift its coverage tallies show against the ledger as it stood ``before`` the run
    (``transforms.drift.run_alerts``), the files not in their agent's format at all
    taken out first (``writer.unreadable_files``: counted and named, not drift)."""
    s.files_read, s.files_vanished = r["files_read"], r["vanished"]
    s.bytes, s.lines = r["bytes"], r["lines"]
    s.entries_new, s.quarantined = r["entries_new"], r["quarantined"]
    s.tombstoned = [
        {"scope": scope, "value": value, "records": n, "sessions": len(sessions)}
        for (scope, value), (n, sessions) in sorted((r.get("tombstoned") or {}).items())
    ]
    s.status_changed = r["status_changed"]
    s.per_agent = r["per_agent"]
    if "file_tallies" in r:  # a file not in its agent's format is no drift of the format
        bad = unreadable_files(r)
        drop_unreadable(r, bad)
        s.files_unreadable = len(bad)
        s.unreadable = [path for _agent, path in bad[:UNREADABLE_LISTED]]
    s.coverage_alerts = drift.run_alerts(before, r["coverage"])
    s.not_understood = drift.run_not_understood(before, r["coverage"])
    unended = r.get("unended") or []
    s.lines_unended = len(unended)
    s.unended = sorted(set(unended))[:UNREADABLE_LISTED]

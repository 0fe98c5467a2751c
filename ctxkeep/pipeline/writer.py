"""The load: transformed groups stored one by one in commit order, each in one
transaction with its watermarks, by a writer thread on its own connection (or in
the caller's thread), summing the run's figures."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import polars as pl

from ctxkeep.pipeline.readahead import LateRaw, sealed_raws
from ctxkeep.schema import STORED_COLUMNS
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks import vault
from ctxkeep.sources.readers.jsonl import UNENDED

#: groups transformed ahead of the writer thread at most (besides the one it loads)
WRITE_AHEAD = 1
#: store groups in a writer thread (``engine.ingest_files``); ``CTXKEEP_WRITER=0`` turns it off
WRITER = os.environ.get("CTXKEEP_WRITER", "1") != "0"
_END = object()
#: usage keys ``Writer`` collects in ``usage_held`` at most: past it the set holds only
#: ``HELD_OVERFLOW`` and the closing sync compares every row, as before (the keys cost
#: ~100 bytes each; a user whose forks copy whole sessions re-logs most keys)
USAGE_HELD_MAX = 200_000
#: the one member of an overflowed ``usage_held`` (no usage key is empty)
HELD_OVERFLOW = ""


def empty_totals() -> dict:
    """The figures ``store_group`` sums: ``{"entries_new", "quarantined", "bytes"
    (raw bytes), "lines", "files_read", "vanished", "status_changed": int,
    "per_agent": {agent: new entries}, "coverage": {(agent, agent version):
    sources.coverage.VersionTally}`` (the run's own tallies, summed), "file_tallies":
    {(agent, path): [records, quarantined, known version]}}`` (per file: records read,
    records quarantined, whether a record named an agent version; ``unreadable_files``
    reads it), "unended": [path]`` (a file's unended last line quarantined once the
    file was idle, ``sources.readers.jsonl.UNENDED``, one item per row)."""
    return {
        "entries_new": 0,
        "quarantined": 0,
        "bytes": 0,
        "lines": 0,
        "files_read": 0,
        "vanished": 0,
        "per_agent": {},
        "status_changed": 0,
        "coverage": {},
        "file_tallies": {},
        "unended": [],
    }


@dataclass
class Group:
    """One transformed group, ready for ``sqlite_store.load_batch``: ``frames``
    (``transform.transform_batch``'s, None when the group only closes files),
    quarantine rows, the watermarks of its files, status changes, ``size`` (new raw
    bytes, for progress), ``bytes_read``, ``lines``, and the files whose reading
    ended since the group before (``files_read``, ``vanished``), and the bytes read
    for the vault (``raws``: ``RawCapture`` s, made into ``vault_group`` by
    ``Writer.put``). Picklable: a Prefect task may return it from another process."""

    frames: dict | None
    quarantine: list
    watermarks: list
    changes: list
    size: int
    bytes_read: int
    lines: int
    files_read: int = 0
    vanished: int = 0
    raws: list = field(default_factory=list)
    vault_group: vault.PreparedGroup | None = None
    #: the capture of ``raws`` running in the writer's capture thread
    #: (``Writer.start_capture``; in-process only: a group a Prefect task returns comes
    #: with ``raws`` and without it)
    vault_pending: Future | None = None
    #: ``(agent, path, parser_version, sources.coverage.Tally)`` per batch, in order
    coverage: list = field(default_factory=list)


def _store_group(conn, g: Group, tot: dict, on_bytes, on_commit, usage_held: set[str] | None = None) -> None:
    """Load one group in one transaction and add its figures to ``tot`` (and to
    ``usage_held`` the usage keys the store held before it: ``load_batch``'s)."""
    tot["files_read"] += g.files_read
    tot["vanished"] += g.vanished
    if g.frames is None:
        return
    vg = g.vault_group
    n = sqlite_store.load_batch(
        conn,
        quarantine=g.quarantine,
        watermarks=g.watermarks,
        status_changes=g.changes,
        # the vault's manifest rows commit with the watermarks (its packs are durable)
        before_watermarks=None if vg is None else (lambda c: vault.record_in(c, vg)),
        coverage=g.coverage,
        usage_held=usage_held,
        **g.frames,
    )
    add_tallies(tot["coverage"], g.coverage, tot["file_tallies"])
    tot["status_changed"] += len(g.changes)
    tot["entries_new"] += n
    if n:
        for agent, k in g.frames["entries"].group_by("agent").len().iter_rows():
            tot["per_agent"][agent] = tot["per_agent"].get(agent, 0) + k
    for q in g.quarantine:
        if "retract" in q:  # (a judged unended line's rows taken back: no bad line)
            continue
        tot["quarantined"] += 1
        if q["reason"].startswith(UNENDED):
            tot.setdefault("unended", []).append(q["path"])
    tot["bytes"] += g.bytes_read
    tot["lines"] += g.lines
    if on_bytes:
        on_bytes(g.size)
    if on_commit and (n or g.changes):
        first = _first_rowid(conn, g.frames["entries"], n)
        on_commit(
            n + len(g.changes), first, None if first is None else g.frames["entries"].select(STORED_COLUMNS)
        )


def add_tallies(into: dict, items: list, per_file: dict | None = None) -> None:
    """Sum the ``(agent, path, parser_version, Tally)`` items' figures into ``into``
    (``{(agent, agent version): VersionTally}``) and, with ``per_file``, each file's
    ``[records, quarantined, known version]`` into ``per_file[(agent, path)]``."""
    from ctxkeep.sources.coverage import UNKNOWN_TYPES_MAX, VersionTally

    for agent, path, _pv, tally in items:
        if tally is None:
            continue
        if per_file is not None:
            f = per_file.setdefault((agent, path), [0, 0, False])
            for v, t in tally.versions.items():
                f[0] += t.records
                f[1] += t.quarantined
                f[2] = f[2] or (bool(v) and bool(t.records))
        for v, t in tally.versions.items():
            acc = into.setdefault((agent, v), VersionTally())
            acc.records += t.records
            acc.parsed += t.parsed
            acc.entries += t.entries
            acc.quarantined += t.quarantined
            for k, (n, sample) in t.unknown.items():
                if k in acc.unknown:
                    acc.unknown[k][0] += n
                elif len(acc.unknown) < UNKNOWN_TYPES_MAX:
                    acc.unknown[k] = [n, sample]


def _first_rowid(conn, entries: pl.DataFrame, n: int) -> int | None:
    """The SQLite rowid of the first of the ``n`` entries a load just inserted, when
    they are all of ``entries`` and hold consecutive rowids in frame order (one
    writer, INSERT in order); else None."""
    if not n or n != entries.height:
        return None
    ids = entries["entry_id"]
    rows = dict(
        conn.execute(
            "SELECT entry_id, rowid FROM entries WHERE entry_id IN (?, ?)", (ids[0], ids[-1])
        ).fetchall()
    )
    first, last = rows.get(ids[0]), rows.get(ids[-1])
    if first is None or last is None or last - first != n - 1:
        return None
    return first


class Writer:
    """Stores groups in order, adding their figures to ``tot``
    (``empty_totals()``): in a writer thread on its own write connection
    (``sqlite_store.sibling``) when ``thread`` and ``conn`` is a database file, else
    in the caller's thread on ``conn`` (an in-memory database; ``threaded`` tells).
    ``on_bytes(raw bytes)`` and ``on_commit(n, first_rowid, entries)`` are called
    after each group's commit, in commit order, in the thread that stored it.
    ``usage_held``: a set the usage keys each group may update in place are added to
    (``load_batch``'s), e.g. ``AnalyticsSyncer.usage_held``; read it after ``close``.
    Past ``USAGE_HELD_MAX`` keys it is left holding ``HELD_OVERFLOW`` alone.

    The first error stops the thread: later groups are not loaded (as in a
    sequential run, where the error ends the run), and ``put``/``close`` raise it in
    the caller's thread."""

    def __init__(
        self,
        conn,
        tot: dict,
        on_bytes: Callable[[int], None] | None = None,
        on_commit: Callable[..., None] | None = None,
        thread: bool = True,
        usage_held: set[str] | None = None,
    ) -> None:
        self.tot, self.on_bytes, self.on_commit = tot, on_bytes, on_commit
        self.usage_held = usage_held
        self.own = conn
        #: the vault's capture (None: off, or an in-memory store)
        self.capturer = vault.capturer_for(conn)
        self.conn = sqlite_store.sibling(conn) if thread else None
        self.threaded = self.conn is not None
        self.error: BaseException | None = None
        #: ``close(abandon=True)``: the groups not committed yet are dropped
        self.abandoned = False
        #: groups with frames committed so far, in order (``transform.InFlight``'s
        #: ``committed``: an int the writer thread sets after each commit)
        self.stored = 0
        #: the vault's capture thread (``start_capture``): one, so captures run in group order
        self.captures: ThreadPoolExecutor | None = None
        if not self.threaded:
            return
        self.q: queue.Queue = queue.Queue(maxsize=WRITE_AHEAD)
        if self.capturer is not None:
            self.captures = ThreadPoolExecutor(1, thread_name_prefix="ctxkeep-capture")
            # its reads (the objects and rows documents the vault holds) on a connection of
            # its own: the caller's reads for the transform run at the same time
            self.capturer.conn = sqlite_store.sibling(conn)
        self.t = threading.Thread(target=self._run, name="ctxkeep-writer", daemon=True)
        self.t.start()

    def _run(self) -> None:
        while True:
            g = self.q.get()
            if g is _END:
                return
            if self.error is not None or self.abandoned:
                if g.vault_pending is not None:
                    g.vault_pending.cancel()
                continue  # drain: nothing after a failed group (or a stop) is stored
            try:
                if g.vault_pending is not None:  # its pack written (durable) before its rows commit
                    g.vault_group, g.vault_pending = g.vault_pending.result(), None
                _store_group(self.conn, g, self.tot, self.on_bytes, self.on_commit, self.usage_held)
                self._held_bound()
                self.stored += g.frames is not None
            except BaseException as e:  # raised in the caller's thread
                self.error = e

    def _held_bound(self) -> None:
        """``usage_held`` past ``USAGE_HELD_MAX``: emptied but for ``HELD_OVERFLOW``, and
        no more keys are added."""
        held = self.usage_held
        if held is not None and len(held) > USAGE_HELD_MAX:
            held.clear()
            held.add(HELD_OVERFLOW)
            self.usage_held = None

    def start_capture(self, raws: list) -> Future | None:
        """Start the vault's capture of ``raws`` (``vault.Capturer.prepare``: redaction,
        chunks, zstd, the pack written) in the capture thread, in call order, and return
        its future for the group's ``vault_pending`` (the writer waits for it before the
        group's commit); None when nothing is captured here (no raws, the vault off, or
        no writer thread: ``put`` then prepares in the caller's thread). The capture then
        overlaps the caller's transform of the same group (``engine.extract_transform``
        starts it before the transform): on the corpus's first ingest it was ~0.3 s of
        the main thread's ~0.9 s of CPU, the last group's (Crush's rows document, 0.11 s)
        on the critical path after everything else. A ``readahead.LateRaw`` among ``raws``
        (a first ingest's early reader seals after it sent the batches) is waited for in
        that thread (``readahead.sealed_raws``), so the transform does not wait for it."""
        if not raws or self.captures is None or self.error is not None:
            return None
        capturer = self.capturer
        assert capturer is not None  # the pool exists only with it
        if any(isinstance(r, LateRaw) for r in raws):  # sealed by the early reader after it sent them
            return self.captures.submit(lambda: capturer.prepare(sealed_raws(raws)))
        return self.captures.submit(capturer.prepare, raws)

    def put(self, g: Group) -> None:
        """Store a group, or queue it for the thread (waits while ``WRITE_AHEAD``
        groups wait) with its index terms computed here (``with_index_terms``), while
        the thread loads the group before; its bytes are redacted, compressed and
        written to the vault (``vault.Capturer.prepare``) in the capture thread
        (``start_capture``, unless already started), or here without a writer thread.
        Raises the writer's error, if any."""
        if g.raws:
            pending = self.start_capture(g.raws)
            if pending is not None:
                g.vault_pending = pending
            elif self.capturer is not None:
                g.vault_group = self.capturer.prepare(sealed_raws(g.raws))
            g.raws = []
        if not self.threaded:
            _store_group(self.own, g, self.tot, self.on_bytes, self.on_commit, self.usage_held)
            self._held_bound()
            self.stored += g.frames is not None
            return
        if g.frames is not None:  # the texts' index terms here, beside the load before
            g.frames = sqlite_store.with_index_terms(g.frames)
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.q.put(g, timeout=0.1)
                return
            except queue.Full:
                continue

    def close(self, raise_error: bool = True, abandon: bool = False) -> None:
        """Wait until every queued group is stored, stop the thread, close its
        connection; raise its error (``raise_error``). ``abandon`` (Ctrl-C): the queued
        groups are dropped and the one being stored is interrupted (``sqlite3``'s
        ``interrupt``: its transaction rolls back), so the stop does not wait for up to
        two groups' loads (a late group of a 1 GB session: seconds; newuser20 F8). What
        was committed stays; the rest is read again by the next run (each group's
        watermarks commit with its rows; a vault pack written for a group that did not
        commit is an orphan, as after a kill)."""
        if not self.threaded:
            return
        if abandon:
            self.abandoned = True
            while True:  # the queued groups (at most ``WRITE_AHEAD``) dropped: room for _END
                try:
                    g = self.q.get_nowait()
                except queue.Empty:
                    break
                if g is not _END and g.vault_pending is not None:
                    g.vault_pending.cancel()
        self.q.put(_END)
        while abandon and self.t.is_alive():
            # an interrupt between two statements is cleared by the next one: repeated
            assert self.conn is not None  # threaded
            self.conn.interrupt()
            self.t.join(0.02)
        self.t.join()
        if self.captures is not None:  # a capture of a group never queued (an error) ends here
            self.captures.shutdown(wait=True, cancel_futures=True)
            if self.capturer is not None and self.capturer.conn is not None:
                self.capturer.conn.close()
        if self.conn is not None:  # set when threaded
            self.conn.close()
        if raise_error and self.error is not None:
            raise self.error


def unreadable_files(tot: dict) -> list[tuple[str, str]]:
    """The ``(agent, path)`` of the files whose every record this run read went to the
    quarantine (none parsed as JSON of the agent's shape) and none named an agent
    version (``file_tallies``): a file in an agent's folder that is not in its format at
    all (garbage, another program's file). It says nothing of the agent's format, so
    ``drop_unreadable`` takes it out of the run's tallies before drift is judged. (A
    file of JSON records whose types the parser does not know is not one: those are
    tallied as types not understood, which drift reports. Nor is a file whose only
    records were unended last lines quarantined after the idle time, ``tot["unended"]``:
    an agent that died inside its first line; the summary names those.)"""
    unended: dict[str, int] = {}
    for path in tot.get("unended") or ():
        unended[path] = unended.get(path, 0) + 1
    return sorted(
        k
        for k, (records, quarantined, known) in tot["file_tallies"].items()
        if records and quarantined >= records and not known and records > unended.get(k[1], 0)
    )


def drop_unreadable(tot: dict, files: list[tuple[str, str]]) -> None:
    """Subtract the records of ``files`` (``unreadable_files``: all quarantined, under
    the unknown version ``""``) from the run's ``coverage`` tallies."""
    for agent, path in files:
        records = tot["file_tallies"][(agent, path)][0]
        t = tot["coverage"].get((agent, ""))
        if t is None:
            continue
        t.records -= records
        t.quarantined -= min(records, t.quarantined)
        if t.records <= 0:
            del tot["coverage"][(agent, "")]

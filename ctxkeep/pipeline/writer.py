"""The load: transformed groups stored one by one in order, each with its watermarks,
by a writer thread on its own connection (several groups to a SQLite transaction,
``TXN_ROWS``/``TXN_BYTES``/``TXN_SECONDS``) or in the caller's thread (one
transaction a group), summing the run's figures."""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import polars as pl

from ctxkeep.pipeline import prestart
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

# A writer thread stores several groups in one SQLite transaction (issue 26, target 2):
# the store's random-key unique indexes (``entry_id``, ``content_hash``, ``usage_key``)
# take each insert to its own leaf, so a group's COMMIT writes to the WAL about a page
# per row once the indexes outgrow the cache, and the cost per group grows with the
# store; rows of several groups share the leaves (and the FTS5 flushes) of one COMMIT
# (2 GB fresh ingest, same run as main: COMMITs 9.02 -> 5.63 CPU s, ``load_batch`` with
# them 54.86 -> 52.61, the writer thread 55.12 -> 52.69; docs/design.md, "Throughput").
# The transaction commits as soon as one bound is reached, and always at the end of
# the run (``close``; on Ctrl-C, ``close(abandon=True)``, it is rolled back), and before
# the writer would sit idle past ``TXN_SECONDS`` (a reader slow to give the next group).
#: new entries a transaction holds before it commits (``CTXKEEP_TXN_ROWS``; 1: a
#: transaction a group, as before)
TXN_ROWS = int(os.environ.get("CTXKEEP_TXN_ROWS", "30000"))
#: raw bytes read of the groups a transaction holds before it commits (``CTXKEEP_TXN_MB``, MiB)
TXN_BYTES = int(float(os.environ.get("CTXKEEP_TXN_MB", "64")) * 1024 * 1024)
#: wall seconds a transaction stays open at most (``CTXKEEP_TXN_SECONDS``): what an
#: interactive reader (search during an ingest) and DuckDB lag behind the groups stored
TXN_SECONDS = float(os.environ.get("CTXKEEP_TXN_SECONDS", "5"))


def empty_totals() -> dict:
    """The figures ``store_group`` sums: ``{"entries_new", "quarantined", "bytes"
    (raw bytes), "lines", "files_read", "vanished", "status_changed": int,
    "per_agent": {agent: new entries}, "coverage": {(agent, agent version):
    sources.coverage.VersionTally}`` (the run's own tallies, summed), "file_tallies":
    {(agent, path): [records, quarantined, known version]}}`` (per file: records read,
    records quarantined, whether a record named an agent version; ``unreadable_files``
    reads it), "unended": [path]`` (a file's unended last line quarantined once the
    file was idle, ``sources.readers.jsonl.UNENDED``, one item per row), "tombstoned":
    {(scope, value): [entries, {session ids}]}`` (what tombstones dropped,
    ``transform.drop_tombstoned``)."""
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
        "tombstoned": {},
    }


def add_skipped(into: dict, skipped: dict | None) -> None:
    """Sum ``transform.drop_tombstoned``'s ``skipped`` into ``into`` (same shape)."""
    for key, (n, sessions) in (skipped or {}).items():
        slot = into.setdefault(key, [0, set()])
        slot[0] += n
        slot[1].update(sessions)


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
    #: what tombstones dropped: ``{(scope, value): [entries, {session ids}]}``
    #: (``transform.drop_tombstoned``)
    skipped: dict = field(default_factory=dict)
    #: its ``raws`` are sealed late (``readahead.LateRaw``: a first ingest's early reader
    #: seals after it sent the batches): the writer loads its rows while the pack is
    #: still being made and waits for it only where its manifest rows go (``_late_pack``)
    pack_late: bool = False


class _PackFailed(Exception):
    """The vault's pack of a group whose rows were being loaded (``Group.pack_late``)
    failed: ``Writer._store`` takes the group's rows back alone (its savepoint) and the
    capture's error (``__cause__``) is the writer's, as for a pack that failed before
    the load."""


def _late_pack(g: Group) -> vault.PreparedGroup:
    """``g``'s pack (``vault_pending``'s result), waited for here; raises
    ``_PackFailed`` from the capture's error."""
    assert g.vault_pending is not None  # a late group's capture runs
    prestart.trace("ingest", "pack")  # needed from here (the bench's critical path)
    try:
        vg = g.vault_pending.result()
    except BaseException as e:
        raise _PackFailed(str(e)) from e
    g.vault_group, g.vault_pending = vg, None
    return vg


def _load_group(conn, g: Group, usage_held: set[str] | None = None) -> tuple[int, int | None]:
    """Load one group (``load_batch``: a transaction of its own, or in the caller's
    open one) and return ``(new entries, first rowid)`` (``_first_rowid``,
    read in that transaction); adds to ``usage_held`` the usage keys the store held
    before it. Nothing for a group without frames (it only closes files)."""
    if g.frames is None:
        return 0, None
    vg = g.vault_group
    record: Callable[[sqlite3.Connection], None] | None = None
    if g.vault_pending is not None:  # its pack still being made: waited for here (``pack_late``)
        record = lambda c: vault.record_in(c, _late_pack(g))  # noqa: E731
    elif vg is not None:
        record = lambda c: vault.record_in(c, vg)  # noqa: E731
    n = sqlite_store.load_batch(
        conn,
        quarantine=g.quarantine,
        watermarks=g.watermarks,
        status_changes=g.changes,
        # the vault's manifest rows commit with the watermarks (its packs are durable)
        before_watermarks=record,
        coverage=g.coverage,
        usage_held=usage_held,
        **g.frames,
    )
    return n, _first_rowid(conn, g.frames["entries"], n)


def _account_group(g: Group, n: int, first: int | None, tot: dict, on_bytes, on_commit) -> None:
    """Add a committed group's figures to ``tot`` (``n`` new entries, the first of them
    at rowid ``first``) and call ``on_bytes``/``on_commit`` for it."""
    tot["files_read"] += g.files_read
    tot["vanished"] += g.vanished
    if g.skipped:
        add_skipped(tot.setdefault("tombstoned", {}), g.skipped)
    if g.frames is None:
        return
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
        on_commit(n + len(g.changes), first, None if first is None else g.frames["entries"])


def add_tallies(into: dict, items: list, per_file: dict | None = None) -> None:
    """Sum the ``(agent, path, parser_version, Tally)`` items' figures into ``into``
    (``{(agent, agent version): VersionTally}``) and, with ``per_file``, each file's
    ``[lines, quarantined, known version, records]`` into ``per_file[(agent, path)]``
    (lines: the records and the bad lines, ``VersionTally.bad``)."""
    from ctxkeep.sources.coverage import UNKNOWN_TYPES_MAX, VersionTally

    for agent, path, _pv, tally in items:
        if tally is None:
            continue
        if per_file is not None:
            f = per_file.setdefault((agent, path), [0, 0, False, 0])
            for v, t in tally.versions.items():
                f[0] += t.records + t.bad
                f[1] += t.quarantined
                f[2] = f[2] or (bool(v) and bool(t.records))
                f[3] += t.records
        for v, t in tally.versions.items():
            acc = into.setdefault((agent, v), VersionTally())
            acc.records += t.records
            acc.parsed += t.parsed
            acc.entries += t.entries
            acc.quarantined += t.quarantined
            acc.bad += t.bad
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

    The writer thread stores several groups in one SQLite transaction (``load_batch``
    joins it: the statements, rowids and term ids of a transaction a group), and commits once the transaction holds ``TXN_ROWS`` new
    entries or ``TXN_BYTES`` raw bytes, or has been open ``TXN_SECONDS`` (also while
    the thread waits for the next group), and at ``close`` (``abandon``: rolled back).
    In the caller's thread
    each group commits alone. Everything that follows a group's commit follows the
    real COMMIT, group by group in order: ``stored`` (``transform.InFlight``'s
    ``committed``), the figures in ``tot``, ``on_bytes(raw bytes)`` and
    ``on_commit(n, first_rowid, entries)``, called in the thread that stored it.
    A group's vault pack is written (durable) before its rows are loaded, so before
    the COMMIT of the rows that name it. A kill before a COMMIT loses the groups of that
    transaction with their watermarks: the next ingest reads them again.
    ``usage_held``: a set the usage keys each group may update in place are added to
    (``load_batch``'s), e.g. ``AnalyticsSyncer.usage_held``; read it after ``close``.
    Past ``USAGE_HELD_MAX`` keys it is left holding ``HELD_OVERFLOW`` alone.
    ``fts_bulk`` (a bulk load, ``engine.FTS_BULK_BYTES``): the writer thread turns the
    FTS tables' automerge off after each BEGIN and writes back the setting it found
    before each COMMIT (``sqlite_store.bulk_begin``/``bulk_end``), so no committed
    state holds the 0; the caller settles the segments at the end
    (``sqlite_store.settle_segments``).

    The first error stops the thread: a failed load rolls back the open transaction
    with the groups stored in it (not accounted; the next ingest reads them again from
    their watermarks), an error before the load (the vault's pack) commits them; later
    groups are not loaded (as in a sequential run, where the error ends the run), and
    ``put``/``close`` raise it in the caller's thread."""

    def __init__(
        self,
        conn,
        tot: dict,
        on_bytes: Callable[[int], None] | None = None,
        on_commit: Callable[..., None] | None = None,
        thread: bool = True,
        usage_held: set[str] | None = None,
        fts_bulk: bool = False,
    ) -> None:
        self.tot, self.on_bytes, self.on_commit = tot, on_bytes, on_commit
        #: a bulk load (``engine.FTS_BULK_BYTES``): FTS5's automerge off inside each of
        #: the writer thread's transactions (``sqlite_store.bulk_begin``/``bulk_end``)
        self.fts_bulk = fts_bulk
        #: the FTS tables' persisted automerge, read at the first transaction of a bulk load
        self.fts_settings: dict[str, int] | None = None
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
        #: ``committed``: an int the writer thread sets after each COMMIT)
        self.stored = 0
        #: COMMITs of groups with frames so far (``stored`` of them in all)
        self.commits = 0
        #: the groups stored in the open transaction, in order, with ``(new entries,
        #: first rowid)`` (``_load_group``): accounted at its COMMIT
        self.pending: list[tuple[Group, int, int | None]] = []
        #: the open transaction's new entries and raw bytes, and when it began (monotonic s)
        self.txn_rows = self.txn_bytes = 0
        self.txn_began = 0.0
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
        assert self.conn is not None  # threaded
        while True:
            try:
                if self.pending:  # an open transaction commits once it has been open TXN_SECONDS
                    left = self.txn_began + TXN_SECONDS - time.monotonic()
                    g = self.q.get(timeout=left) if left > 0 else self.q.get_nowait()
                else:
                    g = self.q.get()
            except queue.Empty:
                self._commit_or_fail(self.conn)
                continue
            if g is _END:
                if self.abandoned:  # Ctrl-C: the open transaction's groups are read again next run
                    try:
                        self._rollback(self.conn)
                    except sqlite3.Error:  # interrupted too: closing the connection rolls it back
                        pass
                else:
                    self._commit_or_fail(self.conn)
                return
            if self.error is not None or self.abandoned:
                if g.vault_pending is not None:
                    g.vault_pending.cancel()
                continue  # drain: nothing after a failed group (or a stop) is stored
            try:
                # its pack written (durable) before its rows commit: waited for here, or
                # where its manifest rows go when it is sealed late and not made yet
                late = (
                    g.pack_late
                    and g.frames is not None
                    and not (g.vault_pending is None or g.vault_pending.done())
                )
                if g.vault_pending is not None and not late:
                    if g.pack_late:  # sealed late, and made already
                        prestart.trace("ingest", "pack")
                    g.vault_group, g.vault_pending = g.vault_pending.result(), None
                self._store(self.conn, g, several=True)
            except _PackFailed as e:  # its rows taken back alone (``_store``): the groups before commit
                self.error = e.__cause__ or e
                self._commit_or_fail(self.conn)
            except BaseException as e:  # raised in the caller's thread
                self.error = e
                self._commit_or_fail(self.conn)  # (a failed load rolled back its transaction)

    def _store(self, conn, g: Group, several: bool) -> None:
        """Load ``g`` into the open transaction (begun here if none is) and commit when
        a bound is reached (``several``: else at once)."""
        if g.frames is None and not self.pending:  # nothing to commit: it only closes files
            self.pending.append((g, 0, None))
            self._committed()
            return
        if g.frames is not None and not conn.in_transaction:
            sqlite_store.begin(conn)
            self.txn_began = time.monotonic()
            if self.fts_bulk and self.threaded:
                try:
                    if self.fts_settings is None:
                        self.fts_settings = sqlite_store.automerge_settings(conn)
                    sqlite_store.bulk_begin(conn, self.fts_settings)
                except BaseException:
                    self._rollback(conn)
                    raise
        # a pack still being made (``pack_late``): its rows in a savepoint, taken back
        # alone if the pack fails (the groups before it in the transaction commit)
        late = g.frames is not None and g.vault_pending is not None
        if late:
            conn.execute("SAVEPOINT late_pack")
        try:
            n, first = _load_group(conn, g, self.usage_held)
        except _PackFailed:
            conn.execute("ROLLBACK TO late_pack")
            conn.execute("RELEASE late_pack")
            raise
        except BaseException:  # the open transaction is rolled back, its groups with it
            self._rollback(conn)
            raise
        if late:
            conn.execute("RELEASE late_pack")
        self._held_bound()
        if g.frames is not None:  # what the accounting needs of them: the new entries, without texts
            g.frames = {"entries": g.frames["entries"].select(STORED_COLUMNS)}
        # held until the COMMIT, up to ``TXN_BYTES`` of groups: only what ``_account_group``
        # reads (the texts were ~1/3 of the ingest process's growth in a transaction, rss24)
        g.vault_group, g.watermarks = None, []
        self.pending.append((g, n, first))
        self.txn_rows += n
        self.txn_bytes += g.bytes_read
        # (its age is checked where the thread waits for the next group: while groups
        # queue up, the writer being the slower side, only rows and bytes bound it)
        if not several or self.txn_rows >= TXN_ROWS or self.txn_bytes >= TXN_BYTES:
            self._commit(conn)

    def _commit(self, conn) -> None:
        """COMMIT the open transaction, then account its groups in order (``stored``,
        ``tot``, ``on_bytes``, ``on_commit``). A COMMIT that fails rolls back (its
        groups are not stored) and raises."""
        if conn.in_transaction:
            try:
                if self.fts_settings:  # the FTS tables' automerge back before the COMMIT
                    sqlite_store.bulk_end(conn, self.fts_settings)
                conn.execute("COMMIT")
            except BaseException:
                self._rollback(conn)
                raise
        self._committed()

    def _rollback(self, conn) -> None:
        """Roll back the open transaction: its groups are not stored (their watermarks
        neither: the next ingest reads them again) and are not accounted."""
        self.pending.clear()
        self.txn_rows = self.txn_bytes = 0
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _committed(self) -> None:
        pending, self.pending = self.pending, []
        self.txn_rows = self.txn_bytes = 0
        framed = sum(g.frames is not None for g, _, _ in pending)
        self.stored += framed
        self.commits += framed > 0
        for g, n, first in pending:
            _account_group(g, n, first, self.tot, self.on_bytes, self.on_commit)

    def _commit_or_fail(self, conn) -> None:
        """``_commit``, its error kept as the writer's (the first error stays)."""
        try:
            self._commit(conn)
        except BaseException as e:
            if self.error is None:
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
            self._store(self.own, g, several=False)
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
        was committed stays; the open transaction is rolled back with the groups stored
        in it; the rest is read again by the next run (each group's
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
        for k, (lines, quarantined, known, _records) in tot["file_tallies"].items()
        if lines and quarantined >= lines and not known and lines > unended.get(k[1], 0)
    )


def drop_unreadable(tot: dict, files: list[tuple[str, str]]) -> None:
    """Subtract the records and bad lines of ``files`` (``unreadable_files``: all
    quarantined, under the unknown version ``""``) from the run's ``coverage`` tallies."""
    for agent, path in files:
        lines, _q, _known, records = tot["file_tallies"][(agent, path)]
        t = tot["coverage"].get((agent, ""))
        if t is None:
            continue
        bad = min(lines - records, t.bad)
        t.records -= records
        t.bad -= bad
        t.quarantined -= min(records + bad, t.quarantined)
        if t.records <= 0 and t.quarantined <= 0:
            del tot["coverage"][(agent, "")]

"""Run records: one row of ``runs`` per ingest, compress, purge, retention or backfill.

``recorded_run`` is the one way to write them: the row is inserted with status
``running`` when the block starts and finished when it ends, however it ends.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxkeep.sinks.sqlite.connection import connect, write
from ctxkeep.timeutil import now_iso, parse_utc, utc_now


@dataclass
class RunRecord:
    """A run being recorded. Set ``summary`` in the block: a dict, or a callable
    returning one, read when the block ends (so it holds the figures up to a failure).
    Its ``files``, ``bytes`` (bytes), ``entries_new`` and ``quarantined`` fill the
    columns of the same names; the whole dict (JSON) goes to ``detail``.

    ``run_id`` is None when nothing is recorded; ``status`` is ``running``, then ``ok``,
    ``failed`` or ``interrupted``; ``seconds`` the wall time in seconds since ``t0``
    (rounded to ms), set when the block ends (None for an untimed run). ``stopped``:
    set True in the block when a signal stopped it between files (the block ends
    normally, the status is ``interrupted``)."""

    flow: str
    run_id: int | None = None
    summary: dict | Callable[[], dict] = field(default_factory=dict)
    status: str = "running"
    seconds: float | None = None
    stopped: bool = False


@contextmanager
def recorded_run(
    store: sqlite3.Connection | Path | None,
    flow: str,
    *,
    t0: float | None = None,
    started_at: str | None = None,
) -> Iterator[RunRecord]:
    """Record the ``with`` block as a run of ``flow`` (``"ingest"``, ``"purge"`` ...) in
    ``runs``.

    Args:
        store: the SQLite connection to write with; or a ctxkeep home, opened for the
            start and again for the end (a run whose work opens its own connections,
            e.g. in Prefect tasks); or None: nothing is recorded (a dry run), the block
            still runs and is timed.
        t0: ``time.perf_counter()`` at the run's real start (before the lock was
            awaited, the plan made ...); None: the run is not timed.
        started_at: the run's real start (ISO-8601 UTC) when the row is written after
            the work (a purge records its run when its crash-safe intent, created
            at the start, completes: ``sinks.recovery._purge``): ``started_at`` and,
            without ``t0``, ``seconds`` (wall time from it) come from it.

    The status is ``ok`` when the block ends normally, ``interrupted`` on
    KeyboardInterrupt, ``failed`` on any other exception (re-raised). A timed run's
    ``seconds`` goes to the ``seconds`` column and into the summary's ``seconds``.
    """
    run = RunRecord(flow)
    if store is not None:
        run.run_id = _with_conn(store, lambda c: _start(c, flow, started_at))
    try:
        yield run
        run.status = "interrupted" if run.stopped else "ok"
    except KeyboardInterrupt:
        run.status = "interrupted"
        raise
    except BaseException:
        run.status = "failed"
        raise
    finally:
        if t0 is not None:
            run.seconds = round(time.perf_counter() - t0, 3)
        elif started_at:
            run.seconds = round((utc_now() - parse_utc(started_at)).total_seconds(), 3)
        run_id = run.run_id
        if store is not None and run_id is not None:  # run_id is set only with a store
            summary = run.summary() if callable(run.summary) else dict(run.summary)
            if run.seconds is not None:
                summary["seconds"] = run.seconds
            _with_conn(store, lambda c: _finish(c, run_id, run.status, summary))


def _with_conn(store: sqlite3.Connection | Path, fn: Callable[[sqlite3.Connection], Any]) -> Any:
    if isinstance(store, sqlite3.Connection):
        return fn(store)
    conn = connect(Path(store))
    try:
        return fn(conn)
    finally:
        conn.close()


def _start(conn: sqlite3.Connection, flow: str, started_at: str | None = None) -> int | None:
    with write(conn):
        return conn.execute(
            "INSERT INTO runs(flow, started_at, status) VALUES(?,?,'running')",
            (flow, started_at or now_iso()),
        ).lastrowid


def _finish(conn: sqlite3.Connection, run_id: int, status: str, summary: dict) -> None:
    with write(conn):
        conn.execute(
            "UPDATE runs SET finished_at=?, status=?, files=?, bytes=?, entries_new=?, "
            "quarantined=?, seconds=?, detail=? WHERE run_id=?",
            (
                now_iso(),
                status,
                summary.get("files"),
                summary.get("bytes"),
                summary.get("entries_new"),
                summary.get("quarantined"),
                summary.get("seconds"),
                json.dumps(summary, default=str),
                run_id,
            ),
        )


#: the columns of ``recent_runs``' rows, in order
RUN_COLUMNS = (
    "run_id", "flow", "started_at", "finished_at", "status", "seconds",
    "files", "bytes", "entries_new", "quarantined",
)  # fmt: skip


def files_stored_since(conn: sqlite3.Connection, since: str) -> int:
    """How many files' watermarks were stored at or after ``since`` (ISO-8601 UTC,
    ``timeutil.now_iso``): the files an interrupted ingest begun then read into the
    store, in whole or in part (a watermark is stored with its file's entries, in one
    transaction: ``load.save_watermark``)."""
    return int(conn.execute("SELECT count(*) FROM watermarks WHERE updated_at >= ?", (since,)).fetchone()[0])


def recent_runs(conn: sqlite3.Connection, limit: int = 20) -> list[dict[str, Any]]:
    """The last ``limit`` recorded runs, newest first (by ``run_id``): dicts of
    ``RUN_COLUMNS`` (times ISO-8601 UTC as recorded, ``seconds`` wall seconds,
    ``bytes`` bytes; a figure the run did not record is None)."""
    rows = conn.execute(
        f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY run_id DESC LIMIT ?", (int(limit),)
    ).fetchall()
    return [dict(zip(RUN_COLUMNS, r, strict=True)) for r in rows]


def run_details(conn: sqlite3.Connection, flow: str) -> list[dict[str, Any]]:
    """The ``detail`` objects of ``flow``'s recorded runs, oldest first (a detail that
    is not a JSON object: left out)."""
    out = []
    for (detail,) in conn.execute("SELECT detail FROM runs WHERE flow = ? ORDER BY run_id", (flow,)):
        try:
            d = json.loads(detail or "{}")
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out

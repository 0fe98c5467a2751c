"""Parquet archive of entries that left the hot store (retention).

Layout (Hive-style partitions, readable by DuckDB ``read_parquet(...,
hive_partitioning=true)``, Polars ``scan_parquet`` and PyArrow datasets)::

    <home>/archive/agent=<agent>/month=<YYYY-MM>/part-<UTC stamp>-<n>.parquet

One file per (agent, month) and retention run. Columns: ``schema.STORED_COLUMNS`` with
their ``ENTRY_SCHEMA`` dtypes (``ts`` Datetime(us, UTC)), plus ``text`` (the full text,
String), ``ingested_at`` (String, ISO-8601 UTC) and ``archived_at`` (Datetime(us, UTC)).
The month is that of ``ts`` (UTC), or of ``ingested_at`` for entries without a time.

The ids of archived entries are kept in SQLite table ``archived(entry_id, archived_at)``
(``sinks.sqlite.ddl``), so a later re-read of the session file (backfill, a restored backup)
does not bring them back into the hot store: ``pipeline.transform.transform_batch`` drops
them like stored entries (``archived_ids``).

Crash safety: every file is written to a temp name, fsynced and renamed into place
before the rows leave SQLite (one transaction). A crash in between leaves the rows in
SQLite and a complete archive file; retention's intent (``sinks.recovery``) names the
run's file stamps, and the next command deletes such files (``drop_uncommitted``: their
rows are still in ``entries``) before it archives the rows again, so nothing is lost and
nothing is archived twice.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sqlite3
from pathlib import Path

import polars as pl

from ctxkeep import timeutil
from ctxkeep.paths import under_expr
from ctxkeep.schema import ENTRY_SCHEMA, STORED_COLUMNS
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ARCHIVE_DIR
from ctxkeep.sinks.sqlite import delete as delete_store
from ctxkeep.sinks.sqlite.intents import kill_point
from ctxkeep.sinks.sqlite.params import IN_JSON, in_parts, json_list

STATUSES = ("consumed", "archived")
BATCH_ROWS = 50_000


def archived_ids(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """The subset of ``ids`` that retention moved to the archive (empty when retention
    never ran on this store)."""
    if not ids:
        return set()
    try:
        conn.execute("SELECT 1 FROM archived LIMIT 0")
    except sqlite3.OperationalError:
        return set()
    found: set[str] = set()
    # one JSON parameter, one statement text (``params.json_list``): an ``IN (?, ...)``
    # list per length kept up to 128 statements of up to 30,000 bound ids in the
    # connection's cache, ~60 MB of an ingest's memory (memray, 2 GB tree)
    for part in in_parts(ids):
        found.update(
            r[0]
            for r in conn.execute(
                f"SELECT entry_id FROM archived WHERE entry_id {IN_JSON}", (json_list(part),)
            )
        )
    return found


#: when an entry got its current status: its last ``status_log`` change (e.g. the compress
#: run that archived it), else its own time. Retention counts age from there, so lines a
#: compression removed today stay searchable in the store for ``archive_after_days``
#: even when the messages themselves are months old.
_STATUS_SINCE = (
    "coalesce((SELECT max(sl.changed_at) FROM status_log sl "
    "WHERE sl.entry_id = entries.entry_id), ts, ingested_at)"
)


def _due_where() -> str:
    return f"status IN ('consumed', 'archived') AND {_STATUS_SINCE} IS NOT NULL AND {_STATUS_SINCE} < :cutoff"


def due(conn: sqlite3.Connection, cutoff: dt.datetime) -> list[dict]:
    """Entries retention would archive: status consumed or archived since before
    ``cutoff`` (aware datetime): the time of the entry's last status change
    (``status_log``), else its ``ts``, else ``ingested_at``. Returns one row per (agent,
    month): ``{"agent", "month": "YYYY-MM", "entries": n, "token_estimate": tokens}``."""
    rows = conn.execute(
        "SELECT agent, substr(coalesce(ts, ingested_at), 1, 7), count(*), "
        f"coalesce(sum(token_estimate), 0) FROM entries WHERE {_due_where()} GROUP BY 1, 2 ORDER BY 1, 2",
        {"cutoff": timeutil.format_utc(cutoff)},
    ).fetchall()
    return [{"agent": a, "month": m, "entries": n, "token_estimate": t} for a, m, n, t in rows]


def _frame(conn: sqlite3.Connection, ids: list[str]) -> pl.DataFrame:
    cols = STORED_COLUMNS + ["ingested_at"]
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {', '.join(cols)} FROM entries WHERE entry_id IN ({marks})", ids).fetchall()
    schema = {c: (pl.String if c in ("ts", "ingested_at") else ENTRY_SCHEMA[c]) for c in STORED_COLUMNS}
    schema["ingested_at"] = pl.String
    df = pl.DataFrame(rows, schema=schema, orient="row")
    texts = {
        h: sqlite_store.content_text(conn, h) for h in df["content_hash"].drop_nulls().unique().to_list()
    }
    when = pl.coalesce("ts", "ingested_at")
    return df.with_columns(
        pl.col("content_hash").replace_strict(texts, default=None, return_dtype=pl.String).alias("text"),
        when.str.slice(0, 7).alias("_month"),
        pl.col("ts").str.to_datetime(
            timeutil.UTC_PARSE_POLARS, time_zone="UTC", time_unit="us", strict=False
        ),
        pl.lit(timeutil.utc_now()).cast(pl.Datetime("us", "UTC")).alias("archived_at"),
    )


def _write_atomic(df: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    old = os.umask(0o077)
    try:
        df.write_parquet(tmp, compression="zstd", statistics=True)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:  # a full disk: no temp file stays behind
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.umask(old)
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # e.g. Windows: directories cannot be opened
        pass


def new_stamp() -> str:
    """The stamp of a retention run's archive file names (``part-<stamp>-<n>.parquet``):
    UTC to the microsecond."""
    t = timeutil.utc_now()
    return f"{timeutil.stamp(t)[:-1]}{t.microsecond:06d}Z"


def archive_entries(
    conn: sqlite3.Connection, home: Path, cutoff: dt.datetime, *, stamp: str | None = None
) -> dict:
    """Move the entries ``due`` before ``cutoff`` into Parquet files and out of SQLite.

    Their contents, chunks and FTS rows go too when no remaining entry shares them
    (``sinks.sqlite.delete.delete_selected``); ``usage`` rows stay (token figures are history, not
    context). Files are named with ``stamp`` (default ``new_stamp()``; retention records
    it in its intent first). The caller holds the store lock. Returns ``{"entries": n
    archived, "contents": n, "chunks": n, "files": [archive paths written],
    "partitions": [{agent, month, entries}]}``.
    """
    stamp = stamp or new_stamp()
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT entry_id FROM entries WHERE {_due_where()} ORDER BY rowid",
            {"cutoff": timeutil.format_utc(cutoff)},
        )
    ]
    out: dict = {"entries": 0, "contents": 0, "chunks": 0, "files": [], "partitions": []}
    parts: dict[tuple[str, str], int] = {}
    for n, start in enumerate(range(0, len(ids), BATCH_ROWS)):
        batch = ids[start : start + BATCH_ROWS]
        df = _frame(conn, batch)
        for (agent, month), part in df.group_by(["agent", "_month"], maintain_order=True):
            path = (
                Path(home) / ARCHIVE_DIR / f"agent={agent}" / f"month={month}" / f"part-{stamp}-{n}.parquet"
            )
            _write_atomic(part.drop("_month"), path)
            out["files"].append(str(path))
            parts[(agent, month)] = parts.get((agent, month), 0) + part.height
        kill_point("retention", "files")
        conn.execute("PRAGMA temp_store=MEMORY")
        with sqlite_store.write(conn):
            conn.executemany(
                "INSERT OR REPLACE INTO archived VALUES(?, ?)", [(i, timeutil.now_iso()) for i in batch]
            )
            delete_store.select_where(conn, f"entry_id IN ({','.join('?' * len(batch))})", batch)
            removed = delete_store.delete_selected(conn, usage=False, quarantine=False, media=False)
            delete_store.drop_selection(conn)
        kill_point("retention", "sqlite")
        for k in ("entries", "contents", "chunks"):
            out[k] += removed[k]
    out["partitions"] = [{"agent": a, "month": m, "entries": n} for (a, m), n in parts.items()]
    return out


def write_recovered(home: Path, frame: pl.DataFrame, archived_at: dict[str, str]) -> list[str]:
    """Write archived entries read again from another copy (``doctor --repair`` of an
    unreadable archive file) into new archive files, one per (agent, month), named
    ``part-<stamp>-recovered.parquet``. ``frame``: an entry frame (``ENTRY_SCHEMA``
    columns with ``text``, ``transforms.normalize.entries_frame``); ``archived_at``:
    entry_id → the ISO-8601 time of the ``archived`` table. ``status`` becomes
    ``archived`` and ``ingested_at`` the time of this write (the original ones were in
    the lost file). Returns the paths written."""
    if frame.is_empty():
        return []
    now = timeutil.now_iso()
    df = frame.select(STORED_COLUMNS + ["text"]).with_columns(
        pl.lit("archived").alias("status"),
        pl.lit(now).alias("ingested_at"),
        # no content, no text (as ``_frame``: its text comes from the content)
        pl.when(pl.col("content_hash").is_null()).then(None).otherwise(pl.col("text")).alias("text"),
        pl.col("entry_id")
        .replace_strict(archived_at, default=now, return_dtype=pl.String)
        .str.to_datetime(timeutil.UTC_PARSE_POLARS, time_zone="UTC", time_unit="us", strict=False)
        .alias("archived_at"),
        pl.coalesce(pl.col("ts").dt.strftime("%Y-%m"), pl.lit(now[:7])).alias("_month"),
    )
    stamp, out = new_stamp(), []
    for (agent, month), part in df.group_by(["agent", "_month"], maintain_order=True):
        path = (
            Path(home) / ARCHIVE_DIR / f"agent={agent}" / f"month={month}" / f"part-{stamp}-recovered.parquet"
        )
        _write_atomic(part.drop("_month"), path)
        out.append(str(path))
    return out


def drop_uncommitted(conn: sqlite3.Connection, home: Path, stamps: list[str]) -> int:
    """Delete the archive files of ``stamps`` (retention runs) whose rows are still in
    SQLite ``entries``: written by a run killed before its SQLite transaction committed
    (the next archive run writes them again). Returns the number of files deleted."""
    root = Path(home) / ARCHIVE_DIR
    if not root.is_dir() or not stamps:
        return 0
    gone = []
    for st in stamps:
        for f in root.rglob(f"part-{st}-*.parquet"):
            try:
                ids = pl.read_parquet(f, columns=["entry_id"])["entry_id"].to_list()
            except Exception:  # a torn file cannot be: written by rename; unreadable -> rewritten
                ids = None
            if ids is None or (ids and sqlite_store.existing_entry_ids(conn, ids[:1000])):
                gone.append(f)
    remove_files(gone, root)
    return len(gone)


def scope_filter(scope: str, value: str, owned: set[str]):
    """A ``frame -> pl.Expr`` choosing the archived rows of a purge of ``scope``
    (``"session"``: the session and its sub-agents, ``parent_session_id``; ``"project"``:
    rows whose ``project_dir`` is ``value`` or below, plus the dir-less rows of sessions
    wholly in it, by SQLite (``owned``) or by the archive itself): the same rules as
    ``sinks.sqlite.delete.select_session`` / ``select_project``."""
    if scope == "session":
        return lambda df: (pl.col("session_id") == value) | (pl.col("parent_session_id") == value)
    pd = pl.col("project_dir")
    under = under_expr(pd, value)

    def pick(df):
        here = (
            df.filter(pd.is_not_null())
            .group_by("session_id")
            .agg(under.all().alias("u"))
            .filter(pl.col("u"))["session_id"]
            .to_list()
        )
        own = list(owned | set(here))
        return under.fill_null(False) | (
            pd.is_null() & (pl.col("session_id").is_in(own) | pl.col("parent_session_id").is_in(own))
        )

    return pick


def purge_scope(
    home: Path,
    scope: str,
    value: str,
    owned: set[str],
    *,
    dry_run: bool = False,
    before_write=None,
    after_file=None,
) -> dict:
    """``purge_rows`` of a purge's scope (``scope_filter``). Returns ``purge_rows``'s
    dict."""
    return purge_rows(
        home,
        scope_filter(scope, value, owned),
        dry_run=dry_run,
        before_write=before_write,
        after_file=after_file,
    )


def old_archives(home: Path, older_than: dt.datetime) -> list[Path]:
    """Archive files (``*.parquet`` under ``<home>/archive``) last written before
    ``older_than`` (aware datetime; file mtime)."""
    root = Path(home) / ARCHIVE_DIR
    if not root.is_dir():
        return []
    limit = older_than.timestamp()
    return sorted(p for p in root.rglob("*.parquet") if p.is_file() and p.stat().st_mtime < limit)


def remove_files(paths: list[Path], root: Path | None = None) -> int:
    """Delete ``paths`` (missing ones are skipped) and then the empty directories left
    under ``root``. Returns the bytes freed."""
    freed = 0
    for p in paths:
        try:
            size = p.stat().st_size
            p.unlink()
            freed += size
        except FileNotFoundError:
            continue
    if root is not None and root.is_dir():
        for d in sorted((d for d in root.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass
    return freed


def read_archive(home: Path) -> pl.DataFrame:
    """All archived entries (one row per ``entry_id``, the latest archive wins), with the
    ``agent`` and ``month`` partition columns. An empty frame when there is no archive."""
    root = Path(home) / ARCHIVE_DIR
    files = sorted(root.rglob("*.parquet")) if root.is_dir() else []
    if not files:
        return pl.DataFrame()
    df = pl.concat(
        [
            pl.read_parquet(f).with_columns(pl.lit(f.parent.name.split("=", 1)[1]).alias("month"))
            for f in files
        ],
        how="diagonal_relaxed",
    )
    return df.sort("archived_at").unique("entry_id", keep="last", maintain_order=True)


def purge_rows(home: Path, keep_out, *, dry_run: bool = False, before_write=None, after_file=None) -> dict:
    """Remove archived rows chosen by ``keep_out(frame) -> pl.Expr`` (True = remove)
    from every archive file: a file is rewritten without them (temp file, fsync,
    rename) or deleted when nothing is left. ``before_write(ids)`` (if given) is called
    with a file's removed entry ids before that file is changed (a purge drops them
    from the ``archived`` table first), ``after_file()`` after it (a kill point for
    the crash trials). Returns ``{"rows": n removed, "files":
    n rewritten or deleted, "entry_ids": [removed ids]}``; ``dry_run`` only counts."""
    root = Path(home) / ARCHIVE_DIR
    out: dict = {"rows": 0, "files": 0, "entry_ids": []}
    if not root.is_dir():
        return out
    for f in sorted(root.rglob("*.parquet")):
        df = pl.read_parquet(f)
        if df.height == 0 or "entry_id" not in df.columns:
            continue
        gone = df.filter(keep_out(df))
        if gone.height == 0:
            continue
        out["rows"] += gone.height
        out["files"] += 1
        out["entry_ids"] += gone["entry_id"].to_list()
        if dry_run:
            continue
        if before_write is not None:
            before_write(gone["entry_id"].to_list())
        rest = df.join(gone.select("entry_id"), on="entry_id", how="anti")
        if rest.height:
            _write_atomic(rest, f)
        else:
            f.unlink()
        if after_file is not None:
            after_file()
    if not dry_run and out["files"]:
        remove_files([], root)
    return out


def rewrite_texts(home: Path, transform, *, dry_run: bool = False) -> dict:
    """Apply ``transform(text: pl.Series) -> pl.Series`` (String, same length; e.g.
    ``transforms.redact.redact_series``) to the ``text`` column of every archive file and
    rewrite the files in which a text changed (temp file, fsync, rename), with
    ``content_hash`` (SHA-256 hex) and ``text_bytes`` (UTF-8 bytes) of the changed rows
    recomputed. Returns ``{"rows": n texts changed, "files": n files rewritten}``;
    ``dry_run`` only counts."""

    root = Path(home) / ARCHIVE_DIR
    out = {"rows": 0, "files": 0}
    if not root.is_dir():
        return out
    for f in sorted(root.rglob("*.parquet")):
        df = pl.read_parquet(f)
        if df.height == 0 or "text" not in df.columns:
            continue
        old = df["text"]
        new = transform(old)
        changed = (old != new).fill_null(False)
        n = int(changed.sum())
        if not n:
            continue
        out["rows"] += n
        out["files"] += 1
        if dry_run:
            continue
        hashes = [
            None if t is None else hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest()
            for t in new.to_list()
        ]
        df = df.with_columns(
            new.alias("text"),
            pl.when(pl.Series(changed))
            .then(pl.Series(hashes, dtype=pl.String))
            .otherwise(pl.col("content_hash"))
            .alias("content_hash"),
            pl.when(pl.Series(changed))
            .then(new.str.len_bytes().cast(df.schema["text_bytes"]))
            .otherwise(pl.col("text_bytes"))
            .alias("text_bytes"),
        )
        _write_atomic(df, f)
    return out

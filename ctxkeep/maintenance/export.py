"""``ctxkeep export parquet DEST``: this store's tables into a team's Parquet lake,
incrementally and idempotently (plain functions, no Prefect).

Tables (the columns of the local DuckDB ones, docs/analytics.md, plus ``machine``,
``machine_id`` and the partition ``month``):

- ``usage``: DuckDB ``usage``, one row per API response; month of ``ts``;
- ``sessions``: DuckDB view ``sessions``; month of ``started``; ``title`` (a first
  prompt) only with ``with_text``;
- ``entries``: DuckDB view ``all_entries`` (the store and the retention archive, as
  analytics sees them; ``archived``, ``is_error``), without text; with ``with_text`` a
  ``text`` column (the store's text, redacted at ingest); month of ``ts``;
- ``raw`` (only when asked for): the vault's generations with their bytes, redacted as
  the vault keeps them (``_vault_raw``); month of the file's mtime. Once written, an
  export without it refreshes it too when the vault lost generations it holds (a purge,
  a pruning: ``_raw_holds_more``), so the lake never keeps what the store purged.

Layout and atomic writes: ``sinks.lake``. The month is the UTC month (``unknown``
without a time).

**The export watermark** is one row per partition in SQLite ``lake_exports`` (dest,
table, machine, agent, month): the row count and a digest of the rows the lake holds
(DuckDB ``hash`` of every column, summed as HUGEINT) and the files written. An export
computes the same figures over the store now and rewrites exactly the partitions whose
figures differ or whose files are not those recorded: a second export writes nothing;
new data rewrites the partitions it falls into (the current month, as a rule); a purge,
a retention run that dropped archives, a status change or a re-pricing changes the
digest of the partitions it touched, which are rewritten without the rows, and a
partition left empty is deleted. So the lake never holds what the store purged, after
the next export. A partition is rewritten as one file (no small-file pile-up); old
files are deleted after the new one is in place (a reader in that instant may see both;
a run killed there leaves the old watermark, so the next export rewrites the partition
again). A different DuckDB version may hash differently: the next export then rewrites
every partition once.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa

from ctxkeep.errors import ConfigError, StoreBusy, StoreError, UsageError
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import lake as lakes
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB, STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.machine import Machine, identify
from ctxkeep.sinks.sqlite import lake_marks
from ctxkeep.timeutil import now_iso

TABLES = ("usage", "sessions", "entries", "raw")
#: what an export writes without ``--tables`` (``raw``, the vault's generations, is asked for)
DEFAULT_TABLES = ("usage", "sessions", "entries")
#: rows fetched and written per batch of partitions (a bigger partition is one batch)
BATCH_ROWS = 250_000

_MONTH = "coalesce(strftime({col}, '%Y-%m'), '" + lakes.NO_MONTH + "')"
#: per table: the DuckDB relation, the time column of the month, the text columns
#: blanked without --with-text
_SOURCES = {
    "usage": ("usage", "ts", ()),
    "sessions": ("sessions", "started", ("title",)),
    "entries": ("all_entries", "ts", ()),
    "raw": ("_vault_raw", "ts", ()),
}


def _vault_raw(conn: sqlite3.Connection, home: Path) -> pa.Table:
    """Every generation the vault holds, one row each: ``agent``, ``path``, ``gen``,
    ``mode`` (``append``/``document``), ``start`` and ``length`` (bytes of the agent's
    file), ``ts`` (the file's mtime when last captured, UTC), ``redactions`` (JSON:
    values redacted per kind), ``sha256`` (hex, of ``data``) and ``data``: the
    generation's bytes as the vault keeps them, redacted (``sinks.vault``), so a team
    can reparse centrally. Held in memory whole while the export runs. Raises
    ``VaultDamaged``."""
    import datetime as dt
    import hashlib
    import json

    from ctxkeep.sinks.vault import manifest

    cols: dict[str, list] = {
        k: []
        for k in ("agent", "path", "gen", "mode", "start", "length", "ts", "redactions", "sha256", "data")
    }
    for g in manifest.generations(conn):
        data = manifest.gen_bytes(conn, home, g)
        for k, v in (
            ("agent", g.agent),
            ("path", g.path),
            ("gen", g.gen),
            ("mode", g.mode),
            ("start", g.start),
            ("length", g.length),
            ("ts", dt.datetime.fromtimestamp(g.mtime_ns / 1e9, dt.UTC) if g.mtime_ns else None),
            ("redactions", json.dumps(g.redactions, sort_keys=True)),
            ("sha256", hashlib.sha256(data).hexdigest()),
            ("data", data),
        ):
            cols[k].append(v)
    types = {
        "gen": pa.int64(),
        "start": pa.int64(),
        "length": pa.int64(),
        "ts": pa.timestamp("us", tz="UTC"),
        "data": pa.binary(),
    }
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})


def _raw_holds_more(conn: sqlite3.Connection, dest: str, m: Machine) -> bool:
    """Whether the ``raw`` table this store exported to ``dest`` before holds a
    partition (agent, month) with more generations than the vault holds now (a purge
    or a pruning took some out): an export without ``raw`` in its tables then exports
    ``raw`` too, so a purged session leaves every lake table at the next export, as the
    store's other tables do (newuser15 F11). Reads the manifest only (no bytes)."""
    import datetime as dt
    from collections import Counter

    from ctxkeep.sinks.vault import manifest

    rec = lake_marks.recorded(conn, dest, "raw", m.name)
    if not rec:
        return False

    def month(ns: int | None) -> str:
        return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m") if ns else lakes.NO_MONTH

    now = Counter((g.agent, month(g.mtime_ns)) for g in manifest.generations(conn))
    return any(now.get(part, 0) < rows for part, (rows, _digest, _files) in rec.items())


def parse_tables(text: str | None) -> tuple[str, ...]:
    """``usage,sessions,entries,raw`` (any order, any subset; None: ``DEFAULT_TABLES``)
    → names in ``TABLES`` order; UsageError for an unknown or empty list."""
    names = [t.strip() for t in (",".join(DEFAULT_TABLES) if text is None else text).split(",") if t.strip()]
    bad = [t for t in names if t not in TABLES]
    if bad or not names:
        raise UsageError(
            f"unknown table {', '.join(bad)}" if bad else "no table given",
            where="--tables",
            hint="give a comma-separated subset of " + ",".join(TABLES),
        )
    return tuple(t for t in TABLES if t in names)


def _select(table: str, m: Machine, with_text: bool) -> str:
    rel, tcol, texts = _SOURCES[table]
    lit = lambda s: "'" + s.replace("'", "''") + "'"  # noqa: E731
    replace = [f"{lit(m.name)} AS machine"] if table == "usage" else []
    if not with_text:
        replace += [f"CAST(NULL AS VARCHAR) AS {c}" for c in texts]
    rep = f" REPLACE ({', '.join(replace)})" if replace else ""
    extra = "" if table == "usage" else f", {lit(m.name)} AS machine"
    return (
        f"SELECT *{rep}{extra}, {lit(m.id or '')} AS machine_id, {_MONTH.format(col=tcol)} AS month "
        f"FROM {rel}"
    )


def _digests(con, table: str, m: Machine, with_text: bool) -> dict[tuple[str, str], tuple[int, str]]:
    sel = _select(table, m, with_text)
    mark = "t" if with_text and table == "entries" else "n"
    rows = con.execute(
        f"SELECT agent, month, count(*), CAST(sum(CAST(hash(x) AS HUGEINT)) AS VARCHAR) "
        f"FROM ({sel}) x GROUP BY ALL"
    ).fetchall()
    return {(a, mo): (int(n), f"{mark}:{d}") for a, mo, n, d in rows}


def _chunks(conn: sqlite3.Connection, hashes: list[str]):
    """The SQLite chunks of these content hashes as Arrow (``h``, ``seq``, ``text``)."""

    rows = lake_marks.chunk_rows(conn, hashes)
    h, seq, text = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {"h": pa.array(h, pa.string()), "seq": pa.array(seq, pa.int64()), "text": pa.array(text, pa.string())}
    )


def _fetch(con, conn, table: str, m: Machine, with_text: bool, keys: list[tuple[str, str]]):

    con.register("_keys", pa.table({"a": [k[0] for k in keys], "mo": [k[1] for k in keys]}))
    try:
        sel = _select(table, m, with_text)
        if table == "entries" and with_text:
            # the store's text from its SQLite chunks (joined in order); an archived
            # row's from the retention archive
            hashes = con.sql(
                f"SELECT DISTINCT content_hash FROM ({sel}) y JOIN _keys k ON k.a = y.agent AND k.mo = y.month "
                "WHERE content_hash IS NOT NULL"
            ).fetchall()
            con.register("_chunks", _chunks(conn, [r[0] for r in hashes]))
            sel = (
                f"SELECT x.*, coalesce(s.text, t.text) AS text FROM ({sel}) x "
                "LEFT JOIN (SELECT h, string_agg(text, '' ORDER BY seq) AS text FROM _chunks GROUP BY h) s "
                "ON s.h = x.content_hash "
                "LEFT JOIN (SELECT entry_id, any_value(text) AS text FROM archive GROUP BY entry_id) t "
                "ON x.archived AND t.entry_id = x.entry_id"
            )
        return con.sql(
            f"SELECT y.* FROM ({sel}) y JOIN _keys k ON k.a = y.agent AND k.mo = y.month"
        ).to_arrow_table()
    finally:
        con.unregister("_keys")
        con.unregister("_chunks")


def _batches(keys: list[tuple[str, str]], counts: dict) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    cur: list[tuple[str, str]] = []
    n = 0
    for k in keys:
        if cur and n + counts[k][0] > BATCH_ROWS:
            out.append(cur)
            cur, n = [], 0
        cur.append(k)
        n += counts[k][0]
    if cur:
        out.append(cur)
    return out


def _open_analytics(conn: sqlite3.Connection, home: Path):
    """DuckDB synced with SQLite now (the rows the lake gets are those of the store);
    StoreBusy when another process holds ``analytics.duckdb``."""

    try:
        con = duckdb_store.connect(home)
    except duckdb.IOException as e:
        raise StoreBusy(
            "the analytics store is held by another process (a notebook?)",
            where=str(Path(home) / ANALYTICS_DB),
            hint="close it and export again",
        ) from e
    try:
        r = duckdb_store.sync(conn, home, con=con)
        sqlite_store.mark_analytics_synced(
            conn, r["entries_rowid"], r["status_seq"], r.get("prices_stamp"), r.get("usage_log_seq")
        )
        con.execute("SET TimeZone = 'UTC'")
    except BaseException:
        con.close()
        raise
    return con


def export_parquet(
    home: Path,
    dest: str,
    *,
    tables: tuple[str, ...] = DEFAULT_TABLES,
    with_text: bool = False,
    dry_run: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    on_file: Callable[[str], None] | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> dict:
    """Export ``tables`` of the store at ``home`` into the lake ``dest`` (a directory or
    an fsspec URL, ``sinks.lake.open_lake``), rewriting only the partitions whose rows
    changed since the last export to ``dest`` and deleting those the store no longer
    has (see the module doc). Holds the store lock; recorded as a run of flow
    ``export``. ``dry_run``: nothing is written (the lake is not touched, DuckDB is
    synced). ``progress(table, done, total)`` counts partitions; ``on_file(path)``
    is called after each part file lands (tests); ``on_wait(lock path)`` when another
    run holds the store lock and this one waits for it.

    Returns ``{"dest", "machine", "machine_id", "with_text", "dry_run", "seconds",
    "store_bytes", "tables": {name: {"partitions", "written": [{agent, month, rows}],
    "removed": [...], "rows_written", "files_written", "bytes_written"}}}`` (bytes;
    ``store_bytes``: store.db + analytics.duckdb). Raises UsageError (bad ``tables``
    or scheme), ConfigError (a machine name that cannot be a partition value, or a
    name another store already uses in this lake), StoreError (no store; a lake that
    cannot be reached or written; a missing fsspec package), StoreBusy.
    """
    t0 = time.perf_counter()
    home = Path(home)
    bad = [t for t in tables if t not in TABLES]
    if bad or not tables:
        raise UsageError(f"unknown table {', '.join(bad)}", where="--tables", hint="give " + ",".join(TABLES))
    lake = lakes.open_lake(dest)
    if not (home / STORE_DB).exists():
        raise StoreError("no store yet", where=str(home / STORE_DB), hint="run `ctxkeep ingest` first")
    if not dry_run:
        lakes.check_writable(lake)
    with hold(home, what="export", on_wait=on_wait):
        conn = sqlite_store.connect(home)
        try:
            m = identify(home, conn)
            out: dict = {
                "dest": lake.url,
                "machine": m.name,
                "machine_id": m.id,
                "with_text": with_text,
                "dry_run": dry_run,
                "tables": {},
            }
            if "raw" not in tables and _raw_holds_more(conn, lake.url, m):
                tables = tuple(t for t in TABLES if t in tables or t == "raw")
            with sqlite_store.recorded_run(None if dry_run else conn, "export", t0=t0) as run:
                run.summary = lambda: (
                    {k: v for k, v in out.items() if k != "tables"}
                    | {
                        "bytes": sum(t.get("bytes_written", 0) for t in out["tables"].values()),
                        "tables": out["tables"],
                    }
                )
                con = _open_analytics(conn, home)
                try:
                    if "raw" in tables:
                        con.register("_vault_raw", _vault_raw(conn, home))
                    for table in tables:
                        out["tables"][table] = _export_table(
                            con, conn, lake, table, m, with_text, dry_run, progress, on_file
                        )
                finally:
                    con.close()
            out["seconds"] = run.seconds
            out["store_bytes"] = sum(
                (home / n).stat().st_size for n in (STORE_DB, ANALYTICS_DB) if (home / n).exists()
            )
            return out
        finally:
            conn.close()


def _drop_old_names(conn: sqlite3.Connection, lake, table: str, m: Machine) -> None:
    """A renamed machine (config ``machine``): the partitions this store wrote under its
    old names (its own part files only) leave the lake, with their watermarks."""
    for name in lake_marks.other_machines(conn, lake.url, table, m.name):
        mine = [
            p
            for files in lakes.list_machine_files(lake, table, name).values()
            for p in files
            if p.rsplit("/", 1)[-1].startswith(f"part-{m.id}-")
        ]
        lakes.delete_files(lake, mine)
        lake_marks.forget(conn, lake.url, table, name)


def _export_table(con, conn, lake, table, m: Machine, with_text, dry_run, progress, on_file) -> dict:
    """One table's export: ``{"partitions": n in the store now, "written": [{agent,
    month, rows}], "removed": [...], "rows_written", "files_written", "bytes_written"
    (bytes of Parquet)}``."""

    now = _digests(con, table, m, with_text)
    te: dict = {
        "partitions": len(now),
        "written": [],
        "removed": [],
        "rows_written": 0,
        "files_written": 0,
        "bytes_written": 0,
    }
    rec = lake_marks.recorded(conn, lake.url, table, m.name)
    listing = {} if dry_run else lakes.list_machine_files(lake, table, m.name)
    owner = f"part-{m.id}-"
    foreign = sorted(
        p for files in listing.values() for p in files if not p.rsplit("/", 1)[-1].startswith(owner)
    )
    if foreign:
        raise ConfigError(
            f"another store already exports as machine {m.name!r} to this lake ({len(foreign)} files, "
            f"e.g. {foreign[0].rsplit('/', 1)[-1]})",
            where=lake.url,
            hint='give this machine its own name: machine = "..." in config.toml',
        )
    if not dry_run:
        lakes.remove_staging(lake, table, m.id)
        _drop_old_names(conn, lake, table, m)

    def same(k) -> bool:
        r = rec.get(k)
        if r is None or (r[0], r[1]) != now[k]:
            return False
        return dry_run or sorted(r[2]) == sorted(listing.get(k, []))

    changed = sorted(k for k in now if not same(k))
    gone = sorted(set(rec) - set(now) | set(listing) - set(now))
    total = len(changed) + len(gone)
    done = 0
    if progress:
        progress(table, done, total)
    for k in gone:
        n = rec[k][0] if k in rec else 0
        te["removed"].append({"agent": k[0], "month": k[1], "rows": n})
        if not dry_run:
            lakes.delete_files(lake, listing.get(k, []))
            lake_marks.forget(conn, lake.url, table, m.name, k)
        done += 1
        if progress:
            progress(table, done, total)
    for batch in _batches(changed, now):
        if dry_run:
            te["written"] += [{"agent": a, "month": mo, "rows": now[(a, mo)][0]} for a, mo in batch]
            te["rows_written"] += sum(now[k][0] for k in batch)
            done += len(batch)
            if progress:
                progress(table, done, total)
            continue
        data = _fetch(con, conn, table, m, with_text, batch)
        files = lakes.write_partitions(lake, table, data, m.id, on_file=on_file)
        stamp = now_iso()
        for k in batch:
            new = files.get(k, [])
            keep = {p for p, _ in new}
            lakes.delete_files(lake, [p for p in listing.get(k, []) if p not in keep])
            lake_marks.record(conn, lake.url, table, m.name, k, now[k][0], now[k][1], sorted(keep), stamp)
            te["written"].append({"agent": k[0], "month": k[1], "rows": now[k][0]})
            te["rows_written"] += now[k][0]
            te["files_written"] += len(new)
            te["bytes_written"] += sum(s for _, s in new)
        done += len(batch)
        if progress:
            progress(table, done, total)
    return te


__all__ = ["BATCH_ROWS", "DEFAULT_TABLES", "TABLES", "export_parquet", "parse_tables"]

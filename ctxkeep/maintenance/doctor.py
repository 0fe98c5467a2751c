"""``ctxkeep doctor``: check every file of a store and repair what can be rebuilt.

Checks (``check``), each a ``Finding(check, file, status, detail)`` with status
``ok`` | ``damaged`` | ``warning`` | ``skipped``:

- ``sqlite-header``: ``store.db``'s header and size (``store_safety.header_problem``),
  a 0-byte store where the home held data;
- ``sqlite-wal``: a ``store.db-wal`` of another database (``store_safety.wal_verdict``);
- ``sqlite-integrity``: ``PRAGMA quick_check`` (``PRAGMA integrity_check`` with
  ``full``; 0.27 s and 1.9 s on a 170 MB store);
- ``fts``: FTS5's ``integrity-check`` command on ``fts_words``, ``fts_grams`` and ``fts_symbols``;
- ``orphans``: chunks without their content, entries whose content is missing;
- ``duckdb``: ``analytics.duckdb`` opens and holds as many entries as SQLite;
- ``parquet``: every archive file's footer reads, and the archive holds every entry
  the ``archived`` table lists;
- ``watermarks``: each watermark's file exists and is not shorter than its offset
  (warnings: a user may delete session files).

``repair`` rebuilds what is derived (FTS, DuckDB) from SQLite; when SQLite itself is
damaged it moves ``store.db`` aside (``store.db.damaged-<UTC>``, never deleted),
installs the newest usable store backup (``maintenance.backup``) or, with none, lets a
new store be made, reloads the ids of the Parquet archive's entries (``archived``: they
stay in the archive), rebuilds the vault's manifest from its packs and derives every
file the vault holds from it (``_from_vault``), re-ingests the agents' files (what the
vault does not hold) and then their compress backups (the
lines compress cut, marked ``archived`` again), rebuilds DuckDB, and says what could
not be recovered.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ctxkeep.maintenance import backup
from ctxkeep.maintenance.compress import rewrite
from ctxkeep.sinks import analytics_current, parquet
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB, ARCHIVE_DIR, STORE_DB
from ctxkeep.sinks.sqlite import StatusChange, checks, store_safety
from ctxkeep.sources.contract import SourceFile


@dataclass
class Finding:
    """One check's result: ``check`` name, the ``file`` it concerns, ``status`` (ok,
    damaged, warning, skipped) and a one-line ``detail``."""

    check: str
    file: str
    status: str
    detail: str = ""


def _sqlite_checks(home: Path, full: bool) -> list[Finding]:
    db = home / STORE_DB
    out: list[Finding] = []
    if not db.exists():
        return [Finding("sqlite-header", str(db), "skipped", "no store yet")]
    size = db.stat().st_size
    if size == 0:
        held = store_safety.held_data(home)
        st = "damaged" if held else "ok"
        return [
            Finding(
                "sqlite-header",
                str(db),
                st,
                "0 bytes" + (f"; the home holds {', '.join(held)}" if held else ""),
            )
        ]
    why = store_safety.header_problem(db)
    out.append(Finding("sqlite-header", str(db), "damaged" if why else "ok", why or f"{size:,} bytes"))
    wal = home / (STORE_DB + "-wal")
    foreign = False
    if wal.exists() and wal.stat().st_size and not why:
        if store_safety.live(home):
            out.append(Finding("sqlite-wal", str(wal), "skipped", "in use by a live process"))
        else:
            verdict, w = store_safety.wal_verdict(db, wal)
            foreign = verdict == "foreign"
            out.append(Finding("sqlite-wal", str(wal), "damaged" if verdict == "foreign" else "ok", w))
    if why:
        return out
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = checks.integrity(db, full=full, immutable=foreign)
        bad = rows != ["ok"]
        out.append(
            Finding(
                "sqlite-integrity", str(db), "damaged" if bad else "ok", f"{pragma}: " + "; ".join(rows[:3])
            )
        )
    except sqlite3.DatabaseError as e:
        out.append(Finding("sqlite-integrity", str(db), "damaged", f"{pragma}: {e}"))
        return out
    if bad:
        return out
    out += [Finding("fts", f"{db} ({t})", st, d) for t, st, d in checks.fts_integrity(db, immutable=foreign)]
    t = checks.tallies(db, immutable=foreign)
    st = "damaged" if t.orphan_chunks or t.orphan_entries else "ok"
    out.append(
        Finding(
            "orphans",
            str(db),
            st,
            f"{t.orphan_chunks} chunks without content, {t.orphan_entries} entries without text",
        )
    )
    out += _duckdb_check(home, t.entries, t.analytics_behind, t.usage)
    out += _parquet_check(home, t.archived)
    out += _watermark_check(t.watermarks)
    return out


def _duckdb_check(home: Path, n_sqlite: int, behind: bool, usage: int = 0) -> list[Finding]:
    p = home / ANALYTICS_DB
    if not p.exists():
        if n_sqlite:  # the reports have nothing to read
            return [
                Finding(
                    "duckdb",
                    str(p),
                    "damaged",
                    f"missing, SQLite holds {n_sqlite:,} entries (doctor --repair or the next ingest rebuilds it)",
                )
            ]
        return [Finding("duckdb", str(p), "warning", "missing (the first ingest builds it)")]
    try:
        from ctxkeep.sinks.analytics_read import inspect

        seen = inspect(p)
        n_duck = seen["entries"]
    except Exception as e:  # duckdb.Error subclasses, OSError
        msg = (str(e).splitlines() or [""])[0]
        if "lock" in msg.lower():
            return [Finding("duckdb", str(p), "skipped", f"held by another process: {msg[:160]}")]
        return [Finding("duckdb", str(p), "damaged", f"{type(e).__name__}: {msg[:200]}")]
    if n_duck < n_sqlite and behind:  # the store was busy: a lag
        return [
            Finding(
                "duckdb",
                str(p),
                "warning",
                f"{n_duck:,} entries, SQLite holds {n_sqlite:,}: not synced yet (the next report catches up)",
            )
        ]
    if seen["problems"]:  # a truncated file, unreadable blocks: every report would fail
        return [Finding("duckdb", str(p), "damaged", "; ".join(seen["problems"][:3]))]
    if n_duck != n_sqlite:
        return [Finding("duckdb", str(p), "damaged", f"{n_duck:,} entries, SQLite holds {n_sqlite:,}")]
    if seen["usage"] != usage and not behind:  # e.g. a rebuild killed after its entries
        return [
            Finding(
                "duckdb",
                str(p),
                "damaged",
                f"{seen['usage']:,} usage rows, SQLite holds {usage:,} (costs and tokens)",
            )
        ]
    return [Finding("duckdb", str(p), "ok", f"{n_duck:,} entries and {usage:,} usage rows, as SQLite")]


def _parquet_check(home: Path, n_archived: int) -> list[Finding]:
    root = home / ARCHIVE_DIR
    files = sorted(root.rglob("*.parquet")) if root.is_dir() else []
    if not files and not n_archived:
        return [Finding("parquet", str(root), "ok", "no archive")]

    out, rows = [], 0
    for f in files:
        try:
            rows += pq.ParquetFile(f).metadata.num_rows
        except Exception as e:
            out.append(
                Finding("parquet", str(f), "damaged", f"unreadable: {(str(e).splitlines() or [''])[0][:160]}")
            )
    if rows < n_archived:
        out.append(
            Finding(
                "parquet",
                str(root),
                "damaged",
                f"the archive holds {rows:,} rows, SQLite lists {n_archived:,} archived entries (a file is missing)",
            )
        )
    if not out:
        out.append(Finding("parquet", str(root), "ok", f"{len(files)} files, {rows:,} rows"))
    return out


def _watermark_check(watermarks: list[tuple[str, int]]) -> list[Finding]:
    missing = shrunk = 0
    for path, offset in watermarks:
        try:
            size = Path(path).stat().st_size
        except OSError:
            missing += 1
            continue
        if offset and Path(path).is_file() and size < offset:
            shrunk += 1
    st = "warning" if missing or shrunk else "ok"
    return [
        Finding("watermarks", STORE_DB, st, f"{missing} files gone, {shrunk} shorter than their watermark")
    ]


def check(home: Path, *, full: bool = False) -> list[Finding]:
    """Every check of the module doc on the store at ``home``; never raises for
    damage (it is reported). DuckDB is brought current first, as by every reader of
    it (``analytics_current.bring_current``): a sync a small ingest left to the
    readers is no damage."""
    analytics_current.bring_current(Path(home))
    return _sqlite_checks(Path(home), full)


def damaged_files(findings: list[Finding]) -> list[str]:
    """The files of the ``damaged`` findings, in order, once each."""
    return list(dict.fromkeys(f.file for f in findings if f.status == "damaged"))


def repair(home: Path, findings: list[Finding]) -> dict:
    """Repair what ``findings`` found damaged (module doc), under the store lock.

    Returns ``{"actions": [str], "not_recovered": [str]}``. Raises StoreBusy when
    another run holds the lock."""
    from ctxkeep.maintenance.reindex import rebuild_analytics, rebuild_fts
    from ctxkeep.sinks.lock import hold

    home = Path(home)
    bad = {f.check for f in findings if f.status == "damaged"}
    actions: list[str] = []
    lost: list[str] = []
    with hold(home, 0, what="doctor --repair"):
        if bad & {"sqlite-header", "sqlite-integrity", "orphans"}:
            moved = backup.move_aside(home, "damaged")
            actions.append("moved aside: " + ", ".join(moved))
            for b in backup.backups(home):
                if backup.check_backup(b) is None:
                    backup.install(home, b)
                    actions.append(f"restored the store backup {b}")
                    lost.append(
                        f"what only the damaged store held after {b.name}: history compress removed "
                        "from session files whose backups are pruned since, and notes (the damaged "
                        "file is kept)"
                    )
                    break
            else:
                actions.append("no usable store backup: a new store is built from the agents' files")
                lost.append(
                    "what only the damaged store held: history compress removed from session files "
                    "whose backups are pruned, notes, purge tombstones (the damaged file is kept)"
                )
            (home / (STORE_DB + "-wal")).unlink(missing_ok=True)
            (home / (STORE_DB + "-shm")).unlink(missing_ok=True)
            if not (home / STORE_DB).exists():
                (home / "store.id").unlink(missing_ok=True)  # a new store gets a new identity
            from ctxkeep.pipeline.engine import run_ingest

            n = _reload_archived_ids(home)
            if n:
                actions.append(f"reloaded {n:,} archived entry ids from the Parquet archive")
            actions += _from_vault(home)
            s = run_ingest(home)
            actions.append(f"re-ingested the agents' files: {s.entries_new:,} new entries")
            n, files = _ingest_compress_backups(home)
            if files:
                actions.append(
                    f"re-ingested {files} compress backups: {n:,} entries that only they held (archived)"
                )
            bad |= {"duckdb"}
        elif "sqlite-wal" in bad:
            store_safety.check_wal(home)
            actions.append("moved the foreign WAL aside")
        conn = sqlite_store.connect(home)
        try:
            if "fts" in bad:
                r = rebuild_fts(conn)
                actions.append(f"rebuilt the FTS indexes: {r['chunks']:,} chunks")
            if bad & {"duckdb", "fts"} or "sqlite-wal" in bad:
                actions.append(rebuild_analytics(conn, home))
        finally:
            conn.close()
        if "parquet" in bad:
            lost.append("archived entries in missing or unreadable Parquet files (no other copy)")
    return {"actions": actions, "not_recovered": lost}


def _from_vault(home: Path) -> list[str]:
    """Rebuild a new store's vault manifest from the packs' records when it has none
    (``sinks.vault.capture.replay``: the manifest was in the lost store), then derive
    the entries of every file the vault holds from it (``maintenance.reparse``), so the
    agents' files (deleted, compressed, rotated since) are not needed. Returns the
    actions' lines."""
    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.vault import capture, forget, packs

    if not packs.pack_names(home):
        return []
    out = []
    conn = sqlite_store.connect(home)
    try:
        with sqlite_store.write(conn):
            n = capture.replay(conn, home)
        if n:
            out.append(f"rebuilt the vault's manifest from {n:,} packs")
            forget.sweep(conn, home)  # bytes of purged files an old pack still held
    finally:
        conn.close()
    r = reparse(home)
    added = sum(e["added"] for e in r["diff"]["entries"])
    out.append(f"derived {added:,} entries of {r['files']:,} files from the vault")
    return out


def _reload_archived_ids(home: Path) -> int:
    """Fill a rebuilt store's ``archived`` table from the Parquet archive (entries
    retention moved there exist only there): the re-ingest then leaves them in the
    archive instead of bringing them back into the hot store. Returns the ids added."""

    try:
        df = parquet.read_archive(home)
    except Exception:  # an unreadable archive file is reported by the parquet check
        return 0
    if df.is_empty() or "entry_id" not in df.columns:
        return 0
    rows = [(e, str(a)) for e, a in zip(df["entry_id"].to_list(), df["archived_at"].to_list(), strict=True)]
    conn = sqlite_store.connect(home)
    try:
        with sqlite_store.write(conn):
            return checks.add_archived(conn, rows)
    finally:
        conn.close()


def _ingest_compress_backups(home: Path) -> tuple[int, int]:
    """Ingest the compress backups (``<file>.backup``, ``<file>.backup.<UTC>``) of the
    agents' Claude Code and Codex files into a rebuilt store: the lines compress cut
    from a session file exist only there and in the lost store. Entry ids are stable,
    so only those lines add entries; they are marked ``archived`` (not in the session
    file any more), as compress had marked them. Returns ``(entries added, backup
    files read)``."""
    from ctxkeep.maintenance.compress.run import discovered_files
    from ctxkeep.pipeline.engine import run_ingest

    files, _problems = discovered_files(home)
    backups = [SourceFile(f.agent, b, "append", f.meta) for f in files for b in rewrite.backup_paths(f.path)]
    if not backups:
        return 0, 0
    s = run_ingest(home, files=backups, force=True)
    conn = sqlite_store.connect(home)
    try:
        ids = checks.active_entries_of_files(conn, [str(b.path) for b in backups])
        sqlite_store.apply_changes(conn, [StatusChange("archived", tuple(ids))])
    finally:
        conn.close()
    return s.entries_new, len(backups)


def as_dicts(findings: list[Finding]) -> list[dict]:
    """The findings as JSON-ready dicts."""
    return [asdict(f) for f in findings]

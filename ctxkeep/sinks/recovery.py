"""Completing operations across the stores: the roll-forward of ``sinks.sqlite.intents``.

SQLite is the system of record; DuckDB (``analytics.duckdb``) and the Parquet archive
hold what SQLite decided. An operation that changes several stores commits its SQLite
change with an intent (``intents.begin``) and then calls ``complete``; a process killed
before ``complete`` finished leaves the intent, and ``recover`` (the first thing every
writable command does under the store lock: ingest, purge, retention, compress,
reindex, doctor --repair) runs the same completion. Both phases are idempotent, so a
kill during recovery is recovered again by the next command.

Phase 1, per intent (``op`` → what is completed):

- ``purge`` (written in the purge's delete transaction: SQLite already holds the
  result): the scope's rows leave the Parquet archive (``parquet.purge_scope``) and
  the ``archived`` table, the run is recorded (once: the intent's step says so); the
  deleted pages are scrubbed once for all in phase 2 (``delete.scrub``);
- ``retention``: archive files a killed run wrote whose rows never left SQLite are
  deleted (their rows are still in ``entries``), then the entries still due before the
  intent's cutoff are archived (``parquet.archive_entries``); the killed run's
  ``runs`` row is closed as ``interrupted``;
- ``compress-file`` (written just before the session file is renamed): when the file
  now holds the new bytes (SHA-256 of its first ``new_bytes``), the removed entries
  are marked ``archived``, the kept ones get their new offsets and the file's watermark
  is dropped (the next ingest re-reads it: entry ids are stable, only the marker line
  is new); when it still holds the original, nothing was changed;
- ``scrub-file`` (``secrets --scrub``, written just before the file is renamed): as
  ``compress-file``, with no entry removed: the entries moved, the watermark dropped,
  so the next ingest reads the scrubbed file whole and the vault captures it whole;
- ``compress``: the killed run's ``runs`` row is closed as ``interrupted``;
- ``reindex``: both FTS indexes are rebuilt (one transaction: a killed rebuild left
  the old ones).

Phase 2, once for all: DuckDB is rebuilt from SQLite when a purge, retention or reindex
was completed (rows left SQLite; the rowid sync never removes rows), else synced; the
compress files' status and offset changes are replayed on it; the intents are finished
only when DuckDB holds the result (a DuckDB held by another process leaves them for the
next command). DuckDB's ``compression`` rows come from the finished run rows, so a
compress run's figures reach DuckDB when the run completes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.sinks.analytics_file import set_aside_damaged_analytics
from ctxkeep.sinks.files import ANALYTICS_DB, ANALYTICS_WAL, STORE_DB
from ctxkeep.sinks.sqlite import intents, store_safety
from ctxkeep.sinks.sqlite.connection import write
from ctxkeep.sinks.sqlite.intents import Intent, kill_point
from ctxkeep.sinks.sqlite.status import EntryChanges, Relocation, StatusChange, apply_changes
from ctxkeep.sinks.sqlite.sync_marks import mark_analytics_synced
from ctxkeep.timeutil import now_iso


@dataclass
class Done:
    """What phase 1 of one intent left for phase 2: ``analytics`` ``"rebuild"`` |
    ``"sync"`` | None, DuckDB ``changes`` to replay, a one-line ``note``, and
    ``result`` (op-specific figures for the caller)."""

    intent_id: int
    op: str
    analytics: str | None = "sync"
    changes: EntryChanges = field(default_factory=EntryChanges)
    note: str = ""
    result: dict = field(default_factory=dict)
    #: deleted rows to make unrecoverable from the files (``delete.scrub``, once for all)
    scrub: bool = False


# ---------------------------------------------------------------- DuckDB


def rebuild_analytics(conn: sqlite3.Connection, home: Path) -> tuple[bool, str]:
    """Delete ``analytics.duckdb`` (and its WAL) and rebuild it from SQLite
    (``sinks.duckdb.sync(rebuild=True)``, then ``mark_analytics_synced``), so no
    deleted row survives in DuckDB's free blocks. Returns ``(ok, one-line note)``;
    never raises. The WAL is deleted first: a process killed between the two deletes
    must not leave a WAL that the next open replays onto a new file. A broken
    ``prices.toml`` deletes nothing: the file is kept as it is and the note says why
    (a rebuild that failed after the delete left every report empty: newuser17 F1)."""
    from ctxkeep.sinks.prices_file import prices_error

    err = prices_error(Path(home))
    if err is not None:
        return False, f"analytics store not rebuilt: {err}"
    before = analytics_objects(Path(home))
    for name in (ANALYTICS_WAL, ANALYTICS_DB):
        try:
            (Path(home) / name).unlink()
        except FileNotFoundError:
            pass
    try:
        from ctxkeep.sinks import duckdb as duckdb_store

        r = duckdb_store.sync(conn, Path(home), rebuild=True)
        mark_analytics_synced(
            conn, r["entries_rowid"], r["status_seq"], r.get("prices_stamp"), r.get("usage_log_seq")
        )
        note = f"analytics rebuilt: {r['entries_synced']:,} entries"
        return True, note + _dropped_note(before, analytics_objects(Path(home)))
    except Exception as e:
        if store_safety.is_corruption(e):  # SQLite read a damaged page: not a DuckDB matter
            raise
        return False, (
            f"analytics store not rebuilt ({type(e).__name__}: {(str(e).splitlines() or [''])[0]}); "
            "the next ingest rebuilds it"
        )


def analytics_objects(home: Path) -> dict[str, str]:
    """The tables and views of ``<home>/analytics.duckdb``'s main schema, ``{name:
    "table" | "view"}``: ``{}`` when the file is missing or cannot be opened read-only
    (damaged, or another process holds it read-write). Never raises."""
    p = Path(home) / ANALYTICS_DB
    if not p.exists():
        return {}
    try:
        import duckdb

        with duckdb.connect(str(p), read_only=True) as db:
            rows = db.execute(
                "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
    except Exception:
        return {}
    return {name: "view" if kind == "VIEW" else "table" for name, kind in rows}


def _dropped_note(before: dict[str, str], after: dict[str, str]) -> str:
    """``"; dropped 1 table and 1 view not made by ctxkeep: my_budget, my_costs (…)"``
    for the objects of ``before`` the rebuilt file (``after``) has not: a user's own,
    which a rebuild from SQLite cannot bring back (newuser19 F14: reindex dropped them
    without a word); "" for none."""
    gone = sorted(n for n in before if n not in after)
    if not gone:
        return ""
    kinds = [before[n] for n in gone]
    parts = [
        f"{kinds.count(k)} {k}{'s' if kinds.count(k) > 1 else ''}" for k in ("table", "view") if k in kinds
    ]
    return (
        f"; dropped {' and '.join(parts)} not made by ctxkeep: {', '.join(gone)} (analytics.duckdb is rebuilt "
        "from SQLite: keep your own in your own database and ATTACH this one READ_ONLY)"
    )


def sync_analytics(conn: sqlite3.Connection, home: Path) -> tuple[bool, str]:
    """Sync DuckDB from SQLite (``sinks.duckdb.sync``, then ``mark_analytics_synced``).
    Returns ``(ok, one-line note)``; never raises."""
    try:
        from ctxkeep.sinks import duckdb as duckdb_store

        r = duckdb_store.sync(conn, Path(home))
        mark_analytics_synced(
            conn, r["entries_rowid"], r["status_seq"], r.get("prices_stamp"), r.get("usage_log_seq")
        )
        return True, f"analytics: {r['entries_synced']} entries synced"
    except Exception as e:
        if store_safety.is_corruption(e):
            raise
        return False, (
            f"analytics store not updated ({type(e).__name__}: {(str(e).splitlines() or [''])[0]}); "
            "the next ingest catches up"
        )


# ---------------------------------------------------------------- runs


def _close_run(conn: sqlite3.Connection, run_id: int | None, note: str) -> None:
    """Close a ``runs`` row a killed process left ``running``: status ``interrupted``,
    ``note`` added to its detail."""
    if run_id is None:
        return
    row = conn.execute("SELECT status, detail FROM runs WHERE run_id=?", (run_id,)).fetchone()
    if not row or row[0] != "running":
        return
    try:
        detail = json.loads(row[1] or "{}")
    except ValueError:
        detail = {}
    detail["recovered"] = note
    with write(conn):
        conn.execute(
            "UPDATE runs SET status='interrupted', finished_at=?, detail=? WHERE run_id=?",
            (now_iso(), json.dumps(detail, default=str), run_id),
        )


def _close_orphan_runs(conn: sqlite3.Connection, home: Path) -> int:
    """Close as ``interrupted`` the ``runs`` rows left ``running`` by a process killed
    before it wrote an intent (e.g. during retention's quick_check): rows that started
    before this process took the store lock (``lock.held_since``), which no live run
    can own. Returns the number closed (0 when the lock is not held here)."""
    from ctxkeep.sinks.lock import held_since

    since = held_since(home)
    if since is None:
        return 0
    with write(conn):
        cur = conn.execute(
            "UPDATE runs SET status='interrupted', finished_at=? WHERE status='running' AND started_at < ?",
            (now_iso(), since),
        )
    return cur.rowcount


# ---------------------------------------------------------------- phase 1 per op


def _purge(conn: sqlite3.Connection, home: Path, it: Intent, recovered: bool) -> Done:
    from ctxkeep.sinks import parquet
    from ctxkeep.sinks.sqlite.runs import recorded_run

    p = it.payload

    # a file's rows leave the ``archived`` table BEFORE the file is rewritten: a kill
    # between a file's rewrite and this delete left ids in ``archived`` that no archive
    # held, and the completion after it found nothing left to remove (a random-kill purge
    # trial). A kill after the delete leaves the rows in Parquet only; the completion
    # removes them.
    def forget(ids: list[str]) -> None:
        with write(conn):
            conn.executemany("DELETE FROM archived WHERE entry_id = ?", [(i,) for i in ids])

    kill_point("purge", "archive")
    r = parquet.purge_scope(
        home,
        p["scope"],
        p["value"],
        set(p.get("owned") or ()),
        before_write=forget,
        after_file=lambda: kill_point("purge", "archive-file"),
    )
    removed = dict(p.get("removed") or {})
    removed["archived"] = removed.get("archived", 0) + r["rows"]
    # the forgotten files' bytes leave the vault's packs (idempotent: again after a kill)
    from ctxkeep.sinks.vault.forget import sweep

    kill_point("purge", "vault")
    # a shared sidecar written again without the purged sessions (``vault.shared``):
    # its older generations' captures leave the packs' records too (their cut)
    from ctxkeep.sinks.vault.prune import pruned_captures

    sweep(conn, home, drop=pruned_captures(conn, home) if p.get("removed", {}).get("vault_shared") else ())
    changed = any(removed.get(k) for k in ("entries", "usage", "quarantine", "archived"))
    if it.step != "recorded":
        # the purge began when its intent was created: its run row is written now, after
        # the work (newuser24 F23: runs showed a finished_at 0.2 ms after started_at and
        # no seconds). A purge completed after a crash keeps the intent's start too; its
        # seconds then include the time the store lay interrupted.
        with recorded_run(conn, "purge", started_at=it.created_at) as run:
            run.summary = {
                **(p.get("run_summary") or {}),
                **{f"removed_{k}": v for k, v in removed.items() if isinstance(v, int)},
                **({"recovered": "completed by the next command after a crash"} if recovered else {}),
            }
        p["removed"] = removed
        intents.advance(conn, it.intent_id, "recorded", p)
    return Done(
        it.intent_id,
        "purge",
        "rebuild" if changed else None,
        scrub=changed,
        note=f"purge of a {p['scope']}",
        result={"removed": removed},
    )


def _retention(conn: sqlite3.Connection, home: Path, it: Intent, recovered: bool) -> Done:
    from ctxkeep.sinks import parquet
    from ctxkeep.timeutil import parse_utc

    p = it.payload
    archived = int(p.get("archived") or 0)
    dropped = 0
    if recovered:
        dropped = parquet.drop_uncommitted(conn, home, p.get("stamps") or [])
        stamp = parquet.new_stamp()
        p.setdefault("stamps", []).append(stamp)
        intents.advance(conn, it.intent_id, "archiving", p)
        r = parquet.archive_entries(conn, home, parse_utc(p["cutoff"]), stamp=stamp)
        archived += r["entries"]
        p["archived"] = archived
        intents.advance(conn, it.intent_id, "archived", p)
        _close_run(conn, it.run_id, f"completed by the next command: {archived} entries archived")
    return Done(
        it.intent_id,
        "retention",
        # a killed run may have moved rows out of SQLite before it could say so
        "rebuild" if archived or dropped or recovered else None,
        note=f"retention ({archived} entries archived, {dropped} unfinished archive files removed)",
        result={"archived": archived, "dropped_files": dropped},
    )


def _file_state(path: Path, p: dict) -> str:
    """``new`` when the file starts with the compressed bytes, ``original`` when with
    the original ones, else ``other`` (or ``gone``)."""
    try:
        with open(path, "rb") as f:
            for key, n in (("new", p["new_bytes"]), ("original", p["original_bytes"])):
                f.seek(0)
                if hashlib.sha256(f.read(n)).hexdigest() == p[f"{key}_sha256"]:
                    return key
    except OSError:
        return "gone"
    return "other"


def _compress_file(conn: sqlite3.Connection, home: Path, it: Intent, recovered: bool) -> Done:
    """A ``compress-file`` or ``scrub-file`` intent (``maintenance.scrub``: no entry
    removed, the same moves and the same dropped watermark)."""
    p = it.payload
    what = "compress" if it.op == "compress-file" else "scrub"
    removed = p.get("removed") or []
    changes = EntryChanges(
        status=[StatusChange("archived", tuple(removed))] if removed else [],
        moves=[Relocation(p["path"], tuple((e, int(o)) for e, o in p["moves"]))],
    )
    if it.step == "sqlite":  # the store holds it: DuckDB only
        return Done(it.intent_id, it.op, "sync", changes, note=f"{what} of {p['path']} (DuckDB)")
    state = _file_state(Path(p["path"]), p)
    if state != "new":
        return Done(
            it.intent_id,
            it.op,
            None,
            note=f"{what} of {p['path']} (the file was not replaced: {state}; nothing to do)",
        )
    with write(conn):
        apply_changes(conn, changes)
        # the next ingest re-reads the new file (stable ids: only compress's marker
        # line is new) and the vault captures it whole, from byte 0
        conn.execute("DELETE FROM watermarks WHERE path=?", (p["path"],))
        intents.advance(conn, it.intent_id, "sqlite")
    return Done(
        it.intent_id,
        it.op,
        "sync",
        changes,
        note=f"{what} of {p['path']} ("
        + (f"{len(removed)} removed entries archived)" if what == "compress" else "its entries moved)"),
    )


def _compress_run(conn: sqlite3.Connection, home: Path, it: Intent, recovered: bool) -> Done:
    if recovered:
        _close_run(conn, it.run_id, "killed; the files it compressed were completed by the next command")
    return Done(it.intent_id, "compress", "sync", note="compress run (its record closed as interrupted)")


def _reindex(conn: sqlite3.Connection, home: Path, it: Intent, recovered: bool) -> Done:
    from ctxkeep.sinks.sqlite.fts import rebuild_fts_tables, refresh_facets

    if recovered and it.payload.get("fts") and it.step != "fts":
        with write(conn):
            refresh_facets(conn)
            rebuild_fts_tables(conn)
            intents.advance(conn, it.intent_id, "fts")
    return Done(it.intent_id, "reindex", "rebuild" if it.payload.get("analytics") else None, note="reindex")


_PHASE1 = {
    "purge": _purge,
    "retention": _retention,
    "compress-file": _compress_file,
    "scrub-file": _compress_file,
    "compress": _compress_run,
    "reindex": _reindex,
}


# ---------------------------------------------------------------- the two phases


def complete(
    conn: sqlite3.Connection, home: Path, intent_ids: list[int], *, recovered: bool = False
) -> tuple[list[Done], str]:
    """Complete the operations of ``intent_ids`` in every store (the module doc's two
    phases) and finish their intents when DuckDB holds the result. The caller holds the
    store lock. Returns ``(phase-1 results, DuckDB note)``; an intent whose DuckDB part
    failed stays open (the note says why)."""
    done: list[Done] = []
    for iid in intent_ids:
        it = intents.get(conn, iid)
        if it is None:
            continue
        fn = _PHASE1.get(it.op)
        if fn is None:
            continue
        done.append(fn(conn, Path(home), it, recovered))
    if not done:
        return [], ""
    if any(d.scrub for d in done):
        from ctxkeep.sinks.sqlite import delete as delete_store

        kill_point("purge", "scrub")
        conn.execute("PRAGMA secure_delete=ON")
        delete_store.scrub(conn)
    if any(d.op == "purge" for d in done):
        kill_point("purge", "analytics")
    kill_point("intents", "analytics")
    modes = {d.analytics for d in done}
    ok, note = True, ""
    if "rebuild" in modes:
        ok, note = rebuild_analytics(conn, home)
    elif "sync" in modes:
        ok, note = sync_analytics(conn, home)
    changes = EntryChanges()
    for d in done:
        changes.extend(d.changes)
    if ok and changes and (Path(home) / ANALYTICS_DB).exists():
        a = apply_changes(None, changes, home=Path(home))
        ok = a.note in ("ok", "no analytics store")
        note = note if ok else a.note
    kill_point("intents", "finish")
    intents.finish(conn, *(d.intent_id for d in done if ok or d.analytics is None))
    return done, note


def recover(conn: sqlite3.Connection, home: Path, *, quiet: bool = False, check: bool = False) -> list[str]:
    """Complete every open intent another (dead) process left (``complete``), and move
    a damaged ``analytics.duckdb`` aside (``set_aside_damaged_analytics``). The first
    step of every writable command; the caller holds the store lock. Prints one
    ``warning:`` line per completed operation on stderr unless ``quiet``. Returns the
    notes. Costs one query and a 12-byte read when there is nothing to do. With
    ``check`` (the maintenance commands), ``PRAGMA quick_check`` first: StoreDamaged
    before anything is written (``store_safety.check_integrity``)."""
    if check:
        store_safety.check_integrity(conn, Path(home) / STORE_DB)
    notes: list[str] = []
    _close_orphan_runs(conn, home)
    moved = set_aside_damaged_analytics(home)
    if moved:
        notes.append(f"damaged analytics store moved aside: {moved}")
    todo = [it.intent_id for it in intents.pending(conn) if not it.mine]
    if not todo:
        return notes
    done, note = complete(conn, home, todo, recovered=True)
    for d in done:
        notes.append(f"completed an interrupted {d.note}")
    if note and "not" in note.split(":")[0]:  # DuckDB could not follow: say so
        notes.append(note)
    if not quiet:
        for n in notes[1 if moved else 0 :]:
            sys.stderr.write(f"warning: {n}\n")
    return notes

"""Purge: delete a session's or a project's data from the store, or wipe the whole store.

The one implementation (``run_purge``) shared by ``ctxkeep purge``, the purge flow and
MCP ``ctx_purge``; the request and its contract are ``maintenance.purge_request``.
Idempotent; no network; the report gives the resolved scope and what was removed.

What a session/project purge removes, in one SQLite transaction (the cascade delete of
``sinks.sqlite.delete``):

- ``entries`` of the scope (a session: its entries and those of its sub-agents, i.e.
  ``parent_session_id`` = the id; a project: entries whose ``project_dir`` is the dir or
  below it (``paths.under_sql``), plus the dir-less records (summaries) of sessions that
  lie wholly in it);
- ``usage`` rows of those entries and sessions (so a project's stats are reset);
- ``contents`` that no remaining entry references, their ``chunks``, and their rows in
  both FTS5 indexes;
- ``quarantine`` rows (raw bad lines) of source files none of whose entries remain;
- the coverage ledger's rows (``sinks.sqlite.coverage``) of those files: their path
  and record counts (``removed["coverage"]``);
- then DuckDB: ``analytics.duckdb`` is derived, so it is deleted and rebuilt from SQLite
  (``reindex.rebuild_analytics``: no deleted row survives in its free blocks);
- the vault's copies (``sinks.vault.forget``): the source files removed wholly and the
  rows documents of the sessions removed whole (an agent database's session,
  ``<db>#session=<id>``), their bytes swept from the packs by the completion;
  ``removed["vault_files"]``, ``["vault_bytes"]`` (stored bytes that leave the packs),
  ``["vault_raw_bytes"]`` (their original bytes), also in the dry run; a sidecar
  the folder's other sessions share (Kiro IDE's ``sessions.json``, which lists them
  with their titles) stays, its vault copy written again without what it held of the
  purged sessions (``sinks.vault.shared``; ``removed["vault_shared"]``: files
  rewritten, or in the dry run to rewrite): no purged text stays in a vault byte;
- and the Parquet archive (``sinks.parquet``): files holding rows of the scope are
  rewritten without them (``removed["archived"]`` counts those rows).

Deleted data does not linger: the purge connection runs with ``PRAGMA secure_delete=ON``
(freed cells and pages are zeroed), ``temp_store=MEMORY`` (no temp files), both FTS5
indexes are merged with ``'optimize'`` (FTS5 otherwise keeps deleted tokens in old
segments until a merge), and the WAL is checkpointed and truncated at the end
(``delete.scrub``).

A tombstone (``tombstones`` table, read by ``pipeline.engine.transform_batch``) keeps the
next ingest from bringing the data back; watermarks are kept, so the files are not
re-read for nothing. ``reingest=True`` purges without a tombstone, lifts an existing
one (and the session tombstones a project purge added), and drops the watermarks of
the files concerned, so the next ingest reads them again from the start. The files a
purge concerned are remembered in ``purge_files`` for that purpose.

What a purge keeps on purpose is its tombstone alone: the session id or project dir,
the session ids a project purge tombstoned and the source paths (``purge_files``), so
that the next ingest does not bring the data back; the report says so (``kept``:
``kept_line``, None for a ``reingest`` purge, which keeps none).

``scope="all"`` (``wipe``) deletes ``store.db`` with its ``-wal``/``-shm`` sidecars,
``analytics.duckdb`` (and its ``.wal``) and the Parquet ``archive/`` directory; it keeps
``config.toml``, the lock file and Prefect's own directory; ``store.id`` and
``integrity.ok`` go too, after ``store.wiped`` was written, which carries the
tombstones into the next store (``sinks.sqlite.wiped``: a wipe is not damage, and a
purged project stays out): the next ingest rebuilds the store from the agents' files.

A purge never opens, modifies or deletes the agents' own session files, nor the store
backups (``<home>/backups``): ``backups_holding`` names those that still hold the scope,
and ``purge_named`` puts them in the report.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from ctxkeep import timeutil
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.sinks import parquet, recovery
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB, store_files
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite import coverage, intents, tombstones, wiped
from ctxkeep.sinks.sqlite import delete as delete_store
from ctxkeep.sinks.sqlite.intents import kill_point


def _select(conn: sqlite3.Connection, req: PurgeRequest) -> None:
    """Select ``req``'s entries and whole sessions for ``delete_store.delete_selected``."""
    delete_store.select_scope(conn, req.scope, req.value)


def preview(conn: sqlite3.Connection, request: PurgeRequest) -> dict:
    """What a purge of ``request`` would remove from SQLite, changing nothing.

    Works on a read-only connection (only TEMP tables are written). Returns
    ``delete_store.counts``: ``{"entries", "sessions", "contents", "chunks", "usage",
    "quarantine", "source_files": int, "text_bytes": bytes of the contents that would
    go, "token_estimate": tokens of the entries that would go}``.
    """
    delete_store.prepare(conn)
    _select(conn, request)
    try:
        return delete_store.counts(conn)
    finally:
        delete_store.drop_selection(conn)


def preview_empty() -> dict:
    """The zero counts (a purge of an empty or missing store)."""
    return dict.fromkeys(
        (
            "entries",
            "sessions",
            "contents",
            "chunks",
            "usage",
            "quarantine",
            "source_files",
            "text_bytes",
            "token_estimate",
            "vault_files",
            "vault_bytes",
            "vault_raw_bytes",
            "vault_shared",
        ),
        0,
    )


def _tombstone(
    conn: sqlite3.Connection, req: PurgeRequest, files: list[str], owned: set[str], reingest: bool
) -> dict:
    """Add (or with ``reingest`` lift) the tombstones of ``req`` (``sinks.sqlite.tombstones``);
    ``owned``: the sessions a project purge selected whole (they get session
    tombstones). Returns what was done."""
    if not reingest:
        new = tombstones.add(conn, req.scope, req.value, timeutil.now_iso(), owned, files)
        return {
            # "already there": an earlier purge of the scope added it (newuser24 F18)
            "tombstone": "added" if new else "already there",
            "tombstones": [f"{req.scope} {req.value}"],
            "watermarks_dropped": 0,
            "kept": kept_line(req.scope, len({s for s in owned if s}), len(files)),
            "tombstone_note": tombstone_note(req.scope, req.value),
        }
    n, dropped = tombstones.lift(conn, req.scope, req.value, files)
    return {
        "tombstone": "lifted" if n else "none",
        "tombstones_lifted": n,
        "watermarks_dropped": dropped,
        "kept": None,
    }


def wipe(home: Path, *, dry_run: bool = False) -> dict:
    """Wipe the whole store at ``home``: delete ``STORE_FILES``, the ``archive/`` and
    the ``vault/`` directories (``config.toml``, the lock file and Prefect's directory stay). The caller
    holds the store lock (``run_purge`` does). Returns ``{"scope": "all", "resolved",
    "home", "dry_run", "files_removed": [names], "bytes_removed": bytes, "removed":
    {entries, sessions, contents, chunks, usage, quarantine} (counted before, from a
    read-only connection; empty when there is no store), "tombstones_kept": the
    tombstones carried into the next store (``sinks.sqlite.wiped``), "reread": {"files",
    "bytes"}: what the next ingest reads again from the start (``reread``)}`` plus
    ``note`` when the store could not be read (its files are removed anyway).
    ``dry_run`` only counts."""
    sizes = store_files(home)
    report = {
        "scope": "all",
        "resolved": "the whole store",
        "home": str(home),
        "dry_run": dry_run,
        "files_removed": sorted(sizes),
        "bytes_removed": sum(sizes.values()),
        "removed": {},
    }
    db = home / STORE_DB
    if db.exists():
        try:
            report["removed"] = delete_store.store_counts(db)
        except sqlite3.Error as e:
            report["note"] = f"store unreadable ({e}); its files are removed anyway"
    kept = wiped.kept_rows(db)
    report["tombstones_kept"] = len(kept["tombstones"])
    report["reread"] = reread(db)
    if dry_run:
        return report
    # the mark first (durable): a kill from here on leaves a wiped home, never a
    # "damaged" one, and the next writable open finishes the wipe (``sinks.sqlite.wiped``)
    wiped.write(home, {"wiped_at": timeutil.now_iso(), **kept})
    kill_point("wipe", "marked")
    # store.db and its sidecars, DuckDB, the archive, the vault's packs (whole sessions,
    # redacted: their manifest goes with store.db), store.id and integrity.ok
    wiped.delete_store_files(home, between=lambda: kill_point("wipe", "store_db"))
    return report


def reread(db: Path) -> dict:
    """What the next ingest after a wipe reads again from the start: the files the
    store's watermarks name that are on disk now: ``{"files": int, "bytes": their size
    now, "gone": the files they name that are not on disk (the agent deleted them: only
    the store and its vault held them, so they do not come back)}`` (zeros without a
    readable store)."""
    import os

    out = {"files": 0, "bytes": 0, "gone": 0}
    if not Path(db).exists():
        return out
    for p in {q.split("#session=", 1)[0] for q in wiped.watermark_paths(Path(db))}:
        try:
            st = os.stat(p)
        except OSError:
            out["gone"] += 1
            continue
        out["files"] += 1
        out["bytes"] += st.st_size
    return out


def backups_holding(home: Path, requests: list[PurgeRequest]) -> list[dict]:
    """The store backups (``backup.backups``: ``<home>/backups/store-<UTC>.db``, newest
    first) that hold rows of ``requests`` (one scope, its spellings; ``all``: any entry).

    A purge never changes a backup (it is the user's recovery point, and a restored
    backup predates the purge's tombstone too), so the purge reports them instead.
    Each backup is opened read-only and immutable. Returns ``[{"path", "taken": UTC
    ISO-8601 from the file name (its mtime when the name has none), "entries": entries
    of the scope in it (None when it could not be read: it may hold them)}]``, only
    those with ``entries`` not 0."""

    from ctxkeep.maintenance.backup import PREFIX, SUFFIX, backups

    out = []
    for path in backups(home):
        stamp = path.name[len(PREFIX) : -len(SUFFIX)]
        try:
            taken = dt.datetime.strptime(stamp.split(".")[0], "%Y%m%dT%H%M%S").replace(tzinfo=dt.UTC)
        except ValueError:
            taken = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
        n: int | None
        try:
            n = delete_store.entries_in_copy(path, [(r.scope, r.value) for r in requests])
        except sqlite3.Error:
            n = None
        if n != 0:
            out.append({"path": str(path), "taken": taken.isoformat().replace("+00:00", "Z"), "entries": n})
    return out


def run_purge(
    home: Path, request: PurgeRequest, *, dry_run: bool = False, reingest: bool = False, timeout: float = -1
) -> dict:
    """Purge ``request``'s data from the store at ``home`` (see the module doc).

    Args:
        home: the ctxkeep home.
        request: from ``purge_request.parse_purge_request`` (or ``PurgeRequest("all")``
            from the CLI).
        dry_run: only count (``preview``); nothing is changed and no lock is taken.
        reingest: no tombstone; lift an existing one and drop the concerned files'
            watermarks so the next ingest reads the data again.
        timeout: seconds to wait for the store lock (-1 forever, 0 not at all).

    Returns ``{"scope", "session_id", "project_dir", "resolved": str, "home", "dry_run",
    "removed": {entries, sessions, contents, chunks, usage, quarantine, source_files,
    text_bytes, token_estimate, archived; a dry run also source_files_gone: of
    source_files, those no longer on disk}, "files": [source paths concerned], "tombstone":
    "added"|"already there"|"lifted"|"none" (a dry run: "would add", with ``tombstones``), "tombstone_note":
    what the tombstone blocks (``tombstone_note``), "analytics": str}``; for ``all``: the ``wipe`` report.
    Idempotent: purging again removes nothing and reports zeros. Raises StoreBusy when
    the lock is not free within ``timeout``, StoreError when the store's schema is newer
    than this ctxkeep.
    """
    home = Path(home)
    base = {
        "scope": request.scope,
        "session_id": request.session_id,
        "project_dir": request.project_dir,
        "resolved": request.describe(),
        "home": str(home),
        "dry_run": dry_run,
    }
    if request.scope == "all":
        if dry_run:
            return wipe(home, dry_run=True)
        with hold(home, timeout, what="purge"):
            return wipe(home)
    db = home / STORE_DB
    if dry_run:
        if not db.exists():
            return {
                **base,
                "removed": {**preview_empty(), "archived": 0},
                "files": [],
                "tombstone": "would add",
                "tombstones": [f"{request.scope} {request.value}"],
                "tombstone_note": tombstone_note(request.scope, request.value),
            }
        conn = sqlite_store.connect(home, readonly=True)
        try:
            delete_store.prepare(conn)
            _select(conn, request)
            counts = delete_store.counts(conn)
            files = delete_store.selected_files(conn)
            owned = delete_store.selected_sessions(conn)
            whole = delete_store.whole_files(conn)
            counts.update(_vault_preview(conn, owned, whole))
            counts["vault_shared"] = len(_shared_preview(conn, owned, whole))
        finally:
            conn.close()
        counts["archived"] = parquet.purge_scope(home, request.scope, request.value, owned, dry_run=True)[
            "rows"
        ]
        counts["source_files_gone"] = files_gone(files)
        return {
            **base,
            "removed": counts,
            "files": files,
            "tombstone": "would add",
            "tombstones": [f"{request.scope} {request.value}"],
            "tombstone_note": tombstone_note(request.scope, request.value),
        }
    with hold(home, timeout, what="purge"):
        conn = sqlite_store.connect(home)
        try:
            recovery.recover(conn, home, check=True)
            iid, removed, files, tomb = purge_locked(conn, request, reingest)
            done, analytics = recovery.complete(conn, home, [iid])
        finally:
            conn.close()
    if done:
        removed = done[0].result["removed"]
    return {
        **base,
        "removed": removed,
        "files": files,
        **tomb,
        "analytics": analytics or "nothing removed; analytics unchanged",
    }


def files_gone(files: list[str]) -> int:
    """How many of ``files`` (source paths; a database's session as
    ``<db>#session=<id>``: its database) are no longer on disk: a purge preview's
    "agent files it came from" counts the others as left on disk (newuser21 N8: 494 of
    508 were deleted already)."""
    return sum(not Path(f.split("#session=", 1)[0]).exists() for f in files)


def tombstone_note(scope: str, value: str) -> str:
    """What the tombstone of ``(scope, value)`` blocks from now on, in words (a purge's
    preview, its confirmation and its report): a project's blocks its future sessions
    too, which every ingest then counts (``Summary.tombstoned``; newuser23 F1)."""
    if scope == "project":
        return (
            f"from now on every ingest skips the records of {value} and below, new sessions too "
            f"(counted in its summary; `ctxkeep purge --reingest --project {value}` lifts it)"
        )
    return (
        f"from now on every ingest skips the records of session {value} and its sub-agents, "
        f"a resumed copy too (counted in its summary; `ctxkeep purge --reingest --session {value}` lifts it)"
    )


def kept_line(scope: str, sessions: int, files: int) -> str:
    """What identifying data a purge that adds a tombstone keeps on purpose, in words:
    the session id or project dir, the ``sessions`` ids a project purge tombstoned on
    their own, the ``files`` source paths (``sinks.sqlite.tombstones``)."""
    what = ["the session id"] if scope == "session" else ["the project dir"]
    if scope == "project" and sessions:
        what.append(f"{sessions} session id{'s' if sessions != 1 else ''}")
    if files:
        what.append(f"{files} file path{'s' if files != 1 else ''}")
    names = what[0] if len(what) == 1 else ", ".join(what[:-1]) + " and " + what[-1]
    return (
        f"kept on purpose: a tombstone naming {names}, so the next ingest does not bring it back "
        "(`purge --reingest` lifts it)"
    )


def _vault_paths(conn: sqlite3.Connection, owned: set[str], whole: list[str]) -> list[str]:
    """The vault files a purge takes out: the source files it removed wholly, and the
    rows documents of its whole sessions (an agent database's session, held as
    ``<db>#session=<id>``, ``sinks.vault.forget.rows_documents``; the database itself
    stays while other sessions live in it)."""
    from ctxkeep.sinks.vault.forget import rows_documents

    return sorted(set(whole) | set(rows_documents(conn, owned, whole)) | set(_sidecars(conn, whole)))


def _sidecars(conn: sqlite3.Connection, whole: list[str]) -> list[str]:
    """The sidecars the vault holds of the files ``whole`` (``sources.readers.sidecar``:
    a sub-agent's ``.meta.json``, a tool output in ``tool-results/``): no entry names
    them, so they go with the transcript they belong to (their vault files, watermarks
    and, remembered, the ingest plan's reads). A sidecar the sessions of a folder share
    (``sidecar.SHARED``: Kiro IDE's ``sessions.json``, which lists them all) goes only
    with the last of them: when every other file the vault holds in that folder goes
    too."""
    import os

    from ctxkeep.sinks.vault.manifest import paths_in_folder, sidecars_of

    out = sidecars_of(conn, whole, shared=False)
    gone = set(whole) | set(out)
    for p in sorted(set(sidecars_of(conn, whole)) - set(out)):
        folder = os.path.dirname(p)
        held = {q for q in paths_in_folder(conn, folder) if q != p}
        if held <= gone:
            out.append(p)
    return sorted(out)


def _shared_kept(conn: sqlite3.Connection, whole: list[str], gone: list[str]) -> list[str]:
    """The shared sidecars (``sidecar.SHARED``: Kiro IDE's index) of the folders of
    ``whole`` that the purge keeps (``gone``: the vault files it takes out), for
    ``sinks.vault.shared``."""
    from ctxkeep.sinks.vault.manifest import sidecars_of

    return sorted(set(sidecars_of(conn, whole)) - set(sidecars_of(conn, whole, shared=False)) - set(gone))


def _without(conn: sqlite3.Connection, owned: set[str]) -> Callable[[str, bytes], bytes]:
    """``sinks.vault.shared.Without`` for a purge of the sessions ``owned``: a shared
    sidecar's bytes without what they hold of them, nor of any session tombstoned
    before (``sidecar.without_sessions``)."""
    from ctxkeep.sources.readers.sidecar import without_sessions

    sessions = {s for s in owned if s} | set(_tombstoned_sessions(conn))
    return lambda agent, data: without_sessions(agent, data, sessions)


def _tombstoned_sessions(conn: sqlite3.Connection) -> set[str]:
    """The session ids the store's tombstones name (``sqlite_store.tombstoned``)."""
    return set(sqlite_store.tombstoned(conn).get("session", ()))


def _shared_preview(conn: sqlite3.Connection, owned: set[str], whole: list[str]) -> list[str]:
    """The shared sidecars whose vault copy a purge of ``owned`` would rewrite
    (``sinks.vault.shared.holding``)."""
    from ctxkeep.sinks import vault
    from ctxkeep.sinks.vault.shared import holding

    home = vault.home_of(conn)
    kept = _shared_kept(conn, whole, _vault_paths(conn, owned, whole))
    return holding(conn, home, kept, _without(conn, owned)) if home is not None and kept else []


def _vault_preview(conn: sqlite3.Connection, owned: set[str], whole: list[str]) -> dict:
    """``{"vault_files", "vault_bytes", "vault_raw_bytes"}``: what the purge takes out
    of the vault (``sinks.vault.forget.preview``)."""
    from ctxkeep.sinks.vault.forget import preview as vault_preview

    return vault_preview(conn, _vault_paths(conn, owned, whole))


def _forget_vault(conn: sqlite3.Connection, paths: list[str]) -> int:
    """``sinks.vault.forget`` of ``paths`` (``_vault_paths``); returns their number."""
    from ctxkeep.sinks import vault
    from ctxkeep.sinks.vault.forget import forget

    home = vault.home_of(conn)
    return forget(conn, home, list(paths)) if home is not None and paths else 0


def _rewrite_shared(
    conn: sqlite3.Connection, owned: set[str], whole: list[str], gone: list[str]
) -> list[str]:
    """``sinks.vault.shared.rewrite`` of the shared sidecars the purge keeps; returns
    the paths rewritten."""
    from ctxkeep.sinks import vault
    from ctxkeep.sinks.vault.shared import rewrite

    home = vault.home_of(conn)
    kept = _shared_kept(conn, whole, gone)
    return rewrite(conn, home, kept, _without(conn, owned)) if home is not None and kept else []


def purge_locked(conn: sqlite3.Connection, request: PurgeRequest, reingest: bool = False) -> tuple:
    """The SQLite part of a session or project purge, in one transaction with its
    intent (``sinks.sqlite.intents``, op ``purge``): delete the scope (the module doc),
    add or lift its tombstone, delete the watermark rows of the files it removed wholly,
    scrub the run details naming it. The caller holds the store lock and completes the
    intent (``sinks.recovery.complete``: the Parquet archive, the scrub, DuckDB, the run
    record). Returns ``(intent_id, removed counts, files concerned, tombstone report)``."""
    delete_store.prepare(conn, secure=True)
    with sqlite_store.write(conn):
        _select(conn, request)
        owned = delete_store.selected_sessions(conn)
        whole = delete_store.whole_files(conn)
        removed = delete_store.delete_selected(conn)
        kill_point("purge", "delete")  # inside the transaction: rolled back
        files = removed.pop("files")
        tomb = _tombstone(conn, request, files, owned, reingest)
        # (with the sidecars of those files: ``_sidecars``)
        removed["watermarks"] = tombstones.forget_files(
            conn,
            request.scope,
            request.value,
            sorted({*whole, *_sidecars(conn, whole)}),
            remember=not reingest,
        )
        # the coverage ledger's rows of those files: their path and counts go with them
        removed["coverage"] = coverage.forget(conn, whole)
        # the files removed wholly and the whole sessions' rows documents leave the
        # vault too (their bytes: the completion's sweep)
        gone = _vault_paths(conn, owned, whole)
        removed.update(_vault_preview(conn, owned, whole))
        removed["vault_files"] = _forget_vault(conn, gone)
        # a sidecar the folder's other sessions share (Kiro IDE's index) stays, written
        # again without what it held of the purged sessions (``sinks.vault.shared``)
        shared = _rewrite_shared(conn, owned, whole, gone)
        removed["vault_shared"] = len(shared)
        removed["run_details"] = tombstones.scrub_run_details(conn, owned | {request.value}, whole)
        # the intent commits with the delete: the archive, the scrub and DuckDB follow
        # from it, now or (after a crash) in the next command
        iid = intents.begin(
            conn,
            "purge",
            {
                "scope": request.scope,
                "value": request.value,
                "owned": sorted(owned),
                "removed": removed,
                "run_summary": {
                    "scope": request.scope,
                    "value_sha256": _digest(request.value),
                    "reingest": reingest,
                    "entries_new": 0,
                    "files": removed.get("source_files"),
                },
            },
            step="sqlite",
        )
    delete_store.drop_selection(conn)
    kill_point("purge", "sqlite")
    return iid, removed, files, tomb


def run_purges(home: Path, requests: list[PurgeRequest], *, timeout: float = -1) -> list[dict]:
    """Purge several session/project scopes in one run (the scheduled purge policies):
    one lock, one connection, one intent per scope, then one completion for all (one
    scrub, one DuckDB rebuild). Returns per request ``{"resolved", "removed"}`` (the
    ``run_purge`` counts). Raises StoreBusy as ``run_purge``."""
    home = Path(home)
    if not requests or not (home / STORE_DB).exists():
        return []
    out = []
    with hold(home, timeout, what="purge"):
        conn = sqlite_store.connect(home)
        try:
            recovery.recover(conn, home, check=True)
            iids = []
            for req in requests:
                iid, removed, _files, _tomb = purge_locked(conn, req)
                iids.append(iid)
                out.append({"resolved": req.describe(), "removed": removed})
            done, _note = recovery.complete(conn, home, iids)
        finally:
            conn.close()
    by_id = {d.intent_id: d for d in done}
    for o, iid in zip(out, iids, strict=True):
        if iid in by_id:
            o["removed"] = by_id[iid].result["removed"]
    return out


def _digest(value: str) -> str:
    """The first 16 hex digits of the SHA-256 of a purged scope's value: the run record
    says which purge it was without naming the session or project again."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]

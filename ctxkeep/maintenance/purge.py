"""Purge: delete a session's or a project's data from the store, or wipe the whole store.

The one implementation shared by ``ctxkeep purge``, the purge flow and MCP ``ctx_purge``.

The contract (from the ctx_purge seed of context-mode, restated in DESIGN.md):

- exactly one scope: ``session`` (with a session id) or ``project`` (``project_dir``,
  else the caller's working directory); ``all`` (wipe the store) is built by the CLI only;
- ``confirm`` is required (``True``/``False`` or the strings ``"true"``/``"false"``);
  ``confirm`` false raises ``PurgeCancelled`` (``Purge cancelled. Pass confirm: true to
  proceed.``);
- a session id together with ``scope="project"`` is an ``Ambiguous purge``; ``scope=
  "session"`` without an id is an error; a bare ``{confirm: true}`` is refused (no silent
  whole-project wipe);
- idempotent; no network; the report gives the resolved scope and what was removed.

What a session/project purge removes, in one SQLite transaction:

- ``entries`` of the scope (a session: its entries and those of its sub-agents, i.e.
  ``parent_session_id`` = the id; a project: entries whose ``project_dir`` is the dir or
  below it, plus the dir-less records (summaries) of sessions that lie wholly in it);
- ``usage`` rows of those entries and sessions (so a project's stats are reset);
- ``contents`` that no remaining entry references, their ``chunks``, and their rows in
  both FTS5 indexes (``fts_words`` through the FTS5 ``'delete'`` command before the
  chunk rows go, it being an external-content table; ``fts_grams`` by rowid);
- ``quarantine`` rows (raw bad lines) of source files none of whose entries remain;
- then DuckDB: ``analytics.duckdb`` is derived, so it is deleted and rebuilt from SQLite
  (no deleted row survives in its free blocks);
- and the Parquet archive (``sinks.archive``): files holding rows of the scope are
  rewritten without them (``removed["archived"]`` counts those rows).

Deleted data does not linger: the purge connection runs with ``PRAGMA secure_delete=ON``
(freed cells and pages are zeroed), ``temp_store=MEMORY`` (no temp files), both FTS5
indexes are merged with ``'optimize'`` (FTS5 otherwise keeps deleted tokens in old
segments until a merge), and the WAL is checkpointed and truncated at the end.

A tombstone (``tombstones`` table, read by ``flows.pipeline.transform_batch``) keeps the
next ingest from bringing the data back; watermarks are kept, so the files are not
re-read for nothing. ``reingest=True`` purges without a tombstone, lifts an existing
one (and the session tombstones a project purge added), and drops the watermarks of
the files concerned, so the next ingest reads them again from the start. The files a
purge concerned are remembered in ``purge_files`` for that purpose.

``scope="all"`` deletes ``store.db`` with its ``-wal``/``-shm`` sidecars,
``analytics.duckdb`` (and its ``.wal``) and the Parquet ``archive/`` directory; it keeps
``config.toml``, the lock file and Prefect's own directory. No tombstones survive it:
the next ingest rebuilds the store from the agents' files.

A purge never opens, modifies or deletes the agents' own session files.
"""
from __future__ import annotations

import os
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.errors import PurgeCancelled, UsageError
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB, ANALYTICS_WAL, ARCHIVE_DIR, STORE_DB, STORE_FILES, store_files
from ctxkeep.sinks.lock import hold

CANCELLED = PurgeCancelled.MESSAGE

SCOPES = ("session", "project")


@dataclass(frozen=True)
class PurgeRequest:
    """A validated purge scope.

    ``scope``: ``"session"`` (``session_id`` set), ``"project"`` (``project_dir`` set: an
    absolute, normalized path without trailing separator) or ``"all"`` (CLI only).
    """

    scope: str
    session_id: str | None = None
    project_dir: str | None = None

    @property
    def value(self) -> str:
        """The scope's key: the session id, the project dir, or ``"*"`` for all."""
        return {"session": self.session_id, "project": self.project_dir}.get(self.scope) or "*"

    def describe(self) -> str:
        """One line naming the resolved scope, e.g. ``session 0d3a…`` or ``project /x``."""
        if self.scope == "all":
            return "the whole store"
        return f"{self.scope} {self.value}"


def _as_bool(value, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "1", "yes"):
            return True
        if v in ("false", "0", "no"):
            return False
    raise UsageError(f"{name} must be true or false, got {value!r}")


def check_confirm(confirm) -> None:
    """Apply the contract's confirm rules: returns when ``confirm`` is true (``True``,
    ``"true"``, ``"1"``, ``"yes"``); raises PurgeCancelled when it is false, UsageError
    when it is missing or not a boolean."""
    ok = _as_bool(confirm, "confirm")
    if ok is None:
        raise UsageError("Purge needs confirm: true (confirm is required)",
                         hint="preview first (ctxkeep purge --dry-run), then confirm")
    if ok is False:
        raise PurgeCancelled()


def parse_purge_request(*, session_id=None, scope=None, project_dir=None, confirm=None,
                        cwd: str) -> PurgeRequest:
    """Validate a purge call against the ctx_purge contract and resolve its scope.

    Args:
        session_id: the agent's session id (scope session); blank strings count as none.
        scope: ``"session"`` or ``"project"`` (or None: ``session`` when a session id is
            given, ``project`` when only ``project_dir`` is).
        project_dir: the project's directory (scope project); default ``cwd``. Relative
            paths are resolved against ``cwd``; ``~`` is expanded.
        confirm: required; ``True``/``False`` or ``"true"``/``"false"`` (also ``"1"``,
            ``"0"``, ``"yes"``, ``"no"``).
        cwd: the caller's working directory (the MCP server's, or the shell's).

    Returns a PurgeRequest. Raises PurgeCancelled when ``confirm`` is false (checked
    first: a cancelled call changes nothing whatever else it says); UsageError when
    ``confirm`` is missing or not a boolean, the scope is unknown, a session id comes
    with scope project (``Ambiguous purge …``), scope session lacks an id, neither
    a session id nor a scope nor a project dir is given, or the project dir is the
    filesystem root, the home directory or above it (``_too_broad``: a project
    tombstone there would block every future ingest; ``purge --all`` wipes instead).
    """
    check_confirm(confirm)
    sid = str(session_id).strip() if session_id is not None else ""
    sc = str(scope).strip().lower() if scope is not None and str(scope).strip() else None
    pdir = str(project_dir).strip() if project_dir is not None and str(project_dir).strip() else None
    if sc is not None and sc not in SCOPES:
        raise UsageError(f"unknown purge scope {scope!r}", hint='use scope "session" (with a '
                         'session id) or scope "project" (with a project dir, default the cwd)')
    if sc == "project" and sid:
        raise UsageError(f"Ambiguous purge: a session id ({sid}) was given together with scope "
                         "project", hint="pass either a session id (scope session) or scope "
                         "project, not both")
    if sc == "session" and not sid:
        raise UsageError("Purge scope session needs a session id",
                         hint="pass sessionId, or use scope project")
    if sid and pdir:
        raise UsageError(f"Ambiguous purge: a session id ({sid}) was given together with a "
                         f"project dir ({pdir})", hint="pass only one of them")
    if sc is None:
        if sid:
            sc = "session"
        elif pdir:
            sc = "project"
        else:
            raise UsageError("Purge needs a scope: either scope session with a session id, or "
                             "scope project (the project dir, default the working directory)",
                             hint="nothing was purged")
    if sc == "session":
        return PurgeRequest("session", session_id=sid)
    d = cfgmod.normalize_dir(pdir or cwd, cwd)
    if _too_broad(d):
        raise UsageError(f"refusing to purge project {d}: it is the filesystem root or your home "
                         f"directory (or above it), which holds every project"
                         + ("" if pdir else " (it is the working directory: no projectDir was given)"),
                         where="projectDir",
                         hint="name one project's directory, or wipe the whole store with `ctxkeep purge --all`")
    return PurgeRequest("project", project_dir=d)


def _too_broad(d: str) -> bool:
    """True for a project dir that would purge (and tombstone, so never ingest again)
    every project: ``/``, a drive root, the user's home directory or an ancestor of it."""
    if d in ("/", "\\") or re.fullmatch(r"[A-Za-z]:[\\/]?", d):
        return True
    home = os.path.normpath(os.path.expanduser("~"))
    return home == d or home.startswith(d.rstrip("/\\") + os.sep)


# ---------------------------------------------------------------- scope selection

def _under_sql(col: str) -> str:
    """SQL true when ``col`` is the project dir ``:d`` or below it (``/`` or ``\\``)."""
    return (f"({col} = :d OR substr({col}, 1, length(:d) + 1) IN (:d || '/', :d || '\\') "
            f"OR (:d IN ('/', '\\') AND substr({col}, 1, 1) = :d))")


def _select(conn: sqlite3.Connection, req: PurgeRequest) -> None:
    """Fill the temp tables ``_p_entries(entry_id, session_id, content_hash, source_path)``
    and ``_p_sessions(session_id)`` (sessions wholly in the scope) for ``req``."""
    conn.execute("DROP TABLE IF EXISTS temp._p_entries")
    conn.execute("DROP TABLE IF EXISTS temp._p_sessions")
    conn.execute("CREATE TEMP TABLE _p_entries(entry_id TEXT PRIMARY KEY, session_id TEXT, "
                 "content_hash TEXT, source_path TEXT)")
    conn.execute("CREATE TEMP TABLE _p_sessions(session_id TEXT PRIMARY KEY)")
    cols = "entry_id, session_id, content_hash, source_path"
    if req.scope == "session":
        conn.execute("INSERT INTO _p_sessions VALUES(?)", (req.session_id,))
        conn.execute(f"INSERT INTO _p_entries SELECT {cols} FROM entries "
                     "WHERE session_id = :s OR parent_session_id = :s", {"s": req.session_id})
        conn.execute("INSERT OR IGNORE INTO _p_sessions SELECT DISTINCT session_id FROM _p_entries")
    elif req.scope == "project":
        d = {"d": req.project_dir}
        # sessions whose every located entry lies in the project
        conn.execute(
            "INSERT INTO _p_sessions SELECT session_id FROM entries WHERE project_dir IS NOT NULL "
            f"GROUP BY session_id HAVING min({_under_sql('project_dir')}) = 1", d)
        conn.execute(
            f"INSERT INTO _p_entries SELECT {cols} FROM entries WHERE "
            f"(project_dir IS NOT NULL AND {_under_sql('project_dir')}) OR (project_dir IS NULL AND "
            "(session_id IN (SELECT session_id FROM _p_sessions) OR "
            "parent_session_id IN (SELECT session_id FROM _p_sessions)))", d)
    else:
        conn.execute(f"INSERT INTO _p_entries SELECT {cols} FROM entries")
        conn.execute("INSERT OR IGNORE INTO _p_sessions SELECT DISTINCT session_id FROM entries")
    _derive(conn)


def select_where(conn: sqlite3.Connection, where_sql: str, params: dict | tuple = ()) -> None:
    """Choose the entries matching ``where_sql`` (over ``entries``) for ``delete_selected``
    (used by retention); no session is chosen as a whole, so usage rows are matched by
    entry only."""
    conn.execute("DROP TABLE IF EXISTS temp._p_entries")
    conn.execute("DROP TABLE IF EXISTS temp._p_sessions")
    conn.execute("CREATE TEMP TABLE _p_entries(entry_id TEXT PRIMARY KEY, session_id TEXT, "
                 "content_hash TEXT, source_path TEXT)")
    conn.execute("CREATE TEMP TABLE _p_sessions(session_id TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO _p_entries SELECT entry_id, session_id, content_hash, source_path "
                 f"FROM entries WHERE {where_sql}", params)
    _derive(conn)


def _derive(conn: sqlite3.Connection) -> None:
    # contents only these entries reference
    conn.execute("DROP TABLE IF EXISTS temp._p_contents")
    conn.execute("CREATE TEMP TABLE _p_contents(content_id INTEGER PRIMARY KEY)")
    conn.execute(
        "INSERT INTO _p_contents SELECT c.content_id FROM contents c WHERE c.content_hash IN "
        "(SELECT content_hash FROM _p_entries WHERE content_hash IS NOT NULL) AND NOT EXISTS "
        "(SELECT 1 FROM entries e WHERE e.content_hash = c.content_hash AND e.entry_id NOT IN "
        "(SELECT entry_id FROM _p_entries))")
    # source files none of whose entries remain
    conn.execute("DROP TABLE IF EXISTS temp._p_files")
    conn.execute("CREATE TEMP TABLE _p_files(path TEXT PRIMARY KEY, whole INTEGER)")
    conn.execute(
        "INSERT INTO _p_files SELECT p.source_path, NOT EXISTS (SELECT 1 FROM entries e WHERE "
        "e.source_path = p.source_path AND e.entry_id NOT IN (SELECT entry_id FROM _p_entries)) "
        "FROM (SELECT DISTINCT source_path FROM _p_entries WHERE source_path IS NOT NULL) p")


def _usage_where() -> str:
    return ("entry_id IN (SELECT entry_id FROM _p_entries) OR "
            "session_id IN (SELECT session_id FROM _p_sessions)")


def _counts(conn: sqlite3.Connection) -> dict:
    one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
    return {
        "entries": one("SELECT count(*) FROM _p_entries"),
        "sessions": one("SELECT count(DISTINCT session_id) FROM _p_entries"),
        "contents": one("SELECT count(*) FROM _p_contents"),
        "chunks": one("SELECT count(*) FROM chunks WHERE content_id IN (SELECT content_id FROM _p_contents)"),
        "usage": one(f"SELECT count(*) FROM usage WHERE {_usage_where()}"),
        "quarantine": one("SELECT count(*) FROM quarantine WHERE path IN "
                          "(SELECT path FROM _p_files WHERE whole)"),
        "source_files": one("SELECT count(*) FROM _p_files"),
        "text_bytes": one("SELECT coalesce(sum(bytes), 0) FROM contents WHERE content_id IN "
                          "(SELECT content_id FROM _p_contents)"),
        "token_estimate": one("SELECT coalesce(sum(e.token_estimate), 0) FROM entries e WHERE "
                              "e.entry_id IN (SELECT entry_id FROM _p_entries)"),
    }


def preview(conn: sqlite3.Connection, request: PurgeRequest) -> dict:
    """What a purge of ``request`` would remove, changing nothing (``--dry-run``).

    Works on a read-only connection (only TEMP tables are written). Returns
    ``{"entries", "sessions", "contents", "chunks", "usage", "quarantine",
    "source_files": int, "text_bytes": bytes of the contents that would go,
    "token_estimate": tokens of the entries that would go}``.
    """
    conn.execute("PRAGMA temp_store=MEMORY")
    _select(conn, request)
    try:
        return _counts(conn)
    finally:
        _drop_temp(conn)


def drop_selection(conn: sqlite3.Connection) -> None:
    """Drop the temp tables of a selection."""
    _drop_temp(conn)


def _drop_temp(conn: sqlite3.Connection) -> None:
    for t in ("_p_entries", "_p_sessions", "_p_contents", "_p_files"):
        conn.execute(f"DROP TABLE IF EXISTS temp.{t}")


def fts_words_columns(conn: sqlite3.Connection) -> list[str]:
    """The indexed columns of the external-content ``fts_words`` table, which are also
    columns of ``chunks`` (``["text"]`` in schema v1, ``["title", "text"]`` in v2)."""
    return [r[1] for r in conn.execute("PRAGMA table_info(fts_words)")]


def delete_selected(conn: sqlite3.Connection, *, usage: bool = True, quarantine: bool = True) -> dict:
    """Delete the chosen entries and what only they reference (the caller holds a write
    transaction). ``usage``/``quarantine`` False keep those rows (retention keeps token
    figures). Returns the removed counts (the keys of ``preview``; ``usage`` and
    ``quarantine`` 0 when kept) plus ``files``: the source paths concerned."""
    counts = _counts(conn)
    files = [r[0] for r in conn.execute("SELECT path FROM _p_files ORDER BY path")]
    if usage:
        conn.execute(f"DELETE FROM usage WHERE {_usage_where()}")
    else:
        counts["usage"] = 0
    if quarantine:
        conn.execute("DELETE FROM quarantine WHERE path IN (SELECT path FROM _p_files WHERE whole)")
    else:
        counts["quarantine"] = 0
    conn.execute("DELETE FROM entries WHERE entry_id IN (SELECT entry_id FROM _p_entries)")
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='status_log'").fetchone():
        # the status-change log some versions keep for the DuckDB sync: no rows for gone entries
        conn.execute("DELETE FROM status_log WHERE entry_id IN (SELECT entry_id FROM _p_entries)")
    gone_chunks = "SELECT chunk_id FROM chunks WHERE content_id IN (SELECT content_id FROM _p_contents)"
    # external-content FTS5: the 'delete' command needs the indexed text, so before the chunks go
    # (every indexed column's value is needed: schema v1 indexes text, v2 title and text)
    cols = ", ".join(fts_words_columns(conn))
    conn.execute(f"INSERT INTO fts_words(fts_words, rowid, {cols}) SELECT 'delete', chunk_id, {cols} "
                 "FROM chunks WHERE content_id IN (SELECT content_id FROM _p_contents)")
    conn.execute(f"DELETE FROM fts_grams WHERE rowid IN ({gone_chunks})")
    conn.execute("DELETE FROM chunks WHERE content_id IN (SELECT content_id FROM _p_contents)")
    conn.execute("DELETE FROM contents WHERE content_id IN (SELECT content_id FROM _p_contents)")
    counts["files"] = files
    return counts


def scrub(conn: sqlite3.Connection) -> None:
    """Make deleted rows unrecoverable from the files: merge both FTS5 indexes (deleted
    tokens otherwise stay in older segments) and checkpoint + truncate the WAL (old page
    images live there). Needs ``PRAGMA secure_delete=ON`` on ``conn`` beforehand."""
    with sqlite_store.write(conn):
        conn.execute("INSERT INTO fts_words(fts_words) VALUES('optimize')")
        conn.execute("INSERT INTO fts_grams(fts_grams) VALUES('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def rebuild_analytics(conn: sqlite3.Connection, home: Path) -> str:
    """Delete ``analytics.duckdb`` (and its WAL) and rebuild it from SQLite, so no deleted
    row survives in DuckDB's free blocks. Returns a one-line note; never raises (a failed
    rebuild is redone by the next ingest, which rebuilds a missing analytics store)."""
    for name in (ANALYTICS_DB, ANALYTICS_WAL):
        try:
            (home / name).unlink()
        except FileNotFoundError:
            pass
    try:
        from ctxkeep.sinks import duckdb as duckdb_store
        r = duckdb_store.sync(conn, home, rebuild=True)
        sqlite_store.mark_analytics_synced(conn, r["entries_rowid"], r["status_seq"])
        return f"analytics rebuilt: {r['entries_synced']} entries"
    except Exception as e:  # noqa: BLE001 - a busy file must not fail the purge
        return (f"analytics store not rebuilt ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "the next ingest rebuilds it")


def _tombstone(conn: sqlite3.Connection, req: PurgeRequest, files: list[str], reingest: bool) -> dict:
    """Add (or with ``reingest`` lift) the tombstones of ``req``; returns what was done."""
    key = (req.scope, req.value)
    if not reingest:
        stamp = sqlite_store.now_iso()
        conn.execute("INSERT OR IGNORE INTO tombstones VALUES(?,?,?)", (*key, stamp))
        added = [f"{req.scope} {req.value}"]
        if req.scope == "project":
            for (sid,) in conn.execute("SELECT session_id FROM _p_sessions").fetchall():
                if sid:
                    conn.execute("INSERT OR IGNORE INTO tombstones VALUES('session',?,?)", (sid, stamp))
                    conn.execute("INSERT OR IGNORE INTO purge_files VALUES(?,?,'session',?)", (*key, sid))
        conn.executemany("INSERT OR IGNORE INTO purge_files VALUES(?,?,'path',?)",
                         [(*key, f) for f in files])
        return {"tombstone": "added", "tombstones": added, "watermarks_dropped": 0}
    linked = conn.execute("SELECT kind, item FROM purge_files WHERE scope=? AND value=?", key).fetchall()
    paths = set(files) | {item for kind, item in linked if kind == "path"}
    sessions = {item for kind, item in linked if kind == "session"}
    if req.scope == "session":
        sessions.add(req.session_id)
    n = conn.execute("DELETE FROM tombstones WHERE scope=? AND value=?", key).rowcount
    for sid in sessions:
        n += conn.execute("DELETE FROM tombstones WHERE scope='session' AND value=?", (sid,)).rowcount
    dropped = 0
    for p in sorted(paths):
        dropped += conn.execute("DELETE FROM watermarks WHERE path=?", (p,)).rowcount
    conn.execute("DELETE FROM purge_files WHERE scope=? AND value=?", key)
    return {"tombstone": "lifted" if n else "none", "tombstones_lifted": n, "watermarks_dropped": dropped}


def _wipe(home: Path, dry_run: bool) -> dict:
    sizes = store_files(home)
    report = {"scope": "all", "resolved": "the whole store", "home": str(home), "dry_run": dry_run,
              "files_removed": sorted(sizes), "bytes_removed": sum(sizes.values()), "removed": {}}
    db = home / STORE_DB
    if db.exists():
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
                report["removed"] = {
                    "entries": one("SELECT count(*) FROM entries"),
                    "sessions": one("SELECT count(DISTINCT session_id) FROM entries"),
                    "contents": one("SELECT count(*) FROM contents"),
                    "chunks": one("SELECT count(*) FROM chunks"),
                    "usage": one("SELECT count(*) FROM usage"),
                    "quarantine": one("SELECT count(*) FROM quarantine"),
                }
            finally:
                conn.close()
        except sqlite3.Error as e:
            report["note"] = f"store unreadable ({e}); its files are removed anyway"
    if dry_run:
        return report
    for name in STORE_FILES:
        try:
            (home / name).unlink()
        except FileNotFoundError:
            pass
    shutil.rmtree(home / ARCHIVE_DIR, ignore_errors=True)
    return report


def _archive_filter(req: PurgeRequest, owned: set[str]):
    """A ``frame -> pl.Expr`` choosing the archived rows of ``req`` (the same rules as
    ``_select``; ``owned``: sessions wholly in the project according to SQLite)."""
    import polars as pl

    if req.scope == "session":
        return lambda df: (pl.col("session_id") == req.session_id) | \
            (pl.col("parent_session_id") == req.session_id)
    d = req.project_dir
    pd = pl.col("project_dir")
    if d in ("/", "\\"):
        under = pd.str.starts_with(d)
    else:
        under = (pd == d) | pd.str.starts_with(d + "/") | pd.str.starts_with(d + "\\")

    def pick(df):
        here = (df.filter(pd.is_not_null()).group_by("session_id").agg(under.all().alias("u"))
                .filter(pl.col("u"))["session_id"].to_list())
        own = list(owned | set(here))
        return under.fill_null(False) | (pd.is_null() & (pl.col("session_id").is_in(own)
                                                           | pl.col("parent_session_id").is_in(own)))
    return pick


def _purge_archive(conn: sqlite3.Connection | None, home: Path, req: PurgeRequest, owned: set[str],
                   dry_run: bool) -> int:
    """Remove ``req``'s rows from the Parquet archive (and their ids from ``archived``);
    returns the number of archived rows removed (or, with ``dry_run``, that would be)."""
    from ctxkeep.sinks import parquet as archive

    r = archive.purge_rows(home, _archive_filter(req, owned), dry_run=dry_run)
    if r["entry_ids"] and conn is not None and not dry_run:
        with sqlite_store.write(conn):
            conn.executemany("DELETE FROM archived WHERE entry_id = ?", [(i,) for i in r["entry_ids"]])
    return r["rows"]


def purge(home: Path, request: PurgeRequest, *, dry_run: bool = False, reingest: bool = False,
          timeout: float = -1) -> dict:
    """Purge ``request``'s data from the store at ``home`` (see the module doc).

    Args:
        home: the ctxkeep home.
        request: from ``parse_purge_request`` (or ``PurgeRequest("all")`` from the CLI).
        dry_run: only count (``preview``); nothing is changed and no lock is taken.
        reingest: no tombstone; lift an existing one and drop the concerned files'
            watermarks so the next ingest reads the data again.
        timeout: seconds to wait for the store lock (-1 forever, 0 not at all).

    Returns ``{"scope", "session_id", "project_dir", "resolved": str, "home", "dry_run",
    "removed": {entries, sessions, contents, chunks, usage, quarantine, source_files,
    text_bytes, token_estimate, archived}, "files": [source paths concerned], "tombstone":
    "added"|"lifted"|"none", "analytics": str}``; for ``all``: ``files_removed`` (store
    file names) and ``bytes_removed`` instead. Idempotent: purging again removes nothing
    and reports zeros. Raises StoreBusy when the lock is not free within ``timeout``,
    StoreError when the store's schema is newer than this ctxkeep.
    """
    home = Path(home)
    base = {"scope": request.scope, "session_id": request.session_id,
            "project_dir": request.project_dir, "resolved": request.describe(),
            "home": str(home), "dry_run": dry_run}
    if request.scope == "all":
        if dry_run:
            return _wipe(home, True)
        with hold(home, timeout, what="purge"):
            return _wipe(home, False)
    db = home / STORE_DB
    if dry_run:
        if not db.exists():
            return {**base, "removed": {**preview_empty(), "archived": 0}, "files": [], "tombstone": "none"}
        conn = sqlite_store.connect(home, readonly=True)
        try:
            conn.execute("PRAGMA temp_store=MEMORY")
            _select(conn, request)
            counts = _counts(conn)
            files = [r[0] for r in conn.execute("SELECT path FROM _p_files ORDER BY path")]
            owned = {r[0] for r in conn.execute("SELECT session_id FROM _p_sessions")}
        finally:
            conn.close()
        counts["archived"] = _purge_archive(None, home, request, owned, dry_run=True)
        return {**base, "removed": counts, "files": files, "tombstone": "none"}
    with hold(home, timeout, what="purge"):
        conn = sqlite_store.connect(home)
        try:
            conn.execute("PRAGMA secure_delete=ON")
            conn.execute("PRAGMA temp_store=MEMORY")
            with sqlite_store.write(conn):
                _select(conn, request)
                owned = {r[0] for r in conn.execute("SELECT session_id FROM _p_sessions")}
                removed = delete_selected(conn)
                files = removed.pop("files")
                tomb = _tombstone(conn, request, files, reingest)
            _drop_temp(conn)
            removed["archived"] = _purge_archive(conn, home, request, owned, dry_run=False)
            if removed["entries"] or removed["usage"] or removed["quarantine"]:
                scrub(conn)
                analytics = rebuild_analytics(conn, home)
            else:
                analytics = "nothing removed; analytics unchanged"
            _record_run(conn, request, removed, reingest)
        finally:
            conn.close()
    return {**base, "removed": removed, "files": files, **tomb, "analytics": analytics}


def preview_empty() -> dict:
    """The zero counts (a purge of an empty or missing store)."""
    return {k: 0 for k in ("entries", "sessions", "contents", "chunks", "usage", "quarantine",
                           "source_files", "text_bytes", "token_estimate")}


def _record_run(conn: sqlite3.Connection, req: PurgeRequest, removed: dict, reingest: bool) -> None:
    with sqlite_store.recorded_run(conn, "purge") as run:
        run.summary = {
            "scope": req.scope, "value": req.value, "reingest": reingest,
            "entries_new": 0, "files": removed.get("source_files"), **{
                f"removed_{k}": v for k, v in removed.items() if isinstance(v, int)}}


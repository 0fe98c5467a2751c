"""``ctxkeep doctor``: check every file of a store and repair what can be rebuilt.

Checks (``check``), each a ``Finding(check, file, status, detail)`` with status
``ok`` | ``damaged`` | ``warning`` | ``skipped``:

- ``sqlite-header``: ``store.db``'s header and size (``store_safety.header_problem``),
  a 0-byte store where the home held data;
- ``sqlite-wal``: a ``store.db-wal`` of another database, or of another generation of
  this one (``store_safety.wal_verdict``, ``checks.wal_view_problem``: ``_wal_finding``);
  checked before anything opens the store (an open would apply or move it);
- ``sqlite-integrity``: ``PRAGMA quick_check`` (``PRAGMA integrity_check`` with
  ``full``; 0.27 s and 1.9 s on a 170 MB store);
- ``store`` (a warning): the store cannot be written (a read-only file system, no
  write permission): read-only, not damaged; checks that write (FTS5's) are skipped,
  and without a WAL file it is read as immutable;
- ``fts``: FTS5's ``integrity-check`` command on ``fts_words``, ``fts_grams`` and
  ``fts_symbols``; ``fts_words`` indexes as many rows as there are chunks;
- ``orphans``: chunks without their content, entries whose content is missing;
- ``chunks``: every content an entry holds has its chunks, without a gap, adding up
  to its bytes (``checks.CHUNK_GAPS_SQL``: a third of the chunk rows deleted passed
  before); ``--repair`` reads the text again from the agents' files and chunks it
  (``_rechunk``; the vault is the hook for what no file holds any more);
- ``duckdb``: ``analytics.duckdb`` opens, holds every block DuckDB says it uses (its
  used-block count and the blocks its tables and metadata list; free trailing blocks a
  checkpoint cut off are not damage), every table reads to its end (``analytics_read.inspect``), and it holds as
  many entries and usage rows as SQLite (a truncated file and a rebuild killed after
  its entries passed before);
- ``entries``: every entry DuckDB holds is in SQLite (``lost_entries``: a WAL or a
  ``store.db`` of another generation put back by hand lost them); ``--repair`` moves a
  stale WAL aside and derives those sessions again (``_derive_lost``: the vault, else
  the agents' files from byte 0) before it rebuilds DuckDB;
- ``parquet``: every archive file's footer reads, and the archive holds every entry
  the ``archived`` table lists; an unreadable file names the other copies of its
  agent's entries (``other_copies``: the session files still on disk, their compress
  backups, the vault's files); ``--repair`` moves it aside and re-archives its entries
  from those copies, the vault first (``_rearchive``);
- ``paths``: session-file paths stored relative (``sinks.sqlite.relpaths``; a
  relative ``compress FILE`` or ``--path`` before newuser24 F1): damaged when the
  store holds the same file's absolute path (``--repair`` merges them in one SQLite
  transaction), a warning naming one without (not guessed);
- ``watermarks``: each watermark's file exists and is not shorter than its offset
  (warnings: a user may delete session files);
- ``ids``: Claude Code files an older ctxkeep keyed by uuid alone (a warning naming
  ``ctxkeep reparse --rekey`` and its cost: ``pipeline.summary.rekey_advice``);
- ``coverage``: the coverage ledger's format drift (warnings: a version's parse rate
  below the previous version's, ``transforms.drift.ledger_alerts``); its record types
  not understood are one neutral count in the ok line (the ledger holds no history of
  runs, so it cannot tell a first read from a change: the ingest that met a change
  said "format drift"; ``sources --coverage`` names them per version).

``repair`` rebuilds what is derived (FTS, DuckDB) from SQLite (an ``analytics.duckdb``
a check found damaged is moved aside first, ``analytics.duckdb.damaged-<UTC>``, and the
action says so: newuser16 F12 found it deleted); when SQLite itself is
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

import os
import shutil
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ctxkeep.errors import CtxkeepError
from ctxkeep.maintenance import backup
from ctxkeep.maintenance.compress import rewrite
from ctxkeep.sinks import analytics_current, analytics_file, parquet
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB, ARCHIVE_DIR, STORE_DB
from ctxkeep.sinks.prices_file import prices_error
from ctxkeep.sinks.sqlite import StatusChange, checks, pool, store_safety
from ctxkeep.sources.contract import SourceFile


@dataclass
class Finding:
    """One check's result: ``check`` name, the ``file`` it concerns, ``status`` (ok,
    damaged, warning, skipped) and a one-line ``detail``."""

    check: str
    file: str
    status: str
    detail: str = ""


def _wal_finding(home: Path) -> Finding | None:
    """The ``sqlite-wal`` finding for ``store.db-wal`` (None without one, or without a
    sound ``store.db`` header): ``skipped`` while a live process has the store open,
    ``damaged`` for a WAL of another database (``foreign``) or of another generation of
    this one (``stale``: ``store_safety.wal_verdict`` by its frames, else
    ``checks.wal_view_problem`` by what SQLite reads with it), else ``ok``. Reads the
    WAL and opens the store read-only: the WAL is neither applied nor moved."""
    db, wal = home / STORE_DB, home / (STORE_DB + "-wal")
    try:
        if not wal.stat().st_size or not db.stat().st_size or store_safety.header_problem(db):
            return None
    except OSError:
        return None
    if store_safety.live(home):
        return Finding("sqlite-wal", str(wal), "skipped", "in use by a live process")
    verdict, w = store_safety.wal_verdict(db, wal)
    if verdict == "own":
        problem = checks.wal_view_problem(db)
        if problem:
            verdict, w = "stale", f"a WAL of another generation of this store: {problem}"
    if verdict == "foreign":
        return Finding("sqlite-wal", str(wal), "damaged", f"{w}; --repair moves it aside")
    if verdict == "stale":
        return Finding(
            "sqlite-wal",
            str(wal),
            "damaged",
            f"{w}; applying it loses entries: --repair moves it aside (kept) and derives again what "
            "the file alone lacks",
        )
    return Finding("sqlite-wal", str(wal), "ok", w)


def _sqlite_checks(home: Path, full: bool, wal_finding: Finding | None = None) -> list[Finding]:
    db = home / STORE_DB
    out: list[Finding] = []
    if not db.exists():
        held = store_safety.held_data(home)
        if held:  # lost: an ingest would rebuild it from what the agents' files hold now
            return [
                Finding("sqlite-header", str(db), "damaged", "missing; the home holds " + ", ".join(held))
            ]
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
    foreign = False  # the WAL is not applied: the checks read the file alone
    if wal_finding is not None and not why:
        out.append(wal_finding)
        foreign = wal_finding.status == "damaged"
    if why:
        return out
    ro = _read_only(home)
    # a read-only file system without a WAL file: SQLite cannot make the WAL index
    # (-shm) there, and nothing can change the file: read it as immutable
    immutable = foreign or (ro is not None and not wal.exists())
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = checks.integrity(db, full=full, immutable=immutable)
        bad = rows != ["ok"]
        detail = " ".join("; ".join(rows[:3]).split())  # one line: a quick_check row holds newlines
        out.append(
            Finding("sqlite-integrity", str(db), "damaged" if bad else "ok", f"{pragma}: {detail[:300]}")
        )
    except sqlite3.DatabaseError as e:
        out.append(Finding("sqlite-integrity", str(db), "damaged", f"{pragma}: {e}"))
        return out
    if bad:
        return out
    if ro:
        out.append(
            Finding(
                "store", str(home), "warning", f"read-only ({ro}): not damaged; --repair needs it writable"
            )
        )
    out += [
        Finding("fts", f"{db} ({t})", st, d)
        for t, st, d in checks.fts_integrity(db, immutable=immutable, readonly=bool(ro))
    ]
    t = checks.tallies(db, immutable=immutable)
    st = "damaged" if t.orphan_chunks or t.orphan_entries else "ok"
    out.append(
        Finding(
            "orphans",
            str(db),
            st,
            f"{t.orphan_chunks} chunks without content, {t.orphan_entries} entries without text",
        )
    )
    if t.chunk_gaps:
        out.append(
            Finding(
                "chunks",
                str(db),
                "damaged",
                f"{t.chunk_gaps:,} contents held by entries have missing chunks (their text is not "
                "searchable; --repair reads it again from the agents' files)",
            )
        )
    else:
        out.append(Finding("chunks", str(db), "ok", "every content held by an entry has its chunks"))
    if 0 <= t.fts_rows != t.chunk_count:
        out.append(
            Finding(
                "fts",
                f"{db} (fts_words)",
                "damaged",
                f"indexes {t.fts_rows:,} rows, {t.chunk_count:,} chunks",
            )
        )
    duck = _duckdb_check(home, t.entries, t.analytics_behind, t.usage)
    out += duck
    # (no "ok" line about a DuckDB file that is missing or could not be opened)
    if (home / ANALYTICS_DB).exists() and not any(f.detail.startswith(_UNREADABLE) for f in duck):
        out += _lost_check(home, immutable)
    out += _parquet_check(home, t.archived)
    out += _relative_check(db, immutable)
    out += _watermark_check(t.watermarks)
    out += _ids_check(t.uuid_keyed)
    out += _coverage_check(db, foreign)
    return out


def _read_only(home: Path) -> str | None:
    """Why the store at ``home`` cannot be written, or None: its file system is mounted
    read-only (``statvfs``), or the store or its folder has no write permission bit
    for the owner (checked as bits, as ``config.ensure_home`` does: root writes anyway,
    but a read-only tree is meant to stay so)."""
    import os
    import stat

    try:
        if os.statvfs(home).f_flag & getattr(os, "ST_RDONLY", 1):
            return "the file system is mounted read-only"
    except (OSError, AttributeError):
        pass
    for p in (home, home / STORE_DB):
        try:
            if not os.stat(p).st_mode & stat.S_IWUSR:
                return f"{p.name or p} has no write permission"
            if not os.access(p, os.W_OK):
                return f"{p.name or p} may not be written by this user"
        except OSError:
            continue
    return None


#: how a duckdb finding about a file that did not open begins (``_duckdb_check``)
_UNREADABLE = ("held by another process", "unreadable: ")


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
        if analytics_file.analytics_held(e):
            return [Finding("duckdb", str(p), "skipped", f"held by another process: {msg[:160]}")]
        return [Finding("duckdb", str(p), "damaged", f"unreadable: {type(e).__name__}: {msg[:200]}")]
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


def lost_entries(home: Path, *, immutable: bool = False) -> list[tuple[str, str, str, str]]:
    """The entries ``analytics.duckdb`` holds that SQLite lost, as ``(entry_id, agent,
    session_id, source_path)``: DuckDB's rowid sync never removes a row and every
    removal (purge, retention) rebuilds it, so an id there that neither SQLite's
    entries nor its ``archived`` ids hold, of no purged session, project or file, is
    an entry SQLite lost (a WAL or a ``store.db`` of another generation put back by
    hand). ``[]`` when DuckDB is missing or unreadable (its own check says so) or an
    operation's intent is open (its completion rebuilds DuckDB). ``immutable``: read ``store.db``
    without its WAL."""
    from ctxkeep.sinks.analytics_read import entry_sources

    p = home / ANALYTICS_DB
    if not p.exists():
        return []
    try:
        rows = entry_sources(p)
    except Exception:  # duckdb.Error, OSError: the duckdb check reports it
        return []
    if not rows:
        return []
    k = checks.known_entries(home / STORE_DB, immutable=immutable)
    if k.pending:  # an operation's DuckDB part is still to complete (a purge's rebuild)
        return []
    return [
        (e, a, sid, src)
        for e, a, sid, src, proj in rows
        if e not in k.ids and sid not in k.sessions and proj not in k.projects and src not in k.files
    ]


def _lost_check(home: Path, immutable: bool) -> list[Finding]:
    lost = lost_entries(home, immutable=immutable)
    if not lost:
        return [
            Finding("entries", str(home / STORE_DB), "ok", "every entry analytics.duckdb holds is in SQLite")
        ]
    sessions = {(a, s) for _, a, s, _ in lost}
    files = {p for *_, p in lost if p}
    return [
        Finding(
            "entries",
            str(home / STORE_DB),
            "damaged",
            f"SQLite lost {_n(len(lost), 'entry', 'entries')} of {_n(len(sessions), 'session')} "
            f"({_n(len(files), 'file')}) that "
            "analytics.duckdb still holds (a WAL or store.db of another generation put back by hand); "
            "--repair derives those sessions again from the vault or the agents' files",
        )
    ]


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
                Finding(
                    "parquet",
                    str(f),
                    "damaged",
                    f"unreadable: {(str(e).splitlines() or [''])[0][:160]}; {copies_line(other_copies(home, f))}",
                )
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


def _partition(f: Path, key: str) -> str | None:
    """The value of the Hive partition ``key`` in the archive file path ``f``
    (``agent=<agent>/month=<YYYY-MM>``: ``sinks.parquet``), or None."""
    return next((part.split("=", 1)[1] for part in f.parts if part.startswith(key + "=")), None)


def other_copies(home: Path, archive_file: Path) -> dict[str, list[str]]:
    """Where else the entries of the archive file ``archive_file`` may still be, by its
    agent partition: ``{"session files": [...], "compress backups": [...], "vault files":
    [...]}`` (each a list of paths): the agent's session files on disk now (retention
    moves entries out of the store, not out of the agent's files), the compress backups
    of those files (the lines compress cut) and the files of the agent the vault holds
    generations of (``sinks.vault``, when the store has one). Never raises (a part
    that cannot be looked at is left empty)."""
    from ctxkeep import config as cfgmod
    from ctxkeep.maintenance.compress import rewrite
    from ctxkeep.sources import SOURCES, discover_all
    from ctxkeep.sources.contract import DiscoveryContext

    agent = _partition(archive_file, "agent")
    out: dict[str, list[str]] = {"session files": [], "compress backups": [], "vault files": []}
    if agent is None or agent not in SOURCES:
        return out
    try:
        cfg = cfgmod.load_config(home)
        (d,) = discover_all(
            DiscoveryContext.from_env(), [agent], extra_dirs={agent: cfg.agent(agent).session_dirs}
        )
        out["session files"] = [str(f.path) for f in d.files]
        out["compress backups"] = [str(b) for f in d.files for b in rewrite.backup_paths(f.path)]
    except Exception:  # a config or discovery problem: named elsewhere
        pass
    out["vault files"] = checks.vault_paths(home / STORE_DB, agent)
    return out


def copies_line(copies: dict[str, list[str]]) -> str:
    """One line naming the other copies (``other_copies``): counts and the first path
    of each kind, or that none was found."""
    parts = [f"{len(v):,} {k} (e.g. {v[0]})" for k, v in copies.items() if v]
    if not parts:
        return "no other copy found (no session file, compress backup or vault file of its agent)"
    return "other copies: " + "; ".join(parts)


def _relative_check(db: Path, immutable: bool) -> list[Finding]:
    """``paths``: session-file paths stored relative (``sinks.sqlite.relpaths``;
    newuser24 F1). Damaged when one has an absolute twin (``--repair`` merges it),
    a warning for one without (the folder it was typed in is recorded nowhere: named,
    not guessed); ok otherwise."""
    from ctxkeep.sinks.sqlite import relpaths
    from ctxkeep.sinks.sqlite.readonly import open_ro

    try:
        conn = open_ro(db, immutable=immutable)
        try:
            found = relpaths.relative_paths(conn)
            twins = {p: relpaths.twin(conn, p) for p in found}
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return [Finding("paths", str(db), "skipped", f"cannot be read: {e}")]
    if not found:
        return [Finding("paths", STORE_DB, "ok", "every session file path is absolute")]
    out = []
    fix = [p for p, a in twins.items() if a]
    left = [p for p, a in twins.items() if not a]
    if fix:
        out.append(
            Finding(
                "paths",
                STORE_DB,
                "damaged",
                f"{_n(len(fix), 'session file')} stored under a relative path beside its absolute one "
                f"(e.g. {fix[0]} = {twins[fix[0]]}): counted twice, and restored into the current "
                "directory; --repair merges them",
            )
        )
    if left:
        out.append(
            Finding(
                "paths",
                STORE_DB,
                "warning",
                f"{_n(len(left), 'session file')} stored under a relative path with no absolute twin "
                f"(e.g. {left[0]}): the folder it was typed in is not recorded; run `ctxkeep ingest "
                "--path` on the file by its absolute path, then `ctxkeep doctor --repair`",
            )
        )
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
        Finding(
            "watermarks",
            STORE_DB,
            st,
            f"{missing:,} file{'s' * (missing != 1)} gone, {shrunk:,} shorter than their watermark",
        )
    ]


def _ids_check(uuid_keyed: tuple[int, int]) -> list[Finding]:
    """``ids``: a warning while the store holds Claude Code files keyed by uuid alone
    (``summary.rekey_advice``), else ok."""
    from ctxkeep.pipeline.summary import rekey_advice

    files, size = uuid_keyed
    if files:
        return [Finding("ids", STORE_DB, "warning", rekey_advice(files, size))]
    return [Finding("ids", STORE_DB, "ok", "every Claude Code file keyed by session and uuid")]


def _coverage_check(db: Path, immutable: bool) -> list[Finding]:
    """The coverage ledger's drift: one warning per version whose parse rate is below
    the previous version's (``transforms.drift.ledger_alerts``, kind
    ``parse_rate_dropped``); ok with the number of agent versions otherwise. The
    records of types not understood are one neutral count (``ok``): the ledger cannot
    tell a store's first read of a version from a change (newuser24 F8: a fresh store's
    doctor warned 3 times)."""
    from ctxkeep.transforms.drift import kept_as_meta, ledger_alerts

    try:
        rows = checks.coverage_rows(db, immutable=immutable)
    except sqlite3.DatabaseError as e:
        return [Finding("coverage", str(db), "skipped", f"the ledger cannot be read: {e}")]
    alerts = [a for a in ledger_alerts(rows) if a["kind"] == "parse_rate_dropped"]
    records = sum(u["count"] for r in rows for u in r["unknown"].values())
    types = len({(r["agent"], k) for r in rows for k in r["unknown"]})
    kept = kept_as_meta(records, types) if records else ""
    if not alerts:
        detail = f"{len(rows)} agent versions, no drift" + (f"; {kept}" if kept else "")
        return [Finding("coverage", STORE_DB, "ok", detail)]
    # the message names the agent and version: the store is the where (not the agent twice: newuser24 F18)
    out = [Finding("coverage", STORE_DB, "warning", a["message"]) for a in alerts]
    return out + ([Finding("coverage", STORE_DB, "ok", kept)] if kept else [])


def check(home: Path, *, full: bool = False) -> list[Finding]:
    """Every check of the module doc on the store at ``home``; never raises for
    damage (it is reported). DuckDB is brought current first, as by every reader of
    it (``analytics_current.bring_current``): a sync a small ingest left to the
    readers is no damage."""
    home = Path(home)
    wal = _wal_finding(home)
    if wal is None or wal.status != "damaged":  # an open would apply or move a bad WAL
        duck = home / ANALYTICS_DB
        had = duck.exists()
        try:
            analytics_current.bring_current(home)
        except (CtxkeepError, sqlite3.Error, OSError):  # a read-only or damaged store: the checks say
            pass
        # a check creates nothing: a first build that failed (a full disk) leaves no
        # empty file that this very check would then call damaged (newuser15 F8)
        if not had and duck.exists() and duck.stat().st_size == 0:
            duck.unlink(missing_ok=True)
            Path(str(duck) + ".wal").unlink(missing_ok=True)
        wal = _wal_finding(home)  # the sync may have checkpointed it
    out = _sqlite_checks(home, full, wal)
    err = prices_error(home)
    if err is not None:  # not the store's damage: every cost is missing until it is fixed
        out.append(Finding("prices", err.where or "prices.toml", "warning", f"{err.message} - {err.hint}"))
    return out + _config_check(home)


def _config_check(home: Path) -> list[Finding]:
    """A ``config`` warning per unknown key of ``config.toml`` (with the closest valid
    one: ``config.load_config``'s warnings) or for a file that does not load; none
    when it loads clean. A typo in ``[purge]`` was named only by a later ingest
    (newuser20 F6)."""
    from ctxkeep import config as cfgmod
    from ctxkeep.sources import SOURCES

    where = str(home / cfgmod.CONFIG_FILE)
    try:
        cfg = cfgmod.load_config(home)
    except CtxkeepError as e:
        return [
            Finding("config", where, "warning", f"{e.message} - {e.hint}" if e.hint else e.message),
            *(
                Finding("config", where, "warning", w)
                for w in cfgmod.unknown_agent_lines_of_file(home, SOURCES)
            ),
        ]
    # and an agent name no source has (newuser21 M5: only ingest named it)
    return [
        Finding("config", where, "warning", w)
        for w in cfg.warnings + cfgmod.unknown_agent_lines(cfg, SOURCES)
    ]


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
            moved = backup.move_aside(home, "damaged", "doctor --repair")
            if moved:
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
                # created here, on purpose: every other open refuses a home that held data
                # and has no store.db (store_safety.check_file)
                sqlite_store.connect(home, new_store=True).close()
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
                    f"re-ingested {_n(files, 'compress backup')} holding lines the vault did not: "
                    f"{n:,} entries that only they held (archived)"
                )
            bad |= {"duckdb"}
        elif "sqlite-wal" in bad:
            (wf,) = [f for f in findings if f.check == "sqlite-wal"]
            db, wal = home / STORE_DB, home / (STORE_DB + "-wal")
            if wal.exists():
                pool.wait_unopened(home, "doctor --repair")
                kind = "foreign" if store_safety.wal_verdict(db, wal)[0] == "foreign" else "stale"
                dest = store_safety.set_wal_aside(home, kind, wf.detail.split("; ")[0])
                what = "of another database" if kind == "foreign" else "of another generation of this store"
                actions.append(f"moved the WAL {what} aside ({dest})")
            bad |= {"entries"}  # what the file alone lacks
        if "entries" in bad and not bad & {"sqlite-header", "sqlite-integrity", "orphans"}:
            derived, still = _derive_lost(home)
            actions += derived
            lost += still
            if not still:
                bad |= {"duckdb", "fts"}
        conn = sqlite_store.connect(home)
        try:
            if "paths" in bad:
                from ctxkeep.sinks.sqlite import relpaths

                merged, left = relpaths.merge(conn)
                actions.append(
                    f"merged {_n(len(merged), 'relative session file path')} into the absolute path of "
                    "the same file (entries, watermarks, coverage, quarantine, vault)"
                )
                lost += [f"{p}: stored relative with no single absolute twin (left as it is)" for p in left]
            if "chunks" in bad:
                done, gone = _rechunk(conn)
                actions.append(
                    f"chunked and indexed again the text of {done:,} contents, read from the agents' files"
                )
                if gone:
                    lost.append(
                        f"the text of {gone:,} contents whose files are gone or changed (only their ids and "
                        "counts stay; the vault, when it holds those files, is where to read them)"
                    )
                bad |= {"fts"}
            if "fts" in bad:
                r = rebuild_fts(conn)
                actions.append(f"rebuilt the FTS indexes: {r['chunks']:,} chunks")
            if (bad & {"duckdb", "fts"} or "sqlite-wal" in bad) and not any(
                x.startswith("entries SQLite lost") for x in lost
            ):  # DuckDB's rows are the last trace of entries no file holds: kept
                why = next(
                    (f.detail for f in findings if f.check == "duckdb" and f.status == "damaged"), None
                )
                if why and (home / ANALYTICS_DB).exists():  # damaged: moved aside, never deleted
                    aside = analytics_file.set_aside_damaged_analytics(home, why, say=False)
                    if aside:
                        actions.append(
                            f"moved the damaged {ANALYTICS_DB} aside ({Path(aside).name}; delete it once the "
                            "rebuilt one checks out)"
                        )
                actions.append(rebuild_analytics(conn, home))
        finally:
            conn.close()
        if "parquet" in bad:
            damaged = [Path(f.file) for f in findings if f.check == "parquet" and f.status == "damaged"]
            redone, still = _rearchive(home, [p for p in damaged if p.suffix == ".parquet"])
            actions += redone
            lost += still
    return {"actions": actions, "not_recovered": lost}


def _derive_lost(home: Path) -> tuple[list[str], list[str]]:
    """Derive again the sessions of the entries SQLite lost (``lost_entries``): the
    files the vault's manifest holds from the vault (``maintenance.reparse`` of their
    agents), the others from the agents' files read again from byte 0 (a backfill:
    ``run_ingest`` with ``force``; entry ids are stable, so only the lost entries and
    their usage come back). The caller holds the store lock and rebuilds DuckDB and
    FTS after. What came back is counted in SQLite (the ids it holds again), not from
    DuckDB, which the reparse rebuilds; when some stay lost, ``analytics.duckdb`` as it
    was (their last copy) is put back over the reparse's rebuild (before, the count
    read the rebuilt DuckDB, found nothing lost and said every entry came back).
    Returns ``(actions, not recovered)``."""
    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources import files_for_paths

    lost = lost_entries(home)
    if not lost:
        return [], []
    files = sorted({(a, p) for _, a, _, p in lost if p})
    held = {p for a in {a for a, _ in files} for p in checks.vault_paths(home / STORE_DB, a)}
    actions = []
    from_vault = sorted({a for a, p in files if p in held})
    duck = home / ANALYTICS_DB
    kept = home / (ANALYTICS_DB + ".before-repair")
    if from_vault and duck.exists():
        shutil.copy2(duck, kept)
        if Path(f"{duck}.wal").exists():  # (DuckDB checkpoints at close: seldom)
            shutil.copy2(f"{duck}.wal", f"{kept}.wal")
    if from_vault:
        r = reparse(home, agents=from_vault)
        actions.append(f"derived again {r['files']:,} files of {', '.join(from_vault)} from the vault")
    todo = []
    for a, p in files:
        if p not in held:
            found, _problems = files_for_paths([Path(p)], [a])
            todo += found
    if todo:
        s = run_ingest(home, files=todo, force=True)
        actions.append(f"read again {len(todo):,} session files from byte 0: {s.entries_new:,} entries back")
    known = checks.known_entries(home / STORE_DB)
    still = [x for x in lost if x[0] not in known.ids]
    actions.insert(0, f"{len(lost) - len(still):,} of {len(lost):,} entries SQLite lost derived again")
    if kept.exists():
        if still:  # DuckDB's rows are the last copy of what stays lost: kept
            Path(f"{duck}.wal").unlink(missing_ok=True)
            if Path(f"{kept}.wal").exists():
                os.replace(f"{kept}.wal", f"{duck}.wal")
            os.replace(kept, duck)
        else:
            kept.unlink()
            Path(f"{kept}.wal").unlink(missing_ok=True)
    if not still:
        return actions, []
    return actions, [
        f"entries SQLite lost: {len(still):,} of {_n(len({(a, s) for _, a, s, _ in still}), 'session')} whose "
        "files are gone and the vault does not hold (analytics.duckdb keeps their rows: not rebuilt)"
    ]


def _archive_gaps(home: Path) -> tuple[set[str], dict[str, str]]:
    """``(ids, archived_at)``: the ids SQLite's ``archived`` table lists that no readable
    archive file holds, and every listed id's archive time."""
    conn = sqlite_store.connect(home, readonly=True)
    try:
        listed = checks.archived_times(conn)
    finally:
        conn.close()
    try:
        df = parquet.read_archive(home)
        held = set(df["entry_id"].to_list()) if "entry_id" in df.columns else set()
    except Exception:  # a file still unreadable: its ids count as missing
        held = set()
    return set(listed) - held, listed


def _entries_of(agent: str, files: list[tuple[SourceFile, Path | None]], want: set[str]):
    """The entries of ``want`` the source files ``files`` hold, each read by ``agent``'s
    source (redacted and hashed as at ingest: ``entries_frame``), a file given with a
    second path read from that path (``jsonl.VIEW``: a vault generation written out).
    Yields entry frames filtered to ``want``."""
    import polars as pl

    from ctxkeep.sources import SOURCES
    from ctxkeep.sources.readers import jsonl as jsonl_reader
    from ctxkeep.transforms.normalize import entries_frame

    for f, view in files:
        if not want:
            return
        if view is not None:
            jsonl_reader.VIEW[str(f.path)] = view
        try:
            rows = [e for b in SOURCES[agent].read(f, None) for e in b.entries]
        except Exception:  # an unreadable copy: the next one is tried
            rows = []
        finally:
            jsonl_reader.VIEW.pop(str(f.path), None)
        if not rows:
            continue
        frame = entries_frame(rows).filter(pl.col("entry_id").is_in(list(want)))
        if frame.height:
            want -= set(frame["entry_id"].to_list())
            yield frame


def _rearchive(home: Path, damaged: list[Path]) -> tuple[list[str], list[str]]:
    """Re-archive the entries of unreadable archive files from their other copies
    (``other_copies``), the vault first (its generations of the agent's files, written
    out one at a time to a temporary file), then the session files on disk and their
    compress backups. Each damaged file is moved aside first
    (``<name>.damaged-<UTC>``, never deleted); the entries SQLite's ``archived`` table
    lists that no readable file holds are read again and written as new archive files
    (``parquet.write_recovered``). Returns ``(actions, not recovered)``."""
    import shutil
    import tempfile

    import polars as pl

    from ctxkeep.sinks.vault import manifest
    from ctxkeep.timeutil import now_iso

    actions: list[str] = []
    stamp = now_iso().replace(":", "").replace("-", "")
    agents = sorted({a for f in damaged if (a := _partition(f, "agent"))})
    for f in damaged:
        if f.exists():
            f.replace(f.with_name(f"{f.name}.damaged-{stamp}"))
            actions.append(f"moved the unreadable archive file aside ({f.name}.damaged-{stamp})")
    want, times = _archive_gaps(home)
    n_want = len(want)
    frames, got = [], {"the vault": 0, "session files": 0, "compress backups": 0}
    conn = sqlite_store.connect(home)
    work = Path(tempfile.mkdtemp(prefix="ctxkeep-rearchive-"))
    try:
        for agent in agents:
            for g in manifest.generations(conn, agents=[agent]):
                if not want:
                    break
                tmp = work / "gen.bin"
                with open(tmp, "wb") as out:
                    for chunk in manifest.iter_bytes(conn, home, g):
                        out.write(chunk)
                mode = "rewrite" if g.mode == "document" else "append"
                for fr in _entries_of(
                    agent, [(SourceFile(agent, Path(g.path), mode, dict(g.meta)), tmp)], want
                ):
                    frames.append(fr)
                    got["the vault"] += fr.height
            copies = other_copies(home, Path(home) / ARCHIVE_DIR / f"agent={agent}" / "x.parquet")
            for kind in ("session files", "compress backups"):
                files: list[tuple[SourceFile, Path | None]] = [
                    (SourceFile(agent, Path(p), "append", {}), None) for p in copies[kind]
                ]
                for fr in _entries_of(agent, files, want):
                    frames.append(fr)
                    got[kind] += fr.height
    finally:
        conn.close()
        shutil.rmtree(work, ignore_errors=True)
    if frames:
        written = parquet.write_recovered(home, pl.concat(frames, how="diagonal_relaxed"), times)
        actions.append(
            f"re-archived {n_want - len(want):,} of {n_want:,} entries the unreadable files held, from "
            + ", ".join(f"{k} ({v:,})" for k, v in got.items() if v)
            + f": {len(written)} new archive files"
        )
    if not want:
        return actions, []
    return actions, [
        f"{len(want):,} archived entries of {', '.join(agents)} that no other copy holds (the vault, the "
        "session files and their compress backups were read)"
    ]


def _rechunk(conn) -> tuple[int, int]:
    """Cut into chunks again the contents with chunk gaps (``checks.CHUNK_GAPS_SQL``):
    their text is read again from the agents' files that hold their entries (the
    sources' readers, from byte 0; redacted and hashed as at ingest), their partial
    chunk rows are replaced, and the caller rebuilds the FTS indexes. Returns
    ``(contents repaired, contents whose text no file holds any more)``.

    Hook for the vault (``sinks.vault``): the contents still missing after this are the
    ones to look up there by ``content_hash``."""
    from ctxkeep.sinks.sqlite import checks
    from ctxkeep.sinks.sqlite.load import _insert_chunks
    from ctxkeep.sources import SOURCES, files_for_paths
    from ctxkeep.transforms.chunk import chunks_frame
    from ctxkeep.transforms.normalize import contents_frame, entries_frame

    gaps, files = checks.chunk_gap_files(conn)
    if not gaps:
        return 0, 0
    texts: dict[str, str] = {}
    todo, whole = [], set()
    for agent, path in files:
        found, _problems = files_for_paths([Path(path)], [agent])
        todo += found
        if not found:  # a file of a tree (OpenCode's message files): its agent's discovery
            whole.add(agent)
    if whole:
        from ctxkeep.sources import discover_all
        from ctxkeep.sources.contract import DiscoveryContext

        todo += [f for d in discover_all(DiscoveryContext.from_env(), sorted(whole)) for f in d.files]
    for f in todo:
        if len(texts) < len(gaps):
            entries = [e for b in SOURCES[f.agent].read(f, None) for e in b.entries]
            if not entries:
                continue
            for h, text in contents_frame(entries_frame(entries)).select("content_hash", "text").iter_rows():
                if h in gaps and h not in texts:
                    texts[h] = text
    if texts:
        import polars as pl

        frame = pl.DataFrame({"content_hash": list(texts), "text": list(texts.values())})
        with sqlite_store.write(conn):
            checks.drop_chunks(conn, [gaps[h] for h in texts])
            _insert_chunks(conn, chunks_frame(frame), {}, {})
    return len(texts), len(gaps) - len(texts)


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
    agents' Claude Code and Codex files into a rebuilt store that lacks a line of them:
    the lines compress cut from a session file exist only there and in the lost store
    when the vault did not hold the file (off, or turned on after the compress). Entry
    ids are stable, so only those lines add entries; they are marked ``archived`` (not
    in the session file any more), as compress had marked them. A backup all of whose
    lines the store holds (``compress.run.lines_not_held``: what the vault gave back)
    is not read: read, it became a file of its own in the vault ("5 files gone from
    disk" once the user deleted the backups), the quarantine held its unparsable lines
    twice and ``secrets`` counted their values twice (newuser15 F5). Returns
    ``(entries added, backup files read)``."""
    from ctxkeep.maintenance.compress.run import discovered_files, lines_not_held
    from ctxkeep.pipeline.engine import run_ingest

    files, _problems = discovered_files(home)
    # a backup's records are the session file's: its name (``<id>.jsonl.backup``) must
    # not name a session of its own (a Claude Code ``summary`` line has no sessionId)
    backups = []
    conn = sqlite_store.connect(home)
    try:
        for f in files:
            for b in rewrite.backup_paths(f.path):
                try:
                    if not lines_not_held(conn, f, b.read_bytes()):
                        continue
                except OSError:
                    continue
                backups.append(SourceFile(f.agent, b, "append", {**f.meta, "file_session": f.path.stem}))
    finally:
        conn.close()
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


def _n(n: int, word: str, plural: str | None = None) -> str:
    """``1 session``, ``2 sessions`` (``plural`` for irregular words), with thousands
    separators (a new user read "1 sessions (1 files)")."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"

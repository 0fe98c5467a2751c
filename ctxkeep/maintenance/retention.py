"""Retention: archive old consumed/archived entries to Parquet and drop them from the
hot store, delete old Parquet archives and old compress backups, prune the vault's
older generations by the ``[vault]`` policy (default: keep) (plain functions, no
Prefect).

The vault's part (``vault_plan``, ``sinks.vault.prune``): the generations the policy
drops (``prune.due``), less those the store still needs from them: a generation goes
only when the kept generations give the same entries (a ``reparse`` dry run of the
affected files without them: a file with an entry removed or changed keeps all its
due generations, e.g. the lines compress moved out of an append file, a document
version whose messages the agent later dropped) and holds no media compress moved out
(``vault_media``: the only copy of them beside the store). Its bytes then leave the
packs (``forget.sweep``). A dry run lists every generation that would go, those held
back and why, and the compressed bytes freed.

``flows.maintenance.retention_flow`` wraps ``run_retention`` in a Prefect flow (daily
under ``ctxkeep serve``); ``ctxkeep retention --dry-run``/``--no-prefect`` and the tests
call it directly. A run that changes the store holds the store lock (``sinks.lock``) and
is recorded in the ``runs`` table as flow ``retention``. Its archiving is crash-safe
across SQLite, Parquet and DuckDB: an intent (``sinks.sqlite.intents``) names the run's
archive files before they are written, and a killed run is completed by the next
writable command (``sinks.recovery``).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from contextlib import closing, nullcontext
from dataclasses import dataclass
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep import timeutil
from ctxkeep.sinks import parquet as archive
from ctxkeep.sinks import recovery
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ARCHIVE_DIR, STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite import intents
from ctxkeep.sinks.sqlite.intents import kill_point
from ctxkeep.sinks.sqlite.lookup import known_paths
from ctxkeep.sources import SOURCES, discover_all
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.timeutil import utc_now

#: Backups written by the compress flow next to a session file. Compress owns their
#: naming (``maintenance.compress.rewrite``: ``<file>.backup``, older ones
#: ``<file>.backup.<UTC stamp>``); this pattern matches any ``.backup`` name with a
#: ``.``/``-``/``_`` suffix, so retention need not know which variant.
BACKUP_RE = re.compile(r"^.+\.backup(?:[.\-_][^/\\]*)?$")


@dataclass
class RetentionPlan:
    """What retention would do: ``cutoff`` (entries before it are archived),
    ``archive`` rows per (agent, month) from ``archive.due``, ``old_archives`` and
    ``old_backups`` (paths), ``archive_cutoff`` and ``backup_cutoff`` (UTC)."""

    cutoff: dt.datetime | None  # None: ``archive_after_days`` unset, no entry moves
    archive: list[dict]
    archive_cutoff: dt.datetime
    old_archives: list[Path]
    backup_cutoff: dt.datetime
    old_backups: list[Path]
    backup_dirs: int = 0
    #: the vault's part (``vault_plan``)
    vault: dict | None = None

    def as_dict(self) -> dict:
        def size(p: Path) -> int:
            try:
                return p.stat().st_size
            except OSError:
                return 0

        return {
            "cutoff": self.cutoff.isoformat() if self.cutoff else None,
            "archive": self.archive,
            "entries_to_archive": sum(r["entries"] for r in self.archive),
            "archive_cutoff": self.archive_cutoff.isoformat(),
            "old_archives": [str(p) for p in self.old_archives],
            "old_archives_bytes": sum(size(p) for p in self.old_archives),
            "backup_cutoff": self.backup_cutoff.isoformat(),
            "old_backups": [str(p) for p in self.old_backups],
            "old_backups_bytes": sum(size(p) for p in self.old_backups),
            "backup_dirs_scanned": self.backup_dirs,
            "vault": {k: v for k, v in (self.vault or _NO_VAULT).items() if k != "gen_ids"},
        }


def backup_dirs(home: Path, ctx: DiscoveryContext | None = None) -> list[Path]:
    """Directories where compress and ``secrets --scrub`` write backups: those that
    hold discovered session files of enabled agents, those of every file the store
    knows (its watermarks and the vault's files: a session file the agent's cleanup
    deleted leaves its ``.backup`` in a folder discovery no longer lists; newuser18
    F19), and those of the agents' prompt histories (``maintenance.prompt_history``).
    Only directories that exist."""
    cfg = cfgmod.load_config(home)
    ctx = ctx or DiscoveryContext.from_env()
    ds = discover_all(
        ctx,
        None,
        enabled={a: cfg.agent(a).enabled for a in SOURCES},
        extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES},
    )
    from ctxkeep.maintenance.prompt_history import history_files

    dirs = {f.path.parent for d in ds for f in d.files}
    dirs |= {p.parent for p, _ in history_files(ctx.home, ctx.env)}
    dirs |= {d for d in _known_dirs(home) if d not in dirs and d.is_dir()}
    return sorted(dirs)


def _known_dirs(home: Path) -> set[Path]:
    """The folders of the files the store at ``home`` knows (watermarks, the vault's
    files; a rows document ``<db>#session=<id>``: its database's folder); empty
    without a store or when it cannot be read."""
    if not (home / STORE_DB).exists():
        return set()
    try:
        conn = sqlite_store.connect(home, readonly=True)
    except Exception:  # an unreadable store: the discovered folders only
        return set()
    try:
        return {Path(p.split("#", 1)[0]).parent for p in known_paths(conn)}
    finally:
        conn.close()


def old_backups(dirs: list[Path], older_than: dt.datetime) -> list[Path]:
    """Compress backups (names matching ``BACKUP_RE``) in ``dirs`` whose age is past
    ``older_than``. The age is the later of mtime and ctime: a backup copied with its
    original's mtime (``shutil.copy2``) still counts from when it was made."""
    limit = older_than.timestamp()
    out = []
    for d in dirs:
        try:
            names = list(d.iterdir())
        except OSError:
            continue
        for p in names:
            if not BACKUP_RE.match(p.name) or not p.is_file():
                continue
            st = p.stat()
            if max(st.st_mtime, st.st_ctime) < limit:
                out.append(p)
    return sorted(out)


#: the vault's part when the policy keeps every generation (or there is no store)
_NO_VAULT: dict = {
    "keep_generations": None,
    "generation_max_age_days": None,
    "generations": [],
    "held": [],
    "objects_freed": 0,
    "objects_bytes": 0,
    "bytes_freed": 0,
    "gen_ids": [],
}


def vault_plan(
    home: Path, *, keep: int | None, max_age_days: int | None, now: dt.datetime, check: bool = True
) -> dict:
    """The vault's part of retention, changing nothing: ``generations`` that go
    (``path``, ``agent``, ``gen``, ``bytes`` (original), ``created_at``, ``reason``),
    ``held`` (the same, ``reason`` why kept), ``objects_freed`` and ``objects_bytes``
    (the objects only they use, their compressed bytes), ``bytes_freed`` (about what
    the packs shed: those objects and the captures' lines of their records,
    ``prune.packs_freed``), ``gen_ids`` (internal). ``check``
    runs the reparse dry run of the affected files (module doc); it takes the store
    lock. Raises what ``reparse`` raises."""
    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.sinks.vault import prune

    out = dict(_NO_VAULT, keep_generations=keep, generation_max_age_days=max_age_days)
    if (keep is None and max_age_days is None) or not (home / STORE_DB).exists():
        return out
    conn = sqlite_store.connect(home, readonly=True)
    try:
        due = prune.due(conn, keep=keep, max_age_days=max_age_days, now=now)
        with_media = prune.with_media(conn)
    finally:
        conn.close()
    if not due:
        return out
    why: dict[int, str] = {}
    if check:
        r = reparse(
            home,
            paths=sorted({d.gen.disk_path for d in due}),
            dry_run=True,
            exclude={d.gen.gen_id for d in due},
        )
        # a file whose entries name other paths (sst/opencode's tree: its message and
        # part files) is not in ``differing``: an agent with an entry removed or changed
        # that no differing file explains keeps every due generation
        differ = set(r["differing"])
        worse = {e["agent"] for e in r["diff"]["entries"] if e["removed"] or e["changed"]}
        explained = {d.gen.agent for d in due if d.gen.disk_path in differ}
        for d in due:
            unexplained = d.gen.agent in worse and (
                d.gen.agent not in explained or d.gen.meta.get("vault_tree")
            )
            if d.gen.disk_path in differ or unexplained:
                why[d.gen.gen_id] = "the kept generations do not give the same entries"
    for d in due:
        if d.gen.gen_id in with_media:
            why.setdefault(d.gen.gen_id, "holds media compress moved out of the file")
    # a file's pruned generations are its oldest: none after a held one
    first_held: dict[int, int] = {}
    for d in due:
        if d.gen.gen_id in why:
            first_held[d.gen.vfile_id] = min(first_held.get(d.gen.vfile_id, d.gen.gen), d.gen.gen)
    go, held = [], []
    for d in due:
        row = {
            "path": d.gen.path,
            "agent": d.gen.agent,
            "gen": d.gen.gen,
            "bytes": d.gen.length,
            "created_at": d.gen.created_at,
        }
        if d.gen.gen >= first_held.get(d.gen.vfile_id, d.gen.gen + 1):
            held.append(
                dict(
                    row,
                    reason=why.get(
                        d.gen.gen_id, "an older generation of the file is held (a file prunes its oldest)"
                    ),
                )
            )
        else:
            go.append((d, dict(row, reason=d.reason)))
    ids = [d.gen.gen_id for d, _ in go]
    conn = sqlite_store.connect(home, readonly=True)
    try:
        n, objects_bytes = prune.freed(conn, ids)
        packs_freed = prune.packs_freed(conn, home, [d.gen for d, _ in go])
    finally:
        conn.close()
    out.update(
        generations=[r for _, r in go],
        held=held,
        objects_freed=n,
        objects_bytes=objects_bytes,
        bytes_freed=packs_freed,
        gen_ids=ids,
    )
    return out


def plan_retention(
    home: Path,
    *,
    now: dt.datetime | None = None,
    ctx: DiscoveryContext | None = None,
    archive_after_days: int | None = None,
    delete_archives_after_days: int | None = None,
    backup_max_age_days: int | None = None,
    keep_generations: int | None = None,
    generation_max_age_days: int | None = None,
) -> RetentionPlan:
    """Work out what retention would do, changing nothing. Thresholds default to
    ``config.RetentionConfig`` (``archive_after_days`` unset: no entry leaves the store;
    ``delete_archives_after_days`` 30) and ``CompressConfig.backup_max_age_days`` (30); days are 24 h periods before
    ``now`` (UTC). The vault's policy defaults to ``[vault]`` ``keep_generations`` and
    ``generation_max_age_days`` (None: keep); its check takes the store lock
    (``vault_plan``)."""
    home = Path(home)
    cfg = cfgmod.load_config(home)
    now = now or utc_now()
    a_days = cfg.retention.archive_after_days if archive_after_days is None else archive_after_days
    d_days = (
        cfg.retention.delete_archives_after_days
        if delete_archives_after_days is None
        else delete_archives_after_days
    )
    b_days = cfg.compress.backup_max_age_days if backup_max_age_days is None else backup_max_age_days
    cutoff = None if a_days is None else now - dt.timedelta(days=a_days)
    rows: list[dict] = []
    if cutoff is not None and (home / STORE_DB).exists():
        conn = sqlite_store.connect(home, readonly=True)
        try:
            rows = archive.due(conn, cutoff)
        finally:
            conn.close()
    a_cut = now - dt.timedelta(days=d_days)
    b_cut = now - dt.timedelta(days=b_days)
    dirs = backup_dirs(home, ctx)
    v = vault_plan(
        home,
        keep=cfg.vault.keep_generations if keep_generations is None else keep_generations,
        max_age_days=cfg.vault.generation_max_age_days
        if generation_max_age_days is None
        else generation_max_age_days,
        now=now,
    )
    return RetentionPlan(
        cutoff, rows, a_cut, archive.old_archives(home, a_cut), b_cut, old_backups(dirs, b_cut), len(dirs), v
    )


def run_retention(
    home: Path,
    *,
    dry_run: bool = False,
    now: dt.datetime | None = None,
    ctx: DiscoveryContext | None = None,
    timeout: float = -1,
    **days,
) -> dict:
    """Retention: archive consumed/archived entries older than ``archive_after_days`` (when
    set: by default none moves) to Parquet (``sinks.parquet``) and remove them from the hot store (SQLite, FTS, then
    DuckDB is rebuilt); delete archive files older than ``delete_archives_after_days``
    and compress backups older than ``backup_max_age_days``.

    ``days`` may override the three thresholds (keyword names as in config).
    Prunes the vault's generations the plan lets go (``vault_plan``; ``days`` may also
    set ``keep_generations`` and ``generation_max_age_days``), then repacks
    (``forget.sweep``, also after a prune a kill stopped).
    Returns the plan (``RetentionPlan.as_dict``) plus, unless ``dry_run``: ``archived``
    (``archive.archive_entries`` report), ``archives_removed``/``backups_removed``
    (counts), ``bytes_freed`` (files and the vault's packs) and in ``vault``:
    ``pruned`` (``prune.prune``'s figures), ``packs_rewritten``, ``bytes_freed``
    (the packs' bytes before less after). Raises StoreBusy when the lock stays taken past
    ``timeout`` seconds.
    """
    t0 = time.perf_counter()
    home = Path(home)
    p = plan_retention(home, now=now, ctx=ctx, **days)
    out = {"dry_run": dry_run, **p.as_dict()}
    if dry_run:
        return out
    with hold(home, timeout, what="retention"):
        archived: dict = {"entries": 0, "contents": 0, "chunks": 0, "files": [], "partitions": []}
        conn = sqlite_store.connect(home) if (home / STORE_DB).exists() else None
        with (
            closing(conn) if conn else nullcontext(),
            sqlite_store.recorded_run(conn, "retention", t0=t0) as run,
        ):
            run.summary = lambda: {  # the figures so far, also of a failed run
                "entries_new": 0,
                "files": len(archived["files"]),
                "archived_entries": archived["entries"],
                "archives_removed": out.get("archives_removed", 0),
                "backups_removed": out.get("backups_removed", 0),
                "vault_generations_pruned": (out.get("vault") or {}).get("pruned", {}).get("generations", 0),
            }
            if conn:
                recovery.recover(conn, home, check=True)
            if conn and p.cutoff is not None:
                # the intent names the archive files' stamp before any is written: a
                # crash leaves files the next command can tell (sinks.recovery)
                stamp = archive.new_stamp()
                iid = intents.begin(
                    conn,
                    "retention",
                    {"cutoff": timeutil.format_utc(p.cutoff), "stamps": [stamp]},
                    run_id=run.run_id,
                )
                archived = archive.archive_entries(conn, home, p.cutoff, stamp=stamp)
                begun = intents.get(conn, iid)  # written above, in this connection
                payload = begun.payload if begun is not None else {}
                intents.advance(conn, iid, "archived", {**payload, "archived": archived["entries"]})
                kill_point("retention", "analytics")
                _done, note = recovery.complete(conn, home, [iid])
                if note:
                    out["analytics"] = note
            freed = archive.remove_files(p.old_archives, home / ARCHIVE_DIR)
            # a backup goes only if it is still old (it may have been rewritten since the plan)
            backups = old_backups(sorted({b.parent for b in p.old_backups}), p.backup_cutoff)
            freed += archive.remove_files(backups)
            if conn:
                vfreed = _prune_vault(conn, home, p.vault or _NO_VAULT, out["vault"])
                freed += vfreed
            out.update(
                archived=archived,
                archives_removed=len(p.old_archives),
                backups_removed=len(backups),
                bytes_freed=freed,
            )
        out["seconds"] = run.seconds
    return out


def _prune_vault(conn, home: Path, plan: dict, out: dict) -> int:
    """Prune the generations of ``plan`` (``vault_plan``) still held and not their
    file's newest, then repack when anything was ever pruned (a kill may have left
    bytes to sweep). Fills ``out`` (``pruned``, ``packs_rewritten``, ``bytes_freed``);
    returns the bytes freed. The caller holds the store lock."""
    from ctxkeep.sinks.vault import forget, manifest, prune

    ids = set(plan.get("gen_ids") or ())
    gens = [g for g in manifest.generations(conn) if g.gen_id in ids]
    newest = {g.vfile_id: g.gen for g in manifest.generations(conn, latest=True)}
    gens = [g for g in gens if g.gen < newest.get(g.vfile_id, 0)]
    size = prune.packs_bytes(conn)
    with sqlite_store.write(conn):
        out["pruned"] = prune.prune(conn, home, gens)
    kill_point("vault-prune", "manifest")
    if gens or prune.cuts(home):
        out["packs_rewritten"] = forget.sweep(
            conn,
            home,
            after_pack=lambda: kill_point("vault-prune", "pack"),
            drop=prune.pruned_captures(conn, home),
        )
    out["bytes_freed"] = max(size - prune.packs_bytes(conn), 0)
    return out["bytes_freed"]

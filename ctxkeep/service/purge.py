"""Forget a session or a project: ``purge(home, PurgeRequest) -> PurgeResult`` (MCP
``ctx_purge``; the contract: ``maintenance.purge_request``, the deletion:
``maintenance.purge_named``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from ctxkeep.errors import ConfigError, UsageError
from ctxkeep.service.model import Request, Shape

#: seconds a purge waits for a running ingest or compress to finish
PURGE_LOCK_TIMEOUT = 30.0


#: the cancelled reply when no ``confirm`` was given (the seed's text is for ``false``)
NOT_CONFIRMED = (
    "Purge cancelled: no confirm was given. Preview with dryRun: true, then pass confirm: true to proceed."
)


#: the ``tombstone`` values as the reply's line says them (``tombstone would add`` read
#: as broken English: newuser24 F18)
_TOMBSTONE_WORDS = {"would add": "would be added", "would lift": "would be lifted"}


def strict_confirm(v: Any) -> bool | None:
    """A destructive call's ``confirm``: True for ``true`` or ``"true"``, False for
    ``false`` or ``"false"`` (any case, blanks stripped), None when absent. Anything
    else (``"yes"``, ``1``, ``"y"``) is not a boolean: UsageError (``where``
    ``confirm``), never a purge and not a silent cancel (newuser24 F16)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise UsageError(
        f"confirm must be a boolean, got {v!r}",
        where="confirm",
        hint="pass confirm: true to purge (preview first with dryRun: true)",
    )


class PurgeRequest(Request):
    """What to forget; nothing happens without ``confirm: true``."""

    session: str | None = Field(None, alias="sessionId", description="the session to purge (scope session)")
    scope: str | None = Field(None, description='"session" or "project"')
    project: str | None = Field(None, alias="projectDir", description="the project for scope project")
    # a boolean or "true"/"false" (``strict_confirm``); "yes" or 1 is a usage error
    confirm: Any = Field(
        None, description="must be true to purge", json_schema_extra={"type": ["boolean", "string"]}
    )
    dry_run: bool = Field(
        False,
        alias="dryRun",
        description="true: report what a purge would remove, change nothing (no confirm)",
    )


class PurgeResult(Shape):
    """What was removed (``maintenance.purge.run_purge``'s report; ``ctxkeep purge
    --json``, ``ctx_purge``), or that the purge was cancelled. ``--all`` has scope,
    resolved, home, dry_run, files_removed, bytes_removed, removed, backups."""

    cancelled: bool = Field(
        False, description="(ctx_purge) true: confirm was false or not given, nothing changed"
    )
    message: str | None = Field(None, description="(ctx_purge) why it was cancelled and what to do")
    scope: str | None = Field(None, description="session, project or all")
    session_id: str | None = Field(None, description="the session given (null: none)")
    project_dir: str | None = Field(None, description="the project given (null: none)")
    resolved: str | None = Field(None, description="what was purged, in words")
    home: str | None = Field(None, description="the store")
    dry_run: bool | None = Field(None, description="true for a dry run")
    removed: dict[str, int] = Field(
        default_factory=dict,
        description="category → count (entries, sessions, contents, chunks, usage, quarantine, source_files, "
        "token_estimate, archived, coverage: ledger rows of the files removed wholly, text_bytes, vault_files, vault_bytes: stored bytes the vault's packs lose, "
        "vault_raw_bytes: their original bytes, vault_shared: files the folder's other sessions share (Kiro IDE's "
        "sessions.json) kept and rewritten without what they held of the purged sessions; a dry run: "
        "source_files_gone, those of source_files no longer on disk; --all: archived_entries, entries compress or "
        "retention cut from their files, which the next ingest does not bring back)",
    )
    files: list[str] | None = Field(None, description="the session files the data came from")
    tombstone: Any = Field(
        None,
        description="what keeps the data from being ingested again: added, already there (an earlier purge "
        "added it), lifted, none; a dry run: "
        "would add, would lift, none",
    )
    tombstones: Any = Field(
        None, description="tombstones written (a dry run: that it would write), as 'scope value'"
    )
    tombstone_note: str | None = Field(
        None,
        description="what the tombstone blocks from now on (a project's: its future sessions too, "
        "which every ingest counts in its `tombstoned`), or that --reingest adds none",
    )
    kept: str | None = Field(
        None,
        description="what identifying data the purge keeps on purpose, in words: its tombstone "
        "(session id or project dir, session ids, file paths); null when it added none",
    )
    watermarks_dropped: int | None = Field(None, description="watermarks removed (not with a dry run)")
    analytics: str | None = Field(None, description="what the DuckDB rebuild did (not with a dry run)")
    files_removed: list[str] | None = Field(None, description="--all: the store files removed")
    bytes_removed: int | None = Field(None, description="--all: their bytes")
    reread: dict[str, int] | None = Field(
        None,
        description="--all: what the next ingest reads again from the start: {files, bytes} (the files "
        "the store's watermarks name, on disk now), and gone: those no longer on disk (only the vault held them)",
    )
    tombstones_kept: int | None = Field(
        None,
        description="--all: the tombstones carried into the next store (store.wiped holds them until "
        "the next ingest creates it), so what earlier purges removed stays out",
    )
    backups: list[Any] = Field(
        default_factory=list,
        description="the store backups that still hold the data (a purge never changes one): "
        "[{path, taken (UTC), entries (null: unreadable)}]",
    )
    backups_note: str | None = Field(
        None, description="when there are backups: what that means and the `rm` that removes them"
    )
    exports: list[Any] = Field(
        default_factory=list,
        description="the exports written from this store that still hold the data (a purge never changes "
        "one): [{kind (parquet, html, markdown), dest, holds, unit (partition, page), refresh (the command)}]",
    )
    exports_note: str | None = Field(
        None, description="when there are exports: the commands that refresh them"
    )
    free: dict[str, Any] | None = Field(
        None,
        description="(a purge, not --all) store.db's free pages after it: {pages, free_pages, page_size, bytes, "
        "free_bytes, worth_compacting}; `purge --compact` gives them back (a backup copies them)",
    )
    compact_hint: str | None = Field(
        None, description="when worth_compacting: how much a compaction gives back and the command"
    )
    compacted: dict[str, Any] | None = Field(
        None,
        description="(--compact) {before, after, reclaimed: bytes, free_pages, pages: before, dry_run}",
    )

    def line(self) -> str:
        if self.cancelled:
            return self.message or "cancelled"
        r = self.removed
        verb, did = ("would purge", "would remove") if self.dry_run else ("purged", "removed")
        text = (
            f"{verb} {self.resolved}: {did} {r.get('entries', 0)} entries, "
            f"{r.get('sessions', 0)} sessions, {r.get('contents', 0)} texts, {r.get('chunks', 0)} "
            f"chunks, {r.get('usage', 0)} usage rows, {r.get('quarantine', 0)} quarantined lines, "
            f"{r.get('vault_files', 0)} vault files ({r.get('vault_bytes', 0)} bytes stored)"
            + (
                f", {r['vault_shared']} shared vault files rewritten without it"
                if r.get("vault_shared")
                else ""
            )
            + f"; tombstone {_TOMBSTONE_WORDS.get(self.tombstone, self.tombstone) if self.tombstone else 'none'}"
        ) + (f"; {self.kept}" if self.kept else "")
        text += f"; {self.tombstone_note}" if self.tombstone_note else ""
        text += f"; warning: {self.backups_note}" if self.backups_note else ""
        return text + (f"; warning: {self.exports_note}" if self.exports_note else "")


def purge(home: Path, req: PurgeRequest, *, cwd: Path) -> PurgeResult:
    """Purge the session or project ``req`` names (a project relative to ``cwd``), or
    with ``dry_run`` report what it would remove (``dry_run`` true; no confirm needed,
    nothing changes). A ``confirm`` false or absent cancels (``cancelled``, its
    ``message`` says what to do: the one "not confirmed" reply); raises UsageError for
    a ``confirm`` that is not a boolean or a request the contract refuses,
    SessionNotFound/AmbiguousSession, StoreBusy."""
    from ctxkeep.errors import PurgeCancelled
    from ctxkeep.maintenance.purge_named import purge_named
    from ctxkeep.maintenance.purge_request import parse_purge_request

    confirm = strict_confirm(req.confirm)
    if confirm is None and not req.dry_run:  # one shape for "not confirmed": cancelled
        return PurgeResult(cancelled=True, message=NOT_CONFIRMED)
    try:
        parsed = parse_purge_request(
            session_id=req.session,
            scope=req.scope,
            project_dir=req.project,
            confirm=True if req.dry_run else confirm,
            cwd=str(cwd),
        )
    except PurgeCancelled as e:
        return PurgeResult(cancelled=True, message=str(e))
    if req.dry_run:
        preview = purge_named(Path(home), parsed, dry_run=True)
        return PurgeResult(**{**preview, "dry_run": True})
    # as `ctxkeep purge`: the session as hits show it (an ambiguous prefix lists the
    # candidates), the project through symlinks, "no such session" and no tombstone
    # when nothing matches
    return PurgeResult(**purge_named(Path(home), parsed, timeout=PURGE_LOCK_TIMEOUT))


class PurgeTarget(Request):
    """``ctxkeep purge``: exactly one of ``session``, ``project`` (this directory or
    below, symlinks resolved) or ``everything`` (``--all``), or ``policy`` (the
    ``[purge]`` rules of config.toml). ``reingest``: no tombstone."""

    session: str | None = Field(None, description="a session id or a unique prefix, as hits show it")
    project: str | None = Field(None, description="a project directory (relative: from the caller's)")
    everything: bool = Field(False, alias="all", description="wipe the whole store")
    reingest: bool = Field(False, description="no tombstone: the next ingest may bring the data back")
    policy: bool = Field(False, description="apply the [purge] rules of config.toml")

    @model_validator(mode="after")
    def _one(self) -> PurgeTarget:
        chosen = [
            n
            for n, v in (("--session", self.session), ("--project", self.project), ("--all", self.everything))
            if v
        ]
        if self.policy:
            if chosen or self.reingest:
                raise UsageError("--policy takes no --session, --project, --all or --reingest")
            return self
        if len(chosen) != 1:
            raise UsageError(
                "purge needs exactly one of --session ID, --project DIR or --all"
                + (f" (got {', '.join(chosen)})" if chosen else ""),
                hint="preview with --dry-run first",
            )
        if self.everything and self.reingest:
            raise UsageError(
                "--reingest does not apply to --all (it wipes the store; lift a tombstone with --session or --project)"
            )
        return self


class PurgePlan:
    """What a purge will remove, before it does: ``describe`` (in words), ``preview``
    (the dry run's report, a ``PurgeResult``'s keys), and the resolved requests
    ``apply_purge`` purges."""

    def __init__(self, resolved: list, preview: dict) -> None:
        self.resolved = resolved
        self.preview = preview
        self.describe: str = resolved[0].describe()


def plan_purge(home: Path, req: PurgeTarget, *, cwd: Path) -> PurgePlan:
    """The purge ``req`` names (not ``policy``), resolved in the store at ``home``: the
    session as hits show it, the project through symlinks. Raises SessionNotFound or
    NotFound (nothing matched: no tombstone either), AmbiguousSession, UsageError."""
    from ctxkeep.maintenance.purge_named import resolve_named
    from ctxkeep.maintenance.purge_request import PurgeRequest as Scope
    from ctxkeep.maintenance.purge_request import parse_purge_request

    if req.everything:
        scope = Scope("all")
    else:
        # the CLI's confirmation is --yes or its prompt: the contract's confirm is
        # satisfied here so that both share one validation
        scope = parse_purge_request(
            session_id=req.session,
            scope="session" if req.session else "project",
            project_dir=req.project,
            confirm=True,
            cwd=str(cwd),
        )
    resolved, preview = resolve_named(Path(home), scope)
    if req.reingest and not req.everything:  # no tombstone: the one standing is lifted
        from ctxkeep.maintenance.purge_named import has_tombstone

        lifts = has_tombstone(Path(home), resolved[0])
        preview = {
            **preview,
            "tombstone": "would lift" if lifts else "none",
            "tombstones": [],
            "tombstone_note": "no tombstone: the next ingest reads the files concerned again from the start"
            + (" (the standing one is lifted)" if lifts else ""),
        }
    return PurgePlan(resolved, preview)


def apply_purge(home: Path, plan: PurgePlan, *, reingest: bool) -> PurgeResult:
    """Purge what ``plan`` resolved (waiting for the store lock as long as it takes),
    with the store's free pages after it (``free``, ``compact_hint``)."""
    from ctxkeep.maintenance.purge_named import purge_named

    rep = purge_named(Path(home), plan.resolved[0], reingest=reingest, timeout=-1, resolved=plan.resolved)
    if plan.resolved[0].scope != "all":
        rep = {**rep, **free_pages(Path(home))}
    return PurgeResult(**rep)


def free_pages(home: Path) -> dict:
    """``{"free": compact.free_space's figures, "compact_hint": the line that says how
    much ``purge --compact`` gives back, or None when it is not worth it}`` (newuser21
    N9: a purged store kept 2,429 of its 3,090 pages free, and every backup copied
    them)."""
    from ctxkeep.sinks.sqlite.compact import free_space

    f = free_space(home)
    hint = None
    if f["worth_compacting"]:
        hint = (
            f"store.db keeps {f['free_bytes'] / 1e6:,.1f} MB of free pages ({f['free_pages']:,} of {f['pages']:,}; "
            "a backup copies them): `ctxkeep purge --compact` gives them back, and somewhat more (it also "
            "packs the pages the purge left partly empty)"
        )
    return {"free": f, "compact_hint": hint}


def compact(home: Path, *, dry_run: bool = False) -> dict:
    """Write the store anew without its free pages (``sinks.sqlite.compact.compact``:
    VACUUM INTO a copy, renamed over the store under its lock), waiting for the lock as
    long as it takes; ``dry_run``: what it would give back. Returns its report."""
    from ctxkeep.sinks.sqlite.compact import compact as run

    return run(Path(home), timeout=-1, dry_run=dry_run)


def compact_preview(home: Path) -> dict | None:
    """What ``compact`` would give back now (its dry run's report: ``before``,
    ``after``, ``reclaimed``, ``free_pages``, ``pages``, ``needs``, ``disk_free``), or
    None when there is no store yet: what ``purge --dry-run --compact`` adds to its
    preview (the purge frees more pages than these figures count)."""
    from ctxkeep.sinks.files import STORE_DB

    if not (Path(home) / STORE_DB).exists():
        return None
    return compact(home, dry_run=True)


def plan_policy(home: Path) -> dict:
    """What the ``[purge]`` rules would remove now (``purge_policy.plan_policy``:
    ``rules``, ``scopes``, ``per_rule``, ``totals``). Raises ConfigError when
    config.toml has no ``[purge]`` rule (exit 1)."""
    from ctxkeep.config import CONFIG_FILE
    from ctxkeep.maintenance import purge_policy

    plan = purge_policy.plan_policy(Path(home))
    rules = plan["rules"] or {}
    if not (rules.get("projects") or rules.get("agents") or rules.get("older_than_days")):
        raise ConfigError(
            "no [purge] rules in config.toml",
            where=str(Path(home) / CONFIG_FILE),
            hint="add projects, agents or older_than_days under [purge]",
        )
    return plan


def policy_json(plan: dict) -> dict:
    """A ``plan_policy`` JSON-ready, as ``purge --policy --dry-run --json`` prints it."""
    from ctxkeep.maintenance import purge_policy

    return {**purge_policy.public(plan), "dry_run": True}


def run_policy(home: Path) -> dict:
    """Apply the ``[purge]`` rules (``purge_policy.run_policy``)."""
    from ctxkeep.maintenance import purge_policy

    return purge_policy.run_policy(Path(home))

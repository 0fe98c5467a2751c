"""The vault's questions (``ctxkeep vault status | verify | restore``, ``ctxkeep
reparse``): one request/result pair and one function each, over
``maintenance.vault`` and ``maintenance.reparse``. Sizes are bytes; times ISO-8601 UTC.

Each raises ``StoreError`` when the home holds no store; ``restore`` also
``SessionNotFound``/``AmbiguousSession``, ``NotFound`` (nothing of the session in the
vault), ``UsageError`` (a target exists without ``force``), ``VaultDamaged``;
``reparse`` ``StoreBusy`` and ``VaultDamaged``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ctxkeep.service.model import AgentNames, Request, Result, UserPath, When
from ctxkeep.service.store import reading


class AtRisk(BaseModel):
    """A session file its agent will delete (``due``) that the vault does not hold whole."""

    agent: str
    path: str
    due: str
    vaulted_bytes: int
    size: int
    unfinished_bytes: int = Field(
        0,
        description="bytes of it that are a last line the agent has not ended: ingest holds them back until "
        "the line ends (an ingest now does not bring them into the vault)",
    )
    read_all: bool = Field(
        False,
        description="the store read the file to its end (its watermark): an ingest brings nothing of it "
        "into the vault, `ctxkeep backfill --path FILE` reads it whole",
    )
    purged: str | None = Field(
        None, description="the purge that removed it from the store (session ID, project DIR; null: none)"
    )


class AgentVault(BaseModel):
    """One agent's line of ``vault status``: files, sessions, generations, bytes
    (``raw_bytes`` original, ``stored_bytes`` compressed: each object once, however many of
    the agent's files and generations hold it), values redacted per kind, its
    deletion rule (``deletes``), the next deletion of one of its files, files at risk."""

    agent: str
    files: int
    sessions: int
    generations: int
    raw_bytes: int
    stored_bytes: int
    redactions: dict[str, int] = Field(
        default_factory=dict,
        description="kind -> values replaced in the raw bytes of the newest generation of each file (each "
        "occurrence: what `vault restore` writes; `secrets` counts the stored entries holding them)",
    )
    deletes: str | None = None
    next_deletion: str | None = None
    at_risk: list[AtRisk] = Field(default_factory=list)


class VaultStatusRequest(Request):
    """``home``: the ctxkeep home; ``user_home``: whose agents' settings and files (None: ``$HOME``)."""

    home: Path
    user_home: Path | None = None


class VaultStatusResult(Result):
    """What the vault holds (`ctxkeep vault status --json`)."""

    vault_dir: str = Field(description="the vault's folder")
    pack_bytes: int = Field(description="bytes of its pack files on disk")
    stored_bytes: int = Field(
        0,
        description="compressed bytes of the objects its generations hold, each counted once however many "
        "files and generations share it (the packs add their framing and any object no generation holds)",
    )
    shared_bytes: int = Field(
        0, description="of stored_bytes, the objects held more than once (by several files or generations)"
    )
    per_reference_bytes: int = Field(
        0,
        description="the objects' bytes counted once per file and generation holding them (what sharing saves: "
        "this minus stored_bytes)",
    )
    agents: list[AgentVault] = Field(description="per agent")
    enabled: bool = Field(
        True,
        description="whether ingest captures into the vault (false: CTXKEEP_VAULT=0 or [vault] enabled = false)",
    )
    schedules: list[dict[str, Any]] = Field(
        description="the agents' deletion rules: agent, days, setting (where read), max_count"
    )
    at_risk: int = Field(description="how many files an agent will delete that the vault does not hold whole")
    missing: list[str] = Field(
        default_factory=list,
        description="files the vault holds that are gone from disk (`vault restore --all-missing` writes them back)",
    )


def vault_status(req: VaultStatusRequest) -> VaultStatusResult:
    """``maintenance.vault.vault_status``."""
    from ctxkeep.maintenance.vault import vault_status as run
    from ctxkeep.sources.contract import DiscoveryContext

    ctx = DiscoveryContext.from_env()
    if req.user_home is not None:
        ctx.home = req.user_home
    from ctxkeep.sinks import vault

    res = VaultStatusResult.model_validate(run(req.home, ctx))
    res.enabled = vault.enabled() and vault.configured(req.home)
    risky = [x for a in res.agents for x in a.at_risk]
    if risky:  # a purged file is at risk by choice: ingest skips it (its tombstone)
        from ctxkeep.sinks.sqlite.delete import purges_of_files

        with reading(req.home) as conn:
            purged = purges_of_files(conn)
        for x in risky:
            x.purged = purged.get(x.path)
    return res


class VaultVerifyRequest(Request):
    """``full``: also hash every pack whole and list orphan packs."""

    home: Path
    full: bool = False


class OrphanPack(BaseModel):
    """A pack file no generation names (a run stopped between the pack's write and its
    commit: ``sinks.vault.packs``): ``path``, ``bytes``. Nothing reads it: safe to
    delete when no ctxkeep run is going (a running one may be about to commit it)."""

    path: str
    bytes: int


class VaultVerifyResult(Result):
    """The vault read back (`ctxkeep vault verify --json`)."""

    generations: int = Field(description="generations checked")
    objects: int = Field(description="objects read back, decompressed and hashed")
    problems: list[str] = Field(description="one line per damaged pack or manifest fault")
    orphans: list[str] = Field(description="(--full) pack files no generation names")
    orphan_packs: list[OrphanPack] = Field(
        default_factory=list,
        description="(--full) the orphans' files and sizes: safe to delete when no ctxkeep run is going",
    )
    ok: bool = Field(description="true when there is no problem")


def vault_verify(req: VaultVerifyRequest) -> VaultVerifyResult:
    """``maintenance.vault.vault_verify``."""
    from ctxkeep.maintenance.vault import vault_verify as run

    return VaultVerifyResult.model_validate(run(req.home, full=req.full))


class VaultRepairRequest(Request):
    """``dry_run``: say which orphan packs would go; remove nothing. ``timeout``:
    seconds to wait for the store lock (0: give up at once: StoreBusy)."""

    home: Path
    dry_run: bool = False
    timeout: float = 0


class RepairedPack(BaseModel):
    """An orphan pack judged by ``vault verify --repair``: ``path``, ``bytes``,
    ``removable`` (what it holds is held already or was purged), ``removed`` (false in
    a dry run), ``why``."""

    path: str
    bytes: int
    removable: bool
    removed: bool
    why: str


class VaultRepairResult(Result):
    """The orphan packs removed (`ctxkeep vault verify --repair --json`)."""

    orphan_packs: list[RepairedPack] = Field(description="every orphan pack, judged")
    removed: int = Field(description="packs removed (a dry run: that would be)")
    removed_bytes: int = Field(description="their bytes on disk")
    kept: int = Field(description="orphans left in place (their why says what to do)")
    dry_run: bool = Field(description="true when nothing was removed on purpose")


def vault_repair(req: VaultRepairRequest) -> VaultRepairResult:
    """``maintenance.vault.vault_repair``."""
    from ctxkeep.maintenance.vault import vault_repair as run

    return VaultRepairResult.model_validate(run(req.home, dry_run=req.dry_run, timeout=req.timeout))


class VaultRestoreRequest(Request):
    """``session`` (an id or its first characters) or ``all_missing``; ``to``: a folder
    to write under instead of the original paths; ``force``: overwrite."""

    home: Path
    session: str | None = None
    to: UserPath | None = None
    force: bool = False
    all_missing: bool = False
    user_home: Path | None = None
    generation: int | None = Field(None, ge=1, description="generation N of each file (1: the first kept)")
    at: When = None
    dry_run: bool = Field(False, description="say what would be written; write nothing")


class RestoredFile(BaseModel):
    """A session file written back: ``path`` (original), ``to`` (written), ``bytes``,
    ``redactions`` (kind → values), ``exists`` (the target was there: overwritten with
    --force; in a dry run, what --force would overwrite)."""

    path: str
    to: str
    bytes: int
    redactions: dict[str, int] = Field(default_factory=dict)
    exists: bool = False


class RestoreFailure(BaseModel):
    """A file ``vault restore --all-missing`` could not write back: ``path`` and
    ``reason`` (one line)."""

    path: str
    reason: str


class VaultRestoreResult(Result):
    """Session files written back from the vault (`ctxkeep vault restore --json`)."""

    session: str | None = Field(description="the session id (null with --all-missing)")
    dry_run: bool = Field(False, description="true: nothing was written (files: what would be)")
    files: list[RestoredFile] = Field(description="one per file written (in a dry run: that would be)")
    skipped_rows: list[str] = Field(
        default_factory=list,
        description="agent databases whose session rows were not written (they need --to DIR: JSONL)",
    )
    not_restored: list[RestoreFailure] = Field(
        default_factory=list,
        description="with --all-missing: files that could not be restored (path, reason: held only from an "
        "offset, damaged, not writable), the others restored all the same (exit 1)",
    )
    left_shared: list[str] = Field(
        default_factory=list,
        description="files several sessions share (Kiro IDE's sessions.json) that are on disk and were left as "
        "they are: they list the sessions still there (--force writes the vault's)",
    )
    interrupted: str | None = Field(
        None, description="SIGINT or SIGTERM when one stopped the run after the file in hand, else null"
    )
    not_started: int = Field(0, description="files an interrupted run left unwritten")


def vault_restore(req: VaultRestoreRequest) -> VaultRestoreResult:
    """``maintenance.vault.vault_restore``; UsageError unless exactly one of
    ``session`` and ``all_missing`` is given."""
    from ctxkeep.errors import UsageError
    from ctxkeep.maintenance.vault import vault_restore as run

    if (req.session is None) == (not req.all_missing):
        raise UsageError("give a SESSION or --all-missing (not both)", where="vault restore")
    if req.generation is not None and req.at is not None:
        raise UsageError("--generation and --at exclude each other", where="vault restore", hint="give one")
    from ctxkeep.timeutil import when_bound

    at = when_bound(req.at, upper=True, where="--at")
    return VaultRestoreResult.model_validate(
        run(
            req.home,
            req.session,
            to=req.to,
            force=req.force,
            all_missing=req.all_missing,
            user_home=req.user_home,
            generation=req.generation,
            at=at,
            dry_run=req.dry_run,
        )
    )


class ReparseRequest(Request):
    """``agents`` (None: every agent the vault holds), ``since`` (only files the agent
    last changed then or later), ``dry_run``, ``rekey`` (files a store keyed as before
    keyed as a new read keys them: ``maintenance.reparse.reparse``)."""

    home: Path
    agents: AgentNames | None = Field(None, description="only these agents")
    since: When = None
    dry_run: bool = False
    rekey: bool = Field(
        False,
        description="key Claude Code files read before session-keyed ids anew (old ids kept as aliases)",
    )


class ReparseResult(Result):
    """The store rebuilt from the vault (`ctxkeep reparse --json`)."""

    dry_run: bool = Field(description="true: nothing changed")
    agents: list[str] = Field(description="agents reparsed")
    files: int = Field(description="vault files read (a database's sessions: one rows document each)")
    agent_files: int = Field(
        0,
        description="the agents' files they come from, a database once (what `vault status` counts as files)",
    )
    generations: int = Field(description="generations parsed")
    diff: dict[str, Any] = Field(
        description="entries: [agent, kind, added, removed, changed, same]; usage: agent → before, after, delta "
        "(input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd)"
    )
    notes: list[str] = Field(description="what the vault does not cover")
    seconds: float = Field(description="wall time")


def reparse(req: ReparseRequest) -> ReparseResult:
    """``maintenance.reparse.reparse``; NotFound when ``home`` holds no store (a
    reparse never creates one: there would be no vault to read)."""
    from ctxkeep.errors import NotFound
    from ctxkeep.maintenance.reparse import reparse as run
    from ctxkeep.sinks.files import STORE_DB

    if not (Path(req.home) / STORE_DB).exists():
        raise NotFound(
            "no store yet", where=str(Path(req.home) / STORE_DB), hint="run `ctxkeep ingest` first"
        )

    since_ns = None
    if req.since:
        from ctxkeep.timeutil import when_bound

        bound = when_bound(req.since, where="--since")
        since_ns = None if bound is None else int(bound.timestamp() * 1e9)
    return ReparseResult.model_validate(
        run(req.home, agents=req.agents, since_ns=since_ns, dry_run=req.dry_run, rekey=req.rekey)
    )


__all__ = [
    "AgentVault",
    "ReparseRequest",
    "ReparseResult",
    "VaultRestoreRequest",
    "VaultRestoreResult",
    "VaultRepairRequest",
    "VaultRepairResult",
    "VaultStatusRequest",
    "VaultStatusResult",
    "VaultVerifyRequest",
    "VaultVerifyResult",
    "reparse",
    "vault_repair",
    "vault_restore",
    "vault_status",
    "vault_verify",
]

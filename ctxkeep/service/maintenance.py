"""The store's maintenance questions (``ctxkeep retention | reindex | backfill |
serve``): a request and a result model and one function each, over
``maintenance.retention``, ``maintenance.reindex``, ``maintenance.backfill`` and
``flows.serve``.

``retention``, ``reindex`` and ``backfill`` run like ``ingest`` does: as their Prefect
flow when a Prefect server is there to record it (``PREFECT_API_URL``, a running
``ctxkeep serve``) or with ``prefect=True``, in-process otherwise
(``flows.prefect_env.run_as_flow``); a dry run never imports Prefect. Each raises
StoreError (no store, or a damaged one: checked before a flow's server starts),
StoreBusy (the store lock stayed taken) and UsageError (a bad value, ``where`` the
field).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from ctxkeep.errors import UsageError
from ctxkeep.service.model import Names, Request, Shape, UserPath, When
from ctxkeep.service.shapes import PROBLEMS
from ctxkeep.service.store import reading

#: called with one line before a flow run starts Prefect's temporary server (15-50 s)
Notify = Callable[[str], None] | None


def _as_flow(home: Path, prefect: bool | None) -> bool:
    """``flows.prefect_env.run_as_flow`` (imports no Prefect)."""
    from ctxkeep.flows.prefect_env import run_as_flow

    return run_as_flow(home, prefect)


def _run_flow(home: Path, name: str, notify: Notify, **params: Any) -> dict:
    """Run the ``<name>_flow`` of ``flows.maintenance`` on the store at ``home``: a
    damaged store fails first (StoreDamaged), before Prefect's server starts."""
    from ctxkeep.flows.prefect_env import configure_prefect
    from ctxkeep.sinks.files import STORE_DB

    if (home / STORE_DB).exists():
        with reading(home) as conn:
            if name == "reindex":  # it reads every page anyway: check them all first
                from ctxkeep.sinks.sqlite.store_safety import check_integrity

                check_integrity(conn, home / STORE_DB)
    configure_prefect(home)
    from ctxkeep.flows import maintenance as maintenance_flows

    if not os.environ.get("PREFECT_API_URL") and notify:
        notify(
            f"{name}: starting Prefect's temporary local server for the flow run "
            "(15-50 s; without --prefect it runs in-process)"
        )
    return getattr(maintenance_flows, f"{name}_flow")(str(home), **params)


Prefect = Field(
    None,
    description="true: run as a Prefect flow (a temporary server when none is found); false: in-process; "
    "null: a flow when a server is there (PREFECT_API_URL, a running serve)",
)


class RetentionResult(Shape):
    """What retention archives and removes (`ctxkeep retention --json`)."""

    dry_run: bool = Field(description="true for --dry-run")
    cutoff: str | None = Field(
        None,
        description="entries archived before this, ISO-8601 UTC (null: archive_after_days unset, none moves)",
    )
    archive: list[dict[str, Any]] | None = Field(
        None, description="per agent and month: agent, month, entries"
    )
    entries_to_archive: int | None = Field(None, description="entries that qualify")
    archive_cutoff: str | None = Field(None, description="archive files older than this are removed")
    old_archives: list[str] | None = Field(None, description="those files")
    old_archives_bytes: int | None = Field(None, description="their bytes")
    backup_cutoff: str | None = Field(None, description="compress backups older than this are removed")
    old_backups: list[str] | None = Field(None, description="those files")
    old_backups_bytes: int | None = Field(None, description="their bytes")
    backup_dirs_scanned: int | None = Field(None, description="how many folders were searched for backups")
    archived: Any = Field(None, description="(not with --dry-run) entries and rows written to Parquet")
    archives_removed: Any = Field(None, description="(not with --dry-run) archive files removed")
    backups_removed: Any = Field(None, description="(not with --dry-run) backups removed")
    bytes_freed: int | None = Field(None, description="(not with --dry-run) bytes freed")
    vault: dict[str, Any] | None = Field(
        None,
        description="the vault's generations: keep_generations and generation_max_age_days (the policy, "
        "null: keep), generations (path, agent, gen, bytes, created_at, reason) that go, held (the same, "
        "reason why kept), objects_freed and objects_bytes (the objects only they use, compressed bytes), "
        "bytes_freed (about what the packs shed: those objects and their captures' record lines); not with --dry-run: "
        "pruned (generations, files, objects), packs_rewritten, bytes_freed (the packs' bytes before less after)",
    )
    seconds: float | None = Field(None, description="(not with --dry-run) wall time")


class ReindexResult(Shape):
    """What a reindex rebuilt (`ctxkeep reindex --json`)."""

    chunks: int = Field(description="FTS chunks rebuilt")
    grams_rows: int | None = Field(None, description="chunks with substring terms")
    facets_changed: int | None = Field(None, description="chunks whose filter facets changed")
    analytics: str | None = Field(None, description="what the DuckDB rebuild did")
    from_vault: dict[str, Any] | None = Field(
        None,
        description="files the agents deleted, derived again from the vault first (missing or an older "
        "parser's): files and diff, as `reparse --json`",
    )
    seconds: float | None = Field(None, description="wall time")


class BackfillResult(Shape):
    """The files a backfill reads again (`ctxkeep backfill --json`)."""

    dry_run: bool = Field(description="true for --dry-run")
    files: list[str] = Field(description="the files selected (paths)")
    problems: list[str] = Field(description=PROBLEMS)
    bytes: int = Field(description="their size in bytes")
    ingest: dict[str, Any] | None = Field(
        None, description="(not with --dry-run) the ingest summary, as `ingest --json`"
    )
    from_vault: list[str] | None = Field(
        None, description="the files gone from disk that the vault holds: derived from it (paths)"
    )
    reparse: dict[str, Any] | None = Field(
        None,
        description="(when from_vault is not empty, not with --dry-run) files and diff, as `reparse --json`",
    )


class RetentionRequest(Request):
    """``ctxkeep retention``: the thresholds default to config.toml's ``[retention]``."""

    dry_run: bool = Field(False, description="only say what would be archived or removed")
    archive_after_days: int | None = Field(
        None,
        ge=0,
        description="move consumed/archived entries older than this out of the store to Parquet (default: config; unset: never)",
    )
    delete_archives_after_days: int | None = Field(
        None, ge=0, description="remove archives and compress backups older than this (default: config, 30)"
    )
    keep_generations: int | None = Field(
        None,
        ge=1,
        description="keep each vault file's newest N generations (default: config [vault], keep all)",
    )
    generation_max_age_days: int | None = Field(
        None,
        ge=1,
        description="prune vault generations superseded more than N days ago (default: config [vault], never)",
    )
    prefect: bool | None = Prefect


def retention(home: Path, req: RetentionRequest, *, notify: Notify = None) -> RetentionResult:
    """``maintenance.retention.run_retention`` (in-process with a dry run or a
    threshold given: the flow takes config's), or its flow."""
    from ctxkeep.maintenance.retention import run_retention

    days = {
        k: v
        for k, v in (
            ("archive_after_days", req.archive_after_days),
            ("delete_archives_after_days", req.delete_archives_after_days),
            ("keep_generations", req.keep_generations),
            ("generation_max_age_days", req.generation_max_age_days),
        )
        if v is not None
    }
    if req.dry_run or days or not _as_flow(home, req.prefect):
        rep = run_retention(home, dry_run=req.dry_run, **days)  # type: ignore[arg-type]
    else:
        rep = _run_flow(home, "retention", notify)
    return RetentionResult(**rep)


class ReindexRequest(Request):
    """``ctxkeep reindex``."""

    analytics: bool = Field(True, description="also rebuild DuckDB (false: only the FTS indexes)")
    prefect: bool | None = Prefect


def reindex(home: Path, req: ReindexRequest, *, notify: Notify = None) -> ReindexResult:
    """``maintenance.reindex.run_reindex``, or its flow."""
    if _as_flow(home, req.prefect):
        return ReindexResult(**_run_flow(home, "reindex", notify, analytics=req.analytics))
    from ctxkeep.maintenance.reindex import run_reindex

    return ReindexResult(**run_reindex(home, analytics=req.analytics))


class BackfillRequest(Request):
    """``ctxkeep backfill``: the files of ``paths`` (or every agent's), those with
    records in ``since``…``until`` (record times read from the file; agent databases
    always), re-read from scratch."""

    paths: list[UserPath] = Field(default_factory=list, description="re-read these files or directories")
    since: When = None
    until: When = None
    agents: Names = None
    dry_run: bool = Field(False, description="only list the files that would be read")
    prefect: bool | None = Prefect


def backfill(
    home: Path,
    req: BackfillRequest,
    *,
    notify: Notify = None,
    on_total: Callable[[int], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> BackfillResult:
    """``maintenance.backfill.run_backfill`` (the home created if needed), or its flow;
    in-process, ``on_total`` gets the bytes to read and ``on_bytes`` each part read."""
    from ctxkeep.config import ensure_home
    from ctxkeep.maintenance import backfill as engine

    ensure_home(home)
    sel: dict[str, Any] = {
        "paths": req.paths or None,
        "since": req.since,
        "until": req.until,
        "agents": req.agents or None,
    }
    if not req.dry_run and _as_flow(home, req.prefect):
        params = {**sel, "paths": [str(p) for p in req.paths] or None}
        return BackfillResult(**_run_flow(home, "backfill", notify, **params))
    if req.dry_run:
        return BackfillResult(**engine.run_backfill(home, dry_run=True, **sel))
    from ctxkeep.pipeline import engine as pipeline

    if on_total:
        files, _ = engine.select_backfill(home, **sel)
        on_total(engine.total_bytes(files))
    pipeline.hooks.on_bytes = on_bytes
    try:
        return BackfillResult(**engine.run_backfill(home, **sel))
    finally:
        pipeline.hooks.on_bytes = None


def vaulted_gone(home: Path, paths: list[Path]) -> list[str]:
    """The files under ``paths`` that are gone from disk but held by the vault
    (``maintenance.backfill.vaulted_gone``): a backfill derives them from it, so
    their paths need not exist."""
    from ctxkeep.maintenance.backfill import vaulted_gone as gone

    return gone(home, paths=paths)


def is_loopback(host: str) -> bool:
    """True for a loopback interface: ``localhost`` or a literal loopback address
    (``127.0.0.0/8``, ``::1``). Any other name counts as remote (it is not resolved:
    no lookup leaves the machine)."""
    import ipaddress

    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def port_free(host: str, port: int) -> bool:
    """True when a server could listen on ``host:port`` now: a test bind with
    ``SO_REUSEADDR`` (as uvicorn binds, so a closed connection's TIME_WAIT does not
    count as taken); False when something listens there (EADDRINUSE) or the address
    cannot be bound here. ``port`` 0 is never asked."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    fam, _, _, _, addr = infos[0]
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError:
            return False
    return True


def free_port(host: str) -> int:
    """A TCP port free on ``host`` right now (the kernel's pick). Raises OSError when
    ``host`` cannot be bound."""
    import socket

    fam, _, _, _, addr = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.bind(addr)
        return int(s.getsockname()[1])


class ServeRequest(Request):
    """``ctxkeep serve``: the schedules, the Prefect server's interface and team mode."""

    port: int = Field(4200, ge=1, le=65535, description="port of the Prefect server ctxkeep starts")
    host: str = Field("127.0.0.1", description="its interface: loopback unless allow_remote")
    allow_remote: bool = Field(False, description="allow a host that is not loopback (unauthenticated API)")
    ingest_minutes: int = Field(15, ge=1, description="ingest every N minutes")
    compress_minutes: int = Field(60, ge=1, description="compress every N minutes")
    retention_hours: int = Field(24, ge=1, description="retention every N hours")
    work_pool: str | None = Field(None, description="team mode: this process work pool (docs/team.md)")
    lake: str | None = Field(None, description="also export the store to this Parquet lake on a schedule")
    export_minutes: int = Field(60, ge=1, description="with lake: export every N minutes")
    deploy_only: bool = Field(False, description="with work_pool: register the deployments and exit")
    dry_run: bool = Field(False, description="list the deployments and their next runs; start nothing")

    @model_validator(mode="after")
    def _safe(self) -> ServeRequest:
        if not self.allow_remote and not is_loopback(self.host):
            raise UsageError(
                f"--host {self.host} is not a loopback address: the Prefect API would be reachable from "
                "the network, unauthenticated",
                where="serve",
                hint="keep the default 127.0.0.1, or pass --allow-remote if that is what you want",
            )
        return self

    def every(self, home: Path | None = None) -> str:
        """The schedules in words, one phrase per deployment ``serve`` registers
        (``ingest every 15 min, …, backup every 24 h``; with ``home``'s ``[purge]``
        rules, ``purge policies every N h``: newuser19 F9, the line left both out).
        Raises CtxkeepError for a config.toml that does not load."""
        s = f"ingest every {self.ingest_minutes} min, compress every {self.compress_minutes} min, "
        s += f"retention every {self.retention_hours} h, backup every 24 h"  # flows.serve.schedules
        if home is not None:
            from ctxkeep.config import load_config
            from ctxkeep.maintenance.purge_policy import has_rules

            pc = load_config(Path(home)).purge
            if has_rules(pc):
                s += f", purge policies every {pc.every_hours} h"
        return s + (f", export to {self.lake} every {self.export_minutes} min" if self.lake else "")


class ServeDeployment(Shape):
    """One deployment ``serve`` would register."""

    deployment: str = Field(description="flow/deployment, as Prefect names it (ingest/ctxkeep-ingest)")
    flow: str = Field(description="the flow (ingest, compress, retention, backup, purge-policy, export)")
    every_seconds: int = Field(description="its interval in seconds")
    every: str = Field(description="the interval in words (15 min, 24 h)")
    next_runs: list[str] = Field(
        description="its first three runs (ISO-8601 UTC) for a serve started now: the first at the start"
    )
    parameters: dict[str, Any] = Field(description="the flow's parameters (home, dest …)")


class ServePlan(Shape):
    """What `ctxkeep serve` would run (`ctxkeep serve --dry-run --json`), read without
    Prefect and without starting anything."""

    home: str = Field(description="the store")
    api: str = Field(description="the Prefect API it would use (PREFECT_API_URL) or start (--host, --port)")
    starts_server: bool = Field(description="true: serve would start that server (no PREFECT_API_URL)")
    deployments: list[ServeDeployment] = Field(description="one per deployment, in serve's order")


def _schedules(h: Path, req: ServeRequest) -> list:
    """``flows.serve.Schedule``s of ``req`` (``--lake``: the export too); not the
    purge policies (``flows.serve.policy_schedules``). No Prefect is imported."""
    from ctxkeep.flows import serve as serve_mod

    scheds = serve_mod.schedules(req.ingest_minutes, req.compress_minutes, req.retention_hours)
    if req.lake:
        scheds.append(serve_mod.export_schedule(req.lake, req.export_minutes))
    return scheds


def _every(seconds: int) -> str:
    """``15 min``, ``24 h``, ``90 min`` (whole hours as hours)."""
    return f"{seconds // 3600} h" if seconds % 3600 == 0 else f"{seconds // 60} min"


def serve_plan(home: Path, req: ServeRequest) -> ServePlan:
    """The deployments ``serve`` would register for ``home`` (``req``'s schedules,
    ``config.toml``'s purge policies), each with its interval and next three run times
    (``flows.serve.next_runs``), without importing Prefect or starting a server
    (newuser19 F8: the only way to see the schedules was to start Prefect, 100 s under
    load). Writes nothing. Raises ConfigError for a config.toml that does not load."""
    import datetime as dt

    from ctxkeep.flows import serve as serve_mod

    h = Path(home)
    scheds = _schedules(h, req) + serve_mod.policy_schedules(h)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    machine = None
    if req.work_pool:
        from ctxkeep.sinks.machine import machine_name

        machine = machine_name(h)
    deps = []
    for s in scheds:
        flow = s.name.removeprefix("ctxkeep-")
        name = f"{flow}-{machine}" if machine else s.name  # (flows.team.deployment_name)
        secs = int(s.interval.total_seconds())
        deps.append(
            ServeDeployment(
                deployment=f"{flow}/{name}",
                flow=flow,
                every_seconds=secs,
                every=_every(secs),
                next_runs=[t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in serve_mod.next_runs(s, now)],
                parameters={"home": str(h), **s.parameters},
            )
        )
    given = os.environ.get("PREFECT_API_URL")
    api = given or f"http://{req.host}:{req.port}/api"
    return ServePlan(home=str(h), api=api, starts_server=not given, deployments=deps)


def serve(
    home: Path,
    req: ServeRequest,
    *,
    on_ready: Callable[[str, list[str] | None], None],
    on_start: Callable[[str], None] | None = None,
) -> None:
    """Run the schedules until interrupted (``flows.serve.serve``; with ``work_pool``
    ``flows.team.work``). Everything that can fail is checked before a server starts:
    the home, ``deploy_only`` without the team server (UsageError), a lake this machine
    cannot write, a bad machine name. ``on_start(what)`` once those checks pass, before
    Prefect is imported and its server started (``what``: ``starting Prefect's server on
    HOST:PORT`` or ``connecting to the Prefect server at URL``; serve was silent for
    100 s under load: newuser19 F8); ``on_ready(api_url, deployments or None)`` once
    the schedules run."""
    from ctxkeep.config import ensure_home

    h = ensure_home(home)
    if req.deploy_only and not (req.work_pool and os.environ.get("PREFECT_API_URL")):
        raise UsageError("--deploy-only needs --work-pool and PREFECT_API_URL (the team server)")
    if req.lake:
        from ctxkeep.sinks import lake as lakes

        lakes.check_writable(lakes.open_lake(req.lake))
    if req.work_pool:
        from ctxkeep.sinks.machine import machine_name

        machine_name(h)
    if on_start is not None:
        api = os.environ.get("PREFECT_API_URL")
        on_start(
            f"connecting to the Prefect server at {api}"
            if api
            else f"starting Prefect's server on {req.host}:{req.port}"
        )
    from ctxkeep.flows import serve as serve_mod

    scheds = _schedules(h, req)
    run = None
    if req.work_pool:
        from ctxkeep.flows import team

        pool = req.work_pool

        def run(api: str) -> None:
            team.work(h, pool, scheds, deploy_only=req.deploy_only, on_ready=lambda n: on_ready(api, n))

    serve_mod.serve(
        h, host=req.host, port=req.port, on_ready=lambda api: on_ready(api, None), scheds=scheds, run=run
    )

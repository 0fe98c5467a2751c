"""Maintenance commands: purge, retention, reindex, backfill, serve.

``purge`` runs the purge core in-process (the same code as MCP ``ctx_purge``; no
Prefect: it must answer at once and ask for confirmation). ``retention``, ``reindex``
and ``backfill`` run like ``ingest`` does: as their Prefect flow when a Prefect server
is there to record it (``PREFECT_API_URL``, a running ``ctxkeep serve``) or with
``--prefect``, in-process otherwise (``flows.prefect_env.run_as_flow``); ``--dry-run``
never imports Prefect. ``serve`` runs the schedules.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from ctxkeep import config as cfgmod
from ctxkeep.cli import (
    HomeOpt,
    JsonOpt,
    _count,
    _fail,
    _home,
    _print_json,
    _size,
    app,
    config_warnings,
    err,
    out,
    table,
    warn,
)
from ctxkeep.cli.options import PrefectOpt, agent_option, require_paths, since_option, until_option
from ctxkeep.errors import CtxkeepError, UsageError

_COUNT_LABELS = [
    ("entries", "entries"),
    ("sessions", "sessions"),
    ("contents", "distinct texts"),
    ("chunks", "FTS chunks"),
    ("usage", "usage rows"),
    ("quarantine", "quarantined lines"),
    ("source_files", "source files"),
    ("token_estimate", "tokens (estimated)"),
    ("archived", "archived rows (Parquet)"),
]


def _counts_table(title: str, removed: dict):
    t = table(title=title)
    t.add_column("category")
    t.add_column("count", justify="right")
    for key, label in _COUNT_LABELS:
        if key in removed:
            t.add_row(label, f"{removed[key]:,}")
    if "text_bytes" in removed:
        t.add_row("text", _size(removed["text_bytes"]))
    return t


@app.command()
def purge(
    session: str | None = typer.Option(
        None,
        "--session",
        help="Purge this session (and its sub-agents): its id or a unique prefix, as hits and `ctxkeep sessions` show it.",
    ),
    project: Path | None = typer.Option(
        None, "--project", help="Purge this project dir and everything below it (symlinks resolved)."
    ),
    all_: bool = typer.Option(
        False, "--all", help="Wipe the whole store (database files, -wal/-shm, DuckDB, archives)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be removed."),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Confirm without asking (required when not interactive)."
    ),
    reingest: bool = typer.Option(
        False, "--reingest", help="No tombstone: the next ingest may bring the data back."
    ),
    policy: bool = typer.Option(
        False, "--policy", help="Apply the [purge] rules of config.toml (what `serve` runs on schedule)."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Delete a session's or a project's data from the store (never the agents' files)."""
    from ctxkeep.maintenance.purge_named import purge_named, resolve_named
    from ctxkeep.maintenance.purge_request import PurgeRequest, parse_purge_request

    chosen = [n for n, v in (("--session", session), ("--project", project), ("--all", all_)) if v]
    if policy:
        if chosen or reingest:
            _fail(UsageError("--policy takes no --session, --project, --all or --reingest"), 2)
        return _purge_policy(_home(home), dry_run, yes, as_json)
    if len(chosen) != 1:
        _fail(
            UsageError(
                "purge needs exactly one of --session ID, --project DIR or --all"
                + (f" (got {', '.join(chosen)})" if chosen else ""),
                hint="preview with --dry-run first",
            ),
            2,
        )
    if all_ and reingest:
        _fail(UsageError("--reingest does not apply to --all (a wiped store keeps no tombstones)"), 2)
    h = _home(home)
    try:
        if all_:
            req = PurgeRequest("all")
        else:
            # the CLI's confirmation is --yes or the prompt below; the contract's confirm
            # is satisfied here so that both paths share one validation
            req = parse_purge_request(
                session_id=session,
                scope="session" if session else "project",
                project_dir=str(project) if project else None,
                confirm=True,
                cwd=os.getcwd(),
            )
        # the session as hits show it, the project through symlinks; nothing matched:
        # "no such session" (exit 1), no tombstone
        resolved, preview = resolve_named(h, req)
        req = resolved[0]
    except CtxkeepError as e:  # 2: wrong usage (an ambiguous prefix); 1: no such session
        _fail(e)
    if dry_run:
        if as_json:
            _print_json(preview)
        else:
            _print_preview(preview)
        return
    if not yes:
        if not _interactive():
            _fail(
                UsageError(
                    f"refusing to purge {req.describe()} without --yes in a non-interactive run",
                    where=str(h),
                    hint="preview with --dry-run, then pass --yes",
                )
            )
        _print_preview(preview)
        if not typer.confirm(
            f"Purge {preview.get('resolved', req.describe())}? This cannot be undone", default=False
        ):
            err.print("purge cancelled; nothing was changed")
            raise typer.Exit(1)
    try:
        with err.status(f"purging {req.describe()}…"):
            rep = purge_named(h, req, reingest=reingest, timeout=-1, resolved=resolved)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(rep)
        return
    if req.scope == "all":
        out.print(
            f"wiped the store at {h}: removed {', '.join(rep['files_removed']) or 'nothing (already empty)'}"
            f" ({_size(rep['bytes_removed'])})",
            highlight=False,
        )
        _print_backups(rep)
        return
    r = rep["removed"]
    out.print(
        f"purged {rep['resolved']}: {_count(r['entries'], 'entry', 'entries')} of "
        f"{_count(r['sessions'], 'session')}, "
        f"{r['contents']:,} texts, {r['usage']:,} usage rows, {r['quarantine']:,} quarantined lines, "
        f"{r.get('archived', 0):,} archived rows; "
        f"tombstone {rep['tombstone']}",
        highlight=False,
    )
    if rep.get("analytics"):
        out.print("  " + rep["analytics"], highlight=False)
    _print_backups(rep)


def _print_backups(rep: dict) -> None:
    """The store backups that still hold a purge's data (``purge_named._with_backups``)."""
    held = rep.get("backups") or []
    if not held:
        return
    err.print(
        f"warning: {_count(len(held), 'store backup')} still {'holds' if len(held) == 1 else 'hold'} this data (a purge never changes "
        "a backup; `ctxkeep restore` of one brings the data back):",
        highlight=False,
    )
    for b in held:
        n = "unreadable: may hold it" if b["entries"] is None else _count(b["entries"], "entry", "entries")
        err.print(f"  {b['path']} (taken {b['taken']}, {n})", highlight=False)
    err.print(
        "  delete them to remove the data everywhere: rm " + " ".join(b["path"] for b in held),
        highlight=False,
        soft_wrap=True,
    )


def _purge_policy(h: Path, dry_run: bool, yes: bool, as_json: bool) -> None:
    """``purge --policy``: what the ``[purge]`` rules would remove now, then (unless
    ``--dry-run``) purge it after the same confirmation as other purges."""
    from ctxkeep.maintenance import purge_policy

    try:
        plan = purge_policy.plan_policy(h)
    except CtxkeepError as e:
        _fail(e)
    rules = plan["rules"] or {}
    if not (rules.get("projects") or rules.get("agents") or rules.get("older_than_days")):
        _fail(
            UsageError(
                "no [purge] rules in config.toml",
                where=str(h / cfgmod.CONFIG_FILE),
                hint="add projects, agents or older_than_days under [purge]",
            ),
            1,
        )
    if dry_run or not plan["scopes"]:
        if as_json:
            _print_json({**purge_policy.public(plan), "dry_run": True})
        else:
            _print_policy(plan, "would remove")
        return
    if not yes:
        if not _interactive():
            _fail(
                UsageError(
                    "refusing to apply the [purge] rules without --yes in a non-interactive run",
                    where=str(h),
                    hint="preview with --policy --dry-run, then pass --yes",
                )
            )
        _print_policy(plan, "would remove")
        if not typer.confirm("Apply the [purge] rules? This cannot be undone", default=False):
            err.print("purge cancelled; nothing was changed")
            raise typer.Exit(1)
    try:
        with err.status("applying the [purge] rules…"):
            rep = purge_policy.run_policy(h)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(rep)
    else:
        _print_policy(rep, "removed")


def _print_policy(p: dict, verb: str) -> None:
    t = table(title=f"[purge] rules: what they {verb}")
    for col in ("rule", "scopes", "entries", "sessions", "usage rows", "text"):
        t.add_column(col, justify="left" if col == "rule" else "right")
    for rule, c in p["per_rule"].items():
        t.add_row(
            rule,
            f"{c['scopes']:,}",
            f"{c['entries']:,}",
            f"{c['sessions']:,}",
            f"{c['usage']:,}",
            _size(c["text_bytes"]),
        )
    out.print(t)
    tot = p["totals"]
    out.print(
        f"{verb}: {_count(tot['entries'], 'entry', 'entries')} of {_count(tot['sessions'], 'session')}, "
        f"{tot['usage']:,} usage rows, {_size(tot['text_bytes'])} of text",
        highlight=False,
    )


def _interactive() -> bool:
    """True when a person can answer a prompt (stdin is a terminal)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _print_preview(p: dict) -> None:
    if p["scope"] == "all":
        out.print(
            f"would wipe the store at {p['home']}: {', '.join(p['files_removed']) or 'no files'} "
            f"({_size(p['bytes_removed'])})",
            highlight=False,
        )
        if p.get("removed"):
            out.print(_counts_table("would remove", p["removed"]))
        _print_backups(p)
        return
    out.print(_counts_table(f"purge {p['resolved']} would remove", p["removed"]))
    for f in p.get("files", [])[:20]:
        out.print(f"  from {f}", highlight=False)
    _print_backups(p)


def _as_flow(h: Path, prefect: bool | None) -> bool:
    """``flows.prefect_env.run_as_flow`` (imports no Prefect)."""
    from ctxkeep.flows.prefect_env import run_as_flow

    return run_as_flow(h, prefect)


def _run_flow(h: Path, name: str, **params) -> dict:
    from ctxkeep.flows.prefect_env import configure_prefect
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.files import STORE_DB

    if (h / STORE_DB).exists():  # a damaged store fails here, before Prefect's server starts
        conn = sqlite_store.connect(h, readonly=True)
        try:
            if name == "reindex":  # it reads every page anyway: check them all first
                from ctxkeep.sinks.sqlite.store_safety import damaged

                rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
                if rows != ["ok"]:
                    raise damaged(h / STORE_DB, "; ".join(rows))
        finally:
            conn.close()

    configure_prefect(h)
    from ctxkeep.flows import maintenance as maintenance_flows

    fl = getattr(maintenance_flows, f"{name}_flow")
    if not os.environ.get("PREFECT_API_URL"):
        err.print(
            f"{name}: starting Prefect's temporary local server for the flow run "
            "(15-50 s; without --prefect it runs in-process)",
            highlight=False,
            style="dim",
        )
    with err.status(f"{name} (Prefect flow)…"):
        return fl(str(h), **params)


@app.command()
def retention(
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be archived or removed."),
    archive_after_days: int | None = typer.Option(
        None, min=0, help="Override config retention.archive_after_days (7)."
    ),
    delete_archives_after_days: int | None = typer.Option(
        None, min=0, help="Override config retention.delete_archives_after_days (30)."
    ),
    prefect: bool | None = PrefectOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Archive old consumed/archived entries to Parquet; drop old archives and backups."""
    from ctxkeep.maintenance import retention as maintenance

    h = _home(home)
    config_warnings(h)
    days = {
        k: v
        for k, v in (
            ("archive_after_days", archive_after_days),
            ("delete_archives_after_days", delete_archives_after_days),
        )
        if v is not None
    }
    try:
        if dry_run or days or not _as_flow(h, prefect):
            with err.status("retention…"):
                rep = maintenance.run_retention(h, dry_run=dry_run, **days)
        else:
            rep = _run_flow(h, "retention")
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(rep)
        return
    verb = "would archive" if dry_run else "archived"
    n = rep["entries_to_archive"] if dry_run else rep["archived"]["entries"]
    out.print(f"{verb} {n:,} entries older than {rep['cutoff'][:10]} (consumed/archived)", highlight=False)
    for r in rep["archive"]:
        out.print(f"  {r['agent']} {r['month']}: {r['entries']:,} entries", highlight=False)
    verb = "would remove" if dry_run else "removed"
    out.print(
        f"{verb} {len(rep['old_archives'])} archive files older than {rep['archive_cutoff'][:10]} "
        f"and {len(rep['old_backups'])} compress backups older than {rep['backup_cutoff'][:10]} "
        f"({_size(rep['old_archives_bytes'] + rep['old_backups_bytes'])})",
        highlight=False,
    )


@app.command()
def reindex(
    no_analytics: bool = typer.Option(False, "--no-analytics", help="Rebuild only the FTS indexes."),
    prefect: bool | None = PrefectOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Rebuild the FTS indexes and DuckDB from the SQLite entries.

    The entries themselves are derived again from the vault by `ctxkeep reparse`
    (reindex works on the stored rows)."""
    from ctxkeep.maintenance.reindex import run_reindex

    h = _home(home)
    try:
        if not _as_flow(h, prefect):
            with err.status("reindex…"):
                rep = run_reindex(h, analytics=not no_analytics)
        else:
            rep = _run_flow(h, "reindex", analytics=not no_analytics)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(rep)
        return
    out.print(
        f"reindexed {rep['chunks']:,} chunks ({rep['grams_rows']:,} with substring terms) in "
        f"{rep['seconds']:.1f} s; {rep['analytics']}",
        highlight=False,
    )


@app.command()
def backfill(
    path: list[Path] = typer.Option(
        None, "--path", "-p", help="Re-read this file or directory (repeatable)."
    ),
    since: str | None = since_option("Files with records from this time on, inclusive"),
    until: str | None = until_option(
        "Files with records up to this time, inclusive (a date: that whole day)"
    ),
    agent: list[str] = agent_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list the files that would be read."),
    prefect: bool | None = PrefectOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Re-ingest paths or a date range from scratch, ignoring watermarks (no duplicates).

    A file is in the date range unless its last record is before --since or its first
    record is after --until (record times read from the file, not its mtime; agent
    databases are always read). A file the agent deleted is derived from the vault
    (as `ctxkeep reparse` does; its date is its last mtime)."""
    from ctxkeep.maintenance.backfill import vaulted_gone

    h = _home(home)
    try:
        if not (path and vaulted_gone(h, paths=path)):
            require_paths(path or [])
        cfgmod.ensure_home(h)
        if dry_run or not _as_flow(h, prefect):
            rep = _backfill_with_progress(h, path, since, until, agent, dry_run, not as_json)
        else:
            rep = _run_flow(
                h,
                "backfill",
                paths=[str(p) for p in path or []] or None,
                since=since,
                until=until,
                agents=agent or None,
            )
    except CtxkeepError as e:
        _fail(e)
    for prob in rep.get("problems", []):
        warn(prob)
    if as_json:
        _print_json(rep)
        return
    gone = rep.get("from_vault") or []
    if gone:
        out.print(
            f"{'would derive' if dry_run else 'derived'} {_count(len(gone), 'file')} gone from disk "
            "from the vault",
            highlight=False,
        )
        for f in gone[:50]:
            out.print(f"  {f}", highlight=False)
    if dry_run or "ingest" not in rep:
        if dry_run or not gone:
            out.print(
                f"{'would re-read' if dry_run else 'nothing to re-read:'} {len(rep['files']):,} files "
                f"({_size(rep['bytes'])})",
                highlight=False,
            )
            for f in rep["files"][:50]:
                out.print(f"  {f}", highlight=False)
        return
    s = rep["ingest"]
    out.print(
        f"backfilled {_count(s['files_read'], 'file')} ({_size(s['bytes'])}, {_count(s['lines'], 'line')}): "
        f"{_count(s['entries_new'], 'new entry', 'new entries')}, "
        f"{_count(s['quarantined'], 'quarantined line')}, "
        f"{s['seconds']:.1f} s",
        highlight=False,
    )


def _backfill_with_progress(h, path, since, until, agent, dry_run, show) -> dict:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from ctxkeep.maintenance import backfill as maintenance
    from ctxkeep.pipeline import engine as pipeline

    if dry_run:
        return maintenance.run_backfill(
            h, paths=path or None, since=since, until=until, agents=agent or None, dry_run=True
        )
    prog = Progress(
        TextColumn("backfill"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err.get(),
        disable=not show,
        transient=True,
    )
    files, _ = maintenance.select_backfill(
        h, paths=path or None, since=since, until=until, agents=agent or None
    )
    total = maintenance.total_bytes(files)
    task_id = prog.add_task("backfill", total=total or 1)
    pipeline.hooks.on_bytes = lambda n: prog.advance(task_id, n)
    try:
        with prog:
            return maintenance.run_backfill(
                h, paths=path or None, since=since, until=until, agents=agent or None
            )
    finally:
        pipeline.hooks.on_bytes = None


@app.command()
def serve(
    port: int = typer.Option(
        4200, min=1, max=65535, metavar="PORT", help="Port of the Prefect server ctxkeep starts."
    ),
    host: str = typer.Option(
        "127.0.0.1",
        metavar="HOST",
        help="Interface of that server: loopback (127.0.0.1, ::1, localhost) unless --allow-remote.",
    ),
    allow_remote: bool = typer.Option(
        False,
        "--allow-remote",
        help="Allow a --host that is not loopback. This exposes the Prefect API to the network, "
        "unauthenticated: anyone who reaches HOST:PORT can read flow runs and their parameters "
        "(store paths), start, cancel and delete deployments, and run the ingest, compress "
        "and retention flows on this store.",
    ),
    ingest_minutes: int = typer.Option(15, min=1, help="Ingest every N minutes."),
    compress_minutes: int = typer.Option(60, min=1, help="Compress every N minutes."),
    retention_hours: int = typer.Option(24, min=1, help="Retention every N hours."),
    work_pool: str | None = typer.Option(
        None,
        "--work-pool",
        help="Team mode: register this machine's deployments (ingest-<machine>, ...) in this "
        "process work pool of the server at PREFECT_API_URL and run its worker (docs/team.md).",
    ),
    lake: str | None = typer.Option(
        None, "--lake", metavar="DEST", help="Also export the store to this Parquet lake on a schedule."
    ),
    export_minutes: int = typer.Option(60, min=1, help="With --lake: export every N minutes."),
    deploy_only: bool = typer.Option(
        False,
        "--deploy-only",
        help="With --work-pool: register the deployments and exit (run `prefect worker`).",
    ),
    home: Path | None = HomeOpt,
):
    """Run the schedules (ingest, compress, retention) with a Prefect server on loopback.

    Uses PREFECT_API_URL when set; otherwise starts `prefect server start` and stops it on exit.
    """
    if not allow_remote and not is_loopback(host):
        _fail(
            UsageError(
                f"--host {host} is not a loopback address: the Prefect API would be reachable from the "
                "network, unauthenticated",
                where="serve",
                hint="keep the default 127.0.0.1, or pass --allow-remote if that is what you want",
            )
        )
    from ctxkeep.flows import serve as serve_mod

    try:
        h = cfgmod.ensure_home(_home(home))
    except CtxkeepError as e:
        _fail(e)
    if deploy_only and not (work_pool and os.environ.get("PREFECT_API_URL")):
        _fail(UsageError("--deploy-only needs --work-pool and PREFECT_API_URL (the team server)"), 2)
    try:  # before any server starts: a lake this machine cannot write, a bad machine name
        if lake:
            from ctxkeep.sinks import lake as lakes

            lakes.check_writable(lakes.open_lake(lake))
        if work_pool:
            from ctxkeep.sinks.machine import machine_name

            machine_name(h)
    except CtxkeepError as e:
        _fail(e)
    scheds = serve_mod.schedules(ingest_minutes, compress_minutes, retention_hours)
    every = f"ingest every {ingest_minutes} min, compress every {compress_minutes} min, "
    every += f"retention every {retention_hours} h"
    if lake:
        from ctxkeep.flows.team import export_schedule

        scheds.append(export_schedule(lake, export_minutes))
        every += f", export to {lake} every {export_minutes} min"

    def ready(api: str, names: list[str] | None = None) -> None:
        where = f"deployments {', '.join(names)} in work pool {work_pool}" if names else every
        err.print(
            f"ctxkeep serve: store {h}, Prefect API {api}; {where}."
            + ("" if deploy_only else " Ctrl-C to stop."),
            highlight=False,
        )

    run = None
    if work_pool:
        from ctxkeep.flows import team

        def run(api: str) -> None:
            team.work(h, work_pool, scheds, deploy_only=deploy_only, on_ready=lambda n: ready(api, n))

    try:
        serve_mod.serve(h, host=host, port=port, on_ready=ready, scheds=scheds, run=run)
    except CtxkeepError as e:
        _fail(e)


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

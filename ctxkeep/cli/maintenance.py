"""Maintenance commands: purge, retention, reindex, backfill, serve.

``purge`` runs the purge core in-process (the same code as MCP ``ctx_purge``; no
Prefect: it must answer at once and ask for confirmation). ``retention``, ``reindex``
and ``backfill`` run like ``ingest`` does: as their Prefect flow when a Prefect server
is there to record it (``PREFECT_API_URL``, a running ``ctxkeep serve``) or with
``--prefect``, in-process otherwise (``flows.prefect_env.run_as_flow``); ``--dry-run``
never imports Prefect. ``serve`` runs the schedules.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

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
    failing,
    fold,
    line_width,
    out,
    say_folded,
    short_path,
    table,
    tilde,
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
    ("source_files", "agent files it came from (left on disk)"),
    ("token_estimate", "tokens (estimated)"),
    ("archived", "archived rows (Parquet)"),
    ("vault_files", "vault files (redacted copies)"),
    ("vault_shared", "shared vault files rewritten"),
]


def _counts_table(title: str, removed: dict):
    t = table(title=title)
    t.add_column("category")
    t.add_column("count", justify="right")
    for key, label in _COUNT_LABELS:
        if key not in removed:
            continue
        n = removed[key]
        if key == "vault_shared" and not n:  # (a Kiro IDE folder's index, kept for its other sessions)
            continue
        if key == "source_files" and "source_files_gone" in removed:  # a preview: on disk or not
            n -= removed["source_files_gone"]
            if removed["source_files_gone"]:
                t.add_row("agent files it came from (deleted already)", f"{removed['source_files_gone']:,}")
        t.add_row(label, f"{n:,}")
    if "text_bytes" in removed:
        t.add_row("text", _size(removed["text_bytes"]))
    if "vault_bytes" in removed:
        t.add_row("vault bytes (stored, compressed)", _size(removed["vault_bytes"]))
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
        False,
        "--policy",
        help="Apply the purge rules of config.toml (its purge table; what `serve` runs on schedule).",
    ),
    compact: bool = typer.Option(
        False,
        "--compact",
        help="Then give the store's free pages back to the disk (a purge leaves them in store.db; "
        "a backup copies them; the copy needs the used pages free beside it). Alone: only that. "
        "With --policy: after the rules' purge.",
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Delete a session's or a project's data from the store (never the agents' files)."""
    from ctxkeep.service.purge import PurgeTarget, apply_purge, plan_purge

    if compact and not (session or project or all_ or policy or reingest):
        return _compact(_home(home), dry_run, as_json)
    try:
        req = PurgeTarget.parse(
            session=session,
            project=str(project) if project else None,
            all=all_,
            reingest=reingest,
            policy=policy,
        )
        if policy:
            return _purge_policy(_home(home), dry_run, yes, as_json, compact)
        h = _home(home)
        # the session as hits show it, the project through symlinks; nothing matched:
        # "no such session" (exit 1), no tombstone
        plan = plan_purge(h, req, cwd=Path.cwd())
    except CtxkeepError as e:  # 2: wrong usage (an ambiguous prefix); 1: no such session
        _fail(e)
    preview = plan.preview
    if dry_run:
        then = _then_compact(h) if compact and not all_ else None
        if as_json:
            _print_json({**preview, "compacted": then} if then else preview)
        else:
            _print_preview(preview)
            if then:
                say_folded("  then " + _compacted_line(then), indent="    ")
        return
    if not yes:
        if not _interactive():
            _fail(
                UsageError(
                    f"refusing to purge {plan.describe} without --yes in a non-interactive run",
                    where=str(h),
                    hint="preview with --dry-run, then pass --yes",
                )
            )
        _print_preview(preview)
        if not typer.confirm(
            f"Purge {preview.get('resolved', plan.describe)}? This cannot be undone", default=False
        ):
            err.print("purge cancelled; nothing was changed")
            raise typer.Exit(1)
    with failing(), err.status(f"purging {plan.describe}…"):
        result = apply_purge(h, plan, reingest=reingest)
    if compact and not all_:
        with failing(), err.status("compacting store.db…"):
            result.compacted = _ask_compact(h, False)
        result.compact_hint = None
    rep = result.as_json()
    if as_json:
        _print_json(rep)
        return
    if all_:
        say_folded(  # folded, ~/ (118 columns at 80: newuser16 F9)
            f"wiped the store at {tilde(h)}: removed {', '.join(rep['files_removed']) or 'nothing (already empty)'}"
            f" ({_size(rep['bytes_removed'])})"
        )
        say_folded("  " + _wipe_after(rep, "did"), indent="    ")
        _print_backups(rep)
        return
    r = rep["removed"]
    say_folded(  # folded at the width (205 columns: newuser16 F13)
        f"purged {tilde(rep['resolved'])}: {_count(r['entries'], 'entry', 'entries')} of "
        f"{_count(r['sessions'], 'session')}, "
        f"{_count(r['contents'], 'text')}, {_count(r['usage'], 'usage row')}, "
        f"{_count(r['quarantine'], 'quarantined line')}, {_count(r.get('archived', 0), 'archived row')}, "
        f"{_count(r.get('vault_files', 0), 'vault file')} ({_size(r.get('vault_bytes', 0))} stored); "
        f"tombstone {rep['tombstone']}"
    )
    if r.get("vault_shared"):  # (a Kiro IDE folder's index: its other sessions' titles stay)
        n = r["vault_shared"]
        say_folded(
            f"  the vault's copy of {_count(n, 'index', 'indexes')} the folder's other sessions share "
            f"(Kiro IDE's sessions.json) rewritten without it; the agent's own file still lists it",
            indent="    ",
        )
    if rep.get("kept"):  # the identifying data it keeps, on purpose (newuser18 F5)
        say_folded("  " + rep["kept"], indent="    ")
    if rep.get("tombstone_note") and rep.get("tombstone") == "added":  # what it blocks (newuser23 F1)
        say_folded("  " + rep["tombstone_note"], indent="    ")
    if rep.get("analytics"):
        out.print("  " + rep["analytics"], highlight=False)
    if rep.get("compacted"):
        say_folded("  " + _compacted_line(rep["compacted"]), indent="    ")
    elif rep.get("compact_hint"):
        say_folded("  " + rep["compact_hint"], indent="    ")
    _print_backups(rep)


def _ask_compact(h: Path, dry_run: bool) -> dict:
    from ctxkeep.service.purge import compact as ask

    return ask(h, dry_run=dry_run)


def _then_compact(h: Path) -> dict | None:
    """A dry run's compaction figures, as of now (before the purge, which frees more
    pages); None without a store (``service.purge.compact_preview``)."""
    from ctxkeep.service.purge import compact_preview

    with failing():
        return compact_preview(h)


def _compacted_line(c: dict) -> str:
    """What a compaction gave back (or would), in words."""
    if c["dry_run"]:
        room = f"; the copy needs {_size(c['needs'])} free beside it, {_size(c['disk_free'])} free" + (
            ": not enough" if c["disk_free"] < c["needs"] else ""
        )
        return (
            f"would compact store.db: {_size(c['before'])} -> at most {_size(c['after'])} "
            f"({c['free_pages']:,} of {c['pages']:,} pages free now{room})"
        )
    more = c["reclaimed"] - c.get("free_bytes", c["reclaimed"])
    why = (  # the free pages and what packing the partly empty pages gave (newuser23 F11)
        f": {_size(c['free_bytes'])} of free pages, {_size(more)} from packing partly empty pages"
        if more > 0
        else ""
    )
    return f"compacted store.db: {_size(c['before'])} -> {_size(c['after'])} ({_size(c['reclaimed'])} given back{why})"


def _compact(h: Path, dry_run: bool, as_json: bool, policy: dict | None = None) -> None:
    """``purge --compact`` alone: the store written anew without its free pages
    (``service.purge.compact``), or with ``--dry-run`` what that would give back;
    ``policy``: the report of ``--policy`` rules that removed nothing (printed with it)."""
    with failing(), err.status("compacting store.db…"):
        c = _ask_compact(h, dry_run)
    if as_json:
        _print_json({**(policy or {}), "home": str(h), "compacted": c})
        return
    if policy is not None:
        out.print("the [purge] rules remove nothing now", highlight=False)
    say_folded(_compacted_line(c))


def _print_backups(rep: dict) -> None:
    """The store backups and the exports that still hold a purge's data
    (``purge_named._with_backups``, ``_with_exports``)."""
    _print_exports(rep)
    held = rep.get("backups") or []
    if not held:
        return
    first = (
        f"warning: {_count(len(held), 'store backup')} still {'holds' if len(held) == 1 else 'hold'} this data "
        "(a purge never changes a backup; `ctxkeep restore` of one brings the data back):"
    )
    for part in fold(first):  # folded, ~/ paths (~130 columns: newuser16 F13)
        err.print(part, highlight=False, markup=False)
    for b in held:
        n = "unreadable: may hold it" if b["entries"] is None else _count(b["entries"], "entry", "entries")
        for part in fold(f"  {tilde(b['path'])} (taken {b['taken']}, {n})", indent="    "):
            err.print(part, highlight=False, markup=False)
    for part in fold(
        "  delete them to remove the data everywhere: rm " + " ".join(tilde(b["path"]) for b in held),
        indent="    ",
    ):
        err.print(part, highlight=False, markup=False)


def _print_exports(rep: dict) -> None:
    """The exports written from the store that still hold a purge's data, each with the
    command that refreshes it (newuser18 F15)."""
    held = rep.get("exports") or []
    if not held:
        return
    first = (
        f"warning: {_count(len(held), 'export')} written from this store still "
        f"{'holds' if len(held) == 1 else 'hold'} this data (a purge never changes an export): "
        "refresh each:"
    )
    for part in fold(first):
        err.print(part, highlight=False, markup=False)
    for x in held:
        dest = x["dest"] if "://" in x["dest"] else tilde(x["dest"])
        what = _count(x["holds"], x["unit"])
        for part in fold(f"  {dest} ({x['kind']}, {what}): {x['refresh']}", indent="    "):
            err.print(part, highlight=False, markup=False)


def _purge_policy(h: Path, dry_run: bool, yes: bool, as_json: bool, compact: bool = False) -> None:
    """``purge --policy``: what the ``[purge]`` rules would remove now, then (unless
    ``--dry-run``) purge it after the same confirmation as other purges; ``compact``:
    then compact the store (``--compact``; also when the rules remove nothing), which
    ``--dry-run`` and ``--json`` say (``compacted``)."""
    config_warnings(h)  # a typo in [purge] named before "no [purge] rules" (newuser20 F6)
    from ctxkeep.service import purge as ask

    with failing():
        plan = ask.plan_policy(h)
    if dry_run or (not plan["scopes"] and not compact):
        rep = ask.policy_json(plan)
        then = _then_compact(h) if compact else None
        if then:
            rep["compacted"] = then
        if as_json:
            _print_json(rep)
        else:
            _print_policy(plan, "would remove")
            if then:
                say_folded("then " + _compacted_line(then), indent="  ")
        return
    if not plan["scopes"]:  # nothing to purge; the compaction asked for still runs
        _compact(h, False, as_json, {**ask.policy_json(plan), "dry_run": False})
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
    with failing(), err.status("applying the [purge] rules…"):
        rep = ask.run_policy(h)
    if compact:
        with failing(), err.status("compacting store.db…"):
            rep["compacted"] = _ask_compact(h, False)
    if as_json:
        _print_json(rep)
    else:
        _print_policy(rep, "removed")
        if compact:
            say_folded(_compacted_line(rep["compacted"]))


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


def _wipe_after(rep: dict, mood: str) -> str:
    """What a ``purge --all`` means for the next ingest (newuser23 F2): it reads the
    agents' files again from the start; the tombstones go into the new store."""
    r = rep.get("reread") or {"files": 0, "bytes": 0}
    n = rep.get("tombstones_kept", 0)
    kept = (
        f"the {_count(n, 'tombstone')} of earlier purges {('is' if n == 1 else 'are') if mood == 'did' else 'will be'} "
        "kept for the "
        "new store, so what they name stays out (`purge --reingest` lifts one)"
        if n
        else "no tombstones to keep"
    )
    # what only this store holds does not come back (newuser24 F10): entries compress or
    # retention cut from their files, and files the agents deleted (the vault's copy)
    # (not "archived": a scoped purge's rows removed from the Parquet archive)
    archived = (rep.get("removed") or {}).get("archived_entries") or 0
    gone = r.get("gone") or 0
    lost = [
        *(
            [f"{_count(archived, 'archived entry', 'archived entries')} (cut from their files)"]
            if archived
            else []
        ),
        *([f"{_count(gone, 'file')} the agents deleted (kept only in the vault)"] if gone else []),
    ]
    loss = (
        f"; {' and '.join(lost)} {'are' if mood == 'would' else 'were'} only in this store and "
        + ("do not come back: `ctxkeep backup` first keeps them" if mood == "would" else "are gone")
        if lost
        else ""
    )
    return (
        f"the next ingest reads the agents' files again from the start ({_count(r['files'], 'file')}, "
        f"{_size(r['bytes'])} on disk now) into a new store; {kept}{loss}"
    )


def _print_preview(p: dict) -> None:
    if p["scope"] == "all":
        say_folded(  # folded, ~/ (118 columns at 80: newuser16 F9)
            f"would wipe the store at {tilde(p['home'])}: {', '.join(p['files_removed']) or 'no files'} "
            f"({_size(p['bytes_removed'])})"
        )
        if p.get("removed"):
            out.print(_counts_table("would remove", p["removed"]))
        say_folded("  " + _wipe_after(p, "would"), indent="    ")
        _print_backups(p)
        return
    out.print(_counts_table(f"purge {p['resolved']} would remove", p["removed"]))
    for f in p.get("files", [])[:20]:
        w = line_width()  # ~/, cut from the left to the width (114 columns: newuser16 F9)
        out.print(
            f"  from {tilde(f) if w is None else short_path(f, max(w - 7, 20))}",
            highlight=False,
            markup=False,
        )
    # what the run leaves behind and blocks from now on (newuser23 F1, F6)
    tomb = p.get("tombstone") or "none"
    say_folded(
        f"tombstone: {tomb}"
        + (f" ({', '.join(p['tombstones'])})" if p.get("tombstones") else "")
        + (f"; {p['tombstone_note']}" if p.get("tombstone_note") else ""),
        indent="  ",
    )
    _print_backups(p)


def _notify(line: str) -> None:
    err.print(line, highlight=False, style="dim")


@app.command()
def retention(
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be archived or removed."),
    archive_after_days: int | None = typer.Option(
        None,
        min=0,
        help="Move consumed/archived entries this many days old out of the store, to Parquet (config retention.archive_after_days; unset: they stay, searchable).",
    ),
    delete_archives_after_days: int | None = typer.Option(
        None, min=0, help="Override config retention.delete_archives_after_days (30)."
    ),
    keep_generations: int | None = typer.Option(
        None, min=1, help="Override config vault.keep_generations (none: keep every generation)."
    ),
    generation_max_age_days: int | None = typer.Option(
        None, min=1, help="Override config vault.generation_max_age_days (none: never by age)."
    ),
    prefect: bool | None = PrefectOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Drop old archives, backups and older vault generations (config.toml's vault table); with --archive-after-days, move old consumed/archived entries to Parquet.

    A vault generation goes only when the kept ones give the same entries (checked by
    a reparse dry run of its file) and it holds no media compress moved out; by
    default every generation is kept."""
    from ctxkeep.service.maintenance import RetentionRequest
    from ctxkeep.service.maintenance import retention as ask

    h = _home(home)
    config_warnings(h)
    with failing():
        req = RetentionRequest.parse(
            dry_run=dry_run,
            archive_after_days=archive_after_days,
            delete_archives_after_days=delete_archives_after_days,
            keep_generations=keep_generations,
            generation_max_age_days=generation_max_age_days,
            prefect=prefect,
        )
        with err.status("retention…"):
            rep = ask(h, req, notify=_notify).as_json()
    if as_json:
        _print_json(rep)
        return
    verb = "would archive" if dry_run else "archived"
    n = rep["entries_to_archive"] if dry_run else rep["archived"]["entries"]
    if rep["cutoff"] is None:
        out.print("entries stay in the store (retention.archive_after_days is not set)", highlight=False)
    else:
        out.print(
            f"{verb} {n:,} entries older than {rep['cutoff'][:10]} (consumed/archived)", highlight=False
        )
    for r in rep["archive"]:
        out.print(f"  {r['agent']} {r['month']}: {r['entries']:,} entries", highlight=False)
    verb = "would remove" if dry_run else "removed"
    say_folded(  # at the width (101 columns: newuser15 F4)
        f"{verb} {_count(len(rep['old_archives']), 'archive file')} older than {rep['archive_cutoff'][:10]} "
        f"and {_count(len(rep['old_backups']), 'compress backup')} older than {rep['backup_cutoff'][:10]} "
        f"({_size(rep['old_archives_bytes'] + rep['old_backups_bytes'])})"
    )
    _print_vault_retention(rep.get("vault") or {}, dry_run)


def _print_vault_retention(v: dict, dry_run: bool) -> None:
    """The vault's lines of ``retention``: the policy, each generation that goes (or
    would), those held back and why, the bytes freed."""
    keep, days = v.get("keep_generations"), v.get("generation_max_age_days")
    if keep is None and days is None:
        # printed as written: Rich read "[vault]" as markup ("no  keep_generations")
        say_folded("vault: every generation kept (no [vault] keep_generations / generation_max_age_days)")
        return
    rule = " or ".join(
        x
        for x in (f"beyond the newest {keep}" if keep else "", f"superseded over {days} days" if days else "")
        if x
    )
    gens, held = v.get("generations") or [], v.get("held") or []
    verb = "would prune" if dry_run else "pruned"
    freed = v.get("bytes_freed", 0)
    say_folded(
        f"vault: {verb} {_count(len(gens), 'generation')} ({rule}), "
        + (f"about {_size(freed)} of packs freed" if dry_run else f"{_size(freed)} of packs freed")
        + (f"; {len(held):,} held back" if held else "")
    )
    for g in gens:
        say_folded(f"  {g['agent']} {tilde(g['path'])} generation {g['gen']}: {g['reason']}", indent="    ")
    for g in held:
        say_folded(
            f"  kept {g['agent']} {tilde(g['path'])} generation {g['gen']}: {g['reason']}", indent="    "
        )


@app.command()
def reindex(
    no_analytics: bool = typer.Option(False, "--no-analytics", help="Rebuild only the FTS indexes."),
    prefect: bool | None = PrefectOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Rebuild the FTS indexes and DuckDB from the SQLite entries.

    Sessions whose files the agent deleted are derived again from the vault first
    when the store lacks them or an older parser made them (`ctxkeep reparse` does it
    for every file)."""
    from ctxkeep.service.maintenance import ReindexRequest
    from ctxkeep.service.maintenance import reindex as ask

    h = _home(home)
    with failing():
        req = ReindexRequest.parse(analytics=not no_analytics, prefect=prefect)
        with err.status("reindex…"):
            rep = ask(h, req, notify=_notify).as_json()
    if as_json:
        _print_json(rep)
        return
    fv = rep.get("from_vault")
    if fv:
        added = sum(e["added"] for e in fv["diff"]["entries"])
        out.print(
            f"derived {fv['files']:,} file(s) the agents deleted from the vault ({added:,} entries added)",
            highlight=False,
        )
    say_folded(  # at the width, after a "; " (the analytics' note may name dropped objects)
        f"reindexed {rep['chunks']:,} chunks ({rep['grams_rows']:,} with substring terms) in "
        f"{rep['seconds']:.1f} s; {rep['analytics']}"
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
    from ctxkeep.service.maintenance import BackfillRequest, vaulted_gone

    h = _home(home)
    with failing():
        if not (path and vaulted_gone(h, path)):
            require_paths(path or [])
        req = BackfillRequest.parse(
            paths=path or [], since=since, until=until, agents=agent or None, dry_run=dry_run, prefect=prefect
        )
        rep = _backfill_with_progress(h, req, show=not as_json)
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
        f"backfilled {_count(s['files_read'], 'file')} ({_size(s['bytes'])}, {_count(s['lines'], 'record')}): "
        f"{_count(s['entries_new'], 'new entry', 'new entries')}, "
        f"{_count(s['quarantined'], 'quarantined line')}, "
        f"{s['seconds']:.1f} s",
        highlight=False,
    )


def _backfill_with_progress(h: Path, req, show: bool) -> dict:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from ctxkeep.service.maintenance import backfill as ask

    if req.dry_run:
        return ask(h, req).as_json()
    prog = Progress(
        TextColumn("backfill"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err.get(),
        # a bar only on a terminal: a transient one left an empty line in a file or pipe
        disable=not show or not err.get().is_terminal,
        transient=True,
    )
    task: list = []

    def start(total: int) -> None:  # once the files are chosen: an error before prints no bar
        prog.start()
        task.append(prog.add_task("backfill", total=total or 1))

    try:
        return ask(
            h,
            req,
            notify=_notify,
            on_total=start,
            on_bytes=lambda n: prog.advance(task[0], n) if task else None,
        ).as_json()
    finally:
        if task:
            prog.stop()


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
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="List each deployment, its schedule and its next run times; start nothing (no Prefect).",
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Run the schedules (ingest, compress, retention, backup; the purge policies of config.toml) with a Prefect server on loopback.

    Uses PREFECT_API_URL when set; otherwise starts `prefect server start` and stops it on exit.
    Prints one line per run as it ends (flow, start, seconds, outcome).
    """
    from ctxkeep.service.maintenance import ServeRequest
    from ctxkeep.service.maintenance import serve as ask

    with failing():
        req = ServeRequest.parse(
            port=port,
            host=host,
            allow_remote=allow_remote,
            ingest_minutes=ingest_minutes,
            compress_minutes=compress_minutes,
            retention_hours=retention_hours,
            work_pool=work_pool,
            lake=lake,
            export_minutes=export_minutes,
            deploy_only=deploy_only,
            dry_run=dry_run,
        )
    if as_json and not dry_run:
        _fail(
            UsageError("--json goes with --dry-run", where="serve", hint="add --dry-run, or drop --json"), 2
        )
    if dry_run:  # without Prefect: the schedules as serve would register them (newuser19 F8)
        from ctxkeep.service.maintenance import serve_plan

        with failing():
            plan = serve_plan(_home(home), req)
        if as_json:
            _print_json(plan.as_json())
            return
        started = " (started by serve)" if plan.starts_server else ""
        say_folded(f"ctxkeep serve would run for store {plan.home}, Prefect API {plan.api}{started}:")
        for d in plan.deployments:
            runs = ", ".join(t[:16].replace("T", " ") for t in d.next_runs)
            say_folded(f"  {d.deployment}: every {d.every}; next {runs} UTC", indent="    ")
        say_folded("(the first runs when serve starts; nothing was started)")
        return

    def ready(api: str, names: list[str] | None = None) -> None:
        where = f"deployments {', '.join(names)} in work pool {work_pool}" if names else req.every(h)
        err.print(
            f"ctxkeep serve: store {h}, Prefect API {api}; {where}."
            + ("" if deploy_only else " Ctrl-C to stop."),
            highlight=False,
        )

    def start(what: str) -> None:  # at once: Prefect's import and server take 20-100 s
        err.print(f"ctxkeep serve: {what} (20-30 s, longer under load)…", highlight=False, style="dim")

    with failing():
        h = _home(home)
        ask(h, req, on_ready=ready, on_start=start)

"""``ctxkeep vault status | verify | restore``: the vault of every byte ingest read
(``maintenance.vault`` over ``sinks.vault``)."""

from __future__ import annotations

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
    failing,
    out,
    say,
    say_folded,
    stopped,
    table,
    tilde,
    warn,
)
from ctxkeep.cli.options import _when_callback
from ctxkeep.errors import CtxkeepError, UsageError

vault_app = typer.Typer(
    no_args_is_help=True,
    help="The vault: every byte ingest read from the agents' files, redacted and compressed: "
    "what it holds, whether it reads back, and sessions restored from it.",
)
app.add_typer(vault_app, name="vault")


@vault_app.command("status")
def status(home: Path | None = HomeOpt, as_json: bool = JsonOpt):
    """Per agent: files, sessions, generations, bytes raw and stored; when the agent deletes sessions and which are not in the vault yet."""
    from ctxkeep.service.vault import VaultStatusRequest, vault_status

    with failing():
        r = vault_status(VaultStatusRequest.parse(home=_home(home))).as_json()
    if as_json:
        _print_json(r)
        return
    if not r["enabled"]:  # one line, not a warning per file whose advice cannot work (newuser15 F20)
        say_folded(
            "vault: off (CTXKEEP_VAULT=0 or [vault] enabled = false in config.toml) - ingest keeps no "
            "session's bytes, so what an agent deletes is gone; turn it on to keep them"
        )
    # the folder on a line of its own: a title line is not wrapped in a pipe
    t = table(title=f"ctxkeep vault, {_size(r['pack_bytes'])} on disk:\n{tilde(r['vault_dir'])}")
    for col in (
        "agent",
        "files",
        "sessions",
        "generations",
        "raw",
        "stored",
        "redacted",
        "agent deletes",
        "next",
    ):
        t.add_column(
            col,
            justify="right" if col in ("files", "sessions", "generations", "raw", "stored") else "left",
            # in a narrow terminal: generations (≈ files) and the next deletion go first,
            # then the redacted counts (`ctxkeep secrets` has them per kind; 60 columns)
            drop={"generations": 1, "next": 2, "redacted": 3}.get(col),
            no_wrap=True if col in ("agent", "next") else None,
        )
    for a in r["agents"]:
        t.add_row(
            a["agent"],
            f"{a['files']:,}",
            f"{a['sessions']:,}",
            f"{a['generations']:,}",
            _size(a["raw_bytes"]),
            _size(a["stored_bytes"]),
            ", ".join(f"{k} {n}" for k, n in sorted(a["redactions"].items())) or "-",
            (a["deletes"] or "-").split(" (", 1)[0],  # why: below the table, never cut mid-word
            (a["next_deletion"] or "-")[:16].replace("T", " "),
        )
    out.print(t)
    redacted_shown = any(str(c.header) == "redacted" for c in t.columns)  # (left out: 60 columns)
    for a in r["agents"]:
        if " (" in (a["deletes"] or ""):
            say_folded(f"{a['agent']} deletes: {a['deletes']}")
    # "stored" counts each object once per agent: summed per file, a piece that several
    # files or generations share was counted once per file and the sum passed the packs
    say_folded(
        f"stored: {r['stored_bytes']:,} bytes, each object once; {r['shared_bytes']:,} of them shared by "
        f"several files or generations (counted per file: {r['per_reference_bytes']:,}); "
        f"packs on disk {r['pack_bytes']:,} (with their framing)"
    )
    if redacted_shown and any(a["redactions"] for a in r["agents"]):
        out.print(
            "redacted: values counted per occurrence in the raw bytes `vault restore` writes (newest "
            "generation of each file); `ctxkeep secrets` counts them per entry, `ctxkeep stats` per "
            "distinct text",
            highlight=False,
            soft_wrap=False,  # wrapped at the width
        )
    for a in r["agents"] if r["enabled"] else []:
        for x in a["at_risk"][:20]:
            what = f"{x['agent']} deletes {x['path']} at {x['due']}: the vault holds {x['vaulted_bytes']:,} of its {x['size']:,} bytes"
            if x.get("purged"):  # ingest skips a purged file: lifting the purge is what helps
                scope, _, value = x["purged"].partition(" ")
                what += (
                    f" (you purged {x['purged']}) - nothing to do if that was meant; to keep it, "
                    f"`ctxkeep purge --{scope} {value} --reingest`, then `ctxkeep ingest`"
                )
            elif x.get("unfinished_bytes") and x["vaulted_bytes"] + x["unfinished_bytes"] >= x["size"]:
                what += (
                    f"; the missing {x['unfinished_bytes']:,} bytes are a last line {x['agent']} has not ended: "
                    "ingest holds it back until the line ends (an ingest now cannot read it)"
                )
            elif x.get("read_all"):  # an ingest reads nothing of it: advice that clears the warning
                what += (
                    f" and an ingest reads nothing of it (the store read it to its end) - "
                    f"`ctxkeep backfill --path {x['path']}` reads it whole into the vault"
                )
            else:
                what += " - run `ctxkeep ingest` before then"
            warn(what)
    if not r["at_risk"] and r["enabled"]:
        say_folded("no session at risk: the vault holds every file the agents will delete")
    if r["missing"]:
        say_folded(
            f"{_count(len(r['missing']), 'file')} gone from disk, kept by the vault: "
            "ctxkeep vault restore --all-missing"
        )


@vault_app.command("verify")
def verify(
    full: bool = typer.Option(False, "--full", help="Also hash every pack whole and list orphan packs."),
    repair: bool = typer.Option(
        False, "--repair", help="Remove the orphan packs whose contents the store holds (with --full)."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="With --repair: say what it would remove; remove nothing."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Check every generation against its objects (sequence, sizes, SHA-256); exit 1 naming what is damaged."""
    from ctxkeep.service.vault import VaultVerifyRequest, vault_verify

    if dry_run and not repair:
        _fail(
            UsageError("--dry-run goes with --repair", where="ctxkeep vault verify", hint="add --repair"), 2
        )
    full = full or repair  # the orphans are what --full finds
    with failing():
        r = vault_verify(VaultVerifyRequest.parse(home=_home(home), full=full)).as_json()
    fixed = None
    if repair and r["orphan_packs"] and r["ok"]:
        fixed = _repair(_home(home), dry_run)
    if as_json:
        _print_json(r if not repair else {**r, "repair": fixed or _NOTHING | {"dry_run": dry_run}})
    elif r["ok"]:
        say(
            f"vault ok: {_count(r['generations'], 'generation')}, {_count(r['objects'], 'object')} read back and checked"
            + (f"; every pack hashed whole, {_count(len(r['orphans']), 'orphan pack')}" if full else "")
        )
    if not as_json and r["orphan_packs"] and fixed is None:
        # which, how big, and whether it may go (`1 orphan pack` alone: newuser16 F16)
        for o in r["orphan_packs"]:
            say(f"  orphan pack {tilde(o['path'])} ({_size(o['bytes'])})")
        say_folded(
            "  no generation names them (a run stopped before its commit): "
            + (
                "`ctxkeep vault verify --repair` removes those whose contents the store holds"
                if r["ok"]
                else "--repair leaves them while the vault is damaged (one may hold what is missing)"
            ),
            indent="    ",
        )
    if fixed is not None and not as_json:
        _say_repair(fixed)
    if not as_json:
        for line in r["problems"]:
            typer.echo(f"error: vault damaged: {line}", err=True)
    if not r["ok"]:
        raise typer.Exit(1)


#: ``--repair --json``'s ``repair`` when there was no orphan pack to judge
_NOTHING = {"orphan_packs": [], "removed": 0, "removed_bytes": 0, "kept": 0}


def _repair(home: Path, dry_run: bool) -> dict:
    """``vault verify --repair``: the orphan packs judged, the removable ones removed
    (``maintenance.vault.vault_repair``, under the store lock)."""
    from ctxkeep.service.vault import VaultRepairRequest, vault_repair

    with failing():
        return vault_repair(VaultRepairRequest.parse(home=home, dry_run=dry_run)).as_json()


def _say_repair(r: dict) -> None:
    verb = "would remove" if r["dry_run"] else "removed"
    for o in r["orphan_packs"]:
        what = verb if o["removable"] else "kept"
        say_folded(
            f"  {what} orphan pack {tilde(o['path'])} ({_size(o['bytes'])}): {o['why']}", indent="    "
        )
    say(
        f"vault repair: {verb} {_count(r['removed'], 'orphan pack')} ({_size(r['removed_bytes'])})"
        + (f", kept {r['kept']:,}" if r["kept"] else "")
        + (" (dry run: nothing removed)" if r["dry_run"] else "")
    )


@vault_app.command("restore")
def restore(
    session: str | None = typer.Argument(
        None, help="The session: its id or first characters, as hits show them."
    ),
    to: Path | None = typer.Option(
        None,
        "--to",
        help="Write under DIR (same layout relative to your home) instead of the original paths; "
        "a database agent's session as its rows, JSONL.",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite files that exist."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say which files would be written (and which exist); write nothing."
    ),
    all_missing: bool = typer.Option(
        False, "--all-missing", help="Every file the vault holds that is missing on disk."
    ),
    generation: int | None = typer.Option(
        None,
        "--generation",
        "-g",
        min=1,
        metavar="N",
        help="Generation N of each file (1: the first kept; default the newest). A wrong N lists them.",
    ),
    at: str | None = typer.Option(
        None,
        "--at",
        metavar="WHEN",
        help="The newest generation of each file captured by then (UTC; a date: that whole day; "
        "the forms of --since).",
        callback=_when_callback("--at"),
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Write a session's native files back from the vault (original paths and mtimes), so the agent can resume it."""
    from ctxkeep.service.vault import VaultRestoreRequest, vault_restore

    try:
        req = VaultRestoreRequest.parse(
            home=_home(home),
            session=session,
            to=to,
            force=force,
            all_missing=all_missing,
            generation=generation,
            at=at,
            dry_run=dry_run,
        )
        r = vault_restore(req).as_json()
    except CtxkeepError as e:
        _fail(e, words={"session": "SESSION"})  # an argument here, not --session
    failed = r.get("not_restored") or []
    if r.get("interrupted"):  # what was written, then the one line
        if as_json:
            _print_json(r)
        else:
            for f in r["files"]:
                say_folded(f"{'would restore' if r['dry_run'] else 'restored'} {tilde(f['to'])}")
        went = len(r["files"]) + len(failed)
        what = f"{len(r['files']):,} {'would be restored' if r['dry_run'] else 'restored'}"
        stopped(went, went + r["not_started"], what, r["interrupted"])
    if as_json:
        _print_json(r)
        if failed:  # the others are restored: the failures' exit code at the end
            raise typer.Exit(1)
        return
    verb = "would restore" if r["dry_run"] else "restored"
    for f in r["files"]:
        red = sum(f["redactions"].values())
        say_folded(
            f"{verb} {tilde(f['to'])} ({_size(f['bytes'])}"
            + (f", {_count(red, 'value')} redacted in its bytes" if red else "")
            + (
                ("; it exists: --force overwrites it" if r["dry_run"] else "; overwritten")
                if f["exists"]
                else ""
            )
            + ")"
        )
    for db in r.get("skipped_rows") or []:
        say(f"not restored: the session's rows in {db} (a database: pass --to DIR to write them as JSONL)")
    for p in r.get("left_shared") or []:  # (Kiro IDE's index: it lists the sessions still there)
        say_folded(
            f"left as it is: {tilde(p)} (other sessions share it and it is on disk; --force writes the vault's)"
        )
    for x in failed:
        warn(f"not restored: {x['path']}: {x['reason']}")
    if not r["files"]:
        say("nothing to restore" if not failed else "nothing else to restore")
    elif r["dry_run"]:
        say("dry run: nothing written")
    if failed:  # the others are written: the run ends with the failures' exit code
        _fail(
            CtxkeepError(
                f"{_count(len(failed), 'file')} of the missing could not be restored (named above)",
                where="vault restore --all-missing",
                hint="the others were "
                + ("checked" if r["dry_run"] else "restored")
                + "; `ctxkeep vault restore SESSION -g N` restores an earlier generation of one",
            )
        )

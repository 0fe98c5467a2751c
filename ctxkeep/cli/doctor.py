"""``ctxkeep doctor``, ``ctxkeep backup`` and ``ctxkeep restore``: the store's health
and its backups, as ``service.doctor`` answers them. None starts Prefect."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import (
    HomeOpt,
    JsonOpt,
    _count,
    _home,
    _print_json,
    _size,
    app,
    failing,
    fold,
    line_width,
    out,
    say,
    say_folded,
    tilde,
)

_MARK = {"ok": "ok", "damaged": "DAMAGED", "warning": "warning", "skipped": "skipped"}


@app.command()
def doctor(
    repair: bool = typer.Option(
        False, "--repair", help="Rebuild what is damaged (damaged files are moved aside)."
    ),
    full: bool = typer.Option(False, "--full", help="PRAGMA integrity_check instead of quick_check."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Check the store (SQLite, FTS5, DuckDB, Parquet archive, watermarks); exit 1 on damage or no store."""
    from ctxkeep.service.doctor import DoctorRequest
    from ctxkeep.service.doctor import doctor as ask

    with failing():
        res = ask(_home(home), DoctorRequest.parse(repair=repair, full=full))
    rep = res.as_json()
    if as_json:
        _print_json(rep)
    else:
        # the store's files named within it (its folder once, on the first line), each
        # finding folded under its detail's column at the terminal's width
        store = str(_home(home))
        say(f"store {tilde(store)}")
        width = line_width()
        for f in res.findings:
            name = f.file[len(store) + 1 :] if f.file.startswith(store + "/") else tilde(f.file)
            line = f"{_MARK[f.status]:8} {f.check:17} {name}: {f.detail}"
            lines = fold(line, indent=" " * 27)
            if width is not None and any(len(x) > width for x in lines):
                lines = fold(line, indent=" " * 9)  # a word wider than the detail column (60 columns)
            for x in lines:
                say(x)
        if "repair" in rep:
            for a in rep["repair"]["actions"]:
                say_folded(f"repaired {a}")
            for a in rep["repair"]["not_recovered"]:
                say_folded(f"not recovered: {a}")
        if rep["damaged"]:
            say_folded(
                f"damaged: {', '.join(rep['damaged'])}"
                + ("" if repair else " - run 'ctxkeep doctor --repair'")
            )
        else:
            out.print("the store is sound", highlight=False)
    if rep["damaged"]:
        raise typer.Exit(1)


@app.command()
def backup(
    keep: int | None = typer.Option(None, min=1, help="Copies to keep (config.toml backup.keep; default 7)."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Write a consistent copy of the store to <home>/backups/store-<UTC>.db."""
    from ctxkeep.service.doctor import BackupRequest
    from ctxkeep.service.doctor import backup as ask

    with failing():
        rep = ask(_home(home), BackupRequest.parse(keep=keep)).as_json()
    if as_json:
        _print_json(rep)
        return
    # folded at the width, ~/ (143 columns at 80: newuser16 F13)
    say_folded(
        f"backed up the store to {tilde(rep['path'])} ({_size(rep['bytes'])}) in {rep['seconds']:.1f} s; "
        f"removed {_count(len(rep['removed']), 'older copy', 'older copies')}"
    )


@app.command()
def restore(
    file: Path = typer.Argument(..., metavar="FILE", help="A store backup (<home>/backups/store-<UTC>.db)."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Install a store backup; the current store is moved aside, then every session the vault holds is derived from it again (what was ingested after the backup comes back), DuckDB rebuilt."""
    from ctxkeep.service.doctor import RestoreRequest
    from ctxkeep.service.doctor import restore as ask

    with failing():
        rep = ask(_home(home), RestoreRequest.parse(file=file)).as_json()
    if as_json:
        _print_json(rep)
        return
    # at the width, paths with ~ (three moved-aside paths made a 380-column line: newuser15 F13)
    moved = ", ".join(tilde(p) for p in rep["moved_aside"]) or "nothing"
    say_folded(f"restored {tilde(rep['restored'])}; moved aside: {moved}; {rep['analytics']}")
    for line in rep.get("vault") or []:
        say_folded("  " + line, indent="    ")

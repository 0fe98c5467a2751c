"""``ctxkeep export parquet DEST``: the store's usage, sessions and entries into a
team's Parquet lake (``maintenance.export``; layout in ``sinks.lake``, docs/team.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, JsonOpt, _fail, _home, _print_json, _size, app, err, out
from ctxkeep.errors import CtxkeepError, UsageError

export_app = typer.Typer(no_args_is_help=True, help="Export the store for other tools (a Parquet lake).")
app.add_typer(export_app, name="export")


@export_app.command("parquet")
def parquet(
    dest: str = typer.Argument(
        ..., metavar="DEST", help="The lake: a directory or an fsspec URL (s3://, gs://, abfs://)."
    ),
    tables: str = typer.Option(
        "usage,sessions,entries", "--tables", help="Comma-separated subset of usage,sessions,entries."
    ),
    with_text: bool = typer.Option(
        False, "--with-text", help="Also export texts (entries, session titles; redacted as stored)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be written or removed."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Write this machine's partitions of DEST/<table>/machine=/agent=/month= (only what changed)."""
    from ctxkeep.maintenance import export as engine

    try:
        names = engine.parse_tables(tables)
    except UsageError as e:
        _fail(e, 2)
    h = _home(home)
    try:
        if as_json or not err.get().is_terminal:  # no bar (and no blank line) when piped
            rep = engine.export_parquet(h, dest, tables=names, with_text=with_text, dry_run=dry_run)
        else:
            rep = _with_progress(engine, h, dest, names, with_text, dry_run)
    except UsageError as e:
        _fail(e, 2)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(rep)
        return
    verb = "would write" if dry_run else "wrote"
    out.print(f"lake {rep['dest']} (machine {rep['machine']})", highlight=False)
    for name, t in rep["tables"].items():
        line = (
            f"  {name}: {verb} {len(t['written']):,} of {t['partitions']:,} partitions "
            f"({t['rows_written']:,} rows"
            + ("" if dry_run else f", {t['files_written']:,} files, {_size(t['bytes_written'])}")
            + ")"
        )
        if t["removed"]:
            line += f", {'would remove' if dry_run else 'removed'} {len(t['removed']):,}"
        out.print(line, highlight=False)
    if not dry_run and not any(t["written"] or t["removed"] for t in rep["tables"].values()):
        out.print("  nothing changed since the last export", highlight=False)


def _with_progress(engine, h, dest, names, with_text, dry_run) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("export {task.description}"), BarColumn(), MofNCompleteColumn(),
        console=err.get(), transient=True,
    ) as bar:  # fmt: skip
        tasks: dict[str, int] = {}

        def progress(table: str, done: int, total: int) -> None:
            if table not in tasks:
                tasks[table] = bar.add_task(table, total=total or 1)
            bar.update(tasks[table], completed=done if total else 1, total=total or 1)

        def wait(where: str) -> None:
            err.print(f"waiting for another ctxkeep run on this store to finish ({where})…", style="dim")

        return engine.export_parquet(
            h, dest, tables=names, with_text=with_text, dry_run=dry_run, progress=progress, on_wait=wait
        )

"""``ctxkeep export parquet DEST``: the store's usage, sessions and entries into a
team's Parquet lake (``maintenance.export``; layout in ``sinks.lake``, docs/team.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, JsonOpt, _count, _fail, _home, _print_json, _size, app, err, failing, out
from ctxkeep.cli.options import timezone_option
from ctxkeep.errors import CtxkeepError, UsageError

export_app = typer.Typer(
    no_args_is_help=True,
    help="Export the store: a Parquet lake for other tools, transcripts as HTML or Markdown.",
)
app.add_typer(export_app, name="export")


#: as ingest's and compress's (newuser20 F11: scripts passing it to export were refused)
ProgressOpt = typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")


@export_app.command("parquet")
def parquet(
    dest: str = typer.Argument(
        ..., metavar="DEST", help="The lake: a directory or an fsspec URL (s3://, gs://, abfs://)."
    ),
    tables: str = typer.Option(
        "usage,sessions,entries",
        "--tables",
        help="Comma-separated subset of usage,sessions,entries,raw (raw: the vault's generations, "
        "redacted, for a central reparse; only when named, then refreshed by any export once a purge "
        "or pruning took generations out).",
    ),
    with_text: bool = typer.Option(
        False, "--with-text", help="Also export texts (entries, session titles; redacted as stored)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be written or removed."),
    progress: bool = ProgressOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Write this machine's partitions of DEST/<table>/machine=/agent=/month= (only what changed)."""
    from ctxkeep.service.export import ExportParquetRequest

    with failing():
        req = ExportParquetRequest.parse(dest=dest, tables=tables, with_text=with_text, dry_run=dry_run)
        h = _home(home)
        if as_json or not progress or not err.get().is_terminal:  # no bar (and no blank line) when piped
            from ctxkeep.service.export import export_parquet

            rep = export_parquet(h, req).as_json()
        else:
            rep = _with_progress(h, req)
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


def _with_progress(h: Path, req) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

    from ctxkeep.service.export import export_parquet

    with Progress(
        TextColumn("export {task.description}"), BarColumn(), MofNCompleteColumn(),
        console=err.get(), transient=True,
    ) as bar:  # fmt: skip
        tasks: dict[str, TaskID] = {}

        def progress(table: str, done: int, total: int) -> None:
            if table not in tasks:
                tasks[table] = bar.add_task(table, total=total or 1)
            bar.update(tasks[table], completed=done if total else 1, total=total or 1)

        def wait(where: str) -> None:
            err.print(f"waiting for another ctxkeep run on this store to finish ({where})…", style="dim")

        return export_parquet(h, req, progress=progress, on_wait=wait).as_json()


def _transcripts(
    fmt: str,
    dest: Path,
    sessions: list[str],
    timezone: str | None,
    home,
    as_json: bool,
    force: bool = False,
    progress: bool = True,
) -> None:
    """``export markdown|html``: the static site of ``render.site`` with a progress bar."""
    from ctxkeep.render import site
    from ctxkeep.service.when import zone

    try:
        tz = zone(timezone)
    except UsageError as e:
        _fail(e, 2)
    h = _home(home)
    req = site.ExportRequest(home=h, dest=dest, fmt=fmt, sessions=sessions or None, tz=tz, force=force)
    try:
        if as_json or not progress or not err.get().is_terminal:
            rep = site.export(req)
        else:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            with Progress(
                TextColumn(f"export {fmt}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=err.get(),
                transient=True,
            ) as bar:
                task = bar.add_task(fmt, total=None)
                rep = site.export(
                    req, progress=lambda done, total: bar.update(task, completed=done, total=total)
                )
    except UsageError as e:
        _fail(e)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(rep.as_json())
        return
    n = len(rep.pages)
    out.print(
        f"wrote {n:,} session page{'s' * (n != 1)}"
        + (" and an index" if rep.index else "")
        + f" to {rep.dest} ({_size(rep.bytes)})"
        + (
            f"; removed {_count(len(rep.stale_removed), 'stale page')} of sessions no longer stored"
            if rep.stale_removed
            else ""
        )
        + (f"; {site.empty_note(rep.empty)}" if rep.empty else ""),
        highlight=False,
    )
    if fmt == "html":
        first = rep.index or (rep.pages[0] if rep.pages else None)
        if first:
            out.print(f"open {Path(first).resolve().as_uri()}", highlight=False)


TzOpt = timezone_option("times shown")
_FORCE_HELP = "Write into a non-empty DEST that holds no previous ctxkeep export (default: refuse)."
_SESSION_HELP = "Only this session and the sub-agents it started (an id or unique prefix; repeatable). Default: every session, plus an index."


@export_app.command("html")
def export_html(
    dest: Path = typer.Argument(..., metavar="DEST", help="Folder for the pages (created)."),
    session: list[str] = typer.Option([], "--session", "-s", metavar="ID", help=_SESSION_HELP),
    timezone: str | None = TzOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
    progress: bool = ProgressOpt,
):
    """Write transcripts as self-contained HTML pages (Markdown rendered, code highlighted, tool calls folded; no remote URL)."""
    _transcripts("html", dest, session, timezone, home, as_json, force, progress)


@export_app.command("markdown")
def export_markdown(
    dest: Path = typer.Argument(..., metavar="DEST", help="Folder for the files (created)."),
    session: list[str] = typer.Option([], "--session", "-s", metavar="ID", help=_SESSION_HELP),
    timezone: str | None = TzOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
    progress: bool = ProgressOpt,
):
    """Write transcripts as Markdown files (tool calls and thinking folded in <details>)."""
    _transcripts("markdown", dest, session, timezone, home, as_json, force, progress)

"""``ctxkeep redact``: re-redact the store after a rule change (``--rescan``,
``maintenance.redact_rescan``), or redact standard input with the store's rules (to
try them on a text). Values are never printed, only counted per kind."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, JsonOpt, _count, _fail, _home, _print_json, app, err, failing, out, table
from ctxkeep.errors import UsageError


@app.command()
def redact(
    rescan: bool = typer.Option(
        False,
        "--rescan",
        help="Re-redact the stored texts, quarantined lines, text media and Parquet archive with "
        "today's rules (after an upgrade added a rule).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what --rescan would change; write nothing."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Re-redact the store (--rescan), or print standard input with its secrets redacted."""
    if not rescan:
        if dry_run:
            _fail(UsageError("--dry-run needs --rescan", hint="run `ctxkeep redact --rescan --dry-run`"), 2)
        if sys.stdin.isatty():
            _fail(
                UsageError(
                    "nothing to redact on standard input",
                    hint="pipe a text in, or run `ctxkeep redact --rescan`",
                ),
                2,
            )
        _redact_stdin(home, as_json)
        return
    from ctxkeep.service.redact import RescanRequest
    from ctxkeep.service.redact import rescan as run_rescan

    h = _home(home)
    req = RescanRequest.parse(dry_run=dry_run)
    show = not as_json and err.get().is_terminal
    with failing():
        if show:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            with Progress(
                TextColumn("rescan"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("texts"),
                TimeRemainingColumn(),
                console=err.get(),
                transient=True,
            ) as prog:
                task = prog.add_task("rescan", total=None)
                rep = run_rescan(
                    h, req, progress=lambda d, t: prog.update(task, completed=d, total=t)
                ).as_json()
        else:
            rep = run_rescan(h, req).as_json()
    if as_json:
        _print_json(rep)
        return
    _print_report(rep)


def _print_report(rep: dict) -> None:
    n = sum(rep["kinds"].values())
    verb = "would redact" if rep["dry_run"] else "redacted"
    areas = rep["areas"]
    where = ", ".join(
        _count(areas[a]["changed"], label)
        for a, label in (
            ("contents", "text"),
            ("quarantine", "quarantined line"),
            ("media", "media item"),
            ("archive", "archived text"),
        )
    )
    out.print(f"{verb} {_count(n, 'value')} in {where} ({rep['seconds']:.1f} s)", highlight=False)
    if n:
        t = table(title="values per kind")
        t.add_column("kind")
        for a in areas:
            t.add_column(a, justify="right")
        t.add_column("total", justify="right")
        for kind, total in rep["kinds"].items():
            t.add_row(kind, *(f"{areas[a]['kinds'].get(kind, 0):,}" for a in areas), f"{total:,}")
        out.print(t)
    if not rep["dry_run"]:
        out.print(rep["analytics"], highlight=False, style="dim")


def _redact_stdin(home: Path | None, as_json: bool) -> None:
    from ctxkeep.service.redact import RedactTextRequest, redact_text

    text = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    res = redact_text(_home(home), RedactTextRequest.parse(text=text))
    new, counts = res.text, res.kinds
    if as_json:
        _print_json(res.as_json())
        return
    sys.stdout.buffer.write(new.encode("utf-8", "surrogateescape"))
    if counts:
        err.print(
            "redacted " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
            highlight=False,
            style="dim",
        )

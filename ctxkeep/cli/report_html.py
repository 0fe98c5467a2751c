"""``ctxkeep report html DIR``: the analytics notebooks (marimo) run against the store
as scripts and written as self-contained HTML pages (``render.report``). Any failure
(a damaged store, a full disk, a cell's error) ends it with one ``error:`` line and
its exit code (``render.report.failure``), never a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, JsonOpt, _fail, _home, _print_json, err
from ctxkeep.cli.options import since_option, timezone_option, until_option
from ctxkeep.cli.report import report_app
from ctxkeep.errors import CtxkeepError


@report_app.command("html")
def html(
    out_dir: Path = typer.Argument(
        ..., metavar="DIR", help="Folder to write usage.html, sessions.html, store.html, index.html."
    ),
    since: str | None = since_option("First local day, inclusive (default: the first record)"),
    until: str | None = until_option("Last local day, inclusive (default: the last record)"),
    timezone: str | None = timezone_option(),
    force: bool = typer.Option(
        False, "--force", help="Write into a non-empty DIR that holds no previous report (default: refuse)."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Run the usage, sessions and store notebooks (marimo) against the store and write them as static HTML pages (needs the `notebooks` extra)."""
    from ctxkeep.render import report
    from ctxkeep.service.analytics import window

    missing = report.missing_modules()
    if missing:
        _fail(CtxkeepError(f"`report html` needs {', '.join(missing)}", hint=report.INSTALL_HINT))
    try:
        from ctxkeep.service.when import zone

        w = window(zone(timezone), since or "", until or "")
    except CtxkeepError as e:
        _fail(e, 2)
    try:
        h = _home(home)
    except CtxkeepError as e:  # --home names a file
        _fail(e)
    started = {}

    def progress(name: str, state: str) -> None:
        if as_json:
            return
        if state == "running":
            started[name] = time.monotonic()
            err.print(f"running {name}.py …", highlight=False)
        else:
            err.print(
                f"  wrote {out_dir / (name + '.html')} ({time.monotonic() - started[name]:.1f} s)",
                highlight=False,
            )

    params = {
        "timezone": w.tz,
        "since": w.since.isoformat() if w.since else "",
        "until": w.until.isoformat() if w.until else "",
    }
    try:
        paths = report.write_reports(h, out_dir, params, progress=progress, force=force)
    except Exception as e:  # any failure: one line and its exit code, never a traceback
        _fail(report.failure(h, e, "report html", str(out_dir)))
    if as_json:
        _print_json({"timezone": w.tz, "since": w.since, "until": w.until, "pages": [str(p) for p in paths]})
        return
    typer.echo(f"open {paths[-1].resolve().as_uri()}")

"""The ``report`` command group (placeholder: the reports of issue 10 replace this file
at merge; ``report html`` lives in ``cli.report_html``)."""

from __future__ import annotations

import typer

from ctxkeep.cli import app

report_app = typer.Typer(help="Reports over the store", no_args_is_help=True)
app.add_typer(report_app, name="report")

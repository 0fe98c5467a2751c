"""The ``ctxkeep`` command line (Typer): a thin layer over the library.

One module per area registers its commands on ``app`` (``core``: ingest, search,
show, stats). A new area adds a module here and one import at the end of this file.

``search``, ``show`` and ``stats`` read the store directly and never import Prefect;
``ingest`` runs the Prefect flow (and skips Prefect entirely when nothing changed).
Every command exits 0 on success, 1 on a ctxkeep error (one line on stderr), 2 on
wrong usage.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from ctxkeep import config as cfgmod

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Keep the context of AI coding agents: ingest, search and maintain their sessions.",
)
#: table width when output is not a terminal (and ``COLUMNS`` is unset); text is not wrapped
PIPE_WIDTH = 160


class _LazyConsole:
    """A Rich ``Console`` made on first use: ``search --json`` never needs Rich, and
    importing it costs ~40 ms of every command's start."""

    def __init__(self, **kwargs) -> None:
        self._kwargs = kwargs
        self._console = None

    def get(self):
        """The Console itself (for Rich objects that take one, e.g. ``Progress``)."""
        if self._console is None:
            from rich.console import Console

            c = Console(**self._kwargs)
            if not c.is_terminal:  # piped: never wrap printed text; tables get room
                c = Console(
                    **self._kwargs, soft_wrap=True, width=None if os.environ.get("COLUMNS") else PIPE_WIDTH
                )
            self._console = c
        return self._console

    def __getattr__(self, name: str):
        return getattr(self.get(), name)


def table(**kwargs):
    """A Rich ``Table`` (imported on first use, as the consoles)."""
    from rich.table import Table

    return Table(**kwargs)


out = _LazyConsole()
err = _LazyConsole(stderr=True)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"ctxkeep {version('ctxkeep')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Keep the context of AI coding agents: ingest, search and maintain their sessions."""
    # everything ctxkeep creates (store, Prefect's database beside it, archives,
    # backups' temp files) is user-only
    os.umask(0o077)


HomeOpt = typer.Option(
    None, "--home", help="Store directory (default: $CTXKEEP_HOME or the platform data dir)."
)
JsonOpt = typer.Option(False, "--json", help="Print JSON for scripts.")


def _fail(e: Exception, code: int = 1):
    """Print ``error: <what> (<where>) - <what to do>`` as ONE line on stderr (never
    wrapped, whatever the terminal width) and exit with ``code``."""
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(code)


def _home(home: Path | None) -> Path:
    return cfgmod.resolve_home(home)


def _print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str, ensure_ascii=False) + "\n")


def _count(n: int, word: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1 entry`` (``plural`` for irregular words), with
    thousands separators."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _argv_home() -> Path | None:
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == "--home" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if a.startswith("--home="):
            return Path(a.split("=", 1)[1])
    return None


def _store_error(e: BaseException) -> bool:
    """Print the one line of a store error that escaped a command and return True:
    ``StoreDamaged``/``sqlite3.DatabaseError`` of a damaged store (SQLITE_CORRUPT,
    SQLITE_NOTADB) as ``error: store.db is damaged (<path>) - run 'ctxkeep doctor'``,
    any other ``CtxkeepError`` as its own line. False for anything else."""
    import sqlite3

    from ctxkeep.errors import CtxkeepError

    if isinstance(e, sqlite3.DatabaseError):
        from ctxkeep.sinks.files import STORE_DB
        from ctxkeep.sinks.sqlite.store_safety import damaged, is_corruption

        if not is_corruption(e):
            return False
        e = damaged(_home(_argv_home()) / STORE_DB, e)
    if not isinstance(e, CtxkeepError):
        return False
    typer.echo(f"error: {e}", err=True)
    return True


def main() -> None:
    """The ``ctxkeep`` console entry point: ``app`` with usage errors (unknown option,
    bad value, missing argument) printed as ONE line, like every other error:
    ``error: <what> - see `ctxkeep <command> --help```; exit code 2."""
    try:  # Typer ≥ 0.2x vendors Click as typer._click
        from typer._click import exceptions as cexc
    except ImportError:  # pragma: no cover - older Typer on plain Click
        from click import exceptions as cexc

    try:
        rv = app(standalone_mode=False, prog_name="ctxkeep")
    except cexc.UsageError as e:
        if not e.format_message():  # no arguments at all: the help was printed
            sys.exit(2)
        where = e.ctx.command_path if e.ctx else "ctxkeep"
        typer.echo(f"error: {e.format_message()} - see `{where} --help`", err=True)
        sys.exit(2)
    except typer.Abort:  # Ctrl-C or end of input at a prompt
        typer.echo("error: aborted", err=True)
        sys.exit(1)
    except cexc.ClickException as e:
        typer.echo(f"error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except Exception as e:  # SQLITE_CORRUPT where a command read a damaged page
        if not _store_error(e):
            raise
        sys.exit(1)
    if rv == 130:  # Typer's exit code for Ctrl-C
        typer.echo("interrupted: what was stored stays stored; run the command again to go on", err=True)
    sys.exit(rv if isinstance(rv, int) else 0)


# command modules register themselves on `app` (imported last: they import from here)
from ctxkeep.cli import (  # noqa: E402
    compress,  # noqa: F401
    core,  # noqa: F401
    doctor,  # noqa: F401
    hook,  # noqa: F401
    hooks,  # noqa: F401
    maintenance,  # noqa: F401
    mcp,  # noqa: F401
    quarantine,  # noqa: F401
    report,  # noqa: F401
    report_html,  # noqa: F401
    sessions,  # noqa: F401
    sources,  # noqa: F401
)

"""The option vocabulary of every ``ctxkeep`` command: one definition per option, so an
option means the same thing in every command (docs/cli.md "Options").

- ``--agent A`` (``agent_option``): repeatable and comma-separated (``-a codex -a
  crush`` = ``-a codex,crush``), checked against the registry; an unknown name is a
  usage error (exit 2) naming the closest valid one.
- ``--since`` / ``--until`` (``since_option``/``until_option``): both ends inclusive, a
  date (a whole day), a datetime or an age (``7d``, ``12h``); read by the one parser,
  ``timeutil.read_when``, at parse time (a bad value exits 2 before any work).
- ``--timezone ZONE`` / ``-z`` (``timezone_option``): the IANA zone of the local days
  and times a command shows (reports, ``report html``, exports, the statusline);
  default the local zone (``service.when.zone``); checked at parse time (exit 2).
- ``--home DIR``: accepted before the command (``ctxkeep --home DIR stats``) and after it.
- ``--json``: every command that reports; objects carry ``"schema": N``.
- ``--prefect/--no-prefect`` of the commands that may run as a Prefect flow.
- ``split_values``: several values of a repeatable, comma-separated option as one list.

Importing this module imports Typer only (no store, no sources): it runs at every start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import typer

from ctxkeep.service.when import WHEN_FORMS

HomeOpt = typer.Option(
    None,
    "--home",
    metavar="DIR",
    help="Store directory (default: $CTXKEEP_HOME or the platform data dir); also before the command.",
    # a home the user may not read is a failure of the command (exit 1, errors.from_os_error's
    # "permission denied" line), not wrong usage (Click's check would exit 2)
    readable=False,
)
JsonOpt = typer.Option(
    False, "--json", help="Print JSON for scripts (docs/cli.md: the shape and its schema)."
)

#: ``--prefect/--no-prefect`` of ingest, compress, retention, reindex and backfill:
#: None (neither given) lets ``flows.prefect_env.run_as_flow`` decide
PrefectOpt = typer.Option(
    None,
    "--prefect/--no-prefect",
    help="--prefect: record the run as a Prefect flow run, on Prefect's temporary server "
    "(15-50 s to start) when none runs; --no-prefect: in-process. Default: a flow run when "
    "PREFECT_API_URL is set or `ctxkeep serve` runs for this store, else in-process.",
)


class OptionError(typer.BadParameter):
    """A bad option value in ctxkeep's own words: its message is the whole line after
    ``error:`` (``what (where) - what to do``), not Click's ``Invalid value for …``.
    Exit code 2, as every usage error."""

    def format_message(self) -> str:
        return self.message


def split_values(values: str | Iterable[str] | None) -> list[str]:
    """The values of a repeatable, comma-separated option as one list, in order, without
    blanks or repeats: ``["codex,crush", "aider"]`` → ``["codex", "crush", "aider"]``."""
    from ctxkeep.service.args import split_commas

    if values is None:
        return []
    return split_commas([values] if isinstance(values, str) else list(values))


def unknown_value(what: str, name: str, choices: Sequence[str], where: str | None = None) -> str:
    """``service.args.unknown_value``: the one line of an unknown name, as MCP gives it."""
    from ctxkeep.service.args import unknown_value as line

    return line(what, name, choices, where)


def store_agents() -> tuple[str, ...]:
    """Every agent the store can hold (``schema.AGENTS``: the 16 sources and ``note``,
    what ``ctx_index`` stores)."""
    return schema_values("AGENTS")()


def source_agents() -> tuple[str, ...]:
    """The agents ctxkeep reads files of (``schema.AGENTS`` without ``note``; the same
    names as ``sources.SOURCES``, whose import costs ~100 ms)."""
    return tuple(a for a in store_agents() if a != "note")


def _choices_callback(what: str, choices, *, lower: bool = True):
    """A Typer callback: split the values (``split_values``), lower-case them, check each
    against ``choices()``; a bad one raises ``OptionError`` (exit 2)."""

    def check(ctx: typer.Context, param: typer.CallbackParam, values):
        vals = split_values(values)
        if lower:
            vals = [v.lower() for v in vals]
        allowed = choices()
        for v in vals:
            if v not in allowed:
                raise OptionError(unknown_value(what, v, allowed, param.opts[0]), ctx=ctx, param=param)
        return vals or None

    return check


def agent_option(
    choices=source_agents,
    help: str = "Only this agent (repeatable, or a,b; `ctxkeep sources` lists them).",
    short: bool = True,
):
    """``--agent`` / ``-a``: repeatable and comma-separated; the command receives a list
    of known names or None. ``choices`` is a function giving the valid names
    (``source_agents`` for commands that read files, ``store_agents`` for those that
    read the store, or a fixed set such as the hook agents)."""
    names = ("--agent", "-a") if short else ("--agent",)
    return typer.Option(
        None, *names, metavar="AGENT", help=help, callback=_choices_callback("agent", choices)
    )


def choice_option(name: str, choices, help: str, *, what: str | None = None, metavar: str = "NAME"):
    """A repeatable, comma-separated option of fixed values (``--kind``, ``--role``,
    ``--status``), checked like ``--agent``; ``choices`` is a function giving them or
    the name of a ``schema`` tuple (``"KINDS"``)."""
    if isinstance(choices, str):
        choices = schema_values(choices)
    return typer.Option(
        None, name, metavar=metavar, help=help, callback=_choices_callback(what or name.lstrip("-"), choices)
    )


def _when_callback(opt: str):
    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value in (None, ""):
            return None
        from ctxkeep.errors import UsageError
        from ctxkeep.service.when import check_when

        try:
            check_when(value, opt)
        except UsageError as e:
            raise OptionError(str(e), ctx=ctx, param=param) from None
        return value

    return check


def _when_option(name: str, help: str, short: tuple[str, ...]):
    return typer.Option(None, name, *short, metavar="WHEN", help=help, callback=_when_callback(name))


def since_option(help: str = "From this time on, inclusive", *short: str):
    """``--since WHEN``: inclusive; a date, a datetime or an age (``timeutil.read_when``),
    checked at parse time. The command receives the text."""
    return _when_option("--since", f"{help}: {WHEN_FORMS}.", short)


def until_option(help: str = "Up to this time, inclusive (a date: that whole day)", *short: str):
    """``--until WHEN``: inclusive (a date includes that whole day); forms as ``--since``."""
    return _when_option("--until", f"{help}; the forms of --since.", short)


def _timezone_callback(ctx: typer.Context, param: typer.CallbackParam, value):
    if value in (None, ""):
        return None
    from ctxkeep.errors import UsageError
    from ctxkeep.service.when import zone

    try:
        zone(value)
    except UsageError as e:
        raise OptionError(str(e), ctx=ctx, param=param) from None
    return value


def timezone_option(of: str = "days", *, check: bool = True):
    """``--timezone ZONE`` / ``-z``: the IANA zone of the local ``of`` a command shows
    (``"days"`` of a report, ``"times shown"`` of a transcript); None (not given) is the
    local zone, resolved by the command's service (``service.when.zone``). ``check``
    (default): an unknown zone is a usage error at parse time (exit 2); the statusline
    passes False, as it says a bad zone in its one output line instead."""
    return typer.Option(
        None,
        "--timezone",
        "-z",
        help=f"IANA time zone of the {of} (default: the local zone).",
        callback=_timezone_callback if check else None,
    )


def require_paths(paths: Sequence, where: str = "--path") -> None:
    """The rule for paths given on the command line, the same in every command
    (``ingest --path``, ``backfill --path``, ``compress FILE``): when none of them
    exists, raise ``errors.NotFound`` (exit 1) naming them; when some exist, the command
    goes on and reports the missing ones as warnings."""
    from pathlib import Path

    from ctxkeep.errors import NotFound

    if paths and not any(Path(p).expanduser().exists() for p in paths):
        raise NotFound(
            f"no such file or directory: {', '.join(map(str, paths))}",
            where=where,
            hint="give a session file or a folder that holds them",
        )


def schema_values(name: str):
    """A ``choices`` function for ``choice_option``/``agent_option``: the values of
    ``schema.<name>`` (``KINDS``, ``ROLES``, ``STATUSES``), read when an option is
    checked (``schema`` is not imported at start)."""

    def values() -> tuple[str, ...]:
        from ctxkeep import schema

        return tuple(getattr(schema, name))

    return values

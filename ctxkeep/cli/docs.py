"""The command line's own documentation: ``ctxkeep help [COMMAND]…`` and the reference
``docs/cli.md``, generated from the Typer app (``render_reference``; regenerate with
``ctxkeep help --reference > docs/cli.md``; tests/cli/test_cli_docs.py fails when a
command or option is missing from it, as sqlite-utils' docs test does).

The ``--json`` shapes are generated from the result models of ``ctxkeep.service``
(``OUTPUTS`` names which model each command prints; the keys, their order and their
descriptions are the model's fields); a test runs each command and compares its keys
with the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from ctxkeep.cli import app

if TYPE_CHECKING:
    from pydantic import BaseModel


@app.command("help")
def help_(
    command: list[str] = typer.Argument(
        None, metavar="[COMMAND]...", help="A command, or a command and its subcommand (report daily)."
    ),
    reference: bool = typer.Option(
        False, "--reference", help="Print the whole reference as Markdown (docs/cli.md is this output)."
    ),
):
    """Show the help of ctxkeep or of one command (as `ctxkeep COMMAND --help`)."""
    if reference:
        typer.echo(render_reference(), nl=False)
        return
    from typer.main import get_command

    from ctxkeep.cli import _plain_metavars
    from ctxkeep.errors import UsageError

    group = get_command(app)
    _plain_metavars(group)  # QUERY, not {QUERY}, as `ctxkeep search --help` shows
    ctx = typer.Context(group, info_name="ctxkeep")
    cmd: Any = group  # a Click group, or the command a name leads to
    for name in command or []:
        sub = cmd.get_command(ctx, name) if hasattr(cmd, "get_command") else None
        if sub is None:
            from ctxkeep.cli import _fail
            from ctxkeep.cli.options import unknown_value

            names = sorted(cmd.list_commands(ctx)) if hasattr(cmd, "list_commands") else []
            # not the hidden ones (`hook`, what installed agent hooks run), as `--help` omits them
            names = [n for n in names if not getattr(cmd.get_command(ctx, n), "hidden", False)]
            _fail(UsageError(unknown_value("command", name, names)))
        ctx = typer.Context(sub, info_name=name, parent=ctx)
        cmd = sub
    text = cmd.get_help(ctx)
    # a command's help ends without a newline (newuser21 N1: the next prompt was glued on)
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False)


def outputs() -> dict[str, type]:
    """Every command's ``--json`` output, keyed by command path (as typed after
    ``ctxkeep``; ``path --option`` for an option's own shape): its result model (an
    object with ``"schema"``)."""
    from ctxkeep.render.site import ExportResult
    from ctxkeep.service import shapes as s
    from ctxkeep.service.compress import CompressCheck, CompressRestore, CompressResult
    from ctxkeep.service.conversation import ConversationResult
    from ctxkeep.service.coverage import CoverageResult
    from ctxkeep.service.doctor import BackupResult, DoctorResult, RestoreResult
    from ctxkeep.service.export import ExportParquetResult
    from ctxkeep.service.fetch import FetchResult
    from ctxkeep.service.maintenance import BackfillResult, ReindexResult, RetentionResult, ServePlan
    from ctxkeep.service.purge import PurgeResult
    from ctxkeep.service.quarantine import QuarantineList, QuarantineShow
    from ctxkeep.service.redact import RedactTextResult, RescanResult
    from ctxkeep.service.report import ReportResult
    from ctxkeep.service.resume import ResumeResult
    from ctxkeep.service.search import QueryHits
    from ctxkeep.service.secrets import ScrubResult, SecretsResult
    from ctxkeep.service.sessions import SessionsResult
    from ctxkeep.service.sources import SourcesResult
    from ctxkeep.service.stats import StatsResult
    from ctxkeep.service.vault import ReparseResult, VaultRestoreResult, VaultStatusResult, VaultVerifyResult

    out: dict[str, type] = {
        "ingest": s.IngestResult,
        "quarantine": QuarantineList,
        "quarantine list": QuarantineList,
        "quarantine show": QuarantineShow,
        "search": QueryHits,
        "show": FetchResult,
        "show --session": ConversationResult,
        "stats": StatsResult,
        "sessions": SessionsResult,
        "resume": ResumeResult,
        "purge": PurgeResult,
        "retention": RetentionResult,
        "reindex": ReindexResult,
        "backfill": BackfillResult,
        "serve --dry-run": ServePlan,
        "compress": CompressResult,
        "compress --check": CompressCheck,
        "compress --restore": CompressRestore,
        "doctor": DoctorResult,
        "backup": BackupResult,
        "restore": RestoreResult,
        "sources": SourcesResult,
        "sources --coverage": CoverageResult,
        "hooks install": s.SettingsChange,
        "hooks uninstall": s.SettingsChange,
        "hooks status": s.HooksStatus,
        "mcp install": s.SettingsChange,
        "mcp uninstall": s.SettingsChange,
        "redact": RedactTextResult,
        "redact --rescan": RescanResult,
        "export parquet": ExportParquetResult,
        "export markdown": ExportResult,
        "export html": ExportResult,
        "report html": s.ReportHtml,
        "vault status": VaultStatusResult,
        "vault verify": VaultVerifyResult,
        "vault restore": VaultRestoreResult,
        "reparse": ReparseResult,
        "secrets": SecretsResult,
        "secrets --scrub": ScrubResult,
    }
    for name in ("daily", "weekly", "monthly", "session", "models", "projects", "blocks", "tools"):
        out[f"report {name}"] = ReportResult
    return out


def json_keys(model: type[BaseModel]) -> dict[str, str]:
    """The keys ``model`` prints (aliases, in order, without ``schema``) → one line on
    each: its description, and for a list or map of a model the keys of its items."""
    keys = {}
    for name, f in model.model_fields.items():
        key = f.alias or name
        if key == "schema":
            continue
        line = " ".join((f.description or "").split())
        inner = _item_model(f.annotation)
        if inner is not None:
            line += (": " if line else "") + ", ".join(k for k in json_keys(inner))
        keys[key] = line
    return keys


def _item_model(annotation) -> type | None:
    """The model a field holds (directly, in a list, or as a dict's values), or None."""
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _item_model(arg)
        if found is not None:
            return found
    return None


def _shape(path: str, key: str, model: type) -> list[str]:
    """The Markdown of one ``--json`` output (generated from ``model``)."""
    label = "`--json`" if key == path else f"`{key[len(path) + 1 :]} --json`"
    doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split()).replace("``", "`")
    lines = [f'{label}: an object, `"schema": 1`.' + (f" {doc}" if doc else ""), ""]
    return lines + [f"- `{k}`" + (f": {v}" if v else "") for k, v in json_keys(model).items()] + [""]


def iter_commands():
    """Every command of the app as ``(path, click command)``, depth first, groups
    before their commands, hidden ones included (``hook``)."""
    from typer.main import get_command

    from ctxkeep.cli import _plain_metavars

    group = get_command(app)
    _plain_metavars(group)
    ctx = typer.Context(group, info_name="ctxkeep")

    def walk(cmd, path, ctx):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            sub_ctx = typer.Context(sub, info_name=name, parent=ctx)
            p = f"{path} {name}".strip()
            yield p, sub, sub_ctx
            if hasattr(sub, "list_commands"):
                yield from walk(sub, p, sub_ctx)

    yield from walk(group, "", ctx)


def _option_line(p) -> str:
    names = ", ".join([*p.opts, *p.secondary_opts])
    meta = "" if p.is_flag or p.count else f" {p.metavar or p.name.upper()}"
    default = ""
    if not p.is_flag and p.default not in (None, "", (), []) and not callable(p.default):
        default = f" (default: {p.default})"
    return f"- `{names}{meta}`: {' '.join((p.help or '').split())}{default}"


def render_reference() -> str:
    """docs/cli.md: the vocabulary, the exit codes and, per command, its usage, help,
    arguments, options and ``--json`` shape (``outputs``: from the result models), as
    Markdown."""
    shapes = outputs()
    lines = [
        "# ctxkeep command line reference",
        "",
        "Generated from the Typer app by `ctxkeep help --reference > docs/cli.md`; "
        "tests/cli/test_cli_docs.py fails when a command or option is missing here.",
        "",
        _PREAMBLE.strip(),
        "",
    ]
    for path, cmd, ctx in iter_commands():
        hidden = " (hidden: run by the installed agent hooks)" if getattr(cmd, "hidden", False) else ""
        lines += [f"## `ctxkeep {path}`{hidden}", ""]
        pieces = cmd.collect_usage_pieces(ctx)
        lines += ["```", f"ctxkeep {path} {' '.join(pieces)}".rstrip(), "```", ""]
        doc = (cmd.help or "").strip()
        if doc:
            lines += [" ".join(par.split()) + "\n" for par in doc.split("\n\n")]
        args = [p for p in cmd.params if p.param_type_name == "argument"]
        opts = [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]
        if args:
            lines += ["Arguments:", ""]
            lines += [
                f"- `{p.metavar or p.name.upper()}`: {' '.join((getattr(p, 'help', '') or '').split())}"
                for p in args
            ]
            lines.append("")
        if opts:
            lines += ["Options:", ""] + [_option_line(p) for p in opts] + [""]
        for key, model in shapes.items():
            if key == path or key.startswith(path + " --"):
                lines += _shape(path, key, model)
    return "\n".join(lines).rstrip() + "\n"


_PREAMBLE = """
## Exit codes

| code | meaning |
|---|---|
| 0 | success (also: nothing to do, no matches) |
| 1 | failure: a store error, a damaged file, no such session / entry / file / backup (an id the store does not hold), a refused change |
| 2 | wrong usage: an unknown option, command, agent or value, a value out of range, an id or index that can name nothing (an entry id under 6 characters, a prefix several sessions share, a line id under 1), options that exclude each other |

An empty result is a success: a read command (`sessions`, `search`, `stats`, `report
daily|weekly|monthly|session|models|projects|blocks|tools`, `quarantine`, `secrets`) over a
store that holds nothing (or nothing in the selection) prints one line saying so (`no
sessions`, `no matches`, `no usage stored yet ...`) and exits 0; with `--json` the object
has empty `rows`/`hits` and the line as a note. No store at all (`ctxkeep ingest` never
ran for this home) is a failure, exit 1, for every command that reads one (`error: no
store yet ...`: run `ctxkeep ingest` first). A command that must write something from
the store (`report html`) fails on an empty one.

Every error is ONE line on stderr: `error: what (where) - what to do`; never a traceback.

## The option vocabulary (the same in every command)

- `--agent AGENT` (`-a`): repeatable and comma-separated (`-a codex -a crush` = `-a codex,crush`);
  an unknown name exits 2 naming the closest valid one. `ctxkeep sources` lists the agents.
- `--since WHEN` / `--until WHEN`: both inclusive. WHEN is a date (`2025-06-01`, or `20250601`:
  a whole day, so `--since D --until D` is day D), a datetime (`2025-06-01T12:00`, UTC unless it
  names an offset; whole to the precision written: `--until 2025-06-01T12:00` takes in all of
  12:00, up to 12:00:59.999999, `T12` the whole hour) or an age before now (`30m`, `12h`, `7d`,
  `2w`). Search, sessions and backfill count days in UTC; reports and `report html` in `--timezone`. One parser (`ctxkeep.timeutil`).
- `--home DIR`: the store, before or after the command (`ctxkeep --home DIR stats`); default
  `$CTXKEEP_HOME`, else the platform data dir.
- `--json`: for scripts; every command that reports has it. An object carries `"schema": N`
  (raised when a key is removed or renamed or a value changes meaning; new keys may appear
  without it). Every output is an object (`show`, `sources`, `hooks …` and `mcp
  install|uninstall` printed bare arrays before session 12; their items are now under
  `entries`, `rows` and `agents`).
- `--dry-run`: every command that changes or deletes something can say first what it would do.
- `--prefect/--no-prefect`: the commands that may run as a Prefect flow run (default: a flow
  run when a Prefect server is there to record it).
- Paths that do not exist (`ingest --path`, `backfill --path`, `compress FILE`): when none of
  them exists the command fails (exit 1); when some do, the others are warnings.
"""

"""The command line's own documentation: ``ctxkeep help [COMMAND]…`` and the reference
``docs/cli.md``, generated from the Typer app (``render_reference``; regenerate with
``ctxkeep help --reference > docs/cli.md``; tests/cli/test_cli_docs.py fails when a
command or option is missing from it, as sqlite-utils' docs test does).

The ``--json`` shapes are declared once here (``JSON_OUTPUTS``: top-level keys, the
schema version); a test runs each command and compares its keys with the declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

import typer

from ctxkeep.cli import app


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
    cmd = group
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
    typer.echo(cmd.get_help(ctx), nl=False)


@dataclass(frozen=True)
class JsonOutput:
    """One ``--json`` output: ``schema`` (the ``"schema"`` value of an object; None for
    an array, which carries none), ``keys`` (top-level keys of the object, or of each
    array item → one line on what it holds), ``note`` (one line)."""

    schema: int | None
    keys: dict[str, str]
    note: str = ""


#: every command's ``--json`` output, keyed by command path (as typed after
#: ``ctxkeep``); filled in below
JSON_OUTPUTS: dict[str, JsonOutput] = {}


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
    arguments, options and ``--json`` shape (``JSON_OUTPUTS``), as Markdown."""
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
        for key, out in JSON_OUTPUTS.items():
            if key != path and not key.startswith(path + " --"):
                continue
            what = f'an object, `"schema": {out.schema}`' if out.schema else "an array (no `schema` key)"
            label = "`--json`" if key == path else f"`{key[len(path) + 1 :]} --json`"
            lines += [f"{label}: {what}." + (f" {out.note}" if out.note else ""), ""]
            lines += [f"- `{k}`: {v}" for k, v in out.keys.items()] + [""]
    return "\n".join(lines).rstrip() + "\n"


_PREAMBLE = """
## Exit codes

| code | meaning |
|---|---|
| 0 | success (also: nothing to do, no matches) |
| 1 | failure: a store error, a damaged file, no such session / entry / file / backup, a refused change |
| 2 | wrong usage: an unknown option, command, agent or value, a value out of range, options that exclude each other |

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
  without it). Outputs that were JSON arrays before versioning (`show`, `sources`, `hooks …`,
  `mcp install|uninstall`) stay arrays, unversioned, so that existing scripts keep working: a
  future change of their items will wrap them in an object with `"schema": 2`.
- `--dry-run`: every command that changes or deletes something can say first what it would do.
- `--prefect/--no-prefect`: the commands that may run as a Prefect flow run (default: a flow
  run when a Prefect server is there to record it).
- Paths that do not exist (`ingest --path`, `backfill --path`, `compress FILE`): when none of
  them exists the command fails (exit 1); when some do, the others are warnings.
"""


def _define_outputs() -> None:
    o = JSON_OUTPUTS
    problems = "one line per problem (warnings; also printed on stderr without --json)"
    o["ingest"] = JsonOutput(
        1,
        {
            "files": "session files considered",
            "files_read": "files with new bytes read",
            "files_vanished": "files gone before they could be read",
            "bytes": "bytes read",
            "lines": "lines (or records) read",
            "entries_new": "entries added",
            "quarantined": "lines kept aside in the quarantine (bad JSON, unknown shape)",
            "status_changed": "entries whose status changed (rewound, consumed)",
            "seconds": "wall time",
            "per_agent": "agent → entries added",
            "analytics": "what the DuckDB sync did (a sentence)",
            "problems": problems,
            "held_back": "files whose last part waits for a later ingest: agent, path, reason, bytes, changed, ready_at (ISO-8601 UTC)",
            "coverage_alerts": "format drift met: agent, agent_version, kind (new_version_unknown_types, new_unknown_types, parse_rate_dropped), message, parse_rate, previous_rate (fractions), unknown (types)",
        },
        "With --dry-run: dry_run, files, bytes, unchanged, agents (agent, files, bytes, paths), problems, store.",
    )
    o["quarantine"] = JsonOutput(1, {"total": "as quarantine list", "lines": "as quarantine list"})
    o["quarantine list"] = JsonOutput(
        1,
        {
            "total": "quarantined lines matching",
            "lines": "id, agent, path, offset, length, reason, action, first_seen, raw_sha256, stored_bytes, preview",
        },
    )
    o["quarantine show"] = JsonOutput(
        1,
        {
            "id": "the line's id",
            "agent": "agent name",
            "path": "the session file",
            "offset": "byte offset in it",
            "length": "bytes of the raw line",
            "reason": "why it was quarantined",
            "action": "skipped or repaired",
            "first_seen": "ISO-8601 UTC",
            "raw_sha256": "SHA-256 of the raw line",
            "stored_bytes": "bytes of the redacted copy",
            "raw_text": "the redacted copy as UTF-8",
            "raw_base64": "the redacted copy, exact",
        },
    )
    o["vault status"] = JsonOutput(
        1,
        {
            "vault_dir": "the vault's folder",
            "pack_bytes": "bytes of its pack files on disk",
            "agents": "per agent: agent, files, sessions, generations, raw_bytes (original), stored_bytes "
            "(compressed), redactions (kind → values), deletes (the agent's rule), next_deletion "
            "(ISO-8601 UTC), at_risk (agent, path, due, vaulted_bytes, size)",
            "schedules": "the agents' deletion rules: agent, days, setting (where read), max_count",
            "at_risk": "files an agent will delete that the vault does not hold whole",
        },
    )
    o["vault verify"] = JsonOutput(
        1,
        {
            "generations": "generations checked",
            "objects": "objects read back, decompressed and hashed",
            "problems": "one line per damaged pack or manifest fault",
            "ok": "true when none",
        },
    )
    o["vault restore"] = JsonOutput(
        1,
        {
            "session": "the session id (null with --all-missing)",
            "files": "path (original), to (written), bytes, redactions (kind → values)",
        },
    )
    o["reparse"] = JsonOutput(
        1,
        {
            "dry_run": "true: nothing changed",
            "agents": "agents reparsed",
            "files": "vault files read",
            "generations": "generations parsed",
            "diff": "entries: [agent, kind, added, removed, changed, same]; usage: agent → before, after, delta "
            "(input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd)",
            "notes": "what the vault does not cover",
            "seconds": "wall time",
        },
    )
    o["search"] = JsonOutput(
        1,
        {
            "query": "the query as given",
            "hits": "ranked hits: entry_id, agent, session_id, project_dir, ts (UTC), role, kind, "
            "tool_name, title, snippet, token_estimate, duplicates, …",
            "budget_tokens": "the --budget (null: none)",
            "used_tokens": "tokens of the listed hits",
            "omitted": "hits left out by the budget",
            "note": 'why hits were cut or only some terms matched ("": none)',
        },
        "MCP `ctx_search` returns the same object without `schema`.",
    )
    o["show"] = JsonOutput(
        None,
        {
            "entry_id": "the full id",
            "agent": "agent name",
            "session_id": "session id",
            "session_short_id": "the shortest prefix of session_id naming it in the store",
            "project_dir": "project directory (null: unknown)",
            "ts": "record time, ISO-8601 UTC",
            "role": "user, assistant, system, tool",
            "kind": "message, tool_call, tool_result, thinking, summary, meta",
            "tool_name": "tool of a call or result (null: none)",
            "source_path": "the session file (null: a note)",
            "source_offset": "byte offset of the record in it",
            "status": "active, archived, consumed, rewound",
            "bytes": "UTF-8 bytes of the whole text",
            "token_estimate": "estimated tokens of the whole text",
            "offset": "the --offset asked for",
            "text": "the text (cut: head, elision marker, tail)",
            "tokens": "estimated tokens of `text`",
            "truncated": "true when `text` was cut",
            "elided_bytes": "bytes left out",
            "elided_from": "byte offset where the elision starts",
            "next_offset": "the --offset that continues (null: none)",
            "media": "images and outputs compress moved to the store: seq, media_type, bytes, sha256, "
            "data_base64",
        },
        "One item per entry found (an array from before versioning: kept for existing scripts).",
    )
    o["show --session"] = JsonOutput(
        1,
        {
            "agent": "agent name",
            "session_short_id": "the shortest prefix of session_id naming it in the store",
            "session_id": "the full session id",
            "project_dir": "project directory",
            "turns": "the conversation in order: entry_id, ts, role, kind, tool_name, text, "
            "result_bytes, result_error",
            "omitted": "turns left out by the budget",
            "omitted_tokens": "their estimated tokens",
            "note": 'why turns were left out ("": none)',
        },
    )
    o["stats"] = JsonOutput(
        1,
        {
            "entries": "entries stored",
            "sessions": "sessions stored",
            "agents": "agent → sessions, entries, kinds, text_bytes, token_estimate",
            "status": "status → entries",
            "contents": "distinct texts: distinct, bytes, token_estimate",
            "usage": "responses and input/output/cache tokens",
            "quarantine": "skipped and repaired lines",
            "files": "store file → bytes",
            "last_ingest": "time of the last ingest, ISO-8601 UTC (null: never)",
            "redactions": "redacted values per kind in the texts and in the quarantine "
            "(counts of `[REDACTED:<kind>]` markers, never the values)",
        },
    )
    o["sessions"] = JsonOutput(
        1,
        {
            "source": "duckdb (with cost) or sqlite",
            "sessions": "newest first, sub-agents after their parent: agent, session_id, short_id, "
            "parent_session_id, project_dir, started, ended, messages, tool_calls, tokens, cost_usd, title, …",
        },
    )
    o["resume"] = JsonOutput(
        1,
        {
            "agent": "agent name",
            "session_id": "the full session id",
            "project_dir": "project directory",
            "started": "first record, ISO-8601 UTC",
            "ended": "last record, ISO-8601 UTC",
            "budget": "the token budget",
            "sections": "the snapshot's sections in priority order (first and last prompts, open "
            "plan, files, last failure, rules, where to fetch more)",
            "omitted": "sections or items left out by the budget",
            "tokens": "estimated tokens of the snapshot",
            "markdown": "the snapshot as --format md prints it",
        },
        "`--json` is `--format json`. MCP `ctx_resume` returns it without `schema`.",
    )
    purge = {
        "scope": "session, project or all",
        "session_id": "the --session given (null: none)",
        "project_dir": "the --project given (null: none)",
        "resolved": "what was purged, in words",
        "home": "the store",
        "dry_run": "true for --dry-run",
        "removed": "category → count (entries, sessions, contents, chunks, usage, quarantine, "
        "source_files, token_estimate, archived, text_bytes)",
        "files": "the session files the data came from",
        "tombstone": "what keeps the data from being ingested again (none, lifted, …)",
        "tombstones": "tombstones written (not with --dry-run)",
        "watermarks_dropped": "watermarks removed (not with --dry-run)",
        "analytics": "what the DuckDB rebuild did (not with --dry-run)",
        "files_removed": "--all: the store files removed",
        "bytes_removed": "--all: their bytes",
        "backups": "the store backups that still hold the data (a purge never changes one): "
        "[{path, taken (UTC), entries (null: unreadable)}]",
        "backups_note": "when there are backups: what that means and the `rm` that removes them",
    }
    o["purge"] = JsonOutput(
        1,
        purge,
        "`--all` has scope, resolved, home, dry_run, files_removed, bytes_removed, removed, backups.",
    )
    o["retention"] = JsonOutput(
        1,
        {
            "dry_run": "true for --dry-run",
            "cutoff": "entries archived before this, ISO-8601 UTC",
            "archive": "per agent and month: agent, month, entries",
            "entries_to_archive": "entries that qualify",
            "archive_cutoff": "archive files older than this are removed",
            "old_archives": "those files",
            "old_archives_bytes": "their bytes",
            "backup_cutoff": "compress backups older than this are removed",
            "old_backups": "those files",
            "old_backups_bytes": "their bytes",
            "backup_dirs_scanned": "folders searched for backups",
            "archived": "(not with --dry-run) entries and rows written to Parquet",
            "archives_removed": "(not with --dry-run) archive files removed",
            "backups_removed": "(not with --dry-run) backups removed",
            "bytes_freed": "(not with --dry-run) bytes freed",
            "seconds": "(not with --dry-run) wall time",
        },
    )
    o["reindex"] = JsonOutput(
        1,
        {
            "chunks": "FTS chunks rebuilt",
            "grams_rows": "chunks with substring terms",
            "facets_changed": "chunks whose filter facets changed",
            "analytics": "what the DuckDB rebuild did",
            "seconds": "wall time",
        },
    )
    o["backfill"] = JsonOutput(
        1,
        {
            "dry_run": "true for --dry-run",
            "files": "the files selected (paths)",
            "problems": problems,
            "bytes": "their size in bytes",
            "ingest": "(not with --dry-run) the ingest summary, as `ingest --json` without schema",
        },
    )
    o["compress"] = JsonOutput(
        1,
        {
            "dry_run": "true for --dry-run",
            "files": "per file: path, agent, status, reason, bytes/tokens/messages before and after, "
            "backup, savings per strategy, notes",
            "compressed": "files compressed",
            "would_compress": "files --dry-run would compress",
            "refused": "files refused (the store does not hold every line)",
            "failed": "files that failed (exit 1)",
            "bytes_before": "bytes before",
            "bytes_after": "bytes after",
            "tokens_before": "estimated tokens before",
            "tokens_after": "estimated tokens after",
            "seconds": "wall time",
            "problems": problems,
            "analytics": "what the DuckDB sync did",
        },
    )
    o["compress --check"] = JsonOutput(
        1,
        {
            "thresholds": "max_size_kb, max_lines, …",
            "files": "per file: path, agent, bytes, lines, status, exceeds, active, backups, would, savings",
            "exceeding": "files over a threshold",
            "problems": problems,
        },
    )
    o["compress --restore"] = JsonOutput(
        1,
        {
            "path": "the session file",
            "backup": "the backup put back",
            "bytes": "its bytes",
            "reactivated": "archived entries active again",
        },
    )
    o["doctor"] = JsonOutput(
        1,
        {
            "home": "the store",
            "findings": "per check: check, file, status (ok, damaged, warning, skipped), detail",
            "damaged": "the damaged files (exit 1 when not empty)",
            "repair": "(--repair) actions and not_recovered",
            "after": "(--repair) the findings after the repair",
        },
    )
    o["backup"] = JsonOutput(
        1,
        {
            "path": "the backup written",
            "bytes": "its bytes",
            "seconds": "wall time",
            "removed": "older backups removed",
        },
    )
    o["restore"] = JsonOutput(
        1,
        {
            "restored": "the backup installed",
            "moved_aside": "the store files moved aside",
            "analytics": "what the DuckDB rebuild did",
        },
    )
    o["sources"] = JsonOutput(
        None,
        {
            "agent": "agent name",
            "enabled": "false when turned off in config.toml or CTXKEEP_DISABLE",
            "searched": "the folders looked at",
            "files": "session files found",
            "bytes": "their bytes (a database with its -wal)",
            "sessions": "sessions in the store",
            "entries": "entries in the store",
            "kinds": "kind → entries",
            "quarantined": "quarantined lines",
            "last_ingest": "when new data of this agent was last read, ISO-8601 UTC (null: never)",
            "reason": "why nothing was found, or a note",
            "where": "the folder holding the files found",
            "held_back": "files whose last part waits for a later ingest (as ingest's held_back)",
            "skipped": "reason → files discovery refused (symlinks out of the agent's folder, symlink "
            "loops, FIFOs and devices, hard links with a name outside)",
            "skipped_examples": "the first 20 refused files: path, reason",
        },
        "One item per agent (an array from before versioning: kept for existing scripts). "
        "With --coverage an object (schema 1): store (false: no store yet), rows (per agent, "
        "agent_version and parser_version: files, records, parsed, entries, quarantined, "
        "parse_rate as a fraction, unknown: type → count and a redacted sample line, "
        "updated_at) and alerts (agent, agent_version, kind new_unknown_types or "
        "parse_rate_dropped, message, parse_rate, previous_rate, unknown).",
    )
    change = {
        "agent": "agent name",
        "path": "the settings file",
        "action": "created, updated, removed, restored, deleted, unchanged, absent, error",
        "backup": "the backup written (null: none)",
        "notes": "one line each",
        "dry_run": "true for --dry-run",
        "error": "(action error) what went wrong",
    }
    arr = "One item per agent (an array from before versioning: kept for existing scripts)."
    o["hooks install"] = JsonOutput(None, change, arr)
    o["hooks uninstall"] = JsonOutput(None, change, arr)
    o["hooks status"] = JsonOutput(
        None,
        {
            "agent": "agent name",
            "scope": "user or project",
            "path": "the settings file",
            "exists": "whether it exists",
            "error": "why it could not be read (null: none)",
            "hooks": "per hook: event, matcher, state (installed, outdated, missing, foreign), does, found",
            "injection": "where the agent takes the snapshot",
            "notes": "one line each",
        },
        arr,
    )
    o["mcp install"] = JsonOutput(None, {**change, "agent_command": "the agent's own command for it"}, arr)
    o["mcp uninstall"] = JsonOutput(None, change, arr)
    report_doc = 'docs/analytics.md "Reports" gives every row field.'
    report = {
        "report": "daily, weekly, monthly, session, models, projects, blocks or tools",
        "timezone": "IANA zone of the days",
        "mode": "cost mode",
        "since": "first day (null: none)",
        "until": "last day (null: none)",
        "agents": "the --agent values",
        "project": "the --project value",
        "rows": "one per period × agent (× model with --breakdown), block, or agent × tool",
        "totals": "sums of the token and cost columns",
        "notes": "unpriced or assumed models, a stale store, …",
    }
    for name in ("daily", "weekly", "monthly", "session", "models", "projects", "blocks", "tools"):
        o[f"report {name}"] = JsonOutput(1, report, report_doc)
    o["redact"] = JsonOutput(
        1,
        {
            "text": "standard input, redacted (without --rescan)",
            "kinds": "kind → values redacted (counts, never the values)",
            "dry_run": "--rescan --dry-run: nothing was written",
            "areas": "--rescan: area (texts, quarantine, media, archive) → changed rows and kinds",
            "merged": "--rescan: texts that became identical and were merged",
            "chunks": "--rescan: FTS chunks deleted and added",
            "analytics": "--rescan: what the DuckDB rebuild did",
            "seconds": "--rescan: wall time",
        },
        "Without --rescan only `text` and `kinds`; with it every key but `text`.",
    )
    o["export parquet"] = JsonOutput(
        1,
        {
            "dest": "the lake (a directory or fsspec URL)",
            "machine": "this store's machine name (the `machine=` partition value)",
            "machine_id": "this store's stable machine id (uuid)",
            "with_text": "texts exported too (--with-text)",
            "dry_run": "nothing was written (--dry-run)",
            "seconds": "wall time",
            "store_bytes": "bytes of store.db + analytics.duckdb",
            "tables": "table → partitions, written [{agent, month, rows}], removed, rows_written, "
            "files_written, bytes_written",
        },
        'docs/team.md "The lake" gives the layout.',
    )
    for fmt in ("html", "markdown"):
        o[f"export {fmt}"] = JsonOutput(
            1,
            {
                "format": f"{fmt!r}",
                "dest": "the folder written",
                "pages": "the session pages written (paths), one per session",
                "index": "the index page (path; null with --session)",
                "messages": "page path → the messages it holds",
                "bytes": "bytes written",
            },
            "With --session: those sessions and the sub-agents they started, no index.",
        )
    o["report html"] = JsonOutput(
        1,
        {
            "timezone": "IANA zone of the days",
            "since": "first day (null: the first record)",
            "until": "last day (null: the last record)",
            "pages": "the HTML files written",
        },
    )


_define_outputs()

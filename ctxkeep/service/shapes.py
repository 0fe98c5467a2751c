"""The result models of the commands whose work has not moved behind a question
module yet (issue 22 item 1): their ``--json`` output is validated by these models
and docs/cli.md is generated from them. Each moves to its question's module (with
its request and function) when its command does; the field descriptions are the
documentation of every key."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ctxkeep.service.model import Row, Shape

PROBLEMS = "one line per problem (warnings; also printed on stderr without --json)"


class IngestResult(Shape):
    """What an ingest read and stored (`ctxkeep ingest --json`). With --dry-run: dry_run,
    files, bytes, unchanged, agents (agent, files, bytes, paths), problems, store."""

    files: int = Field(description="session files considered")
    files_read: int = Field(None, description="files with new bytes read")
    files_vanished: int = Field(None, description="files gone before they could be read")
    bytes: int = Field(description="bytes read")
    lines: int = Field(None, description="lines (or records) read")
    entries_new: int = Field(None, description="entries added")
    quarantined: int = Field(None, description="lines kept aside in the quarantine (bad JSON, unknown shape)")
    status_changed: int = Field(None, description="entries whose status changed (rewound, consumed)")
    seconds: float = Field(None, description="wall time")
    per_agent: dict[str, int] = Field(None, description="agent → entries added")
    analytics: str | None = Field(None, description="what the DuckDB sync did (a sentence)")
    problems: list[str] = Field(description=PROBLEMS)
    held_back: list[dict[str, Any]] = Field(
        None,
        description="files whose last part waits for a later ingest: agent, path, reason, bytes, changed, "
        "ready_at (ISO-8601 UTC)",
    )
    coverage_alerts: list[dict[str, Any]] = Field(
        None,
        description="format drift met: agent, agent_version, kind (new_version_unknown_types, new_unknown_types, "
        "parse_rate_dropped), message, parse_rate, previous_rate (fractions), unknown (types)",
    )
    dry_run: bool = Field(None, description="--dry-run: nothing was read or written")
    unchanged: int = Field(None, description="--dry-run: files unchanged since the last ingest")
    agents: list[dict[str, Any]] = Field(None, description="--dry-run: per agent: agent, files, bytes, paths")
    store: str | None = Field(None, description="--dry-run: the store (null: none yet)")


class RetentionResult(Shape):
    """What retention archives and removes (`ctxkeep retention --json`)."""

    dry_run: bool = Field(description="true for --dry-run")
    cutoff: str | None = Field(None, description="entries archived before this, ISO-8601 UTC")
    archive: list[dict[str, Any]] = Field(None, description="per agent and month: agent, month, entries")
    entries_to_archive: int = Field(None, description="entries that qualify")
    archive_cutoff: str | None = Field(None, description="archive files older than this are removed")
    old_archives: list[str] = Field(None, description="those files")
    old_archives_bytes: int = Field(None, description="their bytes")
    backup_cutoff: str | None = Field(None, description="compress backups older than this are removed")
    old_backups: list[str] = Field(None, description="those files")
    old_backups_bytes: int = Field(None, description="their bytes")
    backup_dirs_scanned: list[str] = Field(None, description="folders searched for backups")
    archived: Any = Field(None, description="(not with --dry-run) entries and rows written to Parquet")
    archives_removed: Any = Field(None, description="(not with --dry-run) archive files removed")
    backups_removed: Any = Field(None, description="(not with --dry-run) backups removed")
    bytes_freed: int = Field(None, description="(not with --dry-run) bytes freed")
    seconds: float = Field(None, description="(not with --dry-run) wall time")


class ReindexResult(Shape):
    """What a reindex rebuilt (`ctxkeep reindex --json`)."""

    chunks: int = Field(description="FTS chunks rebuilt")
    grams_rows: int = Field(None, description="chunks with substring terms")
    facets_changed: int = Field(None, description="chunks whose filter facets changed")
    analytics: str | None = Field(None, description="what the DuckDB rebuild did")
    seconds: float = Field(None, description="wall time")


class BackfillResult(Shape):
    """The files a backfill reads again (`ctxkeep backfill --json`)."""

    dry_run: bool = Field(description="true for --dry-run")
    files: list[str] = Field(description="the files selected (paths)")
    problems: list[str] = Field(description=PROBLEMS)
    bytes: int = Field(description="their size in bytes")
    ingest: dict[str, Any] = Field(
        None, description="(not with --dry-run) the ingest summary, as `ingest --json`"
    )
    from_vault: list[str] = Field(
        None, description="the files gone from disk that the vault holds: derived from it (paths)"
    )
    reparse: dict[str, Any] = Field(
        None,
        description="(when from_vault is not empty, not with --dry-run) files and diff, as `reparse --json`",
    )


class SettingsChange(Row):
    """One agent's settings file changed (an array from before versioning: kept for
    existing scripts)."""

    agent: str = Field(description="agent name")
    path: str | None = Field(None, description="the settings file")
    action: str = Field(
        None, description="created, updated, removed, restored, deleted, unchanged, absent, error"
    )
    backup: str | None = Field(None, description="the backup written (null: none)")
    notes: list[str] = Field(None, description="one line each")
    dry_run: bool = Field(None, description="true for --dry-run")
    error: str | None = Field(None, description="(action error) what went wrong")
    agent_command: Any = Field(None, description="(mcp install) the agent's own command for it")


class HookStatus(Row):
    """One agent's hooks (an array from before versioning: kept for existing scripts)."""

    agent: str = Field(description="agent name")
    scope: str = Field(None, description="user or project")
    path: str | None = Field(None, description="the settings file")
    exists: bool = Field(None, description="whether it exists")
    error: str | None = Field(None, description="why it could not be read (null: none)")
    hooks: list[dict[str, Any]] = Field(
        None,
        description="per hook: event, matcher, state (installed, outdated, missing, foreign), does, found",
    )
    injection: Any = Field(None, description="where the agent takes the snapshot")
    notes: list[str] = Field(None, description="one line each")


class ReportResult(Shape):
    """A usage report (`ctxkeep report NAME --json`; docs/analytics.md "Reports" gives
    every row field)."""

    report: str = Field(description="daily, weekly, monthly, session, models, projects, blocks or tools")
    timezone: str = Field(description="IANA zone of the days")
    mode: str = Field(None, description="cost mode")
    since: str | None = Field(None, description="first day (null: none)")
    until: str | None = Field(None, description="last day (null: none)")
    agents: list[str] | None = Field(None, description="the --agent values")
    project: str | None = Field(None, description="the --project value")
    rows: list[dict[str, Any]] = Field(
        description="one per period × agent (× model with --breakdown), block, or agent × tool"
    )
    totals: dict[str, Any] = Field(None, description="sums of the token and cost columns")
    notes: list[str] = Field(None, description="unpriced or assumed models, a stale store, …")


class ExportParquet(Shape):
    """The lake written (`ctxkeep export parquet --json`; docs/team.md "The lake")."""

    dest: str = Field(description="the lake (a directory or fsspec URL)")
    machine: str = Field(None, description="this store's machine name (the `machine=` partition value)")
    machine_id: str = Field(None, description="this store's stable machine id (uuid)")
    with_text: bool = Field(None, description="texts exported too (--with-text)")
    dry_run: bool = Field(None, description="nothing was written (--dry-run)")
    seconds: float = Field(None, description="wall time")
    store_bytes: int = Field(None, description="bytes of store.db + analytics.duckdb")
    tables: dict[str, Any] = Field(
        None,
        description="table → partitions, written [{agent, month, rows}], removed, rows_written, files_written, "
        "bytes_written",
    )


class ReportHtml(Shape):
    """The HTML report's pages (`ctxkeep report html --json`)."""

    timezone: str = Field(description="IANA zone of the days")
    since: str | None = Field(description="first day (null: the first record)")
    until: str | None = Field(description="last day (null: the last record)")
    pages: list[str] = Field(description="the HTML files written")


class VaultStatus(Shape):
    """What the vault holds (`ctxkeep vault status --json`)."""

    vault_dir: str = Field(description="the vault's folder")
    pack_bytes: int = Field(description="bytes of its pack files on disk")
    agents: list[dict[str, Any]] = Field(
        description="per agent: agent, files, sessions, generations, raw_bytes (original), stored_bytes "
        "(compressed), redactions (kind → values), deletes (the agent's rule), next_deletion (ISO-8601 UTC), "
        "at_risk (agent, path, due, vaulted_bytes, size)"
    )
    schedules: list[dict[str, Any]] = Field(
        description="the agents' deletion rules: agent, days, setting (where read), max_count"
    )
    at_risk: list[dict[str, Any]] = Field(
        description="files an agent will delete that the vault does not hold whole"
    )


class VaultVerify(Shape):
    """The vault read back (`ctxkeep vault verify --json`)."""

    generations: int = Field(description="generations checked")
    objects: int = Field(description="objects read back, decompressed and hashed")
    problems: list[str] = Field(description="one line per damaged pack or manifest fault")
    ok: bool = Field(description="true when none")


class VaultRestore(Shape):
    """Session files written back from the vault (`ctxkeep vault restore --json`)."""

    session: str | None = Field(description="the session id (null with --all-missing)")
    files: list[dict[str, Any]] = Field(
        description="path (original), to (written), bytes, redactions (kind → values)"
    )


class ReparseResult(Shape):
    """The store rebuilt from the vault (`ctxkeep reparse --json`)."""

    dry_run: bool = Field(description="true: nothing changed")
    agents: list[str] = Field(description="agents reparsed")
    files: int = Field(description="vault files read")
    generations: int = Field(description="generations parsed")
    diff: dict[str, Any] = Field(
        description="entries: [agent, kind, added, removed, changed, same]; usage: agent → before, after, delta "
        "(input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd)"
    )
    notes: list[str] = Field(description="what the vault does not cover")
    seconds: float = Field(None, description="wall time")

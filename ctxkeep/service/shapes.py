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
    files_read: int | None = Field(None, description="files with new bytes read")
    files_vanished: int | None = Field(None, description="files gone before they could be read")
    bytes: int = Field(description="bytes read")
    lines: int | None = Field(
        None,
        description="records read: a JSONL line, a database row, a whole JSON or Markdown document (an Aider history file: 1)",
    )
    entries_new: int | None = Field(None, description="entries added")
    quarantined: int | None = Field(
        None, description="lines kept aside in the quarantine (bad JSON, unknown shape)"
    )
    status_changed: int | None = Field(None, description="entries whose status changed (rewound, consumed)")
    seconds: float | None = Field(None, description="wall time")
    per_agent: dict[str, int] | None = Field(None, description="agent → entries added")
    analytics: str | None = Field(None, description="what the DuckDB sync did (a sentence)")
    problems: list[str] = Field(description=PROBLEMS)
    held_back: list[dict[str, Any]] | None = Field(
        None,
        description="files whose last part waits for a later ingest: agent, path, reason, bytes, changed, "
        "ready_at (ISO-8601 UTC)",
    )
    coverage_alerts: list[dict[str, Any]] | None = Field(
        None,
        description="format drift met: agent, agent_version, kind (new_version_unknown_types, new_unknown_types, "
        "parse_rate_dropped), message, parse_rate, previous_rate (fractions), unknown (types); a change "
        "against what the store read before (an agent it never read raises none: not_understood)",
    )
    not_understood: list[dict[str, Any]] | None = Field(
        None,
        description="record types not understood of agents the store had never read (no drift): agent, "
        "agent_version, unknown (type → records); kept as meta entries",
    )
    files_unreadable: int | None = Field(
        None,
        description="files read without one record in their agent's format (garbage in its folder): "
        "their lines quarantined, not counted as format drift",
    )
    unreadable: list[str] | None = Field(None, description="the first 10 of those files")
    lines_unended: int | None = Field(
        None,
        description="unended last lines (no newline) quarantined once their file was idle "
        "CTXKEEP_IDLE_SECONDS, not being whole records (counted in quarantined too)",
    )
    unended: list[str] | None = Field(None, description="the first 10 of their files")
    tombstoned: list[dict[str, Any]] | None = Field(
        None,
        description="records parsed and dropped because a purge's tombstone covers them, per tombstone: "
        "scope (project, session), value (dir or id), purged_at (ISO-8601 UTC), records, sessions; "
        "`purge --reingest` lifts a tombstone",
    )
    dry_run: bool | None = Field(None, description="--dry-run: nothing was read or written")
    unchanged: int | None = Field(None, description="--dry-run: files unchanged since the last ingest")
    agents: list[dict[str, Any]] | None = Field(
        None, description="--dry-run: per agent: agent, files, bytes, paths"
    )
    store: str | None = Field(None, description="--dry-run: the store (null: none yet)")


class SettingsChange(Row):
    """One agent's settings file changed."""

    agent: str = Field(description="agent name")
    path: str | None = Field(None, description="the settings file")
    action: str | None = Field(
        None, description="created, updated, removed, restored, deleted, unchanged, absent, error"
    )
    backup: str | None = Field(None, description="the backup written (null: none)")
    backups_removed: list[str] | None = Field(
        None,
        description="(uninstall) the file's backups deleted: all once it is back byte for byte or gone, "
        "else all but the newest",
    )
    notes: list[str] | None = Field(None, description="one line each")
    dry_run: bool | None = Field(None, description="true for --dry-run")
    error: str | None = Field(None, description="(action error) what went wrong")
    agent_command: Any = Field(None, description="(mcp install) the agent's own command for it")


class SettingsChanges(Shape):
    """What changed in each agent's settings (`ctxkeep hooks install|uninstall --json`,
    `ctxkeep mcp install|uninstall --json`)."""

    agents: list[SettingsChange] = Field(description="one per agent")


class HookStatus(Row):
    """One agent's hooks."""

    agent: str = Field(description="agent name")
    scope: str | None = Field(None, description="user or project")
    path: str | None = Field(None, description="the settings file")
    exists: bool | None = Field(None, description="whether it exists")
    error: str | None = Field(None, description="why it could not be read (null: none)")
    hooks: list[dict[str, Any]] | None = Field(
        None,
        description="per hook: event, matcher, state (installed, outdated, missing, foreign), does, found,"
        " last and last_error (the newest line of hooks.log for it, and its newest error or timeout:"
        " at, outcome, detail; null: none)",
    )
    injection: Any = Field(None, description="where the agent takes the snapshot")
    notes: list[str] | None = Field(None, description="one line each")


class HooksStatus(Shape):
    """Which of ctxkeep's hooks each agent has (`ctxkeep hooks status --json`)."""

    agents: list[HookStatus] = Field(description="one per agent")


class ReportHtml(Shape):
    """The HTML report's pages (`ctxkeep report html --json`)."""

    timezone: str = Field(description="IANA zone of the days")
    since: str | None = Field(description="first day (null: the first record)")
    until: str | None = Field(description="last day (null: the last record)")
    pages: list[str] = Field(description="the HTML files written")

"""What redaction took out, and scrubbing it from the agents' files:
``secrets_report(home, SecretsRequest) -> SecretsResult`` (``ctxkeep secrets``) and
``scrub(home, ScrubRequest) -> ScrubResult`` (``ctxkeep secrets --scrub``).

Counts only, never a value: per kind, agent, session and UTC date, with first/last
seen (``query.secrets``); the scrub rewrites the agents' JSONL files through
compress's safe rewrite (``maintenance.scrub``). Raises ``StoreError``/``NotFound``
when the home holds no store.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ctxkeep.service.model import Item, Request, Result, UserPath
from ctxkeep.service.store import reading


class SecretsRequest(Request):
    """``top``: how many sessions to list (most values first), 1-1000."""

    top: int = Field(20, ge=1, le=1000)


class KindCount(Item):
    values: int
    entries: int
    sessions: int
    first_seen: str | None = Field(description="ISO-8601 UTC of the first entry holding one")
    last_seen: str | None


class AgentCount(Item):
    values: int
    entries: int
    sessions: int
    first_seen: str | None
    last_seen: str | None
    kinds: dict[str, int]


class SessionCount(Item):
    agent: str
    session_id: str
    project_dir: str | None
    values: int
    entries: int
    first_seen: str | None
    last_seen: str | None
    kinds: dict[str, int]
    files: list[str] = Field(description="the agent's session files the entries came from")


class QuarantineCount(Item):
    values: int
    lines: int
    kinds: dict[str, int]
    agents: dict[str, int]
    files: list[str]


class VaultCount(Item):
    values: int = Field(
        description="each occurrence in the raw bytes of the newest generation of each file: a line can "
        "hold a value twice (a tool result and the agent's own copy), lines no entry is made of hold some"
    )
    agents: dict[str, int]


class HistoryCount(Item):
    path: str
    agent: str
    values: dict[str, int] = Field(description="kind -> values the redaction would replace")
    lines: list[int] = Field(description="the 1-based numbers of the lines holding them")
    scrubbed_in_place: bool = Field(
        description="true: `secrets --scrub` redacts it (JSONL); false: edit it by hand (a JSON array)"
    )


class SecretsResult(Result):
    """``ctxkeep secrets --json``."""

    total: int = Field(
        description="values redacted in stored entries (an entry counts each marker of its text; the vault's "
        "count of the raw bytes is `vault`)"
    )
    entries: int = Field(description="stored entries holding a redacted value")
    text_values: int = Field(
        0,
        description="the same values counted once per distinct stored text (`stats`' unit: a text several "
        "entries share counts once)",
    )
    texts: int = Field(0, description="distinct stored texts holding a redacted value")
    kinds: dict[str, KindCount]
    agents: dict[str, AgentCount]
    dates: dict[str, dict[str, int]] = Field(description="UTC day -> kind -> values")
    sessions: list[SessionCount] = Field(description="the sessions to look at, most values first")
    sessions_total: int = Field(description="sessions holding a redacted value (all, not only those listed)")
    quarantine: QuarantineCount
    vault: VaultCount = Field(
        description="values the vault replaced in the raw bytes it holds (vault status, vault restore)"
    )
    note: str = Field(description="what to do about keys that reached an agent ('' when none)")
    prompt_histories: list[HistoryCount] = Field(
        default_factory=list,
        description="the agents' prompt histories (not ingested: ~/.claude/history.jsonl, "
        "~/.codex/history.jsonl, Gemini CLI's logs.json) holding values, read now",
    )


def line_ranges(numbers: list[int]) -> str:
    """``"3, 7-9, 12"`` of sorted line numbers (``maintenance.prompt_history``)."""
    from ctxkeep.maintenance.prompt_history import line_ranges as ranges

    return ranges(numbers)


def secrets_report(home: Path, req: SecretsRequest) -> SecretsResult:
    from ctxkeep.maintenance.prompt_history import findings
    from ctxkeep.query.secrets import secrets_report as run

    with reading(home) as conn:
        rep = run(conn, top_sessions=req.top)
    return SecretsResult.model_validate({**rep, "prompt_histories": findings()})


class ScrubRequest(Request):
    """``dry_run``: say what would change, write nothing; ``paths``: only these files."""

    dry_run: bool = False
    paths: list[UserPath] | None = None


class ScrubFileResult(Item):
    path: str
    agent: str
    status: str = Field(description="scrubbed | would-scrub | clean | skipped | failed")
    reason: str
    values: dict[str, int]
    lines_changed: int
    bad_lines_changed: int = Field(
        description="of lines_changed, lines that do not parse (quarantined): redacted on their bytes, "
        "kept where they were"
    )
    bytes_before: int
    bytes_after: int
    backup: str | None
    older_backups: list[str]
    lines: list[int] = Field(
        default_factory=list,
        description="of a file not rewritten (plain text): the 1-based numbers of the lines holding values",
    )


class ScrubResult(Result):
    """``ctxkeep secrets --scrub --json``."""

    dry_run: bool = Field(description="true: nothing was written")
    files: list[ScrubFileResult] = Field(description="per session file")
    scrubbed: int = Field(description="files rewritten")
    would_scrub: int = Field(description="files a run without --dry-run would rewrite")
    skipped: int = Field(description="files left alone (active, or nothing to redact)")
    failed: int = Field(description="files that failed (exit 1)")
    values: dict[str, int] = Field(description="kind → values redacted (counts, never the values)")
    interrupted: str | None = Field(
        None, description="SIGINT or SIGTERM when one stopped the run after the file in hand, else null"
    )
    not_started: int = Field(0, description="files an interrupted run left untouched")
    backups: list[str] = Field(description="files holding the original bytes, secrets included")
    note: str = Field(description="what to do next ('' when nothing)")


def scrub(home: Path, req: ScrubRequest, on_file=None, on_stop=None) -> ScrubResult:
    from ctxkeep.maintenance.scrub import run_scrub

    return ScrubResult.model_validate(
        run_scrub(Path(home), dry_run=req.dry_run, paths=req.paths, on_file=on_file, on_stop=on_stop)
    )

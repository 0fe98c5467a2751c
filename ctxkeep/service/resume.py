"""A resume snapshot of a session: ``resume(home, ResumeRequest) -> ResumeResult``
(``ctxkeep resume``, MCP ``ctx_resume``). What goes in it: ``query.resume``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ctxkeep.errors import NotFound
from ctxkeep.paths import every_project_reason, holds_every_project
from ctxkeep.query.resume import FIELDS
from ctxkeep.service.model import Budget, Item, ProjectDir, Request, Result
from ctxkeep.service.store import reading

DEFAULT_RESUME_BUDGET = 1500


class ResumeRequest(Request):
    """Which session (default: the latest of the project), within which budget."""

    session: str | None = Field(
        None, alias="sessionId", description="a session id or unique prefix (default: the latest session)"
    )
    project: ProjectDir = Field(
        ".",
        alias="projectDir",
        validate_default=True,
        description="the project whose latest session to take (default: the caller's directory)",
    )
    budget: Budget = Field(DEFAULT_RESUME_BUDGET, description="token budget of the snapshot (100 or more)")


class SnapshotItem(Item):
    text: str = Field(description="the item as the Markdown shows it")
    entry_id: str | None = Field(description="where it was read (null: several)")
    fields: dict[str, Any] = Field(
        default_factory=dict,
        description="what text says, as fields (newuser21 M6), per section: "
        + "; ".join(f"{k}: {v}" for k, v in FIELDS.items()),
    )


class ResumeResult(Result):
    """The snapshot: its sections, in priority order, and its Markdown rendering
    (`--json` is `--format json`; MCP `ctx_resume` returns the same object)."""

    agent: str = Field(description="agent name")
    session_id: str = Field(description="the full session id")
    project_dir: str | None = Field(description="project directory")
    started: str | None = Field(description="ISO-8601 UTC")
    ended: str | None = Field(description="ISO-8601 UTC")
    budget: int = Field(description="the token budget")
    sections: dict[str, list[SnapshotItem]] = Field(
        description="prompts, tasks, files, failure, constraints, fetch → items"
    )
    omitted: dict[str, int] = Field(description="section → items the budget left out")
    note: str | None = Field(
        None,
        description="what the budget left out, in words (null: nothing); `ctxkeep resume` prints it on stderr",
    )
    tokens: int = Field(description="estimated tokens of the Markdown")
    markdown: str = Field(description="the snapshot as an agent reads it")


def resume(home: Path, req: ResumeRequest) -> ResumeResult:
    """The snapshot of ``req.session``, else of the latest session of ``req.project``.
    Raises SessionNotFound, AmbiguousSession, NotFound (no session in the project),
    UsageError (a budget too small), StoreError."""
    from ctxkeep.query.resume import build_snapshot

    sid = (req.session or "").strip() or None
    project = None if sid else req.project
    if project and holds_every_project(project):
        # from / or ~ (an MCP server started in the home) the latest session "of" it is
        # any project's: its state injected into another project (newuser15 F20)
        # (NotFound, exit 1, as "no session of project X" elsewhere: not a usage error)
        raise NotFound(
            f"resume needs a session here: {project} is {every_project_reason(project)}, "
            "which holds every project",
            where="project",
            hint="name a session (`ctxkeep sessions` lists them) or a project directory",
        )
    with reading(home) as conn:
        snap = build_snapshot(conn, sid, project_dir=project, budget=req.budget)
    return ResumeResult(**snap.as_dict())

"""``ctxkeep hook AGENT EVENT``: the command the installed agent hooks run (hidden
from the help; ``ctxkeep.hooks.runtime`` does the work). The ``ctxkeep`` entry runs a
plain hook call without this module (``runtime.fast_main``, no Typer import); this
command answers the rest (``--help``, a misspelt option). It reads the agent's JSON
(stdin; for Codex ``notify`` the last argument), always exits 0 and prints only what
the agent should read."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import HomeOpt, _given_home, app

hook_app = typer.Typer(hidden=True, add_completion=False, help="Run an agent hook (called by the agents).")
app.add_typer(hook_app, name="hook", hidden=True)

TimeoutOpt = typer.Option(
    None, "--timeout", help="Hard timeout in seconds (default 5, $CTXKEEP_HOOK_TIMEOUT)."
)


def _stdin() -> str:
    from ctxkeep.hooks import runtime

    return runtime.read_stdin()


@hook_app.command("claude-code")
def claude_code(
    event: str = typer.Argument(..., metavar="EVENT", help="precompact, session-start, stop or session-end."),
    home: Path | None = HomeOpt,
    timeout: float | None = TimeoutOpt,
):
    """Claude Code hook: PreCompact / Stop / SessionEnd ingest; SessionStart (compact|resume) prints the snapshot."""
    from ctxkeep.hooks import runtime

    runtime.main("claude-code", event, _stdin(), home=_given_home(home), timeout=timeout)


@hook_app.command("codex")
def codex(
    event: str = typer.Argument(..., metavar="EVENT", help="notify."),
    payload: str | None = typer.Argument(
        None, metavar="[PAYLOAD]", help="The JSON Codex passes to its notify program."
    ),
    home: Path | None = HomeOpt,
    timeout: float | None = TimeoutOpt,
):
    """Codex notify program: ingests the thread's rollout after each turn."""
    from ctxkeep.hooks import runtime

    runtime.main(
        "codex", event, payload if payload is not None else _stdin(), home=_given_home(home), timeout=timeout
    )


@hook_app.command("gemini-cli")
def gemini_cli(
    event: str = typer.Argument(
        ...,
        metavar="EVENT",
        help="A Gemini CLI hook event: SessionStart, PreCompress, SessionEnd, AfterAgent, …",
    ),
    home: Path | None = HomeOpt,
    timeout: float | None = TimeoutOpt,
):
    """Gemini CLI hook: PreCompress / SessionEnd / AfterAgent ingest; SessionStart (resume) prints the snapshot."""
    from ctxkeep.hooks import runtime

    runtime.main("gemini-cli", event, _stdin(), home=_given_home(home), timeout=timeout)

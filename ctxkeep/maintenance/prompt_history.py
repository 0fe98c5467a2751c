"""The agents' prompt-history files: every prompt a user types is written there as well
as to the session transcript, so a key pasted in a prompt stays in them after the
transcript is scrubbed (newuser18 F3). ctxkeep does not ingest them (they repeat the
transcripts' user messages); ``secrets --scrub`` (and its ``--dry-run``) finds the
values in them and redacts the JSONL ones in place (``scrub.scrub_history``; Gemini CLI's JSON array:
its values' kinds and lines, to edit by hand), through compress's safe rewrite (verified backup,
temp file, fsync, rename, the file's mtime kept; ``compress.rewrite``), with no store
bookkeeping (no entry, watermark or vault copy is made of them).

The files (format facts; each is only read and redacted as JSONL or one JSON document,
so no field name matters here):

- Claude Code: ``~/.claude/history.jsonl`` (``$CLAUDE_CONFIG_DIR`` when set), one JSON
  line per prompt typed (``display`` the prompt text, ``pastedContents``,
  ``timestamp``, ``project``), appended; Claude Code's docs name it the prompt history
  of ``~/.claude``'s application data (code.claude.com/docs/en/claude-directory);
- Codex CLI: ``$CODEX_HOME/history.jsonl`` (default ``~/.codex``), one JSON line per
  message submitted (``session_id``, ``ts``, ``text``), appended under an advisory
  lock (openai/codex ``codex-rs/core/src/message_history.rs``; off with
  ``history.persistence = "none"``);
- Gemini CLI: ``~/.gemini/tmp/<project hash>/logs.json``, one JSON array of the user's
  messages (``sessionId``, ``messageId``, ``type``, ``message``, ``timestamp``),
  rewritten whole on each message (google-gemini/gemini-cli
  ``packages/core/src/core/logger.ts``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def history_files(home: Path | None = None, env: Mapping[str, str] | None = None) -> list[tuple[Path, str]]:
    """``(path, agent)`` of the prompt-history files that exist under the user's home
    ``home`` (default ``Path.home()``) with the environment ``env`` (default
    ``os.environ``): see the module doc. Sorted by path."""
    home = Path.home() if home is None else home
    e: Mapping[str, str] = os.environ if env is None else env
    claude = Path(e["CLAUDE_CONFIG_DIR"]) if e.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    codex = Path(e["CODEX_HOME"]) if e.get("CODEX_HOME") else home / ".codex"
    found = [(claude / "history.jsonl", "claude-code"), (codex / "history.jsonl", "codex")]
    gemini_tmp = home / ".gemini" / "tmp"
    if gemini_tmp.is_dir():
        found += [(p, "gemini-cli") for p in gemini_tmp.glob("*/logs.json")]
    return sorted((p, a) for p, a in found if p.is_file())


#: bytes of a prompt history ``findings`` reads (Claude Code's grows by one line a prompt)
SCAN_MAX_BYTES = 64 << 20


def findings(home: Path | None = None, env: Mapping[str, str] | None = None) -> list[dict]:
    """The prompt histories (``history_files``) that hold values the redaction would
    replace, read only: ``[{"path", "agent", "values": {kind: n}, "lines": [1-based
    line numbers], "scrubbed_in_place": True for JSONL (``secrets --scrub`` redacts
    it), False for Gemini CLI's JSON array (to edit by hand)}]``, by path. An
    unreadable file is left out."""
    from ctxkeep.sinks.vault import redact_raw

    out = []
    for path, agent in history_files(home, env):
        try:
            with open(path, "rb") as f:
                data = f.read(SCAN_MAX_BYTES)
        except OSError:
            continue
        new, counts = redact_raw(data)
        if not counts:
            continue
        pairs = zip(data.split(b"\n"), new.split(b"\n"), strict=False)
        out.append(
            {
                "path": str(path),
                "agent": agent,
                "values": dict(counts.most_common()),
                "lines": [i + 1 for i, (a, b) in enumerate(pairs) if a != b],
                "scrubbed_in_place": path.suffix == ".jsonl",
            }
        )
    return out


def line_ranges(numbers: list[int]) -> str:
    """``"3, 7-9, 12"`` of sorted line numbers."""
    out: list[str] = []
    for n in numbers:
        if out and n == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)

"""The figures of one ingest run (``Summary``), in a module of its own so that a no-op
ingest can report them without importing the engine (and Polars with it); and what
the store holds back for a later run (``held_back``), for the ingest summary and
``ctxkeep sources``."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from dataclasses import dataclass, field

from ctxkeep.sources import file_mode


@dataclass
class Summary:
    """A run's figures: files seen/read, raw bytes read, lines, new entries, quarantined
    lines, seconds, per-agent new entries, a DuckDB sync note, problems,
    ``held_back`` (``held_back``: what a later run will read),
    ``coverage_alerts`` (``transforms.drift.run_alerts``) and the files not in their
    agent's format (``files_unreadable``, ``unreadable``)."""

    files: int = 0
    files_read: int = 0
    files_vanished: int = 0
    bytes: int = 0
    lines: int = 0
    entries_new: int = 0
    quarantined: int = 0
    status_changed: int = 0
    seconds: float = 0.0
    per_agent: dict = field(default_factory=dict)
    analytics: str = ""
    problems: list = field(default_factory=list)
    held_back: list = field(default_factory=list)
    #: format drift this run met (``transforms.drift.run_alerts``: a version's parse rate
    #: dropped, a new version with record types not understood)
    coverage_alerts: list = field(default_factory=list)
    #: record types not understood of the agents the store had never read (no drift:
    #: ``transforms.drift.run_not_understood``), ``[{agent, agent_version, unknown:
    #: {type: records}}]``; kept as meta entries
    not_understood: list = field(default_factory=list)
    #: files read without one record parsed or an agent version met (garbage in an
    #: agent's folder: ``writer.unreadable_files``), their lines quarantined; the first
    #: ``engine.UNREADABLE_LISTED`` paths
    files_unreadable: int = 0
    unreadable: list = field(default_factory=list)
    #: unended last lines quarantined once their files were idle ``CTXKEEP_IDLE_SECONDS``
    #: (``sources.readers.jsonl.UNENDED``: not whole JSON), and the first
    #: ``engine.UNREADABLE_LISTED`` of their files' paths
    lines_unended: int = 0
    unended: list = field(default_factory=list)
    #: what the store's tombstones kept out of this run, per tombstone: ``{"scope":
    #: "project"|"session", "value": dir or id, "purged_at": ISO-8601 UTC, "records":
    #: entries parsed and dropped, "sessions": their sessions}`` (``transform.drop_tombstoned``;
    #: ``cli.core.tombstone_lines`` says it in words)
    tombstoned: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def held_back(conn: sqlite3.Connection, now: float | None = None) -> list[dict]:
    """The files whose last part the store does not hold yet, from their watermarks.

    Two kinds (``reason``):

    - ``"recently changed"``: a document written less than ``CTXKEEP_IDLE_SECONDS``
      (default 120 s, ``sources.readers.document.idle_seconds``) ago, whose parser held
      its last turn back as possibly still growing (Aider, SpecStory: watermark state
      ``complete: false``), or that did not parse yet (caught mid-write);
      ``ready_at`` is the UTC time from which an ingest reads it (mtime + the idle
      seconds).
    - ``"unfinished last line"``: an append-only file whose last line has no newline
      yet (``offset < size``, not judged: ``state["_unended"]``); it is read once the
      agent ends the line, or taken as final by an ingest from ``ready_at`` (mtime +
      the idle seconds: ``sources.readers.jsonl.read_jsonl``).

    Returns dicts ``{"agent", "path", "reason", "bytes" (bytes not yet read; None for
    a document, whose last turn is re-read whole), "changed" (ISO-8601 UTC mtime),
    "ready_at" (ISO-8601 UTC or None)}``, sorted by agent and path. Files gone from
    disk are skipped."""

    from ctxkeep.sources.readers.document import idle_seconds
    from ctxkeep.timeutil import format_utc

    now = time.time() if now is None else now
    idle = idle_seconds()
    out = []
    # only rows that can be either kind: a document held back records size 0
    # (``readers.document``: ``size`` 0 with ``complete: false``), an unfinished line an
    # offset below the size; every other row's state (~72 MB of them at 10 GB, Claude
    # Code's up to 16 MB each) is not read from the store (~0.1 CPU s of a no-op ingest)
    for agent, path, size, offset, mtime_ns, state in conn.execute(
        "SELECT agent, path, size, offset, mtime_ns, state FROM watermarks "
        "WHERE size IS NULL OR size <= 0 OR offset IS NULL OR offset < size"
    ):
        unfinished = bool(size and offset is not None and offset < size)
        if not unfinished and '"complete"' not in (state or ""):
            continue  # neither kind: most files (their state is not parsed, ~80 ms at 2,600)
        try:
            st = json.loads(state or "{}")
        except ValueError:
            st = {}
        mtime = (mtime_ns or 0) / 1e9
        when = format_utc(dt.datetime.fromtimestamp(mtime, dt.UTC))
        if isinstance(st, dict) and st.get("complete") is False:
            ready = mtime + idle
            out.append(
                {
                    "agent": agent,
                    "path": path,
                    "reason": "recently changed",
                    "bytes": None,
                    "changed": when,
                    "ready_at": format_utc(dt.datetime.fromtimestamp(max(ready, now), dt.UTC)),
                }
            )
        elif unfinished and _appends(agent, path) and not _judged(st, size - offset):
            out.append(
                {
                    "agent": agent,
                    "path": path,
                    "reason": "unfinished last line",
                    "bytes": size - offset,
                    "changed": when,
                    "ready_at": format_utc(dt.datetime.fromtimestamp(max(mtime + idle, now), dt.UTC)),
                }
            )
    return sorted(out, key=lambda r: (r["agent"], r["path"]))


def _judged(state, n: int) -> bool:
    """Whether a watermark's ``state`` says its last ``n`` bytes are an unended last
    line judged final (``sources.readers.jsonl``: ``state["_unended"]``, its length)."""
    held = state.get("_unended") if isinstance(state, dict) else None
    return isinstance(held, dict) and held.get("len") == n


def _appends(agent: str, path: str) -> bool:
    """True for a file its source reads append-only (mode ``append``: a watermark
    offset below its size is an unfinished last line)."""
    return file_mode(agent, path) == "append"


def held_back_line(rows: list[dict]) -> str | None:
    """One line saying what ``held_back`` rows hold back and when it will be read
    (None for none): ``held back: the last turn of 2 recently changed files (aider 1,
    specstory 1), read by an ingest from 12:40:05 UTC (CTXKEEP_IDLE_SECONDS=120); 1
    unfinished last line (codex)``."""
    from ctxkeep.sources.readers.document import idle_seconds

    if not rows:
        return None
    parts = []
    recent = [r for r in rows if r["reason"] == "recently changed"]
    if recent:
        per = _per_agent(recent)
        ready = max(r["ready_at"] for r in recent)
        parts.append(
            f"the last turn of {len(recent)} recently changed file{'s' if len(recent) != 1 else ''} ({per}), "
            f"read by an ingest from {ready[11:19]} UTC (CTXKEEP_IDLE_SECONDS={idle_seconds():g})"
        )
    lines = [r for r in rows if r["reason"] == "unfinished last line"]
    if lines:
        parts.append(
            f"{len(lines)} unfinished last line{'s' if len(lines) != 1 else ''} ({_per_agent(lines)}), "
            f"read once the agent ends {'them' if len(lines) != 1 else 'it'}, or as "
            f"{'they are' if len(lines) != 1 else 'it is'} by an ingest from "
            f"{max(r['ready_at'] for r in lines)[11:19]} UTC"
        )
    return "held back: " + "; ".join(parts)


def _per_agent(rows: list[dict]) -> str:
    n: dict[str, int] = {}
    for r in rows:
        n[r["agent"]] = n.get(r["agent"], 0) + 1
    return ", ".join(f"{a} {k}" for a, k in sorted(n.items()))


#: CPU seconds ``reparse --rekey`` takes per byte of Claude Code files (fork17: 9.6-10.0 s
#: for the 200 MB tree's 104 MB of them, load 29-32 on 2 cores; ~10 s per 100 MB)
REKEY_CPU_S_PER_BYTE = 10 / 100e6


def rekey_seconds(size: int) -> int:
    """The CPU seconds ``reparse --rekey`` takes for ``size`` bytes of Claude Code files
    (``REKEY_CPU_S_PER_BYTE``; at least 1)."""
    return max(1, round(size * REKEY_CPU_S_PER_BYTE))


def rekey_line(files: int, size: int) -> str:
    """The ingest summary's line for ``files`` Claude Code files (``size`` bytes) keyed
    by uuid alone (``rekey_advice`` is doctor's whole sentence), under 80 columns:
    ``3 Claude Code files keep old ids: run `ctxkeep reparse --rekey` (~11 CPU s)``."""
    return (
        f"{files:,} Claude Code file{'s' * (files != 1)} keep{'s' * (files == 1)} old ids: "
        f"run `ctxkeep reparse --rekey` (~{rekey_seconds(size):,} CPU s)"
    )


def rekey_advice(files: int, size: int) -> str:
    """What ``files`` Claude Code files (``size`` bytes) keyed by uuid alone mean and
    the command that moves them (``lookup.uuid_keyed_files``), one sentence: a fork
    read before the upgrade holds only part of its history until then."""
    secs = rekey_seconds(size)
    return (
        f"{files:,} Claude Code file{'s' * (files != 1)} ({size / 1e6:,.0f} MB) keyed by uuid alone "
        "(an older ctxkeep): a fork read then lacks its shared history; "
        f"run `ctxkeep reparse --rekey` (~10 CPU s per 100 MB: ~{secs:,} s here; old ids still resolve)"
    )

"""What was found per agent, and why not: ``sources(home, SourcesRequest) ->
SourcesResult`` (``ctxkeep sources``). Every source's discovery (no file is parsed)
and the store's per-agent counts. Never imports Prefect."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import Field

from ctxkeep.service.model import Request, Row, Shape
from ctxkeep.service.store import reading


class SourcesRequest(Request):
    """No arguments: every agent."""


class SourceRow(Row):
    """One agent."""

    agent: str = Field(description="agent name")
    found: bool = Field(
        False,
        description="session files found here, or data of this agent in the store (sessions, quarantine)",
    )
    listed: bool = Field(
        False,
        description="shown by `ctxkeep sources` without --all: found, named in config.toml, or files refused",
    )
    enabled: bool | None = Field(None, description="false when turned off in config.toml or CTXKEEP_DISABLE")
    searched: list[str] | None = Field(None, description="the folders looked at")
    files: int | None = Field(None, description="session files found")
    bytes: int | None = Field(None, description="their bytes (a database with its -wal)")
    sessions: int | None = Field(None, description="sessions in the store")
    entries: int | None = Field(None, description="entries in the store")
    kinds: dict[str, int] | None = Field(None, description="kind → entries")
    quarantined: int | None = Field(None, description="quarantined lines")
    last_ingest: str | None = Field(
        None, description="when new data of this agent was last read (null: never)"
    )
    reason: str | None = Field(None, description="why nothing was found, or a note")
    where: str | None = Field(None, description="the folder holding the files found")
    held_back: list[dict[str, Any]] | None = Field(
        None, description="files whose last part waits for a later ingest (as ingest's held_back)"
    )
    skipped: dict[str, int] | None = Field(
        None,
        description="reason → paths discovery refused (files, and directory symlinks out of the agent's "
        "folder or looping, each once; FIFOs and devices, hard links with a name outside)",
    )
    skipped_examples: list[dict[str, Any]] | None = Field(
        None, description="the first 20 refused files: path, reason"
    )


class SourcesResult(Shape):
    """What was found per agent, and config.toml's warnings (`ctxkeep sources --json`)."""

    rows: list[SourceRow] = Field(
        description="one per agent: the agents found first (most sessions, then most files, then the "
        "newest ingest), then the others in the registry's order"
    )
    warnings: list[str] = Field(description="config.toml's unknown keys, each with the closest valid one")
    config_file: str = Field(description="the config.toml read")
    tombstones: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the standing tombstones of earlier purges: scope (project, session), value (dir or "
        "id), purged_at (ISO-8601 UTC), a project's sessions (the session tombstones its purge added), "
        "a session's project (when a project's purge added it); every ingest skips what they name, new "
        "sessions of a project too (`purge --reingest` lifts one)",
    )


def _purged_reason(purged: list[dict], files: int) -> str:
    """Why ``purged`` (the standing tombstones of some of an agent's ``files``, one per
    file) keep them out: ``"purged (tombstone, 2026-12-06): skipped by every ingest -
    `ctxkeep purge --reingest --project DIR` lifts it"``, the files counted when not
    all of them are."""
    tombs = list({(t["scope"], t["value"]): t for t in purged}.values())
    days = sorted({(t["purged_at"] or "")[:10] for t in tombs} - {""})
    what = "purged" if len(purged) == files else f"{len(purged):,} of {files:,} files purged"
    if len(tombs) == 1:
        t = tombs[0]
        scope, value = ("project", t["project"]) if t.get("project") else (t["scope"], t["value"])
        lift = f"`ctxkeep purge --reingest --{scope} {value}` lifts it"
    else:
        lift = f"`ctxkeep purge --reingest --project DIR` or `--session ID` lifts one ({len(tombs):,} tombstones)"
    return f"{what} (tombstone, {', '.join(days) or 'date not recorded'}): skipped by every ingest - {lift}"


def _paths(n: int) -> str:
    return f"{n:,} path" + ("" if n == 1 else "s")


def _file_bytes(p: Path) -> int:
    """Bytes of a session file; a SQLite database counts its ``-wal`` too."""
    total = 0
    for q in (p, Path(str(p) + "-wal")):
        try:
            total += q.stat().st_size
        except OSError:
            pass
    return total


def _common_dir(paths: list[Path]) -> str | None:
    """The deepest folder holding all ``paths`` (None for none)."""
    if not paths:
        return None
    try:
        return os.path.commonpath([str(p.parent) for p in paths])
    except ValueError:  # different drives
        return str(paths[0].parent)


def sources(home: Path, req: SourcesRequest, *, env: dict | None = None) -> SourcesResult:
    """One row per registered agent (and per agent configured that ctxkeep has no
    source for): the agents found first (``_found_first``), then the others.

    Returns rows: ``agent``, ``found`` (files here or data in the store), ``listed``
    (found, named in ``config.toml``, or with files refused: what ``ctxkeep sources``
    shows without ``--all``), ``enabled`` (bool), ``searched`` (paths looked at),
    ``files`` (found), ``bytes`` (their size in bytes, ``-wal`` included),
    ``sessions``/``entries`` (in the store), ``kinds`` ({kind: n}), ``quarantined``
    (skipped lines/rows), ``last_ingest`` (ISO UTC: when ctxkeep last read new data
    of this agent; None: never), ``where`` (the folder
    holding the files found, or None), ``reason`` (a plain
    sentence when nothing was found, or a note such as a missing configured dir or a
    database opened immutable, and what is held back for a later ingest), ``held_back``
    (``pipeline.summary.held_back`` rows of the agent: files changed in the last
    ``CTXKEEP_IDLE_SECONDS`` whose last turn waits, unfinished last lines), ``skipped``
    ({reason: files} that discovery refused: symlinks out of the agent's folder, symlink
    loops (each directory symlink counted once even with no session file behind it:
    ``confine.count_dir_links``), FIFOs and devices, hard links; ``sources.confine``) and ``skipped_examples``
    (the first 20 of them: ``{"path", "reason"}``).

    ``env``: the environment to discover with (default: this process's). Returns the
    rows and ``warnings``: ``config.toml``'s unknown keys (each with the closest valid
    one) and ``tombstones``: the standing tombstones (``{"scope", "value",
    "purged_at"}``, the projects first: newuser23 F1). Raises ConfigError for a broken
    ``config.toml``.
    """
    from ctxkeep import config as cfgmod
    from ctxkeep.query.stats import agent_counts
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.sources import SOURCES, discover_all
    from ctxkeep.sources.confine import count_dir_links
    from ctxkeep.sources.contract import DiscoveryContext

    env = dict(os.environ if env is None else env)
    cfg = cfgmod.load_config(home, env)
    ctx = DiscoveryContext(home=Path(env.get("HOME") or Path.home()), env=env)
    discoveries = discover_all(
        ctx,
        enabled={a: cfg.agent(a).enabled for a in SOURCES},
        extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES},
    )
    for d in discoveries:  # the directory links no session file was refused through
        count_dir_links(d, ctx.home)
    counts: dict = {}
    notes: dict[str, list[str]] = {}
    held: dict[str, list[dict]] = {}
    from ctxkeep.pipeline.summary import held_back, held_back_line

    tombs: list[dict] = []
    purged_paths: dict = {}  # a purged file's path → its standing tombstone
    if (home / STORE_DB).exists():
        with reading(home) as conn:
            counts = agent_counts(conn)
            tombs = [
                {"scope": sc, "value": v, "purged_at": at}
                for sc, v, at in conn.execute(
                    "SELECT scope, value, created_at FROM tombstones ORDER BY scope <> 'project', created_at, value"
                )
            ]
            # what each purge remembered (``sinks.sqlite.tombstones.add``): a project's
            # sessions (tombstoned with it) and the files it skipped
            owned: dict[tuple[str, str], list[str]] = {}
            for sc, v, kind, item in conn.execute(
                "SELECT scope, value, kind, item FROM purge_files ORDER BY scope, value, kind, item"
            ):
                if kind == "session":
                    owned.setdefault((sc, v), []).append(item)
                elif kind == "path":
                    purged_paths.setdefault(item, (sc, v))
            by_key = {(t["scope"], t["value"]): t for t in tombs}
            for t in tombs:
                if t["scope"] == "project":
                    t["sessions"] = [
                        sid for sid in owned.get(("project", t["value"]), []) if ("session", sid) in by_key
                    ]
                    for sid in t["sessions"]:
                        by_key[("session", sid)]["project"] = t["value"]
            purged_paths = {p: by_key[k] for p, k in purged_paths.items() if k in by_key}
            for r in held_back(conn):
                held.setdefault(r["agent"], []).append(r)
            for agent, state in conn.execute(
                "SELECT agent, state FROM watermarks WHERE state LIKE '%\"note\"%'"
            ):
                note = json.loads(state or "{}").get("note")
                if note and note not in notes.setdefault(agent, []):
                    notes[agent].append(note)
    rows = []
    for d in discoveries:
        c = counts.get(d.agent, {})
        parts = [d.reason] if d.reason else []
        purged = [purged_paths[str(f.path)] for f in d.files if str(f.path) in purged_paths]
        if purged:  # every ingest skips them: "not ingested yet" misled (newuser24 F4)
            parts.insert(0, _purged_reason(purged, len(d.files)))
        if d.files and not c.get("entries") and len(purged) < len(d.files):
            parts.insert(0, "found but not ingested yet: run `ctxkeep ingest`")
        parts += notes.get(d.agent, [])
        if d.skipped:
            # one reason: "skipped 1 path: <why>"; several: each with its count
            # ("… folder 1" read as a typo: newuser15 F9)
            why = sorted(d.skipped.items())
            parts.append(
                f"skipped {_paths(sum(d.skipped.values()))}: "
                + (why[0][0] if len(why) == 1 else ", ".join(f"{w} ({n:,})" for w, n in why))
            )
        line = held_back_line(held.get(d.agent, []))
        if line:
            parts.append(line)
        reason = "; ".join(parts) or None
        rows.append(
            {
                "agent": d.agent,
                "enabled": cfg.agent(d.agent).enabled,
                "searched": [str(p) for p in d.searched],
                "files": len(d.files),
                "bytes": sum(_file_bytes(f.path) for f in d.files),
                "sessions": c.get("sessions", 0),
                "entries": c.get("entries", 0),
                "kinds": c.get("kinds", {}),
                "quarantined": c.get("quarantined", 0),
                "last_ingest": c.get("last_ingest"),
                "reason": reason,
                "where": _common_dir([f.path for f in d.files]),
                "held_back": held.get(d.agent, []),
                "skipped": dict(d.skipped),
                "skipped_examples": [{"path": p, "reason": why} for p, why in d.skipped_examples],
            }
        )
    for name in cfgmod.unknown_agents(cfg, SOURCES):
        near = cfgmod.closest(name, list(SOURCES))
        rows.append(
            {
                "agent": name,
                "enabled": cfg.agent(name).enabled,
                "searched": [],
                "files": 0,
                "bytes": 0,
                "sessions": 0,
                "entries": 0,
                "kinds": {},
                "quarantined": 0,
                "last_ingest": None,
                "where": None,
                "reason": "configured, but ctxkeep has no source for this agent"
                + (f" - did you mean {near}?" if near else " (known: " + ", ".join(SOURCES) + ")"),
                "held_back": [],
                "skipped": {},
                "skipped_examples": [],
            }
        )
    for r in rows:
        r["found"] = bool(r["files"] or r["sessions"] or r["entries"] or r["quarantined"])
        r["listed"] = r["found"] or r["agent"] in cfg.agents or bool(r["skipped"])
    return SourcesResult(
        rows=_found_first(rows),
        warnings=cfg.warnings,
        config_file=str(home / cfgmod.CONFIG_FILE),
        tombstones=tombs,
    )


def _found_first(rows: list[dict]) -> list[dict]:
    """``rows`` with the found agents first, most sessions first (then most files, then
    the newest ``last_ingest``, then by name), the others after them in their given
    order (the registry's, then the configured agents without a source)."""
    found = [r for r in rows if r["found"]]
    found.sort(key=lambda r: r["agent"])
    found.sort(key=lambda r: r["last_ingest"] or "", reverse=True)
    found.sort(key=lambda r: (-r["sessions"], -r["files"]))
    return found + [r for r in rows if not r["found"]]

"""``ctxkeep sources``: what was found per agent, and why not.

Read-only and fast: runs every source's discovery (no file is parsed) and reads the
store's per-agent counts. Never imports Prefect.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from ctxkeep import config as cfgmod
from ctxkeep.cli import HomeOpt, JsonOpt, _count, _fail, _home, _print_json, _size, app, out, table
from ctxkeep.errors import CtxkeepError


def fail_config(e: Exception):
    """``_fail`` for a command that reads ``config.toml``: a ConfigError with several
    ``problems`` prints one ``error:`` line per problem (file, key, value, what is
    wrong); exit 1."""
    from ctxkeep.errors import ConfigError

    if isinstance(e, ConfigError) and len(e.problems) > 1:
        for p in e.problems:
            typer.echo(f"error: {p} - fix config.toml", err=True)
        raise typer.Exit(1)
    _fail(e)


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


def sources_report(home: Path, env: dict | None = None) -> list[dict]:
    """One row per registered agent.

    Returns dicts: ``agent``, ``enabled`` (bool), ``searched`` (paths looked at),
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
    loops, FIFOs and devices, hard links; ``sources.confine``) and ``skipped_examples``
    (the first 20 of them: ``{"path", "reason"}``).

    Returns ``(rows, warnings)``: ``warnings`` are ``config.toml``'s unknown keys (each
    with the closest valid one). Raises ConfigError for a broken ``config.toml``.
    """
    from ctxkeep.query.stats import agent_counts
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.sources import SOURCES, discover_all
    from ctxkeep.sources.contract import DiscoveryContext

    env = dict(os.environ if env is None else env)
    cfg = cfgmod.load_config(home, env)
    ctx = DiscoveryContext(home=Path(env.get("HOME") or Path.home()), env=env)
    discoveries = discover_all(
        ctx,
        enabled={a: cfg.agent(a).enabled for a in SOURCES},
        extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES},
    )
    counts: dict = {}
    notes: dict[str, list[str]] = {}
    held: dict[str, list[dict]] = {}
    from ctxkeep.pipeline.summary import held_back, held_back_line

    if (home / STORE_DB).exists():
        conn = sqlite_store.connect(home, readonly=True)
        try:
            counts = agent_counts(conn)
            for r in held_back(conn):
                held.setdefault(r["agent"], []).append(r)
            for agent, state in conn.execute(
                "SELECT agent, state FROM watermarks WHERE state LIKE '%\"note\"%'"
            ):
                note = json.loads(state or "{}").get("note")
                if note and note not in notes.setdefault(agent, []):
                    notes[agent].append(note)
        finally:
            conn.close()
    rows = []
    for d in discoveries:
        c = counts.get(d.agent, {})
        parts = [d.reason] if d.reason else []
        if d.files and not c.get("entries"):
            parts.insert(0, "found but not ingested yet: run `ctxkeep ingest`")
        parts += notes.get(d.agent, [])
        if d.skipped:
            parts.append(
                f"skipped {_count(sum(d.skipped.values()), 'file')}: "
                + ", ".join(f"{why} {n:,}" for why, n in sorted(d.skipped.items()))
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
    return rows, cfg.warnings


def _rate(r: float | None) -> str:
    return "-" if r is None else f"{r:.1%}"


def _render_coverage(h: Path, agents: list[str], as_json: bool) -> None:
    """``sources --coverage``: the coverage ledger (``service.coverage``), rendered."""
    from ctxkeep.service.coverage import CoverageRequest, coverage

    try:
        res = coverage(h, CoverageRequest.parse(agent=agents or None))
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(res.as_json())
        return
    if not res.store:
        out.print(f"no store at {h} yet: run `ctxkeep ingest`", highlight=False)
        return
    if not res.rows:
        out.print(
            "the coverage ledger is empty: files are counted when an ingest reads them", highlight=False
        )
        return
    t = table(title="ctxkeep coverage ledger", title_justify="left")
    t.add_column("agent", no_wrap=True)
    t.add_column("version", no_wrap=True)
    t.add_column("parser", justify="right", no_wrap=True)
    for col in ("files", "records", "parsed", "rate", "entries", "quarant."):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("not understood (records)", overflow="fold", min_width=20, ratio=1)
    from rich.markup import escape

    for r in res.rows:
        t.add_row(
            r.agent,
            escape(r.agent_version or "?"),
            f"v{r.parser_version}",
            f"{r.files:,}",
            f"{r.records:,}",
            f"{r.parsed:,}",
            _rate(r.parse_rate),
            f"{r.entries:,}",
            f"{r.quarantined:,}",
            escape(", ".join(f"{k} ({u.count:,})" for k, u in r.unknown.items())),
        )
    out.print(t)
    for a in res.alerts:
        out.print(f"drift: {a.message}", highlight=False, markup=False, soft_wrap=True)
    if any(r.unknown for r in res.rows):
        out.print(
            "a sample line of each type not understood (redacted): `ctxkeep sources --coverage --json`",
            highlight=False,
            markup=False,
        )


#: searched places named per agent in the text output at most
_LOOKED_MAX = 4


def _where(r: dict) -> str:
    """The "where / why" of a ``sources_report`` row: the folder holding its files
    (and the note, if any), or why nothing was found and every place it looked."""
    where = r["where"] or r["reason"] or ""
    if r["where"] and r["reason"]:
        where += f" ({r['reason']})"
    if not r["files"] and r["searched"]:
        looked = r["searched"][:_LOOKED_MAX]
        more = len(r["searched"]) - len(looked)
        where += (
            ("; " if where else "") + "looked in " + ", ".join(looked) + (f" and {more} more" if more else "")
        )
    return where


@app.command()
def sources(
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
    coverage: bool = typer.Option(
        False,
        "--coverage",
        help="The coverage ledger: per agent version, records read, parsed, quarantined, types not understood.",
    ),
    agent: list[str] = typer.Option(None, "--agent", help="With --coverage: only this agent (repeatable)."),
):
    """What was found per agent (where it looked, files, store counts), and why not."""
    h = _home(home)
    if coverage:
        _render_coverage(h, agent or [], as_json)
        return
    try:
        rows, warnings = sources_report(h)
    except CtxkeepError as e:
        fail_config(e)
    for w in warnings:
        typer.echo(f"warning: {h / cfgmod.CONFIG_FILE}: {w}", err=True)
    if as_json:
        _print_json(rows)
        return
    if out.width < 110:  # too narrow for the table: two lines per agent
        for r in rows:
            where = _where(r)
            out.print(
                f"[bold]{r['agent']}[/bold]{'' if r['enabled'] else ' (off)'}: {_count(r['files'], 'file')}, "
                f"{_size(r['bytes'])}, {_count(r['sessions'], 'session')}, "
                f"{_count(r['entries'], 'entry', 'entries')}, "
                f"{r['quarantined']:,} quarantined, last ingest "
                f"{(r['last_ingest'] or 'never')[:16].replace('T', ' ')}",
                highlight=False,
            )
            out.print(f"  {where}", highlight=False, markup=False)
        return
    t = table(title="ctxkeep sources", title_justify="left")
    t.add_column("agent", no_wrap=True)
    for col in ("files", "size", "sessions", "entries", "quarant."):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("last ingest", no_wrap=True, min_width=10)
    t.add_column("where / why", overflow="fold", min_width=24, ratio=1)
    from rich.markup import escape

    for r in rows:
        where = escape(_where(r))
        t.add_row(
            r["agent"] + ("" if r["enabled"] else " (off)"),
            f"{r['files']:,}",
            _size(r["bytes"]),
            f"{r['sessions']:,}",
            f"{r['entries']:,}",
            f"{r['quarantined']:,}",
            (r["last_ingest"] or "never")[:16].replace("T", " "),
            where,
        )
    out.print(t)

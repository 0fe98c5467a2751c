"""Core commands: ingest (the main job), search, show, stats."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from .. import config as cfgmod
from ..errors import CtxkeepError
from . import HomeOpt, JsonOpt, _fail, _home, _mb, _print_json, app, err, out


@app.command()
def ingest(
    agent: List[str] = typer.Option(None, "--agent", "-a", help="Only this agent (repeatable)."),
    path: List[Path] = typer.Option(None, "--path", "-p", help="Ingest this file or directory instead of discovering (repeatable)."),
    home: Optional[Path] = HomeOpt,
    as_json: bool = JsonOpt,
    no_prefect: bool = typer.Option(False, "--no-prefect", help="Run the pipeline in-process without Prefect orchestration."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
):
    """Ingest new session bytes of every agent into the store (the main job)."""
    from ..flows import pipeline
    from ..sinks import sqlite_store
    from ..sources import SOURCES

    h = _home(home)
    unknown = [a for a in agent or [] if a not in SOURCES]
    if unknown:
        _fail(CtxkeepError(f"unknown agent {', '.join(unknown)}",
                           hint="known: " + ", ".join(SOURCES)), 2)
    try:
        cfgmod.ensure_home(h)
        conn = sqlite_store.connect(h)
        try:
            p = pipeline.plan(h, conn, agents=agent or None, paths=path or None)
        finally:
            conn.close()
        for prob in p.problems:
            err.print(f"[yellow]warning:[/yellow] {prob}", highlight=False)
        if not p.todo:
            summary = pipeline.Summary(files=p.unchanged, problems=p.problems).as_dict()
        else:
            summary = _run_with_progress(h, agent, path, no_prefect, progress and not as_json)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(summary)
        return
    _print_summary(summary)


def _run_with_progress(h: Path, agent, path, no_prefect: bool, show: bool) -> dict:
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                               TimeRemainingColumn, TransferSpeedColumn)

    from ..flows import pipeline

    prog = Progress(TextColumn("ingest"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=err, disable=not show, transient=True)
    task_id = prog.add_task("ingest", total=None)
    pipeline.hooks.on_plan = lambda p: prog.update(task_id, total=p.pending_bytes or 1)
    pipeline.hooks.on_bytes = lambda n: prog.advance(task_id, n)
    with prog:
        if no_prefect:
            return pipeline.run_ingest(h, agents=agent or None, paths=path or None).as_dict()
        from ..flows.prefect_env import configure_prefect
        configure_prefect(h)
        from ..flows.ingest import ingest_flow
        return ingest_flow(str(h), agents=agent or None, paths=[str(x) for x in path or []])


def _print_summary(s: dict) -> None:
    line = (f"ingested {s['entries_new']:,} new entries from {s['files_read']:,} of {s['files']:,} files "
            f"({_mb(s['bytes'])}, {s['lines']:,} lines) in {s['seconds']:.1f} s; "
            f"quarantined {s['quarantined']:,} lines")
    out.print(line, highlight=False)
    if s.get("per_agent"):
        out.print("  " + ", ".join(f"{a}: {n:,}" for a, n in sorted(s["per_agent"].items())), highlight=False)
    if s.get("files_vanished"):
        out.print(f"  {s['files_vanished']} files vanished before they could be read", highlight=False)
    if s.get("analytics") and "not updated" in s["analytics"]:
        err.print(f"[yellow]warning:[/yellow] {s['analytics']}", highlight=False)


@app.command()
def search(
    query: str = typer.Argument(..., help="Words, \"phrases\", identifiers, paths; CJK works."),
    agent: Optional[str] = typer.Option(None, help="Only this agent."),
    project: Optional[str] = typer.Option(None, help="Only entries whose project dir starts with this path."),
    session: Optional[str] = typer.Option(None, help="Only this session id."),
    kind: Optional[str] = typer.Option(None, help="message, tool_call, tool_result, thinking, summary, meta."),
    limit: int = typer.Option(10, "--limit", "-n", min=1, max=1000, help="At most this many hits."),
    raw: bool = typer.Option(False, "--raw", help="Pass FTS5 query syntax through."),
    home: Optional[Path] = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Search the store (BM25; CJK and partial identifiers through the substring index)."""
    from ..sinks import sqlite_store
    from ..sinks.search import Filters, search as do_search

    try:
        conn = sqlite_store.connect(_home(home), readonly=True)
        hits = do_search(conn, query, filters=Filters(agent=agent, project=project, session=session,
                                                      kind=kind), limit=limit, raw=raw)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json([h.__dict__ for h in hits])
        return
    if not hits:
        out.print("no matches")
        return
    for h in hits:
        when = (h.ts or "")[:16].replace("T", " ")
        out.print(f"[bold]{h.entry_id}[/bold]  {h.agent}  {when}  {h.kind}"
                  + (f" {h.tool_name}" if h.tool_name else "") + f"  ~{h.token_estimate} tok",
                  highlight=False)
        out.print("   " + " ".join(h.snippet.split())[:300], highlight=False, markup=False)


@app.command()
def show(
    entry_ids: List[str] = typer.Argument(..., help="Entry ids from `ctxkeep search`."),
    home: Optional[Path] = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Print the full contents of entries (tier 2 of a search)."""
    from ..sinks import sqlite_store

    try:
        conn = sqlite_store.connect(_home(home), readonly=True)
    except CtxkeepError as e:
        _fail(e)
    rows = []
    for eid in entry_ids:
        r = conn.execute("SELECT entry_id, agent, session_id, ts, role, kind, tool_name, content_hash, "
                         "source_path, source_offset FROM entries WHERE entry_id = ? OR entry_id LIKE ?",
                         (eid, eid + "%")).fetchone()
        if r is None:
            err.print(f"[yellow]warning:[/yellow] no entry {eid}", highlight=False)
            continue
        keys = ["entry_id", "agent", "session_id", "ts", "role", "kind", "tool_name", "content_hash",
                "source_path", "source_offset"]
        d = dict(zip(keys, r))
        d["text"] = sqlite_store.content_text(conn, d["content_hash"]) if d["content_hash"] else ""
        rows.append(d)
    if as_json:
        _print_json(rows)
    else:
        for d in rows:
            out.print(f"[bold]{d['entry_id']}[/bold] {d['agent']} {d['session_id']} {d['ts']} "
                      f"{d['role']}/{d['kind']} {d['tool_name'] or ''}", highlight=False)
            out.print(f"  from {d['source_path']} @ {d['source_offset']}", highlight=False)
            out.print(d["text"], highlight=False, markup=False)
    if not rows:
        raise typer.Exit(1)


@app.command()
def stats(home: Optional[Path] = HomeOpt, as_json: bool = JsonOpt):
    """Counts and sizes of the store (read-only)."""
    from ..sinks import sqlite_store
    from ..sinks.stats import store_stats

    h = _home(home)
    try:
        conn = sqlite_store.connect(h, readonly=True)
        s = store_stats(conn, h)
    except CtxkeepError as e:
        _fail(e)
    if as_json:
        _print_json(s)
        return
    t = Table(title=f"ctxkeep store {h}")
    for c in ("agent", "sessions", "entries", "messages", "tool calls", "tool results", "text", "tokens"):
        t.add_column(c, justify="right" if c != "agent" else "left")
    for a, d in s["agents"].items():
        k = d["kinds"]
        t.add_row(a, f"{d['sessions']:,}", f"{d['entries']:,}", f"{k.get('message', 0):,}",
                  f"{k.get('tool_call', 0):,}", f"{k.get('tool_result', 0):,}", _mb(d["text_bytes"]),
                  f"{d['token_estimate']:,}")
    out.print(t)
    c = s["contents"]
    out.print(f"distinct contents {c['distinct']:,} ({_mb(c['bytes'])}, {c['token_estimate']:,} tokens); "
              f"quarantined lines {s['quarantine']['skipped']:,} skipped, {s['quarantine']['repaired']:,} repaired",
              highlight=False)
    u = s["usage"]
    out.print(f"usage: {u['responses']:,} responses, input {u['input_tokens']:,}, output {u['output_tokens']:,}, "
              f"cache read {u['cache_read_tokens']:,}, cache write {u['cache_creation_tokens']:,} tokens",
              highlight=False)
    out.print("files: " + ", ".join(f"{k} {_mb(v)}" for k, v in s["files"].items())
              + f"; last ingest {s['last_ingest'] or 'never'}", highlight=False)



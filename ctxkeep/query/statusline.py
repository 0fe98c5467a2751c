"""``ctxkeep statusline``: one line for Claude Code's ``statusLine`` command.

Claude Code runs the command on every update and sends JSON on stdin (``session_id``,
``transcript_path``, ``model.display_name``, ``workspace`` …; Claude Code 1.0.x docs
"Status line configuration"). The line: today's cost (every agent, local day, auto
mode), the active 5-hour block (cost, burn rate, time left) and the session's context
fill (the input side of its last response: input + cache read + cache creation, as a
share of the model's window).

Speed: importing DuckDB alone takes ~0.2 s, more than a status line may. The figures
are therefore computed from DuckDB (``query.reports.statusline_figures``) only when
``analytics.duckdb`` changed (its and its WAL's size and mtime) or the session is new,
and cached in ``<home>/statusline.json``; a cached call imports only ``json`` and ``os``
and derives what depends on the clock (the day, the block's time left) at print time.
``python -m ctxkeep.query.statusline`` skips even the CLI's Typer import.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

CACHE = "statusline.json"
#: ccusage's block length (hours)
_BLOCK = dt.timedelta(hours=5)
#: context windows (tokens): a ``[1m]`` model id or "1M" in the display name has 1M
_WINDOW, _WINDOW_1M = 200_000, 1_000_000


def _signature(home: Path) -> list:
    """Size and mtime of the home's DuckDB and SQLite files (the analytics store, the
    store and their WALs, ``sinks.files``; not SQLite's ``-shm``, which readers write):
    a hook's ingest writes SQLite only and leaves DuckDB to its readers
    (``reports.open_store`` brings it current); importing that registry would import
    ``config`` (~20 ms)."""
    try:
        with os.scandir(home) as it:
            return sorted(
                [e.name, e.stat().st_size, e.stat().st_mtime_ns]
                for e in it
                if e.name.endswith((".duckdb", ".wal", ".db", ".db-wal")) and e.is_file()
            )
    except OSError:
        return []


def _compute(home: Path, tz: str, session_id: str | None) -> dict:
    """The cache record from DuckDB (slow path): the costs of the last 3 local days,
    the last block and the session's context."""
    from ctxkeep.query import reports as R

    con, lag = R.open_store(home, wait=0)  # a status line never waits for an ingest
    try:
        today = dt.datetime.now(dt.UTC).astimezone(R.ZoneInfo(tz)).date()
        daily = R.usage_report(con, "daily", R.Filters(tz, today - dt.timedelta(days=2), None))
        days: dict[str, float] = {}
        for r in daily.rows:
            days[r.period] = days.get(r.period, 0.0) + (r.cost_usd or 0.0)
        blocks = [
            b
            # Claude Code's status line: Anthropic's quota window (a Codex or Gemini
            # response never moves it)
            for b in R.blocks_report(
                con, R.Filters(tz, today - dt.timedelta(days=2), None), provider="anthropic"
            ).rows
            if not b.is_gap
        ]
        last = blocks[-1] if blocks else None
        fig = R.statusline_figures(con, tz, session_id) if session_id else {"session": None}
    finally:
        con.close()
    return {
        "tz": tz,
        "days": days,
        "block": None
        if last is None
        else {
            "start": last.start.timestamp(),
            "end": last.end.timestamp(),
            "first": last.first.timestamp() if last.first else None,
            "last": last.actual_end.timestamp() if last.actual_end else None,
            "cost_usd": last.cost_usd or 0.0,
            "total_tokens": last.total_tokens,
        },
        "sessions": {session_id: fig["session"]} if session_id else {},
        "lag": lag,
    }


def figures(home: Path, tz: str, session_id: str | None) -> dict:
    """The cached record for ``home``, recomputed when ``analytics.duckdb`` changed,
    the zone differs or ``session_id`` is not in it. Raises ``CtxkeepError`` (from
    ``reports.open_store``) when there is no store and no cache."""
    path = home / CACHE
    sig = _signature(home)
    cached = None
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    if (
        cached
        and cached.get("sig") == sig
        and cached.get("tz") == tz
        and (not session_id or session_id in cached.get("sessions", {}))
    ):
        return cached
    try:
        rec = _compute(home, tz, session_id)
    except Exception:
        if cached:  # held by an ingest, or damaged: the last figures beat none
            return cached
        raise
    if cached and cached.get("sig") == sig and cached.get("tz") == tz:
        rec["sessions"] = {**cached.get("sessions", {}), **rec["sessions"]}
    # DuckDB still lags behind SQLite (an ingest held the store): computed again next
    # time; else the files as the compute left them (bringing DuckDB current writes it)
    rec["sig"] = None if rec.pop("lag", None) else _signature(home)
    tmp = path.with_suffix(".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # user-only, as the store
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(rec))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except OSError:  # a cache: a full or read-only disk only costs the next computation
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    return rec


def _tz_now(tz: str) -> dt.datetime:

    return dt.datetime.now(ZoneInfo(tz))


def render(rec: dict, info: dict, now: dt.datetime) -> str:
    """The status line from a cache record ``rec`` and Claude Code's stdin JSON
    ``info`` at ``now`` (aware)."""
    parts = []
    model = (info.get("model") or {}).get("display_name") if isinstance(info.get("model"), dict) else None
    if model:
        parts.append(model)
    day = now.date().isoformat()
    parts.append(f"${rec.get('days', {}).get(day, 0.0):,.2f} today")
    b = rec.get("block")
    t = now.timestamp()
    if b and b.get("last") is not None and t - b["last"] < _BLOCK.total_seconds() and t < b["end"]:
        left = int((b["end"] - t) // 60)
        minutes = (b["last"] - b["first"]) / 60 if b.get("first") is not None else 0
        rate = f", ${b['cost_usd'] / minutes * 60:,.2f}/h" if minutes > 0 else ""
        parts.append(f"block ${b['cost_usd']:,.2f}{rate}, {left // 60}h {left % 60:02d}m left")
    else:
        parts.append("no active block")
    s = (rec.get("sessions") or {}).get(info.get("session_id") or "")
    if s:
        mid = (
            ((info.get("model") or {}).get("id") or s.get("model") or "")
            if isinstance(info.get("model"), dict)
            else ""
        )
        big = "[1m]" in mid.lower() or "1m" in (model or "").lower().replace(" ", "")
        window = _WINDOW_1M if big else _WINDOW
        parts.append(f"ctx {s['context_tokens']:,} ({s['context_tokens'] / window:.0%})")
    return " | ".join(parts)


def read_info(stream) -> dict:
    """Claude Code's stdin JSON as a dict ({} when stdin is a terminal, empty or not
    JSON)."""
    try:
        if stream is None or stream.isatty():
            return {}
        data = stream.read()
        obj = json.loads(data) if data.strip() else {}
        return obj if isinstance(obj, dict) else {}
    except (OSError, ValueError):
        return {}


def line(home: Path, stream, tz: str | None = None, now: dt.datetime | None = None) -> str:
    """The whole status line for ``home`` (never raises: a problem becomes the line,
    e.g. ``ctxkeep: no analytics store - run ctxkeep ingest``; a status line must not
    print a traceback into Claude Code)."""
    info = read_info(stream)
    try:
        from ctxkeep.timeutil import local_timezone

        tz = tz or local_timezone()
        now = now or _tz_now(tz)
        rec = figures(Path(home), tz, info.get("session_id"))
        return render(rec, info, now)
    except Exception as e:  # the line is all a status line can show
        msg = getattr(e, "message", None) or (str(e).splitlines()[0] if str(e) else type(e).__name__)
        hint = getattr(e, "hint", None)
        return f"ctxkeep: {msg}" + (f" - {hint}" if hint else "")


def main() -> None:
    """``python -m ctxkeep.query.statusline [--home DIR]``: the line without the CLI's
    start-up cost. Home: ``--home``, else ``$CTXKEEP_HOME``, else the platform data dir."""
    args = sys.argv[1:]
    home = None
    if "--home" in args and args.index("--home") + 1 < len(args):
        home = args[args.index("--home") + 1]
    home = home or os.environ.get("CTXKEEP_HOME")
    if home:
        h = Path(home).expanduser().resolve()
    else:
        from ctxkeep.config import resolve_home

        h = resolve_home(None)
    sys.stdout.write(line(h, sys.stdin) + "\n")


if __name__ == "__main__":
    main()

"""``ctxkeep statusline``: one line for Claude Code's ``statusLine`` command.

Claude Code runs the command on every update and sends JSON on stdin: ``session_id``,
``transcript_path`` (the session's JSONL), ``model`` (``id``, ``display_name``),
``workspace`` (``current_dir``, ``project_dir``), ``version``, ``cost``
(``total_cost_usd``: Claude Code's own estimate, ``total_duration_ms`` …) and, in newer
versions, ``context_window`` (``context_window_size``, ``current_usage`` with
``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens``) — Claude
Code docs, "Customize your status line" (https://code.claude.com/docs/en/statusline,
"Available data"). The line (as ccusage's ``statusline``): the model, the session's
cost, today's cost (every agent, local day, auto mode), the active 5-hour block (cost,
burn rate, time left) and the session's context fill (the input side of its last
response: input + cache read + cache creation, as a share of the window).

Fresh without ``serve``: the store knows a transcript up to its watermark (the byte
offset the last ingest stored, ``watermarks`` in ``store.db``); the lines after it
(the unread tail, at most ``TAIL_MAX`` bytes of its end) are read here, each API
response once (by ``message.id``, as the Claude Code source does), priced with
``transforms.cost.response_cost`` (the price the next ingest will store) and added to
the session's, today's and the block's figures; the tail's last response gives the
context unless stdin's ``context_window.current_usage`` does. Without any ctxkeep
figure for the session (no store row, no priced tail) the session's cost is Claude
Code's ``cost.total_cost_usd``.

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
#: the most bytes of a transcript's unread tail read (its end; a longer tail is an
#: ingest overdue: its start is left to that ingest)
TAIL_MAX = 8 << 20
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
    s = (rec.get("sessions") or {}).get(info.get("session_id") or "") or {}
    spent = s.get("cost_usd")
    claude = (info.get("cost") or {}).get("total_cost_usd") if isinstance(info.get("cost"), dict) else None
    if spent is None and isinstance(claude, int | float) and not isinstance(claude, bool):
        spent = float(claude)  # Claude Code's own estimate: ctxkeep knows nothing of it yet
    if spent is not None:
        parts.append(f"${spent:,.2f} session")
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
    raw_cw = info.get("context_window")
    cw: dict = raw_cw if isinstance(raw_cw, dict) else {}
    cur = cw.get("current_usage") if isinstance(cw.get("current_usage"), dict) else None
    if cur is not None:  # Claude Code's own count of the context (newer versions)
        used = sum(
            v for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            if isinstance(v := cur.get(k), int) and not isinstance(v, bool)
        )  # fmt: skip
        size = cw.get("context_window_size")
        window = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else _WINDOW
        parts.append(f"ctx {used:,} ({used / window:.0%})")
    elif s and s.get("context_tokens") is not None:
        mid = (
            ((info.get("model") or {}).get("id") or s.get("model") or "")
            if isinstance(info.get("model"), dict)
            else ""
        )
        big = "[1m]" in mid.lower() or "1m" in (model or "").lower().replace(" ", "")
        window = _WINDOW_1M if big else _WINDOW
        parts.append(f"ctx {s['context_tokens']:,} ({s['context_tokens'] / window:.0%})")
    return " | ".join(parts)


def _watermark(home: Path, path: Path) -> tuple[int, int | None]:
    """The byte offset up to which the store holds ``path`` (0: never read), and the
    length of the unended last line after it that an ingest took as final and stored
    (``sources.readers.jsonl``: its watermark's ``state["_unended"]``; None: none)."""
    import sqlite3

    from ctxkeep.errors import StoreError
    from ctxkeep.sinks.files import STORE_DB
    from ctxkeep.sinks.sqlite.readonly import open_ro

    db = home / STORE_DB
    if not db.is_file():
        return 0, None
    try:
        conn = open_ro(db, timeout=0.2)  # (a killed first ingest's hot journal rolled back)
        try:
            row = conn.execute(
                "SELECT offset, CASE WHEN json_valid(state) THEN json_extract(state, '$._unended.len') END "
                "FROM watermarks WHERE path IN (?, ?) ORDER BY offset DESC LIMIT 1",
                (str(path), str(path.resolve())),
            ).fetchone()
        finally:
            conn.close()
    except (sqlite3.Error, StoreError):  # held, damaged or a journal left on a read-only
        # mount: the tail is then the whole file's end
        return 0, None
    if not row:
        return 0, None
    return int(row[0] or 0), (int(row[1]) if isinstance(row[1], int) else None)


def unread_tail(home: Path, transcript: str | None) -> list[dict]:
    """The API responses of a Claude Code transcript after the store's watermark, once
    each (the last line of a ``message.id``): ``ts`` (epoch seconds or None),
    ``model``, ``inp``/``cr``/``cw``/``h``/``out`` (non-cached input, cache read, cache
    write, of it one-hour, output tokens) and ``logged`` (``costUSD``, or None). Only
    whole lines (ending in a newline) are read; a bad line is skipped (the ingest
    quarantines it). [] without a readable transcript."""
    if not transcript:
        return []
    path = Path(transcript).expanduser()
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mark, judged = _watermark(home, path)
            if mark > size:  # rewritten shorter: the next ingest reads it again
                mark, judged = 0, None
            if judged is not None and mark + judged < size:
                # the judged line is stored: ended as it was, it is no unread tail (if it
                # grew instead, the next ingest reads it whole, and so does this tail)
                f.seek(mark + judged)
                if f.read(1) == b"\n":
                    mark += judged + 1
            start = max(mark, size - TAIL_MAX)
            f.seek(start)
            data = f.read(size - start)
    except OSError:
        return []
    lines = data.split(b"\n")[:-1]  # the last piece has no newline yet
    if start != mark and lines:
        lines = lines[1:]  # began mid-line (the TAIL_MAX cut)
    seen: dict[str, dict] = {}
    for raw in lines:
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        if (
            rec.get("type") != "assistant"
            or not isinstance(msg, dict)
            or not isinstance(msg.get("usage"), dict)
        ):
            continue
        u = msg["usage"]

        def n(v) -> int:
            return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0

        split = u.get("cache_creation") if isinstance(u.get("cache_creation"), dict) else {}
        try:
            ts = dt.datetime.fromisoformat(str(rec.get("timestamp")).replace("Z", "+00:00")).timestamp()
        except ValueError:
            ts = None
        logged = rec.get("costUSD")
        mid = msg.get("id")
        key = mid if isinstance(mid, str) else f"line:{len(seen)}:{rec.get('uuid')}"
        seen[key] = {
            "ts": ts,
            "model": msg.get("model") if isinstance(msg.get("model"), str) else None,
            "inp": n(u.get("input_tokens")),
            "cr": n(u.get("cache_read_input_tokens")),
            "cw": n(u.get("cache_creation_input_tokens")),
            "h": min(n(split.get("ephemeral_1h_input_tokens")), n(u.get("cache_creation_input_tokens"))),
            "out": n(u.get("output_tokens")),
            "logged": float(logged)
            if isinstance(logged, int | float) and not isinstance(logged, bool)
            else None,
        }
    return list(seen.values())


def price_tail(home: Path, tail: list[dict]) -> list[float | None]:
    """Each tail response's cost in USD, auto mode (the logged cost, else the
    calculated one with ``prices.toml``; None: unpriced)."""
    if not tail:
        return []
    from ctxkeep.transforms import cost

    try:
        text = (home / "prices.toml").read_text(encoding="utf-8")
        pricer = cost.Pricer(cost.parse_prices_toml(text))
    except (OSError, ValueError):
        pricer = cost.Pricer()
    out: list[float | None] = []
    for r in tail:
        day = dt.datetime.fromtimestamp(r["ts"], dt.UTC).date() if r["ts"] else dt.datetime.now(dt.UTC).date()
        out.append(
            r["logged"]
            if r["logged"] is not None
            else cost.response_cost(pricer, r["model"], day, r["inp"], r["cr"], r["cw"], r["h"], r["out"])
        )
    return out


def with_tail(rec: dict, info: dict, tail: list[dict], costs: list[float | None], tz: str) -> dict:
    """``rec`` with the unread tail's responses added (a copy): to the session's cost
    and context, to the days' costs (local days in ``tz``) and to the 5-hour block (a
    response after the block's end starts a new one at its UTC hour, as ccusage)."""
    rec = json.loads(json.dumps(rec))
    sid = info.get("session_id") or ""
    sessions = rec.setdefault("sessions", {})
    s = dict(sessions.get(sid) or {})
    zone = ZoneInfo(tz)
    days = rec.setdefault("days", {})
    b = rec.get("block")
    for r, c in sorted(zip(tail, costs, strict=True), key=lambda x: x[0]["ts"] or 0):
        s["context_tokens"] = r["inp"] + r["cr"] + r["cw"]
        s["model"] = r["model"] or s.get("model")
        if c is None:
            continue
        s["cost_usd"] = (s.get("cost_usd") or 0.0) + c
        if r["ts"] is None:
            continue
        day = dt.datetime.fromtimestamp(r["ts"], zone).date().isoformat()
        days[day] = days.get(day, 0.0) + c
        if b and b["start"] <= r["ts"] < b["end"]:
            b["cost_usd"] += c
            b["first"] = b["first"] if b.get("first") is not None else r["ts"]
            b["last"] = max(b.get("last") or r["ts"], r["ts"])
        elif not b or r["ts"] >= b["end"]:
            start = r["ts"] - r["ts"] % 3600
            b = {"start": start, "end": start + _BLOCK.total_seconds(), "first": r["ts"], "last": r["ts"],
                 "cost_usd": c, "total_tokens": 0}  # fmt: skip
    rec["block"] = b
    if s:
        sessions[sid] = s
    return rec


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
    e.g. ``ctxkeep: no analytics store - run ctxkeep ingest``, or for an option given
    wrong ``ctxkeep: unknown time zone 'Mars/Base' (--timezone) - give an IANA name …``;
    a status line must not print a traceback into Claude Code, and the command exits 0
    so that Claude Code shows the line)."""
    from ctxkeep.errors import UsageError

    info = read_info(stream)
    try:
        from ctxkeep.timeutil import check_timezone, local_timezone

        tz = check_timezone(tz or local_timezone())
        now = now or _tz_now(tz)
        home = Path(home)
        rec = figures(home, tz, info.get("session_id"))
        tail = unread_tail(home, info.get("transcript_path"))
        if tail:
            rec = with_tail(rec, info, tail, price_tail(home, tail), tz)
        return render(rec, info, now)
    except Exception as e:  # the line is all a status line can show
        msg = getattr(e, "message", None) or (str(e).splitlines()[0] if str(e) else type(e).__name__)
        hint = getattr(e, "hint", None)
        where = e.where if isinstance(e, UsageError) else None  # the option given wrong
        return f"ctxkeep: {msg}" + (f" ({where})" if where else "") + (f" - {hint}" if hint else "")


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

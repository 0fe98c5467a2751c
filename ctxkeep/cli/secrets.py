"""``ctxkeep secrets``: what redaction took out of the store (counts, never values), and
``--scrub`` to redact those values in the agents' own session files. Renders
``service.secrets``."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from ctxkeep.cli import (
    HomeOpt,
    JsonOpt,
    _count,
    _fail,
    _home,
    _print_json,
    app,
    err,
    failing,
    finishing,
    line_width,
    out,
    short_path,
    stopped,
    table,
    tables_alike,
)
from ctxkeep.errors import UsageError


@app.command()
def secrets(
    scrub: bool = typer.Option(
        False,
        "--scrub",
        help="Redact the values in the agents' own session files (verified backup first).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="With --scrub: list each file it would rewrite, with its values; write nothing.",
    ),
    files: list[Path] = typer.Argument(None, help="With --scrub: only these session files."),
    top: int = typer.Option(20, "--top", min=1, max=1000, help="Sessions to list, most values first."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="With --scrub: list each file an agent may be writing (refused)."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """What was redacted, per kind, agent, session and date (never the values); --scrub."""
    from ctxkeep.service import secrets as svc

    if (dry_run or files) and not scrub:
        _fail(
            UsageError("--dry-run and FILE need --scrub", hint="run `ctxkeep secrets --scrub --dry-run`"), 2
        )
    h = _home(home)
    res: svc.ScrubResult | svc.SecretsResult
    with failing():
        if scrub:
            show = not as_json and err.get().is_terminal
            res = svc.scrub(
                h,
                svc.ScrubRequest.parse(dry_run=dry_run, paths=files or None),
                on_file=(lambda r: err.print(f"{r.status}: {r.path}", highlight=False)) if show else None,
                on_stop=finishing,
            )
        else:
            res = svc.secrets_report(h, svc.SecretsRequest.parse(top=top))
    if as_json:
        _print_json(res.as_json())
    elif scrub:
        _print_scrub(res, verbose)
    else:
        _print_report(res, h)
    if isinstance(res, svc.ScrubResult) and res.interrupted:
        done = res.would_scrub if res.dry_run else res.scrubbed
        went = len(res.files)
        stopped(
            went,
            went + res.not_started,
            f"{done:,} {'would be scrubbed' if res.dry_run else 'scrubbed'}",
            res.interrupted,
        )


#: the columns of ``secrets``' sessions table
SESSION_COLUMNS = ("agent", "session", "values", "last seen", "kinds", "file")


def _print_report(r, home: Path) -> None:
    if not r.total and not r.quarantine.values:
        out.print("no redacted values in the store", highlight=False)
        _print_histories(r)
        return
    from ctxkeep.service.stats_core import UNIT_ENTRY, UNIT_RAW, UNIT_TEXT

    # one value, three units (newuser16 F6): each count says which, in the same words
    out.print(
        f"{_count(r.total, 'redacted value')}, counted {UNIT_ENTRY}, in the texts of "
        f"{_count(r.entries, 'entry', 'entries')} of {_count(r.sessions_total, 'session')}; "
        f"{_count(r.quarantine.values, 'value')} in {_count(r.quarantine.lines, 'quarantined line')}",
        highlight=False,
        soft_wrap=False,  # wrapped at the width
    )
    out.print(
        f"counted {UNIT_TEXT} (as `ctxkeep stats` does: a text several entries share counts once): "
        f"{r.text_values:,} in {_count(r.texts, 'distinct text')}",
        highlight=False,
        soft_wrap=False,
    )
    if r.vault.values:  # `vault status` and `vault restore` count the raw bytes
        out.print(
            f"counted {UNIT_RAW} the vault keeps (`vault status`, `vault restore`): {r.vault.values:,} "
            "(a raw line can hold a value twice, a tool result and the agent's own copy of it, or hold one "
            "no entry is made of)",
            highlight=False,
            soft_wrap=False,
        )
    # a narrow terminal (60 columns) leaves out "first seen" (--json has it), never
    # folds a kind's name (`url-creden` / `tials`)
    kinds = table(title="per kind")
    for c in ("kind", "values", "entries", "sessions", "first seen", "last seen"):
        kinds.add_column(
            c,
            justify="right" if c in ("values", "entries", "sessions") else "left",
            no_wrap=True,
            drop=1 if c == "first seen" else None,
        )
    for k, v in r.kinds.items():
        kinds.add_row(
            k,
            f"{v.values:,}",
            f"{v.entries:,}",
            f"{v.sessions:,}",
            _minute(v.first_seen),
            _minute(v.last_seen),
        )
    agents = table(title="per agent")
    for c in ("agent", "values", "sessions", "first seen", "last seen", "kinds"):
        agents.add_column(
            c,
            justify="right" if c in ("values", "sessions") else "left",
            no_wrap=c != "kinds",
            min_width=_widest_kind(r.agents) if c == "kinds" else None,
            drop=1 if c == "first seen" else None,
        )
    for a, v in r.agents.items():
        kinds_of = _kinds_of(v.kinds, 4)
        agents.add_row(
            a, f"{v.values:,}", f"{v.sessions:,}", _minute(v.first_seen), _minute(v.last_seen), kinds_of
        )
    dates = table(title="per date (UTC)")
    dates.add_column("date")
    dates.add_column("values", justify="right")
    dates.add_column("kinds")
    for d, per in r.dates.items():
        dates.add_row(d, f"{sum(per.values()):,}", _kinds_of(per, 4))
    sessions = table(title="sessions to look at")
    # ids whole and short (the prefix hits show, which `show`/`resume` take), paths with ~
    # and shortened from the left to what is left of the width: neither is ever folded
    from ctxkeep.service.report import short_ids

    short = short_ids(home, [x.session_id for x in r.sessions])
    rows = [
        (
            x.agent,
            short.get(x.session_id, x.session_id),
            f"{x.values:,}",
            _minute(x.last_seen),
            _kinds_of(x.kinds, 3),
            x.files[0] if x.files else "",
        )
        for x in r.sessions
    ]
    widest = [max([len(row[i]) for row in rows] + [len(c)]) for i, c in enumerate(SESSION_COLUMNS[:4])]
    kind_w = max([len(k) for row in rows for k in row[4].split(", ")] + [5])
    width = line_width() or 1_000_000
    # a narrow terminal (60 columns) leaves out "last seen" before the file's path gets
    # less than 20 columns (its end shows: `…/.crush/crush.db`)
    shown = [c for c in SESSION_COLUMNS if c != "last seen" or width - sum(widest) - kind_w - 6 >= 20]
    used = sum(w for w, c in zip(widest, SESSION_COLUMNS, strict=False) if c in shown)
    if len(shown) == len(SESSION_COLUMNS):
        room = max(24, width - used - kind_w - 6)
    else:  # the columns one space apart (60 columns)
        room = max(16, width - used - kind_w - (len(shown) - 1))
    for c in shown:
        sessions.add_column(
            c,
            justify="right" if c == "values" else "left",
            no_wrap=c != "kinds",
            min_width=kind_w if c == "kinds" else None,
        )
    if len(shown) < len(SESSION_COLUMNS):
        sessions.caption = f"not shown at {width} columns: last seen (--json has them)"
        sessions.caption_justify, sessions.caption_style = "left", "dim"
    for row in rows:
        cells = dict(
            zip(SESSION_COLUMNS, [*row[:5], short_path(row[5], room) if row[5] else ""], strict=True)
        )
        sessions.add_row(*(cells[c] for c in shown))
    tables_alike(kinds, agents, dates, sessions)  # one style, the one the widest needs
    for t in (kinds, agents, dates, sessions):
        out.print(t)
    if r.note:
        out.print(r.note, highlight=False, style="bold", soft_wrap=False)  # wrapped at the width
    _print_histories(r)


def _print_histories(r) -> None:
    """The agents' prompt histories holding values (newuser18 F3: a key pasted in a
    prompt stayed there, unreported): per file its kinds and lines, then what to do."""
    from ctxkeep.cli import fold, tilde
    from ctxkeep.service.secrets import line_ranges

    if not r.prompt_histories:
        return
    lines = ["the agents' prompt histories (not in the store; every prompt typed reaches them):"]
    for h in r.prompt_histories:
        where = "line" if len(h.lines) == 1 else "lines"
        lines.append(f"  {tilde(h.path)}: {_kinds_of(h.values, 4)} on {where} {line_ranges(h.lines)}")
    hand = [h for h in r.prompt_histories if not h.scrubbed_in_place]
    lines.append(
        "`ctxkeep secrets --scrub` redacts them in place"
        + (f" (not {', '.join(tilde(h.path) for h in hand)}: edit it by hand)" if hand else "")
        + "; rotate the keys"
    )
    for x in lines:
        for part in fold(x, indent="    "):
            out.print(part, highlight=False, markup=False)


def _print_scrub(r, verbose: bool = False) -> None:
    from ctxkeep.cli import fold, tilde  # (here: the import list above is busy on another branch)

    verb = "would scrub" if r.dry_run else "scrubbed"
    n = sum(r.values.values())
    out.print(
        f"{verb} {_count(n, 'value')} in {_count(r.would_scrub if r.dry_run else r.scrubbed, 'file')}; "
        f"{r.skipped} skipped, {r.failed} failed",
        highlight=False,
    )
    # the files an agent may be writing (modified within active_minutes): one line, in
    # compress's verb ("refused"); -v lists them (123 lines of ~240 columns, absolute
    # paths, nested parentheses: newuser16 F13); --json has each
    active = [f for f in r.files if f.status == "skipped" and _ACTIVE.match(f.reason or "")]
    for f in r.files:
        if f.status == "would-scrub":  # a dry run names what it would rewrite in place (newuser17 F10)
            w = line_width()
            n_f = _count(sum(f.values.values()), "value")
            where = tilde(f.path) if w is None else short_path(f.path, max(w - len(n_f) - 15, 20))
            for part in fold(f"would scrub: {where}: {n_f}", indent="    "):
                out.print(part, highlight=False, markup=False)
            continue
        # (a scrubbed file with a reason: its store bookkeeping was left to the next ingest)
        if f.status in ("skipped", "failed") or f.reason:
            if f in active and not verbose:
                continue
            status = "refused" if f in active else f.status
            w = line_width()
            where = tilde(f.path) if w is None else short_path(f.path, max(w - len(status) - 3, 20))
            for part in fold(f"{status}: {where}: {f.reason}", indent="    "):
                out.print(part, highlight=False, markup=False)
    if active and not verbose:
        m = _ACTIVE.match(active[0].reason or "")
        mins = m.group(1) if m else "?"
        for part in fold(
            f"refused {_count(len(active), 'file')} modified in the last {mins} min (the agent may be "
            "writing to them; [compress] active_minutes): run it again later; -v lists them"
        ):
            out.print(part, highlight=False, markup=False)
    if r.note:
        out.print(r.note, highlight=False, style="bold", soft_wrap=False)  # wrapped at the width
        for b in r.backups:
            out.print(f"  {b}", highlight=False)


#: a scrub's reason for a file an agent may be writing (``maintenance.scrub``)
_ACTIVE = re.compile(r"modified [\d.]+ min ago \(< active_minutes (\d+)\)")


def _kinds_of(kinds: dict[str, int], most: int) -> str:
    """``"<kind> <count>, ..."`` of the first ``most`` kinds (in the report's order), then
    ``+N more`` for the rest: a row whose kinds did not add up to its values, with
    nothing said, hid the keys a lead must rotate (newuser17 F5; ``--json`` lists all)."""
    items = list(kinds.items())
    shown = ", ".join(f"{k} {n}" for k, n in items[:most])
    return shown + (f", +{len(items) - most} more" if len(items) > most else "")


def _widest_kind(agents: dict) -> int:
    """The widest ``"<kind> <count>,"`` of the ``per agent`` rows' kinds: the column is
    at least that wide, so a kind folds between its items, never inside a name."""
    return max([len(f"{k} {n:,},") for a in agents.values() for k, n in a.kinds.items()] + [5])


def _minute(ts: str | None) -> str:
    """``2025-08-09 03:17`` of a stored UTC time (``--json`` has it whole)."""
    return (ts or "")[:16].replace("T", " ")

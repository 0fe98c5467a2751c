"""``ctxkeep compress``: the health report (``--check``), compression of oversized
session files and ``--restore``, as ``service.compress`` answers them (which decides
between a Prefect flow run and in-process). ``--check``, ``--dry-run`` and
``--restore`` never import Prefect."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxkeep.cli import (
    HomeOpt,
    JsonOpt,
    _count,
    _fail,
    _home,
    _print_json,
    _size,
    app,
    config_warnings,
    err,
    failing,
    finishing,
    fold,
    line_width,
    out,
    say,
    say_folded,
    short_path,
    stopped,
    table,
    tilde,
    warn,
)
from ctxkeep.cli.options import PrefectOpt, require_paths
from ctxkeep.errors import NotFound, UsageError


@app.command()
def compress(
    files: list[Path] | None = typer.Argument(
        None,
        metavar="[FILE]...",
        help="Session files to compress (default: every enabled agent's Claude Code/Codex "
        "file over max_size_kb or max_lines).",
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Health report: size, lines, OK or EXCEEDS of the files over a threshold; changes nothing.",
    ),
    show_all: bool = typer.Option(False, "--all", help="With --check: list every file, the OK ones too."),
    keep_messages: int | None = typer.Option(
        None,
        "--keep-messages",
        min=1,
        help="Keep at least this many recent messages (default: config keep_messages, 100).",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say what would be cut, with bytes and tokens; write nothing."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Also compress files modified within active_minutes; restore over newer entries.",
    ),
    restore: Path | None = typer.Option(
        None, "--restore", metavar="FILE", help="Put FILE.backup back in place of FILE."
    ),
    prefect: bool | None = PrefectOpt,
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Per file: tokens, messages, backup, savings by strategy, warnings."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
):
    """Shrink oversized Claude Code and Codex session files; the store keeps what they drop."""
    _compress(
        files,
        check,
        show_all,
        keep_messages,
        dry_run,
        force,
        restore,
        prefect,
        progress,
        verbose,
        home,
        as_json,
    )


def _compress(
    files, check, show_all, keep_messages, dry_run, force, restore, prefect, progress, verbose, home, as_json
) -> None:
    h = _home(home)
    config_warnings(h)
    clash = None
    if restore is not None and check:
        clash = "--check and --restore exclude each other"
    elif restore is not None and files:
        clash = "--restore FILE takes no other FILE arguments"
    elif restore is not None and dry_run:
        clash = "--restore has no --dry-run (it puts FILE.backup back; `compress --check` shows the backups)"
    if show_all and not check:
        _fail(
            UsageError(
                "--all goes with --check", where="compress", hint="run `ctxkeep compress --check --all`"
            )
        )
    if clash:
        _fail(UsageError(clash, where="compress", hint="run them separately"))
    with failing():
        require_paths(files or [], where="FILE")
        if check:  # changes nothing: --dry-run adds nothing to it
            from ctxkeep.service.compress_check import CheckRequest, compress_check

            _emit_check(compress_check(h, CheckRequest(tuple(files or ()))).as_json(), as_json, show_all)
            return
        from ctxkeep.service import compress as svc

        if restore is not None:
            res = svc.compress_restore(h, svc.RestoreFileRequest.parse(file=restore, force=force)).as_json()
            if as_json:
                _print_json(res)
            else:
                out.print(
                    f"restored {res['path']} from {res['backup']} ({res['bytes']:,} bytes); "
                    f"{res['reactivated']:,} archived entries active again",
                    highlight=False,
                )
                if res.get("saved_aside"):
                    out.print(
                        f"the file as it was (lines the backup lacks) is kept in {res['saved_aside']}",
                        highlight=False,
                    )
            return
        summary = _run(h, files, keep_messages, dry_run, force, prefect, progress and not as_json)
    if files and not summary["files"] and summary["problems"] and not summary.get("interrupted"):
        # every FILE named was no session file compress takes: nothing asked for was
        # done (a warning, "0 of 0 files" and exit 0 before: newuser19 F19)
        if as_json:
            _print_json(summary)
        _fail(
            NotFound(
                "no FILE named is a session file compress takes: "
                + "; ".join(p.removesuffix("; skipped") for p in summary["problems"]),
                where="FILE",
                hint="name Claude Code or Codex session files (`ctxkeep compress --check --all` lists them)",
            )
        )
    if as_json:
        _print_json(summary)
    elif verbose:
        _emit_summary(summary)
    else:
        _emit_brief(summary)
    if summary.get("interrupted"):
        from collections import Counter

        went = len(summary["files"])
        by = Counter(f["status"] for f in summary["files"])
        stopped(
            went,
            went + summary["not_started"],
            ", ".join(f"{n:,} {st}" for st, n in by.items()) or "none done",
            summary["interrupted"],
        )
    if summary["failed"]:
        raise typer.Exit(1)


def _run(h: Path, files, keep_messages, dry_run: bool, force: bool, prefect: bool | None, show: bool) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ctxkeep.service import compress as svc

    prog = Progress(
        TextColumn("compress"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=err.get(),
        # a bar only on a terminal: a transient one left an empty line in a file or pipe
        disable=not show or not err.get().is_terminal,
        transient=True,
    )
    tid = prog.add_task("", total=None)
    req = svc.CompressRequest.parse(
        files=files or None, keep_messages=keep_messages, dry_run=dry_run, force=force, prefect=prefect
    )
    with prog:
        return svc.compress(
            h,
            req,
            on_files=lambda n: prog.update(tid, total=n),
            on_file=lambda r: prog.update(tid, advance=1, description=Path(r.path).name[:40]),
            on_stop=finishing,
        ).as_json()


#: the columns of ``compress --check``
CHECK_COLUMNS = ("file", "agent", "KiB", "lines", "status", "active", "backups")


#: the columns a narrow ``compress --check`` leaves out first (``--json`` has them)
_CHECK_DROP = ("backups", "active", "lines")


def _stacked_check(title: str, rows: list[tuple[str, ...]], widths: list[int], width: int) -> None:
    """``compress --check``'s rows in a narrow terminal: each file's name whole on a
    line, its figures aligned under the header on the next (``widths``: of the columns
    after the name); the figures' line kept within ``width`` columns by leaving out
    ``_CHECK_DROP``'s columns in turn, named under the list (newuser23 F9: 71 columns
    wide at ``COLUMNS=60``)."""
    right = ("KiB", "lines", "backups")
    cols = list(CHECK_COLUMNS[1:])
    hidden: list[str] = []

    def cells(values) -> str:
        return "  ".join(
            v.rjust(w) if c in right else v.ljust(w)
            for c, v, w in zip(CHECK_COLUMNS[1:], values, widths, strict=True)
            if c in cols
        ).rstrip()

    for c in _CHECK_DROP:
        if len("  " + cells(CHECK_COLUMNS[1:])) <= width:
            break
        cols.remove(c)
        hidden.insert(0, c)
    say(title)
    say("file")
    head = "  " + cells(CHECK_COLUMNS[1:])
    say(head)
    say("─" * len(head))
    for r in rows:
        say(r[0])
        say("  " + cells(r[1:]))
    if hidden:
        say_folded(f"not shown at {width} columns: {', '.join(hidden)} (--json has them)")


def _emit_check(rep: dict, as_json: bool, show_all: bool = False) -> None:
    """The files over a threshold (``show_all``: every file), then one count line;
    ``--json`` keeps every file. What a compress would cut is ``--dry-run``'s (the check
    computes no strategies: they were 26 of its 29 s on a 400 MB home, newuser16 F7)."""
    if as_json:
        _print_json(rep)
        return
    th = rep["thresholds"]
    listed = [f for f in rep["files"] if show_all or f["status"] != "OK"]
    ok = len(rep["files"]) - rep["exceeding"]
    title = f"session files vs max_size_kb {th['max_size_kb']} / max_lines {th['max_lines']}"
    if not show_all:
        title = f"session files over max_size_kb {th['max_size_kb']} or max_lines {th['max_lines']}"
    rows: list[tuple[str, ...]] = []
    for f in listed:
        status = f["status"] + (f" ({', '.join(f['exceeds'])})" if f["exceeds"] else "")
        rows.append(
            (
                Path(f["path"]).name,
                f["agent"],
                f"{f['bytes'] / 1024:,.0f}",
                f"{f['lines']:,}",
                status,
                "yes" if f["active"] else "",
                str(f["backups"] or ""),
            )
        )
    widths = [max([len(r[i]) for r in rows] + [len(c)]) for i, c in enumerate(CHECK_COLUMNS)]
    width = line_width()
    if not rows:
        pass
    elif width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        # a file name is what to act on: never folded; too narrow for it beside the
        # figures, it takes a line of its own above them
        _stacked_check(title, rows, widths[1:], width)
    else:
        from rich import box

        t = table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for c in CHECK_COLUMNS:
            t.add_column(c, justify="right" if c in ("KiB", "lines", "backups") else "left", no_wrap=True)
        for r in rows:
            t.add_row(r[0], r[1], r[2], r[3], f"[red]{r[4]}[/red]" if "(" in r[4] else r[4], *r[5:])
        out.print(t)
    say_folded(
        f"{rep['exceeding']} of {len(rep['files'])} files exceed a threshold"
        + (
            f"; {ok:,} OK {'file' if ok == 1 else 'files'} not listed: --all lists them"
            if ok and not show_all
            else ""
        )
    )
    say_folded(
        ("what compress would cut: `ctxkeep compress --dry-run`; " if rep["exceeding"] else "")
        + "full paths: --json"
    )
    for p in rep["problems"]:
        warn(p)


def _emit_brief(s: dict) -> None:
    """One line per file (``compressed ~/…/x.jsonl: 1.9 MB → 192.2 KB``; refused and
    failed ones on stderr with their reason), then the run's summary and what the
    backups keep on disk until when (newuser16 F11: 8 lines per file, 2,409 lines for a
    heavy home, and nothing said the backups add the originals' bytes for 30 days).
    ``-v``: ``_emit_summary``'s details."""
    verb = "would compress" if s["dry_run"] else "compressed"
    width = line_width() or 10_000
    for f in s["files"]:
        st = f["status"]
        if st in ("compressed", "would-compress"):
            tail = f": {_size(f['bytes_before'])} → {_size(f['bytes_after'])}"
            say(f"{verb} {short_path(f['path'], max(20, width - len(verb) - len(tail) - 1))}{tail}")
        elif st == "skipped":  # with its reason (newuser24 F11: only -v said why)
            tail = f": {f['reason']}" if f.get("reason") else ""
            say(f"skipped {short_path(f['path'], max(20, width - 8 - len(tail)))}{tail}")
        else:  # refused, failed: the reason matters (at the width)
            _say_refused(st, short_path(f["path"], max(20, width - len(st) - 1)), f["reason"])
    done = s["compressed"] + s["would_compress"]
    say_folded(
        f"{verb} {done} of {len(s['files']) + (s.get('not_started') or 0)} files: "
        f"{_size(s['bytes_before'])} → {_size(s['bytes_after'])}, "
        f"{s['tokens_before']:,} → {s['tokens_after']:,} text tokens in {s['seconds']:.1f} s"
        + (f"; {s['refused']} refused" if s["refused"] else "")
        + (
            f"; {_count(s['still_exceeding'], 'file')} still over a threshold (-v says why)"
            if s.get("still_exceeding")
            else ""
        )
    )
    _say_backups(s)
    for p in s["problems"]:
        warn(p)


def _say_refused(status: str, path: str, reason: str) -> None:
    """A refused or failed file on stderr, folded at the width, its status in yellow."""
    from rich.markup import escape

    first, *more = fold(f"{status} {path}: {reason}")
    err.print(f"[yellow]{status}[/yellow]{escape(first[len(status) :])}", highlight=False)
    for x in more:
        err.print(x, highlight=False, markup=False)


def _say_backups(s: dict) -> None:
    """What the run's backups keep on disk, and until when (newuser16 F11: the first
    compress of a heavy home added 110 MB to the agents' folders, unannounced)."""
    if s["compressed"] + s["would_compress"] and s.get("backup_bytes"):
        say_folded(
            f"the backups {'would keep' if s['dry_run'] else 'keep'} the originals, "
            f"{_size(s['backup_bytes'])} more on disk beside the files, until "
            f"{s['backups_until']} (backup_max_age_days {s['backup_max_age_days']}: then retention "
            "removes them)"
        )


def _emit_summary(s: dict) -> None:
    verb = "would compress" if s["dry_run"] else "compressed"
    for f in s["files"]:
        name = f["path"]
        if f["status"] in ("compressed", "would-compress"):
            img = (f.get("savings") or {}).get("inline", {}).get("image_tokens", 0)
            say_folded(  # at the terminal's width, the file's path with ~
                f"{verb} {tilde(name)}: {f['bytes_before']:,} → {f['bytes_after']:,} bytes, "
                f"{f['tokens_before']:,} → {f['tokens_after']:,} text tokens"
                + (f" (and images of {img:,} tokens moved to the store)" if img else "")
                + f", {f['messages_before']:,} → {f['messages_after']:,} messages"
                + (f"; backup {tilde(f['backup'])}" if f.get("backup") else "")
            )
            if f.get("savings"):
                say_folded("  saved: " + _savings_text(f["savings"]), indent="    ")
        elif f["status"] == "skipped":
            say_folded(f"skipped {tilde(name)}: {f['reason']}")
        else:  # refused, failed: on stderr, at the width (233-362 columns: newuser15 F4)
            _say_refused(f["status"], tilde(name), f["reason"])
        if f.get("still_over"):
            warn(f"{Path(name).name}: {f['still_over']}")
        for n in f.get("notes") or []:
            if "not updated" in n or "store holds" in n:
                for x in fold(f"  note: {n}", indent="    "):
                    err.print(x, highlight=False, markup=False)
    done = s["compressed"] + s["would_compress"]
    say_folded(
        f"{verb} {done} of {len(s['files']) + (s.get('not_started') or 0)} files: {s['bytes_before']:,} → {s['bytes_after']:,} bytes, "
        f"{s['tokens_before']:,} → {s['tokens_after']:,} text tokens"
        + (f" (and images of {s['image_tokens']:,} tokens moved)" if s.get("image_tokens") else "")
        + f" in {s['seconds']:.1f} s"
        + (f"; {s['refused']} refused" if s["refused"] else "")
        + (
            f"; {_count(s['still_exceeding'], 'file')} still over a threshold"
            if s.get("still_exceeding")
            else ""
        )
    )
    _say_backups(s)
    for p in s["problems"]:
        warn(p)


def _savings_text(sv: dict) -> str:
    """``inline 1,046,292 B / -39 text tok + 1,652 image tok (1 line), duplicates …``
    (strategies that saved something; the text tokens add up to the file's text tokens
    before minus after, the image tokens are apart: an entry's text holds no image)."""
    parts = [
        f"{k} {v['bytes']:,} B / {v['tokens']:,} text tok"
        + (f" + {v['image_tokens']:,} image tok" if v.get("image_tokens") else "")
        + f" ({_count(v['lines'], 'line')})"
        for k, v in sv.items()
        if v.get("bytes") or v.get("lines")
    ]
    return "by strategy: " + (", ".join(parts) if parts else "nothing")

"""The ``ctxkeep`` command line (Typer): a thin layer over the library.

One module per area registers its commands on ``app`` (``core``: ingest, search,
show, stats). A new area adds a module here and its commands to ``COMMANDS``: a
command's module is imported only when the command runs or a help lists it.

``search``, ``show`` and ``stats`` read the store directly and never import Prefect;
``ingest`` runs the Prefect flow (and skips Prefect entirely when nothing changed).
Every command exits 0 on success, 1 on a ctxkeep error (one line on stderr), 2 on
wrong usage.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperArgument, TyperGroup

from ctxkeep.cli.options import HomeOpt, JsonOpt  # noqa: F401 - the commands import them from here
from ctxkeep.service.display import strip_formatting_codes

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Keep the context of AI coding agents: ingest, search and maintain their sessions.",
    epilog="Exit codes: 0 success, 1 failure, 2 wrong usage. `ctxkeep help COMMAND` for a command; "
    "docs/cli.md for every option and --json shape.",
)
#: table width when output is not a terminal (and ``COLUMNS`` is unset); text is not wrapped
PIPE_WIDTH = 160


#: C0 and C1 control characters and DEL, but newline and tab: a session's text may hold
#: terminal escape sequences (ESC]0;title BEL, ESC[2J, ESC]52 clipboard writes), which a
#: terminal would obey
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: the same in bytes: C0 and DEL, and C1 as UTF-8 encodes it (0xC2 is never a
#: continuation byte, so this never cuts a character)
_CONTROL_BYTES_RE = re.compile(b"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def safe_text(text: str) -> str:
    """``text`` without a terminal's formatting sequences (colours, cursor moves:
    ``transforms.terminal_codes``; newuser19 F3) and with every other control
    character but newline and tab shown escaped (``\\x1b``: a window title or
    clipboard write stays visible), so printed text never drives the terminal. What
    every plain output passes through (Rich consoles ``out``/``err`` and ``say``);
    ``--json`` does not (JSON escapes them)."""
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", strip_formatting_codes(text))


def safe_bytes(raw: bytes) -> bytes:
    """``safe_text`` for raw bytes (``quarantine show``): C0, DEL and UTF-8 C1 as
    ``\\xNN`` (of the code point); every other byte as it is."""

    def esc(m) -> bytes:
        b = m.group()
        return b"\\x%02x" % (b[0] if len(b) == 1 else b[1])

    return _CONTROL_BYTES_RE.sub(esc, raw)


def _safe_console(**kwargs):
    """A Rich ``Console`` whose rendered text is ``safe_text``: Rich's own styles and
    control codes (colours, a progress bar's cursor moves) are applied after, so they
    still work; only the text of what is printed is escaped, in one place for every
    command (a table cell, a hit, a message alike)."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def on_broken_pipe(self) -> None:
            """The reader of a pipe went away (``| head -1``): ``PipeClosed``, which
            ``run_command`` ends quietly with 0 (Rich's own exits 1)."""
            self.quiet = True
            raise PipeClosed

        def _render_buffer(self, buffer):
            return super()._render_buffer(
                seg if seg.control else Segment(safe_text(seg.text), seg.style, seg.control) for seg in buffer
            )

    return SafeConsole(**kwargs)


class _LazyConsole:
    """A Rich ``Console`` made on first use: ``search --json`` never needs Rich, and
    importing it costs ~40 ms of every command's start."""

    def __init__(self, **kwargs) -> None:
        self._kwargs = kwargs
        self._console = None

    def get(self):
        """The Console itself (for Rich objects that take one, e.g. ``Progress``)."""
        if self._console is None:
            c = _safe_console(**self._kwargs)
            if not c.is_terminal:  # piped: never wrap printed text; tables get room
                c = _safe_console(
                    **self._kwargs, soft_wrap=True, width=None if os.environ.get("COLUMNS") else PIPE_WIDTH
                )
            self._console = c
        return self._console

    def __getattr__(self, name: str):
        return getattr(self.get(), name)


def say(line: str) -> None:
    """One plain line on stdout, printed as written (no Rich markup or highlighting).
    Through Rich only when ``out``'s console exists already (a progress display may be
    live): ``ingest``'s summary of a no-op run imports no Rich (~40 ms)."""
    if out._console is not None:
        out._console.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        sys.stdout.write(safe_text(line) + "\n")


def say_dim(line: str) -> None:
    """``say`` of ``line`` in the terminal's dim style (SGR 2) when stdout is a terminal
    and ``NO_COLOR`` is unset, else plain; without Rich when ``out``'s console is not
    made yet (a no-op ingest imports none)."""
    if out._console is not None:
        out._console.print(line, markup=False, highlight=False, soft_wrap=True, style="dim")
    elif sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        sys.stdout.write("\x1b[2m" + safe_text(line) + "\x1b[0m\n")
    else:
        say(line)


def line_width() -> int | None:
    """The width plain lines are folded to (``fold``): the terminal's, or ``COLUMNS``
    when it is set; None when output is piped without ``COLUMNS`` (lines as written,
    one record per line for grep). Without Rich when ``out``'s console is not made yet
    (``ingest``'s summary of a no-op run imports no Rich)."""
    c = out._console
    if c is not None:
        return max(c.width, 20) if c.is_terminal or os.environ.get("COLUMNS") else None
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit():
        return max(int(cols), 20)
    if sys.stdout.isatty():
        import shutil

        return max(shutil.get_terminal_size().columns, 20)
    return None


def wrap_cells(text: str, width: int, *, indent: str = "", break_long_words: bool = True) -> list[str]:
    """``text`` wrapped between words so every line, ``indent`` included, takes at most
    ``width`` terminal cells: a CJK character takes two (Rich's ``cell_len``; newuser19
    F4: a Chinese snippet of 75 characters took 106 columns). Text of one-cell
    characters only is wrapped by ``textwrap`` as before; in other text a word wider
    than the line (a CJK sentence has no spaces) is cut between characters where
    ``break_long_words``, else kept whole on a line of its own."""
    import textwrap

    from rich.cells import cell_len

    if cell_len(text) == len(text):
        return textwrap.wrap(
            text,
            width=width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_long_words=break_long_words,
            break_on_hyphens=False,
        )
    room = max(width - cell_len(indent), 2)
    lines: list[str] = []
    cur, cur_w = "", 0
    for word in text.split():
        w = cell_len(word)
        if cur and cur_w + 1 + w <= room:
            cur, cur_w = f"{cur} {word}", cur_w + 1 + w
            continue
        if cur:
            lines.append(cur)
        if w <= room or not break_long_words:
            cur, cur_w = word, w
            continue
        cur, cur_w = "", 0
        for ch in word:  # cut between characters, by cells
            cw = cell_len(ch)
            if cur_w + cw > room:
                lines.append(cur)
                cur, cur_w = "", 0
            cur, cur_w = cur + ch, cur_w + cw
    if cur:
        lines.append(cur)
    return [indent + x for x in lines]


def fold(line: str, *, indent: str = "  ", width: int | None = None) -> list[str]:
    """``line`` folded to ``width`` (default ``line_width()``; None: not folded): broken
    after ``", "`` and ``"; "`` first, at spaces only where a part is wider still, the
    lines after the first indented by ``indent``. A word is never cut: an id, a path or
    a figure wider than the line stays whole on a line of its own."""
    import textwrap

    width = line_width() if width is None else width
    if width is None or len(line) <= width:
        return [line]
    parts = re.split(r"(?<=[,;]) ", line)
    lines: list[str] = []
    cur = ""
    for part in parts:
        lead = indent if lines else ""
        if not cur:
            cand = lead + part
        else:
            cand = f"{cur} {part}"
        if len(cand) <= width or not cur and len(lead + part) <= width:
            cur = cand
            continue
        if cur:
            lines.append(cur)
            lead = indent
        if len(lead + part) <= width:
            cur = lead + part
            continue
        wrapped = textwrap.wrap(
            part,
            width=width,
            initial_indent=lead,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines.extend(wrapped[:-1])
        cur = wrapped[-1] if wrapped else ""
    if cur:
        lines.append(cur)
    return lines


def say_folded(line: str, *, indent: str = "  ") -> None:
    """``say`` of ``line`` folded to the terminal's width (``fold``)."""
    for x in fold(line, indent=indent):
        say(x)


def tilde(path: str | Path) -> str:
    """``path`` with the user's home directory written ``~`` (``~/.claude/projects``)."""
    p, home = str(path), str(Path.home())
    if home not in ("", "/") and (p == home or p.startswith(home + os.sep)):
        return "~" + p[len(home) :]
    return p


def short_path(path: str | Path, room: int) -> str:
    """``tilde(path)``, and when that is wider than ``room``, its end from a folder
    boundary with ``…/`` before it (``…/projects/-Users-x/d3ad4cdc.jsonl``); a file name
    wider than ``room`` alone keeps its last ``room - 1`` characters (``…c614e5e23.jsonl``:
    the session id ends a rollout's name). Never folded: one piece to copy."""
    p = tilde(path)
    if len(p) <= room:
        return p
    sep = "\\" if "\\" in p and "/" not in p else "/"  # a Windows path as its agent wrote it
    parts = p.split(sep)
    tail = parts[-1]
    if len(tail) + 2 > room:
        return "…" + tail[-max(room - 1, 1) :]
    for part in reversed(parts[1:-1]):
        if len(f"…{sep}{part}{sep}{tail}") > room:
            break
        tail = f"{part}{sep}{tail}"
    return f"…{sep}{tail}"


def table(**kwargs):
    """A Rich ``Table`` (imported on first use, as the consoles) that never cuts a
    figure: a right-justified column (a number, a size, a cost) never wraps or shrinks,
    text columns wrap (long words fold). When the figures and the longest words do not
    fit the terminal, the table first takes narrower borders (no outer edge, one space
    between columns), then leaves out the columns added with a ``drop`` rank (the lowest
    rank first; low-value columns, each still in ``--json``) until it fits, naming them
    under the table; only then is it printed wider than the terminal (the terminal
    wraps the lines) rather than cut with "…"."""
    from rich import box
    from rich.table import Table

    class FiguresTable(Table):
        def __init__(self, *args, **kw) -> None:
            super().__init__(*args, **kw)
            self._drops: list = []  # (rank, column)
            self._measures: dict = {}  # a column of other cells than texts: per table
            self._contents: dict = {}  # id(column) -> _column_content

        def add_column(self, header="", *args, drop: int | None = None, **kw):
            if kw.get("no_wrap") is None:  # a figure (right-justified) is never wrapped
                kw["no_wrap"] = kw.get("justify") == "right"
            kw.setdefault("overflow", "fold")
            super().add_column(header, *args, **kw)
            if drop is not None:
                self._drops.append((drop, self.columns[-1]))

        def _measure_column(self, console, options, column):
            """Rich's measure of ``column``, measured once per layout state and
            content: its cells are measured at an unbounded width and the result
            capped at ``options.max_width`` (what Rich computes for text cells, whose
            measure does not depend on the width). The fit checks below lay the table
            out many times (a 1,294-day `report daily`: 28 layouts, 93 % of its CPU),
            and a report tries up to four tables that share most columns (the same
            cells: measured once, ``_MEASURES``)."""
            if column.width is not None or column.min_width is not None or column.max_width is not None:
                return super()._measure_column(console, options, column)
            if options.max_width < 1:
                return super()._measure_column(console, options, column)
            state = (column._index, len(self.columns), self.padding, self.collapse_padding, self.pad_edge)
            if id(column) not in self._contents:  # cells are all added before the first layout
                self._contents[id(column)] = _column_content(column)
            content = self._contents[id(column)]
            cache, key = (self._measures, (*state, self.show_edge, id(column)))
            if content is not None:
                cache, key = _MEASURES, (*state, self.show_edge, content)
            full = cache.get(key)
            if full is None:
                full = cache[key] = super()._measure_column(console, options.update_width(1_000_000), column)
            return full.with_maximum(options.max_width)

        def _calculate_column_widths(self, console, options):
            """Rich's column widths, kept as ``widths``: after a print, the printed
            layout's (``cli.long_table`` formats rows to them)."""
            self.widths = super()._calculate_column_widths(console, options)
            return self.widths

        def _need(self, console, options) -> int:
            """A first guess of the narrowest width that cuts nothing: a ``no_wrap``
            column (a figure) its widest line, a column that folds its ``min_width`` or
            10, any other its longest word."""
            wide, total = options.update_width(10_000), self._extra_width
            for col in self.columns:
                m = self._measure_column(console, wide, col)
                if col.no_wrap:
                    total += m.maximum
                elif col.overflow == "fold":
                    total += min(m.minimum, max(col.min_width or 0, 10) + self._get_padding_width(col._index))
                else:
                    total += m.minimum
            return total

        def _fits(self, console, options, width: int) -> bool:
            """Whether Rich lays the table out in ``width`` with every ``no_wrap``
            column (a figure, a name) whole and every other column at least its
            longest word or ``min_width`` or 10 wide (narrower, its words fold)."""
            extra = self._extra_width
            widths = self._calculate_column_widths(console, options.update_width(width - extra))
            if sum(widths) + extra > width:
                return False
            wide = options.update_width(10_000)
            for w, col in zip(widths, self.columns, strict=True):
                m = self._measure_column(console, wide, col)
                floor = max(col.min_width or 0, 10) + self._get_padding_width(col._index)
                if w < (m.maximum if col.no_wrap else min(m.minimum, floor)):
                    return False
            return True

        def narrow(self, console, options, width: int) -> int:
            """Take the narrower styles (1: borders, 2: columns one space apart)
            until the table fits ``width``; returns how many it took (0: none)."""
            took = 0
            if not self._fits(console, options, width) and self.box is not None:
                self.narrow_to(1)
                took = 1
            if not self._fits(console, options, width):
                self.narrow_to(2)
                took = 2
            return took

        def narrow_to(self, level: int) -> None:
            """The style of ``narrow`` level ``level`` (0: as made)."""
            if level >= 1 and self.box is not None:
                self.box, self.show_edge, self.pad_edge = box.SIMPLE_HEAD, False, False
                self.collapse_padding = True
            if level >= 2:  # columns one space apart
                self.padding = (0, 0)

        def __rich_console__(self, console, options):
            width = options.max_width
            self.narrow(console, options, width)
            hidden = []
            for _, col in sorted(self._drops, key=lambda d: d[0]):
                if self._fits(console, options, width):
                    break
                self.columns.remove(col)
                for i, c in enumerate(self.columns):
                    c._index = i
                hidden.append(" ".join(str(col.header).split()))
            if hidden:
                head, tail = f"not shown at {width} columns: ", " (--json has them)"
                cap = str(self.caption or "")
                if cap.startswith(head) and cap.endswith(tail) and "\n" not in cap:
                    hidden.insert(0, cap[len(head) : -len(tail)])  # one note, not two
                    cap = ""
                import textwrap

                note = f"{head}{', '.join(hidden)}{tail}"
                # folded here: the console soft-wraps (never folds) what it prints (60 columns)
                note = textwrap.fill(note, width, break_long_words=False, break_on_hyphens=False)
                self.caption = f"{cap}\n{note}" if cap else note
                self.caption_justify = "left"
                self.caption_style = "dim"
            if not self._fits(console, options, width):
                need = max(width + 1, self._need(console, options))
                while not self._fits(console, options, need) and need < width + 1_000:
                    need += 2
                options = options.update_width(need)
            yield from super().__rich_console__(console, options)

    # one style for every table (a new user saw heavy boxes beside light rules): a rule
    # under the header, no box, unless the command asks for another
    if "box" not in kwargs:
        kwargs.update(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    return FiguresTable(**kwargs)


def tables_alike(*tables) -> None:
    """Give ``tables`` (of ``table()``, printed one after the other on ``out``) one
    style: the narrowest any of them needs to fit the terminal (a report whose first
    tables kept their borders and whose last lost them read as two styles at 80
    columns: ``secrets``). Each still leaves out its own low-rank columns if needed."""
    console = out.get()
    options = console.options
    level = max((t.narrow(console, options, options.max_width) for t in tables), default=0)
    for t in tables:
        t.narrow_to(level)


#: a table column's unbounded measure by layout state and content (``table``): the
#: tables a command lays out share it
_MEASURES: dict = {}


def _column_content(column) -> tuple | None:
    """What a column's measure depends on besides the layout: its header, footer,
    wrapping and its cells' texts; None when a cell is neither ``str`` nor ``Text``
    (the column is then measured per table)."""
    from rich.text import Text

    cells: list[str | tuple[str, str]] = []
    for c in column._cells:
        if isinstance(c, str):
            cells.append(c)
        elif isinstance(c, Text):
            cells.append(("text", c.plain))
        else:
            return None
    head = []
    for x in (column.header, column.footer):
        if not isinstance(x, (str, Text)):
            return None
        head.append(x.plain if isinstance(x, Text) else x)
    return (*head, column.justify, column.no_wrap, column.overflow, column.vertical, tuple(cells))


out = _LazyConsole()
err = _LazyConsole(stderr=True)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"ctxkeep {version('ctxkeep')}")
        raise typer.Exit()


#: ``ctxkeep --home DIR COMMAND``: the store given before the command (None: not given);
#: a command's own ``--home`` wins. Set by the callback on every invocation.
_top_home: Path | None = None


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    home: Path | None = HomeOpt,
) -> None:
    """Keep the context of AI coding agents: ingest, search and maintain their sessions."""
    global _top_home
    _top_home = home
    # everything ctxkeep creates (store, Prefect's database beside it, archives,
    # backups' temp files) is user-only; the user's umask is kept for the files
    # `vault restore` writes back for an agent
    from ctxkeep.service.store import narrow_umask

    narrow_umask()
    # a store upgrade on the command's first writable open shows its phases on stderr
    from ctxkeep.cli import upgrade

    upgrade.install(err)


#: an error's ``where`` that names a request field (``ctxkeep.service``) → the CLI's
#: option or argument
_CLI_WHERE = {
    "since/until": "--since/--until",
    "queries": "QUERY",
    "ids": "ENTRY_ID",
    "entry_ids": "ENTRY_ID",
    "confirm": "--yes",
    "scope": "--session/--project",
    # the MCP spelling of a purge's fields (the purge contract names them so)
    "sessionId": "--session",
    "projectDir": "--project",
    **{
        f: "--" + f.replace("_", "-")
        for f in (
            "agent",
            "budget",
            "by",
            "kind",
            "label",
            "limit",
            "max_bytes",
            "media_dir",
            "mode",
            "offset",
            "project",
            "role",
            "session",
            "since",
            "status",
            "tool",
            "until",
        )
    },
}


def cli_words(e: Exception, words: dict[str, str | None] | None = None) -> str:
    """The one line of an error, rendered from its fields: what, ``(where)`` with a
    request field named as the CLI's option (``budget`` → ``--budget``,
    ``_CLI_WHERE``) or as ``words`` says for this command (a positional argument:
    ``{"session": "SESSION"}``; None: the user typed nothing there, so no ``(where)``),
    ``- what to do``; whitespace folded to one line."""
    from ctxkeep.errors import CtxkeepError

    if not isinstance(e, CtxkeepError):
        return " ".join(str(e).split())
    parts = [e.what]
    where = e.where
    if where and words and where in words:
        where = words[where]
    elif where:
        where = _CLI_WHERE.get(where, where)
    if where:
        parts.append(f"({where})")
    if e.todo:
        parts.append(f"- {e.todo}")
    return " ".join(" ".join(parts).split())


def exit_code(e: Exception) -> int:
    """The exit code of an error (README "Exit codes"): its ``exit_code`` (2 wrong
    usage: a ``UsageError``, a ``--raw`` query FTS5 cannot parse; 1 every other failure,
    ``NotFound`` included); 1 for anything else."""
    return getattr(e, "exit_code", 1)


def _fail(e: Exception, code: int | None = None, words: dict[str, str | None] | None = None) -> NoReturn:
    """Print ``error: <what> (<where>) - <what to do>`` as ONE line on stderr (never
    wrapped, whatever the terminal width; in the CLI's words, ``cli_words``, with this
    command's ``words``) and exit with ``code`` (default ``exit_code(e)``: 2 wrong
    usage, 1 failure)."""
    typer.echo(f"error: {cli_words(e, words)}", err=True)
    raise typer.Exit(exit_code(e) if code is None else code)


#: set by ``stopped``: the command said why it stopped (``run_command`` adds nothing)
_stop_said: list[int] = []


def stopped(went: int, total: int, what: str, signal_name: str | None) -> NoReturn:
    """End a command a signal stopped between files (``maintenance.stopping``): ONE line
    on stderr, ``interrupted (SIGINT) after 8 of 31 files (8 compressed); the other 23
    are untouched - run the command again to go on`` (``what``: what became of the
    ``went`` files), exit 130 (SIGINT) or 143 (SIGTERM)."""
    code = 143 if signal_name == "SIGTERM" else 130
    left = total - went
    typer.echo(
        f"interrupted ({signal_name}) after {went:,} of {_count(total, 'file')} ({what}); "
        f"the other {left:,} {'is' if left == 1 else 'are'} untouched - run the command again to go on",
        err=True,
    )
    _stop_said.append(code)
    raise typer.Exit(code)


def stopped_with(line: str, code: int = 130) -> NoReturn:
    """End a command a signal stopped with ``line`` (what it kept; folded at the width)
    on stderr and exit ``code``; ``run_command`` adds nothing after it."""
    for part in fold(line):
        err.print(part, highlight=False, markup=False, soft_wrap=True)
    _stop_said.append(code)
    raise typer.Exit(code)


class Caught:
    """The signal a ``said_at_once`` block stopped on: ``signal``, its number (None: none
    came); ``exit_code``, 128 + it (130 for SIGINT, 143 for SIGTERM; 130 without one,
    a KeyboardInterrupt that came some other way)."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @property
    def exit_code(self) -> int:
        return 128 + self.signal if self.signal else 130


@contextmanager
def said_at_once(what: str, term: bool = False, caught: Caught | None = None) -> Iterator[Caught]:
    """Within the block, the first SIGINT (Ctrl-C), or with ``term`` SIGTERM (``kill``,
    ``timeout``), writes ``NAME: what`` to stderr at once, then stops the block as
    Python's own SIGINT handler does (KeyboardInterrupt); a second is the signal's own
    (SIGINT: KeyboardInterrupt; SIGTERM: the process ends). Yields a ``Caught``
    naming the signal (``caught``, else a new one: the command's exit code). "At once": Python runs a signal
    handler only between bytecodes of the main thread, which an ingest keeps in SQLite
    or Polars for seconds (newuser19 F6: 5-22 s of silence before an interrupted
    ingest's last line), so the line is written by a thread woken by the signal's byte
    on ``signal.set_wakeup_fd``'s pipe (written by the C handler itself).

    Answered however the process was started (newuser23 F3: 2 of 8 Ctrl-Cs lost, exit
    0): a process started with SIGINT ignored (a script's ``cmd &`` in a shell without
    job control: the shell sets SIG_IGN, the process inherits it, and Python then
    installs no handler) gets the handler all the same, as ``compress`` does
    (``maintenance.stopping``); the signals are unblocked in the main thread for the
    block (a mask inherited with them blocked) and in the watching thread, so at least
    one thread always takes them (``prestart.start_child`` blocks SIGINT in its own
    thread while it starts a reader). A signal the watcher said that did not stop the
    block (a KeyboardInterrupt swallowed, or one that came as the block ended) stops it
    at its end: a command never exits 0 after saying it stops. Handlers and mask are
    put back after the block. Unchanged off the main thread (``signal.signal`` raises
    there) and for a signal whose handler is someone else's (a Python function, or
    one set from C)."""
    import os
    import signal
    import threading

    caught = Caught() if caught is None else caught
    masks = hasattr(signal, "pthread_sigmask")  # POSIX; not on Windows
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    plain = (signal.default_int_handler, signal.SIG_DFL, signal.SIG_IGN)
    asked = [signal.SIGINT] + ([signal.SIGTERM] if term and hasattr(signal, "SIGTERM") else [])
    ours = [s for s in asked if signal.getsignal(s) in plain]
    if not ours:
        yield caught
        return
    nums = {int(s) for s in ours}
    lock = threading.Lock()

    def say_it(signum: int) -> None:
        with lock:  # once, and written before ``first`` raises
            if caught.signal is not None:
                return
            caught.signal = signum
            try:
                os.write(2, f"{signal.Signals(signum).name}: {what}\n".encode())
            except OSError:  # stderr closed: the stop still stops
                pass

    r, w = os.pipe()
    try:
        os.set_blocking(w, False)
        old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError, AttributeError):  # Windows (a socket only; no
        old_fd = None  # set_blocking on 3.11): the handler says it

    def watch() -> None:
        if masks:  # this thread takes them whatever the mask it was started with
            signal.pthread_sigmask(signal.SIG_UNBLOCK, ours)
        try:
            while got := os.read(r, 64):
                for b in got:
                    if b in nums:
                        say_it(b)
                        return
        except OSError:
            return

    def first(signum, _frame) -> None:
        for s in ours:  # the second: the signal's own
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
        say_it(signum)
        raise KeyboardInterrupt

    old = {s: signal.getsignal(s) for s in ours}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) if masks else None  # as it is
    watcher = threading.Thread(target=watch, name="ctxkeep-sigint-word", daemon=True)
    try:  # (``first`` may raise from here on)
        # the handlers first, then a thread may take them: a signal pending in a mask
        # that blocked it is delivered to ``first``, not to SIG_IGN or SIG_DFL
        for s in ours:
            signal.signal(s, first)
        if old_fd is not None:
            watcher.start()
        if masks:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, ours)
        yield caught
    finally:
        late: KeyboardInterrupt | None = None
        if old_fd is not None:
            signal.set_wakeup_fd(old_fd)
        for s, h in old.items():
            try:
                signal.signal(s, h)
            except KeyboardInterrupt as e:  # ``signal.signal`` runs a pending handler
                late = e  # first: ``first``, for a signal that came as the block ended
                signal.signal(s, h)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(w)  # the watcher reads EOF and ends
        if watcher.is_alive():
            watcher.join(1)
        os.close(r)
        if late is not None:
            raise late
    if caught.signal is not None:  # said, and the block went on to its end
        raise KeyboardInterrupt


@contextmanager
def failing(words: dict[str, str | None] | None = None) -> Iterator[None]:
    """Run the block; a ``CtxkeepError`` raised in it ends the command as ``_fail`` does
    (its one line on stderr, its exit code; ``words`` as there)."""
    from ctxkeep.errors import CtxkeepError

    try:
        yield
    except CtxkeepError as e:
        _fail(e, words=words)


def _given_home(home: Path | None = None) -> Path | None:
    """The ``--home`` given to the command, else the one given before the command, else
    None (for commands that pass the choice on rather than resolve it: hooks, ``mcp
    install``)."""
    return home or _top_home


def _home(home: Path | None) -> Path:
    """The store directory: the command's ``--home``, else the one given before the
    command, else ``$CTXKEEP_HOME`` or the platform data dir
    (``service.store.resolve_home``). Raises StoreError when it names a file."""
    from ctxkeep.service.store import resolve_home

    return resolve_home(home or _top_home)


#: the version of every ``--json`` object a command prints (docs/cli.md): a change
#: that removes or renames a key, or changes a value's meaning, raises it
JSON_SCHEMA = 1


def _print_json(obj) -> None:
    """Print ``obj`` as JSON (2-space indent, UTF-8 as is) on stdout. An object gets
    ``"schema": JSON_SCHEMA`` as its first key unless it names its own (reports); an
    array is printed as it is (docs/cli.md says which outputs are arrays, and why)."""
    if isinstance(obj, dict) and "schema" not in obj:
        obj = {"schema": JSON_SCHEMA, **obj}
    text = json.dumps(obj, indent=2, default=str, ensure_ascii=False)
    # json escapes C0 itself; DEL and C1 it leaves raw: as \u escapes, the same value
    text = re.sub("[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)
    sys.stdout.write(text + "\n")


def warn(msg: object) -> None:
    """``warning: <msg>`` on stderr, the message printed as written (``[bogus]`` in a
    config warning is not Rich markup)."""
    from rich.markup import escape

    first, *more = fold(f"warning: {msg}")  # folded at the width, never inside a word
    err.print(f"[yellow]warning:[/yellow] {escape(first[9:])}", highlight=False)
    for x in more:
        err.print(x, highlight=False, markup=False)


def note(msg: object, *, plain: bool = False) -> None:
    """``note: <msg>`` on stderr, folded at the width (never inside a word), the message
    printed as written; ``plain``: one unfolded line without Rich (``--json``/``--csv``:
    their path imports no Rich, ~50 ms)."""
    if plain:
        sys.stderr.write(f"note: {msg}\n")
        return
    from rich.markup import escape

    first, *more = fold(f"note: {msg}")
    err.print(f"[yellow]note:[/yellow] {escape(first[6:])}", highlight=False, soft_wrap=True)
    for x in more:
        err.print(x, highlight=False, markup=False, soft_wrap=True)


def config_warnings(h: Path) -> None:
    """Print config.toml's warnings (unknown keys, with the closest valid one) for a
    command that reads its settings; a broken file is left to the command to report."""
    from ctxkeep.service.store import config_warnings as lines

    for w in lines(h):
        warn(w)


def _count(n: int, word: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1 entry`` (``plural`` for irregular words), with
    thousands separators."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def _size(n: int) -> str:
    """A size in bytes as people read it, decimal units: ``512 B``, ``12.3 KB``,
    ``4.5 MB``, ``1.2 GB`` (the one size format of every command's text output)."""
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:,.1f} {unit}"
    return f"{n:,} B"


def _argv_home() -> Path | None:
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == "--home" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if a.startswith("--home="):
            return Path(a.split("=", 1)[1])
    return None


def _store_error(e: BaseException) -> bool:
    """Print the one line of a store error that escaped a command and return True:
    a damaged store (SQLITE_CORRUPT, SQLITE_NOTADB read mid-command) as ``error:
    store.db is damaged (<path>) - run 'ctxkeep doctor'``, any other ``CtxkeepError`` as
    its own line (``service.store.store_error``); a file-system failure anywhere in its
    chain of causes (a full disk, a read-only file system, a path through a file,
    permission denied: ``errors.from_os_error``) as ``error: <what> (<file>) - <what to
    do>``. False for anything else."""
    from ctxkeep.errors import CtxkeepError
    from ctxkeep.service.store import resolve_home, store_error

    try:
        home = resolve_home(_argv_home() or _top_home)
    except CtxkeepError:  # the home itself is the problem: the error names its path
        home = Path(_argv_home() or _top_home or ".")
    err = store_error(home, e)
    if err is None:
        return False
    typer.echo(f"error: {cli_words(err)}", err=True)
    return True


def _house_words(msg: str) -> str:
    """Click's usage message in the house style of ``error:`` lines: lower-case, no
    period before the dash (``No such command 'x'. Did you mean 'y'?`` → ``no such
    command 'x' - did you mean 'y'?``; ``No such option: --x`` → ``no such option:
    --x``)."""
    if msg[:1].isupper() and msg[1:2].islower():
        msg = msg[0].lower() + msg[1:]
    msg = re.sub(r"\. Did you mean ", " - did you mean ", msg)
    return msg[:-1] if msg.endswith(".") else msg


class PipeClosed(Exception):
    """stdout's reader went away mid-output (``ctxkeep search x | head -1``): EPIPE on a
    write. Not an ``OSError``, so Click's own EPIPE handling (a silent exit 1) never sees
    it; ``run_command`` ends the command quietly with 0."""


def _is_epipe(e: BaseException) -> bool:
    """Whether ``e`` is a write to a pipe whose reader has gone (EPIPE)."""
    import errno

    return isinstance(e, BrokenPipeError) or isinstance(e, OSError) and e.errno == errno.EPIPE


def _stdout_to_devnull() -> None:
    """Point file descriptor 1 at ``/dev/null``: what stdout still buffers is then
    flushed there at exit, not raised again as BrokenPipeError ("Exception ignored ...",
    exit 120). stdout's buffer is emptied first, best effort (its bytes can no longer
    reach the reader)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no real stdout (a test's runner)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def end_output(code: int) -> int:
    """``code``, once stdout is flushed: when its reader went away meanwhile (the last
    lines still buffered when ``head -1`` exited), quietly, and 0 if the command
    succeeded (as ripgrep does: a reader that stops reading is no failure), rather than
    Python's "Exception ignored ... BrokenPipeError" and exit 120 at shutdown."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as e:
        if not isinstance(e, OSError) or not _is_epipe(e):
            raise
        _stdout_to_devnull()
    return code


def run_command(call) -> int:
    """Run ``call()`` (the Click group's non-standalone ``main``) under the one error
    contract and return the exit code: usage errors (unknown option, bad value, missing
    argument) as ONE line ``error: <what> - see `ctxkeep <command> --help``` and 2;
    ``ctxkeep`` errors that escaped a command (a damaged store) as their line and 1;
    Ctrl-C at a prompt 1; stdout's reader gone (``| head -1``: ``PipeClosed``) quietly
    0, as ripgrep does (git dies of SIGPIPE, 141, which fails a ``set -o pipefail``
    script); anything else propagates (a bug: its traceback is wanted)."""
    try:  # Typer ≥ 0.2x vendors Click as typer._click
        from typer._click import exceptions as cexc
    except ImportError:  # pragma: no cover - older Typer on plain Click
        from click import exceptions as cexc  # type: ignore[no-redef]  # the same module, Click's own

    try:
        rv = call()
    except PipeClosed:
        _stdout_to_devnull()
        return 0
    except cexc.UsageError as e:
        if not e.format_message():  # no arguments at all: the help was printed
            return 2
        if isinstance(e, getattr(cexc, "NoArgsIsHelpError", ())):
            # a group without its command (`ctxkeep report`): the group's help as
            # `--help` lays it out, on stderr, and 2 (newuser24 F1: not one flattened line)
            typer.echo(e.format_message(), err=True)
            return 2
        # the parser raises "Option '--x' requires an argument" without a context: the
        # command the group resolved last (``_Group.resolve_command``) is the one
        where = e.ctx.command_path if e.ctx else _resolved[-1] if _resolved else "ctxkeep"
        msg = _house_words(" ".join(e.format_message().split()))
        # a line that names a command to run or the agent meant already says what to do
        # (and stays within 80 columns: ``options.unknown_value``)
        done = "`ctxkeep " in msg or " - did you mean " in msg and msg.endswith("?")
        see = "" if done else f" - see `{where} --help`"
        typer.echo(f"error: {msg}{see}", err=True)
        return 2
    except typer.Abort:  # Ctrl-C or end of input at a prompt
        typer.echo("error: aborted", err=True)
        return 1
    except cexc.ClickException as e:
        typer.echo(f"error: {e.format_message()}", err=True)
        return e.exit_code
    except Exception as e:  # SQLITE_CORRUPT where a command read a damaged page
        if not _store_error(e):
            raise
        return 1
    if rv == 130 and not _stop_said:  # Typer's exit code for Ctrl-C
        typer.echo("interrupted: what was stored stays stored; run the command again to go on", err=True)
    return rv if isinstance(rv, int) else 0


class _Argument(TyperArgument):
    """An argument whose usage metavar is its own: ``QUERY``, ``[FILE]...`` (Typer 0.28
    writes a required one as ``{QUERY}``)."""

    def make_metavar(self, ctx, *, usage: bool = False) -> str:
        var = super().make_metavar(ctx, usage=usage)
        if usage and var.startswith("{") and var.endswith("}"):  # {QUERY}, {dest}
            return self.metavar or var[1:-1].upper()
        return var


def _plain_metavars(group) -> None:
    """Give every argument of ``group``'s commands (and sub-groups) ``_Argument``'s
    usage metavar (loads every command of a lazy group: for the full listings)."""
    for cmd in getattr(group, "commands", {}).values():
        _plain_metavars_of(cmd)


def _plain_metavars_of(cmd) -> None:
    """``_Argument``'s usage metavar for the arguments of ``cmd`` and of its sub-commands
    (and ``_narrow_help``)."""
    for p in cmd.params:
        if type(p) is TyperArgument:
            p.__class__ = _Argument
    _narrow_help(cmd)
    _plain_metavars(cmd)


#: below this terminal width a command's help is Click's plain layout, not Rich's panels
RICH_HELP_WIDTH = 120


def _help_width() -> int:
    """The width, in cells, Typer's Rich help will be drawn at: its own Console's (COLUMNS,
    else the terminal's, else 80 when stdout is no terminal), not ``out``'s, which is
    ``PIPE_WIDTH`` when piped; so ``ctxkeep retention --help | less`` got Rich's panels at
    80 columns with option names cut (newuser18 F12)."""
    from rich.console import Console
    from typer import rich_utils

    return Console(width=rich_utils.MAX_WIDTH).width


def _narrow_help(cmd) -> None:
    """Give ``cmd`` (a Typer command or sub-group) Click's plain help layout in a
    terminal narrower than ``RICH_HELP_WIDTH``: Rich's option panel cut option names and
    config keys with "…" at 80 columns (``--archive-after-d…``, ``retention.archive…``)
    and read ``[vault]`` in a help text as markup; Click's puts a long option on a line
    of its own and wraps the help under it, cutting nothing."""
    if getattr(cmd, "_narrow_help", False) or not hasattr(cmd, "rich_markup_mode"):
        return
    rich_help = cmd.format_help

    def format_help(ctx, formatter):
        mode = cmd.rich_markup_mode
        if mode is None or _help_width() >= RICH_HELP_WIDTH:
            return rich_help(ctx, formatter)
        cmd.rich_markup_mode = None  # TyperCommand.format_help: Click's own layout
        try:
            return rich_help(ctx, formatter)
        finally:
            cmd.rich_markup_mode = mode

    cmd.format_help = format_help
    cmd._narrow_help = True


#: every top-level command, in the order of ``ctxkeep --help``: name → (the modules of
#: ``ctxkeep.cli`` that register it and its sub-commands, its help panel). A command's
#: modules are imported only when it is run or listed (``_LazyCommands``): Typer would
#: otherwise build all ~25 commands (~0.1 s) to run one. A test checks this table
#: against what the modules register.
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "sources": (("sources",), "Main job"),
    "ingest": (("core",), "Main job"),
    "search": (("core",), "Search and read"),
    "show": (("core",), "Search and read"),
    "stats": (("core",), "Search and read"),
    "sessions": (("sessions",), "Search and read"),
    "resume": (("sessions",), "Search and read"),
    "statusline": (("report",), "Usage and cost"),
    "compress": (("compress",), "Maintenance"),
    "purge": (("maintenance",), "Maintenance"),
    "retention": (("maintenance",), "Maintenance"),
    "reindex": (("maintenance",), "Maintenance"),
    "backfill": (("maintenance",), "Maintenance"),
    "serve": (("maintenance",), "Maintenance"),
    "doctor": (("doctor",), "Store health"),
    "backup": (("doctor",), "Store health"),
    "restore": (("doctor",), "Store health"),
    "redact": (("redact",), "Store health"),
    "reparse": (("reparse",), "Store health"),
    "secrets": (("secrets",), "Store health"),
    "help": (("docs",), "Help"),
    "export": (("export",), "Usage and cost"),
    "ui": (("ui",), "Search and read"),
    "report": (("report", "report_html"), "Usage and cost"),
    "quarantine": (("quarantine",), "Store health"),
    "vault": (("vault",), "Store health"),
    "hook": (("hook",), "Agents"),
    "hooks": (("hooks",), "Agents"),
    "mcp": (("mcp",), "Agents"),
}


def _registered(name: str):
    """The Typer info (``CommandInfo`` or ``TyperInfo``) registered on ``app`` as
    ``name``, or None."""
    from typer.main import get_command_name

    for c in app.registered_commands:
        if (c.name or get_command_name(getattr(c.callback, "__name__", ""))) == name:
            return c
    for g in app.registered_groups:
        if g.name == name:
            return g
    return None


class _LazyCommands(Mapping):
    """The top-level group's ``commands``: every name of ``COMMANDS`` is there from the
    start; a command is built (its modules imported, Typer's Click command made) when it
    is looked up; iterating (help, completion, ``ctxkeep help``) builds them all, in
    ``COMMANDS``' order."""

    def __init__(self) -> None:
        self._built: dict = {}

    def __getitem__(self, name: str):
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = self._build(name)
        return self._built[name]

    def _build(self, name: str):
        from importlib import import_module

        from typer.main import get_command_from_info, get_group_from_info

        modules, panel = COMMANDS[name]
        for m in modules:
            import_module(f"ctxkeep.cli.{m}")
        info = _registered(name)
        if info is None:  # the table names a command no module registers: a bug
            raise KeyError(name)
        info.rich_help_panel = panel
        kw: dict[str, Any] = {
            "pretty_exceptions_short": app.pretty_exceptions_short,
            "rich_markup_mode": app.rich_markup_mode,
        }
        cmd: Any  # a Click group or command, as Typer builds them
        if hasattr(info, "typer_instance"):
            cmd = get_group_from_info(info, suggest_commands=app.suggest_commands, **kw)
        else:
            cmd = get_command_from_info(info, **kw)
        _plain_metavars_of(cmd)
        return cmd

    def __iter__(self):
        for modules, _ in COMMANDS.values():  # as the modules would register them
            for m in modules:
                __import__(f"ctxkeep.cli.{m}")
        return iter([*COMMANDS, *(n for n in self._built if n not in COMMANDS)])

    def __len__(self) -> int:
        return len(COMMANDS) + sum(n not in COMMANDS for n in self._built)

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._built

    def __setitem__(self, name: str, cmd) -> None:  # Click's ``add_command``
        self._built[name] = cmd

    def keys(self):
        """The names, nothing built (Typer's "did you mean" suggestions)."""
        return [*COMMANDS, *(n for n in self._built if n not in COMMANDS)]


#: ``ctxkeep <command>`` of each command the top-level group resolved, in this process
_resolved: list[str] = []


#: what bare ``ctxkeep`` prints (exit 0): the first commands a new user types, within 80
#: columns; ``ctxkeep --help`` lists every command (it printed that 88-line list and
#: exited 2, Click's code for "no command", which read as a failure)
SHORT_HELP = """\
ctxkeep keeps the context of AI coding agents: ingest, search, maintain sessions

Usage: ctxkeep COMMAND [ARGS]... [OPTIONS]

First steps:
  ctxkeep sources         the agents' session files found on this machine
  ctxkeep ingest          store them (run again: only what changed)
  ctxkeep search QUERY    search every session
  ctxkeep sessions        the sessions, newest first
  ctxkeep stats           what the store holds
  ctxkeep ui              browse the store in the browser

`ctxkeep --help` lists every command; `ctxkeep help COMMAND` explains one.
"""


class _Group(TyperGroup):
    """The top-level Click group: run standalone (the console script, ``python -m
    ctxkeep``, Click's test runner), it applies the error contract (``run_command``)
    instead of Click's boxed usage errors, so every way in gives the same lines and
    exit codes. Its commands are built on first use (``_LazyCommands``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Typer built what was registered already (modules imported before): rebuilt
        # on use instead, with its help panel
        # Click types ``commands`` as mutable; this group only reads it (no add_command)
        self.commands = _LazyCommands()  # type: ignore[assignment]

    def resolve_command(self, ctx, args):
        """Click's ``resolve_command``, noting the command's path for ``run_command``."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            _resolved.append(f"{ctx.command_path} {cmd.name or name}")
        return name, cmd, rest

    def invoke(self, ctx):
        """Click's ``invoke``, with a write to a pipe whose reader has gone (EPIPE) raised
        as ``PipeClosed``: Click would end it with a silent exit 1."""
        try:
            return super().invoke(ctx)
        except OSError as e:
            if _is_epipe(e):
                raise PipeClosed from e
            raise

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        def call():
            return super(_Group, self).main(
                args, prog_name="ctxkeep", complete_var=complete_var, standalone_mode=False, **extra
            )

        if args is None and not sys.argv[1:] or args is not None and not list(args):
            sys.stdout.write(SHORT_HELP)  # bare `ctxkeep`: what to type first, not an error
            if not standalone_mode:
                return 0
            sys.exit(0)
        if not standalone_mode:
            return call()
        sys.exit(end_output(run_command(call)))


app.info.cls = _Group


#: what a terminal that cannot show a character gets instead (``_degrade_output``);
#: any other character it cannot show is ``?``
_ASCII_FALLBACK = {
    "\u2026": "...", "\u2192": "->", "\u2190": "<-", "\u2194": "<->", "\u21b3": "->",
    "\u2014": "--", "\u2013": "-", "\u2212": "-", "\u2018": "'", "\u2019": "'",
    "\u201c": '"', "\u201d": '"', "\u2022": "*", "\u00b7": ".", "\u00d7": "x",
    "\u2264": "<=", "\u2265": ">=", "\u2248": "~", "\u2514": "`-", "\u251c": "|-",
    "\u2502": "|", "\u2500": "-", "\u2713": "v", "\u2717": "x", "\u00a0": " ",
}  # fmt: skip


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """The codec error handler ``ctxkeep-degrade``: each character the output's encoding
    cannot hold as its ``_ASCII_FALLBACK`` text, else ``?`` (a surrogate of an
    undecodable byte too)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join(_ASCII_FALLBACK.get(ch, "?") for ch in bad), exc.end


def _degrade_output() -> None:
    """stdout and stderr, when their encoding is not UTF-8 (a Latin-1 terminal,
    ``PYTHONIOENCODING=latin-1``; ``LC_ALL=C`` without Python's UTF-8 coercion), write
    what they cannot encode degraded (``...``, ``->``, ``?``: ``_ascii_fallback``)
    instead of raising ``UnicodeEncodeError`` mid-output (a traceback: newuser17 F4).
    Everything printed goes through these two streams (Rich consoles, ``say``, JSON),
    so this one place covers every command."""
    import codecs

    codecs.register_error("ctxkeep-degrade", _ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        reconfigure = getattr(stream, "reconfigure", None)
        if enc not in ("utf8", "utf8sig") and reconfigure is not None:
            reconfigure(errors="ctxkeep-degrade")


def text_arg(text: str) -> str:
    """An argument that is text, never a path (a search query), as the UTF-8 the user
    typed: in a terminal whose locale is ASCII (``LC_ALL=C``, no UTF-8 mode) Python
    decodes ``argv`` with ``surrogateescape``, so ``请你分析`` arrives as lone surrogates
    that match nothing; undecodable bytes stay as they came."""
    if not any("\udc80" <= ch <= "\udcff" for ch in text):
        return text
    try:
        return os.fsencode(text).decode("utf-8")
    except UnicodeError:
        return text


def main() -> None:
    """The ``ctxkeep`` console entry point: ``app`` under the error contract
    (``run_command``; exit 0 success, 1 failure, 2 wrong usage).

    The process ends when ``app`` returns: its objects are frozen first
    (``gc.freeze``), so the interpreter's exit does not walk them for garbage cycles
    (after an ingest, with Polars and DuckDB loaded, that walk took ~0.17-0.25 s of a
    first ingest's wall time; atexit handlers still run).

    pydantic plugins are off (``PYDANTIC_DISABLE_PLUGINS=__all__`` unless the
    environment sets it: an empty value turns them back on): ctxkeep's request and
    result models use none, and finding none read every installed package's entry
    points at the first validation (pydantic 2.x ``plugin._loader.get_plugins``,
    ~6-9 ms of CPU of each command with a pydantic model, issue 26)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _degrade_output()
    try:
        app()
    finally:
        gc.freeze()


def finishing(stop) -> None:
    """Said at once on the first Ctrl-C (or SIGTERM) of a scrub or a compress: the file
    it finishes first and how to stop now (newuser18 F8: 63 s of silence on a 129 MB
    file). Here, not in ``cli.secrets``: ``compress`` importing that module registered
    ``secrets`` with it (the lazy command table, ``COMMANDS``)."""
    size = ""
    if stop.current:
        try:
            size = f" ({_size(Path(stop.current).stat().st_size)})"
        except OSError:
            pass
    what = f"{tilde(stop.current)}{size}" if stop.current else "the file in hand"
    for part in fold(
        f"{stop.name or 'stop'}: finishing {what} first; press Ctrl-C again to stop now "
        "(no file is ever left half-written)",
        indent="    ",
    ):
        err.print(part, highlight=False, markup=False)

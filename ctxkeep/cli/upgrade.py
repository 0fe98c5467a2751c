"""The store upgrade's progress on stderr: the phases ``sinks.sqlite.migrations``
reports on the ``ctxkeep.upgrade`` logger (``migrations.phase``) while a command's
first writable open migrates an older store (49-87 s for a 2 GB store v9 → v10).

On a terminal, one live line (a spinner, the phase, a bar of its rows done of total when
it counts them, the upgrade's elapsed time), gone when the upgrade ends, then one line saying how long it took;
otherwise one plain line per phase (counts left out). Rich is imported only when an
upgrade starts: a command that upgrades nothing pays one logger lookup.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class UpgradeStatus(logging.Handler):
    """A ``logging.Handler`` for the ``ctxkeep.upgrade`` records (``migrations.phase``:
    the message is the phase, ``progress`` is ``(done, total)`` rows or None, ``done``
    True on the last record). ``console`` is a Rich console on stderr (or an object
    with ``get()`` returning one, as ``cli._LazyConsole``)."""

    def __init__(self, console) -> None:
        super().__init__(logging.INFO)
        self._console = console
        self._status: Progress | None = None
        self._task: TaskID | None = None
        self._started = 0.0
        self._last = ""

    def _con(self):
        c = self._console
        return c.get() if hasattr(c, "get") else c

    def emit(self, record: logging.LogRecord) -> None:
        """Show ``record``'s phase (or end the display, for the last record)."""
        text = record.getMessage()
        progress = getattr(record, "progress", None)
        con = self._con()
        if not self._started:
            self._started = time.monotonic()
        elapsed = time.monotonic() - self._started
        if getattr(record, "done", False):
            self.close_status()
            if not getattr(record, "failed", False):  # a failure says so in its error line
                con.print(f"store upgraded in {elapsed:.0f} s", style="dim", highlight=False)
            self._started = 0.0
            return
        if not con.is_terminal:
            if text != self._last:
                con.print(f"upgrading the store: {text}", markup=False, highlight=False)
            self._last = text
            return
        done, total = progress if progress is not None else (0, None)
        if self._status is None:
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            counts_col = TextColumn("{task.fields[counts]}")
            self._status = Progress(
                SpinnerColumn(), TextColumn("upgrading the store: {task.description}"), BarColumn(),
                counts_col, TimeElapsedColumn(),
                console=con, transient=True,
            )  # fmt: skip
            self._status.start()
            self._task = self._status.add_task(text, total=None, counts="")
        counts = f"{done:,}/{total:,}" if total is not None else ""
        assert self._task is not None  # added with the status line
        self._status.update(self._task, description=text, completed=done, total=total, counts=counts)

    def close_status(self) -> None:
        """Stop the live line, if one is shown."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        """Stop the live line (logging's shutdown, an upgrade that raised)."""
        self.close_status()
        super().close()


def install(console) -> UpgradeStatus:
    """Attach an ``UpgradeStatus`` on ``console`` to the ``ctxkeep.upgrade`` logger
    (level INFO, not propagated), replacing one installed before. Returns it."""
    logger = logging.getLogger("ctxkeep.upgrade")
    for h in list(logger.handlers):
        if isinstance(h, UpgradeStatus):
            logger.removeHandler(h)
            h.close()
    handler = UpgradeStatus(console)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler

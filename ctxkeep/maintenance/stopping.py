"""Stop between files, never inside one: the commands that rewrite or write back the
user's files one by one (``compress``, ``secrets --scrub``, ``vault restore``) run
their loop under ``stop_between_files()``. While it runs, SIGINT (Ctrl-C) and SIGTERM
only ask to stop: the file in hand finishes its atomic replace (or rolls it back on its
own error), then the loop sees ``stop.signal`` and leaves the rest untouched; the
command says how many files were done and exits 128 + the signal's number (130 for
SIGINT, 143 for SIGTERM). A second signal stops at once (KeyboardInterrupt, as
before: the rewrites' own ``except BaseException`` clean-ups and the store's intents
still hold).

Before (newuser16 F15: a Ctrl-C at file 8 of 31 let compress rewrite the other 23 and
exit 0) a process started with SIGINT ignored (a script's ``cmd &``: Python then installs
no KeyboardInterrupt handler) went on to the end, and SIGTERM killed it mid-file (a temp
file left, the store's intent completed by the next run). The handlers are installed in the main thread only
(``signal.signal`` raises elsewhere: a Prefect task thread runs the loop unguarded)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Stop:
    """``signal``: the number of the first SIGINT/SIGTERM received (None: none);
    ``current``: the file in hand (the loop sets it before each file; None between)."""

    signal: int | None = None
    current: str | None = None

    @property
    def name(self) -> str | None:
        """``SIGINT`` / ``SIGTERM``, or None."""
        return signal.Signals(self.signal).name if self.signal else None

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (130 for SIGINT, 143 for SIGTERM); 0 without one."""
        return 128 + self.signal if self.signal else 0


@contextmanager
def stop_between_files(on_first: Callable[[Stop], None] | None = None) -> Iterator[Stop]:
    """Yield a ``Stop`` the caller checks before each file; SIGINT and SIGTERM set it
    for the block's duration (the handlers before are put back after it).
    ``on_first(stop)`` is called on the first signal, at once (the front end says
    which file it finishes and that a second Ctrl-C stops now: newuser18 F8, 63 s of
    silence while a 129 MB file finished); an error it raises is ignored."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    sigs = [signal.SIGINT] + ([signal.SIGTERM] if hasattr(signal, "SIGTERM") else [])

    def ask(signum, _frame) -> None:
        if stop.signal is not None:  # the second one: at once
            raise KeyboardInterrupt
        stop.signal = signum
        if on_first is not None:
            try:
                on_first(stop)
            except Exception:  # a word to the user never stops the stop
                pass

    old = {s: signal.signal(s, ask) for s in sigs}
    try:
        yield stop
    finally:
        for s, h in old.items():
            signal.signal(s, h)


__all__ = ["Stop", "stop_between_files"]

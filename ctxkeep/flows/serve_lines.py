"""One line per scheduled run, for a user watching ``ctxkeep serve`` (newuser19 F8:
after its start line serve printed nothing for 240 s, runs or not).

``serve`` sets ``CTXKEEP_SERVE_LINES=1`` in its environment before serving; Prefect's
runner starts each flow run in a subprocess with that environment
(``prefect.runner._starter_engine``: ``env.update(os.environ)``) and streams its
output to serve's own (``stream_output=True``). A flow wrapped by ``announced`` then
writes, when it ends, one line to stderr::

    ctxkeep serve: ingest 2026-12-06 07:45:00 UTC, 2.3 s: ok, 120 new entries from 3 files

(``failed: <error>`` / ``interrupted`` when it did not end well). Run any other way
(``ctxkeep ingest`` recording its run on serve's server, a test) the flow prints
nothing. No Prefect here: the wrapper goes under Prefect's ``@flow``.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: the environment variable ``serve`` sets for its flow runs ("1": print the line)
ENV = "CTXKEEP_SERVE_LINES"


def _count(n: Any, one: str, many: str | None = None) -> str:
    n = int(n or 0)
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def describe(flow: str, rep: Any) -> str:
    """What a run of ``flow`` did, in words, from its return value (each flow's
    report dict; keys as ``pipeline.summary.Summary``, ``maintenance.compress``,
    ``maintenance.retention``, ``maintenance.backup``, ``maintenance.purge_policy`` and
    ``maintenance.export`` return them). A key missing reads as 0."""
    r = rep if isinstance(rep, dict) else {}
    if flow == "ingest":
        return (
            f"{_count(r.get('entries_new'), 'new entry', 'new entries')} "
            f"from {_count(r.get('files_read'), 'file')} read"
        )
    if flow == "compress":
        return f"{_count(r.get('compressed'), 'file')} compressed, {r.get('refused', 0) or 0:,} refused"
    if flow == "retention":
        archived = (r.get("archived") or {}).get("entries", 0)
        return (
            f"{_count(archived, 'entry', 'entries')} archived, "
            f"{_count(r.get('backups_removed'), 'old backup')} removed"
        )
    if flow == "backup":
        return f"{r.get('path')} ({int(r.get('bytes') or 0):,} bytes)"
    if flow == "purge-policy":
        return f"{_count((r.get('totals') or {}).get('entries'), 'entry', 'entries')} purged"
    return "done"


def line(flow: str, started: dt.datetime, seconds: float, outcome: str) -> str:
    """The printed line: flow, start (UTC, to the second), wall seconds, outcome."""
    return f"ctxkeep serve: {flow} {started:%Y-%m-%d %H:%M:%S} UTC, {seconds:.1f} s: {outcome}"


def announced(flow: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a flow's function (under ``@flow``) to print its run's line when
    ``ENV`` is "1" (``functools.wraps``: Prefect reads the same signature)."""

    def deco(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if os.environ.get(ENV) != "1":
                return fn(*args, **kwargs)
            started, t0 = dt.datetime.now(dt.UTC), time.perf_counter()

            def say(outcome: str) -> None:
                print(line(flow, started, time.perf_counter() - t0, outcome), file=sys.stderr, flush=True)

            try:
                rep = fn(*args, **kwargs)
            except KeyboardInterrupt:
                say("interrupted")
                raise
            except BaseException as e:
                msg = (str(e).splitlines() or [""])[0][:200]
                say(f"failed: {type(e).__name__}" + (f": {msg}" if msg else ""))
                raise
            try:
                words = describe(flow, rep)
            except Exception:  # a report of another shape: the run still ended well
                words = "done"
            say(f"ok, {words}")
            return rep

        return wrapper

    return deco

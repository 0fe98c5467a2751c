"""The hooks' log, ``<home>/hooks.log``: one line per hook run and per ingest a
hook's worker did, ``<UTC time> <agent> <event>: <outcome>: <detail>`` (``log``), and
what it says of each hook's last run (``last_runs``, for ``hooks status``). Imports
nothing of ctxkeep's, so the service layer may read it (the worker imports the
service)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

LOG_FILE = "hooks.log"
LOG_MAX_BYTES = 1_000_000  # the log is cut to its newest half beyond this


def log(home: Path, agent: str, event: str, message: str) -> None:
    """Append one line ``<UTC time> <agent> <event>: <message>`` to ``<home>/hooks.log``
    (created 0600; never raises)."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        p = home / LOG_FILE
        if p.exists() and p.stat().st_size > LOG_MAX_BYTES:
            keep = p.read_bytes()[-LOG_MAX_BYTES // 2 :]
            p.write_bytes(keep[keep.find(b"\n") + 1 :])
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            f.write(f"{now} {agent} {event}: {' '.join(message.split())}\n")
    except Exception:
        pass


#: the bytes of the log's end ``last_runs`` reads
LAST_RUNS_BYTES = 256 << 10


def last_runs(home: Path) -> dict[tuple[str, str], dict]:
    """What ``hooks.log``'s newest ``LAST_RUNS_BYTES`` say of each hook, by
    ``(agent, event)`` as the hook was called (``stop``, ``notify``, ``AfterAgent``…):
    ``{"at": "<UTC ISO time>", "outcome": <the message's first word: queued, ingested,
    unchanged, skipped, snapshot, error, timeout…>, "detail": <the rest>}`` of the newest
    line, and ``"error"`` the same of the newest ``error``/``timeout`` line (None:
    none). A hook never fails its agent, so this is where a failing one shows
    (``hooks status``; newuser20 F15). Never raises ({} without a log)."""
    out: dict[tuple[str, str], dict] = {}
    try:
        with open(home / LOG_FILE, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - LAST_RUNS_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return out
    for line in lines:
        head, sep, message = line.partition(": ")
        parts = head.split(" ")
        if not sep or len(parts) != 3:
            continue
        at, agent, event = parts
        outcome, _, detail = message.partition(": ")
        row = {"at": at, "outcome": outcome, "detail": detail}
        cur = out.setdefault((agent, event), {"error": None})
        cur.update(row)
        if outcome in ("error", "timeout"):
            cur["error"] = row
    return out

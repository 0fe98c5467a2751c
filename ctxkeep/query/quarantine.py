"""The quarantined lines of the store (``ctxkeep quarantine``): what ingest could not
read (or read only after a repair), one row per line, with its redacted bytes.

A source quarantines a line it cannot parse (``sources.contract.quarantine_row``): the
file, the byte offset and length of the line, the reason, and the line's bytes after
secret redaction (``transforms.redact``), plus the SHA-256 of the complete raw line
(``raw_sha256``, how compress verifies the store holds it). ``action`` is
``skipped`` (nothing ingested from the line) or ``repaired`` (ingested leniently,
e.g. invalid UTF-8, and logged). Read-only; nothing here imports Polars or Prefect.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass

from ctxkeep.errors import NotFound, UsageError

#: the rows ``list_quarantine`` returns by default
DEFAULT_LIMIT = 100
#: characters of a line's redacted bytes a listing shows
PREVIEW_CHARS = 80


@dataclass
class QuarantinedLine:
    """One quarantined line: ``id`` (for ``ctxkeep quarantine show ID``), ``agent``,
    ``path`` (the session file), ``offset`` and ``length`` (bytes in that file),
    ``reason``, ``action`` (``skipped`` or ``repaired``), ``first_seen`` (ISO-8601
    UTC), ``raw_sha256`` (hex SHA-256 of the complete raw line; None for a row stored
    before schema v4), ``stored_bytes`` (bytes of the redacted copy kept) and
    ``preview`` (its first ``PREVIEW_CHARS`` characters, UTF-8 with replacement,
    whitespace collapsed)."""

    id: int
    agent: str
    path: str
    offset: int
    length: int
    reason: str
    action: str
    first_seen: str
    raw_sha256: str | None
    stored_bytes: int
    preview: str

    def as_dict(self) -> dict:
        return asdict(self)


_COLS = "id, agent, path, offset, length, reason, action, first_seen, raw_sha256, length(raw), substr(raw, 1, 400)"


def _row(r) -> QuarantinedLine:
    text = " ".join(bytes(r[10] or b"").decode("utf-8", "replace").split())
    return QuarantinedLine(
        id=r[0],
        agent=r[1],
        path=r[2],
        offset=r[3],
        length=r[4] or 0,
        reason=r[5] or "",
        action=r[6] or "skipped",
        first_seen=r[7] or "",
        raw_sha256=r[8],
        stored_bytes=r[9] or 0,
        preview=text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else ""),
    )


def list_quarantine(
    conn: sqlite3.Connection,
    *,
    agents: list[str] | None = None,
    action: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> tuple[list[QuarantinedLine], int]:
    """The quarantined lines, newest first (``first_seen``, then file and offset).

    Args: ``agents``: only these agents; ``action``: ``skipped`` or ``repaired``;
    ``limit``: at most this many rows (≥ 1).
    Returns ``(rows, total)``: ``total`` counts every matching line. Raises UsageError
    for an unknown ``action`` or a ``limit`` below 1."""
    if limit < 1:
        raise UsageError(f"--limit {limit} must be at least 1", where="--limit")
    where, params = [], []
    if agents:
        where.append(f"agent IN ({','.join('?' * len(agents))})")
        params += agents
    if action:
        if action not in ("skipped", "repaired"):
            raise UsageError(f"unknown action {action!r}", where="--action", hint="use skipped or repaired")
        where.append("coalesce(action, 'skipped') = ?")
        params.append(action)
    w = " WHERE " + " AND ".join(where) if where else ""
    total = conn.execute(f"SELECT count(*) FROM quarantine{w}", params).fetchone()[0]
    rows = conn.execute(
        f"SELECT {_COLS} FROM quarantine{w} ORDER BY first_seen DESC, path, offset LIMIT ?", [*params, limit]
    ).fetchall()
    return [_row(r) for r in rows], total


def get_quarantined(conn: sqlite3.Connection, line_id: int) -> tuple[QuarantinedLine, bytes]:
    """One quarantined line and its bytes as stored (redacted). Raises NotFound (exit
    1) for an id the store does not hold."""
    r = conn.execute(f"SELECT {_COLS}, raw FROM quarantine WHERE id = ?", (line_id,)).fetchone()
    if r is None:
        raise NotFound(
            f"no quarantined line {line_id}", where="ID", hint="`ctxkeep quarantine list` shows the ids"
        )
    return _row(r), bytes(r[11] or b"")

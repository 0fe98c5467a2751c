"""Reads of the SQLite store that ingest, compress and fetch need: which entries and
contents are stored, the watermarks, the tombstones, a content's text, the
quarantined lines of a file."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from ctxkeep.sinks.sqlite.params import in_parts

if TYPE_CHECKING:
    from ctxkeep.schema import Watermark

#: the columns of ``watermarks`` that make a ``schema.Watermark`` (``state`` is JSON text)
WATERMARK_COLUMNS = (
    "path",
    "agent",
    "dev",
    "ino",
    "size",
    "mtime_ns",
    "offset",
    "head_len",
    "head_hash",
    "parser_version",
    "state",
)


def existing_entry_ids(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """The subset of ``ids`` (entry ids) already stored in ``entries``."""
    found: set[str] = set()
    for part in in_parts(list(ids)):
        q = f"SELECT entry_id FROM entries WHERE entry_id IN ({','.join('?' * len(part))})"
        found.update(r[0] for r in conn.execute(q, part))
    return found


def existing_contents(conn: sqlite3.Connection, hashes: list[str]) -> dict[str, int]:
    """``content_hash → token_estimate`` (tokens) for the subset of ``hashes`` already
    stored in ``contents``."""
    found: dict[str, int] = {}
    for part in in_parts(hashes):
        q = (
            f"SELECT content_hash, token_estimate FROM contents "
            f"WHERE content_hash IN ({','.join('?' * len(part))})"
        )
        found.update((h, t) for h, t in conn.execute(q, part))
    return found


def tombstoned(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Purged scopes that ingest must skip: ``{"session": {...}, "project": {...}}``."""
    out: dict[str, set[str]] = {"session": set(), "project": set()}
    for scope, value in conn.execute("SELECT scope, value FROM tombstones"):
        out.setdefault(scope, set()).add(value)
    return out


def load_watermarks(conn: sqlite3.Connection) -> dict[str, Watermark]:
    """All watermarks (``schema.Watermark``), keyed by path."""
    from ctxkeep.schema import Watermark

    out = {}
    for r in conn.execute(f"SELECT {', '.join(WATERMARK_COLUMNS)} FROM watermarks"):
        row = dict(zip(WATERMARK_COLUMNS, r, strict=True))
        row["state"] = json.loads(row["state"] or "{}")
        out[row["path"]] = Watermark(**row)
    return out


def content_text(conn: sqlite3.Connection, content_hash: str) -> str | None:
    """The full text of a content (its chunks joined in ``seq`` order), or None."""
    rows = conn.execute(
        "SELECT ch.text FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
        "WHERE c.content_hash = ? ORDER BY ch.seq",
        (content_hash,),
    ).fetchall()
    if not rows:
        return None
    return "".join(r[0] for r in rows)


def quarantined_hashes(conn: sqlite3.Connection, path: str) -> set[str]:
    """SHA-256 hex of the complete raw bytes of every line quarantined for ``path``
    (``quarantine.raw_sha256``, recorded at ingest: the stored ``raw`` is redacted, so
    it cannot be hashed back to the line)."""
    return {
        h
        for (h,) in conn.execute(
            "SELECT raw_sha256 FROM quarantine WHERE path = ? AND raw_sha256 IS NOT NULL", (path,)
        )
    }

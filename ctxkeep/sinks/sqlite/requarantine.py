"""The quarantine rows of files derived again from the vault (``maintenance.reparse``,
so ``doctor --repair`` of a lost ``store.db`` too): what the vault's redacted bytes
cannot give back.

``quarantine.raw_sha256`` is the SHA-256 of the *raw* line (how compress checks that
the store holds a line it would cut; ``sources.contract.quarantine_row``). The vault
holds every line redacted, so a line that held a secret reads back with other bytes:
hashing them gave a different hash under the same name (newuser15 F5). Such a row
keeps the hash (and ``first_seen``) the store had for it (``facts`` read before the old
derivation is deleted: a reparse of a live store); without one (a lost store) the
hash is unknown, NULL, never another line's. A line the redaction did not touch reads
back as it was: its hash is the raw line's.

A generation compress wrote (``RawCapture.extra``) holds the unparsable lines it kept
as they were (``compress.plan``: never cut), at new offsets: parsing it quarantines
them again, where the live store holds each once, at the offset where ingest met it
(compress does not re-read the file it wrote). ``drop_repeats`` removes those again.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable

from ctxkeep.sinks.sqlite.connection import write

#: a redaction marker (``transforms.redact.MARKER_RE``, as bytes): a row whose stored
#: line holds one may have held a secret
_MARKER = re.compile(rb"\[REDACTED(?::[a-z0-9-]+)?\]")

Key = tuple[str, int, str]


Facts = tuple[str | None, str | None, int | None]


def facts(conn: sqlite3.Connection, paths: Iterable[str]) -> dict[Key, Facts]:
    """``(path, offset, reason) → (raw_sha256, first_seen, length)`` of the quarantine
    rows of ``paths`` (one query per 500 paths)."""
    out: dict[Key, Facts] = {}
    ps = list(dict.fromkeys(paths))
    for i in range(0, len(ps), 500):
        part = ps[i : i + 500]
        q = ",".join("?" * len(part))
        for path, off, reason, sha, seen, length in conn.execute(
            f"SELECT path, offset, reason, raw_sha256, first_seen, length FROM quarantine WHERE path IN ({q})",
            part,
        ):
            out[(path, off, reason)] = (sha, seen, length)
    return out


def last_id(conn: sqlite3.Connection) -> int:
    """The highest quarantine row id (0 when empty): rows added later have higher ids."""
    return conn.execute("SELECT coalesce(max(id), 0) FROM quarantine").fetchone()[0]


def settle(conn: sqlite3.Connection, paths: Iterable[str], kept: dict[Key, Facts]) -> int:
    """The rows of ``paths`` derived from the vault get the raw hash, ``first_seen`` and
    length (of the raw line) of ``kept`` (``facts`` of the old store) where it names
    them; a row it does not name whose stored line holds a redaction marker, or is only
    the head of a longer line, gets a NULL hash (unknown; its length stays the length of
    the bytes the vault gave back). Returns the rows changed."""
    ps = list(dict.fromkeys(paths))
    changes: list[tuple[str | None, str | None, int | None, int]] = []
    for i in range(0, len(ps), 500):
        part = ps[i : i + 500]
        q = ",".join("?" * len(part))
        for rid, path, off, reason, sha, seen, raw, length in conn.execute(
            "SELECT id, path, offset, reason, raw_sha256, first_seen, raw, length FROM quarantine "
            f"WHERE path IN ({q})",
            part,
        ):
            old = kept.get((path, off, reason))
            if old is not None:
                if old != (sha, seen, length):
                    changes.append((*old, rid))
            elif sha is not None:
                stored = bytes(raw or b"")
                if _MARKER.search(stored) or (length or 0) > len(stored):
                    changes.append((None, seen, length, rid))
    if changes:
        with write(conn):
            conn.executemany(
                "UPDATE quarantine SET raw_sha256 = ?, first_seen = ?, length = ? WHERE id = ?", changes
            )
    return len(changes)


def drop_repeats(conn: sqlite3.Connection, path: str, after_id: int, upto_id: int) -> int:
    """Delete the rows of ``path`` with ``after_id < id <= upto_id`` (the rows the parse
    of one generation added) whose line (stored bytes, length, reason) a row of
    ``path`` with ``id <= after_id`` holds already. Returns the rows deleted."""
    with write(conn):
        cur = conn.execute(
            "DELETE FROM quarantine WHERE path = ? AND id > ? AND id <= ? AND EXISTS ("
            "SELECT 1 FROM quarantine o WHERE o.path = quarantine.path AND o.id <= ? "
            "AND o.reason = quarantine.reason AND o.length = quarantine.length AND o.raw = quarantine.raw)",
            (path, after_id, upto_id, after_id),
        )
    return cur.rowcount

"""The ``media`` table: values compress moved out of a session file's kept lines that
the entries do not hold themselves — base64 images and documents (decoded bytes) and
``toolUseResult`` strings (redacted UTF-8 text) — so ``ctxkeep show`` still returns them
(``maintenance.compress.shrink``). Not indexed for search: the entry's own text (a
placeholder such as ``[image image/png, 785,205 bytes]``, or the tool output) is.

Columns: ``entry_id`` (the entry the value belongs to), ``seq`` (0-based per entry),
``media_type`` (``image/png`` …, ``text/plain; charset=utf-8``), ``bytes`` (length of
``data``), ``sha256`` (hex of ``data``), ``data`` (BLOB), ``added_at`` (UTC ISO-8601).
Purge deletes the rows of the entries it deletes (``delete.delete_selected``).
"""

from __future__ import annotations

import builtins
import hashlib
import sqlite3
from dataclasses import dataclass

from ctxkeep.sinks.sqlite.params import in_parts
from ctxkeep.timeutil import now_iso


@dataclass
class StoredMedia:
    """One ``media`` row (columns in the module doc)."""

    entry_id: str
    seq: int
    media_type: str
    bytes: int
    sha256: str
    data: builtins.bytes  # the field ``bytes`` shadows the builtin in this class body


def put_media(conn: sqlite3.Connection, rows: list[tuple[str, int, str, bytes]]) -> int:
    """Store ``(entry_id, seq, media_type, data)`` rows (replacing a row with the same
    key) in the caller's transaction, or in one of its own when none is open.
    Returns the rows written."""
    vals = [(e, s, mt, len(d), hashlib.sha256(d).hexdigest(), d, now_iso()) for e, s, mt, d in rows]
    if not vals:
        return 0
    q = "INSERT OR REPLACE INTO media(entry_id, seq, media_type, bytes, sha256, data, added_at) VALUES (?,?,?,?,?,?,?)"
    if conn.in_transaction:
        conn.executemany(q, vals)
    else:
        with conn:
            conn.executemany(q, vals)
    return len(vals)


def media_for(
    conn: sqlite3.Connection, entry_ids: list[str], *, with_data: bool = True
) -> dict[str, list[StoredMedia]]:
    """``entry_id → [StoredMedia]`` (in ``seq`` order) for the entries of ``entry_ids``
    that have media; ``data`` is ``b""`` unless ``with_data``. A store made before the
    table existed (opened read-only) has none: ``{}``."""
    out: dict[str, list[StoredMedia]] = {}
    col = "data" if with_data else "x''"
    try:
        for part in in_parts(list(entry_ids)):
            q = (
                f"SELECT entry_id, seq, media_type, bytes, sha256, {col} FROM media "
                f"WHERE entry_id IN ({','.join('?' * len(part))}) ORDER BY entry_id, seq"
            )
            for e, s, mt, n, h, d in conn.execute(q, part):
                out.setdefault(e, []).append(StoredMedia(e, s, mt, n, h, bytes(d)))
    except sqlite3.OperationalError as ex:
        if "no such table" in str(ex):
            return {}
        raise
    return out

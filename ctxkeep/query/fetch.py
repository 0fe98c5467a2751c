"""Full contents of entries within a token budget (tier 2: ``ctxkeep show``, MCP
``ctx_fetch``).

Each entry's text comes back whole when it fits. When it does not (the budget, or
``max_bytes``), the head and the tail are kept and the middle is replaced by one
marker line that gives the elided byte range and the call that fetches it::

    [… ctxkeep: 1,234,567 bytes elided (bytes 8192–1242759 of 1250951); fetch them
    with `ctxkeep show ID --offset 8192` or ctx_fetch {"ids": ["ID"], "offset": 8192} …]

With ``offset`` > 0 a contiguous piece from that byte offset is returned instead, and
the marker at its end gives the next offset. Cuts never fall inside a UTF-8
character. Byte figures are UTF-8 bytes of the stored (redacted) text; token figures
are estimates (the stored ``token_estimate`` scaled by bytes, else the heuristic).
"""

from __future__ import annotations

import base64
import sqlite3
from dataclasses import dataclass, field, fields

from ctxkeep.errors import UsageError
from ctxkeep.schema import EntryRef
from ctxkeep.sinks.sqlite import content_text, media_for
from ctxkeep.transforms.tokens import heuristic_tokens

MIN_ID_PREFIX = 6
HEAD_SHARE = 2 / 3  # of the kept bytes, when head and tail are kept


@dataclass
class Stored(EntryRef):
    """One ``entries`` row as fetch reads it: the ``EntryRef`` fields, the content it
    holds (``content_hash``, None for an empty text), its stored ``token_estimate``
    (tokens, None when unknown), where the agent wrote it (``source_path``, byte
    ``source_offset``) and its ``status``."""

    content_hash: str | None
    token_estimate: int | None
    source_path: str | None
    source_offset: int | None
    status: str


#: the ``entries`` columns of a ``Stored``, in its field order
_STORED_COLS = ", ".join(f.name for f in fields(Stored))


@dataclass
class Piece:
    """A text fitted into a byte cap (``cut_text``): ``text`` (the marker included),
    whether it was ``truncated``, the ``elided_bytes`` (UTF-8 bytes) replaced by the
    marker from byte ``elided_from``, and the byte offset to continue from
    (``next_offset``; None when nothing follows)."""

    text: str
    truncated: bool = False
    elided_bytes: int = 0
    elided_from: int | None = None
    next_offset: int | None = None


@dataclass
class Fetched(EntryRef):
    """One fetched entry. ``text`` is complete unless ``truncated``; then
    ``elided_bytes`` bytes from ``elided_from`` are replaced by a marker (or, for an
    ``offset`` fetch, ``next_offset`` says where to continue). ``tokens`` estimates
    the returned text."""

    source_path: str | None
    source_offset: int | None
    status: str
    bytes: int
    token_estimate: int
    offset: int
    text: str
    tokens: int
    truncated: bool = False
    elided_bytes: int = 0
    elided_from: int | None = None
    next_offset: int | None = None
    #: values compress moved out of the session file's line (``sinks.sqlite.media``),
    #: with ``media=True``: ``{"seq", "media_type", "bytes", "sha256", "data_base64"}``
    media: list = field(default_factory=list)


def resolve_ids(conn: sqlite3.Connection, ids: list[str]) -> tuple[list[str], list[str]]:
    """Full entry ids for ``ids`` (full ids or unique prefixes of ≥ ``MIN_ID_PREFIX``
    hex characters), in the given order, duplicates dropped. Returns
    ``(found, problems)``; problems are one-line messages for unknown or ambiguous ids.

    A bad value is a usage error (``UsageError``, exit 2), as a ``--session`` prefix's
    is (``sinks.sqlite.lookup.resolve_session``): an id shorter than ``MIN_ID_PREFIX``
    (it can name no entry: raised before the store is read), and an ambiguous prefix
    when no id was found. An id the store does not hold is a problem (the caller's
    ``NotFound``, exit 1, when none is found)."""
    for raw in ids:
        if len(str(raw).strip()) < MIN_ID_PREFIX:
            raise UsageError(
                f"entry id {str(raw).strip()!r} is too short (give at least {MIN_ID_PREFIX} characters)",
                where="ids",
                hint="give the ids search hits show",
            )
    found: list[str] = []
    problems: list[str] = []
    ambiguous = False
    for raw in ids:
        i = str(raw).strip().lower()
        rows = conn.execute(
            "SELECT entry_id FROM entries WHERE entry_id >= ? AND entry_id < ? LIMIT 2", (i, i + "\uffff")
        ).fetchall()
        if not rows:
            moved = _aliases(conn, i)
            if moved:
                found.extend(x for x in moved if x not in found)
                # (`reparse --rekey` put the session into Claude Code entry ids; 80 columns)
                problems.append(
                    f"{str(raw)[:12]} is now {', '.join(m[:12] for m in moved)} (rekeyed by session)"
                )
            else:
                problems.append(f"no entry {raw}")
        elif len(rows) > 1 and rows[0][0] != i:
            problems.append(f"entry id prefix {raw} is ambiguous (give more characters)")
            ambiguous = True
        elif rows[0][0] not in found:
            found.append(rows[0][0])
    if ambiguous and not found:
        raise UsageError("; ".join(problems), where="ids", hint="give more characters of the one you mean")
    return found, problems


def _aliases(conn: sqlite3.Connection, prefix: str) -> list[str]:
    """The ids ``reparse --rekey`` gave the entries an old id (or a prefix of one)
    named, that the store still holds (``maintenance.reparse.ALIASES_DDL``); [] in a
    store without the table. A prefix naming several old ids gives none."""
    try:
        rows = conn.execute(
            "SELECT a.old_id, a.new_id FROM entry_aliases a JOIN entry_rows e ON e.entry_id = a.new_id "
            "WHERE a.old_id >= ? AND a.old_id < ? ORDER BY a.new_id LIMIT 17",
            (prefix, prefix + "\uffff"),
        ).fetchall()
    except sqlite3.OperationalError:  # (no such table: never rekeyed)
        return []
    if len({o for o, _ in rows}) != 1:
        return []
    return [n for _, n in rows]


def _char_start(b: bytes, i: int) -> int:
    """The largest index ≤ i that does not fall inside a UTF-8 character of ``b``."""
    i = max(0, min(i, len(b)))
    while 0 < i < len(b) and (b[i] & 0xC0) == 0x80:
        i -= 1
    return i


def marker(entry_id: str, elided: int, start: int, total: int) -> str:
    """The one-line marker that replaces ``elided`` bytes starting at byte ``start``."""
    return (
        f"\n[… ctxkeep: {elided:,} bytes elided (bytes {start}–{start + elided} of {total}); "
        f"fetch them with `ctxkeep show {entry_id} --offset {start}` or "
        f'ctx_fetch {{"ids": ["{entry_id}"], "offset": {start}}} …]\n'
    )


def cut_text(
    text: str, entry_id: str, max_bytes: int, offset: int = 0, *, small_cap_is_text: bool = False
) -> Piece:
    """``text`` fitted into ``max_bytes`` UTF-8 bytes, the marker included; with
    ``small_cap_is_text`` (a user's ``--max-bytes``) a cap too small to hold the marker
    (~200 bytes) with at least half the cap of text goes wholly to the text and the
    marker comes on top (``--max-bytes 100`` shows 100 bytes of text, not a bare marker).

    offset 0: whole text if it fits, else head (2/3) + marker + tail (1/3).
    offset > 0: the piece ``[offset, offset + max_bytes)``, with a marker giving the
    next offset when more follows. Returns a ``Piece``. Raises UsageError when
    ``offset`` is past the end.
    """
    b = text.encode("utf-8", "surrogatepass")
    total = len(b)
    max_bytes = cap = max(0, max_bytes)
    if total > max_bytes or offset:  # room for the marker (its numbers are at most ``total``)
        room = max_bytes - len(marker(entry_id, total, total, total).encode())
        max_bytes = max_bytes if small_cap_is_text and room < max_bytes // 2 else max(0, room)
    if offset:
        if offset < 0 or offset > total:
            raise UsageError(
                f"offset {offset} is outside the text ({total} bytes)",
                where=entry_id,
                hint="use an offset from a marker",
            )
        start = _char_start(b, offset)
        if total - start <= cap:  # the rest fits whole: no marker, never a marker-only loop
            return Piece(b[start:].decode("utf-8", "surrogatepass"))
        end = _char_start(b, start + max_bytes) if start + max_bytes < total else total
        piece = b[start:end].decode("utf-8", "surrogatepass")
        if end < total:
            return Piece(
                piece + marker(entry_id, total - end, end, total),
                truncated=True,
                elided_bytes=total - end,
                elided_from=end,
                next_offset=end,
            )
        return Piece(piece)
    if total <= max_bytes:
        return Piece(text)
    head_end = _char_start(b, int(max_bytes * HEAD_SHARE))
    tail_start = _char_start(b, total - (max_bytes - head_end))
    if tail_start < head_end:
        tail_start = head_end
    elided = tail_start - head_end
    return Piece(
        b[:head_end].decode("utf-8", "surrogatepass")
        + marker(entry_id, elided, head_end, total)
        + b[tail_start:].decode("utf-8", "surrogatepass"),
        truncated=True,
        elided_bytes=elided,
        elided_from=head_end,
        next_offset=head_end,
    )


def fetch(
    conn: sqlite3.Connection,
    ids: list[str],
    *,
    budget_tokens: int | None = None,
    max_bytes: int | None = None,
    offset: int = 0,
    media: bool = False,
) -> tuple[list[Fetched], list[str]]:
    """Full contents of entries, in the given order, within a budget.

    Args:
        ids: entry ids or unique prefixes (``resolve_ids``).
        budget_tokens: total estimated tokens for all texts (None: no budget). The
            budget is shared in order: an entry gets what is left; when less than its
            size is left it is cut (head + tail + marker); when nothing is left, it
            comes back with an empty text and a marker to fetch it.
        max_bytes: cap on each entry's returned bytes (None: none).
        offset: byte offset to continue from (only with a single id).
        media: also return what compress moved out of the entry's line (images,
            documents, tool-result strings; ``Fetched.media``, data base64-encoded).
    Returns ``(entries, problems)``; problems are one-line messages (unknown ids,
    budget notes). Raises UsageError for an offset with several ids or past the end.
    """
    found, problems = resolve_ids(conn, ids)
    if offset and len(found) > 1:
        raise UsageError(
            "offset works with one entry id at a time", where="offset", hint="fetch the entries one by one"
        )
    out: list[Fetched] = []
    left = budget_tokens
    for eid in found:
        row = read_entry(conn, eid)
        text = (content_text(conn, row.content_hash) if row.content_hash else "") or ""
        nbytes = len(text.encode("utf-8", "surrogatepass"))
        tok = row.token_estimate or heuristic_tokens(text)
        piece, used = _fit(text, eid, nbytes, tok, left, max_bytes, offset)
        if left is not None:
            left -= used
        out.append(
            Fetched(
                **{f.name: getattr(row, f.name) for f in fields(EntryRef)},
                source_path=row.source_path,
                source_offset=row.source_offset,
                status=row.status,
                bytes=nbytes,
                token_estimate=tok,
                offset=offset,
                text=piece.text,
                tokens=used,
                truncated=piece.truncated,
                elided_bytes=piece.elided_bytes,
                elided_from=piece.elided_from,
                next_offset=piece.next_offset,
            )
        )
    if media and out:
        stored = media_for(conn, [f.entry_id for f in out])
        for f in out:
            f.media = [
                {
                    "seq": m.seq,
                    "media_type": m.media_type,
                    "bytes": m.bytes,
                    "sha256": m.sha256,
                    "data_base64": base64.b64encode(m.data).decode("ascii"),
                }
                for m in stored.get(f.entry_id, [])
            ]
    cut = [f.entry_id for f in out if f.truncated]
    if cut and budget_tokens is not None:
        problems.append(
            f"budget of {budget_tokens} tokens: {len(cut)} of {len(out)} entries cut "
            "(head and tail kept; markers give the way to fetch the rest)"
        )
    return out, problems


def read_entry(conn: sqlite3.Connection, entry_id: str) -> Stored:
    """The stored row of entry ``entry_id`` (a full id, as ``resolve_ids`` gives)."""
    r = conn.execute(f"SELECT {_STORED_COLS} FROM entries WHERE entry_id = ?", (entry_id,)).fetchone()
    return Stored(*r)


def _fit(
    text: str, entry_id: str, nbytes: int, tokens: int, left: int | None, max_bytes: int | None, offset: int
) -> tuple[Piece, int]:
    """``text`` (``nbytes`` UTF-8 bytes, ``tokens`` estimated) cut to what is ``left``
    of the budget (tokens; None: no budget) and to ``max_bytes``: the piece and its
    estimated tokens. Tokens convert to bytes at the text's own bytes per token; a cut
    piece is re-estimated and cut again (at most 4 times) until it fits."""
    bytes_per_token = (nbytes / tokens) if tokens else 4.0
    cap = nbytes if max_bytes is None else max_bytes
    if left is not None:
        cap = min(cap, int(max(left, 0) * bytes_per_token))
    piece = cut_text(
        text, entry_id, cap, offset, small_cap_is_text=max_bytes is not None and cap == max_bytes
    )
    used = heuristic_tokens(piece.text) if piece.truncated else tokens
    for _ in range(4):  # the cut piece's own estimate must fit what is left
        if left is None or not piece.truncated or used <= max(left, 0) or cap == 0:
            break
        cap = int(cap * max(left, 0) / used * 0.95)
        piece = cut_text(text, entry_id, cap, offset)
        used = heuristic_tokens(piece.text)
    return piece, used

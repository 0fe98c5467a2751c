"""The strategies compress applies to a Claude Code transcript before it cuts old turns.
Pure: lines in, shrunk lines out; no I/O (``compress.run`` stores what they move out
and checks the store holds it before the file is rewritten).

In order (each one lossless to the store, each keeping the file valid for Claude Code):

1. ``inline``: in user/assistant lines with a record uuid, base64 ``image``/``document``
   blocks (also inside a ``tool_result``) and tool outputs (a ``tool_result``'s text,
   any string of ``toolUseResult``) larger than ``inline_max_bytes`` are replaced by a
   short placeholder naming the entry id and the ``ctxkeep show`` call that returns
   it. Images and documents go to the store's ``media`` table (decoded bytes), so do
   ``toolUseResult`` strings (redacted text: ``toolUseResult`` is not an entry);
   a ``tool_result``'s text is the entry's own stored text. Block order and count are
   unchanged, so the line reads as the same entries (ids are ``uuid`` + block index).
2. ``duplicates``: byte-identical repeats of a line. Of state records (``permission-mode``,
   ``last-prompt`` …: only the latest counts) the last copy stays, of any other record
   the first; the last line carrying a uuid (the leaf Claude Code resumes from) always
   stays. A dropped copy's uuid (if any) stays in the file, so no parent dangles.
3. ``progress``: ``progress`` records (Claude Code 2.x: hook, bash, MCP, search
   progress while a tool runs; the final ``tool_result`` holds the outcome), except
   ``agent_progress`` (it carries a sub-agent's messages). Records whose parent was a
   dropped progress record are re-linked to its nearest kept ancestor.

Format facts: Claude Code 1.0.17 – 2.1.114 transcripts in ``shared/corpus``; Claude Code
writes compact JSON (``JSON.stringify``), as ``orjson.dumps`` does, so a rewritten line
has the agent's own form. Image token figures follow Anthropic's vision docs
(``tokens ≈ width × height / 750`` after resizing the long edge to ≤ 1568 px).
"""

from __future__ import annotations

import base64
import binascii
import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from ctxkeep.maintenance.compress.plan import CLAUDE_STATE_TYPES, Line, _relink_bytes

STRATEGIES = ("inline", "duplicates", "progress", "cut")
_MEDIA_BLOCKS = ("image", "document")


@dataclass
class MediaRow:
    """One value moved out of a kept line into the store's ``media`` table: the
    ``entry_id`` it belongs to, ``seq`` (0-based, per entry), its ``media_type``
    (``image/png`` …; ``text/plain; charset=utf-8`` for a redacted text) and ``value``
    (decoded bytes, or the text as the file holds it). ``tokens`` estimates what it
    cost the agent's context. ``data`` is what the table stores."""

    entry_id: str
    seq: int
    media_type: str
    value: bytes | str
    tokens: int = 0

    @functools.cached_property
    def data(self) -> bytes:
        """The stored bytes: ``value``'s bytes, or its text redacted (UTF-8). Redacted
        on first use: a dry run stores nothing and never pays for it (~0.3 s of a
        ``compress --check`` on the corpus)."""
        if isinstance(self.value, bytes):
            return self.value
        from ctxkeep.transforms import redact  # its patterns compile on import (~40 ms)

        return redact.redact(self.value).encode("utf-8", "surrogatepass")


@dataclass
class Shrunk:
    """The lines after the strategies, re-indexed (``Line.index`` 0..n-1, ``offset``
    the original's), with ``origin[i]`` the original index of new line ``i``;
    ``removed``: strategy → original indices dropped; ``replaced``: original indices
    whose bytes changed; ``media``: what ``inline`` moved out; ``relinked``: original
    index → new ``parentUuid``; ``image_tokens``: estimated tokens of the images and
    documents ``inline`` moved out."""

    lines: list[Line]
    origin: list[int]
    removed: dict[str, list[int]] = field(default_factory=dict)
    replaced: list[int] = field(default_factory=list)
    media: list[MediaRow] = field(default_factory=list)
    relinked: dict[int, str | None] = field(default_factory=dict)
    image_tokens: int = 0

    @property
    def changes(self) -> bool:
        """True when a strategy dropped or rewrote a line."""
        return bool(self.replaced or any(self.removed.values()))


def image_tokens(data: bytes, media_type: str | None) -> int:
    """Estimated input tokens of an image for Claude: ``w × h / 750`` after the long
    edge is scaled to ≤ 1568 px (Anthropic vision docs); PNG, GIF and JPEG sizes are
    read from their headers, anything else (PDF documents …) counts as 1 token per
    750 bytes of decoded data, at most 1,600."""
    wh = _image_size(data)
    if wh is None:
        return min(1600, max(1, len(data) // 750)) if media_type and media_type.startswith("image/") else 0
    w, h = wh
    scale = min(1.0, 1568 / max(w, h, 1))
    return max(1, int(w * scale * h * scale / 750))


def _image_size(b: bytes) -> tuple[int, int] | None:
    if b[:8] == b"\x89PNG\r\n\x1a\n" and len(b) >= 24:
        return struct.unpack(">II", b[16:24])
    if b[:6] in (b"GIF87a", b"GIF89a") and len(b) >= 10:
        return struct.unpack("<HH", b[6:10])
    if b[:2] == b"\xff\xd8":  # JPEG: walk the segments to a start-of-frame
        i = 2
        while i + 9 < len(b):
            if b[i] != 0xFF:
                return None
            marker = b[i + 1]
            seg = struct.unpack(">H", b[i + 2 : i + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", b[i + 5 : i + 9])
                return w, h
            i += 2 + seg
    return None


def _b64(s: str) -> bytes | None:
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None


def _is_message(rec: dict | None) -> TypeGuard[dict]:
    return (
        rec is not None and rec.get("type") in ("user", "assistant") and isinstance(rec.get("message"), dict)
    )


def shrink_claude(
    lines: list[Line],
    ids: list[list[str]],
    inline_max_bytes: int,
    placeholder: Callable[[str, str], str],
    tool_use_result_max_bytes: int | None = None,
) -> Shrunk:
    """Apply the three strategies (module doc) to a Claude Code transcript.

    Args: ``lines`` from ``plan.split_lines``; ``ids``: the entry ids of each line
    (``plan.line_entry_ids``; the store holds them); ``inline_max_bytes``: values
    larger than this (UTF-8 bytes of a text, characters of base64) are moved out, 0
    turns ``inline`` off; ``tool_use_result_max_bytes``: the same for strings of
    ``toolUseResult`` (Claude Code's UI copy of a result, never sent to the model:
    ``originalFile`` of every edit …; default ``inline_max_bytes``);
    ``placeholder(entry_id, what)``: the text that replaces a
    value (``what`` describes it: ``image image/png, 785,205 bytes``).
    Returns a Shrunk. Lines that do not parse are left as they are (the cut drops
    them)."""
    res = Shrunk([], [], {s: [] for s in STRATEGIES[:3]})
    work: list[Line] = list(lines)
    if inline_max_bytes > 0:
        for i, ln in enumerate(lines):
            new = _inline(ln, ids[i], inline_max_bytes, placeholder, res, tool_use_result_max_bytes)
            if new is not None:
                work[i] = new
                res.replaced.append(i)
    drop: set[int] = set()
    # duplicates
    last_uuid_line = max(
        (ln.index for ln in lines if ln.rec and isinstance(ln.rec.get("uuid"), str)), default=-1
    )
    by_body: dict[bytes, list[int]] = {}
    for ln in work:
        if ln.rec is not None:
            by_body.setdefault(ln.body, []).append(ln.index)
    for idxs in by_body.values():
        if len(idxs) < 2:
            continue
        keep = idxs[-1] if lines[idxs[0]].obj.get("type") in CLAUDE_STATE_TYPES else idxs[0]
        for i in idxs:
            if i != keep and i != last_uuid_line:
                drop.add(i)
    res.removed["duplicates"] = sorted(drop)
    # progress records without content
    prog = [
        ln.index
        for ln in work
        if ln.rec is not None
        and ln.rec.get("type") == "progress"
        and ln.index not in drop
        and ln.index != last_uuid_line
        and not (isinstance(ln.rec.get("data"), dict) and ln.rec["data"].get("type") == "agent_progress")
    ]
    res.removed["progress"] = prog
    drop.update(prog)
    # re-link the children of dropped progress records (a dropped duplicate's uuid
    # stays in the file through its kept copy)
    gone = {lines[i].obj.get("uuid"): lines[i].obj.get("parentUuid") for i in prog}
    gone.pop(None, None)
    out: list[Line] = []
    for ln in work:
        if ln.index in drop:
            continue
        p = ln.rec.get("parentUuid") if ln.rec is not None else None
        if isinstance(p, str) and p in gone:
            seen: set[str | None] = set()
            while p in gone and p not in seen:
                seen.add(p)
                p = gone[p]
            raw = _relink_bytes(ln, p)
            res.relinked[ln.index] = p
            ln = Line(ln.index, ln.offset, raw, dict(ln.obj, parentUuid=p), ln.problem)
        res.origin.append(ln.index)
        out.append(Line(len(out), ln.offset, ln.raw, ln.rec, ln.problem))
    res.lines = out
    return res


def _inline(
    ln: Line,
    ids: list[str],
    limit: int,
    placeholder: Callable[[str, str], str],
    res: Shrunk,
    tur_limit: int | None = None,
) -> Line | None:
    """The line with its large values replaced (None when nothing is over ``limit``)."""
    rec = ln.rec
    if not _is_message(rec) or not isinstance(rec.get("uuid"), str):
        return None
    content = rec["message"].get("content")
    if not isinstance(content, list) or len(ids) != len(content):
        return None  # entry ids are uuid + block index: only then is the mapping exact
    seqs: dict[str, int] = {}
    changed = False

    def move(eid: str, media_type: str, data: bytes | str, tokens: int) -> None:
        seq = seqs.get(eid, 0)
        seqs[eid] = seq + 1
        res.media.append(MediaRow(eid, seq, media_type, data, tokens))

    def media_block(b: dict, eid: str) -> dict | None:
        src = b.get("source")
        if not (isinstance(src, dict) and src.get("type") == "base64" and isinstance(src.get("data"), str)):
            return None
        if len(src["data"]) <= limit:
            return None
        data = _b64(src["data"])
        if data is None:
            return None
        mt_v = src.get("media_type")
        mt = mt_v if isinstance(mt_v, str) else "application/octet-stream"
        tok = image_tokens(data, mt)
        res.image_tokens += tok
        move(eid, mt, data, tok)
        return {"type": "text", "text": placeholder(eid, f"{b.get('type')} {mt}, {len(data):,} bytes")}

    new_content: list = []
    tool_eid = None
    for j, b in enumerate(content):
        eid = ids[j]
        if not isinstance(b, dict):
            new_content.append(b)
            continue
        t = b.get("type")
        if t in _MEDIA_BLOCKS:
            nb = media_block(b, eid)
            if nb is not None:
                new_content.append(nb)
                changed = True
                continue
        elif t == "tool_result":
            tool_eid = tool_eid or eid
            c = b.get("content")
            if isinstance(c, list):
                nc = []
                for sb in c:
                    nsb = (
                        media_block(sb, eid)
                        if isinstance(sb, dict) and sb.get("type") in _MEDIA_BLOCKS
                        else None
                    )
                    nc.append(nsb if nsb is not None else sb)
                if nc != c:
                    b, changed = dict(b, content=nc), True
                    c = nc
                text_bytes = sum(
                    len(sb["text"].encode("utf-8", "surrogatepass"))
                    for sb in c
                    if isinstance(sb, dict) and sb.get("type") == "text" and isinstance(sb.get("text"), str)
                )
                if text_bytes > limit:  # the entry's stored text holds these texts
                    first = True
                    nc = []
                    for sb in c:
                        if (
                            isinstance(sb, dict)
                            and sb.get("type") == "text"
                            and isinstance(sb.get("text"), str)
                        ):
                            if first:
                                nc.append(
                                    {"type": "text", "text": placeholder(eid, _output_what(c, text_bytes))}
                                )
                                first = False
                            continue
                        nc.append(sb)
                    b, changed = dict(b, content=nc), True
            elif isinstance(c, str) and len(c.encode("utf-8", "surrogatepass")) > limit:
                b, changed = dict(b, content=placeholder(eid, _output_what(c, None))), True
        new_content.append(b)
    new_rec = dict(rec, message=dict(rec["message"], content=new_content)) if changed else dict(rec)
    tur = rec.get("toolUseResult")
    if tur is not None:
        eid = tool_eid or ids[0]
        new_tur, moved = _shrink_value(
            tur, tur_limit or limit, lambda mt, data, tok: move(eid, mt, data, tok), eid, placeholder
        )
        if moved:
            new_rec["toolUseResult"] = new_tur
            changed = True
    if not changed:
        return None
    raw = orjson.dumps(new_rec)
    return Line(ln.index, ln.offset, raw + (b"\r" if ln.raw.endswith(b"\r") else b""), new_rec, ln.problem)


def _output_what(c: Any, nbytes: int | None) -> str:
    text = c if isinstance(c, str) else ""
    n = nbytes if nbytes is not None else len(text.encode("utf-8", "surrogatepass"))
    head = " ".join(text[:300].split())
    return f"tool output, {n:,} bytes" + (f", beginning {head[:200]!r}" if head else "")


def _shrink_value(
    v: Any,
    limit: int,
    move: Callable[[str, bytes | str, int], None],
    eid: str,
    placeholder: Callable[[str, str], str],
) -> tuple[Any, bool]:
    """``toolUseResult`` with every string over ``limit`` replaced by a placeholder;
    base64 under a ``base64``/``data`` key is moved as decoded bytes, other strings as
    text (``MediaRow.data`` redacts it). Returns (new value, whether anything moved)."""
    if isinstance(v, dict):
        out, moved = {}, False
        for k, x in v.items():
            if isinstance(x, str) and len(x.encode("utf-8", "surrogatepass")) > limit:
                data = _b64(x) if k in ("base64", "data") else None
                if data is not None:
                    t = v.get("type")
                    mt = t if isinstance(t, str) and "/" in t else None
                    mt = mt or v.get("media_type") or v.get("mediaType") or "application/octet-stream"
                    tok = image_tokens(data, str(mt))
                    move(str(mt), data, tok)
                    out[k] = placeholder(eid, f"{mt}, {len(data):,} bytes")
                else:
                    move("text/plain; charset=utf-8", x, 0)  # redacted when stored
                    out[k] = placeholder(
                        eid, f"toolUseResult.{k}, {len(x.encode('utf-8', 'surrogatepass')):,} bytes"
                    )
                moved = True
            else:
                out[k], m = _shrink_value(x, limit, move, eid, placeholder)
                moved = moved or m
        return out, moved
    if isinstance(v, list):
        items = [_shrink_value(x, limit, move, eid, placeholder) for x in v]
        return [x for x, _ in items], any(m for _, m in items)
    return v, False

"""Small helpers shared by source modules: text rendering of common block shapes."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import orjson

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (e.g. ``\\x1b[1m``) from terminal output."""
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def media_placeholder(kind: str, media_type: str | None, b64_len: int) -> str:
    """A short stand-in for inline base64 media: ``[image image/png, 785,205 bytes]``.
    The size is the decoded size (3/4 of the base64 length); the data is never kept."""
    return f"[{kind} {media_type or 'unknown'}, {b64_len * 3 // 4:,} bytes]"


def compact_json(value: Any, limit: int | None = None) -> str:
    """Compact JSON text of ``value`` (non-ASCII kept), optionally cut to ``limit`` chars."""
    try:
        s = orjson.dumps(value).decode("utf-8")
    except TypeError:
        s = str(value)
    return s if limit is None or len(s) <= limit else s[:limit] + "…"


def as_float(v: Any) -> float | None:
    """``v`` as a float when it is a finite number (bool excluded), else None (a cost a
    file logs as text or NaN is not trusted)."""

    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def as_int(v: Any) -> int | None:
    """``v`` as an int when it is a number (bool excluded), else None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v)
    return None


_B64_KEYS = ("data", "base64", "image_url", "url")
_B64_MIN = 256


def drop_media(value: Any) -> Any:
    """A copy of ``value`` where inline base64 media (a string over 256 chars under a
    ``data``/``base64``/``image_url``/``url`` key that is a ``data:`` URL or has no
    spaces) is replaced by ``media_placeholder``. Used before dumping records of
    unknown shape (attachments, unknown blocks) as JSON text, so no base64 is stored."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if (
                k in _B64_KEYS
                and isinstance(v, str)
                and len(v) > _B64_MIN
                and (v.startswith("data:") or " " not in v[:_B64_MIN])
            ):
                mt = value.get("media_type") or value.get("mimeType") or value.get("mime_type")
                if v.startswith("data:"):
                    mt = mt or v[5 : v.find(";")] if ";" in v[:100] else mt
                out[k] = media_placeholder("media", mt if isinstance(mt, str) else None, len(v))
            else:
                out[k] = drop_media(v)
        return out
    if isinstance(value, list):
        return [drop_media(v) for v in value]
    return value


def block_text(b: dict, media: tuple[str, ...] = ("image",), scrub: bool = False) -> str:
    """Text of one Anthropic-style content block (Anthropic Messages API
    ``ContentBlock``, as Claude Code and the Cline family store them): a ``text``
    block's text; a block whose type is in ``media`` (``image``, ``document``) a
    ``media_placeholder`` of its base64 ``source``; any other block compact JSON cut to
    2,000 chars (with ``scrub``, its inline media first replaced by ``drop_media``)."""
    t = b.get("type")
    if t == "text":
        return str(b.get("text") or "")
    if t in media:
        src = b.get("source") or {}
        return media_placeholder(t, src.get("media_type"), len(src.get("data") or ""))
    return compact_json(drop_media(b) if scrub else b, 2000)


def blocks_text(
    content: Any,
    render: Callable[[dict], str] = block_text,
    *,
    scalar: Callable[[Any], str] = compact_json,
    skip_non_dict: bool = False,
) -> str:
    """Plain text of a message's ``content``: a string as it is; a list of blocks, each
    dict rendered by ``render`` and anything else by ``str`` (or skipped), joined by
    newlines; None as ``""``; any other value by ``scalar``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else scalar(content)
    out = []
    for b in content:
        if isinstance(b, dict):
            out.append(render(b))
        elif not skip_non_dict:
            out.append(str(b))
    return "\n".join(out)


def dict_at(obj: dict, key: Any) -> dict:
    """``obj[key]`` when it is a JSON object (a dict), else an empty dict: a record's
    field read without trusting its type."""
    v = obj.get(key)
    return v if isinstance(v, dict) else {}


def epoch_iso(v: Any, unit: float = 1.0) -> str | None:
    """``v`` (a number of ``unit`` seconds since the epoch: 1 for seconds, 0.001 for
    milliseconds) as ISO-8601 UTC text; None for a missing, non-positive or
    out-of-range value."""
    x = as_float(v)
    if x is None or x <= 0:
        return None
    from ctxkeep.timeutil import format_epoch

    try:
        return format_epoch(x * unit)
    except (OverflowError, OSError, ValueError):
        return None

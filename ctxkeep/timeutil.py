"""UTC time as ctxkeep stores it: one format, written and read here.

Every time ctxkeep writes (entries' ``ts``, ``ingested_at``, run records, watermarks,
status changes, tombstones, the ``archived`` table, search time bounds) is ISO-8601 text
in UTC with microseconds and a ``Z``: ``2025-06-01T12:34:56.789012Z`` (``UTC_FORMAT``).
Fixed width, so text order is time order and SQLite compares bounds as text.
Polars writes the same text with ``UTC_FORMAT_POLARS`` (chrono's spelling).

Nothing heavy is imported (no Polars): the search and MCP hot paths use this module.
"""

from __future__ import annotations

import datetime as dt

UTC = dt.UTC

#: ``strftime`` format of a stored time: ISO-8601, UTC, microseconds, ``Z``
#: (``2025-06-01T12:34:56.789012Z``)
UTC_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
#: the same text in Polars / chrono terms, for ``Expr.dt.strftime`` (always 6 digits)
UTC_FORMAT_POLARS = "%Y-%m-%dT%H:%M:%S%.6fZ"
#: chrono format reading a stored time with any number of fraction digits (also none),
#: for ``Expr.str.to_datetime(..., time_zone="UTC")``
UTC_PARSE_POLARS = "%Y-%m-%dT%H:%M:%S%.fZ"
#: ``strftime`` format of a time to the second: ``2025-06-01T12:34:56Z`` (UTC)
UTC_SECONDS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: ``strftime`` format of a compact UTC stamp for file names: ``20250601T123456Z``
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


def utc_now() -> dt.datetime:
    """The current time as an aware UTC datetime."""
    return dt.datetime.now(UTC)


def format_utc(t: dt.datetime, *, whole_seconds: bool = False) -> str:
    """``t`` as stored-time text, ``2025-06-01T12:34:56.789012Z`` (``UTC_FORMAT``), or
    with ``whole_seconds`` ``2025-06-01T12:34:56Z`` (``UTC_SECONDS_FORMAT``). An aware
    ``t`` is converted to UTC; a naive one is taken as local time
    (``datetime.astimezone``)."""
    return t.astimezone(UTC).strftime(UTC_SECONDS_FORMAT if whole_seconds else UTC_FORMAT)


def now_iso() -> str:
    """The current time as stored-time text (``UTC_FORMAT``, UTC)."""
    return utc_now().strftime(UTC_FORMAT)


def format_epoch(seconds: float, *, whole_seconds: bool = False) -> str:
    """A Unix time (seconds since 1970-01-01 UTC, fractions kept to the microsecond) as
    stored-time text (``UTC_FORMAT``), or with ``whole_seconds`` as
    ``UTC_SECONDS_FORMAT``.
    Raises OverflowError, OSError or ValueError for a time the platform cannot
    represent (``datetime.fromtimestamp``)."""
    return dt.datetime.fromtimestamp(seconds, UTC).strftime(
        UTC_SECONDS_FORMAT if whole_seconds else UTC_FORMAT
    )


def stamp(t: dt.datetime | None = None) -> str:
    """A compact UTC stamp for file names, ``20250601T123456Z`` (``STAMP_FORMAT``), of
    ``t`` (default now; naive is local time)."""
    return (t or utc_now()).astimezone(UTC).strftime(STAMP_FORMAT)


def parse_utc(text: str) -> dt.datetime:
    """An ISO-8601 date or datetime text (``Z`` or an offset; naive is taken as UTC) as
    an aware datetime in its own offset. Raises ValueError for other text."""
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def local_timezone() -> str:
    """The IANA name of this machine's time zone: ``$TZ``, else the target of
    ``/etc/localtime`` (``…/zoneinfo/Europe/Berlin``), else ``/etc/timezone``, else
    ``UTC``. The default ``--timezone`` of reports, the statusline and ``report html``."""
    import os
    from pathlib import Path

    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        return tz
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    try:
        return Path("/etc/timezone").read_text().strip() or "UTC"
    except OSError:
        return "UTC"

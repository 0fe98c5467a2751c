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
import os
import re
from pathlib import Path

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


def check_timezone(name: str) -> str:
    """``name`` if it is an IANA time zone known to the system (zoneinfo), else
    UsageError (``where`` the ``timezone`` option)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from ctxkeep.errors import UsageError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise UsageError(
            f"unknown time zone {name!r}",
            where="--timezone",
            hint="give an IANA name such as Europe/Berlin or UTC",
        ) from e
    return name


def local_timezone() -> str:
    """The IANA name of this machine's time zone: ``$TZ``, else the target of
    ``/etc/localtime`` (``…/zoneinfo/Europe/Berlin``), else ``/etc/timezone``, else
    ``UTC``. The default ``--timezone`` of reports, the statusline and ``report html``."""

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


# --- the one parser of ``--since`` / ``--until`` (every command and MCP tool) --------

#: an age before now: ``30s``, ``30m``, ``12h``, ``7d``, ``2w`` (one number, one unit)
_AGE_RE = re.compile(r"^(\d+)\s*([smhdw])$")
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: the forms ``read_when`` accepts, for help texts and error hints
WHEN_FORMS = "a date (2025-06-01), a UTC datetime (2025-06-01T12:00), or an age (30m, 12h, 7d, 2w)"


def read_when(value: str, *, where: str = "--since/--until", now: dt.datetime | None = None):
    """Read one ``--since``/``--until`` value: the one parser of every command.

    Returns a ``datetime.date`` for a calendar day (``2025-06-01`` or ccusage's
    ``20250601``), else an aware datetime: an ISO-8601 datetime (``Z`` or an offset;
    naive is UTC), or an age ``30s``/``30m``/``12h``/``7d``/``2w`` before ``now``
    (default: the current time, UTC). Raises ``errors.UsageError`` (``where`` names
    the option) for anything else, impossible dates such as ``2025-13-45`` included."""
    from ctxkeep.errors import UsageError

    v = str(value).strip()
    m = _AGE_RE.match(v)
    if m:
        return (now or utc_now()) - dt.timedelta(seconds=int(m.group(1)) * _AGE_UNITS[m.group(2)])
    try:
        if len(v) == 10 and v[4] == "-":
            return dt.date.fromisoformat(v)
        if len(v) == 8 and v.isdigit():
            return dt.datetime.strptime(v, "%Y%m%d").date()
        return parse_utc(v)
    except ValueError:
        raise UsageError(f"cannot read the time {value!r}", where=where, hint="give " + WHEN_FORMS) from None


#: the time of day of an ISO-8601 datetime text, to read how precisely it was written
_TIME_RE = re.compile(r"[T ](\d\d)(?::?(\d\d)(?::?(\d\d)(?:[.,](\d+))?)?)?(?:Z|[+-]\d\d(?::?\d\d)?)?$", re.I)


def written_precision(value: str) -> dt.timedelta:
    """How much time an ISO-8601 datetime text names: ``2025-11-01T11`` a whole hour,
    ``…T11:26`` a minute, ``…T11:26:09`` a second, ``…T11:26:09.5`` a tenth of a
    second, down to one microsecond (the stored resolution, also for anything else,
    an age such as ``30m`` included: an instant)."""
    m = _TIME_RE.search(str(value).strip())
    if not m or _AGE_RE.match(str(value).strip()):
        return dt.timedelta(microseconds=1)
    if m.group(4):
        return dt.timedelta(microseconds=10 ** max(6 - len(m.group(4)), 0))
    if m.group(3):
        return dt.timedelta(seconds=1)
    return dt.timedelta(minutes=1) if m.group(2) else dt.timedelta(hours=1)


def when_bound(
    value,
    *,
    upper: bool = False,
    tz: str = "UTC",
    where: str = "--since/--until",
    now: dt.datetime | None = None,
) -> dt.datetime | None:
    """A ``--since`` (``upper`` False) or ``--until`` (``upper`` True) value as an aware
    UTC instant for a half-open window ``since <= t < until``: both ends inclusive as a
    user reads them. A day is whole: as ``since`` its first instant, as ``until`` the
    first instant of the next day (in ``tz``, an IANA name; UTC by default). A datetime
    text is whole in the same way, to the precision it is written in
    (``written_precision``): as ``until``, ``2025-11-01T11:26`` ends at 11:27:00, so a
    record at 11:26:09 (which hits show as ``11:26``) is in; an hour, a second alike.
    An age or a ``datetime`` object is an instant; as ``until`` one microsecond later
    (the stored resolution), so a record at exactly that time is in. None or '' gives
    None; a ``date``/``datetime`` object is taken as is. Raises UsageError
    (``read_when``)."""
    if value is None or value == "":
        return None
    w = value if isinstance(value, (dt.date, dt.datetime)) else read_when(value, where=where, now=now)
    if isinstance(w, dt.datetime):
        w = w if w.tzinfo else w.replace(tzinfo=UTC)
        if not upper:
            return w.astimezone(UTC)
        step = dt.timedelta(microseconds=1) if isinstance(value, dt.datetime) else written_precision(value)
        return w.astimezone(UTC) + step
    from zoneinfo import ZoneInfo

    day = w + dt.timedelta(days=1) if upper else w
    return dt.datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(tz)).astimezone(UTC)


def when_day(value, *, tz: str = "UTC", where: str = "--since/--until", now: dt.datetime | None = None):
    """A ``--since``/``--until`` value as a calendar day in ``tz`` (reports count whole
    local days): a date as is, a datetime or an age as the day it falls on in ``tz``.
    None or '' gives None. Raises UsageError (``read_when``)."""
    if value is None or value == "":
        return None
    w = value if isinstance(value, (dt.date, dt.datetime)) else read_when(value, where=where, now=now)
    if isinstance(w, dt.datetime):
        from zoneinfo import ZoneInfo

        return (w if w.tzinfo else w.replace(tzinfo=UTC)).astimezone(ZoneInfo(tz)).date()
    return w


def check_window(since, until, *, tz: str = "UTC", now: dt.datetime | None = None):
    """``(since, until)`` as ``when_bound`` instants (either may be None), checked: an
    empty window (``since`` at or after the end of ``until``) raises UsageError, so
    ``--since D --until D`` is day D. ``since``/``until`` as for ``when_bound``."""
    from ctxkeep.errors import UsageError

    lo = when_bound(since, tz=tz, where="--since", now=now)
    hi = when_bound(until, upper=True, tz=tz, where="--until", now=now)
    if lo is not None and hi is not None and lo >= hi:
        raise UsageError(
            f"--since {since} is after --until {until}",
            where="--since/--until",
            hint="swap them, or drop one",
        )
    return lo, hi

"""Times and time zones as every front end reads them (pydantic-free: a CLI option
checks its value at parse time, before any work): ``WHEN_FORMS`` (the forms of a
``--since``/``--until`` value, for help texts), ``check_when`` and ``zone``, over the
one parser (``timeutil``)."""

from __future__ import annotations

from ctxkeep.timeutil import WHEN_FORMS, check_timezone, local_timezone, read_when

__all__ = ["WHEN_FORMS", "check_when", "zone"]


def check_when(value: str, where: str) -> None:
    """Raise UsageError (``where``: the option) when ``value`` is no date, datetime or
    age (``timeutil.read_when``)."""
    read_when(value, where=where)


def zone(name: str | None) -> str:
    """The IANA zone ``name``, or this machine's (``timeutil.local_timezone``) when
    None or empty; UsageError for a zone the system does not know."""
    return check_timezone(name or local_timezone())

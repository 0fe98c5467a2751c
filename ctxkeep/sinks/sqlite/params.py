"""Bound parameters: SQLite accepts at most 32766 per statement (``SQLITE_MAX_VARIABLE_NUMBER``
since 3.32), so long ``IN (...)`` lists are sent in slices."""

from __future__ import annotations

from collections.abc import Iterator


def in_parts(values: list, n: int = 30000) -> Iterator[list]:
    """``values`` in slices of at most ``n``."""
    for i in range(0, len(values), n):
        yield values[i : i + n]

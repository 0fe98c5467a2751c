"""Bound parameters: SQLite accepts at most 32766 per statement (``SQLITE_MAX_VARIABLE_NUMBER``
since 3.32), so long ``IN (...)`` lists are sent in slices."""

from __future__ import annotations

import json
from collections.abc import Iterator

#: ``col IN_JSON`` matches the strings of one JSON array parameter (``json_list``)
IN_JSON = "IN (SELECT value FROM json_each(?))"


def in_parts(values: list, n: int = 30000) -> Iterator[list]:
    """``values`` in slices of at most ``n``."""
    for i in range(0, len(values), n):
        yield values[i : i + n]


def json_list(values: list[str]) -> str:
    """``values`` (ASCII strings: ids, hex hashes) as the one parameter of ``IN_JSON``.

    One statement text whatever the length: an ``IN (?, ?, …)`` list prepares a
    statement per length, and Python's statement cache (128 per connection) keeps each
    with its bound strings (pysqlite never clears bindings): 40 lookups of 2,000-30,000
    ids held 118 MB of statement memory (``SQLITE_DBSTATUS_STMT_USED``), and the ingest's
    dedup lookups ~40 MB of a 200 MB tree's SQLite memory. Also faster (30,000 ids:
    ~0.15 vs 0.25 s). Not for paths: a lone surrogate would not survive JSON."""
    return json.dumps(values)

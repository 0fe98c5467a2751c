"""Helpers for the per-agent source tests (ingest and query: ``conftest.ingest``, ``q``)."""

from __future__ import annotations

from pathlib import Path

from conftest import q


def kinds(store: Path, agent: str) -> dict[str, int]:
    """``{"role/kind": n}`` of an agent's entries."""
    return {
        f"{r}/{k}": n
        for r, k, n in q(store, "SELECT role, kind, count(*) FROM entries WHERE agent=? GROUP BY 1, 2", agent)
    }


#: SQL of an entry's text (alias ``e`` of ``entries``): its chunks in order, joined
ENTRY_TEXT = (
    "(SELECT group_concat(t, '') FROM (SELECT ch.text AS t FROM chunks ch JOIN contents c "
    "ON c.content_id = ch.content_id WHERE c.content_hash = e.content_hash ORDER BY ch.seq))"
)

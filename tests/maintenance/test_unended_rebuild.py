"""left19's leftover: a ``reparse`` (and ``doctor --repair``, ``restore BACKUP``, which
rebuild from the vault through it) dropped the entries of an unended last line an
ingest had already judged final (the vault's generation ends at the line's start)
until the next ingest judged it again. The rebuild judges it again at once."""

from __future__ import annotations

import sqlite3

from ctxkeep.maintenance.reparse import reparse
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.bad_input import line, rec


def _entries(store, path) -> list[tuple]:
    conn = sqlite3.connect(store / "store.db")
    try:
        return conn.execute(
            "SELECT source_offset, entry_id FROM entries WHERE source_path = ? AND kind = 'message' "
            "ORDER BY source_offset",
            (str(path),),
        ).fetchall()
    finally:
        conn.close()


def _setup(tmp_path, tail: bytes):
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-unended"
    proj.mkdir(parents=True)
    path = proj / "s.jsonl"
    path.write_bytes(line(rec(1)) + tail)
    store, ctx = tmp_path / "store", DiscoveryContext(home=home, env={})
    pipeline.run_ingest(store, ctx=ctx)  # CTXKEEP_IDLE_SECONDS=0 (conftest): judged
    return store, ctx, path


def test_reparse_keeps_the_entries_of_a_judged_unended_line(tmp_path):
    store, ctx, path = _setup(tmp_path, line(rec(2))[:-1])
    before = _entries(store, path)
    assert len(before) == 2
    reparse(store)
    assert _entries(store, path) == before
    s = pipeline.run_ingest(store, ctx=ctx)  # and the next ingest neither adds nor reads it
    assert (s.entries_new, s.quarantined) == (0, 0)
    assert _entries(store, path) == before


def test_reparse_keeps_a_judged_torn_line_quarantined_once(tmp_path):
    store, ctx, path = _setup(tmp_path, line(rec(2))[:40])
    conn = sqlite3.connect(store / "store.db")
    q = conn.execute("SELECT offset, action FROM quarantine WHERE path = ?", (str(path),)).fetchall()
    conn.close()
    assert len(q) == 1
    reparse(store)
    pipeline.run_ingest(store, ctx=ctx)
    conn = sqlite3.connect(store / "store.db")
    assert conn.execute("SELECT offset, action FROM quarantine WHERE path = ?", (str(path),)).fetchall() == q
    conn.close()


def test_a_rebuild_from_the_vault_keeps_them(tmp_path):
    """``doctor --repair`` and ``restore BACKUP`` rebuild through ``from_vault``."""
    from ctxkeep.maintenance.reparse import from_vault

    store, ctx, path = _setup(tmp_path, line(rec(2))[:-1])
    before = _entries(store, path)
    assert len(before) == 2
    from_vault(store)
    assert _entries(store, path) == before

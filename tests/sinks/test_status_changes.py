"""Status changes of stored entries: applied in order in SQLite, logged, replayed to
DuckDB rows that were synced before the change."""

from __future__ import annotations

import duckdb

from conftest import CORPUS_HOME, corpus, ingest, q
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store


def test_entry_id_changes_are_logged_and_reach_duckdb(tmp_path):
    corpus(".copilot/session-state/fixture-small.jsonl")
    store = tmp_path / "store"
    ingest(CORPUS_HOME, store, agents=["copilot-cli"])
    ids = [r[0] for r in q(store, "SELECT entry_id FROM entries WHERE kind='tool_result' ORDER BY rowid")]
    assert len(ids) == 4
    conn = sqlite_store.connect(store)
    try:
        with sqlite_store.write(conn):  # in the caller's transaction (as load_batch)
            n = sqlite_store.apply_changes(
                conn,
                [
                    {"entry_ids": ids[:3], "status": "archived"},
                    {"entry_ids": ids[:1], "status": "active"},  # later changes win
                    {"entry_ids": ids[1:2], "status": "archived"},  # no-op: already archived
                ],
            ).sqlite
        assert n == 4
        assert conn.execute("SELECT count(*) FROM status_log").fetchone() == (4,)
        r = duckdb_store.sync(conn, store)
        assert r["entries_synced"] == 0
        # a rebuild from SQLite gives the same statuses
        duckdb_store.sync(conn, store, rebuild=True)
    finally:
        conn.close()
    want = {ids[0]: "active", ids[1]: "archived", ids[2]: "archived", ids[3]: "active"}
    assert (
        dict(q(store, f"SELECT entry_id, status FROM entries WHERE entry_id IN ({','.join('?' * 4)})", *ids))
        == want
    )
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    try:
        got = dict(
            con.execute(
                f"SELECT entry_id, status FROM entries WHERE entry_id IN ({','.join('?' * 4)})", ids
            ).fetchall()
        )
    finally:
        con.close()
    assert got == want

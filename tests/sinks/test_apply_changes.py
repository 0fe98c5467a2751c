"""``sinks.sqlite.apply_changes``, the one status-change function: status changes by
entry id or by (agent, session, message id), ``from_status``, offsets of moved lines,
its own transaction or the caller's, and the same changes on DuckDB given a home."""

from __future__ import annotations

import sqlite3

import duckdb
import pytest

from conftest import CORPUS_HOME, corpus
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import EntryChanges, Relocation, StatusChange
from ctxkeep.sources.contract import DiscoveryContext


def _store_with(home, rows):
    """A store holding ``rows`` (entry_id, agent, session_id, message_id, status,
    source_offset) of ``/s.jsonl``."""
    conn = sqlite_store.connect(home)
    with sqlite_store.write(conn):
        conn.executemany(
            "INSERT INTO entries(entry_id, agent, session_id, message_id, status, source_path, "
            "source_offset) VALUES(?,?,?,?,?,'/s.jsonl',?)",
            rows,
        )
    return conn


ROWS = [
    ("e1", "codex", "s1", "m1", "active", 0),
    ("e2", "codex", "s1", "m2", "active", 10),
    ("e3", "codex", "s2", "m1", "active", 20),
    ("e4", "claude-code", "s1", "m1", "archived", 30),
]


def _status(conn):
    return dict(conn.execute("SELECT entry_id, status FROM entries"))


def test_status_change_from_a_source_dict():
    assert StatusChange.of(
        {"agent": "codex", "session_id": "s1", "message_ids": ["m1", "", None], "status": "consumed"}
    ) == StatusChange("consumed", agent="codex", session_id="s1", message_ids=("m1",))
    assert StatusChange.of({"entry_ids": ["e1"], "status": "archived"}) == StatusChange("archived", ("e1",))
    c = StatusChange("active", ("e1",))
    assert StatusChange.of(c) is c


def test_changes_by_message_id_stay_in_their_agent_and_session(store_home):
    conn = _store_with(store_home, ROWS)
    try:
        change = {"agent": "codex", "session_id": "s1", "message_ids": ["m1", "m9"], "status": "consumed"}
        a = sqlite_store.apply_changes(conn, [change], stamp="2026-01-02T03:04:05.000006Z")
        assert (a.sqlite, a.duckdb, a.note) == (1, 0, "ok")
        assert not conn.in_transaction  # its own transaction, committed
        assert _status(conn) == {"e1": "consumed", "e2": "active", "e3": "active", "e4": "archived"}
        assert conn.execute("SELECT entry_id, status, changed_at FROM status_log").fetchall() == [
            ("e1", "consumed", "2026-01-02T03:04:05.000006Z")
        ]
    finally:
        conn.close()


def test_from_status_limits_the_change(store_home):
    conn = _store_with(store_home, ROWS)
    try:
        a = sqlite_store.apply_changes(
            conn, [StatusChange("active", ("e1", "e4", "e4"), from_status="archived")]
        )
        assert a.sqlite == 1
        assert _status(conn) == {"e1": "active", "e2": "active", "e3": "active", "e4": "active"}
        assert conn.execute("SELECT entry_id FROM status_log").fetchall() == [("e4",)]
    finally:
        conn.close()


def test_moves_change_only_offsets_that_differ_and_a_failed_change_rolls_back(store_home):
    conn = _store_with(store_home, ROWS)
    try:
        a = sqlite_store.apply_changes(
            conn,
            EntryChanges(
                status=[StatusChange("archived", ("e3",))],
                moves=[
                    Relocation("/s.jsonl", (("e1", 0), ("e2", 5))),
                    Relocation("/other.jsonl", (("e3", 1),)),
                ],
            ),
        )
        assert a.sqlite == 2  # e3 archived, e2 moved (e1 unchanged, e3 is not in /other.jsonl)
        assert dict(conn.execute("SELECT entry_id, source_offset FROM entries")) == {
            "e1": 0,
            "e2": 5,
            "e3": 20,
            "e4": 30,
        }
        with pytest.raises(RuntimeError), sqlite_store.write(conn):  # rolled back with the caller's
            sqlite_store.apply_changes(conn, [StatusChange("consumed", ("e1",))])
            raise RuntimeError
        assert _status(conn)["e1"] == "active"
    finally:
        conn.close()


def test_without_an_analytics_store_duckdb_is_reported(store_home):
    conn = _store_with(store_home, ROWS)
    try:
        a = sqlite_store.apply_changes(conn, [StatusChange("archived", ("e1",))], home=store_home)
        assert (a.sqlite, a.duckdb, a.note) == (1, None, "no analytics store")
        none = sqlite_store.apply_changes(None, EntryChanges(), home=store_home)
        assert none == sqlite_store.Applied(0, 0, "ok")
    finally:
        conn.close()


def test_given_home_the_same_changes_reach_duckdb(tmp_path):
    corpus(".copilot/session-state/fixture-small.jsonl")
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=CORPUS_HOME, env={}), agents=["copilot-cli"])
    assert (store / "analytics.duckdb").exists()
    db = sqlite3.connect(store / "store.db")
    ids = [r[0] for r in db.execute("SELECT entry_id FROM entries WHERE kind='tool_result' ORDER BY rowid")]
    offsets = dict(db.execute("SELECT entry_id, source_offset FROM entries"))
    path = db.execute("SELECT source_path FROM entries WHERE entry_id=?", (ids[0],)).fetchone()[0]
    db.close()
    assert len(ids) == 4
    conn = sqlite_store.connect(store)
    try:
        a = sqlite_store.apply_changes(
            conn,
            EntryChanges(
                status=[StatusChange("archived", tuple(ids[:2]))],
                moves=[Relocation(path, ((ids[3], offsets[ids[3]] + 7),))],
            ),
            home=store,
        )
        assert (a.sqlite, a.duckdb, a.note) == (3, 3, "ok")
    finally:
        conn.close()
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    try:
        got = dict(
            con.execute(
                "SELECT entry_id, status || ':' || source_offset FROM entries "
                f"WHERE entry_id IN ({','.join('?' * 4)})",
                ids,
            ).fetchall()
        )
    finally:
        con.close()
    assert got == {
        ids[0]: f"archived:{offsets[ids[0]]}",
        ids[1]: f"archived:{offsets[ids[1]]}",
        ids[2]: f"active:{offsets[ids[2]]}",
        ids[3]: f"active:{offsets[ids[3]] + 7}",
    }

"""Agent databases in the vault (issue 27): each session's rows are a rows document
(``sources.readers.rows``), captured at ingest, redacted; ``reparse`` rebuilds the
database from them and derives the same entries after the agent's database is gone;
``vault restore --to DIR`` writes a session's rows as JSONL.

Databases are copies (fixtures, the corpus's Crush and opencode-go databases) in tmp."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from ctxkeep.errors import CtxkeepError
from ctxkeep.maintenance.reparse import reparse
from ctxkeep.maintenance.vault import vault_restore, vault_verify
from ctxkeep.schema import STORED_COLUMNS
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest
from ctxkeep.sources.readers import rows
from tests.conftest import CORPUS_HOME, ingest, q
from tests.dbhelpers import corpus_part, fixture_home

ENTRIES = f"SELECT {', '.join(STORED_COLUMNS)} FROM entries WHERE agent = ? ORDER BY entry_id"
USAGE = "SELECT * FROM usage WHERE agent = ? ORDER BY usage_key"
OPENCODE_DB = ".local/share/opencode/opencode.db"


def _rows_gens(store: Path, latest: bool = True) -> list[manifest.Generation]:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return [g for g in manifest.generations(conn, latest=latest) if g.meta.get("vault_rows")]
    finally:
        conn.close()


def _gen_bytes(store: Path, g: manifest.Generation) -> bytes:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return manifest.gen_bytes(conn, store, g)
    finally:
        conn.close()


def _delete_db(path: Path) -> None:
    for side in ("", "-wal", "-shm"):
        try:
            os.remove(str(path) + side)
        except FileNotFoundError:
            pass


def test_opencode_db_is_kept_per_session_reparsed_without_it_and_restored_as_jsonl(tmp_path):
    home = tmp_path / "home"
    fixture_home("opencode", home)
    db = home / OPENCODE_DB
    store = tmp_path / "store"
    ingest(home, store, "opencode")
    before, usage = q(store, ENTRIES, "opencode"), q(store, USAGE, "opencode")
    assert len(before) == 14 and usage
    held = {g.meta["session"]: g for g in _rows_gens(store)}
    assert sorted(held) == ["ses_01JZfixtureMain", "ses_01JZfixtureTask"]
    g = held["ses_01JZfixtureMain"]
    assert g.path == f"{db}#session=ses_01JZfixtureMain" and g.disk_path == str(db)
    head, got = rows.parse(_gen_bytes(store, g))
    assert head["db"] == str(db) and set(head["tables"]) == {"session", "message", "part"}
    assert head["tables"]["part"].startswith("CREATE TABLE part")
    # every row of the session, as the database holds it (per table, by rowid)
    con = sqlite3.connect(db)
    try:
        for table in ("message", "part"):
            want = con.execute(
                f"SELECT rowid, * FROM {table} WHERE session_id = ? ORDER BY rowid", ("ses_01JZfixtureMain",)
            ).fetchall()
            cols = [d[0] for d in con.execute(f"SELECT * FROM {table} LIMIT 0").description]
            have = [(r, row) for t, r, row in got if t == table]
            assert have == [(w[0], dict(zip(cols, w[1:], strict=True))) for w in want]
            assert all(list(row) == sorted(cols) for t, _, row in got if t == table)
    finally:
        con.close()

    _delete_db(db)
    r = reparse(store, agents=["opencode"])
    assert r["agents"] == ["opencode"] and r["files"] == 2
    assert not [e for e in r["diff"]["entries"] if e["added"] or e["removed"] or e["changed"]]
    assert q(store, ENTRIES, "opencode") == before
    assert q(store, USAGE, "opencode") == usage
    assert vault_verify(store)["ok"]

    # restore: the rows cannot go back into a database; under --to they are JSONL
    from ctxkeep.service.vault import VaultRestoreRequest
    from ctxkeep.service.vault import vault_restore as restore_request

    res = restore_request(VaultRestoreRequest.parse(home=store, all_missing=True, user_home=home))
    assert res.files == [] and res.skipped_rows == [str(db)]
    with pytest.raises(CtxkeepError, match="--to DIR"):
        vault_restore(store, "ses_01JZfixtureMain", user_home=home)
    out = vault_restore(store, "ses_01JZfixtureMain", to=tmp_path / "out", user_home=home)
    written = sorted(Path(f["to"]) for f in out["files"])
    # the main session and its sub-agent's (parent_session_id)
    assert written == [
        tmp_path / "out" / f"{OPENCODE_DB}.rows" / "ses_01JZfixtureMain.jsonl",
        tmp_path / "out" / f"{OPENCODE_DB}.rows" / "ses_01JZfixtureTask.jsonl",
    ]
    lines = [json.loads(ln) for ln in written[0].read_bytes().splitlines()]
    assert lines[0]["ctxkeep_rows"] == 1 and lines[0]["session"] == "ses_01JZfixtureMain"
    assert {ln["t"] for ln in lines[1:]} == {"session", "message", "part"}
    assert written[0].read_bytes() == _gen_bytes(store, g)
    assert written[0].stat().st_mtime_ns == g.mtime_ns


def test_a_new_row_adds_a_generation_to_its_session_only_and_reparse_keeps_every_row(tmp_path):
    home = tmp_path / "home"
    fixture_home("opencode", home)
    db = home / OPENCODE_DB
    store = tmp_path / "store"
    ingest(home, store, "opencode")
    assert ingest(home, store, "opencode").entries_new == 0
    assert len(_rows_gens(store, latest=False)) == 2  # nothing changed: nothing taken again
    con = sqlite3.connect(db)
    try:
        con.execute(
            "INSERT INTO message(id, session_id, time_created, time_updated, data) VALUES(?,?,?,?,?)",
            ("msg_new", "ses_01JZfixtureMain", 1751533300000, 1751533300000, json.dumps({"role": "user"})),
        )
        con.execute(
            "INSERT INTO part(id, message_id, session_id, time_created, time_updated, data) VALUES(?,?,?,?,?,?)",
            (
                "prt_new",
                "msg_new",
                "ses_01JZfixtureMain",
                1751533300000,
                1751533300000,
                json.dumps({"type": "text", "text": "and one more thing"}),
            ),
        )
        con.commit()
    finally:
        con.close()
    assert ingest(home, store, "opencode").entries_new == 1
    gens = _rows_gens(store, latest=False)
    assert sorted((g.meta["session"], g.gen) for g in gens) == [
        ("ses_01JZfixtureMain", 1),
        ("ses_01JZfixtureMain", 2),
        ("ses_01JZfixtureTask", 1),
    ]
    before = q(store, ENTRIES, "opencode")
    _delete_db(db)
    reparse(store, agents=["opencode"])
    assert q(store, ENTRIES, "opencode") == before
    # the new part's entry is among them, found by its words
    assert q(store, "SELECT count(*) FROM chunks WHERE text LIKE '%and one more thing%'") == [(1,)]


def test_no_secret_of_a_database_row_reaches_a_vault_byte(tmp_path):
    from fixtures.secrets import positives

    home = tmp_path / "home"
    fixture_home("opencode", home)
    db = home / OPENCODE_DB
    cases = positives(7)
    con = sqlite3.connect(db)
    try:
        for i, c in enumerate(cases):
            con.execute(
                "INSERT INTO part(id, message_id, session_id, time_created, time_updated, data) "
                "VALUES(?,?,?,?,?,?)",
                (
                    f"prt_secret{i}",
                    "msg_a1",
                    "ses_01JZfixtureMain",
                    1751533300000 + i,
                    1751533300000 + i,
                    json.dumps({"type": "text", "text": f"here it is: {c.text}"}),
                ),
            )
        con.commit()
        assert con.execute("SELECT count(*) FROM message WHERE id = 'msg_a1'").fetchone() == (1,)
    finally:
        con.close()
    store = tmp_path / "store"
    ingest(home, store, "opencode")
    g = next(g for g in _rows_gens(store) if g.meta["session"] == "ses_01JZfixtureMain")
    data = _gen_bytes(store, g)
    values = {s for c in cases for s in c.secrets if s}
    assert len(values) >= len(cases)
    assert not [v for v in values if v.encode() in data or json.dumps(v)[1:-1].encode() in data]
    assert sum(g.redactions.values()) >= len(cases) and b"[REDACTED:" in data
    assert all(orjson.loads(ln) is not None for ln in data.splitlines())  # each row still JSON
    # the session grows: its next version redacts only its new lines and is built on the
    # version held (``rows_capture``): still no secret, every value counted
    con = sqlite3.connect(db)
    try:
        for i, text in enumerate(("a clean new line", f"and a new secret: {cases[0].text}")):
            con.execute(
                "INSERT INTO part(id, message_id, session_id, time_created, time_updated, data) "
                "VALUES(?,?,?,?,?,?)",
                (
                    f"prt_more{i}",
                    "msg_a1",
                    "ses_01JZfixtureMain",
                    1751533400000 + i,
                    1751533400000 + i,
                    json.dumps({"type": "text", "text": text}),
                ),
            )
        con.commit()
    finally:
        con.close()
    ingest(home, store, "opencode")
    g2 = next(g for g in _rows_gens(store) if g.meta["session"] == "ses_01JZfixtureMain")
    assert g2.gen == 2
    data2 = _gen_bytes(store, g2)
    assert b"a clean new line" in data2
    assert not [v for v in values if v.encode() in data2 or json.dumps(v)[1:-1].encode() in data2]
    assert sum(g2.redactions.values()) > sum(g.redactions.values())
    # the same bytes as a scan of the whole version
    from ctxkeep.sinks.vault.capture import redact_raw
    from ctxkeep.sources.opencode import VAULT_TABLES
    from ctxkeep.sources.readers.sqlite import whole_document

    whole = whole_document(db, "opencode", VAULT_TABLES, "ses_01JZfixtureMain")
    assert redact_raw(whole)[0] == data2


@pytest.mark.parametrize(
    ("agent", "fixture", "n_docs"),
    [
        ("cursor", "cursor", 2),
        ("devin", "devin", 1),
        ("forge", "forge", 3),
        ("goose", "goose", 2),
        ("hermes", "hermes", 2),
        ("kiro", "kiro", 1),
        ("trae", "trae", 1),
        ("warp", "warp", 1),
        ("zed", "zed", 2),
    ],
)
def test_every_database_agent_is_reparsed_from_the_vault_without_its_database(
    tmp_path, agent, fixture, n_docs
):
    home = tmp_path / "home"
    src = Path(__file__).parents[1] / "fixtures" / fixture
    shutil.copytree(src / ("db-home" if (src / "db-home").is_dir() else "home"), home)
    store = tmp_path / "store"
    ingest(home, store, agent)
    before, usage = q(store, ENTRIES, agent), q(store, USAGE, agent)
    gens = _rows_gens(store)
    assert len(gens) >= n_docs and {g.agent for g in gens} == {agent}
    dbs = {g.disk_path for g in gens}
    assert before and all(Path(d).is_file() for d in dbs)
    for d in dbs:
        _delete_db(Path(d))
    r = reparse(store, agents=[agent])
    assert r["agents"] == [agent]
    assert q(store, ENTRIES, agent) == before
    assert q(store, USAGE, agent) == usage


def test_crush_and_opencode_go_from_the_corpus_are_rebuilt_after_their_databases_are_gone(tmp_path):
    crush, go = "code/dbos-transact-golang/.crush/crush.db", "code/noora/.opencode/opencode.db"
    if not (CORPUS_HOME / crush).exists():
        pytest.skip("corpus databases missing")
    home = tmp_path / "home"
    corpus_part(crush, home)
    corpus_part(go, home)
    store = tmp_path / "store"
    s = ingest(home, store, ["crush", "opencode-go"])
    assert s.per_agent["crush"] == 136
    before = {a: (q(store, ENTRIES, a), q(store, USAGE, a)) for a in ("crush", "opencode-go")}
    assert before["opencode-go"][0]
    sessions = {(g.agent, g.meta["session"]) for g in _rows_gens(store)}
    assert len([x for x in sessions if x[0] == "crush"]) == 2
    _delete_db(home / crush)
    _delete_db(home / go)
    r = reparse(store)
    assert r["agents"] == ["crush", "opencode-go"]
    for a, (entries, usage) in before.items():
        assert q(store, ENTRIES, a) == entries, a
        assert q(store, USAGE, a) == usage, a
    sid = before["crush"][0][0][STORED_COLUMNS.index("session_id")]
    out = vault_restore(store, sid, to=tmp_path / "out", user_home=home)
    (f,) = out["files"]
    assert f["to"] == str(tmp_path / "out" / f"{crush}.rows" / f"{sid}.jsonl")
    head, got = rows.parse(Path(f["to"]).read_bytes())
    assert head["agent"] == "crush" and {t for t, _, _ in got} == {"sessions", "messages"}


def test_a_database_ingested_with_the_vault_off_is_taken_in_when_it_is_turned_on(tmp_path, monkeypatch):
    home = tmp_path / "home"
    fixture_home("opencode", home)
    store = tmp_path / "store"
    monkeypatch.setenv("CTXKEEP_VAULT", "0")
    ingest(home, store, "opencode")
    assert _rows_gens(store) == []
    monkeypatch.delenv("CTXKEEP_VAULT")
    assert ingest(home, store, "opencode").entries_new == 0
    assert sorted(g.meta["session"] for g in _rows_gens(store)) == [
        "ses_01JZfixtureMain",
        "ses_01JZfixtureTask",
    ]
    assert ingest(home, store, "opencode").entries_new == 0  # and then nothing is read again
    assert len(_rows_gens(store, latest=False)) == 2


def test_rebuild_keeps_rowids_blobs_and_a_without_rowid_table_and_later_rows_win(tmp_path):
    schema = {
        "t": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, b BLOB)",
        "w": "CREATE TABLE w (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID",
    }
    old = rows.document(
        "x",
        "/db",
        "s",
        schema,
        [
            rows.row_line("t", 7, ["id", "v", "b"], (7, "old", b"\x00\xff")),
            rows.row_line("w", None, ["k", "v"], ("a", "1")),
        ],
    )
    new = rows.document("x", "/db", "s", schema, [rows.row_line("t", 7, ["id", "v", "b"], (7, "new", None))])
    assert json.loads(old.splitlines()[1])["row"]["b"] == {"$blob": base64.b64encode(b"\x00\xff").decode()}
    dest = tmp_path / "r.db"
    assert rows.rebuild([old, new], dest) == 3
    con = sqlite3.connect(dest)
    try:
        assert con.execute("SELECT rowid, id, v, b FROM t").fetchall() == [(7, 7, "new", None)]
        assert con.execute("SELECT k, v FROM w").fetchall() == [("a", "1")]
    finally:
        con.close()
    assert rows.rebuild([old], tmp_path / "o.db") == 2
    con = sqlite3.connect(tmp_path / "o.db")
    try:
        assert con.execute("SELECT b FROM t").fetchone() == (b"\x00\xff",)
    finally:
        con.close()
    with pytest.raises(ValueError):
        rows.parse(b'{"not": "rows"}\n')


def test_reindex_derives_from_the_vault_the_sessions_whose_files_are_gone_and_stale(tmp_path):
    """``reindex`` reparses from the vault the files the agent deleted whose derivation
    an older parser made (or that the store lacks); files on disk are left to ingest."""
    from ctxkeep.maintenance.reindex import run_reindex, stale_in_vault
    from ctxkeep.sources import SOURCES

    home = tmp_path / "home"
    fixture_home("opencode", home)
    db = home / OPENCODE_DB
    store = tmp_path / "store"
    ingest(home, store, "opencode")
    before = q(store, ENTRIES, "opencode")
    assert run_reindex(store)["from_vault"] is None  # the database is on disk: nothing to derive
    con = sqlite3.connect(store / "store.db")
    try:
        con.execute("UPDATE watermarks SET parser_version = 1 WHERE path = ?", (str(db),))
        con.commit()
    finally:
        con.close()
    assert run_reindex(store)["from_vault"] is None  # still on disk: ingest reads it again itself
    _delete_db(db)
    conn = sqlite_store.connect(store, readonly=True)
    try:
        assert stale_in_vault(conn) == sorted(g.path for g in _rows_gens(store))
    finally:
        conn.close()
    rep = run_reindex(store)
    assert rep["from_vault"]["files"] == 2 and rep["chunks"] > 0
    assert q(store, ENTRIES, "opencode") == before
    assert q(store, "SELECT parser_version FROM watermarks WHERE path = ?", str(db)) == [
        (SOURCES["opencode"].PARSER_VERSION,)
    ]
    assert run_reindex(store)["from_vault"] is None  # derived by today's parser now

"""A database session's rows document captured built on the version the vault holds
(``sinks.vault.rows_capture``, issue 27): the reader tells a change from aggregates
(rows, largest rowid, newest update time) and sends only the lines from the first row
rewritten or added on; the capture redacts those and chunks from the last chunk
boundary before them.

Each version must be the version a whole read makes: the same bytes as the whole
document redacted, and the same chunk list as chunking each section of it alone.
The databases are copies of the corpus's Crush database in tmp."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest

from ctxkeep.maintenance.vault import vault_verify
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest
from ctxkeep.sinks.vault.capture import chunks_of, redact_raw
from ctxkeep.sinks.vault.recipe import list_sha
from ctxkeep.sources.charm_db import VAULT_TABLES
from ctxkeep.sources.readers.rows import TAIL_LINES
from ctxkeep.sources.readers.sqlite import whole_document
from tests.conftest import CORPUS_HOME, ingest, q
from tests.dbhelpers import corpus_part

CRUSH = "code/dbos-transact-golang/.crush/crush.db"


@pytest.fixture
def crush(tmp_path):
    if not (CORPUS_HOME / CRUSH).exists():
        pytest.skip("corpus database missing")
    home = tmp_path / "home"
    db = corpus_part(CRUSH, home)
    return home, db, tmp_path / "store"


def _grow(db: Path, n: int, text: str = "") -> None:
    """``n`` messages more, copies of the database's rows (new ids, later times), the
    last one's parts holding ``text`` when given."""
    c = sqlite3.connect(db)
    rows = c.execute(
        "SELECT session_id, role, parts, model, created_at, updated_at, finished_at, provider FROM messages "
        "ORDER BY rowid"
    ).fetchall()
    batch = []
    for i in range(n):
        r = rows[i % len(rows)]
        parts = r[2]
        if text and i == n - 1:
            parts = json.dumps([{"type": "text", "data": {"text": text}}])
        batch.append((str(uuid.uuid4()), r[0], r[1], parts, r[3], r[4] + i, r[5] + i, r[6], r[7]))
    c.executemany(
        "INSERT INTO messages(id, session_id, role, parts, model, created_at, updated_at, finished_at, "
        "provider) VALUES (?,?,?,?,?,?,?,?,?)",
        batch,
    )
    c.commit()
    c.close()


def _edit(db: Path, back: int, text: str) -> str:
    """Rewrite the parts of the message ``back`` rows before the end of the largest
    session (Crush's trigger moves its ``updated_at`` to now). Returns its session."""
    c = sqlite3.connect(db)
    sid = c.execute("SELECT session_id FROM messages GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    rowid = c.execute(
        "SELECT rowid FROM messages WHERE session_id = ? ORDER BY rowid DESC LIMIT 1 OFFSET ?", (sid, back)
    ).fetchone()[0]
    c.execute(
        "UPDATE messages SET parts = ? WHERE rowid = ?",
        (json.dumps([{"type": "text", "data": {"text": text}}]), rowid),
    )
    c.commit()
    c.close()
    return sid


def _latest(store: Path) -> dict[str, tuple[manifest.Generation, bytes, list[bytes], bytes, dict | None]]:
    """Session id → (newest generation, its bytes, its chunk list, doc_sha, rows_state)."""
    conn = sqlite_store.connect(store, readonly=True)
    try:
        out = {}
        for g in manifest.generations(conn, latest=True):
            if g.meta.get("vault_rows"):
                sha, state = conn.execute(
                    "SELECT doc_sha, rows_state FROM vault_generations WHERE gen_id = ?", (g.gen_id,)
                ).fetchone()
                out[g.meta["session"]] = (
                    g,
                    manifest.gen_bytes(conn, store, g),
                    manifest.object_list(conn, g),
                    sha,
                    json.loads(state) if state else None,
                )
        return out
    finally:
        conn.close()


def _captures(store: Path, sid: str) -> list[dict]:
    """The pack records' captures of session ``sid``'s rows, oldest first."""
    from ctxkeep.sinks.vault.packs import read_record

    out = []
    for p in (store / "vault").rglob("*.pack"):
        got = read_record(p)
        if got is not None:
            out += [(got[0]["t"], c) for c in got[0]["captures"] if c["meta"].get("session") == sid]
    return [c for _, c in sorted(out, key=lambda x: x[0])]


def _section_chunks(red: bytes, state: dict) -> list[bytes]:
    """The chunk list of a whole version ``red`` cut into the sections of ``state``
    (each chunked alone)."""
    out, at = [], 0
    for sec in state["sections"]:
        out += [hashlib.sha256(c).digest() for c in chunks_of(red[at : at + sec[3]])]
        at += sec[3]
    assert at == len(red)
    return out


def _assert_whole(db: Path, store: Path) -> dict:
    """Every session's newest version is its whole document now, redacted, chunked as a
    whole read chunks it, proven by its chunk list's hash."""
    got = _latest(store)
    c = sqlite3.connect(db)
    sids = [r[0] for r in c.execute("SELECT DISTINCT session_id FROM messages")]
    c.close()
    assert set(got) == set(sids)
    for sid, (g, data, chunks, sha, state) in got.items():
        expect = redact_raw(whole_document(db, "crush", VAULT_TABLES, sid))[0]
        assert data == expect, sid
        assert state is not None and chunks == _section_chunks(data, state), sid
        assert sha == list_sha(chunks) and g.stored == len(data)
    return got


def test_an_append_builds_on_the_version_held_and_equals_a_whole_read(crush):
    home, db, store = crush
    _grow(db, 300)
    ingest(home, store, "crush")
    first = _assert_whole(db, store)
    _grow(db, 40)
    ingest(home, store, "crush")
    second = _assert_whole(db, store)
    big = max(first, key=lambda s: len(first[s][1]))
    g1, g2 = first[big][0], second[big][0]
    assert g2.gen == g1.gen + 1
    # the reader sent only the new rows (and the ones at the newest update time) and the
    # session's row (its counters changed), built on the version held
    cap = _captures(store, big)[-1]
    held = first[big][4]["sections"]
    assert cap["meta"]["rows_base"] is not None and cap["meta"]["rows_base"] == first[big][4]["marks"]
    (_, keep_s, new_s), (_, keep_m, new_m) = cap["meta"]["rows_layout"]
    assert (keep_s, new_s) == (0, 1)
    assert held[2][1] - TAIL_LINES <= keep_m <= held[2][1] and 1 <= new_m - (held[2][1] - keep_m) <= 40
    # the held version's chunks of its messages are kept, in order, up to the restart
    k1, k2 = held[0][4] + held[1][4], sum(s[4] for s in second[big][4]["sections"][:2])
    m1, m2 = first[big][2][k1:], second[big][2][k2:]
    same = next((i for i, (a, b) in enumerate(zip(m1, m2, strict=False)) if a != b), len(m1))
    assert len(m1) > 100 and same >= len(m1) * 0.8
    assert vault_verify(store)["problems"] == []


def test_an_edited_old_row_is_seen_and_its_secret_never_reaches_the_vault(crush):
    from fixtures.secrets import positives

    home, db, store = crush
    _grow(db, 700)
    ingest(home, store, "crush")
    cases = positives(11)
    values = {s for c in cases for s in c.secrets if s}
    # a secret in an old row (within the tail the vault keeps lengths of), and one past it
    sid = _edit(db, 20, f"edited: {cases[0].text}")
    ingest(home, store, "crush")
    got = _assert_whole(db, store)
    assert b"edited: " in got[sid][1]
    _edit(db, TAIL_LINES + 40, f"edited far back: {cases[1].text}")
    ingest(home, store, "crush")
    got = _assert_whole(db, store)
    data = got[sid][1]
    assert b"edited far back: " in data
    assert not [v for v in values if v.encode() in data or json.dumps(v)[1:-1].encode() in data]
    assert sum(got[sid][0].redactions.values()) >= 2


def test_a_secret_in_the_appended_tail_never_reaches_the_vault(crush):
    from fixtures.secrets import positives

    home, db, store = crush
    _grow(db, 50)
    ingest(home, store, "crush")
    before = _latest(store)
    cases = positives(5)
    values = {s for c in cases for s in c.secrets if s}
    for c in cases:
        _grow(db, 3, f"appended: {c.text}")
    ingest(home, store, "crush")
    got = _assert_whole(db, store)
    changed = [s for s in got if got[s][0].gen_id != before[s][0].gen_id]
    assert sum(got[s][1].count(b"appended: ") for s in changed) == len(cases)
    for sid in changed:
        data = got[sid][1]
        assert not [v for v in values if v.encode() in data or json.dumps(v)[1:-1].encode() in data]
        assert _captures(store, sid)[-1]["meta"]["rows_base"] is not None  # built on the held one
    assert sum(sum(got[s][0].redactions.values()) for s in changed) >= len(cases)


def test_a_version_the_vault_lacks_is_not_built_on_the_next_one_is_whole(crush):
    home, db, store = crush
    _grow(db, 100)
    ingest(home, store, "crush")
    # the newest versions lose their state (as a generation pruned or a store older than them)
    c = sqlite3.connect(store / "store.db")
    c.execute("UPDATE vault_generations SET rows_state = NULL")
    c.commit()
    c.close()
    _grow(db, 10)
    ingest(home, store, "crush")
    got = _assert_whole(db, store)
    assert [_captures(store, sid)[-1]["meta"]["rows_base"] for sid in got] == [None] * len(got)


def test_verify_names_a_version_whose_chunk_list_does_not_hash_to_its_doc_sha(crush):
    home, db, store = crush
    ingest(home, store, "crush")
    assert vault_verify(store)["problems"] == []
    c = sqlite3.connect(store / "store.db")
    c.execute(
        "UPDATE vault_generations SET doc_sha = zeroblob(32) WHERE gen_id = (SELECT min(gen_id) FROM vault_generations)"
    )
    c.commit()
    c.close()
    problems = vault_verify(store)["problems"]
    assert len(problems) == 1 and "doc_sha" in problems[0]


def test_a_lost_manifest_is_replayed_from_the_packs_with_every_version_built_on_the_one_before(crush):
    from ctxkeep.sinks.vault.capture import replay

    home, db, store = crush
    _grow(db, 200)
    ingest(home, store, "crush")
    _grow(db, 30)
    ingest(home, store, "crush")
    _edit(db, 5, "edited")
    ingest(home, store, "crush")
    want = {sid: (v[1], v[2], v[3], v[4]) for sid, v in _latest(store).items()}
    n = q(store, "SELECT count(*) FROM vault_generations")[0][0]
    assert n >= 4  # 2 sessions, then an append and an edit
    # the packs' records keep a version's chunk list as a delta against its base
    caps = [c for sid in want for c in _captures(store, sid)]
    assert [c for c in caps if c["meta"]["rows_base"] and c["chunks"] == [] and c["rows_delta"]]
    conn = sqlite_store.connect(store)
    try:
        with conn:
            for t in ("vault_segments", "vault_generations", "vault_files", "vault_objects", "vault_packs"):
                conn.execute(f"DELETE FROM {t}")
        with conn:
            replay(conn, store)
    finally:
        conn.close()
    assert q(store, "SELECT count(*) FROM vault_generations")[0][0] == n
    got = {sid: (v[1], v[2], v[3], v[4]) for sid, v in _latest(store).items()}
    assert got == want
    assert vault_verify(store)["problems"] == []


def test_the_change_test_reads_no_row_of_a_table_with_an_update_time(crush, monkeypatch):
    """Crush's tables have an update time: a new ingest tells the sessions that changed
    from aggregates and reads only their changed rows, never every row (``_scan``)."""
    from ctxkeep.sources.readers import sqlite as readers_sqlite

    home, db, store = crush
    ingest(home, store, "crush")
    scans = []
    real = readers_sqlite._scan
    monkeypatch.setattr(readers_sqlite, "_scan", lambda *a, **k: scans.append(a[1]) or real(*a, **k))
    _grow(db, 5)
    ingest(home, store, "crush")
    assert scans == []
    _assert_whole(db, store)


def test_a_table_without_an_update_time_builds_on_the_held_version_when_its_rows_held_are_unchanged(tmp_path):
    """Hermes' ``messages`` has no update time: its rows are hashed (as before), and a
    session whose rows held hash the same up to the largest rowid held sends only its
    new rows; an old row rewritten sends the section whole. Each version is the whole
    read's."""
    from ctxkeep.sources.hermes import VAULT_TABLES as HERMES_TABLES

    home = tmp_path / "home"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "hermes" / "db-home", home)
    db = home / ".hermes" / "state.db"
    store = tmp_path / "store"
    ingest(home, store, "hermes")

    def whole(sid: str) -> bytes:
        return redact_raw(whole_document(db, "hermes", HERMES_TABLES, sid))[0]

    c = sqlite3.connect(db)
    cols = [r[1] for r in c.execute("PRAGMA table_info(messages)") if r[1] != "id"]
    sid = c.execute("SELECT session_id FROM messages ORDER BY id DESC LIMIT 1").fetchone()[0]
    names = ", ".join(cols)
    c.execute(
        f"INSERT INTO messages({names}) SELECT {names} FROM messages WHERE session_id = ? ORDER BY id", (sid,)
    )
    c.commit()
    ingest(home, store, "hermes")
    got = _latest(store)[sid]
    assert got[1] == whole(sid)
    cap = _captures(store, sid)[-1]
    assert cap["meta"]["rows_base"] is not None
    assert {t: k for t, k, _ in cap["meta"]["rows_layout"]}["messages"] > 0
    c.execute(
        "UPDATE messages SET content = 'rewritten' WHERE id = (SELECT min(id) FROM messages WHERE session_id = ?)",
        (sid,),
    )
    c.commit()
    c.close()
    ingest(home, store, "hermes")
    got = _latest(store)[sid]
    assert got[1] == whole(sid) and b"rewritten" in got[1]
    cap = _captures(store, sid)[-1]
    assert {t: k for t, k, _ in cap["meta"]["rows_layout"]}["messages"] == 0


def _edit_at(db: Path, back: int, text: str, ts: int) -> str:
    """``_edit`` with the row's update time set to ``ts`` (Crush's trigger, which sets it
    to the current second, dropped from this copy): two writes within one second."""
    c = sqlite3.connect(db)
    c.execute("DROP TRIGGER IF EXISTS update_messages_updated_at")
    c.commit()
    c.close()
    sid = _edit(db, back, text)
    c = sqlite3.connect(db)
    c.execute(
        "UPDATE messages SET updated_at = ? WHERE rowid = (SELECT rowid FROM messages WHERE session_id = ? "
        "ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
        (ts, sid, back),
    )
    c.commit()
    c.close()
    return sid


@pytest.mark.parametrize("back", [5, TAIL_LINES + 40])
def test_a_row_rewritten_in_the_second_of_the_last_capture_is_seen(crush, back):
    # Crush's update times are whole seconds (``strftime('%s', 'now')``): a row rewritten
    # after a capture but in the second of that capture's newest update leaves every
    # aggregate mark (rows, largest rowid, newest update) as it was; the vault must
    # still take the rewrite (the entries do: ``changed_rows`` reads ``ts >= mark`` again)
    home, db, store = crush
    _grow(db, 300)
    ingest(home, store, "crush")
    c = sqlite3.connect(db)
    now = c.execute("SELECT max(updated_at) FROM messages").fetchone()[0] + 100
    c.close()
    sid = _edit_at(db, 20, "first edit in this second", now)
    ingest(home, store, "crush")
    assert b"first edit in this second" in _assert_whole(db, store)[sid][1]
    _edit_at(db, back, "second edit in the same second", now)
    ingest(home, store, "crush")
    got = _assert_whole(db, store)
    assert b"second edit in the same second" in got[sid][1]
    assert b"first edit in this second" in got[sid][1]

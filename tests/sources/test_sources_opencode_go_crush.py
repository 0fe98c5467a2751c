"""Go opencode and Crush: the real SQLite databases of the corpus (copied to tmp_path),
read-only access, the per-row high-water mark, and a writer that is never blocked."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid

import pytest

from conftest import CORPUS_HOME, ingest, q
from ctxkeep.pipeline.plan import plan
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources import crush, opencode_go
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.sources.readers.sqlite import open_ro
from dbhelpers import corpus_part, kinds, usage_by_day

GO_DB = "code/noora/.opencode/opencode.db"
CRUSH_DB = "code/dbos-transact-golang/.crush/crush.db"


@pytest.fixture
def db_home(tmp_path):
    if not (CORPUS_HOME / GO_DB).exists():
        pytest.skip("corpus databases missing")
    home = tmp_path / "home"
    corpus_part(GO_DB, home)
    corpus_part(CRUSH_DB, home)
    return home


def test_discovery_finds_project_databases(db_home):
    ctx = DiscoveryContext(home=db_home, env={})
    go = opencode_go.discover(ctx)
    cr = crush.discover(ctx)
    assert [f.path for f in go.files] == [db_home / GO_DB]
    assert [f.path for f in cr.files] == [db_home / CRUSH_DB]
    assert go.reason is None and cr.reason is None


def test_go_opencode_real_database(db_home, tmp_path):
    store = tmp_path / "store"
    s = ingest(db_home, store, ["opencode-go"])
    assert s.per_agent == {"opencode-go": 146}
    assert s.quarantined == 0
    assert kinds(store, "opencode-go") == {
        ("assistant", "tool_call"): 60,
        ("tool", "tool_result"): 59,
        ("assistant", "message"): 23,
        ("user", "message"): 2,
        ("system", "meta"): 2,
    }
    ((sid, n_sessions),) = q(
        store, "SELECT min(session_id), count(DISTINCT session_id) FROM entries WHERE agent='opencode-go'"
    )
    assert (sid, n_sessions) == ("2530334d-ccd1-4294-9961-2aa13749f060", 1)
    # the project is the folder holding .opencode (the database has no cwd)
    assert q(store, "SELECT DISTINCT project_dir FROM entries WHERE agent='opencode-go'") == [
        (str(db_home / "code/noora"),)
    ]
    # tool calls by name, and the first user prompt with its UTC time
    tools = dict(
        q(
            store,
            "SELECT tool_name, count(*) FROM entries WHERE agent='opencode-go' "
            "AND kind='tool_call' GROUP BY 1",
        )
    )
    assert tools["bash"] >= 1 and sum(tools.values()) == 60
    ((ts,),) = q(store, "SELECT min(ts) FROM entries WHERE agent='opencode-go' AND role='user'")
    assert ts == "2025-05-28T11:05:58.133000Z"
    # usage: the session's logged cost; its tokens are not a total (prompt 637 /
    # completion 47,068 in the row are the last response's: charm_db) and stay unknown
    assert usage_by_day(store, "opencode-go") == {"2025-05-28": (None, None, None, None)}
    assert q(store, "SELECT session_id, cost_usd FROM usage WHERE agent='opencode-go'") == [
        ("2530334d-ccd1-4294-9961-2aa13749f060", pytest.approx(0.69006315))
    ]


def test_crush_real_database_seconds_timestamps(db_home, tmp_path):
    store = tmp_path / "store"
    s = ingest(db_home, store, ["crush"])
    assert s.per_agent == {"crush": 136}
    assert kinds(store, "crush") == {
        ("assistant", "tool_call"): 41,
        ("tool", "tool_result"): 41,
        ("assistant", "message"): 32,
        ("user", "message"): 13,
        ("system", "meta"): 9,
    }
    assert q(store, "SELECT count(DISTINCT session_id) FROM entries WHERE agent='crush'") == [(2,)]
    # INTEGER Unix seconds (the schema comment says ms): 1754709060 → 2025-08-09T03:11:00Z
    assert q(store, "SELECT min(ts) FROM entries WHERE agent='crush'") == [("2025-08-09T03:11:00.000000Z",)]
    # the OpenAI "organization must be verified" error inside a finish part is kept
    errs = q(store, "SELECT count(*) FROM entries WHERE agent='crush' AND tool_name='finish:error'")
    assert errs[0][0] >= 1
    # the session rows' prompt/completion (127,170/64 and 15,805/59) are each session's
    # last response: not booked; the logged costs are
    assert usage_by_day(store, "crush") == {
        "2025-08-09": (None, None, None, None),
        "2025-08-22": (None, None, None, None),
    }
    assert dict(q(store, "SELECT substr(session_id, 1, 4), cost_usd FROM usage WHERE agent='crush'")) == {
        "a20c": pytest.approx(3.2015050000000005),
        "f306": pytest.approx(0.020346250000000003),
    }


def test_second_run_reads_nothing_and_plan_skips(db_home, tmp_path):
    store = tmp_path / "store"
    ingest(db_home, store)
    again = ingest(db_home, store)
    assert again.entries_new == 0 and again.files_read == 0
    conn = sqlite_store.connect(store)
    try:
        p = plan(store, conn, agents=["crush", "opencode-go"], ctx=DiscoveryContext(home=db_home, env={}))
    finally:
        conn.close()
    assert p.todo == [] and p.unchanged == 2


def test_a_change_in_the_wal_is_not_unchanged(db_home, tmp_path):
    store = tmp_path / "store"
    ingest(db_home, store, ["crush"])
    db = db_home / CRUSH_DB
    w = sqlite3.connect(db)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("PRAGMA wal_autocheckpoint=0")  # keep the new row in the -wal only
    main_before = db.stat()
    _insert_crush_message(w, "a20c5ed5-41d4-45f7-88eb-7ba0645f1341", "one more question", int(time.time()))
    w.commit()
    assert (db.stat().st_size, db.stat().st_mtime_ns) == (main_before.st_size, main_before.st_mtime_ns)
    s = ingest(db_home, store, ["crush"])
    w.close()
    assert s.per_agent == {"crush": 1}
    assert q(
        store, "SELECT count(*) FROM entries WHERE agent='crush' AND kind='message' AND role='user'"
    ) == [(14,)]


def test_corpus_database_opened_without_writing_beside_it():
    """The corpus folder is read-only: the reader falls back to immutable=1 and says
    so, and no -wal/-shm appears in shared/corpus (even when run as root)."""
    db = CORPUS_HOME / CRUSH_DB
    if not db.exists():
        pytest.skip("corpus missing")
    before = sorted(p.name for p in db.parent.iterdir())
    ro = open_ro(db)
    try:
        assert ro.conn.execute("SELECT count(*) FROM messages").fetchone() == (82,)
    finally:
        ro.conn.close()
    assert ro.immutable and "immutable=1" in ro.note
    assert sorted(p.name for p in db.parent.iterdir()) == before == ["crush.db"]


def test_bad_parts_row_is_quarantined_not_fatal(db_home, tmp_path):
    db = db_home / GO_DB
    w = sqlite3.connect(db)
    w.execute(
        "INSERT INTO messages(id, session_id, role, parts, created_at, updated_at) VALUES "
        "('bad-1', '2530334d-ccd1-4294-9961-2aa13749f060', 'user', '[{\"type\":\"text\"', "
        "'2025-05-28T11:20:00.000000Z', '2025-05-28T11:20:00.000000Z')"
    )
    w.commit()
    w.close()
    store = tmp_path / "store"
    s = ingest(db_home, store, ["opencode-go"])
    assert s.per_agent == {"opencode-go": 146} and s.quarantined == 1
    ((reason, path),) = q(store, "SELECT reason, path FROM quarantine WHERE agent='opencode-go'")
    assert reason.startswith("messages row bad-1:") and path == str(db)


def _insert_crush_message(conn, sid: str, text: str, ts: int, mid: str | None = None) -> str:
    mid = mid or str(uuid.uuid4())
    parts = '[{"type":"text","data":{"text":%s}},{"type":"finish","data":{"reason":"stop","time":%d}}]' % (  # noqa: UP031 - a JSON template: braces make .format unreadable
        __import__("json").dumps(text),
        ts,
    )
    conn.execute(
        "INSERT INTO messages(id, session_id, role, parts, model, created_at, updated_at, finished_at, "
        "provider) VALUES (?,?,?,?,?,?,?,?,?)",
        (mid, sid, "user", parts, "", ts, ts, None, None),
    )
    return mid


WRITER = r"""
import json, sqlite3, sys, time, uuid, os
db, sid, stop, out = sys.argv[1:5]
conn = sqlite3.connect(db, timeout=0.2, isolation_level=None)   # an impatient agent
conn.execute("PRAGMA journal_mode=WAL")
written, lat, errors, i = [], [], [], 0
while not os.path.exists(stop):
    t0 = time.perf_counter()
    try:
        conn.execute("BEGIN IMMEDIATE")
        mid, ts = str(uuid.uuid4()), int(time.time())
        parts = json.dumps([{"type": "text", "data": {"text": f"writer message {i}"}},
                            {"type": "finish", "data": {"reason": "stop", "time": ts}}])
        conn.execute("INSERT INTO messages(id, session_id, role, parts, model, created_at, updated_at) "
                     "VALUES (?,?,?,?,?,?,?)", (mid, sid, "user", parts, "", ts, ts))
        conn.execute("COMMIT")
        written.append(mid)
    except sqlite3.OperationalError as e:
        errors.append(str(e))
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    lat.append(time.perf_counter() - t0)
    i += 1
    time.sleep(0.002)
conn.close()
json.dump({"written": written, "lat": lat, "errors": errors}, open(out, "w"))
"""


def test_writer_is_never_blocked_and_new_rows_come_once(db_home, tmp_path):
    """A writer process commits continuously to a copy of the real Crush database
    while ctxkeep ingests it again and again: no commit fails with 'database is
    locked' (its busy timeout is 0.2 s), and every row written arrives in the store
    exactly once."""
    import json
    import subprocess
    import sys

    db = db_home / CRUSH_DB
    store = tmp_path / "store"
    ingest(db_home, store, ["crush"])
    sid = "f306c145-4c83-492c-b575-739c30bbced4"
    stop, out = tmp_path / "stop", tmp_path / "writer.json"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), sid, str(stop), str(out)])
    try:
        # ingest again and again until 5 runs have read new rows while the writer
        # writes, 100 rows in all (counts, not a time window: the machine's speed
        # decides only how long that takes); 120 s guards a hang
        runs, give_up = [], time.monotonic() + 120
        while sum(1 for n in runs if n) < 5 or sum(runs) < 100:
            assert proc.poll() is None, "the writer process exited early"
            assert time.monotonic() < give_up, f"runs so far: {runs}"
            runs.append(ingest(db_home, store, ["crush"]).entries_new)
    finally:
        stop.touch()
        proc.wait(timeout=30)
    res = json.loads(out.read_text())
    written, lat, errors = res["written"], res["lat"], res["errors"]
    final = ingest(db_home, store, ["crush"]).entries_new
    again = ingest(db_home, store, ["crush"]).entries_new
    lat_sorted = sorted(lat)
    print(
        f"\nwriter: {len(written)} commits, commit latency p50 {lat_sorted[len(lat) // 2] * 1000:.1f} ms, "
        f"max {lat_sorted[-1] * 1000:.1f} ms, {len(errors)} errors; ingest runs during writes: "
        f"{len(runs)} ({sum(runs)} entries), final {final}"
    )
    assert errors == []
    assert sum(1 for n in runs if n) >= 5 and len(written) >= sum(runs) >= 100
    assert again == 0
    stored = q(
        store,
        "SELECT native_id, count(*) FROM entries WHERE agent='crush' AND session_id=? "
        "AND kind='message' AND native_id IN ({}) GROUP BY 1".format(",".join("?" * len(written))),
        sid,
        *written,
    )
    assert len(stored) == len(written) and all(n == 1 for _, n in stored)
    assert sum(runs) + final == len(written)


def test_foreign_or_broken_databases_are_quarantined_and_the_run_goes_on(db_home, tmp_path):
    garbage = db_home / "code/junk/.crush/crush.db"
    garbage.parent.mkdir(parents=True)
    garbage.write_bytes(b"this is not an SQLite file\n" * 100)
    other = db_home / "code/other/.crush/crush.db"
    other.parent.mkdir(parents=True)
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE notes(x)")
    c.commit()
    c.close()
    store = tmp_path / "store"
    s = ingest(db_home, store, ["crush"])
    assert s.per_agent["crush"] == 136 and s.quarantined == 2
    reasons = dict(q(store, "SELECT path, reason FROM quarantine WHERE agent='crush'"))
    assert reasons[str(garbage)].startswith("cannot open database: DatabaseError: file is not a database")
    assert reasons[str(other)] == "database read failed: OperationalError: no such table: sessions"


def test_writer_thread_in_the_same_process_is_never_locked_out(db_home, tmp_path):
    """The same with a writer *thread* (as an agent embedded in the same process would
    be): no 'database is locked'. Its latency is not asserted: in one process it
    measures the GIL and the 2 shared cores, not SQLite locks (the process variant
    above measures those)."""
    import threading

    db = db_home / CRUSH_DB
    store = tmp_path / "store"
    ingest(db_home, store, ["crush"])
    sid = "f306c145-4c83-492c-b575-739c30bbced4"
    written, errors, lat = [], [], []
    stop = threading.Event()

    def writer():
        conn = sqlite3.connect(db, timeout=0.2, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                conn.execute("BEGIN IMMEDIATE")
                written.append(_insert_crush_message(conn, sid, f"thread message {i}", int(time.time())))
                conn.execute("COMMIT")
            except sqlite3.OperationalError as e:
                errors.append(str(e))
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            lat.append(time.perf_counter() - t0)
            i += 1
            time.sleep(0.002)
        conn.close()

    th = threading.Thread(target=writer)
    th.start()
    try:
        runs = [ingest(db_home, store, ["crush"]).entries_new for _ in range(3)]
    finally:
        stop.set()
        th.join()
    final = ingest(db_home, store, ["crush"]).entries_new
    print(
        f"\nwriter thread: {len(written)} commits, max latency {max(lat) * 1000:.1f} ms, {len(errors)} errors"
    )
    assert errors == []
    assert sum(runs) + final == len(written) > 0
    assert ingest(db_home, store, ["crush"]).entries_new == 0


def test_new_row_with_an_old_timestamp_and_an_updated_row_are_read(db_home, tmp_path):
    """New rows are found by rowid even when the agent's clock went back; rewritten
    rows by updated_at (a row that was still streaming, then finished)."""
    store = tmp_path / "store"
    ingest(db_home, store, ["crush"])
    db = db_home / CRUSH_DB
    w = sqlite3.connect(db)
    sid = "a20c5ed5-41d4-45f7-88eb-7ba0645f1341"
    _insert_crush_message(w, sid, "written with a clock two years behind", 1690000000, mid="old-clock")
    w.commit()
    s = ingest(db_home, store, ["crush"])
    assert s.per_agent == {"crush": 1}
    # an assistant message the agent is still writing (no finished_at, no finish part)
    now = int(time.time())
    w.execute(
        "INSERT INTO messages(id, session_id, role, parts, model, created_at, updated_at) VALUES "
        '(\'streaming\', ?, \'assistant\', \'[{"type":"text","data":{"text":"Half"}}]\', \'gpt-5\', ?, ?)',
        (sid, now, now),
    )
    w.commit()
    assert ingest(db_home, store, ["crush"]).entries_new == 0  # left for the next run
    w.execute(
        'UPDATE messages SET parts = \'[{"type":"text","data":{"text":"Half done, now whole."}},'
        '{"type":"finish","data":{"reason":"end_turn","time":0}}]\', finished_at = ?, '
        "updated_at = ? WHERE id = 'streaming'",
        (now + 1, now + 1),
    )
    w.commit()
    w.close()
    assert ingest(db_home, store, ["crush"]).entries_new == 1
    assert q(store, "SELECT count(*) FROM entries WHERE native_id='streaming'") == [(1,)]
    from dbhelpers import TEXT

    assert q(store, f"SELECT {TEXT} FROM entries e WHERE native_id='streaming'") == [
        ("Half done, now whole.",)
    ]


def _crush_two_responses(db, cost1: float, cost2: float) -> tuple[dict, dict]:
    """A Crush database (the schema of charmbracelet/crush ``internal/db/migrations``,
    2025-08) holding one session of two API responses, its ``sessions`` row written as
    Crush's ``TrackUsage`` writes it: the costs summed, the tokens of the *last*
    response assigned (prompt = input + cache creation, completion = output + cache read)."""
    db.parent.mkdir(parents=True)
    c = sqlite3.connect(db)
    c.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, title TEXT NOT NULL, "
        "message_count INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0, "
        "completion_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0.0, "
        "updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL, summary_message_id TEXT);"
        "CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL, "
        "parts TEXT NOT NULL default '[]', model TEXT, created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL, finished_at INTEGER, provider TEXT);"
    )
    r1 = {"input": 1200, "cache_creation": 3000, "output": 80, "cache_read": 0}
    r2 = {"input": 40, "cache_creation": 150, "output": 300, "cache_read": 4200}
    t0 = 1754709060
    c.execute(
        "INSERT INTO sessions VALUES ('s-two', NULL, 'two responses', 3, ?, ?, ?, ?, ?, NULL)",
        (r2["input"] + r2["cache_creation"], r2["output"] + r2["cache_read"], cost1 + cost2, t0 + 60, t0),
    )
    rows = [
        ("m1", "user", [{"type": "text", "data": {"text": "hello"}}], None, t0),
        ("m2", "assistant", [{"type": "text", "data": {"text": "a"}}, {"type": "finish", "data": {"reason": "end_turn"}}], "gpt-5", t0 + 10),
        ("m3", "assistant", [{"type": "text", "data": {"text": "b"}}, {"type": "finish", "data": {"reason": "end_turn"}}], "gpt-5", t0 + 50),
    ]  # fmt: skip
    for mid, role, parts, model, ts in rows:
        c.execute(
            "INSERT INTO messages VALUES (?, 's-two', ?, ?, ?, ?, ?, ?, 'openai')",
            (mid, role, json.dumps(parts), model, ts, ts, ts if role == "assistant" else None),
        )
    c.commit()
    c.close()
    return r1, r2


def test_crush_two_responses_book_the_summed_cost_and_no_tokens(tmp_path):
    """newuser15 F14: the session row's tokens are the second response's only (190 +
    4,500), the cost is both responses'. ctxkeep books the cost and invents no tokens:
    the token columns stay null, and a later response (the cost grows, the tokens are
    assigned anew) updates the cost and keeps the tokens null."""
    home = tmp_path / "home"
    db = home / "proj" / ".crush" / "crush.db"
    _crush_two_responses(db, 0.25, 0.125)
    store = tmp_path / "store"
    s = ingest(home, store, ["crush"])
    assert s.quarantined == 0
    tok = "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens"
    assert q(store, f"SELECT usage_key, model, {tok}, cost_usd FROM usage") == [
        ("crush:s-two", "gpt-5", None, None, None, None, None, 0.375)
    ]
    # a third response: Crush adds its cost and assigns its tokens
    c = sqlite3.connect(db)
    c.execute(
        "UPDATE sessions SET cost = cost + 0.5, prompt_tokens = 10, completion_tokens = 20, updated_at = updated_at + 5"
    )
    c.commit()
    c.close()
    ingest(home, store, ["crush"])
    assert q(store, f"SELECT {tok}, cost_usd FROM usage") == [(None, None, None, None, None, 0.875)]

"""A Claude Code session continued or forked into another file (brief fixes, item 6;
design.md "The entry and the stores").

- the same session id continued in a new file: its entries join that session, nothing
  doubled or lost;
- a fork (``claude --resume <id> --fork-session``, ``/branch``): a new file whose lines
  repeat the original's uuids under a new ``sessionId``. A record is keyed
  ``<session>:<uuid>`` (session 17; before, by its uuid alone, so the shared history
  went to the session of whichever file was read first and the other lacked it), so
  each session holds its whole history; the API responses the fork repeats are
  counted once (usage keyed by ``message.id:requestId``, as ccusage dedups);
- a store that keyed a file by uuid alone keeps those ids for it (re-read, reparse,
  compress's checks): ids users hold keep resolving, nothing is stored twice."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from conftest import CORPUS_HOME, ingest, q
from ctxkeep.schema import entry_id

ORIG = "bbbbbbbb-0000-4000-8000-000000000001"
FORK = "aaaaaaaa-0000-4000-8000-000000000002"  # sorts before ORIG


def _u(name: str) -> str:
    """A uuid-shaped record id for ``name`` (its bytes in hex, padded)."""
    return f"00000000-0000-4000-8000-{name.encode().hex():0>12}"


def _line(uuid: str, parent: str | None, sid: str, role: str, text: str, ts: str) -> str:
    uuid_, parent = _u(uuid), _u(parent) if parent else None
    usage = {"input_tokens": 100, "output_tokens": 7, "cache_read_input_tokens": 1000}
    return json.dumps(
        {
            "type": role,
            "uuid": uuid_,
            "parentUuid": parent,
            **({"requestId": f"req_{uuid}"} if role == "assistant" else {}),
            "sessionId": sid,
            "timestamp": ts,
            "cwd": "/work/app",
            "version": "2.0.0",
            "message": {"role": role, "content": text}
            if role == "user"
            else {
                "role": role,
                "model": "claude-sonnet-4-20250514",
                "id": f"msg_{uuid}",
                "content": [{"type": "text", "text": text}],
                "usage": usage,
            },
        }
    )


def _history(sid: str) -> list[str]:
    return [
        _line("u-1", None, sid, "user", "add a login form", "2026-07-01T10:00:00.000Z"),
        _line("a-1", "u-1", sid, "assistant", "Added LoginForm.tsx", "2026-07-01T10:00:05.000Z"),
        _line("u-2", "a-1", sid, "user", "now validate the email", "2026-07-01T10:01:00.000Z"),
        _line("a-2", "u-2", sid, "assistant", "Email validated with a regex", "2026-07-01T10:01:05.000Z"),
    ]


def _sessions(store) -> dict[str, int]:
    return dict(q(store, "SELECT session_id, count(*) FROM entries WHERE kind = 'message' GROUP BY 1"))


def test_the_same_session_continued_in_another_file_keeps_every_entry_once(tmp_path):
    proj = tmp_path / "home/.claude/projects/-work-app"
    proj.mkdir(parents=True)
    (proj / f"{ORIG}.jsonl").write_text("\n".join(_history(ORIG)) + "\n")
    more = _line("u-3", "a-2", ORIG, "user", "and a password field", "2026-07-02T09:00:00.000Z")
    (proj / f"{FORK}.jsonl").write_text(more + "\n")  # (a file of another name, same session)
    store = tmp_path / "store"
    ingest(tmp_path / "home", store, agents="claude-code")
    assert _sessions(store) == {ORIG: 5}
    assert q(store, "SELECT count(*), count(DISTINCT entry_id) FROM entries") == [(5, 5)]


def test_a_fork_keeps_the_original_whole_and_has_its_history(tmp_path):
    proj = tmp_path / "home/.claude/projects/-work-app"
    proj.mkdir(parents=True)
    (proj / f"{ORIG}.jsonl").write_text("\n".join(_history(ORIG)) + "\n")
    fork = [
        *_history(FORK),
        _line("u-9", "a-2", FORK, "user", "try OAuth instead", "2026-07-03T09:00:00.000Z"),
    ]
    (proj / f"{FORK}.jsonl").write_text("\n".join(fork) + "\n")
    store = tmp_path / "store"
    ingest(tmp_path / "home", store, agents="claude-code")
    got = _sessions(store)
    assert got.get(ORIG) == 4, got  # today: 0 (the fork, read first, took them)
    assert got.get(FORK) == 5, got
    assert q(store, "SELECT count(*), count(DISTINCT entry_id) FROM entries") == [(9, 9)]
    # the fork repeats two API responses of the original: each counted once
    assert q(store, "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM usage") == [(2, 200, 14)]
    # search shows the shared text once, saying another entry holds it; a session
    # filter finds it in each session
    from ctxkeep.query.search import Filters, search
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        hits = search(conn, "LoginForm").hits
        assert len(hits) == 1 and hits[0].session_id in (ORIG, FORK) and hits[0].duplicates == 1
        for sid in (ORIG, FORK):
            assert [h.session_id for h in search(conn, "LoginForm", filters=Filters(session=sid)).hits] == [
                sid
            ]
    finally:
        conn.close()
    # each session's entries keyed by its own id and the record's uuid
    assert _ids(store, ORIG) == {
        entry_id("claude-code", f"{ORIG}:{_u(n)}", 0) for n in ("u-1", "a-1", "u-2", "a-2")
    }


def _ids(store, sid: str) -> set[str]:
    return {r[0] for r in q(store, "SELECT entry_id FROM entries WHERE session_id = ?", sid)}


def _write(proj, sid: str, lines: list[str]) -> None:
    (proj / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")


def _old_store(tmp_path, monkeypatch, fork: bool = False):
    """A store as ctxkeep before session 17 made it: the original (and with ``fork``
    its fork, read first) keyed by uuid alone (its watermark's state without ``ids``).
    Returns (home, proj dir, store)."""
    from ctxkeep.sources import claude_code

    proj = tmp_path / "home/.claude/projects/-work-app"
    proj.mkdir(parents=True)
    _write(proj, ORIG, _history(ORIG))
    if fork:
        _write(
            proj,
            FORK,
            [*_history(FORK), _line("u-9", "a-2", FORK, "user", "try OAuth", "2026-07-03T09:00:00.000Z")],
        )
    store = tmp_path / "store"
    with monkeypatch.context() as m:
        read = claude_code.read
        # every file read as before (keyed by uuid alone)
        m.setattr(claude_code, "read", lambda f, wm, *a: read(claude_code.ids_meta(f, {}), wm, *a))
        ingest(tmp_path / "home", store, agents="claude-code")
    with closing(sqlite3.connect(store / "store.db")) as c, c:
        c.execute("UPDATE watermarks SET state = json_remove(state, '$.ids')")
    return tmp_path / "home", proj, store


OLD_IDS = {entry_id("claude-code", _u(n), 0) for n in ("u-1", "a-1", "u-2", "a-2")}


def test_a_store_that_keyed_a_file_by_uuid_keeps_its_ids_and_a_new_fork_is_whole(tmp_path, monkeypatch):
    home, proj, store = _old_store(tmp_path, monkeypatch)
    assert _ids(store, ORIG) == OLD_IDS
    # the original goes on (appended), then is read again from byte 0 (a new inode)
    more = _line("u-3", "a-2", ORIG, "user", "and a password field", "2026-07-02T09:00:00.000Z")
    with open(proj / f"{ORIG}.jsonl", "a") as f:
        f.write(more + "\n")
    ingest(home, store, agents="claude-code")
    data = (proj / f"{ORIG}.jsonl").read_bytes()
    (proj / f"{ORIG}.jsonl").unlink()
    (proj / f"{ORIG}.jsonl").write_bytes(data)
    ingest(home, store, agents="claude-code")
    assert _ids(store, ORIG) == OLD_IDS | {entry_id("claude-code", _u("u-3"), 0)}
    # a fork written now is a new file: keyed by its session, whole; the original keeps its 5
    _write(
        proj,
        FORK,
        [*_history(FORK), _line("u-9", "a-2", FORK, "user", "try OAuth", "2026-07-03T09:00:00.000Z")],
    )
    ingest(home, store, agents="claude-code")
    assert _sessions(store) == {ORIG: 5, FORK: 5}
    assert q(store, "SELECT count(*), sum(input_tokens) FROM usage") == [(2, 200)]


def test_a_reparse_keeps_the_ids_a_store_gave_and_a_new_store_gets_session_keys(tmp_path, monkeypatch):
    from ctxkeep.maintenance.reparse import reparse

    home, proj, store = _old_store(tmp_path, monkeypatch)
    r = reparse(store)
    assert [(e["added"], e["removed"]) for e in r["diff"]["entries"]] == [(0, 0)], r["diff"]
    assert _ids(store, ORIG) == OLD_IDS
    # a store made now, reparsed: session keys, the same after as before
    new = tmp_path / "store2"
    ingest(home, new, agents="claude-code")
    before = _ids(new, ORIG)
    assert before.isdisjoint(OLD_IDS) and len(before) == 4
    reparse(new)
    assert _ids(new, ORIG) == before


def test_compress_finds_every_line_of_a_file_the_store_keyed_by_uuid(tmp_path, monkeypatch):
    from ctxkeep.maintenance.compress.run import lines_not_held
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources.contract import SourceFile

    home, proj, store = _old_store(tmp_path, monkeypatch)
    path = proj / f"{ORIG}.jsonl"
    conn = sqlite_store.connect(store)
    try:
        assert lines_not_held(conn, SourceFile("claude-code", path, "append", {}), path.read_bytes()) == []
    finally:
        conn.close()


def test_reparse_rekey_moves_an_old_store_to_session_keys_and_old_ids_still_resolve(tmp_path, monkeypatch):
    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.query.fetch import resolve_ids
    from ctxkeep.sinks import sqlite as sqlite_store

    home, proj, store = _old_store(tmp_path, monkeypatch, fork=True)
    assert _sessions(store) == {FORK: 5}  # the fork, read first, took the shared history
    old_u1 = entry_id("claude-code", _u("u-1"), 0)
    with closing(sqlite3.connect(store / "store.db")) as c, c:  # a status maintenance gave
        c.execute("UPDATE entry_rows SET status = 'consumed' WHERE entry_id = ?", (old_u1,))
    usage = q(store, "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM usage")
    r = reparse(store, rekey=True)
    assert _sessions(store) == {ORIG: 4, FORK: 5}
    assert q(store, "SELECT count(*), count(DISTINCT entry_id) FROM entries") == [(9, 9)]
    assert q(store, "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM usage") == usage
    assert r["diff"]["usage"]["claude-code"]["delta"]["input_tokens"] == 0
    new_fork, new_orig = (entry_id("claude-code", f"{s}:{_u('u-1')}", 0) for s in (FORK, ORIG))
    # the status follows the entry (it was filed under the fork's file), not its copy
    assert dict(
        q(store, "SELECT entry_id, status FROM entries WHERE entry_id IN (?, ?)", new_fork, new_orig)
    ) == {
        new_fork: "consumed",
        new_orig: "active",
    }
    # an id a user holds (or a prefix of it) names the entries it became, saying so
    conn = sqlite_store.connect(store, readonly=True)
    try:
        found, problems = resolve_ids(conn, [old_u1[:12]])
    finally:
        conn.close()
    assert sorted(found) == sorted([new_fork, new_orig]) and problems == [
        f"{old_u1[:12]} is now {', '.join(sorted(x[:12] for x in found))} (rekeyed by session)"
    ]
    # moved once: a reparse or an ingest after it changes nothing
    r = reparse(store)
    assert all(e["added"] == e["removed"] == e["changed"] == 0 for e in r["diff"]["entries"]), r["diff"]
    assert ingest(home, store, agents="claude-code").entries_new == 0
    assert _sessions(store) == {ORIG: 4, FORK: 5}


def _old_compressed(tmp_path, monkeypatch):
    """An old store (keyed by uuid alone) holding a real corpus file that compress then
    cut. Returns (file, store)."""
    import shutil

    from ctxkeep.config import CompressConfig
    from ctxkeep.maintenance.compress import run as ops
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources import claude_code
    from ctxkeep.sources.contract import SourceFile

    proj = tmp_path / "home/.claude/projects/-Users-chip-dev-ai-music"
    proj.mkdir(parents=True)
    p = proj / CHIP.name
    shutil.copyfile(CHIP, p)
    store = tmp_path / "store"
    read = claude_code.read
    with monkeypatch.context() as m:
        m.setattr(claude_code, "read", lambda f, wm, *a: read(claude_code.ids_meta(f, {}), wm, *a))
        ingest(tmp_path / "home", store, agents="claude-code")
    with closing(sqlite3.connect(store / "store.db")) as c, c:
        c.execute("UPDATE watermarks SET state = json_remove(state, '$.ids')")
    conn = sqlite_store.connect(store)
    try:
        r = ops.compress_file(
            conn, store, SourceFile("claude-code", p), CompressConfig(keep_messages=5), force=True
        )
    finally:
        conn.close()
    assert r.status == "compressed", r.reason
    return p, store


#: a real Claude Code file (v1.0.17, 880 KB) of the corpus
CHIP = CORPUS_HOME / ".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"
#: the entries' statuses, offsets and texts (compress archived some and moved the rest)
ROWS = "SELECT status, source_offset, content_hash FROM entries ORDER BY 1, 2, 3"


def test_a_compressed_file_keeps_its_archived_entries_through_a_rekey(tmp_path, monkeypatch):
    """compress's vault record names the old ids of what it cut: a rekey gives the new
    ids of those entries their ``archived`` status and the kept ones their new offsets
    (and a compress check after it finds every line held)."""
    from ctxkeep.maintenance.compress import run as ops
    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources.contract import SourceFile

    p, store = _old_compressed(tmp_path, monkeypatch)
    kept = q(store, ROWS)
    assert sum(r[0] == "archived" for r in kept) > 100
    reparse(store, rekey=True)
    assert q(store, ROWS) == kept
    sid = CHIP.stem
    ids = {r[0] for r in q(store, "SELECT entry_id FROM entries")}
    assert entry_id("claude-code", f"{sid}:{_first_uuid(CHIP)}", 0) in ids
    assert entry_id("claude-code", _first_uuid(CHIP), 0) not in ids
    conn = sqlite_store.connect(store)
    try:
        assert ops.lines_not_held(conn, SourceFile("claude-code", p), p.read_bytes()) == []
    finally:
        conn.close()


def test_a_lost_old_store_rebuilt_by_doctor_keeps_what_compress_did(tmp_path, monkeypatch):
    """store.db lost: ``doctor --repair`` derives everything from the vault under session
    keys (no old watermark says otherwise); compress's records, written with the old
    ids, are translated, so the cut lines stay archived and the kept ones at their new
    offsets."""
    from ctxkeep.maintenance import doctor

    p, store = _old_compressed(tmp_path, monkeypatch)
    kept = q(store, ROWS)
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (store / name).unlink(missing_ok=True)
    (store / "store.db").write_bytes(b"")
    doctor.repair(store, doctor.check(store))
    assert q(store, ROWS) == kept


def _first_uuid(path) -> str:
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("uuid") and rec.get("type") == "user":
            return rec["uuid"]
    raise AssertionError("no user line")


@pytest.mark.parametrize("agent", ["claude-code", "openclaude", "cowork"])
def test_every_reader_of_claude_lines_keeps_a_files_uuid_ids_when_read_from_byte_0(tmp_path, agent):
    """OpenClaude and Cowork parse with Claude Code's parser: a file a store keyed by uuid
    alone (its watermark's state has no ``ids``), read again from byte 0 (here: another
    inode), keeps uuid ids; a file without a watermark gets session keys."""
    from ctxkeep.schema import Watermark
    from ctxkeep.sources import SOURCES
    from ctxkeep.sources.contract import SourceFile

    p = tmp_path / f"{ORIG}.jsonl"
    p.write_text("\n".join(_history(ORIG)) + "\n")
    src = SOURCES[agent]
    f = SourceFile(agent, p, "append", {})
    old = Watermark(
        str(p), agent, ino=-1, offset=p.stat().st_size, parser_version=src.PARSER_VERSION, state={}
    )

    def record_ids(wm):
        return {e["record_id"] for b in src.read(f, wm) for e in b.entries if e["kind"] == "message"}

    assert record_ids(old) == {_u(n) for n in ("u-1", "a-1", "u-2", "a-2")}
    assert record_ids(None) == {f"{ORIG}:{_u(n)}" for n in ("u-1", "a-1", "u-2", "a-2")}


NEXT = "cccccccc-0000-4000-8000-000000000003"  # another file name, the same session


def test_an_old_stores_session_continued_in_a_new_file_is_not_stored_twice(tmp_path, monkeypatch):
    """A store keyed ORIG's file by uuid alone; the session goes on in a new file (its
    history repeated, same ``sessionId``). The new file is keyed by session, so its
    repeated records would be new ids: they are the stored ones, kept once. A fork
    written now (another session, the same uuids) still holds its whole history."""
    from ctxkeep.maintenance.reparse import reparse

    home, proj, store = _old_store(tmp_path, monkeypatch)
    more = _line("u-3", "a-2", ORIG, "user", "and a password field", "2026-07-02T09:00:00.000Z")
    (proj / f"{NEXT}.jsonl").write_text("\n".join([*_history(ORIG), more]) + "\n")
    ingest(home, store, agents="claude-code")
    assert _sessions(store) == {ORIG: 5}
    assert _ids(store, ORIG) == OLD_IDS | {entry_id("claude-code", f"{ORIG}:{_u('u-3')}", 0)}
    _write(
        proj,
        FORK,
        [*_history(FORK), _line("u-9", "a-2", FORK, "user", "try OAuth", "2026-07-03T09:00:00.000Z")],
    )
    ingest(home, store, agents="claude-code")
    assert _sessions(store) == {ORIG: 5, FORK: 5}
    r = reparse(store)  # the store rebuilt as it was: nothing doubled
    assert [(e["added"], e["removed"]) for e in r["diff"]["entries"]] == [(0, 0)], r["diff"]
    assert _sessions(store) == {ORIG: 5, FORK: 5}
    reparse(store, rekey=True)
    assert _sessions(store) == {ORIG: 5, FORK: 5}


def test_an_old_files_tail_and_a_new_file_holding_it_read_in_one_run_keep_it_once(tmp_path, monkeypatch):
    """The same run reads ORIG's new line (keyed by uuid: its file is old) and a new
    file repeating it (keyed by session): one entry, whichever comes first."""
    home, proj, store = _old_store(tmp_path, monkeypatch)
    more = _line("u-3", "a-2", ORIG, "user", "and a password field", "2026-07-02T09:00:00.000Z")
    with open(proj / f"{ORIG}.jsonl", "a") as f:
        f.write(more + "\n")
    (proj / f"{NEXT}.jsonl").write_text("\n".join([*_history(ORIG), more]) + "\n")
    (proj / f"{FORK}.jsonl").write_text("\n".join([*_history(ORIG), more]) + "\n")  # read before ORIG
    ingest(home, store, agents="claude-code")
    assert _sessions(store) == {ORIG: 5}


def test_twins_of_groups_not_committed_yet_count_only_in_their_session(tmp_path, monkeypatch):
    """``transform.twins`` against ``seen`` (a group transformed, not stored yet): the
    uuid-keyed entry of one group is the twin of the same session's session-keyed
    entry in the next, not of a fork's (another session, the same uuid)."""
    from ctxkeep.pipeline.transform import InFlight, twins
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.transforms.normalize import entries_frame

    _, _, store = _old_store(tmp_path, monkeypatch)
    uid = _u("u-7")

    def frame(sid: str, record_id: str, path: str):
        e = {
            "agent": "claude-code",
            "session_id": sid,
            "native_id": uid,
            "record_id": record_id,
            "part": 0,
            "role": "user",
            "kind": "message",
            "text": "the same line",
            "source_path": path,
            "source_offset": 0,
        }
        return entries_frame([e])

    conn = sqlite_store.connect(store)
    try:
        seen = InFlight()
        first = frame(ORIG, uid, "/a.jsonl")  # an old file's new line: keyed by uuid
        assert twins(conn, first, first, seen, legacy=True) == []
        seen.add(first["entry_id"].to_list(), {})
        same = frame(ORIG, f"{ORIG}:{uid}", "/b.jsonl")
        fork = frame(FORK, f"{FORK}:{uid}", "/c.jsonl")
        assert twins(conn, same, same, seen) == same["entry_id"].to_list()
        assert twins(conn, fork, fork, seen) == []
    finally:
        conn.close()


def test_doctor_and_ingest_say_once_that_an_old_store_has_files_to_rekey(tmp_path, monkeypatch):
    """doctor warns while Claude Code files are keyed by uuid alone, naming the command
    and its cost; ingest's summary says it in one line under 80 columns (nothing in a
    store made now, nor after the rekey)."""
    from ctxkeep.maintenance.doctor import check
    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.service.ingest import IngestRequest
    from ctxkeep.service.ingest import ingest as ask

    home, proj, store = _old_store(tmp_path, monkeypatch)
    size = (proj / f"{ORIG}.jsonl").stat().st_size
    ids = [f for f in check(store) if f.check == "ids"]
    assert [(f.status, f.file) for f in ids] == [("warning", "store.db")]
    assert ids[0].detail.startswith(f"1 Claude Code file ({size / 1e6:,.0f} MB) keyed by uuid alone")
    assert "run `ctxkeep reparse --rekey` (~10 CPU s per 100 MB: ~1 s here" in ids[0].detail
    monkeypatch.setenv("HOME", str(home))
    res = ask(store, IngestRequest(("claude-code",), (), False, None))  # nothing new
    assert res.summary["files"] == 1 and not res.summary["entries_new"]
    assert res.rekey_note == "1 Claude Code file keeps old ids: run `ctxkeep reparse --rekey` (~1 CPU s)"
    assert len("  " + res.rekey_note) < 80
    reparse(store, rekey=True)
    assert [(f.status, f.detail) for f in check(store) if f.check == "ids"] == [
        ("ok", "every Claude Code file keyed by session and uuid")
    ]
    assert ask(store, IngestRequest(("claude-code",), (), False, None)).rekey_note is None
    new = tmp_path / "store2"
    ingest(home, new, agents="claude-code")
    assert [f.status for f in check(new) if f.check == "ids"] == ["ok"]

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

from conftest import ingest, q
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


def _old_store(tmp_path, monkeypatch):
    """A store as ctxkeep before session 17 made it: the original keyed by uuid alone
    (its watermark's state without ``ids``). Returns (home, proj dir, store)."""
    from ctxkeep.sources import claude_code

    proj = tmp_path / "home/.claude/projects/-work-app"
    proj.mkdir(parents=True)
    _write(proj, ORIG, _history(ORIG))
    store = tmp_path / "store"
    with monkeypatch.context() as m:
        legacy = claude_code.ids_meta
        m.setattr(claude_code, "ids_meta", lambda f, st: legacy(f, {}))  # every file read as before
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

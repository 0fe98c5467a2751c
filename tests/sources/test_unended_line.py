"""F18's ingest half (newuser18, LEAD18_note "left"): an unended last line (no ``\\n``)
waited for ever. Once its file has been idle ``CTXKEEP_IDLE_SECONDS`` it is final: a
whole JSON record is ingested, anything else quarantined (counted and named in the
summary); the watermark stays at the line's start and says what was judged
(``state["_unended"]``), so when the agent later ends or continues the line, the next
ingest neither loses nor doubles anything."""

from __future__ import annotations

import json
import sqlite3

from ctxkeep.pipeline import engine as pipeline
from ctxkeep.pipeline.summary import held_back, held_back_line
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.bad_input import line, rec


def _home(tmp_path, data: bytes):
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-unended"
    proj.mkdir(parents=True)
    (proj / "s.jsonl").write_bytes(data)
    return home, proj / "s.jsonl"


def _q(store, sql, *args):
    conn = sqlite3.connect(store / "store.db")
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _state(store, path) -> tuple[int, int, dict]:
    ((offset, size, state),) = _q(
        store, "SELECT offset, size, state FROM watermarks WHERE path = ?", str(path)
    )
    return offset, size, json.loads(state)


def _entries(store, path) -> list[tuple]:
    return _q(
        store,
        "SELECT source_offset, entry_id FROM entries WHERE source_path = ? AND kind = 'message' "
        "ORDER BY source_offset",
        str(path),
    )


def _quarantine(store, path) -> list[tuple]:
    return _q(
        store, "SELECT offset, action, reason FROM quarantine WHERE path = ? ORDER BY offset", str(path)
    )


def _records(store, path) -> int:
    return _q(store, "SELECT coalesce(sum(records), 0) FROM coverage WHERE path = ?", str(path))[0][0]


def test_a_whole_record_left_unended_is_ingested_after_the_idle_time_then_ended(tmp_path, monkeypatch):
    first, last = line(rec(1)), line(rec(2))[:-1]  # the last record whole, its \n never written
    home, path = _home(tmp_path, first + last)
    store, ctx = tmp_path / "store", DiscoveryContext(home=home, env={})
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "3600")  # written just now: it waits, as before
    s0 = pipeline.run_ingest(store, ctx=ctx)
    assert (s0.entries_new, len(_entries(store, path))) == (1, 1)
    conn = sqlite3.connect(store / "store.db")
    (row,) = held_back(conn)
    conn.close()
    assert (row["reason"], row["bytes"]) == ("unfinished last line", len(last))
    assert "or as it is by an ingest from" in held_back_line([row])
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")  # the file is idle now: nothing changed on disk
    s1 = pipeline.run_ingest(store, ctx=ctx)
    assert (s1.files_read, s1.entries_new, s1.quarantined, s1.lines_unended) == (1, 1, 0, 0)
    assert [o for o, _ in _entries(store, path)] == [0, len(first)]
    offset, size, state = _state(store, path)
    assert (offset, size) == (len(first), len(first) + len(last))  # the watermark at the line's start
    assert state["_unended"]["len"] == len(last)
    conn = sqlite3.connect(store / "store.db")
    assert held_back(conn) == []  # not "unfinished" any more
    conn.close()
    assert _records(store, path) == 2
    # unchanged: not read again
    s2 = pipeline.run_ingest(store, ctx=ctx)
    assert (s2.files_read, s2.entries_new) == (0, 0)
    # the agent ends the line as it was, and writes one more: only that one is new
    nxt = line(rec(3))
    with open(path, "ab") as f:
        f.write(b"\n" + nxt)
    s3 = pipeline.run_ingest(store, ctx=ctx)
    assert (s3.entries_new, s3.quarantined) == (1, 0)
    assert [o for o, _ in _entries(store, path)] == [0, len(first), len(first) + len(last) + 1]
    assert _records(store, path) == 3  # the ended line not counted twice
    offset, size, state = _state(store, path)
    assert (offset, size, "_unended" in state) == (size, len(first) + len(last) + 1 + len(nxt), False)


def test_a_torn_line_is_quarantined_named_and_taken_back_when_the_agent_finishes_it(tmp_path):
    first, whole = line(rec(1)), line(rec(2))
    torn = whole[:40]
    home, path = _home(tmp_path, first + torn)
    store, ctx = tmp_path / "store", DiscoveryContext(home=home, env={})
    s1 = pipeline.run_ingest(store, ctx=ctx)  # CTXKEEP_IDLE_SECONDS=0 (conftest)
    assert (s1.entries_new, s1.quarantined, s1.lines_unended, s1.unended) == (1, 1, 1, [str(path)])
    ((off, action, reason),) = _quarantine(store, path)
    assert (off, action) == (len(first), "skipped")
    assert reason.startswith("unended last line, taken as final after the idle time: ")
    # the agent finishes the line: its record is stored, the judgment taken back
    with open(path, "ab") as f:
        f.write(whole[40:])
    s2 = pipeline.run_ingest(store, ctx=ctx)
    assert (s2.entries_new, s2.quarantined, s2.lines_unended) == (1, 0, 0)
    assert _quarantine(store, path) == []
    assert [o for o, _ in _entries(store, path)] == [0, len(first)]
    offset, size, state = _state(store, path)
    assert (offset, size, "_unended" in state) == (len(first + whole), len(first + whole), False)


def test_a_torn_line_a_new_record_was_glued_to_keeps_one_row_and_the_record(tmp_path):
    """An agent that died mid-line and started again appends its next record right
    after the torn bytes: the line holds the torn part and a whole record."""
    first, whole, nxt = line(rec(1)), line(rec(2)), line(rec(3))
    torn = whole[:40]
    home, path = _home(tmp_path, first + torn)
    store, ctx = tmp_path / "store", DiscoveryContext(home=home, env={})
    pipeline.run_ingest(store, ctx=ctx)
    with open(path, "ab") as f:
        f.write(nxt)
    s2 = pipeline.run_ingest(store, ctx=ctx)
    assert (s2.entries_new, s2.lines_unended) == (1, 0)
    rows = _quarantine(store, path)
    assert [(o, a) for o, a, _ in rows] == [(len(first), "repaired")]  # one row: the whole line's
    assert [o for o, _ in _entries(store, path)] == [0, len(first) + len(torn)]


def test_a_torn_line_that_grows_and_is_idle_again_is_judged_again(tmp_path):
    first, whole = line(rec(1)), line(rec(2))
    home, path = _home(tmp_path, first + whole[:40])
    store, ctx = tmp_path / "store", DiscoveryContext(home=home, env={})
    pipeline.run_ingest(store, ctx=ctx)
    with open(path, "ab") as f:
        f.write(whole[40:60])
    s2 = pipeline.run_ingest(store, ctx=ctx)
    assert (s2.quarantined, s2.lines_unended) == (1, 1)
    ((off, _a, _r),) = _quarantine(store, path)  # the longer line's row only
    assert _q(store, "SELECT length FROM quarantine WHERE path = ?", str(path)) == [(60,)]
    assert off == len(first)


def test_an_over_cap_unended_line_is_quarantined_as_its_hash_then_taken_back(tmp_path, monkeypatch):
    """Past the line cap the unended line is streamed, never buffered (as it waited):
    judged, it is quarantined as its SHA-256, size and head; finished later, that row
    is taken back for the whole line's."""
    import hashlib

    from ctxkeep.sources import SOURCES
    from ctxkeep.sources.contract import SourceFile
    from ctxkeep.sources.readers.jsonl import facts_unchanged, is_unchanged

    monkeypatch.setenv("CTXKEEP_MAX_LINE_MB", str(1048 / 1024 / 1024))
    pv = SOURCES["claude-code"].PARSER_VERSION
    p = tmp_path / "s.jsonl"
    head = line(rec(1))
    tail = b'{"type": "user", "x": "' + b"B" * 40_000
    p.write_bytes(head + tail)

    def read(wm):
        return list(SOURCES["claude-code"].read(SourceFile("claude-code", p, "append"), wm))

    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "3600")
    waited = read(None)[-1].watermark
    assert (waited.offset, "_unended" in waited.state) == (len(head), False)
    assert is_unchanged(p.stat(), waited, pv)  # not idle yet: not read again
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    facts = (str(p), waited.dev, waited.ino, waited.size, waited.mtime_ns, pv, 1)
    assert not is_unchanged(p.stat(), waited, pv) and not facts_unchanged(p.stat(), facts, pv)
    (b,) = read(waited)
    (q,) = b.quarantine
    assert (q["offset"], q["length"], q["raw_sha256"]) == (
        len(head),
        len(tail),
        hashlib.sha256(tail).hexdigest(),
    )
    assert q["reason"].startswith("unended last line, taken as final after the idle time: line of 40,")
    assert (b.watermark.offset, b.watermark.state["_unended"]["len"]) == (len(head), len(tail))
    assert is_unchanged(p.stat(), b.watermark, pv)  # judged: not read again
    assert facts_unchanged(p.stat(), facts[:6] + (0,), pv)
    with open(p, "ab") as f:  # the agent finishes it and writes another record
        f.write(b'"}\n' + line(rec(3)))
    batches = read(b.watermark)
    rows = [q for x in batches for q in x.quarantine]
    assert [r.get("retract") for r in rows] == ["unended last line, taken as final after the idle time", None]
    assert (rows[1]["offset"], rows[1]["length"]) == (len(head), len(tail) + 2)
    assert [e["source_offset"] for x in batches for e in x.entries if e["kind"] == "message"] == [
        len(head) + len(tail) + 3
    ]


def test_watermark_facts_say_which_tails_wait(tmp_path, monkeypatch):
    """``sinks.sqlite.watermark_facts``' 7th member: 1 for a tail not judged yet, 0
    once judged (a no-op ingest reads it without parsing any state)."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.sqlite.lookup import watermark_facts

    first = line(rec(1))
    home, path = _home(tmp_path, first + b'{"torn')
    store, ctx = tmp_path / "store", DiscoveryContext(home=home, env={})
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "3600")
    pipeline.run_ingest(store, ctx=ctx)
    conn = sqlite_store.connect(store, readonly=True)
    assert watermark_facts(conn)[str(path)][6] == 1
    conn.close()
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    s = pipeline.run_ingest(store, ctx=ctx)
    assert (s.files_read, s.lines_unended) == (1, 1)
    conn = sqlite_store.connect(store, readonly=True)
    assert watermark_facts(conn)[str(path)][6] == 0
    conn.close()


def test_the_ingest_summary_names_the_quarantined_unended_line(tmp_path):
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    home, path = _home(tmp_path, line(rec(1)) + b'{"type": "user", "torn')
    r = CliRunner().invoke(
        app, ["ingest", "--home", str(tmp_path / "store")], env={"HOME": str(home), "COLUMNS": "400"}
    )
    assert r.exit_code == 0, r.output
    assert "1 bad line" in r.output
    # blanks collapsed: an earlier test in this process may have made the console with
    # another width (the line is folded at it)
    assert (
        "1 unended last line quarantined (no newline, the file idle past CTXKEEP_IDLE_SECONDS, not a "
        f"whole record; read again if the agent writes on): {path}"
    ) in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["ingest", "--home", str(tmp_path / "s2"), "--json"], env={"HOME": str(home)})
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert (got["quarantined"], got["lines_unended"], got["unended"]) == (1, 1, [str(path)])


def test_a_file_that_is_one_torn_line_is_no_unreadable_file(tmp_path):
    """An agent that died inside its first line: the summary names the unended line,
    not "1 file unreadable (not in its agent's format)" as well."""
    home, path = _home(tmp_path, line(rec(1))[:50])
    s = pipeline.run_ingest(tmp_path / "store", ctx=DiscoveryContext(home=home, env={}))
    assert (s.quarantined, s.lines_unended, s.unended, s.files_unreadable) == (1, 1, [str(path)], 0)


def test_a_judged_whole_record_that_grows_by_blanks_only_is_stored_once(tmp_path):
    """A judged unended line that later grows by trailing blanks only (spaces, tabs, a
    ``\\r``) is the same record: JSON ignores them; its entries (ids from the line's
    hash) are not stored again under a new hash (left19's leftover)."""
    first, last = line(rec(1)), line(rec(2))[:-1]
    home, path = _home(tmp_path, first + last)
    store, ctx = tmp_path / "store", DiscoveryContext(home=home, env={})
    pipeline.run_ingest(store, ctx=ctx)  # CTXKEEP_IDLE_SECONDS=0 (conftest): judged
    before = _entries(store, path)
    assert [o for o, _ in before] == [0, len(first)]
    with open(path, "ab") as f:
        f.write(b" \t ")
    s1 = pipeline.run_ingest(store, ctx=ctx)
    assert (s1.entries_new, s1.quarantined) == (0, 0)
    assert _entries(store, path) == before
    assert _records(store, path) == 2
    nxt = line(rec(3))
    with open(path, "ab") as f:
        f.write(b"  \n" + nxt)
    s2 = pipeline.run_ingest(store, ctx=ctx)
    assert (s2.entries_new, s2.quarantined) == (1, 0)
    assert _entries(store, path)[:2] == before
    assert len(_entries(store, path)) == 3
    assert _records(store, path) == 3

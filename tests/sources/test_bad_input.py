"""Bad input: a clear reason, nothing lost, the run goes on.

Each kind has a handmade fixture (``fixtures/bad_input.py``). Every fixture is
ingested in the same run as a clean neighbour file, so a bad file that stopped the
run would show as a missing neighbour.
"""

from __future__ import annotations

import sqlite3

import pytest

from conftest import corpus
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.bad_input import FIXTURES, SESSION, line, rec


def _home_with(tmp_path, files: dict[str, bytes]):
    """A fake user home whose Claude projects dir holds ``files``."""
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-bad-input"
    proj.mkdir(parents=True)
    for name, data in files.items():
        (proj / name).write_bytes(data)
    return home, proj


def _texts(store, path) -> list[str]:
    conn = sqlite3.connect(store / "store.db")
    try:
        rows = conn.execute(
            "SELECT content_hash FROM entries WHERE source_path = ? ORDER BY source_offset, rowid",
            (str(path),),
        ).fetchall()
        return [sqlite_store.content_text(conn, h) if h else "" for (h,) in rows]
    finally:
        conn.close()


def _quarantine(store, path) -> list[tuple]:
    conn = sqlite3.connect(store / "store.db")
    try:
        return conn.execute(
            "SELECT offset, action, reason FROM quarantine WHERE path = ? ORDER BY offset, action",
            (str(path),),
        ).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_bad_input_kind(tmp_path, name, monkeypatch):
    # the files were written just now: an unended last line waits (test_unended_line.py:
    # after the idle time it is final)
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "3600")
    data, expect = FIXTURES[name]
    neighbour = line(rec(100, "clean neighbour file")).replace(
        SESSION.encode(), b"5e551011-0000-4000-8000-00000000beef"
    )
    home, proj = _home_with(tmp_path, {"bad.jsonl": data, "zz-clean.jsonl": neighbour})
    store = tmp_path / "store"
    s = pipeline.run_ingest(store, ctx=DiscoveryContext(home=home, env={}))

    assert s.files == 2 and s.files_read == 2
    assert _texts(store, proj / "zz-clean.jsonl") == ["clean neighbour file"]
    assert _texts(store, proj / "bad.jsonl") == expect["texts"]

    q = _quarantine(store, proj / "bad.jsonl")
    want = sorted(
        [(off, "skipped", r) for off, r in expect.get("skipped", [])]
        + [(off, "repaired", r) for off, r in expect.get("repaired", [])]
    )
    assert len(q) == len(want) == s.quarantined
    for (off, action, reason), (w_off, w_action, w_reason) in zip(q, want, strict=False):
        assert (off, action) == (w_off, w_action)
        assert w_reason in reason  # e.g. "malformed JSON: Expecting ..."
    if "meta_tool" in expect:
        conn = sqlite3.connect(store / "store.db")
        kinds = conn.execute("SELECT kind, tool_name FROM entries WHERE text_bytes = 13").fetchall()
        conn.close()
        assert kinds == [("meta", expect["meta_tool"])]


def test_quarantine_keeps_raw_bytes_and_offset(tmp_path):
    data, _ = FIXTURES["malformed"]
    home, proj = _home_with(tmp_path, {"bad.jsonl": data})
    store = tmp_path / "store"
    pipeline.run_ingest(store, ctx=DiscoveryContext(home=home, env={}))
    conn = sqlite3.connect(store / "store.db")
    agent, path, off, length, raw = conn.execute(
        "SELECT agent, path, offset, length, raw FROM quarantine"
    ).fetchone()
    conn.close()
    assert (agent, path) == ("claude-code", str(proj / "bad.jsonl"))
    assert data[off : off + length] == raw == b'{"type":"user","uuid":"x",,}'


def test_huge_line_is_chunked_not_dropped(tmp_path):
    data, expect = FIXTURES["huge_line"]
    home, proj = _home_with(tmp_path, {"bad.jsonl": data})
    store = tmp_path / "store"
    pipeline.run_ingest(store, ctx=DiscoveryContext(home=home, env={}))
    conn = sqlite3.connect(store / "store.db")
    n_chunks = conn.execute(
        "SELECT count(*) FROM chunks c JOIN contents k USING(content_id) WHERE k.bytes > 2000000"
    ).fetchone()[0]
    conn.close()
    assert len(expect["texts"][1].encode()) == 2_025_000
    assert n_chunks >= 2_025_000 // 4096


def test_parent_cycle_links_sidechain_records(tmp_path):
    data, _ = FIXTURES["parent_cycle"]
    home, proj = _home_with(tmp_path, {"bad.jsonl": data})
    store = tmp_path / "store"
    pipeline.run_ingest(store, ctx=DiscoveryContext(home=home, env={}))
    conn = sqlite3.connect(store / "store.db")
    rows = conn.execute(
        "SELECT session_id, parent_session_id FROM entries WHERE is_sidechain=1 ORDER BY source_offset"
    ).fetchall()
    conn.close()
    assert rows == [(f"{SESSION}/sidechain-00000000", SESSION)] * 2


def test_empty_file_gets_a_watermark_and_is_skipped_next_time(tmp_path):
    home, proj = _home_with(tmp_path, {"empty.jsonl": b""})
    store = tmp_path / "store"
    ctx = DiscoveryContext(home=home, env={})
    s1 = pipeline.run_ingest(store, ctx=ctx)
    s2 = pipeline.run_ingest(store, ctx=ctx)
    assert (s1.files_read, s1.entries_new) == (1, 0)
    assert (s2.files, s2.files_read) == (1, 0)


def test_unterminated_last_line_waits_for_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "3600")  # written just now (not idle)
    data, expect = FIXTURES["unterminated_last"]
    home, proj = _home_with(tmp_path, {"bad.jsonl": data})
    store = tmp_path / "store"
    ctx = DiscoveryContext(home=home, env={})
    s1 = pipeline.run_ingest(store, ctx=ctx)
    assert _texts(store, proj / "bad.jsonl") == expect["texts"]
    assert s1.quarantined == 0
    with open(proj / "bad.jsonl", "ab") as f:
        f.write(b"\n")
    s2 = pipeline.run_ingest(store, ctx=ctx)
    assert s2.entries_new == 1
    assert _texts(store, proj / "bad.jsonl") == expect["texts"] + [expect["pending"]]


def test_file_deleted_between_discovery_and_reading(tmp_path):
    home, proj = _home_with(tmp_path, {"gone.jsonl": line(rec(1)), "stays.jsonl": line(rec(2))})
    store = tmp_path / "store"
    conn = sqlite_store.connect(store)
    try:
        p = pipeline.plan(store, conn, ctx=DiscoveryContext(home=home, env={}))
        assert len(p.todo) == 2
        (proj / "gone.jsonl").unlink()
        r = pipeline.ingest_files(conn, p.todo, {})
        n = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        conn.close()
    assert (r["vanished"], r["files_read"], r["entries_new"], n) == (1, 1, 1, 1)


def test_file_deleted_while_being_read(tmp_path, monkeypatch):
    """The path vanishes after the existence check: reading yields nothing, counted as
    vanished, the next file is still ingested."""
    home, proj = _home_with(tmp_path, {"a.jsonl": line(rec(1)), "b.jsonl": line(rec(2))})
    store = tmp_path / "store"
    from ctxkeep.sources import claude_code

    real_read = claude_code.read

    def read_after_delete(file, wm, *a, **k):
        if file.path.name == "a.jsonl" and file.path.exists():
            file.path.unlink()
        return real_read(file, wm, *a, **k)

    monkeypatch.setattr(claude_code, "read", read_after_delete)
    s = pipeline.run_ingest(store, ctx=DiscoveryContext(home=home, env={}))
    assert (s.files_vanished, s.files_read, s.entries_new) == (1, 1, 1)


def test_real_corpus_has_no_quarantined_lines(corpus_store):
    home, summary = corpus_store
    assert summary.quarantined == 0
    corpus(
        ".claude/projects/-Users-dain-workspace-claude-code-log-sample/"
        "0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl"
    )  # the 1 MB image line is fine


def test_malformed_json_reason_says_at_once():
    """json's "Unterminated string starting at" / "Invalid control character at" end in
    "at": the quarantine reason must not read "starting at at char 67"."""
    from ctxkeep.sources.readers.jsonl import parse_line

    rec, reason = parse_line(b'{"type": "user", "text": "cut here')
    assert rec is None
    assert reason == "malformed JSON: Unterminated string starting at char 25"
    rec, reason = parse_line(b'{"a": 1,}')
    assert reason == "malformed JSON: Expecting property name enclosed in double quotes at char 8"

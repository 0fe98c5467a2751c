"""Incremental ingest: watermarks, appends, rewritten files, dedup across runs."""

from __future__ import annotations

import shutil

from conftest import CORPUS, ingest, scalar

USEREQ = ".codex/sessions/2025/12/15/rollout-2025-12-15T14-44-44-019b2241-a0a9-7740-a0c0-33c010d4f7e6.jsonl"
LATER = (
    CORPUS
    / "appends"
    / "codex"
    / "rollout-2025-12-15T14-44-44-019b2241-a0a9-7740-a0c0-33c010d4f7e6.later.jsonl"
)


#: the JSONL agents of issue 2; the other agents' change detection has its own tests
JSONL_AGENTS = ["claude-code", "codex"]


def test_second_run_adds_nothing_and_reads_no_bytes(home_copy, store_home):
    s1 = ingest(home_copy, store_home, JSONL_AGENTS)
    # 16 transcripts and the sub-agent's .meta.json (a sidecar)
    assert (s1.files, s1.files_read, s1.entries_new, s1.quarantined) == (17, 17, 3215, 0)
    s2 = ingest(home_copy, store_home, JSONL_AGENTS)
    assert (s2.files, s2.files_read, s2.bytes, s2.lines, s2.entries_new) == (17, 0, 0, 0, 0)


def test_appended_rollout_adds_exactly_its_new_records(home_copy, store_home):
    ingest(home_copy, store_home, JSONL_AGENTS)
    old = home_copy / USEREQ
    old_size = old.stat().st_size
    before = scalar(store_home, "SELECT count(*) FROM entries")
    shutil.copyfile(LATER, old)  # the agent's later state: 10 lines appended
    appended = LATER.read_bytes()[old_size:]
    assert appended.count(b"\n") == 10
    s = ingest(home_copy, store_home, JSONL_AGENTS)
    # 10 lines: 3 are event_msg copies (user_message, agent_reasoning, agent_message) of
    # response_items; the other 7 (message, turn_context, ghost_snapshot, token_count,
    # reasoning, message, token_count) are new entries
    assert (s.files_read, s.lines, s.bytes, s.entries_new) == (1, 10, len(appended), 7)
    assert scalar(store_home, "SELECT count(*) FROM entries") == before + 7
    assert (
        scalar(
            store_home,
            "SELECT min(source_offset) FROM entries WHERE ingested_at = "
            "(SELECT max(ingested_at) FROM entries)",
        )
        == old_size
    )
    # the first appended token_count re-emits the stored total (adds nothing); the
    # second adds one response: 613979-588142 input, of which 504704-501760 cached
    assert (
        scalar(
            store_home, "SELECT count(*) FROM usage WHERE session_id = '019b2241-a0a9-7740-a0c0-33c010d4f7e6'"
        )
        == 37
    )
    assert scalar(
        store_home,
        "SELECT sum(input_tokens) FROM usage WHERE session_id = '019b2241-a0a9-7740-a0c0-33c010d4f7e6'",
    ) == 86382 + (613979 - 588142) - (504704 - 501760)


def test_shrunk_file_is_reread_without_doubling(home_copy, store_home):
    ingest(home_copy, store_home, JSONL_AGENTS)
    before = scalar(store_home, "SELECT count(*) FROM entries")
    p = home_copy / USEREQ
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(b"".join(lines[:100]))  # e.g. compressed by another tool
    s = ingest(home_copy, store_home, JSONL_AGENTS)
    assert s.files_read == 1 and s.lines == 100 and s.entries_new == 0
    assert scalar(store_home, "SELECT count(*) FROM entries") == before
    wm = scalar(store_home, "SELECT offset FROM watermarks WHERE path = ?", str(p))
    assert wm == p.stat().st_size


def test_head_changed_file_is_reread_without_doubling(home_copy, store_home):
    ingest(home_copy, store_home, JSONL_AGENTS)
    before = scalar(store_home, "SELECT count(*) FROM entries")
    p = home_copy / USEREQ
    lines = p.read_bytes().splitlines(keepends=True)
    # same size or larger, but the first line rewritten: a different file now
    new_first = lines[0].replace(b'"originator":"codex_vscode"', b'"originator":"codex_vscodx"')
    assert new_first != lines[0]
    p.write_bytes(new_first + b"".join(lines[1:]) + lines[-1])
    s = ingest(home_copy, store_home, JSONL_AGENTS)
    assert s.files_read == 1 and s.lines == len(lines) + 1
    # the changed session_meta line and the repeated last line (a token_count that
    # re-emits the same total) are byte-identical or new: only the rewritten line is new
    assert s.entries_new == 1
    assert scalar(store_home, "SELECT count(*) FROM entries") == before + 1


def test_resumed_copy_in_a_new_file_is_not_doubled(home_copy, store_home):
    """Claude Code's resume repeats earlier records (same uuids) in a new file; Codex
    forks replay the parent's lines. Both dedup by record id; usage counts once."""
    ingest(home_copy, store_home, JSONL_AGENTS)
    entries = scalar(store_home, "SELECT count(*) FROM entries")
    usage = scalar(store_home, "SELECT sum(output_tokens) FROM usage")
    src = home_copy / ".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"
    shutil.copyfile(src, src.with_name("0a0a0a0a-resumed-copy.jsonl"))
    codex_src = home_copy / USEREQ
    shutil.copyfile(codex_src, codex_src.with_name("rollout-2025-12-16T00-00-00-copy.jsonl"))
    s = ingest(home_copy, store_home, JSONL_AGENTS)
    assert s.files_read == 2
    # Claude: every record has a uuid -> 0 new; the summary line has none and is keyed
    # by session + line hash; its session (from the file name) is new -> 1 new entry
    assert s.entries_new == 1
    assert scalar(store_home, "SELECT count(*) FROM entries") == entries + 1
    assert scalar(store_home, "SELECT sum(output_tokens) FROM usage") == usage


def test_parser_version_change_rereads(home_copy, store_home, monkeypatch):
    ingest(home_copy, store_home, JSONL_AGENTS)
    from ctxkeep.sources import codex

    monkeypatch.setattr(codex, "PARSER_VERSION", codex.PARSER_VERSION + 1)
    s = ingest(home_copy, store_home, JSONL_AGENTS)
    assert s.files_read == 6 and s.entries_new == 0


def test_the_plan_gives_an_appended_file_its_whole_watermark(home_copy, store_home):
    """The plan tests files against their watermarks' stat facts without reading the
    states; a file it reads gets the whole stored watermark, state included (the
    parser's carry-over), and an unchanged one is skipped."""
    from ctxkeep.pipeline.plan import plan
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources.contract import DiscoveryContext

    ingest(home_copy, store_home, JSONL_AGENTS)
    shutil.copyfile(LATER, home_copy / USEREQ)
    conn = sqlite_store.connect(store_home)
    try:
        stored = sqlite_store.load_watermarks(conn)[str(home_copy / USEREQ)]
        p = plan(store_home, conn, agents=JSONL_AGENTS, ctx=DiscoveryContext(home=home_copy, env={}))
    finally:
        conn.close()
    assert [(str(f.path), wm) for f, wm in p.todo] == [(str(home_copy / USEREQ), stored)]
    assert stored.state.get("sid") == "019b2241-a0a9-7740-a0c0-33c010d4f7e6"
    assert p.unchanged == 16  # (one a sidecar: the sub-agent's .meta.json)


def test_the_plan_finds_every_kind_of_change_and_skips_the_rest(home_copy, store_home):
    """A no-op ingest's plan compares discovery's one ``lstat`` per file with the
    watermarks' stat facts: a file changed by one byte (same size, new mtime), grown,
    shrunk, replaced by a copy of the same bytes (new inode), or gone is found; every
    other file (a Gemini CLI chat beside them too) is skipped, and none is read twice."""
    import os

    from ctxkeep.pipeline.plan import plan
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources.contract import DiscoveryContext

    agents = [*JSONL_AGENTS, "gemini-cli"]
    ingest(home_copy, store_home, agents)
    ctx = DiscoveryContext(home=home_copy, env={})
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        before = plan(store_home, conn, agents=agents, ctx=ctx)
    finally:
        conn.close()
    files = [
        f.path for f in before.discoveries[0].files + before.discoveries[1].files if f.path.suffix == ".jsonl"
    ]
    assert before.todo == [] and before.unchanged > 6 and len(files) >= 6
    one_byte, grown, shrunk, replaced, gone = files[:5]

    def later(p):  # a new mtime, whatever the clock's step
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))

    data = bytearray(one_byte.read_bytes())
    data[len(data) // 2] = ord("x") if data[len(data) // 2] != ord("x") else ord("y")
    one_byte.write_bytes(bytes(data))
    later(one_byte)
    with grown.open("ab") as f:
        f.write(b"\n")
    shrunk.write_bytes(shrunk.read_bytes()[: shrunk.stat().st_size // 2])
    st = replaced.stat()
    copy = replaced.with_name(replaced.name + ".tmp")
    shutil.copyfile(replaced, copy)
    os.replace(copy, replaced)  # same bytes and size, a new inode
    os.utime(replaced, ns=(st.st_atime_ns, st.st_mtime_ns))  # even the old mtime
    assert replaced.stat().st_ino != st.st_ino and replaced.stat().st_size == st.st_size
    gone.unlink()
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        after = plan(store_home, conn, agents=agents, ctx=ctx)
    finally:
        conn.close()
    assert sorted(str(f.path) for f, _ in after.todo) == sorted(map(str, (one_byte, grown, shrunk, replaced)))
    assert all(wm is not None for _, wm in after.todo)  # each with its stored watermark
    assert after.unchanged == before.unchanged - 5

"""Claude Code source against the real corpus (shared/corpus/home/.claude/projects)."""

from __future__ import annotations

import sqlite3

from conftest import CORPUS_HOME, corpus
from ctxkeep.sources import claude_code
from ctxkeep.sources.contract import SourceFile

P = ".claude/projects/"
MUSIC = P + "-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"
IMAGE = P + "-Users-dain-workspace-claude-code-log-sample/0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl"
WORKTREES = P + "-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
SUBAGENT = (
    P + "-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a4ca7529859c158c2.jsonl"
)
FLAT_AGENT = P + "-Users-dain-workspace-coderabbit-review-helper/agent-9fa17969.jsonl"
SIDECHAINS = P + "sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
SYNTHETIC = P + "-fixtures-agent-sessions/small.jsonl"


def _read(rel: str) -> tuple[list[dict], list[dict], int]:
    """All entries, quarantined rows and lines of one corpus file."""
    p = corpus(rel)
    meta = {}
    if p.name.startswith("agent-"):
        meta["subagent"] = p.stem[len("agent-") :]
        if p.parent.name == "subagents":
            meta["parent_session"] = p.parent.parent.name
    entries, quarantine, lines = [], [], 0
    for b in claude_code.read(SourceFile("claude-code", p, "append", meta), None):
        entries += b.entries
        quarantine += b.quarantine
        lines += b.lines
    return entries, quarantine, lines


def _kinds(entries: list[dict]) -> dict:
    out: dict = {}
    for e in entries:
        out[e["kind"]] = out.get(e["kind"], 0) + 1
    return out


def _nonblank_lines(rel: str) -> int:
    return sum(1 for line in corpus(rel).read_bytes().split(b"\n") if line.strip())


def test_discovery_finds_sessions_and_both_subagent_layouts(corpus_ctx):
    d = claude_code.discover(corpus_ctx)
    rel = sorted(str(f.path.relative_to(CORPUS_HOME)) for f in d.files)
    # 8 session files (one is 0 bytes) + 2 sub-agent transcripts + 1 sidecar (the v2.1
    # sub-agent's .meta.json, kept by the vault: readers.sidecar)
    assert len(rel) == 11
    assert SUBAGENT in rel and FLAT_AGENT in rel
    sub = next(f for f in d.files if f.path.name == "agent-a4ca7529859c158c2.jsonl")
    assert sub.mode == "append" and sub.meta == {
        "subagent": "a4ca7529859c158c2",
        "parent_session": "ef958aa1-0e93-49f0-bb71-150f63befcd1",
    }
    side = next(f for f in d.files if f.path.name == "agent-a4ca7529859c158c2.meta.json")
    assert side.mode == "rewrite" and side.meta == {
        "sidecar": "subagent-meta",
        "sidecar_of": str(sub.path),
        "subagent": "a4ca7529859c158c2",
        "parent_session": "ef958aa1-0e93-49f0-bb71-150f63befcd1",
    }
    assert claude_code.mode_for(side.path) == "rewrite" and claude_code.mode_for(sub.path) == "append"


def test_claude_config_dir_replaces_default(corpus_ctx, tmp_path):
    from ctxkeep.sources.contract import DiscoveryContext

    ctx = DiscoveryContext(home=CORPUS_HOME, env={"CLAUDE_CONFIG_DIR": str(tmp_path)})
    d = claude_code.discover(ctx)
    assert d.files == [] and d.searched == [tmp_path]
    assert d.reason == "projects dir holds no *.jsonl session files"


def test_todo_lists_are_taken_by_their_sessions_transcript(tmp_path):
    """``todos/<session>-agent-<agent>.json`` goes with the first transcript of that
    session id discovery found (a sub-agent's transcript names no session); a list of
    no transcript, a name without ``-agent-`` and a file that is not JSON are not taken;
    a ``todos`` folder without lists is searched and adds nothing (the session map is
    then never built, session 24)."""
    from ctxkeep.sources.contract import DiscoveryContext

    cfg = tmp_path / "cfg"
    sid, other = "5b0c7a5e-0000-4000-8000-000000000001", "5b0c7a5e-0000-4000-8000-000000000002"
    files = [
        f"projects/-a/{sid}.jsonl",
        f"projects/-b/{sid}.jsonl",  # the same session id in a later project: not its owner
        f"projects/-a/{other}.jsonl",
        "projects/-a/agent-a1.jsonl",
        f"todos/{sid}-agent-{sid}.json",
        f"todos/{sid}-agent-a1.json",
        f"todos/{other}-agent-{other}.json",
        "todos/agent-a1-agent-a1.json",  # a sub-agent's transcript is no session
        "todos/9e9e9e9e-0000-4000-8000-000000000009-agent-x.json",  # no transcript
        "todos/notes.json",
        f"todos/{sid}-agent-{sid}.txt",
    ]
    for rel in files:
        (cfg / rel).parent.mkdir(parents=True, exist_ok=True)
        (cfg / rel).write_text("[]" if rel.endswith(".json") else "{}\n")
    d = claude_code.discover(DiscoveryContext(home=tmp_path, env={"CLAUDE_CONFIG_DIR": str(cfg)}))
    todos = {f.path.name: f.meta for f in d.files if f.meta.get("sidecar") == "todos"}
    assert {n: (m["sidecar_of"], m["session"], m["todo_agent"]) for n, m in todos.items()} == {
        f"{sid}-agent-{sid}.json": (str(cfg / files[0]), sid, sid),
        f"{sid}-agent-a1.json": (str(cfg / files[0]), sid, "a1"),
        f"{other}-agent-{other}.json": (str(cfg / files[2]), other, other),
    }
    assert cfg / "todos" in d.searched
    for rel in files[4:]:
        (cfg / rel).unlink()
    d = claude_code.discover(DiscoveryContext(home=tmp_path, env={"CLAUDE_CONFIG_DIR": str(cfg)}))
    assert cfg / "todos" in d.searched
    assert sorted(str(f.path.relative_to(cfg)) for f in d.files) == sorted(files[:4])


def test_records_and_kinds_per_file():
    # (lines, entries per kind) from the real files; every line gives >= 1 entry
    expected = {
        MUSIC: (137, {"message": 19, "summary": 1, "tool_call": 59, "tool_result": 58}),
        IMAGE: (68, {"message": 23, "meta": 9, "thinking": 9, "tool_call": 14, "tool_result": 14}),
        WORKTREES: (
            180,
            {"message": 12, "meta": 72, "summary": 2, "thinking": 14, "tool_call": 40, "tool_result": 40},
        ),
        SUBAGENT: (56, {"message": 8, "tool_call": 24, "tool_result": 24}),
        FLAT_AGENT: (17, {"message": 7, "tool_call": 5, "tool_result": 5}),
        SIDECHAINS: (438, {"message": 102, "meta": 1, "summary": 1, "tool_call": 167, "tool_result": 167}),
        SYNTHETIC: (
            89,
            {"message": 13, "meta": 69, "summary": 2, "thinking": 6, "tool_call": 3, "tool_result": 3},
        ),
    }
    for rel, (lines, kinds) in expected.items():
        entries, quarantine, n = _read(rel)
        assert n == lines == _nonblank_lines(rel), rel
        assert quarantine == [], rel
        assert _kinds(entries) == kinds, rel
        assert len({e["source_offset"] for e in entries}) == lines, rel


def test_edge_files():
    assert (
        _read(P + "-Users-chip-dev-ai-music/ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl")[0][0]["kind"]
        == "summary"
    )
    snap, _, n = _read(P + "-experiments-ideas/a95fea4a-b88a-4e49-ac07-4cc323d8700c.jsonl")
    assert n == 4 and {e.get("tool_name") for e in snap} == {"file-history-snapshot"}
    empty, q, n = _read(
        P + "-Users-dain-workspace-JSSoundRecorder/2c5941bd-b9de-41d6-9414-221d175776f7.jsonl"
    )
    assert (empty, q, n) == ([], [], 0)


def test_image_is_a_placeholder_never_base64():
    entries, _, _ = _read(IMAGE)
    imgs = [e for e in entries if e["text"].startswith("[image ")]
    assert [e["text"] for e in imgs] == ["[image image/png, 784,788 bytes]"]
    assert not any("iVBORw0KGgo" in e["text"] for e in entries)
    # the 1,046,940-byte line gives small entries only
    assert max(len(e["text"]) for e in entries) < 60_000


def test_thinking_and_ansi_stripped():
    entries, _, _ = _read(IMAGE)
    th = [e for e in entries if e["kind"] == "thinking"]
    assert len(th) == 9 and all(e["role"] == "assistant" and e["text"] for e in th)
    assert not any("\x1b[" in e["text"] for e in entries)


def test_subagent_is_its_own_session_linked_to_parent():
    entries, _, _ = _read(SUBAGENT)
    assert {e["session_id"] for e in entries} == {"agent-a4ca7529859c158c2"}
    assert {e["parent_session_id"] for e in entries} == {"ef958aa1-0e93-49f0-bb71-150f63befcd1"}
    assert all(e["is_sidechain"] for e in entries)
    flat, _, _ = _read(FLAT_AGENT)
    # v2.0 flat layout; its parent session file is missing from the corpus (orphan)
    assert {(e["session_id"], e["parent_session_id"]) for e in flat} == {
        ("agent-9fa17969", "741790a4-4fe2-4644-9a51-fb4482074060")
    }


def test_inline_sidechains_are_sessions_grouped_by_chain_root():
    entries, _, _ = _read(SIDECHAINS)
    side = [e for e in entries if e["is_sidechain"]]
    main = [e for e in entries if not e["is_sidechain"]]
    sid = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
    assert {e["session_id"] for e in main} == {sid}
    sessions = {}
    for e in side:
        sessions[e["session_id"]] = sessions.get(e["session_id"], 0) + 1
    assert sessions == {
        f"{sid}/sidechain-0d692b0f": 65,
        f"{sid}/sidechain-60dade70": 86,
        f"{sid}/sidechain-6690d10e": 21,
        f"{sid}/sidechain-f4546a51": 98,
        f"{sid}/sidechain-f4ab2bf6": 135,
    }
    assert {e["parent_session_id"] for e in side} == {sid}


def test_project_is_cwd_not_folder_name():
    entries, _, _ = _read(WORKTREES)
    # the session moved into a worktree of its own for a few records; the first
    # record (permission-mode) is written before any cwd
    assert {e["project_dir"] for e in entries} == {
        "-experiments/worktrees",
        "-experiments/worktrees/.claude/worktrees/agent-ab1e6e14",
        None,
    }
    assert entries[0]["project_dir"] is None and entries[1]["project_dir"] == "-experiments/worktrees"
    music, _, _ = _read(MUSIC)
    # the first line is a summary written before any cwd: no project yet
    assert [e["project_dir"] for e in music[:2]] == [None, "/Users/chip/dev/ai-music"]


def test_compaction_and_unknown_types():
    entries, _, _ = _read(SYNTHETIC)
    compact = [e for e in entries if e["kind"] == "summary" and e["role"] == "user"]
    assert len(compact) == 1  # the isCompactSummary user message
    boundaries = [e for e in entries if e.get("tool_name") == "compact_boundary"]
    assert len(boundaries) == 2 and all(e["kind"] == "meta" for e in boundaries)
    metas = {e.get("tool_name") for e in entries if e["kind"] == "meta"}
    # record types without a dedicated mapping become meta entries, never errors
    assert {
        "queue-operation",
        "agent-name",
        "custom-title",
        "ai-title",
        "pr-link",
        "worktree-state",
        "bridge-session",
        "atis-latch",
        "frame-link",
        "relocated",
        "api_error",
        "api_refusal",
        "model_refusal_fallback",
    } <= metas


def test_tool_use_result_not_stored_twice():
    entries, _, _ = _read(MUSIC)
    results = [e for e in entries if e["kind"] == "tool_result"]
    # one entry per tool_result block; toolUseResult repeats it and gives none
    assert len(results) == 58
    assert len({e["native_id"] for e in results}) == 58


def test_store_sessions(corpus_store):
    home, _ = corpus_store
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    n = conn.execute("SELECT count(DISTINCT session_id) FROM entries WHERE agent='claude-code'").fetchone()[0]
    linked = conn.execute(
        "SELECT count(DISTINCT session_id) FROM entries WHERE agent='claude-code' "
        "AND parent_session_id IS NOT NULL"
    ).fetchone()[0]
    conn.close()
    # 8 main sessions (incl. 3 of the synthetic fixture) + 5 inline sidechains +
    # 1 synthetic sidechain + 2 sub-agent transcripts
    assert (n, linked) == (17, 8)


def test_store_keeps_identical_idless_lines_once(corpus_store):
    """ef958aa1… has 180 lines; 7 ``permission-mode`` and 5 ``last-prompt`` lines
    repeat an earlier line byte for byte and carry no uuid: the store keeps each such
    record once (168 entries), the source still maps every line."""
    home, _ = corpus_store
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    n = conn.execute(
        "SELECT count(*) FROM entries WHERE source_path = ?", (str(corpus(WORKTREES)),)
    ).fetchone()[0]
    conn.close()
    assert n == 168


def test_no_base64_from_attachments_or_unknown_blocks():
    """Handmade records (CC 2.x attachment shape, and a block type CC does not write
    yet): inline media becomes a placeholder before the record is kept as JSON text."""
    b64 = "iVBORw0KGgo" + "A" * 4000
    att = {
        "type": "attachment",
        "uuid": "00000000-0000-4000-8000-000000000001",
        "sessionId": "s1",
        "attachment": {
            "type": "file",
            "filename": "a.png",
            "content": {"type": "image", "file": {"base64": b64, "type": "image/png"}},
        },
    }
    blk = {
        "type": "user",
        "uuid": "00000000-0000-4000-8000-000000000002",
        "sessionId": "s1",
        "message": {
            "role": "user",
            "content": [{"type": "input_audio", "source": {"data": "QUJD" * 200, "media_type": "audio/wav"}}],
        },
    }
    (a,) = claude_code.parse_record(att, 0, "h", {}, "p")
    (b,) = claude_code.parse_record(blk, 0, "h", {}, "p")
    assert "AAAA" not in a["text"] and '"base64":"[media unknown, 3,008 bytes]"' in a["text"]
    assert (b["kind"], b["tool_name"]) == ("meta", "input_audio")
    assert '"data":"[media audio/wav, 600 bytes]"' in b["text"]


def test_usage_without_request_id_is_counted_once_per_message_id(tmp_path):
    """A response split over two lines that carry no requestId repeats its usage on
    both: one usage row (keyed by message.id), not two."""
    import json

    from conftest import ingest, q

    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-dedup"
    proj.mkdir(parents=True)
    usage = {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 300}
    sid = "5e551011-0000-4000-8000-0000000000cc"
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": sid, "timestamp": "2026-01-01T10:00:00Z",
         "message": {"role": "user", "content": "hello"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": sid, "timestamp": "2026-01-01T10:00:01Z",
         "message": {"id": "msg_01ABC", "role": "assistant", "model": "claude-sonnet-4-20250514",
                     "content": [{"type": "text", "text": "part one"}], "usage": usage}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "a1", "sessionId": sid, "timestamp": "2026-01-01T10:00:02Z",
         "message": {"id": "msg_01ABC", "role": "assistant", "model": "claude-sonnet-4-20250514",
                     "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
                     "usage": usage}},
        {"type": "assistant", "uuid": "a3", "parentUuid": "a2", "sessionId": sid, "timestamp": "2026-01-01T10:00:05Z",
         "message": {"id": "msg_02DEF", "role": "assistant", "model": "claude-sonnet-4-20250514",
                     "content": [{"type": "text", "text": "done"}], "usage": usage}},
    ]  # fmt: skip
    (proj / f"{sid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ingest(home, tmp_path / "store", "claude-code")
    rows = q(tmp_path / "store", "SELECT usage_key, output_tokens FROM usage ORDER BY usage_key")
    assert rows == [("msg_01ABC:", 20), ("msg_02DEF:", 20)]


def _no_request_id_home(tmp_path):
    import json

    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-dedup"
    proj.mkdir(parents=True)
    usage = {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 300}
    sid = "5e551011-0000-4000-8000-0000000000dd"
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": sid, "timestamp": "2026-01-01T10:00:00Z",
         "message": {"role": "user", "content": "hello"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": sid, "timestamp": "2026-01-01T10:00:01Z",
         "message": {"id": "msg_01ABC", "role": "assistant", "model": "claude-sonnet-4-20250514",
                     "content": [{"type": "text", "text": "part one"}], "usage": usage}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "a1", "sessionId": sid, "timestamp": "2026-01-01T10:00:02Z",
         "message": {"id": "msg_01ABC", "role": "assistant", "model": "claude-sonnet-4-20250514",
                     "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
                     "usage": usage}},
        {"type": "assistant", "uuid": "a3", "parentUuid": "a2", "sessionId": sid, "timestamp": "2026-01-01T10:00:03Z",
         "message": {"id": "msg_01ABC", "role": "assistant", "model": "claude-sonnet-4-20250514",
                     "content": [{"type": "text", "text": "part three"}], "usage": usage}},
    ]  # fmt: skip
    f = proj / f"{sid}.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return home, f


def _as_parser_v3_stored_it(store):
    """Make the store what parser v3 (schema v13) stored for these lines: one usage row
    per line, keyed ``line:<record id>``, each entry naming its line's key."""
    import sqlite3

    c = sqlite3.connect(store / "store.db")
    with c:
        firsts = c.execute(
            "SELECT entry_id, usage_key FROM entry_rows WHERE usage_key LIKE 'msg_%:' ORDER BY source_offset"
        ).fetchall()
        assert len(firsts) == 3
        cols = [r[1] for r in c.execute("PRAGMA table_info(usage)") if r[1] not in ("usage_key", "entry_id")]
        for eid, key in firsts:
            c.execute(
                f"INSERT INTO usage(usage_key, entry_id, {', '.join(cols)}) "
                f"SELECT 'line:' || ?, ?, {', '.join(cols)} FROM usage WHERE usage_key = ?",
                (eid, eid, key),
            )
            c.execute("UPDATE entry_rows SET usage_key = 'line:' || entry_id WHERE entry_id = ?", (eid,))
        c.execute("DELETE FROM usage WHERE usage_key LIKE 'msg_%:'")
        c.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")
        c.execute("UPDATE watermarks SET parser_version = 3 WHERE agent = 'claude-code'")
    c.close()


def test_parser_v4_and_migration_14_count_a_requestless_response_once_in_an_old_store(tmp_path):
    """A store parser v3 made (one usage row per line of a response without requestId:
    3x its tokens): opening it migrates the keys (v14), the ingest re-reads the file
    (parser v4) and adds no usage row: the totals are those of a fresh v4 store."""
    from conftest import ingest, q
    from ctxkeep.sinks import sqlite as sqlite_store

    home, _f = _no_request_id_home(tmp_path)
    fresh = tmp_path / "fresh"
    ingest(home, fresh, "claude-code")
    want = q(fresh, "SELECT usage_key, output_tokens FROM usage ORDER BY 1")
    assert want == [("msg_01ABC:", 20)]
    store = tmp_path / "store"
    ingest(home, store, "claude-code")
    _as_parser_v3_stored_it(store)
    assert q(store, "SELECT sum(output_tokens) FROM usage") == [(60,)]  # counted per line
    sqlite_store.connect(store).close()  # the upgrade
    assert q(store, "SELECT usage_key, output_tokens FROM usage ORDER BY 1") == want
    s = ingest(home, store, "claude-code")
    assert s.files_read == 1 and s.entries_new == 0  # the parser bump re-reads the file
    assert q(store, "SELECT usage_key, output_tokens FROM usage ORDER BY 1") == want
    sql = "SELECT entry_id, usage_key FROM entries ORDER BY 1"
    assert q(store, sql) == q(fresh, sql)


def test_parser_v4_makes_ingest_say_a_reparse_is_due_for_claude_code_files_gone(tmp_path):
    from conftest import ingest, q
    from ctxkeep.maintenance.reparse import reparse

    home, f = _no_request_id_home(tmp_path)
    store = tmp_path / "store"
    ingest(home, store, "claude-code")
    _as_parser_v3_stored_it(store)
    f.unlink()
    s = ingest(home, store, "claude-code")
    assert any("run `ctxkeep reparse --agent claude-code`" in p for p in s.problems), s.problems
    assert q(store, "SELECT usage_key, output_tokens FROM usage ORDER BY 1") == [("msg_01ABC:", 20)]
    r = reparse(store, agents=["claude-code"])
    assert r["files"] == 1
    assert q(store, "SELECT usage_key, output_tokens FROM usage ORDER BY 1") == [("msg_01ABC:", 20)]
    assert q(store, "SELECT DISTINCT parser_version FROM watermarks") == [(4,)]

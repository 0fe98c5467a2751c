"""Aider source: the real v0.86.1 history in the corpus, usage lines, the held-back
last block, and the bounded home scan."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from conftest import CORPUS_HOME, corpus, ingest, q
from ctxkeep.sources import _homescan, aider
from ctxkeep.sources.contract import DiscoveryContext
from helpers_sources import kinds

CHAT = "code/zen-mcp-server/.aider.chat.history.md"
INPUT = "code/zen-mcp-server/.aider.input.history"


def test_corpus_history_entries(tmp_path):
    raw = corpus(CHAT).read_text()
    store = tmp_path / "store"
    s = ingest(CORPUS_HOME, store, agents=["aider"])
    assert s.files_read == 2 and s.quarantined == 0
    # 4 "# aider chat started" headers; 25 "#### " lines in 8 contiguous user blocks;
    # 12 blocks of "> " lines; no assistant reply (the file has none); 8 inputs in
    # .aider.input.history
    assert raw.count("# aider chat started at") == 4
    assert kinds(store, "aider") == {
        "system/meta": 4,
        "user/message": 8,
        "tool/tool_result": 12,
        "user/meta": 8,
    }
    sessions = q(
        store,
        "SELECT session_id, min(ts), count(*) FROM entries WHERE agent='aider' "
        "AND tool_name IS NOT 'input_history' GROUP BY 1 ORDER BY 2",
    )
    assert len(sessions) == 4
    # local time of the header (this machine's zone) converted to UTC
    import datetime as dt

    want = dt.datetime(2025, 10, 20, 21, 49, 17).astimezone().astimezone(dt.UTC)
    assert sessions[0][1] == want.strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    assert {r[0] for r in q(store, "SELECT DISTINCT project_dir FROM entries WHERE agent='aider'")} == {
        str(corpus(CHAT).parent)
    }
    # CJK prompts kept intact (5 "#### /copy-context 请你分析…" lines in 5 user blocks)
    assert raw.count("#### /copy-context 请你分析一下我这列的处理，我想知道我") == 5
    assert q(
        store,
        "SELECT count(*) FROM entries e JOIN contents c USING(content_hash) JOIN chunks "
        "USING(content_id) WHERE agent='aider' AND kind='message' AND text LIKE ?",
        "%/copy-context 请你分析一下我这列的处理，我想知道我%",
    ) == [(5,)]
    # user inputs are timed by .aider.input.history (to the microsecond), the blocks
    # after them share that time
    cjk = q(
        store,
        "SELECT e.ts FROM entries e JOIN contents c USING(content_hash) JOIN chunks "
        "USING(content_id) WHERE agent='aider' AND kind='message' AND text = ?",
        "/copy-context 请你分析一下我这列的处理，我想知道我",
    )
    want = dt.datetime(2025, 10, 23, 17, 8, 6, 177072).astimezone().astimezone(dt.UTC)
    assert cjk == [(want.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),)]
    # input history: exact timestamps, "+" prefixes removed
    first = q(store, "SELECT ts FROM entries WHERE tool_name='input_history' ORDER BY source_offset LIMIT 1")
    assert first[0][0].startswith("2025-10-2")
    # the model comes from the session's "> Main model:" line
    assert q(store, "SELECT DISTINCT model FROM entries WHERE agent='aider' AND model IS NOT NULL") == [
        ("gemini/gemini-2.5-pro-preview-06-05",)
    ]


def _write_old(p: Path, text: str) -> None:
    p.write_text(text)
    old = time.time() - 3600
    os.utime(p, (old, old))


def test_tokens_lines_are_usage_and_last_block_waits_for_idle(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "120")  # the rule under test (conftest sets 0)
    proj = tmp_path / "home" / "work" / "app"
    proj.mkdir(parents=True)
    hist = proj / ".aider.chat.history.md"
    text = (
        "\n# aider chat started at 2025-05-01 10:00:00\n\n"
        "> Main model: anthropic/claude-sonnet-4-20250514 with diff edit format  \n\n"
        "#### fix the typo in README  \n\n"
        "I fixed the typo.\n\nREADME.md\n```\n-teh\n+the\n```\n\n"
        "> Tokens: 2.3k sent, 1.1k cache write, 12k cache hit, 345 received. Cost: $0.01 message, $0.01 session.  \n\n"
        "#### thanks  \n\n"
    )
    _write_old(hist, text)
    store = tmp_path / "store"
    ingest(tmp_path / "home", store, agents=["aider"])
    assert kinds(store, "aider") == {
        "system/meta": 2,
        "user/message": 2,
        "assistant/message": 1,
        "tool/tool_result": 1,
    }
    assert q(
        store,
        "SELECT model, input_tokens, cache_creation_tokens, cache_read_tokens, output_tokens FROM usage",
    ) == [("anthropic/claude-sonnet-4-20250514", 2300, 1100, 12000, 345)]
    # the agent is still writing: the new last block is held back until idle
    with open(hist, "a") as f:
        f.write("You're welcome")
    s2 = ingest(tmp_path / "home", store, agents=["aider"])
    assert s2.entries_new == 0
    with open(hist, "a") as f:
        f.write("!\n")
    old = time.time() - 3600
    os.utime(hist, (old, old))
    s3 = ingest(tmp_path / "home", store, agents=["aider"])
    assert s3.entries_new == 1
    assert q(
        store,
        "SELECT count(*) FROM entries e JOIN contents c USING(content_hash) JOIN chunks "
        "USING(content_id) WHERE text = 'You''re welcome!'",
    ) == [(1,)]


def test_home_scan_skips_heavy_dirs_and_is_bounded(tmp_path):
    home = tmp_path / "home"
    for d in (
        "code/a",
        "code/a/node_modules/pkg",
        "code/b/.venv",
        "code/c/venv",
        ".cache/x",
        "code/d/.git",
        "code/e",
        "Library/Caches/f",
    ):
        (home / d).mkdir(parents=True)
    for d in (
        "code/a",
        "code/a/node_modules/pkg",
        "code/c/venv",
        ".cache/x",
        "code/d/.git",
        "Library/Caches/f",
    ):
        (home / d / ".aider.chat.history.md").write_text("#### hi\n")
    (home / "code/e/pyvenv.cfg").write_text("home = /usr\n")
    (home / "code/e/.aider.chat.history.md").write_text("#### venv\n")
    res = _homescan.scan_home(home, use_cache=False)
    assert res.aider == [home / "code/a/.aider.chat.history.md"]
    d = aider.discover(DiscoveryContext(home=home, env={}, extra_dirs=[home / "code/c/venv"]))
    assert sorted(f.path for f in d.files) == [
        home / "code/a/.aider.chat.history.md",
        home / "code/c/venv/.aider.chat.history.md",
    ]


def test_discovery_on_the_corpus_home_enters_no_hidden_dir(corpus_ctx):
    res = _homescan.scan_home(corpus_ctx.home, use_cache=False)
    # 6 of the corpus home's 55 directories: .claude, .codex, .gemini, … are not entered
    assert res.dirs == 6 and res.truncated is None
    assert res.aider == [corpus(CHAT).parent / ".aider.chat.history.md", corpus(INPUT)]


def test_home_scan_stops_at_its_bounds(tmp_path, monkeypatch):
    home = tmp_path / "home"
    for i in range(60):
        (home / f"p{i:02d}" / "src").mkdir(parents=True)
    (home / "p59" / ".aider.chat.history.md").write_text("#### late\n")
    monkeypatch.setattr(_homescan, "MAX_DIRS", 40)
    res = _homescan.scan_home(home, use_cache=False)
    assert res.truncated == "stopped after 40 directories" and res.aider == []
    d = aider.discover(DiscoveryContext(home=home, env={}))
    assert d.files == [] and "stopped after 40 directories" in d.reason
    # a configured root is read whatever the scan's bounds
    d2 = aider.discover(DiscoveryContext(home=home, env={}, extra_dirs=[home / "p59"]))
    assert [f.path.name for f in d2.files] == [".aider.chat.history.md"]


def _history(prompt: str, files: int) -> str:
    """Two Aider sessions (the corpus file's layout): the first started at 10:00:00."""
    return (
        "\n# aider chat started at 2025-05-01 10:00:00\n\n"
        "> /usr/bin/aider --model gpt-5  \n"
        "> Aider v0.86.1  \n"
        f"> Git repo: .git with {files} files  \n\n"
        f"#### {prompt}  \n\n"
        "Done.\n\n"
        "> Tokens: 2.3k sent, 345 received. Cost: $0.01 message, $0.01 session.  \n\n"
        "# aider chat started at 2025-05-02 09:00:00\n\n"
        "> Aider v0.86.1  \n\n"
        "#### and now the tests  \n\n"
        "Tests added.\n\n"
    )


def test_a_moved_project_folder_keeps_its_aider_sessions(tmp_path):
    """newuser15 F10: the session ids hashed the history's path, so a renamed or moved
    project folder (or home) stored every Aider session again. Ids now come from the
    content: after the move nothing is new, no session or usage row doubles."""
    home = tmp_path / "home"
    proj = home / "code" / "app"
    proj.mkdir(parents=True)
    _write_old(proj / ".aider.chat.history.md", _history("fix the typo", 12))
    _write_old(proj / ".aider.input.history", "\n# 2025-05-01 10:00:05.123456\n+fix the typo\n")
    store = tmp_path / "store"
    first = ingest(home, store, agents=["aider"])
    assert first.entries_new == 10  # 2 headers, 2 tool blocks, 1 usage line, 2 prompts, 2 replies, 1 input
    before = q(store, "SELECT session_id, count(*) FROM entries WHERE agent='aider' GROUP BY 1 ORDER BY 1")
    assert len(before) == 3  # two chat sessions and the input history
    assert q(store, "SELECT count(*), sum(input_tokens) FROM usage WHERE agent='aider'") == [(1, 2300)]
    os.rename(proj, proj.parent / "app2")  # a renamed project folder
    _homescan._cache.clear()  # the home scan's in-process cache (a new run would scan again)
    again = ingest(home, store, agents=["aider"])
    assert again.files_read == 2 and again.entries_new == 0
    os.rename(home, tmp_path / "home2")  # a moved home (a new user name, a new disk)
    _homescan._cache.clear()
    again = ingest(tmp_path / "home2", store, agents=["aider"])
    assert again.files_read == 2 and again.entries_new == 0
    assert (
        q(store, "SELECT session_id, count(*) FROM entries WHERE agent='aider' GROUP BY 1 ORDER BY 1")
        == before
    )
    assert q(store, "SELECT count(*), sum(input_tokens) FROM usage WHERE agent='aider'") == [(1, 2300)]


def test_another_project_started_in_the_same_second_stays_apart(tmp_path):
    """Two projects whose first Aider session started at the same second (same header
    line) are two sessions with all their entries: the first session is named through
    its first prompt, the later ones through everything before them."""
    home = tmp_path / "home"
    for name, prompt, files in (("a", "fix the typo", 12), ("b", "write the docs", 40)):
        (home / name).mkdir(parents=True)
        _write_old(home / name / ".aider.chat.history.md", _history(prompt, files))
    store = tmp_path / "store"
    s = ingest(home, store, agents=["aider"])
    assert s.entries_new == 18
    by = q(
        store,
        "SELECT project_dir, count(DISTINCT session_id), count(*) FROM entries WHERE agent='aider' GROUP BY 1 ORDER BY 1",
    )
    assert by == [(str(home / "a"), 2, 9), (str(home / "b"), 2, 9)]
    assert q(store, "SELECT count(DISTINCT session_id) FROM entries WHERE agent='aider'") == [(4,)]
    assert q(store, "SELECT count(*) FROM usage WHERE agent='aider'") == [(2,)]


def test_a_first_session_waits_for_its_first_prompt(tmp_path):
    """Until its first prompt (or a later session) the first session's bytes could be
    another project's: nothing of it is stored; then it is, under an id that does not
    change as the history grows."""
    home = tmp_path / "home"
    (home / "p").mkdir(parents=True)
    hist = home / "p" / ".aider.chat.history.md"
    _write_old(hist, "\n# aider chat started at 2025-05-01 10:00:00\n\n> Aider v0.86.1  \n")
    store = tmp_path / "store"
    assert ingest(home, store, agents=["aider"]).entries_new == 0
    _write_old(hist, hist.read_text() + "\n#### hello  \n\nHi.\n\n")
    assert ingest(home, store, agents=["aider"]).entries_new == 4
    sid = q(store, "SELECT DISTINCT session_id FROM entries WHERE agent='aider'")
    _write_old(hist, hist.read_text() + "#### more  \n\nSure.\n\n")
    assert ingest(home, store, agents=["aider"]).entries_new == 2
    assert q(store, "SELECT DISTINCT session_id FROM entries WHERE agent='aider'") == sid


def test_a_file_read_before_v3_keeps_its_path_ids(tmp_path, monkeypatch):
    """A store that read an Aider file under parser v2 holds its entries under path ids:
    the re-read the v3 bump starts, and later appends, keep those ids (content ids would
    store every entry and usage row a second time)."""
    home = tmp_path / "home"
    proj = home / "code" / "app"
    proj.mkdir(parents=True)
    hist = proj / ".aider.chat.history.md"
    _write_old(hist, _history("fix the typo", 12))
    store = tmp_path / "store"
    with monkeypatch.context() as m:  # the store as parser v2 left it
        m.setattr(aider, "PARSER_VERSION", 2)
        m.setattr(aider, "_legacy", lambda wm: True)
        assert ingest(home, store, agents=["aider"]).entries_new == 9
    fid = hashlib.sha256(str(hist).encode()).hexdigest()[:8]
    v2 = q(store, "SELECT DISTINCT session_id FROM entries WHERE agent='aider' ORDER BY 1")
    assert v2 == [(f"aider-{fid}-1",), (f"aider-{fid}-233",)]
    _homescan._cache.clear()
    s = ingest(home, store, agents=["aider"])  # v3: re-read (new parser version)
    assert s.files_read == 1 and s.entries_new == 0
    _write_old(hist, hist.read_text() + "#### one more  \n\nOk.\n\n")
    assert ingest(home, store, agents=["aider"]).entries_new == 2
    assert q(store, "SELECT DISTINCT session_id FROM entries WHERE agent='aider' ORDER BY 1") == v2
    assert q(store, "SELECT count(*) FROM usage WHERE agent='aider'") == [(1,)]
    assert q(store, "SELECT parser_version FROM watermarks WHERE agent='aider'") == [(3,)]

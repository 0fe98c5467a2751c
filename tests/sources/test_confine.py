"""Confinement (issue 24, item 3): discovery reads nothing from outside an agent's own
folder. A symlinked ``~/.ssh`` key, an ``/etc``-style file, a symlinked project dir, a
symlink loop, a FIFO and a hard link to a file outside are refused, counted per reason
in ``ctxkeep sources``, and none of their bytes reach any file of the store; the
agent's real session is ingested as before."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources import discover_all
from ctxkeep.sources.contract import (
    REASON_HARDLINK,
    REASON_LOOP,
    REASON_OUTSIDE,
    REASON_SPECIAL,
    Discovery,
    DiscoveryContext,
)

SID = "11111111-2222-3333-4444-555555555555"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
ETC_LINE = "confinedroot:x:0:0:confinedroot:/root:/bin/bash"
OUTSIDE_MARK = "outsideprojectmarker"
HARDLINK_MARK = "hardlinkedmarker"


def _line(sid: str, uuid: str, text: str) -> str:
    rec = {
        "type": "user",
        "sessionId": sid,
        "uuid": uuid,
        "timestamp": "2026-01-01T00:00:00Z",
        "cwd": "/proj",
        "message": {"role": "user", "content": text},
    }
    return json.dumps(rec) + "\n"


def _hostile_home(tmp_path: Path) -> Path:
    """A home whose Claude Code projects dir holds one real session and every hostile
    kind of entry this module is about."""
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-proj"
    proj.mkdir(parents=True)
    (proj / f"{SID}.jsonl").write_text(_line(SID, "u1", "hello confinement"))
    # a private key: its lines are not JSON, so before confinement they went to the quarantine
    ssh = home / ".ssh"
    ssh.mkdir()
    key = ssh / "id_ed25519"
    key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n")
    (proj / "key.jsonl").symlink_to(key)
    # an /etc/shadow-style file outside the home
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "shadow").write_text(ETC_LINE + "\n")
    (proj / "shadow.jsonl").symlink_to(etc / "shadow")
    # a project dir that is a symlink to a folder outside (its session would parse)
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "22222222-2222-3333-4444-555555555555.jsonl").write_text(
        _line("22222222-2222-3333-4444-555555555555", "u2", OUTSIDE_MARK)
    )
    (home / ".claude" / "projects" / "-linked").symlink_to(out)
    # two session files that are symlinks to each other
    (proj / "loop-a.jsonl").symlink_to(proj / "loop-b.jsonl")
    (proj / "loop-b.jsonl").symlink_to(proj / "loop-a.jsonl")
    # a FIFO (a reader would block on it for ever)
    os.mkfifo(proj / "fifo.jsonl")
    # a hard link to a file outside the agent's folder (a session line that would parse)
    outside = tmp_path / "outside.jsonl"
    outside.write_text(_line("33333333-2222-3333-4444-555555555555", "u3", HARDLINK_MARK))
    os.link(outside, proj / "33333333-2222-3333-4444-555555555555.jsonl")
    # a symlink inside the folder to a file inside it is fine (the same file: read once)
    (proj / "alias.jsonl").symlink_to(proj / f"{SID}.jsonl")
    return home


def _store_bytes(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file() and not p.is_symlink())


@pytest.fixture
def no_hang():
    """Fail instead of hanging when a FIFO is opened (the test's own guard)."""
    signal.signal(signal.SIGALRM, lambda *a: pytest.fail("hung (a FIFO was opened?)"))
    signal.alarm(120)
    yield
    signal.alarm(0)


def test_discovery_refuses_what_is_outside_and_counts_it(tmp_path):
    home = _hostile_home(tmp_path)
    (d,) = discover_all(DiscoveryContext(home=home, env={}), agents=["claude-code"])
    assert [f.path.name for f in d.files] == [f"{SID}.jsonl"]
    assert d.skipped == {REASON_OUTSIDE: 3, REASON_LOOP: 2, REASON_SPECIAL: 1, REASON_HARDLINK: 1}
    why = {Path(p).name: r for p, r in d.skipped_examples}
    assert why["key.jsonl"] == why["shadow.jsonl"] == REASON_OUTSIDE
    assert why["22222222-2222-3333-4444-555555555555.jsonl"] == REASON_OUTSIDE
    assert why["fifo.jsonl"] == REASON_SPECIAL
    assert why["33333333-2222-3333-4444-555555555555.jsonl"] == REASON_HARDLINK


@pytest.mark.usefixtures("no_hang")
def test_ingest_stores_nothing_from_outside(tmp_path):
    home = _hostile_home(tmp_path)
    store = tmp_path / "store"
    s = run_ingest(store, ctx=DiscoveryContext(home=home, env={}))
    assert s.entries_new == 1
    data = _store_bytes(store)
    for mark in (KEY_BODY, "OPENSSH PRIVATE", ETC_LINE, OUTSIDE_MARK, HARDLINK_MARK):
        assert mark.encode() not in data, mark
    import sqlite3

    conn = sqlite3.connect(store / "store.db")
    assert conn.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 0
    assert [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM entries")] == [SID]
    conn.close()


def test_hard_links_inside_the_folder_are_kept_once(tmp_path):
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-proj"
    proj.mkdir(parents=True)
    (proj / f"{SID}.jsonl").write_text(_line(SID, "u1", "x"))
    os.link(proj / f"{SID}.jsonl", proj / "other.jsonl")  # both names inside: proven
    (d,) = discover_all(DiscoveryContext(home=home, env={}), agents=["claude-code"])
    assert len(d.files) == 1 and not d.skipped


def test_agent_folder_that_is_a_symlink_is_its_target(tmp_path):
    """``~/.claude`` kept in a dotfiles repository (a symlinked agent folder) still works."""
    home = tmp_path / "home"
    home.mkdir()
    dots = tmp_path / "dotfiles" / "claude"
    (dots / "projects" / "-proj").mkdir(parents=True)
    (dots / "projects" / "-proj" / f"{SID}.jsonl").write_text(_line(SID, "u1", "x"))
    (home / ".claude").symlink_to(dots)
    (d,) = discover_all(DiscoveryContext(home=home, env={}), agents=["claude-code"])
    assert len(d.files) == 1 and not d.skipped


def test_home_scan_files_are_confined_to_their_own_folder(tmp_path):
    """Aider's history found by the home scan: a symlink to the user's key elsewhere in
    the home is refused (the home is no agent's folder)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(KEY_BODY + "\n")
    (home / "code" / "p").mkdir(parents=True)
    (home / "code" / "p" / ".aider.chat.history.md").symlink_to(home / ".ssh" / "id_ed25519")
    (d,) = discover_all(DiscoveryContext(home=home, env={}), agents=["aider"])
    assert d.files == [] and d.skipped == {REASON_OUTSIDE: 1}


def test_sources_reports_the_skipped(tmp_path):
    from ctxkeep.service.sources import SourcesRequest, sources

    home = _hostile_home(tmp_path)
    rows = [
        r.model_dump()
        for r in sources(tmp_path / "store", SourcesRequest.parse(), env={"HOME": str(home)}).rows
    ]
    (row,) = [r for r in rows if r["agent"] == "claude-code"]
    assert row["files"] == 1
    assert row["skipped"] == {REASON_OUTSIDE: 3, REASON_LOOP: 2, REASON_SPECIAL: 1, REASON_HARDLINK: 1}
    assert "skipped 7 paths: " in row["reason"] and "symlink loop (2)" in row["reason"]


def test_add_records_a_loop_and_a_fifo(tmp_path):
    a, b, fifo = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "f.jsonl"
    a.symlink_to(b)
    b.symlink_to(a)
    os.mkfifo(fifo)
    d = Discovery("claude-code")
    d.add_glob(tmp_path, ["*.jsonl"], "append")
    assert d.files == [] and d.skipped == {REASON_LOOP: 2, REASON_SPECIAL: 1}


@pytest.mark.usefixtures("no_hang")
def test_reader_never_opens_a_fifo(tmp_path):
    """A FIFO swapped in after discovery: the reader yields nothing (no blocking open)."""
    from ctxkeep.sources.readers.jsonl import open_file

    os.mkfifo(tmp_path / "f.jsonl")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "f.jsonl").st_mode)
    assert open_file(tmp_path / "f.jsonl") is None


def test_directory_links_and_loops_in_a_recursive_search_are_counted(tmp_path):
    """Codex's ``sessions/**/rollout-*.jsonl``: ``Path.glob`` follows no directory
    symlink, so a day folder linked to a folder outside and a link back up the tree
    (a loop) were passed over silently; each is now counted in ``skipped`` (the
    files behind them are still not read). A link to a folder inside is not counted
    (its rollouts are found at their own path), nor is an ordinary rollout."""
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2025" / "01" / "01"
    day.mkdir(parents=True)
    sid = "019a0000-0000-7000-8000-000000000001"
    rec = {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": sid}}
    (day / f"rollout-2025-01-01T00-00-00-{sid}.jsonl").write_text(json.dumps(rec) + "\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / f"rollout-2025-01-02T00-00-00-{sid}.jsonl").write_text(json.dumps(rec) + "\n")
    (day.parent / "02").symlink_to(outside)  # a day folder linked out
    (day / "back").symlink_to(home / ".codex" / "sessions")  # a loop up the tree
    (day.parent / "03").symlink_to(day)  # inside: not counted
    (day / "self").symlink_to(day / "self")  # a link to itself: ELOOP
    (d,) = discover_all(DiscoveryContext(home=home, env={}), agents=["codex"])
    assert [p.path.name for p in d.files] == [f"rollout-2025-01-01T00-00-00-{sid}.jsonl"]
    assert d.skipped == {REASON_OUTSIDE: 1, REASON_LOOP: 2}
    assert sorted(Path(p).name for p, _ in d.skipped_examples) == ["02", "back", "self"]


def test_sources_counts_every_refused_directory_link(tmp_path):
    """A project folder linked to a folder outside that holds no session file, and a
    folder linked back up the tree, were not counted by ``ctxkeep sources`` (only files
    refused were): each refused directory link now counts once; a link whose files
    were refused is still counted by its files, not twice; a link to a folder inside
    is not refused."""
    from ctxkeep.service.sources import SourcesRequest, sources

    home = _hostile_home(tmp_path)  # its "-linked" folder leads out to a session: counted by it
    projects = home / ".claude" / "projects"
    empty = tmp_path / "notes"
    empty.mkdir()
    (empty / "todo.txt").write_text("not a session\n")
    (projects / "-empty-link").symlink_to(empty)  # out, and nothing to find behind it
    (projects / "-proj" / "up").symlink_to(projects)  # a loop up the tree
    (projects / "-clean").mkdir()
    (projects / "-alias").symlink_to(projects / "-clean")  # inside: fine
    (row,) = [
        r
        for r in sources(tmp_path / "store", SourcesRequest.parse(), env={"HOME": str(home)}).rows
        if r.agent == "claude-code"
    ]
    assert row.skipped == {REASON_OUTSIDE: 4, REASON_LOOP: 3, REASON_SPECIAL: 1, REASON_HARDLINK: 1}
    why = {Path(x["path"]).name: x["reason"] for x in row.skipped_examples}
    assert why["-empty-link"] == REASON_OUTSIDE and why["up"] == REASON_LOOP
    assert "-linked" not in why and "-alias" not in why
    assert "skipped 9 paths: " in row.reason


def test_walk_links_finds_the_links_os_walk_and_islink_find(tmp_path):
    """``contract.walk_links`` (one ``scandir`` per folder, no ``lstat`` per entry) lists
    the same symlinks in the same order, sorted into dirs and others as ``os.walk``
    sorts them, and descends into no linked folder: links to a folder inside and
    outside, to a file, a broken one, a loop, nested folders."""
    from ctxkeep.sources.contract import walk_links

    root = tmp_path / "sessions"
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "rollout-x.jsonl").write_text("{}\n")
    for d in ("2025/01/02", "2025/01/03", "2026/b", "a"):
        (root / d).mkdir(parents=True)
        (root / d / "rollout-1.jsonl").write_text("{}\n")
    os.symlink(outside, root / "2025" / "out")
    os.symlink(root / "2025" / "01", root / "2026" / "in")
    os.symlink(root / "a" / "rollout-1.jsonl", root / "2026" / "b" / "file-link.jsonl")
    os.symlink(tmp_path / "nothing", root / "a" / "broken")
    os.symlink(root / "2025", root / "2025" / "01" / "up")
    loop = root / "a" / "self"
    os.symlink(loop, loop)

    want = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            if os.path.islink(os.path.join(folder, name)):
                want.append((folder, name, name in dirs))
    got = list(walk_links(root))
    assert got == want
    assert len(got) == 6 and sum(is_dir for *_, is_dir in got) == 3
    assert list(walk_links(tmp_path / "missing")) == []

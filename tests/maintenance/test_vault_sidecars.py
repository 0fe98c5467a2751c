"""Sidecars (``sources.readers.sidecar``, newuser20 F13): the files an agent keeps beside
a session (Claude Code's ``subagents/agent-<id>.meta.json``, a workflow run's meta and
journal, ``tool-results/<tool use id>.txt``; Mistral Vibe's ``meta.json``) are vaulted with
the session and come back with it: before, ``vault restore`` of a deleted Claude Code
session gave back its transcripts only.

Fixture: ``tests/fixtures/claude-sidecars/home`` (handmade: one session with a sub-agent,
a workflow run's sub-agent and a persisted tool output) and
``tests/fixtures/mistral-vibe/home``, copied into tmp for every run."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite.lookup import uuid_keyed_files
from ctxkeep.sinks.vault import manifest
from ctxkeep.sinks.vault.forget import forgotten, path_hash
from ctxkeep.sources.contract import DiscoveryContext
from tests.conftest import q

runner = CliRunner()

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SID = "5c1dec42-7a1e-4f00-8b00-00000000c0de"
PROJ = ".claude/projects/-home-dev-shop"
SESSION_DIR = f"{PROJ}/{SID}"
TOOL_RESULT = f"{SESSION_DIR}/tool-results/toolu_01SidecarPersisted0001.txt"
SUB_META = f"{SESSION_DIR}/subagents/agent-a7c1d2e3f4a5b6c7d.meta.json"
WF = f"{SESSION_DIR}/subagents/workflows/wf_3b9d1c20-a41"
#: the session's files under the user's home: 3 transcripts and 4 sidecars
CLAUDE_FILES = sorted(
    [
        f"{PROJ}/{SID}.jsonl",
        f"{SESSION_DIR}/subagents/agent-a7c1d2e3f4a5b6c7d.jsonl",
        SUB_META,
        f"{WF}/agent-a0f1e2d3c4b5a6978.jsonl",
        f"{WF}/agent-a0f1e2d3c4b5a6978.meta.json",
        f"{WF}/journal.jsonl",
        TOOL_RESULT,
    ]
)
SIDECARS = [p for p in CLAUDE_FILES if not p.endswith(".jsonl") or p.endswith("journal.jsonl")]
VIBE_DIR = ".vibe/logs/session/session_20260702_141500_7d1c2a90"
VIBE_SID = "7d1c2a90-3b4e-4f5a-9c8d-112233445566"
#: a fixed mtime (ns) for every fixture file (git keeps none)
MTIME_NS = 1_764_493_290_123_456_789


def _home(tmp_path: Path) -> Path:
    """A user home holding both fixtures, every file's mtime ``MTIME_NS``."""
    user = tmp_path / "user"
    shutil.copytree(FIXTURES / "claude-sidecars" / "home", user)
    shutil.copytree(FIXTURES / "mistral-vibe" / "home" / ".vibe", user / ".vibe")
    for p in user.rglob("*"):
        if p.is_file():
            os.utime(p, ns=(MTIME_NS, MTIME_NS))
    return user


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: relative path → (bytes, mtime_ns)."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _ingest(user: Path, store: Path) -> None:
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}))


def _cli(*args: str):
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


def test_restore_gives_the_deleted_session_back_whole(tmp_path, monkeypatch):
    user = _home(tmp_path)
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    _ingest(user, store)
    want = _tree(user)
    assert sorted(k for k in want if k.startswith(".claude")) == CLAUDE_FILES
    # the vault's status counts the sidecars with their agent's files
    st = json.loads(_cli("vault", "status", "--json", "--home", str(store)).stdout)
    cc = next(a for a in st["agents"] if a["agent"] == "claude-code")
    assert (cc["files"], cc["sessions"]) == (7, 3)
    assert cc["raw_bytes"] == sum(len(want[p][0]) for p in CLAUDE_FILES)
    vibe = next(a for a in st["agents"] if a["agent"] == "mistral-vibe")
    assert (vibe["files"], vibe["sessions"]) == (2, 1)
    # the agent deletes the session: its folder (sub-agents, tool results) and transcript
    shutil.rmtree(user / SESSION_DIR)
    (user / f"{PROJ}/{SID}.jsonl").unlink()
    shutil.rmtree(user / VIBE_DIR)
    # the dry run names every file, with its bytes, and writes nothing
    dry = json.loads(_cli("vault", "restore", SID[:8], "--dry-run", "--json", "--home", str(store)).stdout)
    assert sorted(str(Path(f["to"]).relative_to(user)) for f in dry["files"]) == CLAUDE_FILES
    assert {str(Path(f["to"]).relative_to(user)): f["bytes"] for f in dry["files"]} == {
        p: len(want[p][0]) for p in CLAUDE_FILES
    }
    assert not (user / SESSION_DIR).exists() and not (user / f"{PROJ}/{SID}.jsonl").exists()
    _cli("vault", "restore", SID[:8], "--home", str(store))
    done = json.loads(_cli("vault", "restore", VIBE_SID[:8], "--json", "--home", str(store)).stdout)
    assert sorted(Path(f["to"]).name for f in done["files"]) == ["messages.jsonl", "meta.json"]
    # byte for byte, with their mtimes: the trees are the same
    got = _tree(user)
    assert sorted(got) == sorted(want)
    for p in want:
        assert got[p] == want[p], p


def test_a_sidecar_holds_no_entry_and_each_version_is_kept(tmp_path, monkeypatch):
    user = _home(tmp_path)
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    _ingest(user, store)
    # no entry comes from a sidecar; the transcripts' entries are all there
    paths = {r[0] for r in q(store, "SELECT DISTINCT f.path FROM entry_rows e JOIN files f USING (file_id)")}
    assert not paths & {str(user / p) for p in SIDECARS}
    assert str(user / f"{PROJ}/{SID}.jsonl") in paths
    conn = sqlite_store.connect(store, readonly=True)
    try:
        # a sidecar's watermark is not a Claude Code file keyed by uuid alone (no
        # `reparse --rekey` advice for it)
        assert uuid_keyed_files(conn) == (0, 0)
        held = {g.path: g for g in manifest.generations(conn, latest=True)}
        meta = held[str(user / SUB_META)]
        assert (meta.gen, meta.mode, meta.meta["sidecar"], meta.meta["sidecar_of"]) == (
            1,
            "document",
            "subagent-meta",
            str(user / f"{SESSION_DIR}/subagents/agent-a7c1d2e3f4a5b6c7d.jsonl"),
        )
        assert held[str(user / TOOL_RESULT)].meta["sidecar_of"] == str(user / f"{PROJ}/{SID}.jsonl")
    finally:
        conn.close()
    # unchanged: no new generation; rewritten: its next version, the first kept
    _ingest(user, store)
    p = user / SUB_META
    first = p.read_bytes()
    p.write_bytes(first.replace(b"Review the cart module", b"Review the cart and tax modules"))
    _ingest(user, store)
    conn = sqlite_store.connect(store, readonly=True)
    try:
        gens = manifest.generations_of(conn, str(p))
        assert [g.gen for g in gens] == [1, 2]
        assert manifest.gen_bytes(conn, store, gens[0]) == first
        assert manifest.gen_bytes(conn, store, gens[1]) == p.read_bytes()
    finally:
        conn.close()
    # `--generation 1` gives each file's first version (the transcripts have one)
    _cli(
        "vault", "restore", SID[:8], "--generation", "1", "--to", str(tmp_path / "out"), "--home", str(store)
    )
    assert (tmp_path / "out" / SUB_META).read_bytes() == first
    assert (tmp_path / "out" / TOOL_RESULT).read_bytes() == (user / TOOL_RESULT).read_bytes()


def test_no_secret_reaches_a_sidecar_byte(tmp_path, monkeypatch):
    from fixtures.secrets import positives

    cases = positives(11)
    values = {s for c in cases for s in c.secrets if s}
    user = _home(tmp_path)
    monkeypatch.setenv("HOME", str(user))
    # a persisted tool output that printed credentials (a `cat .env`), and a sub-agent's
    # description naming one
    tool = user / TOOL_RESULT
    tool.write_bytes(tool.read_bytes() + "\n".join(c.text for c in cases).encode() + b"\n")
    meta = user / SUB_META
    doc = json.loads(meta.read_bytes())
    doc["description"] = "check " + cases[0].text
    meta.write_text(json.dumps(doc))
    store = tmp_path / "store"
    _ingest(user, store)
    conn = sqlite_store.connect(store, readonly=True)
    try:
        held = {g.path: g for g in manifest.generations(conn, latest=True)}
        data = {p: manifest.gen_bytes(conn, store, held[str(user / p)]) for p in (TOOL_RESULT, SUB_META)}
        redactions = {p: held[str(user / p)].redactions for p in (TOOL_RESULT, SUB_META)}
    finally:
        conn.close()
    for p, b in data.items():
        leaked = sorted(v for v in values if v.encode() in b or json.dumps(v)[1:-1].encode() in b)
        assert leaked == [], p
        assert b"[REDACTED:" in b and sum(redactions[p].values()) >= 1, p
    assert json.loads(data[SUB_META])["agentType"] == "general-purpose"  # JSON still
    # nor in the store's file (the manifest, its meta) nor a pack's record
    raw = (store / "store.db").read_bytes()
    assert not [v for v in values if v.encode() in raw]
    # the restore writes the vault's bytes (redacted: the contract for redacted bytes)
    # and says how many values each file lost
    shutil.rmtree(user / SESSION_DIR)
    out = json.loads(_cli("vault", "restore", SID[:8], "--json", "--force", "--home", str(store)).stdout)
    by = {str(Path(f["to"]).relative_to(user)): f for f in out["files"]}
    assert tool.read_bytes() == data[TOOL_RESULT] and meta.read_bytes() == data[SUB_META]
    assert by[TOOL_RESULT]["redactions"] == redactions[TOOL_RESULT]
    assert by[TOOL_RESULT]["bytes"] == len(data[TOOL_RESULT])


def test_purge_takes_the_sidecars_out_of_the_vault(tmp_path):
    user = _home(tmp_path)
    store = tmp_path / "store"
    _ingest(user, store)
    dry = json.loads(_cli("purge", "--session", SID, "--dry-run", "--json", "--home", str(store)).stdout)
    r = _cli("purge", "--session", SID, "--yes", "--json", "--home", str(store))
    done = json.loads(r.stdout)
    # 7 files: the 3 transcripts and their 4 sidecars, in the dry run as in the purge
    assert dry["removed"]["vault_files"] == done["removed"]["vault_files"] == 7, (dry, done)
    left = {r[0] for r in q(store, "SELECT path FROM vault_files")}
    assert not left & {str(user / p) for p in CLAUDE_FILES}
    assert {path_hash(str(user / p)) for p in SIDECARS} <= forgotten(store)
    # the files are still on disk: the next ingest takes none of them in again
    _ingest(user, store)
    left = {r[0] for r in q(store, "SELECT path FROM vault_files")}
    assert not left & {str(user / p) for p in CLAUDE_FILES}
    assert _cli("vault", "verify", "--full", "--home", str(store))
    # a store whose purge remembered the transcripts only (before sidecars were read):
    # their sidecars stay out all the same
    conn = sqlite3.connect(store / "store.db")
    with conn:
        conn.execute("DELETE FROM purge_files WHERE item NOT LIKE '%.jsonl' OR item LIKE '%journal.jsonl'")
    conn.close()
    _ingest(user, store)
    left = {r[0] for r in q(store, "SELECT path FROM vault_files")}
    assert not left & {str(user / p) for p in CLAUDE_FILES}


def test_reparse_reads_a_vaulted_sidecar_when_the_agent_deleted_it(tmp_path):
    """Vibe's parser takes a session's id, project and usage from ``meta.json``: with
    the folder gone, a reparse reads the vault's newest version of it (before: the
    session id became the folder's name and its usage was lost)."""
    user = _home(tmp_path)
    store = tmp_path / "store"
    _ingest(user, store)
    sql = (
        "SELECT entry_id, session_id, p.project_dir, kind FROM entry_rows e "
        "JOIN projects p USING (project_id) WHERE e.agent = 'mistral-vibe' ORDER BY entry_id"
    )
    usage = "SELECT usage_key, input_tokens, output_tokens, cache_read_tokens FROM usage ORDER BY usage_key"
    before, usage_before = q(store, sql), q(store, usage)
    assert {r[1] for r in before} == {VIBE_SID} and usage_before
    shutil.rmtree(user / ".vibe")
    out = json.loads(_cli("reparse", "--agent", "mistral-vibe", "--json", "--home", str(store)).stdout)
    assert out["files"] == 2
    assert q(store, sql) == before and q(store, usage) == usage_before


def test_compress_leaves_sidecars_alone(tmp_path):
    from ctxkeep.maintenance.compress.run import discovered_files

    user = _home(tmp_path)
    files, problems = discovered_files(tmp_path / "store", DiscoveryContext(home=user, env={}))
    assert problems == []
    assert sorted(str(f.path.relative_to(user)) for f in files) == [
        p for p in CLAUDE_FILES if p.endswith(".jsonl") and not p.endswith("journal.jsonl")
    ]


def test_an_ingest_of_a_transcript_path_takes_its_sidecars(tmp_path):
    """The agents' hooks run ``ingest --path <transcript>``: the session's sidecars come
    with it (a tool output is written mid-session, the hook's ingest is the first)."""
    from ctxkeep.pipeline.plan import plan

    user = _home(tmp_path)
    main = user / f"{PROJ}/{SID}.jsonl"
    sub = user / f"{SESSION_DIR}/subagents/agent-a7c1d2e3f4a5b6c7d.jsonl"
    vibe = user / VIBE_DIR / "messages.jsonl"
    p = plan(tmp_path / "store", None, paths=[main, sub, vibe], ctx=DiscoveryContext(home=user, env={}))
    got = sorted(str(f.path.relative_to(user)) for f, _ in p.todo)
    assert got == sorted(
        [
            f"{PROJ}/{SID}.jsonl",
            f"{SESSION_DIR}/subagents/agent-a7c1d2e3f4a5b6c7d.jsonl",
            *SIDECARS,
            f"{VIBE_DIR}/messages.jsonl",
            f"{VIBE_DIR}/meta.json",
        ]
    )
    assert {f.mode for f, _ in p.todo if f.meta.get("sidecar")} == {"rewrite"} and p.problems == []


#: agent → (its fixture, the folder the agent deletes under the home, its sidecars' names)
COMPANIONS = {
    "grok": ("grok", ".grok/sessions", {"summary.json"}),
    "kiro": ("kiro", ".kiro/sessions/cli", {"0b9a8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d.json"}),
    "qoder": ("qoder", ".qoder/projects", {"8d2c4e6a-3b5f-4a7c-9e1d-2f3a4b5c6d7e-session.json"}),
    "codebuff": ("codebuff", ".config/manicode/projects", {"run-state.json", "chat-meta.json"}),
}


@pytest.mark.parametrize("agent", sorted(COMPANIONS))
def test_companion_files_are_vaulted_restored_and_read_by_a_reparse(tmp_path, monkeypatch, agent):
    """The JSON files a parser reads beside a transcript (a session's title, project,
    parent, usage) are sidecars: with the agent's folder deleted a reparse gives the
    same entries and usage (it reads them from the vault), and ``vault restore
    --all-missing`` gives every file back byte for byte."""
    fixture, folder, names = COMPANIONS[agent]
    user = tmp_path / "user"
    shutil.copytree(FIXTURES / fixture / "home", user)
    for p in user.rglob("*"):
        if p.is_file():
            os.utime(p, ns=(MTIME_NS, MTIME_NS))
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}), agents=[agent])
    held = {Path(r[0]).name: json.loads(r[1]) for r in q(store, "SELECT path, meta FROM vault_files")}
    assert names <= set(held) and all(held[n]["sidecar_of"] for n in names), held
    sql = "SELECT e.entry_id, e.session_id, e.parent_session_id, p.project_dir, e.kind FROM entry_rows e "
    sql += "LEFT JOIN projects p USING (project_id) ORDER BY e.entry_id"
    usage = "SELECT usage_key, session_id, model, input_tokens, output_tokens, cache_read_tokens FROM usage"
    before, usage_before = q(store, sql), sorted(q(store, usage))
    want = _tree(user / folder)
    shutil.rmtree(user / folder)
    _cli("reparse", "--agent", agent, "--home", str(store))
    assert q(store, sql) == before and sorted(q(store, usage)) == usage_before
    _cli("vault", "restore", "--all-missing", "--home", str(store))
    assert _tree(user / folder) == want


def _sidecars_agree(store: Path) -> None:
    """``test_vault_crash._agrees``, and each sidecar's newest version is the bytes its
    watermark names (``state["sha256"]``: no secret in the fixtures, so redaction
    changed nothing): the rows and the watermark committed together."""
    import hashlib

    from tests.maintenance.test_vault_crash import _agrees

    _agrees(store)
    conn = sqlite_store.connect(store, readonly=True)
    try:
        wm = {p: json.loads(s) for p, s in conn.execute("SELECT path, state FROM watermarks")}
        for g in manifest.generations(conn, latest=True):
            if g.meta.get("sidecar") and g.path in wm:
                assert hashlib.sha256(manifest.gen_bytes(conn, store, g)).hexdigest() == wm[g.path]["sha256"]
    finally:
        conn.close()


@pytest.mark.slow
def test_sigkilled_ingests_leave_sidecars_whole_or_read_again(tmp_path):
    """SIGKILL at a random point of each phase of an ingest of the sidecar fixtures (no
    new write path: a sidecar is a document capture, pack before the rows, the rows with
    the watermark): each killed store's vault reads back and agrees with its
    watermarks, and the next ingest ends with the store and vault of a run never killed."""
    from tests.maintenance.test_vault_crash import _kill_trials

    home = _home(tmp_path)
    # (session 23: Claude Code's todo lists, Cline's task_metadata.json, Kiro IDE's index)
    for name in ("grok", "codebuff", "claude-todos", "cline", "kiro-ide"):
        shutil.copytree(FIXTURES / name / "home", home, dirs_exist_ok=True)
    want = _kill_trials(home, tmp_path, seed=21, agrees=_sidecars_agree)
    assert sum(k.split("#")[0].endswith(".meta.json") for k in want) == 2
    names = {Path(k.split("#")[0]).name for k in want}
    assert {"task_metadata.json", "sessions.json", f"{SID}-agent-{SID}.json"} <= names, sorted(names)

"""Three more sidecars (``sources.readers.sidecar``, session 23): Claude Code's todo
lists (``~/.claude/todos/<session>-agent-<agent>.json``, outside the session's folder),
the Cline family's ``task_metadata.json`` and Kiro IDE's per-workspace ``sessions.json``
index (the one sidecar several sessions share). Each: a first ingest vaults it, a change
is its next version, ``vault restore`` gives it back byte for byte with its mtime, a
secret in it reaches no vault byte nor ``store.db``, a symlink out of the agent's folder
is refused, and ``vault status`` counts it with its agent's files.

Fixtures (handmade): ``tests/fixtures/claude-todos`` beside ``claude-sidecars``,
``tests/fixtures/cline`` and ``tests/fixtures/kiro-ide`` (whose task and workspace
folders held these files already), copied into tmp for every run."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest
from ctxkeep.sources import discover_all
from ctxkeep.sources.contract import REASON_OUTSIDE, DiscoveryContext
from tests.conftest import q

runner = CliRunner()

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MTIME_NS = 1_764_493_290_123_456_789
SID = "5c1dec42-7a1e-4f00-8b00-00000000c0de"
TODOS = ".claude/todos"
TODO_MAIN = f"{TODOS}/{SID}-agent-{SID}.json"
TODO_SUB = f"{TODOS}/{SID}-agent-0b7e4a52-91c3-4d2e-8f6a-3c5d7e9f1a2b.json"
TODO_ORPHAN = f"{TODOS}/9e8d7c6b-5a49-4382-9170-fedcba987654-agent-9e8d7c6b-5a49-4382-9170-fedcba987654.json"
CLAUDE_TRANSCRIPT = f".claude/projects/-home-dev-shop/{SID}.jsonl"
CLINE_TASK = ".config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks/1733050000000"
KIRO_ROOT = ".config/Kiro/User/globalStorage/kiro.kiroagent"
KIRO_WS = f"{KIRO_ROOT}/workspace-sessions/L2hvbWUvZGV2L3Nob3A"
KIRO_SID = "7e6d5c4b-3a29-4817-a6b5-c4d3e2f1a0b9"
KIRO_HASH = "e828acfc792e3bbcd2a6c6c35323cb44"  # sha256("/home/dev/shop")[:32]
KIRO_LOGS = f"{KIRO_ROOT}/{KIRO_HASH}/414d1636299d2b9e4ce7e17fb11f63e9"
KIRO_LOG = f"{KIRO_LOGS}/b1c2d3e4f5"  # exec-42, named by the session's history


@dataclass(frozen=True)
class Case:
    agent: str
    fixtures: tuple[str, ...]
    sidecar: str  # under the home
    of: str  # the transcript (or, shared, the folder) it is tied to
    session: str  # what `vault restore` is given
    gone: tuple[str, ...]  # what the agent deletes (files or folders under the home)
    files: int  # the vault files of the agent after the first ingest


CASES = {
    "claude-code": Case(
        "claude-code",
        ("claude-sidecars", "claude-todos"),
        TODO_MAIN,
        CLAUDE_TRANSCRIPT,
        SID[:8],
        (".claude/projects", TODOS),
        9,  # 3 transcripts, 4 sidecars of session 21, 2 todo lists (not the orphan's)
    ),
    "cline": Case(
        "cline",
        ("cline",),
        f"{CLINE_TASK}/task_metadata.json",
        f"{CLINE_TASK}/api_conversation_history.json",
        "17330500",
        (CLINE_TASK,),
        3,
    ),
    "kiro-ide": Case(
        "kiro-ide",
        ("kiro-ide",),
        f"{KIRO_WS}/sessions.json",
        KIRO_WS,
        KIRO_SID[:8],
        (f"{KIRO_ROOT}/workspace-sessions",),
        4,  # the session, its index, its execution log, the older .chat file
    ),
    "kiro-ide-log": Case(
        "kiro-ide",
        ("kiro-ide",),
        KIRO_LOG,
        f"{KIRO_WS}/{KIRO_SID}.json",
        KIRO_SID[:8],
        (f"{KIRO_ROOT}/workspace-sessions", f"{KIRO_ROOT}/{KIRO_HASH}"),
        4,
    ),
}


def _home(tmp_path: Path, case: Case) -> Path:
    user = tmp_path / "user"
    for name in case.fixtures:
        shutil.copytree(FIXTURES / name / "home", user, dirs_exist_ok=True)
    for p in user.rglob("*"):
        if p.is_file():
            os.utime(p, ns=(MTIME_NS, MTIME_NS))
    return user


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _ctx(user: Path) -> DiscoveryContext:
    return DiscoveryContext(home=user, env={})


def _ingest(user: Path, store: Path, agent: str) -> None:
    run_ingest(store, ctx=_ctx(user), agents=[agent])


def _cli(*args: str):
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


def _held(store: Path) -> dict[str, manifest.Generation]:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return {g.path: g for g in manifest.generations(conn, latest=True)}
    finally:
        conn.close()


def _bytes(store: Path, path: Path) -> list[bytes]:
    """Every version the vault holds of ``path``, oldest first."""
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return [manifest.gen_bytes(conn, store, g) for g in manifest.generations_of(conn, str(path))]
    finally:
        conn.close()


@pytest.mark.parametrize("name", sorted(CASES))
def test_vaulted_counted_revaulted_and_restored_byte_for_byte(tmp_path, monkeypatch, name):
    case = CASES[name]
    agent = case.agent
    user = _home(tmp_path, case)
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    _ingest(user, store, agent)
    side = user / case.sidecar
    g = _held(store)[str(side)]
    assert (g.gen, g.mode, g.meta["sidecar_of"]) == (1, "document", str(user / case.of))
    assert _bytes(store, side) == [side.read_bytes()]
    # no entry comes from it
    assert not q(store, "SELECT 1 FROM entry_rows e JOIN files f USING (file_id) WHERE f.path = ?", str(side))
    # counted with its agent's files
    st = json.loads(_cli("vault", "status", "--json", "--home", str(store)).stdout)
    mine = next(a for a in st["agents"] if a["agent"] == agent)
    held = {p: x for p, x in _held(store).items() if x.agent == agent}
    assert mine["files"] == len(held) == case.files, sorted(held)
    assert str(side) in held
    # unchanged: no new version; changed: the next, the first kept
    _ingest(user, store, agent)
    assert len(_bytes(store, side)) == 1
    first = side.read_bytes()
    doc = json.loads(first)
    if agent == "claude-code":  # the next TodoWrite call
        doc.append({"content": "one more", "status": "pending", "activeForm": "adding one more"})
    elif agent == "cline":  # a model switch
        doc["model_usage"].append(
            {"ts": 1733050009000, "model_id": "m2", "model_provider_id": "x", "mode": "plan"}
        )
    elif name == "kiro-ide":  # a new session in the workspace
        doc.append(dict(doc[0], sessionId="0a1b2c3d", title="Another"))
    else:  # one more action of the execution
        doc["actions"].append({"actionId": "act-4", "actionType": "say", "output": {"message": "Also tax."}})
    side.write_text(json.dumps(doc, indent=1))
    os.utime(side, ns=(MTIME_NS + 10**9, MTIME_NS + 10**9))
    _ingest(user, store, agent)
    assert _bytes(store, side) == [first, side.read_bytes()]
    # the agent deletes the session: the restore of it gives every file back
    want = _tree(user)
    for p in case.gone:
        shutil.rmtree(user / p)
    dry = json.loads(
        _cli("vault", "restore", case.session, "--dry-run", "--json", "--home", str(store)).stdout
    )
    assert str(side) in {f["to"] for f in dry["files"]}
    # doctor counts it among the files gone (its watermark, as any sidecar's)
    gone = [p for p in held if not Path(p).exists()]
    assert str(side) in gone
    r = runner.invoke(app, ["doctor", "--json", "--home", str(store)])
    wm = next(f for f in json.loads(r.stdout)["findings"] if f["check"] == "watermarks")
    assert wm["detail"].startswith(f"{len(gone)} files gone"), wm
    _cli("vault", "restore", case.session, "--home", str(store))
    got = _tree(user)
    assert got[case.sidecar] == want[case.sidecar]
    restored = {str(Path(f["to"]).relative_to(user)) for f in dry["files"]}
    assert {p: got.get(p) for p in restored} == {p: want[p] for p in restored}
    # `--all-missing` gives the agent's folders back whole
    _cli("vault", "restore", "--all-missing", "--home", str(store))
    if agent == "claude-code":  # the orphan list (no transcript) was never taken
        want.pop(TODO_ORPHAN)
    assert _tree(user) == want


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_secret_reaches_a_vault_byte(tmp_path, monkeypatch, name):
    from fixtures.secrets import positives

    cases = positives(11)
    values = {s for c in cases for s in c.secrets if s}
    case = CASES[name]
    agent = case.agent
    user = _home(tmp_path, case)
    monkeypatch.setenv("HOME", str(user))
    side = user / case.sidecar
    doc = json.loads(side.read_bytes())
    # a todo item, a file in context, an index's title quoting a credential
    if agent == "claude-code":
        doc += [{"content": "check " + c.text, "status": "pending", "activeForm": "checking"} for c in cases]
    elif agent == "cline":
        doc["files_in_context"] = [{"path": c.text, "record_state": "active"} for c in cases]
    elif name == "kiro-ide":
        doc += [
            {"sessionId": f"x{i}", "title": c.text, "dateCreated": "1781600000001"}
            for i, c in enumerate(cases)
        ]
    else:  # an edit whose file content quotes a credential
        doc["actions"] += [
            {
                "actionId": f"s{i}",
                "actionType": "replace",
                "input": {"file": "x.py", "modifiedContent": c.text},
            }
            for i, c in enumerate(cases)
        ]
    side.write_text(json.dumps(doc, indent=2))
    store = tmp_path / "store"
    _ingest(user, store, agent)
    (data,) = _bytes(store, side)
    g = _held(store)[str(side)]
    leaked = sorted(v for v in values if v.encode() in data or json.dumps(v)[1:-1].encode() in data)
    assert leaked == []
    assert b"[REDACTED:" in data and sum(g.redactions.values()) >= len(cases) // 2
    json.loads(data)  # JSON still
    raw = (store / "store.db").read_bytes()
    assert not [v for v in values if v.encode() in raw]
    # the restore writes the vault's (redacted) bytes and says what each lost
    side.unlink()
    out = json.loads(_cli("vault", "restore", "--all-missing", "--json", "--home", str(store)).stdout)
    by = {f["to"]: f for f in out["files"]}
    assert side.read_bytes() == data and by[str(side)]["redactions"] == g.redactions


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_symlink_out_of_the_agents_folder_is_refused(tmp_path, monkeypatch, name):
    case = CASES[name]
    agent = case.agent
    user = _home(tmp_path, case)
    monkeypatch.setenv("HOME", str(user))
    outside = tmp_path / "elsewhere" / "secrets.json"
    outside.parent.mkdir()
    outside.write_text('["not the agent\'s"]')
    if name == "kiro-ide-log":  # a log of the session's execution, to be tied if it were read
        say = {"actionId": "x", "actionType": "say", "output": {"message": "not the agent's"}}
        outside.write_text(json.dumps({"executionId": "exec-42", "actions": [say]}))
    side = user / case.sidecar
    side.unlink()
    side.symlink_to(outside)
    (d,) = discover_all(_ctx(user), [agent])
    assert str(side) not in {str(f.path) for f in d.files}
    assert d.skipped.get(REASON_OUTSIDE, 0) >= 1
    store = tmp_path / "store"
    _ingest(user, store, agent)
    assert str(side) not in _held(store)
    assert not [p for p, g in _held(store).items() if b"not the agent" in _bytes(store, Path(p))[-1]]
    assert not q(store, "SELECT 1 FROM chunks WHERE text LIKE '%not the agent%'")  # nor parsed
    # an `ingest --path <transcript>` (the hooks) refuses it too
    from ctxkeep.pipeline.plan import plan

    transcript = user / (case.of if name != "kiro-ide" else f"{KIRO_WS}/{KIRO_SID}.json")
    p = plan(tmp_path / "store2", None, paths=[transcript], ctx=_ctx(user))
    todo = {str(f.path): f.agent for f, _ in p.todo}
    assert todo[str(transcript)] == agent and str(side) not in todo
    # (the link gone, the file itself comes with the transcript)
    side.unlink()
    shutil.copyfile(outside, side)
    p = plan(tmp_path / "store2", None, paths=[transcript], ctx=_ctx(user))
    assert {str(f.path): f.agent for f, _ in p.todo}.get(str(side)) == agent


def test_todo_lists_are_tied_to_their_session_and_come_with_its_path(tmp_path, monkeypatch):
    """A list names its session (``<session>-agent-<agent>.json``); one whose session
    has no transcript is not taken; ``ingest --path <transcript>`` takes the session's
    lists; a purge of the session takes them out of the vault."""
    from ctxkeep.pipeline.plan import plan

    case = CASES["claude-code"]
    user = _home(tmp_path, case)
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    _ingest(user, store, "claude-code")
    held = _held(store)
    sub = held[str(user / TODO_SUB)]
    assert (sub.meta["sidecar"], sub.meta["session"], sub.meta["todo_agent"]) == (
        "todos",
        SID,
        "0b7e4a52-91c3-4d2e-8f6a-3c5d7e9f1a2b",
    )
    assert sub.meta["sidecar_of"] == str(user / CLAUDE_TRANSCRIPT)
    assert str(user / TODO_ORPHAN) not in held
    p = plan(tmp_path / "fresh", None, paths=[user / CLAUDE_TRANSCRIPT], ctx=_ctx(user))
    got = {str(f.path.relative_to(user)): f.mode for f, _ in p.todo}
    assert got[TODO_MAIN] == got[TODO_SUB] == "rewrite" and TODO_ORPHAN not in got
    r = json.loads(_cli("purge", "--session", SID, "--yes", "--json", "--home", str(store)).stdout)
    assert r["removed"]["vault_files"] == 9
    assert not {str(user / TODO_MAIN), str(user / TODO_SUB)} & set(_held(store))


def test_reparse_reads_the_vaulted_task_metadata(tmp_path, monkeypatch):
    """Cline's usage rows take their model from ``task_metadata.json`` where a request
    has no ``modelInfo`` (2 of the fixture's 3): with the task folder gone, a reparse
    reads the vault's version (before: those rows lost their model)."""
    case = CASES["cline"]
    user = _home(tmp_path, case)
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    _ingest(user, store, "cline")
    usage = "SELECT usage_key, model, input_tokens, output_tokens, cost_usd FROM usage ORDER BY usage_key"
    before = q(store, usage)
    assert [r[1] for r in before] == ["claude-3-5-sonnet-20241022"] * 3
    shutil.rmtree(user / CLINE_TASK)
    out = json.loads(_cli("reparse", "--agent", "cline", "--json", "--home", str(store)).stdout)
    assert out["files"] == 3
    assert q(store, usage) == before


def test_kiro_index_is_shared_by_its_folders_sessions(tmp_path, monkeypatch):
    """The index gives a session its time (``dateCreated``) and a ``.chat`` file its
    project: a reparse with ``workspace-sessions/`` gone reads the vault's. A purge of
    one of two sessions leaves the index (it lists the other); of the last, takes it."""
    case = CASES["kiro-ide"]
    user = _home(tmp_path, case)
    monkeypatch.setenv("HOME", str(user))
    ws = user / KIRO_WS
    other = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    doc = json.loads((ws / f"{KIRO_SID}.json").read_bytes())
    doc.update(sessionId=other, title="Second session")
    for h in doc["history"]:  # (its own execution, of no log)
        if "executionId" in h:
            h["executionId"] = "exec-99"
    (ws / f"{other}.json").write_text(json.dumps(doc))
    index = json.loads((ws / "sessions.json").read_bytes())
    index.append(dict(index[0], sessionId=other, title="Second session", dateCreated="1781700000000"))
    (ws / "sessions.json").write_text(json.dumps(index))
    store = tmp_path / "store"
    _ingest(user, store, "kiro-ide")
    sql = (
        "SELECT entry_id, session_id, ts, p.project_dir, kind, tool_name FROM entry_rows e "
        "LEFT JOIN projects p USING (project_id) ORDER BY entry_id"
    )
    before = q(store, sql)
    assert {r[2][:10] for r in before if r[1] == other} == {"2026-06-17"}  # the index's dateCreated
    assert {r[3] for r in before} == {"/home/dev/shop"}  # the .chat file's too, by the index
    shutil.rmtree(user / f"{KIRO_ROOT}/workspace-sessions")
    _cli("reparse", "--agent", "kiro-ide", "--home", str(store))
    assert q(store, sql) == before
    _cli("vault", "restore", "--all-missing", "--home", str(store))
    # the IDE deletes one session and drops it from its index: the restore of it gives
    # the session back and leaves the index on disk as it is (it lists the sessions there)
    kept = (ws / f"{other}.json").read_bytes()
    (ws / f"{other}.json").unlink()
    (ws / "sessions.json").write_text(json.dumps(index[:1]))
    out = json.loads(_cli("vault", "restore", other[:8], "--json", "--home", str(store)).stdout)
    assert [Path(f["to"]).name for f in out["files"]] == [f"{other}.json"]
    assert (ws / f"{other}.json").read_bytes() == kept
    assert json.loads((ws / "sessions.json").read_bytes()) == index[:1]
    idx = str(ws / "sessions.json")
    r = json.loads(_cli("purge", "--session", other, "--yes", "--json", "--home", str(store)).stdout)
    assert r["removed"]["vault_files"] == 1 and idx in _held(store)
    r = json.loads(_cli("purge", "--session", KIRO_SID, "--yes", "--json", "--home", str(store)).stdout)
    # (the session, the index and the session's execution log)
    assert r["removed"]["vault_files"] == 3 and idx not in _held(store)


def test_kiro_execution_logs_are_sidecars_of_their_session(tmp_path, monkeypatch):
    """An execution log holds the session's tool actions (whole files) and the model's
    ``say`` text: it is a sidecar of the session whose history names its executionId (a
    log no session names is not taken). With the logs' folder gone, a reparse reads the
    vault's and gives the same tool rows; ``ingest --path`` of the session takes its
    logs; a purge of the session takes its logs out of the vault, not the other's."""
    from ctxkeep.pipeline.plan import plan

    case = CASES["kiro-ide-log"]
    user = _home(tmp_path, case)
    monkeypatch.setenv("HOME", str(user))
    ws, logs = user / KIRO_WS, user / KIRO_LOGS
    other = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    doc = json.loads((ws / f"{KIRO_SID}.json").read_bytes())
    doc.update(sessionId=other, title="Second session")
    for h in doc["history"]:
        if "executionId" in h:
            h["executionId"] = "exec-77"
    (ws / f"{other}.json").write_text(json.dumps(doc))
    edit = {"file": "tax.py", "originalContent": "", "modifiedContent": "RATE = 0.2\n"}
    acts = [
        {"actionId": "b-1", "actionType": "create", "input": edit, "output": {"message": "created"}},
        {"actionId": "b-2", "actionType": "say", "output": {"message": "Tax rate added."}},
    ]
    (logs / "a0b1c2").write_text(json.dumps({"executionId": "exec-77", "actions": acts}))
    (logs / "dead00").write_text(json.dumps({"executionId": "exec-gone", "actions": []}))
    store = tmp_path / "store"
    _ingest(user, store, "kiro-ide")
    held = _held(store)
    ties = {
        Path(p).name: (g.meta["sidecar_of"], g.meta["session"], g.meta["execution"])
        for p, g in held.items()
        if g.meta.get("sidecar") == "execution-log"
    }
    assert ties == {
        "b1c2d3e4f5": (str(ws / f"{KIRO_SID}.json"), KIRO_SID, "exec-42"),
        "a0b1c2": (str(ws / f"{other}.json"), other, "exec-77"),
    }  # (dead00: no session names exec-gone)
    sql = (
        "SELECT session_id, native_id, role, kind, tool_name, "
        "(SELECT group_concat(t, '') FROM (SELECT ch.text AS t FROM chunks ch JOIN contents c "
        "ON c.content_id = ch.content_id WHERE c.content_hash = e.content_hash ORDER BY ch.seq)) "
        "FROM entries e ORDER BY session_id, rowid"
    )
    before = q(store, sql)
    tools = [r for r in before if r[3] in ("tool_call", "tool_result")]
    assert [(r[0][:8], r[1], r[4]) for r in tools if r[3] == "tool_call"] == [
        ("0a1b2c3d", "b-1", "create"),
        ("7e6d5c4b", "act-1", "readCode"),
        ("7e6d5c4b", "act-3", "replace"),
    ]
    assert ("0a1b2c3d", "Tax rate added.") in {(r[0][:8], r[5]) for r in before}
    # the IDE's log folder gone: the reparse reads the vault's logs
    shutil.rmtree(user / f"{KIRO_ROOT}/{KIRO_HASH}")
    _cli("reparse", "--agent", "kiro-ide", "--home", str(store))
    after = q(store, sql)
    assert after == before
    _cli("vault", "restore", "--all-missing", "--home", str(store))
    # `ingest --path <session>` (the hooks) takes that session's logs, not the other's
    p = plan(tmp_path / "fresh", None, paths=[ws / f"{other}.json"], ctx=_ctx(user))
    assert sorted(f.path.name for f, _ in p.todo) == [f"{other}.json", "a0b1c2", "sessions.json"]
    # a purge of a session takes its log with it
    r = json.loads(_cli("purge", "--session", other, "--yes", "--json", "--home", str(store)).stdout)
    assert r["removed"]["vault_files"] == 2
    held = _held(store)
    assert str(logs / "a0b1c2") not in held and str(user / KIRO_LOG) in held


def test_belongs_ties_a_shared_sidecar_to_any_session_of_its_folder():
    """What a date-range backfill and a reparse of some files keep with them
    (``sidecar.belongs``): a sidecar its transcript's, a shared one any transcript's of
    its folder, never one of another folder's."""
    from ctxkeep.sources.readers.sidecar import belongs, meta

    own = meta("todos", "/h/.claude/projects/p/s.jsonl")
    index = meta("session-index", "/h/ws/A", shared=True)
    assert belongs(own, {"/h/.claude/projects/p/s.jsonl"}) and not belongs(
        own, {"/h/.claude/projects/p/t.jsonl"}
    )
    assert belongs(index, {"/h/ws/A/s1.json"}) and belongs(index, {"/h/ws/A"})
    assert not belongs(index, {"/h/ws/B/s1.json", "/h/ws/A/sub/s.json"})
    assert not belongs(dict(index, shared=False), {"/h/ws/A/s1.json"}) and not belongs({}, {"/h/ws/A"})

"""Codebuff / Freebuff: handmade chats (format facts in ctxkeep/sources/codebuff.py)
read into prompts (an attached image named), reasoning, a tool call and its output, a
spawned sub-agent and its answer, mode and plan markers, an error; local ``hh:mm PM``
times that cross midnight; the agent type (Freebuff's too) and the credits as a cost;
discovery through ``$CODEBUFF_DIR``; a rewritten chat adds only its new message."""

from __future__ import annotations

import json
import time

import pytest

from conftest import ingest, q
from ctxkeep.sources import codebuff
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import fixture_home
from helpers_sources import ENTRY_TEXT, kinds

TODO = "todo-app:2026-08-03T23-40-00.000Z"
NOTES = "notes:2026-08-05T09-00-00.000Z"


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    """Clock times are local: read them in UTC here."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_chats_blocks_subagent_times_and_credits(tmp_path):
    store = tmp_path / "store"
    s = ingest(fixture_home("codebuff", tmp_path / "home"), store, agents="codebuff")
    assert s.files_read == 5 and s.quarantined == 0  # 2 chats, 3 sidecars (run-state, chat-meta)
    assert kinds(store, "codebuff") == {
        "user/message": 3,
        "assistant/thinking": 1,
        "assistant/message": 2,
        "assistant/tool_call": 2,
        "tool/tool_result": 2,
        "system/meta": 6,
    }
    assert q(
        store,
        f"SELECT role, kind, native_id, tool_name, {ENTRY_TEXT}, strftime('%Y-%m-%dT%H:%M', ts) FROM entries e "
        "WHERE agent='codebuff' AND session_id=? AND tool_name IS NOT 'agent_type' AND tool_name IS NOT 'usage' "
        "ORDER BY rowid",
        TODO,
    ) == [
        ("user", "message", "u-1", None, "Add due dates to todos\n[image mockup.png]", "2026-08-03T23:40"),
        ("assistant", "thinking", "a-1", None, "Need a migration first.", "2026-08-03T23:41"),
        ("assistant", "message", "a-1", None, "Adding a due_date column.", "2026-08-03T23:41"),
        ("assistant", "tool_call", "tc-1", "write_file", '{"path":"models.py"}', "2026-08-03T23:41"),
        ("tool", "tool_result", "tc-1", "write_file", "wrote models.py", "2026-08-03T23:41"),
        (
            "assistant",
            "tool_call",
            "ag-7",
            "file-picker",
            '{"agentName":"Fletcher","initialPrompt":"find views","status":"complete"}',
            "2026-08-03T23:41",
        ),
        ("tool", "tool_result", "ag-7", "file-picker", "views.py, forms.py", "2026-08-03T23:41"),
        ("system", "meta", "a-1", "mode", "max", "2026-08-03T23:41"),
        ("user", "message", "u-2", None, "Also sort by due date", "2026-08-04T00:05"),
        ("system", "meta", "e-1", "error", "Out of credits", "2026-08-04T00:06"),
    ]
    assert q(
        store,
        f"SELECT session_id, {ENTRY_TEXT}, project_dir FROM entries e WHERE agent='codebuff' "
        "AND tool_name='agent_type' ORDER BY 1",
    ) == [(NOTES, "freebuff-lite", "/home/dev/notes"), (TODO, "base2", "/home/dev/todo-app")]
    assert q(
        store,
        "SELECT session_id, model, input_tokens, output_tokens, cost_usd FROM usage WHERE agent='codebuff'",
    ) == [(TODO, "base2", None, None, 0.37)]  # tokens not recorded by the agent (were 0)


def test_credits_without_tokens_are_not_recorded_not_0(tmp_path):
    """Codebuff logs a session's credits, no tokens (agentsview's usage event for it
    carries only a cost): `sessions` and `report` give its tokens as not recorded (null,
    "-", a note), as Crush's, not 0 (parser 1 stored 0)."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    store = tmp_path / "store"
    ingest(fixture_home("codebuff", tmp_path / "home"), store, agents="codebuff")
    run = CliRunner()
    r = run.invoke(app, ["sessions", "--home", str(store), "--json", "--agent", "codebuff"])
    assert r.exit_code == 0, r.output
    got = {s["session_id"]: (s["tokens"], s["cost_usd"]) for s in json.loads(r.stdout)["sessions"]}
    assert got == {TODO: (None, 0.37), NOTES: (0, None)}  # NOTES: no usage at all
    r = run.invoke(app, ["report", "session", "--home", str(store), "--json", "--agent", "codebuff"])
    d = json.loads(r.stdout)
    (row,) = d["rows"]
    assert (row["period"], row["total_tokens"], row["input_tokens"], row["cost_usd"]) == (
        TODO,
        None,
        None,
        0.37,
    )
    assert d["notes"] == [
        "codebuff: tokens not recorded by the agent (1 session: it logs the credits each session used, "
        "no tokens): not in the token totals; every mode shows the logged cost"
    ]
    r = run.invoke(app, ["sessions", "--home", str(store), "--agent", "codebuff"], env={"COLUMNS": "200"})
    assert "codebuff: tokens not recorded by the agent (1 session:" in " ".join(r.stderr.split())


def test_env_dir_and_a_rewritten_chat(tmp_path):
    home = fixture_home("codebuff", tmp_path / "home")
    projects = home / ".config/manicode/projects"
    env = {"CODEBUFF_DIR": str(projects)}
    found = codebuff.discover(DiscoveryContext(home=tmp_path / "nohome", env=env)).files
    assert sorted((f.path.parent.name, f.path.name) for f in found) == [
        ("2026-08-03T23-40-00.000Z", "chat-messages.json"),
        ("2026-08-03T23-40-00.000Z", "chat-meta.json"),  # sidecars (readers.sidecar)
        ("2026-08-03T23-40-00.000Z", "run-state.json"),
        ("2026-08-05T09-00-00.000Z", "chat-messages.json"),
        ("2026-08-05T09-00-00.000Z", "run-state.json"),
    ]
    store = tmp_path / "store"
    assert ingest(tmp_path / "nohome", store, agents="codebuff", env=env).entries_new == 16
    chat = projects / "notes/chats/2026-08-05T09-00-00.000Z/chat-messages.json"
    doc = json.loads(chat.read_text())
    doc.append(
        {"id": "u-2", "variant": "user", "content": "Shorter please", "timestamp": "2026-08-05T09:01:00Z"}
    )
    chat.write_text(json.dumps(doc))
    assert ingest(tmp_path / "nohome", store, agents="codebuff", env=env).entries_new == 1
    assert ingest(tmp_path / "nohome", store, agents="codebuff", env=env).entries_new == 0


def test_empty_home_says_where_it_looked(tmp_path):
    d = codebuff.discover(DiscoveryContext(home=tmp_path, env={}))
    assert d.files == [] and ".config/manicode/projects" in (d.reason or "")

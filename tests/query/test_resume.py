"""Resume snapshots (query.resume.build_snapshot) on the corpus store.

Expected values were read from the corpus JSONL by hand (python json over the raw
lines, not through ctxkeep), as each comment says."""

from __future__ import annotations

import json

import pytest

from ctxkeep.errors import UsageError
from ctxkeep.query.resume import build_snapshot
from ctxkeep.transforms.tokens import heuristic_tokens
from tests.query import test_sessions

CODEX = "c61729d4-da6d-46a4-9a29-ec2c614e5e23"
CLAUDE = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
conn = test_sessions.conn  # the read-only corpus store fixture, shared


def _item(snap, section, starts):
    return next(i.text for i in snap.sections[section] if i.text.startswith(starts))


def test_codex_rollout_snapshot(conn):
    snap = build_snapshot(conn, "c61729d4", budget=1500)
    md = snap.to_markdown()
    assert snap.session_id == CODEX and snap.agent == "codex"
    assert heuristic_tokens(md) <= 1500 and snap.tokens <= 1500
    # user messages of the rollout (response_item/message role user, not the
    # <environment_context>/<user_instructions> ones): 63; the first is
    # "Can we continue from where we left off?", the last "continue"
    assert _item(snap, "prompts", "- first prompt").endswith("> Can we continue from where we left off?")
    assert _item(snap, "prompts", "- last prompt").endswith("\n> continue")
    # the last update_plan call (2025-11-01T01:32:56Z): two steps completed, "Update
    # docs for new GUI features" in_progress, "Run tests and commit after each step" pending
    assert "2 open of 4 tasks (from update_plan" in md
    assert "- [~] Update docs for new GUI features (in_progress)" in md
    assert "- [ ] Run tests and commit after each step (pending)" in md
    assert "- [x] Add more example printer models (completed)" in md
    # `*** Add|Update|Delete File:` headers of the shell apply_patch calls: 76 distinct
    # paths; the most updated: opk/ui/pdl_editor.py 27 (+1 Add), schemas/pdl.schema.json
    # 20 (+1 Add, 1 Delete), opk/cli/__main__.py 17, opk/ui/main_window.py 16,
    # opk/core/gcode.py 11 (+1 Add), README.md 11
    assert "76 files changed" in md
    assert "- `opk/ui/pdl_editor.py`: created, edited 27×" in md
    assert "- `schemas/pdl.schema.json`: created, edited 20×, deleted" in md
    assert "- `opk/cli/__main__.py`: edited 17×" in md
    assert "- `opk/ui/main_window.py`: edited 16×" in md
    assert "- `opk/core/gcode.py`: created, edited 11×" in md
    assert "- `README.md`: edited 11×" in md
    assert f"`ctxkeep show --session {CODEX}`" in md and "ctx_fetch {" in md


def test_claude_code_session_with_subagent(conn):
    snap = build_snapshot(conn, CLAUDE, budget=1500)
    md = snap.to_markdown()
    assert heuristic_tokens(md) <= 1500
    # main file: the typed prompts are the first one and "Well, the subagents seem to
    # be either stuck or done... can you check?"; then /exit (a slash command, not a prompt)
    assert (
        _item(snap, "prompts", "- first prompt")
        .split("\n", 1)[1]
        .startswith("> OK, we're going to make a little experiment here.")
    )
    assert _item(snap, "prompts", "- last prompt").endswith(
        "> Well, the subagents seem to be either stuck or done... can you check?"
    )
    assert "/exit" not in md
    # six TaskCreate calls, and TaskUpdate taskId 1..6 each ends "completed"
    assert "0 open of 6 tasks (from TaskUpdate" in md
    for subject in (
        "Research plan mode (alice)",
        "Research teammates (bob)",
        "Research Beads (carol)",
        "Merge round-1 branches into master",
        "Round 2: comparison sections",
        "Merge round-2 branches into master",
    ):
        assert f"- [x] {subject} (completed)" in md
    # the sub-agent (subagents/agent-a4ca7529859c158c2.jsonl): one Write and four Edit
    # of …/agent-a4ca7529/work/research-plan-mode.md (project dir -experiments/worktrees)
    assert "- `.claude/worktrees/agent-a4ca7529/work/research-plan-mode.md`: written, edited 4×" in md
    # the sub-agent's WebFetch of claudelog.com got is_error "Request failed with status code 403"
    fail = snap.sections["failure"][0].text
    assert fail.startswith("`WebFetch`") and "claudelog.com/mechanics/plan-mode" in fail
    assert "Request failed with status code 403" in fail
    # in the first prompt, verbatim
    assert '"To be clear: don\'t use ClMail for communication, use the builtin subagent teams."' in md


@pytest.mark.parametrize("budget", [100, 250, 600, 1500, 4000])
def test_budget_is_kept_and_fetch_is_always_there(conn, budget):
    for sid in (CODEX, CLAUDE):
        snap = build_snapshot(conn, sid, budget=budget)
        assert heuristic_tokens(snap.to_markdown()) <= budget or budget == 100
        assert snap.sections["fetch"][0].text.startswith("- the whole conversation: `ctxkeep show --session")
    small, big = build_snapshot(conn, CODEX, budget=250), build_snapshot(conn, CODEX, budget=4000)
    assert small.omitted and len(big.to_markdown()) > len(small.to_markdown())


def test_entry_ids_restrict_the_snapshot(conn):
    # the rollout up to its first update_plan (2025-11-01T01:29:33.782Z), whose plan has
    # "Add more example printer models" in_progress and three steps pending
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT entry_id FROM entries WHERE session_id = ? AND ts <= '2025-11-01T01:29:33.782000Z'",
            (CODEX,),
        )
    ]
    snap = build_snapshot(conn, entry_ids=ids, budget=1500)
    md = snap.to_markdown()
    assert snap.session_id == CODEX
    assert "4 open of 4 tasks" in md and "- [~] Add more example printer models (in_progress)" in md
    assert "Update docs for new GUI features (pending)" in md


def test_default_is_the_latest_session_of_the_project(conn):
    # the rollouts whose session_meta cwd is OpenPrintKit: fa1a… (2025-11-01T00:36)
    # and c61729d4 (to 2025-11-01T17:31): the latter is the latest
    snap = build_snapshot(conn, project_dir="/home/randy/projects/python-3/OpenPrintKit")
    assert snap.session_id == CODEX
    with pytest.raises(UsageError):
        build_snapshot(conn, project_dir="/no/such/project")
    with pytest.raises(UsageError):
        build_snapshot(conn, "zzzz-not-a-session")


def test_json_form(conn):
    d = json.loads(build_snapshot(conn, CLAUDE).to_json())
    assert d["session_id"] == CLAUDE and list(d["sections"])[:2] == ["summary", "prompts"]
    # the session's last away_summary recap (13:53:43Z, read by hand), before the prompts
    assert d["sections"]["summary"][0]["text"].startswith("> Three teammates (alice/bob/carol) researched")
    assert d["markdown"].startswith("# Resume: claude-code session")


def test_mcp_ctx_resume(corpus_store, tmp_path):
    from ctxkeep.mcp.server import RESUME_TOOL, Handlers

    assert RESUME_TOOL["name"] == "ctx_resume"
    h = Handlers(corpus_store[0], cwd=tmp_path)
    text, data = h.ctx_resume({"sessionId": "c61729d4", "budget": "800"})
    assert text.startswith("# Resume: codex session c61729d4") and data["budget"] == 800
    # no session: the latest of projectDir (the OpenPrintKit rollouts: c61729d4 is the latest)
    text, data = h.ctx_resume({"projectDir": "/home/randy/projects/python-3/OpenPrintKit"})
    assert data["session_id"] == CODEX and heuristic_tokens(text) <= 1500
    with pytest.raises(UsageError):
        h.ctx_resume({})  # the server's directory (tmp_path) holds no session
    with pytest.raises(UsageError):
        h.ctx_resume({"sessionId": "c617", "budget": 5})


def test_a_slash_command_with_arguments_is_the_first_prompt(conn):
    """Session fe5e... (Claude Code) opens with a user message holding
    ``<command-name>/orchestrator</command-name>`` and
    ``<command-args>create TODO app by Next.js</command-args>`` (read from its JSONL):
    what the user typed, so the first prompt (and the session's title); a slash command
    without arguments (``/status``, ``<command-args></command-args>``) is none."""
    from ctxkeep.query.sessions import list_sessions, prompt_text

    snap = build_snapshot(conn, "fe5e", budget=1500)
    assert _item(snap, "prompts", "- first prompt").endswith("\n> /orchestrator create TODO app by Next.js")
    rows = [r for r in list_sessions(conn)[0] if r.session_id.startswith("fe5e") and not r.parent_session_id]
    assert [r.title for r in rows] == ["/orchestrator create TODO app by Next.js"]
    status = "<command-name>/status</command-name>\n<command-message>status</command-message>\n<command-args></command-args>"
    assert prompt_text(status) is None and prompt_text("fix the bug") == "fix the bug"


def _claude_line(uuid: str, parent: str | None, role: str, text: str, ts: str) -> str:
    msg = {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}]}
    return json.dumps(
        {
            "type": role,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "5e551011-0000-4000-8000-000000000001",
            "timestamp": ts,
            "cwd": "/work/app",
            "version": "2.0.1",
            "message": msg,
        }  # fmt: skip
    )


REMARK = "I don't think we need to loop through all items, the group names should match the filters?"


def test_a_users_remark_or_question_is_not_a_rule(tmp_path):
    """A new user's question was listed under "The user's rules": any sentence with
    "don't", "only" or "should" counted. Rules stay; remarks and questions go."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from tests.conftest import ingest

    home = tmp_path / "home"
    proj = home / ".claude/projects/-work-app"
    proj.mkdir(parents=True)
    prompts = [
        f"Fix the filter. {REMARK}",
        "Don't touch the migrations. It only happens on CI, I think.",
        "Does it always fail on Mondays? Make sure the tests pass before you commit.",
    ]
    lines, parent = [], None
    for i, p in enumerate(prompts):
        u, a = f"00000000-0000-4000-8000-00000000010{i}", f"00000000-0000-4000-8000-00000000020{i}"
        lines += [
            _claude_line(u, parent, "user", p, f"2026-01-01T00:0{i}:00Z"),
            _claude_line(a, u, "assistant", "Done.", f"2026-01-01T00:0{i}:30Z"),
        ]
        parent = a
    (proj / "5e551011-0000-4000-8000-000000000001.jsonl").write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    ingest(home, store, "claude-code")
    conn = sqlite_store.connect(store, readonly=True)
    try:
        snap = build_snapshot(conn, "5e551011", budget=3000)
    finally:
        conn.close()
    rules = [i.text.split('"')[1] for i in snap.sections["constraints"]]
    assert rules == ["Make sure the tests pass before you commit.", "Don't touch the migrations."]
    assert REMARK not in snap.to_markdown().split("The user's rules")[-1]


def test_a_budget_that_cuts_says_what_it_cut(conn, corpus_store):
    """`resume --budget N` cut its lists silently (only the files section said so):
    the snapshot names every section's cut items (`note`, in --json, on stderr in
    text, stdout staying the snapshot), and says nothing when nothing was cut."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    small = build_snapshot(conn, CODEX, budget=400)
    cut = {k: n for k, n in small.omitted.items() if n}
    assert len(cut) >= 2, small.omitted  # more than the files section is cut
    assert small.note is not None and small.note.startswith("the 400-token budget left out ")
    words = {"prompts": "prompt", "tasks": "plan line", "files": "file", "failure": "failure line",
             "constraints": "rule"}  # fmt: skip
    for k, n in cut.items():
        assert f"{n:,} {words[k]}" in small.note, (k, small.note)
    assert small.note.endswith(f"`ctxkeep resume {CODEX} --budget 4000` shows more")
    assert build_snapshot(conn, CODEX, budget=100_000).note is None
    home = str(corpus_store[0])
    r = CliRunner().invoke(app, ["resume", "c61729d4", "--budget", "400", "--json", "--home", home])
    d = json.loads(r.stdout)
    assert (d["note"], d["omitted"]) == (small.note, small.omitted)
    r = CliRunner().invoke(
        app, ["resume", "c61729d4", "--budget", "400", "--home", home], env={"COLUMNS": "400"}
    )
    assert r.exit_code == 0
    assert r.stdout == small.to_markdown()
    assert " ".join(r.stderr.split()) == f"note: {small.note}"  # (folded at the console's width)


def test_a_summary_only_session_gives_its_summary_and_no_placeholders(conn):
    """newuser20 F14: the corpus's summary-only file (ff71dbed…, one line read by hand:
    {"type": "summary", "summary": "AI Music Generation from Word Embeddings",
    "leafUuid": …}, no sessionId, cwd or timestamp) gave "project ?; ? → ? UTC" and
    nothing else; it gives the summary, and the title line says only what is known."""
    snap = build_snapshot(conn, "ff71dbed", budget=1500)
    md = snap.to_markdown()
    assert snap.sections["summary"][0].text == "> AI Music Generation from Word Embeddings"
    assert "?" not in md.splitlines()[1] and "## The agent's summary" in md
    # a session with prompts and a summary line too (d3ad4cdc… starts with a summary
    # line, read by hand): the summary comes first, then what the user asked
    full = build_snapshot(conn, "d3ad4cdc", budget=1500).to_markdown()
    assert full.index("## The agent's summary") < full.index("## What the user asked")
    assert full.splitlines()[1].startswith("project /Users/chip/dev/ai-music; 2025-")


def test_prompts_show_in_the_sessions_order_and_fetch_names_every_quoted_entry(conn):
    """newuser21 M6: the prompts were listed in the budget's priority order ("prompt 2
    of 7, prompt 6 of 7, prompt 5 of 7"), and "Fetch more" named only the first 4 of
    the entries the snapshot quotes."""
    import re

    shown = 0
    for sid in (CODEX, CLAUDE):
        snap = build_snapshot(conn, sid, budget=6000)
        labels = [
            re.match(r"- (first prompt|last prompt|prompt (\d+) of \d+)", i.text)
            for i in snap.sections["prompts"]
        ]
        nums = [
            1 if m[1] == "first prompt" else (10**9 if m[1] == "last prompt" else int(m[2])) for m in labels
        ]
        assert nums == sorted(nums), nums
        shown = max(shown, len(nums))
        quoted = {i.entry_id for items in snap.sections.values() for i in items if i.entry_id}
        (line,) = [i.text for i in snap.sections["fetch"] if "ctx_fetch" in i.text]
        assert set(json.loads(line.split("ctx_fetch ", 1)[1])["ids"]) == quoted
        assert len(quoted) > 4
        assert "at" not in snap.as_dict()["sections"]["prompts"][0]
    assert shown >= 4  # middle prompts too, whose priority order differs from the session's


def test_json_items_carry_their_fields_not_only_markdown(corpus_store):
    """newuser21 M6: `resume --format json` gave each section as Markdown text (a
    script had to parse "- prompt 2 of 7 (entry …):\\n> …"): each item now has
    ``fields`` saying the same (prompts: number, of, prompt; fetch: command, ids)."""
    import json as _json

    from typer.testing import CliRunner

    from ctxkeep.cli import app

    home, _ = corpus_store
    r = CliRunner().invoke(app, ["resume", "ef95", "--json", "--budget", "6000", "--home", str(home)])
    assert r.exit_code == 0, r.output
    d = _json.loads(r.stdout)
    prompts = d["sections"]["prompts"]
    assert prompts and [p["fields"]["number"] for p in prompts] == sorted(
        p["fields"]["number"] for p in prompts
    )
    for p in prompts:
        f = p["fields"]
        assert set(f) == {"number", "of", "prompt"} and 1 <= f["number"] <= f["of"]
        # the Markdown line quotes the same prompt, under the same number
        quote = p["text"].split(":\n", 1)[1]
        assert "\n".join(ln[2:] for ln in quote.split("\n")) == f["prompt"]
        label = (
            "first prompt"
            if f["number"] == 1
            else "last prompt"
            if f["number"] == f["of"]
            else f"prompt {f['number']} of {f['of']}"
        )
        assert p["text"].startswith(f"- {label} (entry {p['entry_id'][:12]})")
    files = d["sections"]["files"]
    assert set(files[0]["fields"]) == {"changed", "only_read"}
    assert all(
        isinstance(x["fields"]["actions"], dict) and x["fields"]["path"] in x["text"]
        for x in files[1:]
        if "path" in x["fields"]
    )
    fetch = {x["fields"]["fetch"]: x["fields"] for x in d["sections"]["fetch"]}
    quoted = [
        i["entry_id"] for s, items in d["sections"].items() if s != "fetch" for i in items if i["entry_id"]
    ]
    assert fetch["entries"]["ids"] == list(dict.fromkeys(quoted))
    assert fetch["entries"]["mcp"] == {"ctx_fetch": {"ids": fetch["entries"]["ids"]}}
    assert fetch["conversation"]["command"] == f"ctxkeep show --session {d['session_id']}"


def test_a_users_rejection_of_a_tool_use_is_no_failure(conn):
    """newuser23 F13: 0d3a8e6f's "Last failure" was the user's rejection of a MultiEdit
    ("The user doesn't want to proceed with this tool use", an is_error result in the
    JSONL): the user's decision, not the agent's failure. The session has no other error
    result, so the section is empty."""
    from ctxkeep.query.resume import is_rejection
    from ctxkeep.query.sessions import error_flag
    from ctxkeep.sinks.sqlite import content_text

    snap = build_snapshot(conn, "0d3a8e6f", budget=4000)
    errors = [
        t
        for (h,) in conn.execute(
            "SELECT content_hash FROM entries WHERE session_id LIKE '0d3a8e6f%' AND kind = 'tool_result'"
        )
        if error_flag(t := content_text(conn, h))
    ]
    assert errors and all(is_rejection(t) for t in errors)
    assert not snap.sections.get("failure")
    assert "Last failure" not in snap.to_markdown()
    assert not is_rejection("[error] Request failed with status code 403")

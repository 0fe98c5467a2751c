"""`ctxkeep search` and `ctxkeep show` (Typer CliRunner over a corpus store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def test_search_json_with_filters_and_budget(home):
    r = runner.invoke(
        app,
        [
            "search",
            "python: command not found",
            "--home",
            home,
            "--json",
            "--agent",
            "codex",
            "--kind",
            "tool_result",
            "-n",
            "3",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["hits"][0]["session_id"].startswith("019a802a")
    assert all(h["agent"] == "codex" and h["kind"] == "tool_result" for h in d["hits"])
    r = runner.invoke(app, ["search", "orchestrator", "--home", home, "--json", "--budget", "200"])
    d = json.loads(r.stdout)
    assert d["omitted"] > 0 and "budget of 200 tokens" in d["note"] and d["used_tokens"] <= 200


def test_search_text_output(home):
    r = runner.invoke(app, ["search", "QT_QPA_PLATFORM=xcb", "--home", home, "-n", "2"])
    assert r.exit_code == 0 and "QT_QPA_PLATFORM=xcb" in r.stdout
    # the session shows as its shortest unique prefix: 4 characters (c61729d4-… is the
    # only session id starting with "c6"; copilot_stage0_small shares only the "c")
    import sqlite3

    c = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    ids = [x for (x,) in c.execute("SELECT DISTINCT session_id FROM entries")]
    c.close()
    assert [i for i in ids if i.startswith("c6")] == ["c61729d4-da6d-46a4-9a29-ec2c614e5e23"]
    assert "  codex  c617  " in r.stdout and "c61729d4" not in r.stdout


@pytest.mark.parametrize(
    "args,code,msg",
    [
        (["search", "foo AND", "--raw"], 2, "FTS5 syntax error"),
        (["search", "x", "--kind", "bogus"], 2, "unknown kind 'bogus'"),
        (["search", "x", "--since", "yesterday-ish"], 2, "cannot read the time"),
        (["search", "x", "--limit", "0"], 2, "limit 0 is out of range (--limit) - use 1 to 200"),
        (["show", "abc"], 2, "too short"),
    ],
)
def test_errors_are_one_line(home, args, code, msg):
    r = runner.invoke(app, args + ["--home", home])
    assert r.exit_code == code
    assert msg in r.stderr and "Traceback" not in r.output
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: ")


def test_show_full_and_budgeted(home):
    import sqlite3

    c = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    eid, n = c.execute("SELECT entry_id, text_bytes FROM entries ORDER BY text_bytes DESC LIMIT 1").fetchone()
    c.close()
    r = runner.invoke(app, ["show", eid[:10], "--home", home, "--json"])
    d = json.loads(r.stdout)["entries"][0]
    assert d["entry_id"] == eid and len(d["text"].encode()) == n and not d["truncated"]
    r = runner.invoke(app, ["show", eid, "--home", home, "--json", "--budget", "500"])
    d = json.loads(r.stdout)["entries"][0]
    assert d["truncated"] and f"ctxkeep show {eid} --offset {d['elided_from']}" in d["text"]
    r = runner.invoke(
        app, ["show", eid, "--home", home, "--json", "--offset", str(d["elided_from"]), "--max-bytes", "1000"]
    )
    d2 = json.loads(r.stdout)["entries"][0]
    assert d2["offset"] == d["elided_from"] and d2["next_offset"] is not None


@pytest.mark.parametrize("command", ["search", "show", "stats"])
def test_search_show_stats_never_import_prefect_or_polars(home, command):
    import sqlite3
    import subprocess
    import sys

    c = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    eid = c.execute("SELECT entry_id FROM entries WHERE text_bytes > 0 LIMIT 1").fetchone()[0]
    c.close()
    args = {"search": ["search", "npm"], "show": ["show", eid], "stats": ["stats"]}[command] + [
        "--home",
        home,
    ]
    code = (
        "import sys; from typer.testing import CliRunner; from ctxkeep.cli import app; "
        f"r = CliRunner().invoke(app, {args!r}); "
        "assert r.exit_code == 0 and r.output.strip(), r.output; "
        "print(sorted(m for m in ('prefect', 'polars', 'duckdb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # neither the orchestrator nor the frame libraries: ~1 s of imports these never need
    assert out.stdout.strip() == "[]"


def test_mcp_server_module_never_imports_prefect():
    import subprocess
    import sys

    code = (
        "import sys, ctxkeep.mcp.server as m, ctxkeep.query.search, ctxkeep.query.fetch, "
        "ctxkeep.pipeline.notes; m.build_server(__import__('pathlib').Path('/tmp')); "
        "print('prefect' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_session_prefix_as_hits_show_it_includes_sub_agents(home):
    import sqlite3

    c = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    parent = c.execute(
        "SELECT session_id FROM entries WHERE session_id LIKE 'fe5e1c67%' AND "
        "session_id NOT LIKE '%/%' LIMIT 1"
    ).fetchone()[0]
    sessions = {
        r[0] for r in c.execute("SELECT DISTINCT session_id FROM entries WHERE session_id LIKE 'fe5e1c67%'")
    }
    c.close()
    assert len(sessions) > 1 and any("/" in s for s in sessions)  # the parent and its sub-agents
    by_prefix = json.loads(
        runner.invoke(
            app, ["search", "useTodos", "--session", parent[:12], "--home", home, "--json", "-n", "50"]
        ).stdout
    )["hits"]
    by_id = json.loads(
        runner.invoke(
            app, ["search", "useTodos", "--session", parent, "--home", home, "--json", "-n", "50"]
        ).stdout
    )["hits"]
    assert [h["entry_id"] for h in by_prefix] == [h["entry_id"] for h in by_id]
    assert {h["session_id"] for h in by_prefix} <= sessions
    assert any("/" in h["session_id"] for h in by_prefix) and len(by_prefix) > 6
    r = runner.invoke(app, ["search", "useTodos", "--session", "nosuchsession", "--home", home])
    assert r.exit_code == 1 and "no such session nosuchsession" in r.stderr


@pytest.mark.parametrize(
    "args,msg",
    [
        (["search", ""], "the query is empty"),
        (["search", "x", "--since", "2025-11-02", "--until", "2025-11-01"], "is after --until"),
        (
            ["search", "x", "--agent", "claude"],
            "unknown agent 'claude' (--agent) - did you mean 'claude-code'?",
        ),
    ],
)
def test_more_one_line_errors(home, args, msg):
    r = runner.invoke(app, args + ["--home", home])
    assert r.exit_code == 2 and msg in r.stderr and "Traceback" not in r.output


def test_agent_names_are_case_insensitive_and_partial_matches_are_said(home):
    upper = json.loads(
        runner.invoke(app, ["search", "error", "--agent", "CODEX", "--home", home, "--json"]).stdout
    )
    lower = json.loads(
        runner.invoke(app, ["search", "error", "--agent", "codex", "--home", home, "--json"]).stdout
    )
    assert upper["hits"] and upper["hits"] == lower["hits"]
    d = json.loads(runner.invoke(app, ["search", "QHBoxLayout zzqqxxyy", "--home", home, "--json"]).stdout)
    assert d["hits"] and d["note"] == "no entry holds all the terms: these match some of them"
    d = json.loads(runner.invoke(app, ["search", "QHBoxLayout", "--home", home, "--json"]).stdout)
    assert d["hits"] and d["note"] is None


def test_budget_below_one_hit_says_what_one_hit_needs(home):
    d = json.loads(
        runner.invoke(app, ["search", "useTodos", "--budget", "20", "--home", home, "--json"]).stdout
    )
    assert d["hits"] == [] and d["omitted"] > 0
    assert d["note"].startswith("a budget of 20 tokens is less than the first hit needs (~")


def test_project_dot_is_the_working_directory(home, monkeypatch, tmp_path):
    import sqlite3

    c = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    proj = c.execute(
        "SELECT project_dir FROM entries WHERE agent='codex' AND project_dir LIKE '/%' "
        "GROUP BY project_dir ORDER BY count(*) DESC LIMIT 1"
    ).fetchone()[0]
    c.close()
    absolute = json.loads(
        runner.invoke(app, ["search", "the", "--project", proj, "--home", home, "--json"]).stdout
    )
    real = tmp_path / proj.lstrip("/")
    real.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    # a relative path is taken from the working directory: tmp_path/<proj> is not the project
    rel = json.loads(
        runner.invoke(app, ["search", "the", "--project", proj.lstrip("/"), "--home", home, "--json"]).stdout
    )
    assert absolute["hits"] and rel["hits"] == []
    monkeypatch.chdir("/")
    rel = json.loads(
        runner.invoke(app, ["search", "the", "--project", proj.lstrip("/"), "--home", home, "--json"]).stdout
    )
    assert rel["hits"] == absolute["hits"]


def test_no_arguments_prints_help_without_an_empty_error():
    r = runner.invoke(app, [])
    assert "Usage" in r.output and "error:" not in r.output


def test_unquoted_words_are_one_query(home):
    """`ctxkeep search python: command not found` (no quotes) is the query of the words
    joined by spaces, the same hits as the quoted query (before: a usage error, rc 2)."""
    quoted = runner.invoke(app, ["search", "python: command not found", "--home", home, "--json"])
    words = runner.invoke(app, ["search", "python:", "command", "not", "found", "--home", home, "--json"])
    assert words.exit_code == 0, words.output
    hits = json.loads(words.stdout)["hits"]
    assert hits and hits == json.loads(quoted.stdout)["hits"]
    assert hits[0]["session_id"].startswith("019a802a")


def test_no_matches_while_an_ingest_runs_says_so(home):
    """newuser15 F15: during a first ingest, ``search`` said "no matches" and nothing
    else. With the store lock held elsewhere (an ingest, a compress …), an empty result
    notes that an ingest is running; with it free, no such note."""
    from ctxkeep.sinks.lock import StoreLock, held_by_another

    r = runner.invoke(app, ["search", "qzxvkjwplorbfemtu", "--home", home])
    assert r.exit_code == 0 and "an ingest is running" not in r.stderr
    lock = StoreLock(Path(home)).acquire(timeout=0)
    try:
        # (flock is per open file: the check's own open conflicts even in this process)
        assert held_by_another(Path(home))
        r = runner.invoke(app, ["search", "qzxvkjwplorbfemtu", "--home", home])
        assert r.exit_code == 0 and "no matches" in r.stdout
        assert "an ingest is running; results may be incomplete" in r.stderr
    finally:
        lock.release()
    assert not held_by_another(Path(home))


def test_few_hits_while_an_ingest_runs_say_so_and_suggest_nothing(home, monkeypatch):
    """newuser19 F18: once a first ingest had stored some rows, a search with a few hits
    said nothing of the ingest, and its "did you mean" put "directly" for the right word
    "directory" (rarer in the part stored so far). With the lock held elsewhere, a page
    not full says the ingest is running and holds the suggestion back (the vocabulary is
    incomplete); a full page never probes the lock (the common path pays nothing)."""
    from ctxkeep.service import search_core
    from ctxkeep.sinks import lock as lock_mod
    from ctxkeep.sinks.lock import StoreLock

    q = ["search", "No such file or directry", "--limit", "3", "--home", home]
    free = runner.invoke(app, q)
    assert free.exit_code == 0 and "an ingest is running" not in free.stderr
    assert 'did you mean "No such file or directory"' in free.output
    lock = StoreLock(Path(home)).acquire(timeout=0)
    try:
        r = runner.invoke(app, q)
        assert r.exit_code == 0 and "fe5e/sidechain-f45" in r.stdout  # the hits still shown
        assert "an ingest is running; results may be incomplete" in r.stderr
        assert "did you mean" not in r.output
        js = json.loads(runner.invoke(app, [*q, "--json"]).stdout)
        assert js["hits"] and js["suggestions"] == []
    finally:
        lock.release()
    probes = []
    monkeypatch.setattr(lock_mod, "held_by_another", lambda h: probes.append(h) or True)
    out = search_core.run(Path(home), ["error"], {}, 3, None, False, ())
    assert len(out.results[0].hits) == 3 and probes == [] and out.notes == []


def test_hits_holding_some_terms_after_full_hits_are_named(home):
    """newuser20 F2: `search no such file --kind tool_result` gave 3 hits holding every
    word, then 7 holding some ("No files found", "File created successfully …") with no
    note (the note came only when no hit held them all). The note names where the
    partial hits start, in the text and in --json (the MCP tool's note too)."""
    q = ["search", "no such file", "--agent", "claude-code", "--kind", "tool_result", "--home", home]
    js = json.loads(runner.invoke(app, [*q, "--json"]).stdout)
    full = ("phrase", "words", "grams_all", "symbols", "exact", "subs")
    holds = [any(m in h["matched"] for m in full) for h in js["hits"]]
    k = holds.index(False)
    assert k > 0 and not any(holds[k:]), holds  # full hits first, then the partial ones
    want = f"hits {k + 1}-{len(holds)} hold only some of the terms"
    assert want in (js["note"] or ""), js["note"]
    r = runner.invoke(app, q)
    assert want in " ".join(r.stderr.split()), r.stderr
    # every hit holding every term: no such note
    js = json.loads(
        runner.invoke(
            app, ["search", "No such file or directory", "--limit", "3", "--home", home, "--json"]
        ).stdout
    )
    assert "only some of the terms" not in (js["note"] or "")

"""newuser23's findings (session 23): the fixes, each held by a test that fails without it."""

from __future__ import annotations

from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.cli.options import source_agents, store_agents, unknown_value


def test_the_agent_count_is_the_same_in_every_message():
    """F8: `ingest --agent nosuch` said "lists all 48", `search x --agent nosuch` "lists
    all 49" (its choices hold ``note``): the count is what `sources --all` lists."""
    n = len(source_agents())
    assert "note" in store_agents() and len(store_agents()) == n + 1
    want = f"unknown agent 'nosuchagent' (--agent) - `ctxkeep sources --all` lists all {n}"
    assert unknown_value("agent", "nosuchagent", store_agents(), "--agent") == want
    assert unknown_value("agent", "nosuchagent", source_agents(), "--agent") == want


def test_ingest_and_search_name_the_same_count(tmp_path):
    home = tmp_path / "store"
    a = CliRunner().invoke(app, ["ingest", "--agent", "nosuchagent", "--home", str(home)])
    b = CliRunner().invoke(app, ["search", "x", "--agent", "nosuchagent", "--home", str(home)])
    assert a.exit_code == b.exit_code == 2
    n = len(source_agents())
    for r in (a, b):
        assert f"`ctxkeep sources --all` lists all {n}" in " ".join(r.stderr.split()), r.stderr


def test_ids_that_share_a_long_prefix_stay_apart_at_80_columns(tmp_path):
    """F19: at 80 columns `sessions` cut two ids that differ only in their last
    character to the same "99999999-9999-499…": each id shown must tell the two apart."""
    import datetime as dt
    import os
    import subprocess
    import sys

    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext
    from tests.session_lines import claude_lines

    user = tmp_path / "user"
    folder = user / ".claude" / "projects" / "-tmp-long-project-folder-name"
    folder.mkdir(parents=True)
    ids = ["99999999-9999-4999-8999-99999999999a", "99999999-9999-4999-8999-99999999999b"]
    start = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)
    for sid in ids:
        lines = claude_lines(sid, 4, start, cwd="/tmp/long-project-folder-name", word="a rather long title")
        (folder / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}))
    for columns in (80, 60):
        env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
        r = subprocess.run(
            [sys.executable, "-m", "ctxkeep", "sessions", "--home", str(store)],
            capture_output=True, text=True, env=env, timeout=180, check=True,
        )  # fmt: skip
        rows = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("claude-code")]
        assert len(rows) == 2 and len(set(rows)) == 2, (columns, r.stdout)
        # each shown id is one of them and no other: its start, and its end after "…"
        for shown in rows:
            head, _, tail = shown.partition("…")
            assert len([i for i in ids if i.startswith(head) and i.endswith(tail)]) == 1, (columns, shown)

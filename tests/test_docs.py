"""Every CLI command is documented in the README (sqlite-utils style), and the README's
two set-up commands are the ones CI runs."""

from __future__ import annotations

import re

from conftest import ROOT
from ctxkeep.cli import app


def _commands() -> list[str]:
    import typer.main

    group = typer.main.get_command(app)
    return sorted(group.commands)


def test_every_command_is_in_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [c for c in _commands() if f"`ctxkeep {c}" not in readme]
    assert missing == []
    # 12 + report, statusline (issue 10); sessions, resume, hook, hooks (issue 12);
    # doctor, backup, restore, redact (issue 11); help, quarantine (issue 15); export (issue 13);
    # vault (issue 27); ui (issue 23)
    assert len(_commands()) == 29  # + reparse (issue 27), secrets (issue 24)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    cmds = re.findall(r"^(pip install uv && uv run .+)$", readme, re.M)
    # the main job installs no test group (--no-dev); the tests install it
    assert cmds[:2] == ["pip install uv && uv run --no-dev ctxkeep ingest", "pip install uv && uv run pytest"]
    assert "pip install uv && uv run pytest" in (ROOT / ".ci" / "run").read_text()


def test_usage_errors_are_one_line_with_exit_code_2():
    """Wrong arguments read like every other error: one line on stderr, what to do."""
    import subprocess
    import sys

    for args, want in (
        # Click's messages in the house style: lower-case, no period before the dash
        (["search", "--bogus"], "error: no such option: --bogus - see `ctxkeep search --help`"),
        (["search"], "error: missing argument 'QUERY' - see `ctxkeep search --help`"),
        (["nosuch"], "error: no such command 'nosuch' - see `ctxkeep --help`"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "ctxkeep", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
        )
        assert (r.returncode, r.stderr.strip().splitlines(), r.stdout) == (2, [want], "")


def test_the_readmes_search_examples_find_something(corpus_store, monkeypatch):
    """The README's `ctxkeep search` examples find something on a store of ordinary
    sessions (here the shared corpus's: the README names no corpus). Before, the
    examples (`validateUs`, `connection refused` of Codex since 2025-11-01) found
    little a new user recognised (newuser15)."""
    import json
    import shlex

    from typer.testing import CliRunner

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = re.findall(r"^uv run --no-dev ctxkeep (search .+?)(?:\s+#.*)?$", readme, re.M)
    assert len(examples) >= 3
    home = str(corpus_store[0])
    monkeypatch.setenv("COLUMNS", "200")
    for ex in examples:
        r = CliRunner().invoke(app, [*shlex.split(ex), "--json", "--home", home])
        assert r.exit_code == 0, (ex, r.output)
        hits = json.loads(r.stdout)["hits"]
        assert hits, ex
    # the partial name finds the whole name
    r = CliRunner().invoke(app, ["search", "gitign", "--json", "--home", home])
    assert any(".gitignore" in (h["snippet"] or "") for h in json.loads(r.stdout)["hits"])


def test_the_readme_says_a_named_session_export_writes_no_index():
    """`export html|markdown --session ID` writes those sessions' pages and no index
    (`render.site`: an index of the named few would replace a whole export's;
    `test_export_markdown_round_trips_the_message_count` holds `index` null). The
    README said "every session (or those named …) one page each plus an index"
    (newuser18, LEAD18_note "left")."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `ctxkeep export html"))
    assert "(or those named, with their sub-agents) one page each plus an index" not in row
    assert "with `--session`, only those named and their sub-agents, no index" in row

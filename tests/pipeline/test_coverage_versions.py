"""The coverage ledger's versions and file counts (issue 25, item 3): document sources
report the agent version their format logs (an Aider history's ``> Aider vX`` per
session, DeepSeek TUI's ``schema_version``, the VS Code chat format's ``version``); a
file holding records of two versions is counted once, at its newest; a document read
again unchanged (touched) keeps its ledger rows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from typer.testing import CliRunner

from conftest import FIXTURES, ingest
from ctxkeep.cli import app


def _ledger(store: Path, agent: str) -> dict[str, tuple]:
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        return {
            r["agent_version"]: (r["files"], r["records"], r["parsed"], r["entries"])
            for r in sqlite_store.coverage_ledger(conn, [agent])
        }
    finally:
        conn.close()


HISTORY = """
# aider chat started at 2025-11-02 09:00:00

> Aider v0.85.0
> Main model: gpt-4.1 with diff edit format

#### add a --verbose flag

Added the flag to `cli.py`.

# aider chat started at 2026-01-05 10:00:00

> Aider v0.86.1
> Main model: claude-sonnet-4-5 with diff edit format

#### now document it

Documented `--verbose` in the README.
"""


def test_aider_sessions_of_two_versions_one_file(tmp_path, store_home):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".aider.chat.history.md").write_text(HISTORY.lstrip("\n"))
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    run_ingest(
        store_home,
        agents=["aider"],
        paths=[proj / ".aider.chat.history.md"],
        ctx=DiscoveryContext(home=tmp_path / "home", env={}),
    )
    # each session's entries under its own version: header, 2 status lines, the prompt,
    # the answer; the file counted once, at its newest version
    assert _ledger(store_home, "aider") == {"0.85.0": (0, 4, 4, 4), "0.86.1": (1, 4, 4, 4)}


def _claude_line(version: str, n: int) -> str:
    return (
        json.dumps(
            {
                "type": "user",
                "uuid": f"{version.replace('.', '')}-{n:04d}-0000-4000-8000-000000000000",
                "parentUuid": None,
                "sessionId": "5e55i0n0-0000-4000-8000-000000000002",
                "cwd": "/work/demo",
                "version": version,
                "timestamp": f"2026-03-01T10:{n:02d}:00.000Z",
                "message": {"role": "user", "content": f"message {n} of {version}"},
            }
        )
        + "\n"
    )


def test_a_file_of_two_versions_is_counted_once(tmp_path, store_home):
    proj = tmp_path / "home" / ".claude" / "projects" / "-work-demo"
    proj.mkdir(parents=True)
    # a session resumed after an upgrade: 2.1.0 lines, then 2.2.0 lines; another file of 2.1.0
    (proj / "a.jsonl").write_text(
        "".join(_claude_line("2.1.0", i) for i in range(3)) + _claude_line("2.2.0", 3)
    )
    (proj / "b.jsonl").write_text("".join(_claude_line("2.1.0", i) for i in range(10, 12)))
    ingest(tmp_path / "home", store_home, "claude-code")
    assert _ledger(store_home, "claude-code") == {"2.1.0": (1, 5, 5, 5), "2.2.0": (1, 1, 1, 1)}
    r = CliRunner().invoke(app, ["sources", "--coverage", "--json", "--home", str(store_home)])
    assert r.exit_code == 0, r.output
    rows = [x for x in json.loads(r.stdout)["rows"] if x["agent"] == "claude-code"]
    assert sum(x["files"] for x in rows) == 2  # two files, not three


def test_document_versions_and_an_unchanged_document_keeps_its_rows(tmp_path, store_home):
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "deepseek-tui" / "home", home)
    shutil.copytree(FIXTURES / "vscode-copilot" / "home", home, dirs_exist_ok=True)
    ingest(home, store_home, ["deepseek-tui", "vscode-copilot"])
    assert _ledger(store_home, "deepseek-tui") == {"1": (1, 8, 8, 9)}
    assert _ledger(store_home, "vscode-copilot") == {"3": (2, 5, 5, 11)}
    # touched: read again (its stat changed), the same bytes: the ledger keeps its rows
    doc = next((home / ".codewhale" / "sessions").glob("sess_*.json"))
    st = doc.stat()
    os.utime(doc, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    s = ingest(home, store_home, "deepseek-tui")
    assert s.files_read == 1 and s.entries_new == 0
    assert _ledger(store_home, "deepseek-tui") == {"1": (1, 8, 8, 9)}

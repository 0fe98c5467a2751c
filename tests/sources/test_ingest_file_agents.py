"""End to end over a copy of the corpus home: every file-based agent present in the
corpus is found and ingested; a second run adds nothing; ``--path`` picks the right
source and mode."""

from __future__ import annotations

from conftest import CORPUS_HOME, ingest, q
from ctxkeep.sources import files_for_paths


def test_corpus_home_ingest_has_every_file_agent(home_copy, tmp_path):
    store = tmp_path / "store"
    s = ingest(home_copy, store)
    assert s.quarantined == 0
    per_agent = dict(q(store, "SELECT agent, count(*) FROM entries GROUP BY 1"))
    for agent, n in {"gemini-cli": 219, "copilot-cli": 33, "aider": 32, "specstory": 106}.items():
        assert per_agent.get(agent) == n, agent
    files = dict(q(store, "SELECT agent, count(*) FROM watermarks GROUP BY 1"))
    assert {a: files.get(a) for a in ("gemini-cli", "copilot-cli", "aider", "specstory")} == {
        "gemini-cli": 4,
        "copilot-cli": 1,
        "aider": 2,
        "specstory": 1,
    }
    again = ingest(home_copy, store)
    assert (again.files_read, again.entries_new, again.status_changed) == (0, 0, 0)


def test_path_option_maps_files_to_sources_and_modes():
    files, problems = files_for_paths(
        [
            CORPUS_HOME / ".gemini",
            CORPUS_HOME / "code" / "zen-mcp-server",
            CORPUS_HOME / "code" / "minsky" / ".specstory",
            CORPUS_HOME / ".copilot",
        ]
    )
    got = sorted((f.agent, f.path.name, f.mode) for f in files)
    assert got == [
        ("aider", ".aider.chat.history.md", "rewrite"),
        ("aider", ".aider.input.history", "rewrite"),
        ("copilot-cli", "fixture-small.jsonl", "append"),
        ("gemini-cli", "session-2025-12-03T08-28-fc2fd534.json", "rewrite"),
        ("gemini-cli", "session-2025-12-08T17-35-9fae96a8.json", "rewrite"),
        ("gemini-cli", "session-2025-12-24T06-27-36e8d28f.json", "rewrite"),
        ("gemini-cli", "session-2026-05-01T10-00-fixture0.jsonl", "append"),
        ("specstory", "2025-04-28_16-22-backlog-task-inquiry.md", "rewrite"),
    ]
    assert problems == []

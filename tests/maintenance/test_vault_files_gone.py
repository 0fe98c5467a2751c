"""A reparse of a session whose file the agent deleted (issue 27): the entries are the
same as when the file was on disk. Cursor's agent transcripts (JSONL) and Goose's legacy
JSONL sessions dated entries by their file's mtime (``path.stat()``): with the file gone
the read stopped (Cursor: no entries) or failed (Goose: the metadata line), and the
reparse lost them; Continue dated a session at 1970 instead. The reparse's file carries
the generation's mtime (``readers.jsonl.stat_of``).

Fixture homes are copies in tmp."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ctxkeep.maintenance.reparse import reparse
from ctxkeep.schema import STORED_COLUMNS
from tests.conftest import ingest, q

ENTRIES = (
    f"SELECT {', '.join(STORED_COLUMNS)} FROM entries WHERE agent = ? AND source_path = ? ORDER BY entry_id"
)
ALL = f"SELECT {', '.join(STORED_COLUMNS)} FROM entries WHERE agent = ? ORDER BY entry_id"
USAGE = "SELECT * FROM usage WHERE agent = ? ORDER BY usage_key"
FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize(
    ("agent", "rel"),
    [
        (
            "cursor",
            ".cursor/projects/home-user-src-webapp/agent-transcripts/7d3c1e9a-0b6f-4f5e-9a2d-3c4b5a6d7e8f/"
            "7d3c1e9a-0b6f-4f5e-9a2d-3c4b5a6d7e8f.jsonl",
        ),
        ("goose", ".local/share/goose/sessions/20250301_legacy.jsonl"),
        ("continue", ".continue/sessions/c-new.json"),
    ],
)
def test_a_reparse_after_the_agents_file_is_deleted_keeps_its_entries(tmp_path, agent, rel):
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / agent / "home", home)
    store = tmp_path / "store"
    ingest(home, store, agent)
    path = home / rel
    of_file = q(store, ENTRIES, agent, str(path))
    assert of_file, "the fixture's file gives entries"
    before, usage = q(store, ALL, agent), q(store, USAGE, agent)
    path.unlink()  # the agent deleted its file (the database, if any, stays)
    r = reparse(store, agents=[agent])
    assert r["agents"] == [agent]
    assert q(store, ENTRIES, agent, str(path)) == of_file
    assert q(store, ALL, agent) == before
    assert q(store, USAGE, agent) == usage
    assert all(e["removed"] == 0 and e["changed"] == 0 for e in r["diff"]["entries"])


"""Format drift of sst/opencode's JSON tree (issue 25, item 2): files keyed by the id
inside the JSON, not the file name; part ids scoped by message. Fixture:
tests/fixtures/drift/opencode (README.md there names the sources)."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ingest, q
from helpers_sources import ENTRY_TEXT

FIX = Path(__file__).parent.parent / "fixtures" / "drift" / "opencode"


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(FIX, home / ".local" / "share" / "opencode")
    return home


def test_a_session_is_read_through_the_ids_inside_its_files(tmp_path, store_home):
    ingest(_home(tmp_path), store_home, "opencode")
    rows = q(
        store_home,
        f"SELECT session_id, message_id, role, kind, {ENTRY_TEXT} FROM entries e "
        "WHERE kind = 'message' ORDER BY ts",
    )
    # both messages, each with its own part (one part id, two messages: not collapsed)
    assert rows == [
        ("ses_A1", "msg_U1", "user", "message", "why does the parser drop lines?"),
        ("ses_A1", "msg_A1", "assistant", "message", "It keys files by name; keying by id fixes it."),
    ]
    usage = q(
        store_home,
        "SELECT input_tokens, output_tokens, cache_read_tokens FROM usage WHERE agent = 'opencode'",
    )
    assert usage == [(200, 40, 10)]


def test_a_session_without_messages_is_named_not_silent(tmp_path, store_home):
    home = _home(tmp_path)
    shutil.rmtree(home / ".local/share/opencode/storage/message")
    ingest(home, store_home, "opencode")
    from ctxkeep.service.sources import SourcesRequest, sources

    res = sources(store_home, SourcesRequest.parse(), env={"HOME": str(home)})
    row = next(r for r in res.rows if r.agent == "opencode")
    assert "session ses_A1 (ses_copy.json): no message files under" in (row.reason or "")

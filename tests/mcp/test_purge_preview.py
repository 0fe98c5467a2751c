"""MCP ``ctx_purge`` (newuser17 F9): its errors name the schema's arguments
(``sessionId``, ``projectDir``: "known: session, scope, project" named the model's
fields, which the tool refuses), and the preview they ask for is one the tool can do:
``dryRun: true`` reports what a purge would remove and changes nothing."""

from __future__ import annotations

import pytest

from ctxkeep.errors import UsageError
from ctxkeep.mcp.server import PURGE_TOOL, Handlers, _line
from ctxkeep.service.purge import PurgeRequest
from tests.conftest import scalar

CLAUDE = "ef958aa1-0e93-49f0-bb71-150f63befcd1"


def _error(store, args) -> str:
    with pytest.raises(UsageError) as e:
        Handlers(store, store).ctx_purge(args)
    return _line(e.value, PurgeRequest)


def test_an_unknown_argument_lists_the_schemas_names(store):
    line = _error(store, {"sessionID": "ef95", "confirm": True})
    props = list(PURGE_TOOL["input_schema"]["properties"])
    assert line == f"unknown argument sessionID (sessionID) - known: {', '.join(props)}"
    assert {"sessionId", "projectDir", "dryRun"} <= set(props) and "session" not in props


def test_no_confirmation_is_the_cancelled_reply_saying_how_to_preview(store):
    text, data = Handlers(store, store).ctx_purge({"sessionId": "ef95"})
    assert text == (
        "Purge cancelled: no confirm was given. Preview with dryRun: true, then pass confirm: true to proceed."
    )
    assert data["cancelled"] is True and data["message"] == text


def test_dry_run_previews_and_changes_nothing(store):
    n = scalar(
        store, "SELECT count(*) FROM entries WHERE session_id = ? OR parent_session_id = ?", CLAUDE, CLAUDE
    )
    before = scalar(store, "SELECT count(*) FROM entries")
    text, data = Handlers(store, store).ctx_purge({"sessionId": "ef95", "dryRun": True})
    assert data["dry_run"] is True and data["removed"]["entries"] == n > 0
    assert text.startswith(f"would purge session {CLAUDE}") and f"{n} entries" in text
    assert scalar(store, "SELECT count(*) FROM entries") == before
    assert scalar(store, "SELECT count(*) FROM tombstones") == 0
    _, done = Handlers(store, store).ctx_purge({"sessionId": "ef95", "confirm": True})
    assert done["removed"]["entries"] == n  # the preview's figure

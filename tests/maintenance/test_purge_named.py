"""Purge by what the user sees (issue 11, issue 15 "Ids"): a session named by the prefix
that hits show, an ambiguous prefix listing its candidates, "no such session" with no
tombstone when nothing matches, a project matched through symlinks; the CLI and MCP
``ctx_purge`` behave the same (``maintenance.purge_named``)."""

from __future__ import annotations

import json
import os
import re

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.errors import AmbiguousSession, SessionNotFound
from ctxkeep.maintenance.purge_named import purge_named
from ctxkeep.maintenance.purge_request import parse_purge_request
from ctxkeep.mcp.server import Handlers
from tests.conftest import ingest, q, scalar

runner = CliRunner()
#: corpus claude-code/…/ef958aa1-….jsonl; its sub-agent file agent-a4ca7529859c158c2.jsonl
#: names it as parent
CLAUDE = "ef958aa1-0e93-49f0-bb71-150f63befcd1"


def _req(session=None, project=None, cwd="/tmp"):
    return parse_purge_request(session_id=session, project_dir=project, confirm=True, cwd=cwd)


def _own(store, sid):
    return scalar(
        store, "SELECT count(*) FROM entries WHERE session_id = ? OR parent_session_id = ?", sid, sid
    )


def test_purge_by_the_prefix_hits_show(store):
    hits = json.loads(
        runner.invoke(app, ["search", "little experiment", "--home", str(store), "--json", "-n", "50"]).stdout
    )["hits"]
    short = next(h["session_short_id"] for h in hits if h["session_id"] == CLAUDE)
    assert len(short) < len(CLAUDE)
    n = _own(store, CLAUDE)
    assert n > 100
    r = runner.invoke(app, ["purge", "--session", short, "--yes", "--home", str(store), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["session_id"] == CLAUDE and rep["removed"]["entries"] == n
    assert _own(store, CLAUDE) == 0
    assert q(store, "SELECT scope, value FROM tombstones") == [("session", CLAUDE)]
    # purging it again is a no-op that reports zeros (its tombstone says it was purged)
    again = purge_named(store, _req(CLAUDE))
    assert again["removed"]["entries"] == 0


def test_an_ambiguous_prefix_lists_the_candidates_and_changes_nothing(store):
    # the corpus's Aider history: 4 chat sessions aider-<16 hex of a SHA-256 of the
    # history's bytes before each> and the input history aider-input:<16 hex>, all
    # under the prefix aider-
    aider = sorted(s for (s,) in q(store, "SELECT DISTINCT session_id FROM entries WHERE agent = 'aider'"))
    assert len([a for a in aider if re.fullmatch(r"aider-[0-9a-f]{16}", a)]) == 4 and len(aider) == 5, aider
    prefix = "aider-"
    before = scalar(store, "SELECT count(*) FROM entries")
    with pytest.raises(AmbiguousSession) as e:
        purge_named(store, _req(prefix))
    assert sorted(s for _, _, s in e.value.candidates) == sorted(aider)
    r = runner.invoke(app, ["purge", "--session", prefix, "--yes", "--home", str(store)])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "ambiguous" in r.stderr
    shown = re.findall(r"(aider-\S+) \(aider\)", r.stderr)  # each candidate's short id
    assert len(shown) == 5 and all(sum(a.startswith(x) for x in shown) == 1 for a in aider), r.stderr
    with pytest.raises(AmbiguousSession):  # MCP: the same resolver, the same refusal
        Handlers(store, store).ctx_purge({"sessionId": prefix, "confirm": True})
    assert scalar(store, "SELECT count(*) FROM entries") == before
    assert scalar(store, "SELECT count(*) FROM tombstones") == 0


def test_no_such_session_adds_no_tombstone_in_cli_and_mcp(store):
    before = scalar(store, "SELECT count(*) FROM entries")
    r = runner.invoke(app, ["purge", "--session", "nosuch-session", "--yes", "--home", str(store)])
    assert r.exit_code == 1 and r.stderr.startswith("error: no such session nosuch-session")
    r = runner.invoke(app, ["purge", "--session", "nosuch-session", "--dry-run", "--home", str(store)])
    assert r.exit_code == 1 and "no such session" in r.stderr
    with pytest.raises(SessionNotFound, match="no such session nosuch-session"):
        Handlers(store, store).ctx_purge({"sessionId": "nosuch-session", "confirm": True})
    assert scalar(store, "SELECT count(*) FROM tombstones") == 0
    assert scalar(store, "SELECT count(*) FROM entries") == before


def test_cli_and_mcp_resolve_the_same_prefix(store, tmp_path):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(store, other, ignore=shutil.ignore_patterns("*.lock"))
    n = _own(store, CLAUDE)
    cli = json.loads(
        runner.invoke(app, ["purge", "--session", "ef95", "--yes", "--home", str(store), "--json"]).stdout
    )
    _, mcp = Handlers(other, other).ctx_purge({"sessionId": "ef95", "confirm": True})
    assert cli["session_id"] == mcp["session_id"] == CLAUDE
    assert cli["removed"]["entries"] == mcp["removed"]["entries"] == n


def _claude_session(path, sid, cwd, words):
    lines = [
        {
            "type": "user",
            "uuid": f"{sid}-u{i}",
            "parentUuid": None if i == 0 else f"{sid}-u{i - 1}",
            "sessionId": sid,
            "cwd": cwd,
            "timestamp": f"2025-06-01T10:0{i}:00.000Z",
            "message": {"role": "user", "content": w},
        }
        for i, w in enumerate(words)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_project_is_matched_through_symlinks_on_both_sides(tmp_path, store_home):
    real = tmp_path / "data" / "app"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "data")
    via_link = str(tmp_path / "link" / "app")
    home = tmp_path / "agent-home"
    projects = home / ".claude" / "projects"
    # one session recorded under the symlinked spelling, one under the real path, one elsewhere
    _claude_session(projects / "a" / "s-link.jsonl", "s-link", via_link, ["zebra one", "zebra two"])
    _claude_session(projects / "b" / "s-real.jsonl", "s-real", str(real / "sub"), ["zebra three"])
    _claude_session(projects / "c" / "s-else.jsonl", "s-else", str(tmp_path / "else"), ["zebra four"])
    ingest(home, store_home, "claude-code")
    assert {s for (s,) in q(store_home, "SELECT DISTINCT session_id FROM entries")} == {
        "s-link",
        "s-real",
        "s-else",
    }
    # named by its real path: the symlinked spelling's session goes too
    rep = purge_named(store_home, _req(project=str(real)))
    assert rep["removed"]["entries"] == 3
    assert {s for (s,) in q(store_home, "SELECT DISTINCT session_id FROM entries")} == {"s-else"}
    tombs = {v for (v,) in q(store_home, "SELECT value FROM tombstones WHERE scope = 'project'")}
    assert tombs == {str(real), via_link}
    # and named through the link, in a fresh store: the same two sessions
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    ingest(home, fresh, "claude-code")
    r = runner.invoke(app, ["purge", "--project", via_link, "--yes", "--home", str(fresh), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["removed"]["entries"] == 3
    assert {s for (s,) in q(fresh, "SELECT DISTINCT session_id FROM entries")} == {"s-else"}
    # a project with nothing stored: refused, no tombstone
    empty = tmp_path / "empty"
    empty.mkdir()
    r = runner.invoke(app, ["purge", "--project", str(empty), "--yes", "--home", str(fresh)])
    assert r.exit_code == 1 and "nothing stored under project" in r.stderr
    assert str(empty) not in {v for (v,) in q(fresh, "SELECT value FROM tombstones")}
    assert os.path.realpath(via_link) == str(real)


def test_purge_names_the_backups_that_still_hold_the_data(store):
    """A purge leaves the store backups as they are (a restore would bring the data
    back), so its dry run and its result name each backup holding the scope, with its
    date and entry count, and how to remove it; after the purge the live store has none
    of the session and the backup still has every entry it had."""
    from ctxkeep.maintenance.backup import restore, run_backup

    own = _own(store, CLAUDE)
    assert own > 0
    path = run_backup(store)["path"]
    r = runner.invoke(app, ["purge", "--session", CLAUDE, "--dry-run", "--home", str(store)])
    assert r.exit_code == 0, r.output
    assert "1 store backup still holds this data" in r.stderr
    assert f"{path} (taken " in r.stderr and f"{own:,} entries" in r.stderr
    assert f"rm {path}" in r.stderr
    r = runner.invoke(app, ["purge", "--session", CLAUDE, "--yes", "--home", str(store), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert [(b["path"], b["entries"]) for b in rep["backups"]] == [(path, own)]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rep["backups"][0]["taken"])
    assert "rm " + path in rep["backups_note"]
    assert _own(store, CLAUDE) == 0
    restore(store, path)  # what the note warns about
    assert _own(store, CLAUDE) == own
    # --all names it too; with no backup there is nothing to say
    r = runner.invoke(app, ["purge", "--all", "--dry-run", "--home", str(store), "--json"])
    assert [b["path"] for b in json.loads(r.stdout)["backups"]] == [path]
    os.unlink(path)
    r = runner.invoke(app, ["purge", "--session", CLAUDE, "--yes", "--home", str(store), "--json"])
    assert json.loads(r.stdout)["backups"] == [] and "backup" not in r.stderr

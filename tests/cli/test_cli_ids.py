"""Session ids as users see them, across the commands (issue 15 "Ids"): every table and
hit shows the shortest unique prefix, every ``--session`` takes it back, an ambiguous
prefix lists its candidates (exit 2: wrong usage, give more characters), an unknown one
says "no such session" (exit 1)."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _ids(home) -> list[str]:
    c = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    try:
        return [s for (s,) in c.execute("SELECT DISTINCT session_id FROM entries")]
    finally:
        c.close()


def _aider_prefix(home) -> str:
    """The prefix the corpus's four Aider chat sessions (and its input history session)
    share: ``aider-`` (parser v3: ``aider-`` and 16 hex digits of the SHA-256 of the
    history's bytes before the session; before, 8 hex digits of the path's)."""
    chat = sorted(i for i in _ids(home) if re.fullmatch(r"aider-[0-9a-f]{16}", i))
    assert len(chat) == 4, chat
    return "aider-"


def test_every_shown_id_is_unique_and_taken_back(home):
    ids = _ids(home)
    rows = json.loads(runner.invoke(app, ["sessions", "--home", home, "--json", "--empty"]).stdout)[
        "sessions"
    ]
    assert len({r["short_id"] for r in rows}) == len(rows) == len(ids)
    for r in rows:
        got = json.loads(
            runner.invoke(app, ["show", "--session", r["short_id"], "--home", home, "--json"]).stdout
        )
        assert got["session_id"] == r["session_id"]
    # the four Aider chat sessions: four different ids (were all "aider-0b4746" in hits)
    prefix = _aider_prefix(home)
    aider = {
        r["session_id"]: r["short_id"]
        for r in rows
        if r["session_id"].startswith(prefix) and not r["session_id"].startswith("aider-input:")
    }
    assert len(aider) == len(set(aider.values())) == 4
    # hits show the same short ids as the table
    short = {r["session_id"]: r["short_id"] for r in rows}
    hits = json.loads(runner.invoke(app, ["search", "the", "--home", home, "--json", "-n", "50"]).stdout)[
        "hits"
    ]
    assert len({h["session_id"] for h in hits}) > 3
    assert all(h["session_short_id"] == short[h["session_id"]] for h in hits)


@pytest.mark.skipif(
    not hasattr(__import__("ctxkeep.cli").cli, "exit_code"),
    reason="search/show/resume exit 2 for a UsageError once helper cli's exit-code contract (cli.exit_code) is merged",
)
@pytest.mark.parametrize(
    "args",
    [
        ["search", "the", "--session", "f"],
        ["search", "the", "--session", "AIDER"],
        ["show", "--session", "AIDER"],
        ["resume", "AIDER"],
        ["purge", "--session", "AIDER", "--dry-run"],
    ],
)
def test_an_ambiguous_prefix_lists_the_candidates(home, args):
    args = [_aider_prefix(home) if a == "AIDER" else a for a in args]
    r = runner.invoke(app, [*args, "--home", home])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and "ambiguous" in r.stderr and "Traceback" not in r.output
    prefix = args[args.index("--session") + 1] if "--session" in args else args[1]
    named = sorted({i.split("/")[0] for i in _ids(home) if i.startswith(prefix)})
    assert f"{len(named)} sessions start with it" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["search", "the", "--session", "nosuch"],
        ["show", "--session", "nosuch"],
        ["resume", "nosuch"],
        ["purge", "--session", "nosuch", "--dry-run"],
    ],
)
def test_an_unknown_session_is_no_such_session(home, args):
    r = runner.invoke(app, [*args, "--home", home])
    assert (
        r.exit_code == 1
        and r.stderr.startswith("error: no such session nosuch")
        and r.stderr.count("\n") == 1
    )


@pytest.mark.parametrize(
    "args,code,words",
    [
        # a value that can name nothing (too short, at or below 0, ambiguous): wrong usage, 2
        (["show", "1"], 2, "entry id '1' is too short (give at least 6 characters) (ENTRY_ID)"),
        (["show", "0"], 2, "entry id '0' is too short"),
        (["show", "LONG", "abc"], 2, "entry id 'abc' is too short"),
        (["show", "--session", "0"], 2, "session id prefix '0' is ambiguous"),
        (["search", "the", "--session", "0"], 2, "session id prefix '0' is ambiguous"),
        (["resume", "0"], 2, "session id prefix '0' is ambiguous"),
        (["purge", "--session", "0", "--dry-run"], 2, "session id prefix '0' is ambiguous"),
        (["vault", "restore", "0", "--dry-run"], 2, "session id prefix '0' is ambiguous"),
        (["quarantine", "show", "0"], 2, "id 0 is out of range (ID) - use at least 1"),
        (["quarantine", "show", "--", "-1"], 2, "id -1 is out of range (ID)"),
        # a well-formed id the store does not hold: a failure, 1
        (["show", "ffffffffffff"], 1, "no entry ffffffffffff (ENTRY_ID)"),
        (["show", "--session", "zzzz"], 1, "no such session zzzz"),
        (["quarantine", "show", "999999"], 1, "no quarantined line 999999 (ID)"),
    ],
)
def test_a_bad_id_or_index_is_wrong_usage_the_same_everywhere(home, args, code, words):
    """newuser14's leftover: ``show 1`` exited 1 ("too short") where ``show --session 0``
    exited 2 ("ambiguous"). A value that names nothing is wrong usage (2) in every
    command taking an id or index; an id the store does not hold is a failure (1)."""
    long_id = json.loads(runner.invoke(app, ["search", "the", "--home", home, "--json", "-n", "1"]).stdout)[
        "hits"
    ][0]["entry_id"]
    args = [long_id if a == "LONG" else a for a in args]
    r = runner.invoke(app, ["--home", home, *args])
    assert r.exit_code == code, r.output
    assert r.stderr.startswith("error: ") and words in r.stderr and r.stderr.count("\n") == 1, r.stderr

"""Session ids as users see them (issue 15 "Ids"): the shortest unique prefix that hits
and tables show, and the one resolver every ``--session`` and MCP session argument uses
(``sinks.sqlite.lookup``)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkeep.errors import AmbiguousSession, SessionNotFound, UsageError
from ctxkeep.sinks.sqlite.lookup import (
    MIN_SESSION_PREFIX,
    resolve_session,
    session_family,
    short_ids,
    short_session_ids,
)
from tests.conftest import CORPUS_HOME


def _mem_store(sessions: dict[str, str | None]) -> sqlite3.Connection:
    """An in-memory ``entry_rows`` table (the store's entries, schema v9) with the store's ``entries_session`` index: one
    or two entries per session id (``sessions``: id → parent id)."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE entry_rows(session_id TEXT, parent_session_id TEXT, agent TEXT, ts TEXT)")
    c.execute("CREATE INDEX entries_session ON entry_rows(session_id, ts)")
    for i, (s, p) in enumerate(sessions.items()):
        c.execute("INSERT INTO entry_rows VALUES (?, NULL, 'a', ?)", (s, f"t{i}"))
        c.execute("INSERT INTO entry_rows VALUES (?, ?, 'a', ?)", (s, p, f"u{i}"))
    return c


def sessions_of(c) -> dict[str, str | None]:
    return dict(c.execute("SELECT session_id, max(parent_session_id) FROM entry_rows GROUP BY 1"))


def _brute_shortest(c, x: str) -> str | None:
    for n in range(1, len(x) + 1):
        try:
            if resolve_session(c, x[:n]) == x:
                return x[:n]
        except (UsageError, SessionNotFound):
            continue
    return None


ids_st = st.lists(st.text("ab0/-", min_size=1, max_size=9), min_size=1, max_size=12, unique=True)


@settings(max_examples=300, deadline=None)
@given(ids_st, st.data())
def test_shown_prefix_always_resolves_back_and_is_never_shorter_than_possible(ids, data):
    # some ids become sub-agents of an id they start with (as Claude sidechains x/…)
    sessions: dict[str, str | None] = dict.fromkeys(ids)
    for y in ids:
        parents = [x for x in ids if y.startswith(x + "/")]
        if parents and data.draw(st.booleans()):
            sessions[y] = parents[0]
    c = _mem_store(sessions)
    shown = short_ids(list(sessions), sessions)
    assert shown == short_session_ids(c, list(sessions))  # the in-memory and the SQL forms agree
    for x, p in shown.items():
        assert resolve_session(c, p) == x  # never a collision
        if not x.startswith(p):  # a sidechain as <parent's short id>/<rest>
            parent = sessions[x]
            assert (
                parent and p == f"{shown[parent]}/{x[len(parent) + 1 :][: len(p) - len(shown[parent]) - 1]}"
            )
            continue
        assert len(p) >= min(MIN_SESSION_PREFIX, len(x))
        best = _brute_shortest(c, x)
        assert best is not None and len(p) >= len(best)
        if not any(sessions.values()):  # without sub-agents the prefix is the shortest one
            assert len(p) == max(len(best), min(MIN_SESSION_PREFIX, len(x)))


def test_a_sub_agent_of_a_parent_whose_short_id_holds_a_slash_is_shown_as_a_plain_prefix():
    # found by the property above: the parent 000// is shown as 000/, so its sub-agent
    # 000///0 compacted to 000//0 read back as a prefix 000 (too short): not compacted
    sessions = {"000//": None, "000///0": "000//"}
    c = _mem_store(sessions)
    shown = short_ids(list(sessions), sessions)
    assert shown == short_session_ids(c, list(sessions)) == {"000//": "000/", "000///0": "000///"}
    assert {x: resolve_session(c, p) for x, p in shown.items()} == {x: x for x in sessions}


def test_exact_id_wins_over_longer_ids_and_a_parent_folds_its_sidechains():
    c = _mem_store(
        {
            "aider-0b47469a-1": None,
            "aider-0b47469a-1549": None,
            "fe5e1c67": None,
            "fe5e1c67/sidechain-0d": "fe5e1c67",
            "fe5e1c67/sidechain-60": "fe5e1c67",
        }
    )
    assert resolve_session(c, "aider-0b47469a-1") == "aider-0b47469a-1"
    assert resolve_session(c, "aider-0b47469a-15") == "aider-0b47469a-1549"
    assert resolve_session(c, "fe5e") == "fe5e1c67"
    assert session_family(c, "fe5e1c67") == ["fe5e1c67", "fe5e1c67/sidechain-0d", "fe5e1c67/sidechain-60"]
    with pytest.raises(AmbiguousSession) as e:
        resolve_session(c, "fe5e1c67/side")
    assert [s for _, _, s in e.value.candidates] == ["fe5e1c67/sidechain-0d", "fe5e1c67/sidechain-60"]
    # a sidechain shows as <parent's short id>/<rest>, and is read back so
    assert short_ids(list(sessions_of(c)), sessions_of(c))["fe5e1c67/sidechain-0d"] == "fe5e/sidechain-0"
    assert resolve_session(c, "fe5e/sidechain-0") == "fe5e1c67/sidechain-0d"
    assert resolve_session(c, "fe5e/sidechain-6") == "fe5e1c67/sidechain-60"
    with pytest.raises(AmbiguousSession):
        resolve_session(c, "fe5e/side")
    with pytest.raises(SessionNotFound, match="no such session fe5e/nosuch"):
        resolve_session(c, "fe5e/nosuch")
    only = {"ses_stage0_small": None, "ses_stage0_small/sidechain-sys1": "ses_stage0_small"}
    assert short_ids(list(only), only) == {
        "ses_stage0_small": "ses_",
        "ses_stage0_small/sidechain-sys1": "ses_/side",
    }


def test_errors_name_what_went_wrong():
    c = _mem_store({"abcd1": None, "abcd2": None, "xyz9999": None})
    with pytest.raises(SessionNotFound, match="no such session nosuch"):
        resolve_session(c, "nosuch")
    with pytest.raises(AmbiguousSession) as e:
        resolve_session(c, "abc")
    assert e.value.total == 2 and [s for _, _, s in e.value.candidates] == ["abcd1", "abcd2"]
    assert "abcd1 (a), abcd2 (a)" in str(e.value)
    with pytest.raises(AmbiguousSession, match="too short"):  # unique, but under 4 characters
        resolve_session(c, "x")
    with pytest.raises(UsageError, match="empty"):
        resolve_session(c, "  ")
    import pickle

    again = pickle.loads(pickle.dumps(e.value))
    assert again.candidates == e.value.candidates and str(again) == str(e.value)


def test_corpus_aider_sessions_no_longer_collide(corpus_store):
    """Issue 15: four Aider sessions all showed as ``aider-13314c`` (12 characters).
    The corpus's Aider history files hold 4 sessions (one per ``# aider chat started
    at`` header, counted here from the files) plus the input history session."""
    home, _ = corpus_store
    headers = sum(
        p.read_text(errors="replace").count("# aider chat started at")
        for p in CORPUS_HOME.rglob(".aider.chat.history.md")
    )
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        aider = [r[0] for r in c.execute("SELECT DISTINCT session_id FROM entries WHERE agent = 'aider'")]
        chats = [s for s in aider if not s.startswith("aider-input:")]
        assert len(chats) == headers == 4
        # parser v3: content ids (aider-<sha256>), no longer aider-<path hash>-<offset>
        # whose 12-character cut was one id for four
        assert all(len(s) == len("aider-") + 16 for s in chats)
        shown = short_session_ids(c, chats)
        assert len(set(shown.values())) == 4
        for s, p in shown.items():
            assert resolve_session(c, p) == s
        every = [r[0] for r in c.execute("SELECT DISTINCT session_id FROM entries")]
        parents = dict(c.execute("SELECT session_id, max(parent_session_id) FROM entries GROUP BY 1"))
        assert short_ids(every, parents) == short_session_ids(c, every)
    finally:
        c.close()


def test_a_neighbour_steps_past_a_sessions_own_sidechains_up_to_max_scan(monkeypatch):
    """``_neighbour`` (one recursive statement) skips the sidechains ``x/…`` whose parent
    is ``x``, stops at one that is not (another session's id under ``x/``, a parent
    elsewhere), and gives None after ``MAX_SCAN`` sidechains in a row, as the step-by-step
    walk did."""
    from ctxkeep.sinks.sqlite import lookup

    side = {f"s1/side-{i}": "s1" for i in range(5)}
    c = _mem_store({"s0": None, "s1": None, **side, "s1/zz": "other", "s2": None})
    assert lookup._neighbour(c, "s1", below=False) == "s1/zz"  # a sub-path of another parent
    assert lookup._neighbour(c, "s1", below=True) == "s0"
    assert lookup._neighbour(c, "s1/side-2", below=False) == "s1/side-3"  # not its own sidechain
    c.execute("DELETE FROM entry_rows WHERE session_id = 's1/zz'")
    assert lookup._neighbour(c, "s1", below=False) == "s2"
    monkeypatch.setattr(lookup, "MAX_SCAN", 5)  # five sidechains: the fifth step is still one
    assert lookup._neighbour(c, "s1", below=False) is None
    monkeypatch.setattr(lookup, "MAX_SCAN", 6)
    assert lookup._neighbour(c, "s1", below=False) == "s2"
    assert lookup._neighbour(c, "s2", below=False) is None  # nothing above

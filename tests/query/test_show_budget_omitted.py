"""``show --session --budget``: the tokens it says it left out are those of the whole
turns it dropped, not of the cut a long message was given before the budget was filled
(newuser23 17: a 394,369-token message was reported as "~301 tokens left out")."""

from __future__ import annotations

from types import SimpleNamespace

from ctxkeep.query.sessions import Conversation, Turn, _fit


def _cut(text: str, entry_id: str, nbytes: int):
    return SimpleNamespace(text=text[:nbytes])


def _turn(i: int, role: str, text: str, tokens: int) -> Turn:
    return Turn(f"e{i}", "s", f"2026-01-01T00:00:0{i}Z", role, "message", None, text, tokens)


def test_a_dropped_long_message_counts_its_whole_tokens():
    turns = [
        _turn(1, "user", "first prompt", 3),
        _turn(2, "assistant", "six token reply here ok", 6),
        _turn(3, "user", "x" * 1_577_476, 394_369),  # the long message
        _turn(4, "user", "newest " * 20, 40),
        _turn(5, "assistant", "answer " * 20, 40),
    ]
    conv = Conversation("claude-code", "s", None, turns)
    _fit(conv, 100, _cut)
    kept = [t.entry_id for t in conv.turns]
    assert kept == ["e1", "e4", "e5"]
    assert conv.omitted == 2
    assert conv.omitted_tokens == 394_369 + 6
    assert "(~394,375 tokens) left out" in conv.note


def test_a_kept_cut_message_is_not_counted_as_left_out():
    turns = [_turn(1, "user", "y" * 4_000, 1_000), _turn(2, "assistant", "ok", 1)]
    conv = Conversation("claude-code", "s", None, turns)
    _fit(conv, 200, _cut)
    assert [t.entry_id for t in conv.turns] == ["e1", "e2"]
    assert conv.turns[0].tokens < 1_000  # cut to fit
    assert conv.omitted == 0 and conv.omitted_tokens == 0 and conv.note == ""

"""Tier 2 (sinks.fetch): full texts within a budget, head + tail with a marker that
gives the elided bytes and how to fetch them, offsets that reassemble the text."""

from __future__ import annotations

import re

import pytest

from ctxkeep.errors import UsageError
from ctxkeep.pipeline.notes import index_note
from ctxkeep.query.fetch import cut_text, fetch, resolve_ids
from ctxkeep.sinks import sqlite as sqlite_store

MARK = re.compile(
    r"\n\[… ctxkeep: ([\d,]+) bytes elided \(bytes (\d+)–(\d+) of (\d+)\); fetch them with "
    r"`ctxkeep show (\w+) --offset (\d+)` or ctx_fetch .*? …\]\n"
)


@pytest.fixture
def conn(store_home):
    c = sqlite_store.connect(store_home)
    yield c
    c.close()


def _long_text() -> str:
    return "".join(f"line {i:05d} 東京 naïve 😀 {'x' * (i % 50)}\n" for i in range(3000))


def test_whole_text_when_it_fits(conn):
    r = index_note(conn, "short", text="a short note")
    rows, problems = fetch(conn, [r["entry_id"]], budget_tokens=100)
    assert problems == [] and rows[0].text == "a short note" and not rows[0].truncated


def test_head_tail_and_marker_when_budget_cuts(conn):
    text = _long_text()
    r = index_note(conn, "long", text=text)
    rows, problems = fetch(conn, [r["entry_id"][:10]], budget_tokens=500)
    f = rows[0]
    assert f.truncated and f.entry_id == r["entry_id"]
    m = MARK.search(f.text)
    assert m, f.text[:300]
    elided, start, end, total = (
        int(m.group(1).replace(",", "")),
        int(m.group(2)),
        int(m.group(3)),
        int(m.group(4)),
    )
    b = text.encode("utf-8")
    assert total == len(b) == f.bytes and end - start == elided == f.elided_bytes
    head, tail = f.text[: m.start()], f.text[m.end() :]
    assert text.startswith(head) and text.endswith(tail) and head and tail
    assert len(head.encode()) == start and len(tail.encode()) == total - end
    assert m.group(5) == r["entry_id"] and int(m.group(6)) == start
    assert "1 of 1 entries cut" in problems[0]


def test_offsets_reassemble_the_exact_text(conn):
    text = _long_text()
    r = index_note(conn, "long", text=text)
    rows, _ = fetch(conn, [r["entry_id"]], budget_tokens=400)
    parts, nxt = [rows[0].text[: MARK.search(rows[0].text).start()]], rows[0].next_offset
    while nxt is not None:
        f = fetch(conn, [r["entry_id"]], budget_tokens=4000, offset=nxt)[0][0]
        m = MARK.search(f.text)
        parts.append(f.text[: m.start()] if m else f.text)
        nxt = f.next_offset
    assert "".join(parts) == text


def test_budget_is_shared_in_order(conn):
    a = index_note(conn, "a", text="alpha " * 200)["entry_id"]
    b = index_note(conn, "b", text="beta " * 2000)["entry_id"]
    rows, problems = fetch(conn, [a, b], budget_tokens=400)
    assert not rows[0].truncated and rows[0].text == "alpha " * 200
    assert rows[1].truncated and rows[1].tokens < 400
    assert "1 of 2 entries cut" in problems[-1]


def test_utf8_never_split_in_cuts():
    text = "字" * 10000
    for cap in (1, 2, 100, 1001, 29999):
        out = cut_text(text, "e" * 32, cap)
        assert "\ufffd" not in out.text
        assert out.elided_bytes % 3 == 0


def test_ids_unknown_short_ambiguous(conn):
    r = index_note(conn, "x", text="some text")
    found, problems = resolve_ids(conn, [r["entry_id"], "ffffffffff", r["entry_id"][:8]])
    assert found == [r["entry_id"]]
    assert problems == ["no entry ffffffffff"]
    # an id too short to name an entry is wrong usage (exit 2), as a bad --session is
    with pytest.raises(UsageError, match="entry id 'abc' is too short"):
        resolve_ids(conn, [r["entry_id"], "abc"])


def test_offset_errors(conn):
    a = index_note(conn, "a", text="alpha")["entry_id"]
    b = index_note(conn, "b", text="beta")["entry_id"]
    with pytest.raises(UsageError, match="one entry id at a time"):
        fetch(conn, [a, b], offset=2)
    with pytest.raises(UsageError, match="outside the text"):
        fetch(conn, [a], offset=99)


def test_fetch_corpus_tool_output(corpus_store):
    """A real 60+ KB tool result from the corpus comes back cut, with its marker."""
    home, _ = corpus_store
    c = sqlite_store.connect(home, readonly=True)
    eid, n = c.execute(
        "SELECT entry_id, text_bytes FROM entries WHERE kind='tool_result' ORDER BY text_bytes DESC LIMIT 1"
    ).fetchone()
    assert n > 50_000
    f = fetch(c, [eid], budget_tokens=1000)[0][0]
    assert f.truncated and f.bytes == n and MARK.search(f.text)
    assert len(f.text.encode()) < 6000


def test_a_cut_text_stays_within_its_budget_marker_included(corpus_store):
    """The 30 largest corpus texts, cut to a budget: the piece (head, marker, tail) is
    estimated at no more than the budget (below ~60 tokens the marker alone is more)."""
    from ctxkeep.transforms.tokens import heuristic_tokens

    home, _ = corpus_store
    c = sqlite_store.connect(home, readonly=True)
    ids = [
        r[0]
        for r in c.execute(
            "SELECT entry_id FROM entries WHERE text_bytes > 5000 ORDER BY text_bytes DESC LIMIT 30"
        )
    ]
    assert len(ids) == 30
    for budget in (100, 300, 1000, 3000):
        for eid in ids:
            f = fetch(c, [eid], budget_tokens=budget)[0][0]
            assert f.tokens <= budget, (budget, eid, f.tokens)
            if budget <= 300:
                assert f.truncated
            if f.truncated:
                assert MARK.search(f.text) and f.tokens == heuristic_tokens(f.text), (budget, eid)
    c.close()


def test_an_offset_into_a_short_entry_returns_the_rest(conn):
    """`show ID --offset 10` of a 61-byte entry printed only a marker pointing at the same
    offset (a loop): the rest of a short text comes back whole, with no marker."""
    text = "a short note of sixty-one bytes, fetched from byte ten onward."
    eid = index_note(conn, "short", text=text)["entry_id"]
    for offset in (1, 10, len(text.encode())):
        f = fetch(conn, [eid], offset=offset)[0][0]
        assert f.text == text.encode()[offset:].decode() and f.next_offset is None
        assert not MARK.search(f.text)

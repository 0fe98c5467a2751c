"""Facet tokens (schema v3): filters answered inside the FTS5 match.

Checked: the token format and project prefixes; chunks carry the tokens of every
entry holding their text, also when a later entry shares a stored text; the
per-field cap; filtered search with facets returns exactly what the per-chunk check
returned before (corpus); a v2 store is migrated; reindex drops tokens of purged
entries."""

from __future__ import annotations

import re
import sqlite3

import pytest

from ctxkeep.errors import SessionNotFound, StoreError
from ctxkeep.maintenance.reindex import rebuild_fts
from ctxkeep.pipeline.transform import transform_batch
from ctxkeep.query import search as S
from ctxkeep.query.search import retrieve
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import Batch
from ctxkeep.transforms import facets as fx
from tests.sinks.v8_store import entries_as_v8


def test_token_format_is_prefix_and_twelve_digits():
    t = fx.token("fk", "message")
    assert re.fullmatch(r"fk\d{12}", t)
    assert t == fx.token("fk", "MESSAGE")  # values are lower-cased
    assert t != fx.token("fk", "tool_call") and t != fx.token("fr", "message")
    assert fx.wildcard("fs") == "fs0"


def test_project_keys_are_the_filter_values_that_match():
    assert fx.project_keys("/Users/chip/dev/x") == (
        "/",
        "/Users",
        "/Users/chip",
        "/Users/chip/dev",
        "/Users/chip/dev/x",
    )
    assert fx.project_keys("rel/dir") == ("rel", "rel/dir")
    assert fx.project_keys(None) == () and fx.project_keys("") == ()


def test_merge_caps_a_field_with_its_wildcard():
    sessions = {fx.token("fs", f"s{i}") for i in range(fx.MAX_VALUES["fs"] + 1)}
    merged = fx.merge(sessions | {fx.token("fk", "message")})
    assert merged.split() == [fx.token("fk", "message"), "fs0"]
    few = sorted(list(sessions)[:3])
    assert fx.merge(few).split() == few
    assert fx.merge({"fs0", few[0]}) == "fs0"  # a capped field stays capped


def _entry(session: str, text: str, *, kind="message", role="user", tool=None, project="/w/p", n=0):
    return {
        "agent": "claude-code",
        "session_id": session,
        "native_id": f"{session}-{n}",
        "part": 0,
        "project_dir": project,
        "ts": f"2025-06-0{1 + n % 9}T10:00:00Z",
        "role": role,
        "kind": kind,
        "tool_name": tool,
        "text": text,
        "record_id": f"{session}-{n}",
        "source_path": "/x.jsonl",
        "source_offset": n,
    }


def _load(conn, entries):
    frames = transform_batch(conn, Batch(entries, [], None), {})
    return sqlite_store.load_batch(conn, quarantine=[], **frames)


def _facets_of(conn, text):
    return (
        conn.execute(
            "SELECT ch.facets FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
            "WHERE ch.text = ?",
            (text,),
        )
        .fetchone()[0]
        .split()
    )


def test_a_later_entry_sharing_a_text_adds_its_tokens(store_home):
    conn = sqlite_store.connect(store_home)
    text = "the zebrafish deploy finished"
    assert _load(conn, [_entry("s1", text)]) == 1
    assert fx.token("fs", "s1") in _facets_of(conn, text)
    assert fx.token("fs", "s2") not in _facets_of(conn, text)
    # same text, another session, a tool result: stored once, tokens merged, re-indexed
    assert _load(conn, [_entry("s2", text, kind="tool_result", role="tool", tool="Bash", n=1)]) == 1
    toks = _facets_of(conn, text)
    for t in (
        fx.token("fs", "s1"),
        fx.token("fs", "s2"),
        fx.token("fk", "tool_result"),
        fx.token("ft", "bash"),
        fx.token("fp", "/w"),
    ):
        assert t in toks
    assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 1
    hits = S.search(conn, "zebrafish", filters=S.Filters(session="s2", tool="bash")).hits
    assert [h.session_id for h in hits] == ["s2"] and hits[0].duplicates == 1
    assert [h.session_id for h in S.search(conn, "zebrafish", filters=S.Filters(session="s1")).hits] == ["s1"]
    with pytest.raises(SessionNotFound):  # a session the store does not hold is named, not searched
        S.search(conn, "zebrafish", filters=S.Filters(session="s3"))
    # the grams index carries the same tokens (camelCase text → a grams row)
    _load(conn, [_entry("s3", "call validateUserInput now", n=2)])
    _load(conn, [_entry("s4", "call validateUserInput now", n=3)])
    hits = S.search(conn, "UserInput", filters=S.Filters(session="s4")).hits
    assert [h.session_id for h in hits] == ["s4"] and "grams" in hits[0].matched
    conn.close()


def test_a_text_in_many_sessions_gets_the_session_wildcard(store_home):
    conn = sqlite_store.connect(store_home)
    text = "[Request interrupted by user]"
    n = fx.MAX_VALUES["fs"] + 2
    for i in range(n):
        _load(conn, [_entry(f"s{i}", text, n=i)])
    assert "fs0" in _facets_of(conn, text)
    assert not any(t.startswith("fs") and t != "fs0" for t in _facets_of(conn, text))
    # every session still finds it: the wildcard admits the chunk, the exact check picks the entry
    for i in (0, n - 1):
        hits = S.search(conn, "interrupted", filters=S.Filters(session=f"s{i}")).hits
        assert [h.session_id for h in hits] == [f"s{i}"]
    conn.close()


FILTERS = [
    {"agent": "codex"},
    {"kind": "message"},
    {"role": "user"},
    {"tool": "bash"},
    {"agent": "claude-code", "kind": "tool_call"},
    {"kind": "tool_result", "agent": "codex"},
    {"project": "/Users"},
    {"since": "2025-10-01", "kind": "message"},
    {"status": "active", "role": "assistant"},
]
QUERIES = ["error", "test file", "commit", "README", "useTodos", "调研", '"command not found"', "the"]


def test_filtered_search_with_facets_equals_the_exact_check(corpus_store, monkeypatch):
    """On the corpus (no term has more matches than the rank window), moving the
    filters into the MATCH must not change a single hit."""
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    assert sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION
    matches: list[str] = []
    window = retrieve.ranked_window
    monkeypatch.setattr(
        retrieve,
        "ranked_window",
        lambda c, fts, m, n, t=None, s=None: matches.append(m) or window(c, fts, m, n, t, s),
    )
    with_facets = {
        (q, i): [h.entry_id for h in S.search(conn, q, filters=S.Filters(**f), limit=10).hits]
        for q in QUERIES
        for i, f in enumerate(FILTERS)
    }
    # every filtered list ran with its filters inside the MATCH
    assert matches and all(" AND facets : (" in m for m in matches)
    matches.clear()
    monkeypatch.setattr(sqlite_store, "schema_version", lambda c: 2)  # the pre-facet path
    exact = {
        (q, i): [h.entry_id for h in S.search(conn, q, filters=S.Filters(**f), limit=10).hits]
        for q in QUERIES
        for i, f in enumerate(FILTERS)
    }
    conn.close()
    assert matches and not any("facets" in m for m in matches)
    assert with_facets == exact
    assert sum(1 for v in exact.values() if v) >= 40  # the comparison is not over empty results


def test_every_chunk_has_the_kind_of_each_entry_holding_it(corpus_store):
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    rows = conn.execute(
        "SELECT e.kind, e.agent, ch.facets FROM entries e JOIN contents c ON "
        "c.content_hash = e.content_hash JOIN chunks ch ON ch.content_id = c.content_id"
    ).fetchall()
    conn.close()
    assert len(rows) > 1000
    for kind, agent, facets in rows:
        toks = facets.split()
        assert fx.token("fk", kind) in toks and (fx.token("fa", agent) in toks or "fa0" in toks)


def _downgrade_to_v2(path):
    c = sqlite3.connect(path)
    entries_as_v8(c)
    c.execute("DROP TABLE fts_words")
    c.execute("DROP TABLE fts_grams")
    c.execute("ALTER TABLE chunks DROP COLUMN facets")
    c.execute(
        "CREATE VIRTUAL TABLE fts_words USING fts5(title, text, content='chunks', "
        "content_rowid='chunk_id', tokenize='porter unicode61 remove_diacritics 2')"
    )
    c.execute("INSERT INTO fts_words(fts_words) VALUES('rebuild')")
    c.execute("CREATE VIRTUAL TABLE fts_grams USING fts5(grams, tokenize='unicode61 remove_diacritics 0')")
    c.execute("DROP INDEX entries_content")
    c.execute("CREATE INDEX entries_content ON entries(content_hash)")
    c.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    c.commit()
    c.close()


def test_v2_store_is_migrated(store_home):
    conn = sqlite_store.connect(store_home)
    _load(conn, [_entry("s1", "alpha zebrafish"), _entry("s2", "beta zebrafish validateUserInput", n=1)])
    conn.close()
    _downgrade_to_v2(store_home / "store.db")
    # a reader needs v9 (entries over file and content ids): it says what to do
    with pytest.raises(StoreError, match="store schema v2 is older"):
        sqlite_store.connect(store_home, readonly=True)
    conn = sqlite_store.connect(store_home)
    assert sqlite_store.schema_version(conn) == sqlite_store.SCHEMA_VERSION
    assert [r[1] for r in conn.execute("PRAGMA table_info(fts_words)")] == ["title", "text", "facets"]
    assert [r[1] for r in conn.execute("PRAGMA table_info(fts_grams)")] == ["grams", "facets"]
    assert [r[2] for r in conn.execute("PRAGMA index_info(entries_content)")] == ["content_id", "ts"]
    assert fx.token("fs", "s2") in _facets_of(conn, "beta zebrafish validateUserInput")
    assert [h.session_id for h in S.search(conn, "zebrafish", filters=S.Filters(session="s2")).hits] == ["s2"]
    assert [h.session_id for h in S.search(conn, "UserInput", filters=S.Filters(session="s2")).hits] == ["s2"]
    assert S.search(conn, "UserInput", filters=S.Filters(session="s1")).hits == []
    conn.close()


def test_reindex_drops_the_tokens_of_deleted_entries(store_home):
    conn = sqlite_store.connect(store_home)
    text = "shared zebrafish text"
    _load(conn, [_entry("s1", text), _entry("s2", text, n=1)])
    with sqlite_store.write(conn):  # as a purge of s1 leaves it: the text stays for s2
        conn.execute("DELETE FROM entries WHERE session_id='s1'")
    assert fx.token("fs", "s1") in _facets_of(conn, text)
    r = rebuild_fts(conn)
    assert r["facets_changed"] == 1 and r["chunks"] == 1
    assert fx.token("fs", "s1") not in _facets_of(conn, text)
    assert (
        conn.execute(
            "SELECT count(*) FROM fts_words WHERE fts_words MATCH ?", (f"facets:{fx.token('fs', 's1')}",)
        ).fetchone()[0]
        == 0
    )
    assert [h.session_id for h in S.search(conn, "zebrafish", filters=S.Filters(session="s2")).hits] == ["s2"]
    conn.close()


def test_a_filtered_window_ranked_by_its_terms_alone_has_the_same_ranks(corpus_store, monkeypatch):
    """``bm25()`` of ``(terms) AND facets : (…)`` equals ``bm25()`` of the terms on the
    same rows (the facets column weighs 0): the window ranked either way holds the same
    ``(chunk_id, rank)`` pairs, bit for bit, in the same order."""
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    compared = 0
    for q in QUERIES:
        for f in FILTERS:
            filters = S.Filters(**f).validate()
            fmatch = filters.facet_match()
            for fts, terms in (("fts_words", S.words_match(q)), ("fts_grams", S.grams_match(q))):
                if not (fmatch and terms):
                    continue
                full = f"({terms}) AND {fmatch}"
                seen: list[str] = []
                # the terms-alone ranking, as with ``bm25()`` (``ck_bm25`` ranks the whole
                # MATCH in one walk: test_native_rank.py)
                monkeypatch.setattr(retrieve.native_rank, "ready", lambda c: False)
                conn.set_trace_callback(seen.append)
                by_terms = retrieve.ranked_window(conn, fts, full, 50, terms)
                conn.set_trace_callback(None)
                as_is = retrieve.ranked_window(conn, fts, full, 50)
                monkeypatch.undo()
                assert by_terms == as_is == retrieve.ranked_window(conn, fts, full, 50, terms), (q, f, fts)
                ranked = [s for s in seen if "bm25(" in s]
                if as_is[0]:  # ranked by the terms alone: no facet phrase in the ranked MATCH
                    assert (
                        len(ranked) == 1
                        and "facets" not in ranked[0].split(" MATCH ")[1].split(" AND rowid")[0]
                    )
                    compared += 1
                monkeypatch.setattr(retrieve.native_rank, "ready", lambda c: False)
                monkeypatch.setattr(retrieve, "TERMS_SPAN", 0)  # too many term matches: as it is
                assert retrieve.ranked_window(conn, fts, full, 50, terms) == as_is
                monkeypatch.undo()
    conn.close()
    assert compared >= 40

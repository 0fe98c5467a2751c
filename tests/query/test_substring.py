"""Inner substrings (``allbac`` in ``callback``) through the vocabulary's trigram index,
and ``c++``/``C#``/``.NET`` searched as written (issue 15, "Search edge cases")."""

from __future__ import annotations

import pytest

from ctxkeep.pipeline.notes import index_note
from ctxkeep.query.search import search
from ctxkeep.sinks import sqlite as sqlite_store


@pytest.fixture(scope="module")
def corpus_conn(corpus_store):
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    yield conn
    conn.close()


@pytest.fixture
def notes_conn(store_home):
    conn = sqlite_store.connect(store_home)
    yield conn
    conn.close()


@pytest.mark.parametrize("sub", ["allbac", "penPrintTa"])
def test_inner_substring_is_found_in_the_corpus(corpus_conn, sub):
    # the corpus holds the substring only inside longer words (read with instr, not search)
    n_inside = corpus_conn.execute(
        "SELECT count(*) FROM chunks WHERE instr(lower(text), ?) > 0", (sub.lower(),)
    ).fetchone()[0]
    assert n_inside > 0
    hits = search(corpus_conn, sub, limit=10).hits
    assert hits, f"{sub!r} is in {n_inside} chunks but search found nothing"
    for h in hits:
        text = corpus_conn.execute(
            "SELECT group_concat(ch.text, '') FROM entries e JOIN contents c ON c.content_hash = e.content_hash "
            "JOIN chunks ch ON ch.content_id = c.content_id WHERE e.entry_id = ?",
            (h.entry_id,),
        ).fetchone()[0]
        assert sub.lower() in text.lower()
        assert "subs" in h.matched


def test_symbol_terms_are_searched_as_written(notes_conn):
    index_note(notes_conn, "cpp", text="compile it with c++ 17 and clang")
    index_note(notes_conn, "csharp", text="the service is written in C# on ASP.NET Core")
    index_note(notes_conn, "win", text=r"the file is at c:\Users\me\c\notes.txt, see c and C")
    index_note(notes_conn, "net", text="the net result: it works")
    assert [h.session_id for h in search(notes_conn, "c++").hits] == ["cpp"]
    assert [h.session_id for h in search(notes_conn, "C#").hits] == ["csharp"]
    assert [h.session_id for h in search(notes_conn, "c# core").hits] == ["csharp"]
    assert [h.session_id for h in search(notes_conn, "c++ clang").hits] == ["cpp"]
    net = [h.session_id for h in search(notes_conn, ".NET").hits]
    assert net[:1] == ["csharp"] and "win" not in net


def test_substring_hits_rank_below_whole_word_hits(notes_conn):
    index_note(notes_conn, "inner1", text="wired mycallbackfn into the loop")
    index_note(notes_conn, "whole", text="the callback is registered late")
    index_note(notes_conn, "inner2", text="onCallbackDone fires twice")
    hits = search(notes_conn, "callback").hits
    ids = [h.session_id for h in hits]
    assert ids[0] == "whole" and set(ids) == {"whole", "inner1", "inner2"}
    assert all("subs" in h.matched for h in hits[1:])


def test_migrated_store_searches_like_a_new_one(store_home, tmp_path):
    texts = {
        "a": "compile with c++ and wire mycallbackfn",
        "b": "C# on .NET, callback",
        "c": r"c:\Users\me",
    }
    conn = sqlite_store.connect(store_home)
    for k, v in texts.items():
        index_note(conn, k, text=v)
    queries = ["c++", "C#", ".NET", "allbac", "callback", "users"]
    new = {q: [h.session_id for h in search(conn, q).hits] for q in queries}
    # make it a v4 store: the old fts_grams tokenizer, no vocabulary
    with sqlite_store.write(conn):
        conn.execute("DROP TABLE fts_vocab")
        conn.execute("DROP TABLE vocab")
        conn.execute("DROP TABLE fts_grams")
        conn.execute(
            "CREATE VIRTUAL TABLE fts_grams USING fts5(grams, facets, tokenize='unicode61 remove_diacritics 0')"
        )
        conn.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    conn.close()
    conn = sqlite_store.connect(store_home)  # migrates
    assert sqlite_store.schema_version(conn) == 9
    assert {q: [h.session_id for h in search(conn, q).hits] for q in queries} == new
    assert new["c++"] == ["a"] and sorted(new["allbac"]) == ["a", "b"]
    conn.close()

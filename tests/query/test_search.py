"""Search (query.search): safe user queries, raw mode, filters, exact ids/paths/
errors, recency ties, budget and snippets — on the real corpus and on small notes — and
what a search costs in SQLite (statements counted, not timed)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ctxkeep.errors import SearchSyntaxError, StoreError, UsageError
from ctxkeep.pipeline.notes import index_note
from ctxkeep.query.search import SNIPPET_MAX_CHARS, Filters, parse_when, search, terms, words_match
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite.connection import READ_MMAP_BYTES
from ctxkeep.sinks.sqlite.ddl import SCHEMA_VERSION


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


@pytest.mark.parametrize(
    "q",
    [
        "c++",
        '"unbalanced',
        "foo AND",
        "a-b",
        "it's",
        "NOT",
        "(x",
        "OR",
        "*",
        '"',
        "AND OR NOT",
        "col:value",
        "^start",
        "NEAR(a b)",
        "x -y",
        "",
    ],
)
def test_user_queries_never_raise(corpus_conn, q):
    res = search(corpus_conn, q, limit=5)
    assert len(res.hits) <= 5


def test_tricky_queries_find_sensible_entries(corpus_conn):
    hits = search(corpus_conn, "it's", limit=3).hits
    assert hits and all("it" in h.snippet.lower() for h in hits)
    assert any("it's" in h.snippet or "it’s" in h.snippet for h in hits)
    hits = search(corpus_conn, "NOT", limit=3).hits
    assert hits and all("not" in h.snippet.lower() for h in hits)
    assert search(corpus_conn, "").hits == []


def test_quoted_terms_and_phrases():
    assert terms('foo "bar baz" "open') == ["foo", "bar baz", "open"]
    # c++ is searched as written on the substring index, not as the word c
    assert words_match('c++ "a b"') == '"a b"'
    assert words_match('.NET "a b"') == '".NET" AND "a b"'
    assert words_match("validate*") == '"validate"*'
    assert words_match("++ --") is None


def test_raw_mode_passes_syntax_and_reports_errors_in_one_line(corpus_conn):
    res = search(corpus_conn, "orchestrator NOT openapi", raw=True, limit=20)
    assert res.hits and all("openapi" not in h.snippet.lower() for h in res.hits)
    with pytest.raises(SearchSyntaxError) as ei:
        search(corpus_conn, "foo AND", raw=True)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("FTS5 syntax error") and "foo AND" in msg


def test_error_message_found_exactly(corpus_conn):
    h = search(corpus_conn, "python: command not found", limit=3).hits
    assert h[0].session_id.startswith("019a802a") and "exact" in h[0].matched
    assert "bash: line 1: python: command not found" in h[0].snippet


def test_path_found_exactly(corpus_conn):
    h = search(
        corpus_conn, "specs/005-orchestrator-architecture/contracts/orchestrator.openapi.yaml", limit=3
    ).hits
    assert h and all("exact" in x.matched for x in h)
    assert all(
        "specs/005-orchestrator-architecture/contracts/orchestrator.openapi.yaml" in x.snippet for x in h
    )


def test_hyphenated_id_found_exactly(notes_conn):
    index_note(notes_conn, "a", text="closed bd-q3fy after the review; next is bd-x9k2")
    index_note(notes_conn, "b", text="the bd tool reported q3fy as unknown, bd q3fy")
    index_note(notes_conn, "c", text="nothing about it")
    hits = search(notes_conn, "bd-q3fy").hits
    assert [h.session_id for h in hits][:1] == ["a"]
    assert hits[0].matched[:1] == ["words"] and "exact" in hits[0].matched


def test_ties_are_broken_by_recency(notes_conn):
    # the same words in three notes; the ranking features tie, so newer goes first
    for label in ("old", "mid", "new"):
        index_note(notes_conn, label, text=f"deploy the staging cluster ({label[0]})")
    stamps = {
        "old": "2025-01-01T00:00:00.000000Z",
        "mid": "2025-06-01T00:00:00.000000Z",
        "new": "2025-12-01T00:00:00.000000Z",
    }
    with sqlite_store.write(notes_conn):
        for label, ts in stamps.items():
            notes_conn.execute("UPDATE entries SET ts=? WHERE session_id=?", (ts, label))
    hits = search(notes_conn, "deploy staging cluster").hits
    assert [h.session_id for h in hits] == ["new", "mid", "old"]


def test_filters_each_and_combined(corpus_conn):
    cases = [
        (Filters(agent="codex"), lambda h: h.agent == "codex"),
        (Filters(kind="tool_call"), lambda h: h.kind == "tool_call"),
        (Filters(role="user"), lambda h: h.role == "user"),
        (Filters(tool="bash"), lambda h: (h.tool_name or "").lower() == "bash"),
        (
            Filters(session="c61729d4-da6d-46a4-9a29-ec2c614e5e23"),
            lambda h: h.session_id.startswith("c61729d4"),
        ),
        (Filters(project="/path/to/Demo"), lambda h: h.project_dir.startswith("/path/to/Demo")),
        (Filters(since="2025-11-01", until="2025-11-02"), lambda h: "2025-11-01" <= h.ts < "2025-11-02"),
        (Filters(status="active"), lambda h: True),
        (
            Filters(agent="claude-code", kind="tool_call", tool="Bash", since="2025-09-01"),
            lambda h: h.agent == "claude-code" and h.tool_name == "Bash" and h.ts >= "2025-09-01",
        ),
        (Filters(kind="message,summary"), lambda h: h.kind in ("message", "summary")),
    ]
    for f, ok in cases:
        hits = search(corpus_conn, "npm OR test OR error OR file", filters=f, limit=20).hits
        assert hits, f
        assert all(ok(h) for h in hits), f
    assert search(corpus_conn, "npm", filters=Filters(agent="codex", tool="Bash")).hits == []
    assert search(corpus_conn, "npm", filters=Filters(project="/path/to/Dem")).hits == []  # whole components


def test_bad_filter_values_are_usage_errors(corpus_conn):
    with pytest.raises(
        UsageError, match="unknown agent claude .agent. - use one of claude-code, traex, codex"
    ):
        search(corpus_conn, "x", filters=Filters(agent="claude"))
    with pytest.raises(UsageError, match="unknown kind bogus"):
        search(corpus_conn, "x", filters=Filters(kind="bogus"))
    with pytest.raises(UsageError, match="cannot read the time"):
        search(corpus_conn, "x", filters=Filters(since="last tuesday"))


def test_parse_when_forms():
    import datetime as dt

    now = dt.datetime(2026, 1, 10, 12, 0, tzinfo=dt.UTC)
    assert parse_when("2025-06-01") == "2025-06-01T00:00:00.000000Z"
    assert parse_when("2025-06-01T12:30:00+02:00") == "2025-06-01T10:30:00.000000Z"
    assert parse_when("7d", now=now) == "2026-01-03T12:00:00.000000Z"
    assert parse_when("12h", now=now) == "2026-01-10T00:00:00.000000Z"


def test_limit_is_clamped(corpus_conn):
    assert len(search(corpus_conn, "the", limit=-5).hits) == 1
    assert len(search(corpus_conn, "the", limit=10_000).hits) <= 200


def test_snippets_are_short_and_around_the_match(corpus_conn):
    for h in search(corpus_conn, "orchestrator", limit=10).hits:
        assert len(h.snippet) <= SNIPPET_MAX_CHARS
        assert "orchestrator" in h.snippet.lower()
        assert len(h.title) <= 120


def test_one_hit_per_text_and_near_duplicates_folded(corpus_conn):
    hits = search(corpus_conn, "timeline filtering groups", limit=10).hits
    assert len({h.entry_id for h in hits}) == len(hits)
    todo = [h for h in hits if h.tool_name == "TodoWrite" and "timeline-filter-groups" in h.title]
    assert len(todo) == 1 and todo[0].duplicates >= 3  # four versions of one todo list, shown once


def test_budget_cuts_and_says_so(corpus_conn):
    full = search(corpus_conn, "orchestrator", limit=10)
    assert len(full.hits) == 10 and full.omitted == 0 and full.note == ""
    cut = search(corpus_conn, "orchestrator", limit=10, budget_tokens=300)
    assert 0 < len(cut.hits) < 10
    assert [h.entry_id for h in cut.hits] == [h.entry_id for h in full.hits][: len(cut.hits)]
    assert cut.used_tokens <= 300 and cut.omitted == 10 - len(cut.hits)
    assert "budget of 300 tokens" in cut.note and f"{cut.omitted} more hit" in cut.note


def test_tool_name_weighs_above_body(corpus_conn):
    hits = search(corpus_conn, "WebFetch", limit=5).hits
    assert hits[0].tool_name == "WebFetch" and "tool" in hits[0].matched


def test_result_reads_as_its_hits(corpus_conn):
    res = search(corpus_conn, "orchestrator", limit=3)
    assert len(res) == 3 and [h.entry_id for h in res] == [h.entry_id for h in res.hits]
    assert res[0].entry_id == res.hits[0].entry_id
    assert search(corpus_conn, "zzqxjv-not-a-word") == []


def test_pasted_log_query_is_capped_and_says_so(corpus_store):
    """A query of 2,000 words once took minutes (each term widens every list); terms
    past MAX_TERMS are ignored and the result's note says so."""
    from ctxkeep.query.search import MAX_TERMS, search
    from ctxkeep.sinks import sqlite as sqlite_store

    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    res = search(conn, " ".join(["timeline"] * 2000 + ["filtering"]), limit=5)
    conn.close()
    assert res.note == f"only the first {MAX_TERMS} of 2001 query terms were searched"
    assert len(res.hits) == 5


def test_a_long_phrase_term_is_cut_to_its_first_words_and_says_so(corpus_store):
    """One term can be a phrase of thousands of words (``a.a.a...``, a pasted log line
    in quotes): FTS5 walks every match's positions once per phrase word, so 20,000
    words took 54 s on the corpus store. The query keeps its first MAX_WORDS words (a
    prefix of the phrase) and the note says so; a term is cut to MAX_TERM_CHARS."""
    from ctxkeep.query.search import search
    from ctxkeep.query.search.parse import MAX_TERM_CHARS, MAX_WORDS, cap_terms, terms
    from ctxkeep.sinks import sqlite as sqlite_store

    assert MAX_WORDS == 64 and MAX_TERM_CHARS == 1000
    assert terms("a." * 5000) == ["a." * 63 + "a"]
    assert terms('x "one two three" ' + "w " * 70) == ["x", "one two three"] + ["w"] * 30
    assert terms("ab" * 20000) == ["ab" * 500]
    assert cap_terms('"' + "step " * 100 + '"') == (
        '"' + " ".join(["step"] * 64) + '"',
        "only the first 64 of 100 query words were searched",
    )
    assert cap_terms("ab" * 20000) == ("ab" * 500, "query terms were cut to 1000 characters")
    assert cap_terms("pytest timeline") == ("pytest timeline", "")
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    res = search(conn, "timeline." * 3000, limit=5)
    conn.close()
    assert res.note.startswith("only the first 64 of 3000 query words were searched")


def test_prefix_only_where_the_last_token_is_long_enough():
    # FTS5 puts a phrase's * on its last token: "it's"* would mean "it s*", and
    # "PLACEHOLDER_RE"* the 130 ms expansion of re*
    from ctxkeep.query.search import prefix_match

    assert prefix_match("it's") == '"it\'s"'
    assert prefix_match("PLACEHOLDER_RE") == '"PLACEHOLDER_RE"'
    assert prefix_match("PLACEHOLDER_REG") == '"PLACEHOLDER_REG"*'  # reg* → PLACEHOLDER_REGEX
    assert (
        prefix_match("/a/diverse_musical_ai.py validateUs ab")
        == '"/a/diverse_musical_ai.py" OR "validateUs"* OR "ab"'
    )
    assert prefix_match("validateUs printer", {"printer"}) == '"validateUs"* OR "printer"'


def test_common_terms_get_no_prefix_query(corpus_store):
    from ctxkeep.query.search import PREFIX_COMMON, common_terms

    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    n_the = conn.execute("SELECT count(*) FROM fts_words WHERE fts_words MATCH 'the'").fetchone()[0]
    assert n_the >= PREFIX_COMMON
    assert common_terms(conn, "the validateUs zzqqxx") == {"the"}
    conn.close()


def _reference_fts_ids(conn, fts, match, filters, n, S):
    """The filtered candidate search as it was before the memo, batching and rank
    reuse (main at 56c14a2): every check and every rank done in full."""
    r = conn.execute(
        f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        (match, S.RANK_WINDOW),
    ).fetchone()
    floor = r[0] if r else 0
    ranked = f"SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? AND rowid > ? ORDER BY rank LIMIT ?"
    where, params = filters.sql("e")
    passes = (
        f"SELECT ch.chunk_id FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
        f"WHERE ch.chunk_id IN ({{ids}}) AND EXISTS (SELECT 1 FROM entry_rows e WHERE "
        f"e.content_id = c.content_id AND {where})"
    )
    rows = conn.execute(ranked, (match, floor, S.FILTER_DEPTH)).fetchall()
    if rows:
        ids = [r[0] for r in rows]
        ok = {r[0] for r in conn.execute(passes.format(ids=",".join("?" * len(ids))), [*ids, *params])}
        kept = [r for r in rows if r[0] in ok]
        if len(kept) >= n or (len(rows) < S.FILTER_DEPTH and floor == 0):
            return kept[:n]
    found = []
    cur = conn.execute(
        f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT ?", (match, S.FILTER_SCAN)
    )
    while len(found) < S.FILTER_RANK:
        batch = [r[0] for r in cur.fetchmany(1000)]
        if not batch:
            break
        ok = {r[0] for r in conn.execute(passes.format(ids=",".join("?" * len(batch))), [*batch, *params])}
        found += [i for i in batch if i in ok]
    if not found:
        return []
    top = found[: S.FILTER_RANK]
    keep = set(top)
    rows = [
        r
        for r in conn.execute(
            f"SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? AND rowid BETWEEN ? AND ?",
            (match, min(top), max(top)),
        )
        if r[0] in keep
    ]
    rows.sort(key=lambda r: r[1])
    return rows[:n]


def test_filtered_candidates_match_the_full_reference(corpus_conn, monkeypatch):
    """Memoized, early-stopping filter checks and reused window ranks give the same
    candidates (ids, ranks, order) as checking and ranking everything; small windows
    make every path run (fast path, scan, ranking below the window floor)."""
    from ctxkeep.query.search import retrieve as S

    for name, v in (("RANK_WINDOW", 40), ("FILTER_DEPTH", 20), ("FILTER_SCAN", 300), ("FILTER_RANK", 25)):
        monkeypatch.setattr(S, name, v)
    cases = [
        ('"error" OR "file" OR "test"', Filters(kind="tool_call")),
        ('"error" OR "file" OR "test"', Filters(role="user")),
        ('"npm"', Filters(tool="Bash")),
        ('"the"', Filters(agent="codex")),
        ('"file"*', Filters(project="/path/to/Demo")),
        ('"the" AND "file"', Filters(since="2025-11-01")),
    ]
    sizes = []
    content_of: dict[int, int] = {}  # chunk → content ids, shared by every case's second memo
    for match, f in cases:
        memo: dict[int, bool] = {}
        for n in (5, 50):
            want = _reference_fts_ids(corpus_conn, "fts_words", match, f, n, S)
            got = S.fts_ids(corpus_conn, "fts_words", match, f, n, memo)
            assert got == want, (match, f, n)
            sizes.append(len(want))
    for _ in range(2):  # the chunks' content ids known (kept answers): checked by content
        for match, f in cases:
            kept = S.Passed(content_of)
            for n in (5, 50):
                assert S.fts_ids(corpus_conn, "fts_words", match, f, n, kept) == _reference_fts_ids(
                    corpus_conn, "fts_words", match, f, n, S
                ), (match, f, n)
    assert len(content_of) > 300
    # the fast path (5 of 5), the scan path (25 = FILTER_RANK, 16 below it) and empty
    # results were all compared
    assert sizes == [5, 25, 5, 16, 5, 5, 0, 0, 0, 0, 5, 25]


def test_agents_list_is_the_source_registry_plus_notes():
    from ctxkeep.pipeline.notes import NOTE_AGENT
    from ctxkeep.schema import AGENTS
    from ctxkeep.sources import SOURCES

    assert (*SOURCES, NOTE_AGENT) == AGENTS


def test_distinct_texts_with_one_title_are_not_folded(corpus_conn):
    """Every patch of a Codex session starts ``apply_patch <<'PATCH'``: same session,
    kind, tool and title, different texts. They stay separate hits (session 1 folded
    221 of them into one)."""
    hits = search(corpus_conn, "apply_patch", limit=50).hits
    assert len(hits) == 50
    assert max(h.duplicates for h in hits) < 10


# ---- inner substrings and symbol terms (issue 15, "Search edge cases")


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
        conn.execute("DROP TABLE fts_symbols")
        conn.execute("DROP TABLE fts_grams")
        conn.execute(
            "CREATE VIRTUAL TABLE fts_grams USING fts5(grams, facets, tokenize='unicode61 remove_diacritics 0')"
        )
        conn.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    conn.close()
    conn = sqlite_store.connect(store_home)  # migrates
    assert sqlite_store.schema_version(conn) == SCHEMA_VERSION
    assert {q: [h.session_id for h in search(conn, q).hits] for q in queries} == new
    assert new["c++"] == ["a"] and sorted(new["allbac"]) == ["a", "b"]
    conn.close()


SYMBOL_QUERIES = ["notepad++", "i++", ".NET", "C#", "i++ loop"]


def _symbol_hits(conn) -> dict[str, list[str]]:
    """The hits of each symbol query (their order may differ between the layouts: BM25
    statistics of fts_grams in v7 are not those of fts_symbols)."""
    return {q: sorted(h.entry_id for h in search(conn, q, limit=20).hits) for q in SYMBOL_QUERIES}


def test_v7_store_migrates_and_finds_the_same_symbol_hits(store):
    """A v7 store (symbol terms and their chunks' words inside ``fts_grams``, no
    ``fts_symbols``) finds the same c++/C#/.NET hits after its migration (v8:
    ``fts_symbols``; ``fts_grams`` without the symbol rows) as before; read-only, it is
    refused until migrated (v9)."""
    from ctxkeep.transforms.grams import grams_batch, symbols_batch

    conn = sqlite_store.connect(store)
    new = _symbol_hits(conn)
    # the corpus holds these terms as written (no c++ or C#): every hit's text has it
    # (.NET also searches the word ``net``: its first hit)
    for q, want, ids in (
        ("notepad++", "notepad++", new["notepad++"]),
        ("i++", "i++", new["i++"]),
        (".NET", ".net", [h.entry_id for h in search(conn, ".NET").hits][:1]),
    ):
        assert ids, q
        for eid in ids:
            (h,) = conn.execute("SELECT content_hash FROM entries WHERE entry_id = ?", (eid,)).fetchone()
            assert want in (sqlite_store.content_text(conn, h) or "").lower()
    chunks = conn.execute("SELECT chunk_id, text, facets FROM chunks ORDER BY chunk_id").fetchall()
    texts = [t for _, t, _ in chunks]
    v7_rows = [
        (cid, " ".join(x for x in (g, y) if x), fac)
        for (cid, _, fac), g, y in zip(chunks, grams_batch(texts), symbols_batch(texts), strict=True)
        if g or y
    ]
    n_grams = sum(1 for g in grams_batch(texts) if g)
    n_syms = sum(1 for y in symbols_batch(texts) if y)
    assert n_syms and len(v7_rows) > n_grams  # the symbol rows v7 added to fts_grams
    with sqlite_store.write(conn):  # the v7 layout
        conn.execute("DROP TABLE fts_symbols")
        conn.execute("DROP TABLE fts_grams")
        conn.execute(
            "CREATE VIRTUAL TABLE fts_grams USING fts5(grams, facets, "
            "tokenize=\"unicode61 remove_diacritics 0 tokenchars '+#.'\")"
        )
        conn.executemany("INSERT INTO fts_grams(rowid, grams, facets) VALUES(?,?,?)", v7_rows)
        conn.execute("INSERT INTO fts_grams(fts_grams, rank) VALUES('rank', 'bm25(1.0, 0.0)')")
        conn.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
    conn.close()
    # a reader needs v9 (entries over file and content ids, schema v9): it asks for the upgrade
    with pytest.raises(StoreError, match="store schema v7 is older"):
        sqlite_store.connect(store, readonly=True)
    conn = sqlite_store.connect(store)  # migrates
    assert sqlite_store.schema_version(conn) == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM fts_grams").fetchone()[0] == n_grams
    assert conn.execute("SELECT count(*) FROM fts_symbols").fetchone()[0] == n_syms
    assert _symbol_hits(conn) == new
    conn.close()


# ---------------------------------------------------------------- what a search costs in SQLite
# counted rather than timed: a MATCH without any match is walked once and never ranked (no
# BM25 pass, whose per-phrase document counts scan each posting list again), the read-only
# connection maps the store, a search process imports no writer module


#: a statement that ranks: ``bm25()``, ``ck_bm25`` or ``ck_bm25_top`` (``retrieve.rank_expr``)
RANKS = re.compile(r"bm25(?:_top)?\(")


def _statements(conn, fn) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        conn.set_trace_callback(None)
    return seen


#: a word no corpus text holds (checked below), with a filter and without
NOWHERE = "qzxvkjwplorbfemtu"


@pytest.mark.parametrize("filters", [Filters(), Filters(kind="message"), Filters(since="2025-01-01")])
def test_a_match_without_matches_is_never_ranked(corpus_conn, filters):
    n = corpus_conn.execute("SELECT count(*) FROM fts_words WHERE fts_words MATCH ?", (f'"{NOWHERE}"',))
    assert n.fetchone()[0] == 0
    res = {}
    sql = _statements(corpus_conn, lambda: res.update(r=search(corpus_conn, NOWHERE, filters=filters)))
    assert res["r"].hits == []
    # the lists' statements: not the vocabulary's (substrings, "did you mean": its
    # fts5vocab tables and their statements inside SQLite, traced with "--")
    fts = [
        s
        for s in sql
        if " MATCH " in s
        and "fts_vocab" not in s
        and "count(*) FROM (SELECT rowid" not in s
        and not s.startswith("--")
        and "term_probe" not in s
    ]
    assert fts, "the lists ran no MATCH at all"
    # no ranking statement of its own: the only statement naming bm25() is the window
    # walk that ranks the newest matches as they come (``newest_ranked_sql``), which
    # calls it for no row here
    assert not [s for s in fts if RANKS.search(s) and "ORDER BY rowid DESC LIMIT" not in s], (
        "a list without matches was ranked"
    )
    # one statement per list (the window: its count, its ids when filtered, or its
    # newest matches ranked), not a second walk of the same MATCH
    window = [s for s in fts if "count(*), min(rowid)" in s or "ORDER BY rowid DESC LIMIT" in s]
    assert len(window) == len(fts)
    assert len({s.split(" MATCH ")[1] for s in fts}) == len(fts)


@pytest.mark.parametrize("window", [40, 2000])
def test_the_newest_matches_ranked_in_one_walk_are_the_window_above_its_floor(
    corpus_conn, monkeypatch, window
):
    """``newest_ranked_sql`` (one walk) gives the rows and ranks of counting the window's
    floor and ranking above it (``window_floor_sql`` then ``ranked_sql``),
    ``ranked_window`` of the whole window the same rows and floor as that pair, and
    the window newest first followed by ``older_sql`` from its floor the newest matches;
    with a window smaller than the matches (40) and larger (2000)."""
    from ctxkeep.query.search import retrieve

    monkeypatch.setattr(retrieve, "RANK_WINDOW", window)
    checked = 0
    for fts, match in [
        ("fts_words", '"error"'),
        ("fts_words", '"the"'),
        ("fts_words", '"file" OR "test" OR "commit"'),
        ("fts_words", '"exit" AND "code"'),
        ("fts_words", '"command not found"'),
        ("fts_grams", '("use todos"*)'),
    ]:
        count, oldest = corpus_conn.execute(*retrieve.window_floor_sql(fts, match)).fetchone()
        floor = oldest if count > window else 0
        for n in (1, 10, 50):
            two_walks = corpus_conn.execute(*retrieve.ranked_sql(fts, match, floor, n)).fetchall()
            one_walk = corpus_conn.execute(*retrieve.newest_ranked_sql(fts, match, window, n)).fetchall()
            assert one_walk == two_walks, (fts, match, n)
        whole = corpus_conn.execute(*retrieve.ranked_sql(fts, match, floor, window + 1)).fetchall()
        assert retrieve.ranked_window(corpus_conn, fts, match, window + 1) == (whole, floor)
        if floor:  # the window newest first, then the older walk: the newest matches
            newest = [r[0] for r in corpus_conn.execute(*retrieve.window_ids_sql(fts, match))]
            newest += [
                r[0]
                for r in corpus_conn.execute(
                    f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT 100 OFFSET ?",
                    (match, window + 1),
                )
            ]
            older = [r[0] for r in corpus_conn.execute(*retrieve.older_sql(fts, match, floor, 101))]
            assert sorted((r[0] for r in whole), reverse=True) + older == newest
        checked += bool(whole)
        if window == 40 and match == '"the"':
            assert floor > 0 and len(whole) == window  # the floor case is exercised
    assert checked >= 5


def test_a_match_with_matches_is_still_ranked(corpus_conn):
    sql = _statements(corpus_conn, lambda: search(corpus_conn, "error"))
    assert [s for s in sql if re.search(r"bm25(?:_top)?\(fts_words", s)]


def test_an_interactive_reader_maps_the_store_and_bulk_readers_do_not(corpus_store):
    home, _ = corpus_store
    conns = [
        sqlite_store.connect(home, readonly=True, mmap=True),  # search, show, MCP
        sqlite_store.connect(home, readonly=True),  # the DuckDB sync, the plan, backup
        sqlite_store.connect(home),
    ]
    try:
        got = [c.execute("PRAGMA mmap_size").fetchone()[0] for c in conns]
        assert got == [min(READ_MMAP_BYTES, 0x7FFF0000), 0, 0]
    finally:
        for c in conns:
            c.close()


def test_a_search_process_imports_no_writer_module():
    """``ctxkeep search`` imports the store's connection and lookups, not the modules
    only writers use (names of ``ctxkeep.sinks.sqlite`` load on first use), and every
    name the package lists still resolves."""
    code = (
        "import sys\n"
        "from ctxkeep.cli import core\n"
        "import ctxkeep.query.search\n"
        "from ctxkeep.sinks import sqlite as s\n"
        "s.connect, s.schema_version\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('ctxkeep.sinks.sqlite.'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "ctxkeep.sinks.sqlite.connection" in out and "ctxkeep.sinks.sqlite.lookup" in out
    for writer in ("load", "status", "media", "runs", "sync_marks"):
        assert f"ctxkeep.sinks.sqlite.{writer}" not in out
    for name in sqlite_store.__all__:
        assert getattr(sqlite_store, name) is not None
    with pytest.raises(AttributeError):
        sqlite_store.no_such_name  # noqa: B018


@pytest.mark.parametrize("filters", [Filters(), Filters(kind="tool_result"), Filters(since="2025-10-01")])
def test_candidates_load_the_newest_passing_holders_of_each_text_in_one_statement(corpus_conn, filters):
    """A batch of candidates loads, per text, the newest ``ENTRIES_PER_HIT`` entries
    holding it that pass the filters (meta records after the others) and the count of all its entries: the same as
    asking the ``entries`` view for each text on its own, in one statement for the
    batch (and one for the counts), not one or two per text."""
    from ctxkeep.query.search import retrieve

    # texts held by many entries (stock tool results, repeated prompts) and by one
    many = corpus_conn.execute(
        "SELECT content_hash FROM entries WHERE content_hash IS NOT NULL GROUP BY content_hash "
        "HAVING count(*) > ? ORDER BY count(*) DESC, content_hash LIMIT 12",
        (retrieve.ENTRIES_PER_HIT,),
    ).fetchall()
    one = corpus_conn.execute(
        "SELECT content_hash FROM entries WHERE content_hash IS NOT NULL GROUP BY content_hash "
        "HAVING count(*) = 1 ORDER BY content_hash LIMIT 12"
    ).fetchall()
    assert len(many) == 12 and len(one) == 12
    hashes = [h for (h,) in many + one]
    chunk_ids = [
        corpus_conn.execute(
            "SELECT ch.chunk_id FROM chunks ch JOIN contents c USING (content_id) "
            "WHERE c.content_hash = ? ORDER BY ch.seq LIMIT 1",
            (h,),
        ).fetchone()[0]
        for h in hashes
    ]
    cache: dict = {}
    sql = _statements(corpus_conn, lambda: retrieve.load_candidates(corpus_conn, chunk_ids, filters, cache))
    assert len([s for s in sql if "entry_rows" in s]) <= 2  # holders, counts
    cond, params = filters.sql("x")
    shown = 0
    for h, chunk_id in zip(hashes, chunk_ids, strict=True):
        want = corpus_conn.execute(
            f"SELECT entry_id, kind FROM entries x WHERE content_hash = ? AND {cond} "
            f"ORDER BY ts DESC, rowid DESC LIMIT ?",
            (h, *params, retrieve.ENTRIES_PER_HIT),
        ).fetchall()
        want.sort(key=lambda w: w[1] == "meta")  # the newest, meta records after the others
        total = corpus_conn.execute("SELECT count(*) FROM entries WHERE content_hash = ?", (h,)).fetchone()[0]
        got = cache[chunk_id]
        if not want:
            assert got is None
            continue
        shown += 1
        assert [e.entry_id for e in got.entries] == [w[0] for w in want]
        assert got.content_hash == h and got.total == total
    assert shown >= 6


@pytest.mark.parametrize(
    "q,filters",
    [
        ("foo AND", Filters()),
        ("foo AND", Filters(kind="message")),
        ("gui tab create-next-app", Filters()),
        ("exit code create-next-app", Filters()),
        ("printer validateUs", Filters()),
        ("AutoTokenizer", Filters()),
        ("validateUs", Filters()),
    ],
)
def test_the_substring_list_is_skipped_only_when_it_cannot_change_the_hits(
    corpus_conn, monkeypatch, q, filters
):
    """Inner-substring hits rank below every word-level hit: when the word-level lists
    fill ``limit`` hits after folding, the ``subs`` list is not searched (no vocabulary
    expansion), and the hits are the same, field for field, as when it is."""
    import ctxkeep.query.search as search_mod

    # (no "did you mean": its check runs searches of its own, ranked and counted apart)

    skipped = _statements(corpus_conn, lambda: search(corpus_conn, q, filters=filters, suggest_words=False))
    got = search(corpus_conn, q, filters=filters, suggest_words=False).as_dict()
    real = search_mod._rank
    calls = []

    def rank_forcing_subs(*a, **k):  # the first ranking reports no hits: subs always runs
        lists, sc, titles, kept, folded = real(*a, **k)
        calls.append(len(kept))
        return (lists, sc, titles, [] if len(calls) == 1 else kept, folded)

    monkeypatch.setattr(search_mod, "_rank", rank_forcing_subs)
    forced = _statements(corpus_conn, lambda: search(corpus_conn, q, filters=filters, suggest_words=False))
    assert len(calls) == 2, "the query has no inner-substring form"  # ranked again after subs
    calls.clear()
    assert search(corpus_conn, q, filters=filters, suggest_words=False).as_dict() == got
    assert [s for s in forced if "fts_vocab" in s]
    if calls[0] >= 10:  # the word-level lists filled the page: subs was not searched
        assert not [s for s in skipped if "fts_vocab" in s]
    else:
        assert [s for s in skipped if "fts_vocab" in s]


def test_a_text_held_by_a_message_and_a_history_record_shows_the_message(corpus_conn):
    # Aider's .aider.input.history repeats each chat input (meta entries of the
    # pseudo-session aider-input:<project>, newer timestamps than the chat's "####"
    # lines): the hit must lead to the conversation's message, the record counted
    hits = search(corpus_conn, "请你分析", limit=2).hits
    assert len(hits) == 2
    for h in hits:
        assert h.agent == "aider"
        assert h.kind == "message" and h.tool_name is None
        assert not h.session_id.startswith("aider-input:")
        assert h.duplicates == 1  # the input-history record of the same text


def test_phrase_match_only_for_plain_words():
    from ctxkeep.query.search import phrase_match

    assert phrase_match("organization must be verified") == '"organization must be verified"'
    assert phrase_match("connection refused") == '"connection refused"'
    assert phrase_match("fix bd-q3fy") == '"fix bd-q3fy"'
    # one term, the user's own quotes or prefix, symbol and CJK terms: no phrase list
    for q in ("refused", '"connection refused"', '"connection refused" codex', "connect* refused"):
        assert phrase_match(q) is None, q
    for q in ("c++ compiler", "C# core", "处理 gemini"):
        assert phrase_match(q) is None, q


def test_words_side_by_side_rank_above_words_apart(notes_conn, monkeypatch):
    import ctxkeep.query.search as search_mod

    # words apart, often (BM25 ranks it first), then the exact sentence in a longer text
    index_note(
        notes_conn,
        "apart",
        text="organization: verified. must be done. organization verified; it must be, organization",
    )
    index_note(
        notes_conn,
        "side",
        text="API error 400: your organization must be verified to stream this model; "
        "go to the settings page of the platform and click verify, then wait fifteen minutes",
    )
    index_note(notes_conn, "other", text="the organization of the code must change")
    with sqlite_store.write(notes_conn):  # as Crush's finish:error record (prior 0.5)
        notes_conn.execute("UPDATE entries SET kind='meta' WHERE session_id='side'")
    hits = search(notes_conn, "organization must be verified").hits
    assert [h.session_id for h in hits] == ["side", "apart", "other"]  # other: some of the words
    assert "phrase" in hits[0].matched and "phrase" not in hits[1].matched
    assert "organization must be verified" in hits[0].snippet.lower()
    # the order comes from the phrase list: without it BM25 puts the words apart first
    monkeypatch.setattr(search_mod, "phrase_match", lambda q: None)
    assert [h.session_id for h in search(notes_conn, "organization must be verified").hits][:2] == [
        "apart",
        "side",
    ]


def test_unquoted_words_find_the_exact_sentence_first_in_the_corpus(corpus_conn):
    # newuser14 F8: the shell drops the quotes of `ctxkeep search "organization must be
    # verified"`; two long Codex tool results holding the words far apart ranked above it
    for q in ("organization must be verified", '"organization must be verified"'):
        hits = search(corpus_conn, q).hits
        assert hits[0].agent == "crush", q
        row = corpus_conn.execute("SELECT content_hash FROM entries WHERE entry_id = ?", (hits[0].entry_id,))
        assert "Your organization must be verified" in sqlite_store.content_text(
            corpus_conn, row.fetchone()[0]
        )
    words = search(corpus_conn, "organization must be verified").hits
    assert "phrase" in words[0].matched and len(words) > 1 and "phrase" not in words[1].matched


def test_phrase_found_when_the_words_list_is_full(notes_conn):
    # 60 texts hold the words apart (the words list is full: the phrase is its own
    # list, ranked by FTS5), one holds them side by side; and with few texts the phrase
    # is looked for among the words list's chunks: the same answer both ways
    from ctxkeep.query.search import phrase_match, retrieve

    for i in range(60):
        index_note(
            notes_conn, f"apart{i:02d}", text=f"refused {i}: the connection was never refused, connection"
        )
    index_note(
        notes_conn, "side", text="curl: (7) Failed to connect: Connection refused after a long wait here"
    )
    hits = search(notes_conn, "connection refused").hits
    assert hits[0].session_id == "side" and "phrase" in hits[0].matched
    assert all("phrase" not in h.matched for h in hits[1:])
    rows = retrieve.fts_ids(notes_conn, "fts_words", '"connection" AND "refused"', Filters(), 500)
    assert len(rows) == 61
    among = retrieve.phrase_among(notes_conn, phrase_match("connection refused"), rows)
    full = retrieve.fts_ids(notes_conn, "fts_words", phrase_match("connection refused"), Filters(), 500)
    assert [r[0] for r in among] == [r[0] for r in full] and len(full) == 1


def _passing_statements(conn, fn) -> int:
    """The filter checks (statements over ``entries_content``'s holders of a chunk or
    content) ``fn`` runs on ``conn``."""
    check = "EXISTS (SELECT 1 FROM entry_rows e INDEXED BY entries_content WHERE e.content_id = "
    return sum(1 for s in _statements(conn, fn) if check in s)


def test_filter_answers_are_kept_across_the_searches_of_one_connection(corpus_store):
    """A long-lived process (the MCP server, the app) asks the same time filter again:
    the chunks already checked are not checked again, and the hits are the same."""
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    f = Filters(since="2025-09-01")
    first: list = []
    checks = _passing_statements(conn, lambda: first.append(search(conn, "the", filters=f, parallel=False)))
    assert checks > 0 and first[0].hits
    again: list = []
    assert (
        _passing_statements(conn, lambda: again.append(search(conn, "the", filters=f, parallel=False))) == 0
    )
    assert [vars(h) for h in again[0].hits] == [vars(h) for h in first[0].hits]
    # another filter is checked anew: by content for the chunks whose content ids the
    # second search read (the third filter's), by row for the others
    g = Filters(since="2025-10-01")
    assert _passing_statements(conn, lambda: search(conn, "the", filters=g, parallel=False)) > 0
    h = Filters(since="2025-10-02")
    seen = _statements(conn, lambda: search(conn, "the", filters=h, parallel=False))
    assert any(s.startswith("SELECT j.value FROM json_each(") and "j WHERE EXISTS" in s for s in seen)
    assert not any(
        "EXISTS (SELECT 1 FROM entry_rows e INDEXED BY entries_content WHERE e.content_id = ch" in s
        for s in seen
    )
    # another connection keeps its own answers
    other = sqlite_store.connect(home, readonly=True)
    assert _passing_statements(other, lambda: search(other, "the", filters=f, parallel=False)) > 0
    other.close()
    conn.close()


def test_kept_filter_answers_are_bounded(corpus_store, monkeypatch):
    """At most ``KEEP_CHUNKS`` answers a connection (the least recently asked filters
    dropped first, never the one being asked), ``KEEP_CONNECTIONS`` connections."""
    from ctxkeep.query.search import retrieve

    monkeypatch.setattr(retrieve, "KEEP_CHUNKS", 150)
    home, _ = corpus_store
    conns = [sqlite_store.connect(home, readonly=True) for _ in range(3)]
    c = conns[0]
    kept = []  # the answers kept as each search starts (``kept_passed``): older ones, then its own
    for since in ("2025-01-01", "2025-02-01", "2025-03-01", "2025-04-01"):
        f = Filters(since=since)
        retrieve.kept_passed(c, f.sql("e"))
        kept.append([len(p) for p in retrieve._kept[id(c)].by_filter.values()])
        search(c, "the", filters=f, parallel=False)
    assert kept[0] == [0] and all(x[-1] == 0 for x in kept)
    assert all(sum(x) <= 150 for x in kept) and any(retrieve._kept[id(c)].by_filter.values())
    assert any(len(x) < i + 1 for i, x in enumerate(kept))  # an older filter was dropped
    for other in conns[1:]:
        search(other, "the", filters=Filters(since="2025-01-01"), parallel=False)
    assert id(c) not in retrieve._kept and {id(x) for x in conns[1:]} == set(retrieve._kept)
    for x in conns:
        x.close()


@pytest.mark.parametrize("writer", ["another connection", "the searching connection"])
def test_a_commit_drops_the_kept_filter_answers(store, writer):
    """An entry moved into the filter's time window by a commit (another connection's,
    or the searching connection's own) is found by the next search of a connection that
    kept answers from before it (a kept answer "this chunk fails" would hide it)."""
    conn = sqlite_store.connect(store, readonly=writer == "another connection")
    f = Filters(since="2031-01-01")
    assert search(conn, "error", filters=f, parallel=False).hits == []
    search(conn, "errro", parallel=False)  # "did you mean": writes only the temp schema
    w = sqlite_store.connect(store) if writer == "another connection" else conn
    w.execute(
        "UPDATE entry_rows SET ts = '2031-06-01T00:00:00.000000Z' WHERE rowid = (SELECT e.rowid FROM "
        "entry_rows e JOIN chunks ch ON ch.content_id = e.content_id WHERE ch.chunk_id IN (SELECT rowid "
        "FROM fts_words WHERE fts_words MATCH '\"error\"') ORDER BY e.rowid DESC LIMIT 1)"
    )
    w.commit()
    if w is not conn:
        w.close()
    hits = search(conn, "error", filters=f, parallel=False).hits
    assert [h.ts[:10] for h in hits] == ["2031-06-01"]
    conn.close()


@pytest.mark.parametrize(
    ("q", "f"),
    [
        ("error", Filters()),
        ("the file", Filters(kind="message")),
        ("validates", Filters()),
        (NOWHERE, Filters()),
        (f"error {NOWHERE}", Filters()),
        ("error", Filters(since="2031-01-01")),
        ("npm", Filters(tool="Bash")),
        ("configu", Filters()),
    ],
)
def test_finds_is_whether_a_search_has_a_hit_and_stops_at_the_first_list(corpus_conn, q, f):
    """The "did you mean" check (``finds``) answers as ``search(limit=1).hits`` does,
    and runs no more list statements (a MATCH) than it: fewer when a list before the
    last holds a hit."""
    from ctxkeep.query.search import finds

    got: list = []
    want: list = []

    def lists(fn) -> int:  # list statements (not the terms sought under a filter: ``_absent_terms``)
        return sum(
            1 for s in _statements(corpus_conn, fn) if " MATCH " in s and not s.startswith("SELECT 1 ")
        )

    n_finds = lists(lambda: got.append(finds(corpus_conn, q, f)))
    n_search = lists(
        lambda: want.append(
            bool(search(corpus_conn, q, filters=f, limit=1, parallel=False, suggest_words=False).hits)
        )
    )
    assert got == want
    assert n_finds <= n_search
    if q == "the file":  # words, then phrase, any …: the words list held a hit
        assert n_finds == 1 < n_search


@pytest.mark.parametrize("q", ["error", "validates", "the file", "printer validates"])
def test_finds_without_filters_ranks_no_list_when_the_newest_match_has_a_hit(corpus_conn, q):
    """Without filters, ``finds`` answers from a list's newest match (its text held by
    an entry): no statement ranks (no BM25 window, no phrase count), and the answer is
    ``search(limit=1)``'s."""
    from ctxkeep.query.search import finds

    got: list = []
    seen = _statements(corpus_conn, lambda: got.append(finds(corpus_conn, q, Filters())))
    assert got == [True] == [bool(search(corpus_conn, q, limit=1, parallel=False, suggest_words=False).hits)]
    assert not [s for s in seen if RANKS.search(s)], seen
    assert [s for s in seen if " MATCH " in s and "LIMIT 1" in s]


def test_finds_ranks_the_list_when_no_entry_holds_the_newest_match(store):
    """A newest match whose text no entry holds (not a hit) sends ``finds`` to the
    ranked list, as the search ranks it: the same answer, from an older match."""
    from ctxkeep.query.search import finds

    w = sqlite_store.connect(store)
    newest = w.execute(
        "SELECT rowid FROM fts_words WHERE fts_words MATCH '\"error\"' ORDER BY rowid DESC LIMIT 1"
    ).fetchone()[0]
    w.execute(
        "DELETE FROM entry_rows WHERE content_id = (SELECT content_id FROM chunk_rows WHERE chunk_id = ?)",
        (newest,),
    )
    w.commit()
    w.close()
    conn = sqlite_store.connect(store, readonly=True)
    got: list = []
    seen = _statements(conn, lambda: got.append(finds(conn, "error", Filters())))
    hits = search(conn, "error", limit=1, parallel=False, suggest_words=False).hits
    assert got == [True] == [bool(hits)]
    # the newest match is not a hit now: no entry holds it
    assert not conn.execute(
        "SELECT 1 FROM entry_rows WHERE content_id = (SELECT content_id FROM chunk_rows WHERE chunk_id = ?)",
        (newest,),
    ).fetchone()
    assert [s for s in seen if RANKS.search(s)]  # the ranked window ran
    conn.close()


PATH_TERM = "/Users/chip/dev/ai-music/diverse_musical_ai.py"


@pytest.mark.parametrize(
    ("q", "f", "absent"),
    [
        (f"embedding {PATH_TERM}", {"role": "user"}, {f'"{PATH_TERM}"'}),
        # a one-word term absent: the words list is known empty, the others of several
        # words are not sought (``any`` walks them down to its window's floor only)
        ("gui tab main_window", {"agent": "claude-code", "kind": "tool_call"}, {'"gui"'}),
        ("teammate OPK_DEBUG", {"project": "/path/to/Demo"}, {'"teammate"'}),
        (
            f"constitution {PATH_TERM}",
            {"agent": "claude-code", "kind": "tool_call", "since": "2025-01-01"},
            {'"constitution"'},
        ),
        # no term of several words: nothing sought (FTS5 finds a word absent cheaply)
        ("sandbox denied", {"role": "user"}, set()),
        ("exit code", {"kind": "message"}, set()),
        (f"embedding {PATH_TERM}", {}, set()),
    ],
)
@pytest.mark.parametrize("parallel", [False, True])
def test_a_term_none_passing_the_facet_filter_holds_is_walked_once(
    corpus_conn, monkeypatch, q, f, absent, parallel
):
    """Under a facet filter, a term no chunk passing it holds is found once (``LIMIT
    1``): the words list (all terms) is not run and the ``any`` list leaves the term out;
    the hits are those of the search that walks it in both lists."""
    import ctxkeep.query.search as search_mod
    from ctxkeep.query.search import any_match

    filters = Filters(**f)
    assert search_mod._absent_terms(corpus_conn, q, filters.facet_match()) == absent
    ranked = re.compile(r"(?:ck_bm25_top|ck_bm25|bm25)\(.*MATCH '(.*?)'(?: ORDER| AND rowid|\) ORDER)", re.S)

    def run() -> tuple[list, list[str]]:
        got: list = []
        seen = _statements(
            corpus_conn, lambda: got.append(search(corpus_conn, q, filters=filters, parallel=parallel))
        )
        res = got[0]
        return [[vars(h) for h in res.hits], res.note, res.suggestions], [
            m for s in seen for m in ranked.findall(s)
        ]

    hits, matches = run()
    monkeypatch.setattr(search_mod, "_absent_terms", lambda *a: set())
    old_hits, old_matches = run()
    assert hits == old_hits
    words = f"({words_match(q)})"
    if parallel:  # lists run ahead on another connection: their statements are not traced here
        return
    # terms are sought under a facet filter when one has several words, and only then
    monkeypatch.undo()
    sought = [
        x
        for x in _statements(corpus_conn, lambda: search(corpus_conn, q, filters=filters, parallel=False))
        if x.startswith("SELECT 1 FROM fts_words")
    ]
    several = any(len(re.findall(r"[^\W_]+", t)) > 1 for t in terms(q))
    assert bool(sought) == (several and filters.facet_match() is not None)
    if absent:
        assert bool(hits[0]) != q.startswith("teammate")  # found something where it can
        assert not any(m.startswith(words) for m in matches)  # no words list
        assert any(m.startswith(words) for m in old_matches)
        # the ``any`` list walks the other terms only (the prefix list, which follows,
        # is not the same: a prefix of an absent term may be present)
        lists = {m.split(" AND facets")[0] for m in matches}
        old_lists = {m.split(" AND facets")[0] for m in old_matches}
        assert f"({any_match(q)})" in old_lists and f"({any_match(q)})" not in lists
        kept = any_match(q, absent)
        assert f"({kept})" in lists if kept else True
    else:
        assert sorted(matches) == sorted(old_matches)


@pytest.mark.parametrize("q", [f"_ {PATH_TERM}", f"emb* {PATH_TERM}", "a_b c_d"])
@pytest.mark.parametrize("f", [{"role": "user"}, {"agent": "codex", "since": "2025-01-01"}])
def test_terms_sought_under_a_filter_leave_the_hits_as_they_were(corpus_conn, monkeypatch, q, f):
    """Odd terms (a token FTS5 finds nothing for, a prefix, words joined by ``_``) sought
    under a facet filter: the same hits as the search that seeks none, on one connection
    and two."""
    import ctxkeep.query.search as search_mod

    filters = Filters(**f)

    def hits() -> list:
        out = []
        for parallel in (False, True):
            res = search(corpus_conn, q, filters=filters, parallel=parallel)
            out.append([[vars(h) for h in res.hits], res.note, res.suggestions])
        return out

    got = hits()
    monkeypatch.setattr(search_mod, "_absent_terms", lambda *a: set())
    assert got == hits()

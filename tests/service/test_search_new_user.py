"""Search as a new user found it on the corpus (note 12's list), through the service
layer every front end shares:

- a hit printed its first line twice: the title (the text's first line) and then a
  snippet of the text's start, which begins with the same words;
- an Aider chat message sharing its text with its ``.aider.input.history`` record was
  titled ``input_history /copy-context …``: the stored title leads with the tool name
  of the entry that stored the text first;
- a misspelled query found nothing and said nothing more: now "did you mean", from the
  store's vocabulary, in the CLI, ``ctx_search`` and ``--json`` alike.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.mcp.server import Handlers
from ctxkeep.service.search import SearchHit, SearchRequest, search

runner = CliRunner()


def _cli(home, *args: str) -> str:
    r = runner.invoke(app, ["search", *args, "--home", str(home)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    return r.stdout


# ---------------------------------------------------------------- the first line once


def _hit(title: str, snippet: str, tool: str | None = None) -> SearchHit:
    return SearchHit.model_construct(
        entry_id="e" * 32,
        agent="codex",
        session_id="s1",
        session_short_id="s1",
        project_dir=None,
        ts="2025-11-14T02:21:00Z",
        role="tool",
        kind="tool_result" if tool is None else "tool_call",
        tool_name=tool,
        title=title,
        snippet=snippet,
        token_estimate=28,
        bytes=120,
        score=1.0,
        matched=["words"],
        duplicates=0,
        chunk=0,
    )


@pytest.mark.parametrize(
    "title,snippet,tool,shown",
    [
        # the snippet of the text's start: only what follows the title
        (
            "ERROR: Not on a branch.",
            "ERROR: Not on a branch. Current branch: main",
            None,
            "…Current branch: main",
        ),
        # a short text: the title says it all
        ("ERROR: Not on a branch.", "ERROR: Not on a branch.", None, None),
        # a tool call's title leads with the tool; its text does not
        ("shell bash -lc cat a.yaml", 'bash -lc cat a.yaml {"workdir":"/w"}', "shell", '…{"workdir":"/w"}'),
        # a cut title: from the start of the word it was cut in
        ("Let me look at how th…", "Let me look at how the filtering works…", None, "…the filtering works…"),
        # a snippet starting inside the title's line
        (
            "You're right! I can check the states…",
            "…I can check the states instead of looping",
            None,
            "…states instead of looping",
        ),
        # a snippet elsewhere in the text: as it is
        ("A first line", "…a match far below the first line…", None, "…a match far below the first line…"),
    ],
)
def test_a_hit_shows_its_first_line_once(title, snippet, tool, shown):
    parts = _hit(title, snippet, tool).render()
    assert ("title", title) in parts
    assert dict(parts).get("snippet") == shown


def test_search_prints_a_hits_first_line_once(corpus_store):
    out = _cli(corpus_store[0], "Not on a feature branch", "-n", "3")
    # the Codex tool result (2025-11-14) whose first line this is
    line = "[error] ERROR: Not on a feature branch. Current branch: main"
    assert out.count(line) == 1, out
    assert "…Feature branches should be named like: 001-feature-name" in out
    out = _cli(corpus_store[0], "orchestrator", "-n", "3", "--agent", "codex")
    cmd = "bash -lc cat specs/005-orchestrator-architecture/contracts/orchestrator.openapi.yaml"
    assert out.count(cmd) == 1, out
    assert f"shell {cmd}" in out


# ---------------------------------------------------------------- Aider's titles


def test_an_aider_message_is_titled_by_its_own_text(corpus_store):
    """The chat message (kind message) and its input-history record (kind meta, tool
    ``input_history``) hold one text: each hit is titled as its own entry is."""
    res = search(corpus_store[0], SearchRequest.parse(queries=["copy-context"], filters={"agent": ["aider"]}))
    hits = res.results[0].hits
    assert hits and all(h.kind == "message" and h.tool_name is None for h in hits)
    assert all(h.title.startswith("/copy-context ") for h in hits), [h.title for h in hits]
    res = search(
        corpus_store[0],
        SearchRequest.parse(queries=["copy-context"], filters={"agent": ["aider"], "kind": ["meta"]}),
    )
    records = res.results[0].hits
    assert records and all(h.tool_name == "input_history" for h in records)
    assert all(h.title.startswith("input_history /copy-context ") for h in records)


# ---------------------------------------------------------------- did you mean


@pytest.mark.parametrize(
    "query,first",
    [
        ("orchestartor", "orchestrator"),  # two letters swapped
        ("serach", "search"),
        ("databse", "database"),  # a letter missing
        ("pyprojct.toml", "pyproject.toml"),  # inside a path: the rest is kept
        ("timelime filtering", "timeline filtering"),  # one wrong word of two
    ],
)
def test_a_misspelled_query_gets_did_you_mean(corpus_store, query, first):
    (q,) = search(corpus_store[0], SearchRequest.parse(queries=[query])).results
    assert q.suggestions and q.suggestions[0] == first, q.suggestions
    assert len(q.suggestions) <= 3
    # each suggestion finds what the misspelled query did not
    (again,) = search(corpus_store[0], SearchRequest.parse(queries=[first])).results
    assert again.hits and again.suggestions == []
    assert any("words" in h.matched for h in again.hits)


def test_no_suggestion_when_the_words_are_found_or_nothing_is_near(corpus_store):
    # found as words; as prefixes of stored words (found by the prefix list); nothing near
    for query in ("orchestrator", "timeline filtering", "orchestrat timelin", "qzxvkjwplorbfemtu"):
        (q,) = search(corpus_store[0], SearchRequest.parse(queries=[query])).results
        assert q.suggestions == [], query
    # a prefix is kept as typed, the misspelled word beside it replaced
    (q,) = search(corpus_store[0], SearchRequest.parse(queries=["orchestrat timelime"])).results
    assert q.hits and q.suggestions == ["orchestrat timeline"]


def test_cli_json_and_mcp_show_did_you_mean(corpus_store, tmp_path):
    home = corpus_store[0]
    text = _cli(home, "orchestartor")
    assert text.splitlines() == ["no matches", 'did you mean "orchestrator"?']
    d = json.loads(_cli(home, "orchestartor", "--json"))
    assert d["hits"] == [] and d["suggestions"] == ["orchestrator"]
    # with hits of some of the terms: after them
    text = _cli(home, "timelime filtering", "-n", "2")
    assert text.splitlines()[-1] == 'did you mean "timeline filtering"?'
    mcp_text, data = Handlers(home, tmp_path).ctx_search({"queries": ["orchestartor", "orchestrator"]})
    assert data["results"][0]["suggestions"] == ["orchestrator"]
    assert data["results"][1]["suggestions"] == []
    assert 'did you mean "orchestrator"?' in mcp_text
    assert mcp_text.count("did you mean") == 1


def test_did_you_mean_on_a_store_without_a_vocabulary(corpus_store, tmp_path):
    """Suggestions read the store's ``vocab`` table: a store without one (older than
    schema v9, read as it is) gives none, and the search still answers."""
    import shutil
    import sqlite3

    home = tmp_path / "s"
    shutil.copytree(corpus_store[0], home, ignore=shutil.ignore_patterns("*.lock"))
    conn = sqlite3.connect(home / "store.db")
    conn.execute("DROP TABLE fts_vocab")
    conn.execute("DROP TABLE vocab")
    conn.commit()
    conn.close()
    from ctxkeep.query.search import search as run
    from ctxkeep.sinks.sqlite import connect

    c = connect(home, readonly=True)
    try:
        res = run(c, "orchestartor")
    finally:
        c.close()
    assert res.hits == [] and res.suggestions == []


def test_near_words_order_as_counted_every_term(corpus_store):
    """``suggest.near`` counts a term's chunks only to order equally alike words; its
    answer is the order of counting every candidate's term: similarity, then chunks
    holding the term, then the word (``vocab.terms_held`` agrees with counts above 0)."""
    import difflib

    from ctxkeep.query.search import suggest
    from ctxkeep.sinks.sqlite import connect, vocab

    c = connect(corpus_store[0], readonly=True)
    try:
        tied = 0
        for word in ("serach", "databse", "orchestartor", "sesion", "comit", "tset", "fiel", "confg"):
            pool = vocab.near_words(c, word[0], max(4, len(word) - 2), len(word) + 2)
            alike = difflib.get_close_matches(word, pool, n=12, cutoff=suggest.CUTOFF)
            terms = vocab.index_terms(c, alike)
            docs = vocab.term_docs(c, list(terms.values()))
            assert vocab.terms_held(c, list(terms.values())) == {t for t, n in docs.items() if n}
            sm = difflib.SequenceMatcher(b=word)
            scored = []
            for w in alike:
                if docs.get(terms.get(w, ""), 0):
                    sm.set_seq1(w)
                    scored.append((-round(sm.ratio(), 2), -docs[terms[w]], w))
            tied += len({s[0] for s in scored}) < len({terms[s[2]] for s in scored})
            want, stems = [], set()
            for *_, w in sorted(scored):
                if terms[w] not in stems:
                    stems.add(terms[w])
                    want.append(w)
            assert suggest.near(c, word) == want[:3], word
        assert tied  # some word had equally alike candidates of different terms
    finally:
        c.close()


@pytest.mark.parametrize(
    "query,first",
    [
        # newuser14 F4: "verifed" stems to a held term (a search finds it alone), so only
        # "orgnization" was corrected ("organization verifed", which finds no entry
        # holding both); now every misspelled word of the query is
        ("orgnization verifed", "organization verified"),
        ("docker orchestartor pyhton", "docker orchestrator python"),
    ],
)
def test_a_query_with_several_misspellings_gets_them_all_corrected(corpus_store, query, first):
    (q,) = search(corpus_store[0], SearchRequest.parse(queries=[query])).results
    assert q.suggestions and q.suggestions[0] == first, q.suggestions
    # the corrected query finds entries holding every word
    (again,) = search(corpus_store[0], SearchRequest.parse(queries=[first])).results
    assert again.suggestions == [] and any("words" in h.matched for h in again.hits)
    # a word the store holds in another form is not "corrected" to it (one term: it
    # searches the same), a prefix of stored words stays as typed
    (q,) = search(corpus_store[0], SearchRequest.parse(queries=["orgnization verifying"])).results
    assert q.suggestions[0] == "organization verifying", q.suggestions


def test_a_form_of_a_stored_word_is_not_corrected(corpus_store):
    """``refused`` is not in the store's vocabulary as written, but ``refuse`` (its own
    term, ``refus``) is: a correctly spelled query gets no "did you mean" (it got
    "connection reused" while the unseen words were first corrected)."""
    for query in ("connection refused", "orchestrator refused"):
        (q,) = search(corpus_store[0], SearchRequest.parse(queries=[query])).results
        assert q.suggestions == [], (query, q.suggestions)

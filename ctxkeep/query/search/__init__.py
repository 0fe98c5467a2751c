"""Ranked, budgeted search over the SQLite store (tier 1 of retrieval).

How a query is answered:

1. The query is split into terms (``"quoted phrases"`` stay whole). User input never
   reaches FTS5 as syntax: every term is quoted, so ``c++``, ``"unbalanced``,
   ``foo AND``, ``a-b``, ``it's``, ``NOT`` and ``(x`` are searched as words and never
   raise. ``raw=True`` passes FTS5 syntax through and turns a parse error into a
   one-line ``SearchSyntaxError``.
2. Candidate lists, each ranked best first:
   - ``phrase``: for a query of 2+ plain words (no quotes, ``*``, symbol or CJK
     terms), the words side by side and in order (one FTS5 phrase, ``phrase_match``;
     looked for among the ``words`` list's chunks when that list holds every match,
     ``retrieve.phrase_among``; not searched when it is empty):
     the shell drops the quotes of ``ctxkeep search "no such file"``, so the
     words a user typed together are searched together too; its hits rank above every
     other hit (``rank.PHRASE_LISTS``);
   - ``words``: all terms (AND) on the word index ``fts_words``, BM25 with the
     ``title`` column weighted ``sqlite_store.TITLE_WEIGHT`` × the body;
   - ``any``: for several terms, when ``words`` is short of candidates, any of them
     (OR), so a text missing one word of the query still ranks (BM25 favours texts
     holding more of the terms); under a facet filter, without the terms no chunk
     passing it holds (``_absent_terms``: then ``words`` is not run either);
   - ``prefix``: when ``words`` finds fewer than ``limit`` entries, any term (OR),
     terms of ≥ 3 characters as prefixes (``validateUs`` → ``validateus*``);
   - ``grams``: the substring index ``fts_grams`` (CJK bigrams, camelCase parts;
     ``transforms.grams``) for terms that have them (``字段``, ``東京``, ``UserInput``);
   - ``subs``: when ``words`` finds fewer than ``limit`` entries, inner substrings:
     each term of 3+ letters/digits expands to the vocabulary tokens holding it
     (``fts_vocab``, trigrams of every distinct identifier-like token: ``allbac`` →
     ``callback``), searched on the word index; its hits rank below every
     whole-word or prefix hit (``rank.SUBSTRING_LISTS``);
   - ``symbols``: symbol terms (``c++``, ``C#``, ``.NET``) as written, with the
     query's other words, on ``fts_symbols`` (not as ``c`` on the word index);
   - ``exact``: candidates whose text holds the query verbatim (case-insensitive):
     hyphenated ids (``bd-q3fy``), paths, error messages;
   - ``tool``: candidates whose tool name is one of the terms (tool names weigh
     above body text).
3. The lists are fused by reciprocal rank fusion (``RRF_K``, ``LIST_WEIGHT``), times
   a prior per kind (``KIND_WEIGHT``); ties, within a list and after fusion, go to the
   more recent entry.
4. One hit per distinct content (the most recent entry holding it that passes the
   filters, a conversation's entry before a ``meta`` record such as Aider's input
   history; ``duplicates`` counts the others), then hits are taken in rank order
   until the token budget is spent.
5. When no entry holds all the terms (or none matched), the query words the store
   does not hold get near words of its vocabulary (``suggest``: "did you mean").

Cost bounds for large stores (rank windows, filter scans): ``retrieve``.

Timestamps are ISO-8601 UTC text as stored in ``entries.ts``.

The modules, in the order a query goes through them: ``parse`` (terms, FTS5 MATCH
expressions, ``Filters``, ``parse_when``), ``retrieve`` (the SQL of the candidate
lists and its execution), ``rank`` (fusion, priors, ties, folding), ``render``
(``Hit``, snippets, titles, budget), ``suggest`` ("did you mean"); ``search`` below runs them. Their tunables
(``retrieve.RANK_WINDOW``, ``rank.KIND_WEIGHT`` …) are read from those modules.
"""

from __future__ import annotations

import sqlite3

from ctxkeep.errors import SearchSyntaxError
from ctxkeep.query.search import rank, render, retrieve, split, suggest
from ctxkeep.query.search.ahead import Ahead, Guess, Job, core_free
from ctxkeep.query.search.parse import (
    _WORD_RE,
    _WORD_TOKEN_RE,
    MAX_TERMS,
    Filters,
    _prefix_star,
    _word_term,
    any_match,
    any_parts,
    cap_terms,
    grams_match,
    parse_when,
    phrase_match,
    prefix_match,
    subs_match,
    symbols_match,
    terms,
    vocab_terms_of,
    words_match,
    words_parts,
)
from ctxkeep.query.search.render import SNIPPET_MAX_CHARS, Hit, SearchResult, apply_budget, hit_tokens
from ctxkeep.query.search.retrieve import PREFIX_COMMON, Candidate, common_terms
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite.lookup import short_session_ids
from ctxkeep.transforms.grams import has_cjk, is_symbol_term

__all__ = [
    "search",
    "Filters",
    "Hit",
    "SearchResult",
    "parse_when",
    "apply_budget",
    "hit_tokens",
    "terms",
    "words_match",
    "phrase_match",
    "any_match",
    "prefix_match",
    "grams_match",
    "common_terms",
    "MAX_LIMIT",
    "MAX_TERMS",
    "PREFIX_COMMON",
    "SNIPPET_MAX_CHARS",
]

MAX_LIMIT = 200
#: the lists whose hits hold every term of the query (the others hold some of them)
ALL_TERMS_LISTS = ("phrase", "words", "grams_all", "symbols", "exact", "subs")


class _Found(Exception):
    """A list of ``search(_first_hit=True)`` holds a candidate (``finds``)."""


def finds(conn: sqlite3.Connection, query: str, filters: Filters) -> bool:
    """Whether ``search(conn, query, filters=filters, limit=1)`` has a hit (the "did
    you mean" check), answered at the first list holding a candidate: every content of
    a list is scored and fused (``rank.scores``, ``rank.fuse``), and folding keeps the
    first of the fused order, so one candidate in one list is a hit (no budget here);
    the lists after it are not searched. 10 GB, one connection, the counts cached,
    CPU ms main / this: ``printer validateUs`` 33.1 / 26.6, ``README validateUs`` 31.2
    / 25.5 (the checks of their two suggestions); the suggestions the same.

    Without filters a list is not ranked here (session 21): its newest match is a hit
    when an entry holds its text (every text of a consistent store: a chunk's content
    is deleted with its last entry), so the list's ranked window (BM25 over its 2,000
    newest matches and each phrase's count, ``retrieve.fts_ids``) is walked only when
    that entry is missing; a list without any match costs what it did (its walk proves
    it empty). With filters a list is ranked as the search ranks it (the newest match
    passing a facet filter can be a text no single passing entry holds, and a time
    filter is checked on the window's matches only). 2 GB store, one process, ranked /
    unranked alternating, min of 7, load ~31, CPU ms of the search with its checks:
    ``printer validateUs`` 19.0 / 11.6, ``README validateUs`` 16.0 / 10.1, ``printre``
    10.8 / 4.1, ``constituiton`` 9.1 / 2.8; the suggestions the same."""
    try:
        return bool(
            search(
                conn, query, filters=filters, limit=1, parallel=False, suggest_words=False, _first_hit=True
            ).hits
        )
    except _Found:
        return True


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    filters: Filters | None = None,
    limit: int = 10,
    budget_tokens: int | None = None,
    raw: bool = False,
    parallel: bool | None = None,
    suggest_words: bool = True,
    _first_hit: bool = False,
) -> SearchResult:
    """Ranked hits for ``query`` (best first), one per distinct text.

    Args:
        conn: a (read-only is enough) connection to ``store.db``.
        query: user words, ``"phrases"``, identifiers, paths, CJK; with ``raw`` an
            FTS5 expression.
        filters: ``Filters`` (combinable).
        limit: at most this many hits, 1 … ``MAX_LIMIT`` (clamped).
        budget_tokens: when set, hits are returned in rank order while their tier-1
            renderings (``hit_tokens``) fit in this many tokens; the rest are counted
            in ``omitted`` and ``note`` says so.
        raw: pass ``query`` to FTS5 unchanged (word index only).
        suggest_words: offer "did you mean" queries (``suggestions``) when no entry holds
            all the terms, each checked to find something (False: none; the check's
            own searches).
        parallel: run the lists that do not wait for the word list (and one guessed
            ahead of it) on a second read-only connection in a thread (``ahead``), and
            split a heavy window statement in two rowid ranges walked at once (``split``);
            None (the default): when a core is free for it (``ahead.core_free``). The
            hits are the same either way.
        _first_hit: raise ``_Found`` as soon as a list holds a candidate (``finds``).
    Returns a ``SearchResult``. Raises ``SearchSyntaxError`` (raw mode only) when FTS5
    cannot parse the expression, ``UsageError`` for bad filter values.
    """
    filters = (filters or Filters()).validate().resolve_sessions(conn)
    limit = max(1, min(int(limit), MAX_LIMIT))
    cut_note = ""
    if not raw:
        query, cut_note = cap_terms(query)
    n = max(50, limit * 5)
    cache: dict[int, Candidate | None] = {}  # chunk id → candidate (None: no entry passes)
    lists: dict[str, list[int]] = {}  # list name → content_ids, best first
    shown: dict[int, Candidate] = {}  # content_id → the chunk it is shown with
    ts = terms(query)
    # chunk id → passes the filters: a memo across lists; the filters checked per chunk
    # (status and time; all of them on a store before facets) keep their answers across
    # the searches of a long-lived connection (``retrieve.kept_passed``)
    facets = not filters.is_empty() and sqlite_store.schema_version(conn) >= 3
    checked = not (filters.residual() if facets else filters).is_empty()
    passed = retrieve.kept_passed(conn, filters.sql("e")) if checked else retrieve.Passed()
    want_subs = False  # the inner-substring list applies (terms with inner substrings)
    vt: list[tuple[str, str | None]] = []  # each word term with its vocabulary expression

    ahead: Ahead | None = None  # lists run ahead on a second connection (``ahead``)
    # a second core for this search: lists run ahead, heavy window statements split
    two = bool(parallel or (parallel is None and core_free()))
    splitter = split.ranked if two else None

    def run(
        name: str, fts: str | None, match: str | None, rows: list[tuple[int, float]] | None = None
    ) -> list[tuple[int, float]]:
        """Run one list on ``fts`` (None: the symbols table, ``retrieve.symbols_table``;
        ``rows``: its ``(chunk_id, rank)`` when already known, else taken from ``ahead``
        when it ran there); returns its rows."""
        if not match:
            return []
        got = ahead.take(name, match) if rows is None and ahead is not None else None
        if got is not None:
            rows, _, loaded = got
            for k, v in loaded.items():  # the same candidates, loaded by the other connection
                cache.setdefault(k, v)
        if rows is None and _first_hit and filters.is_empty():
            # "is there a hit" without ranking: the newest match, when an entry holds
            # its text (``finds``); a list without any match is empty ranked or not
            newest = retrieve.newest_match(conn, fts or retrieve.symbols_table(conn), match)
            if newest is None:
                rows = []
            else:
                retrieve.load_candidates(conn, [newest], filters, cache)
                if cache.get(newest) is not None:
                    raise _Found
        if rows is None:
            rows = retrieve.fts_ids(
                conn, fts or retrieve.symbols_table(conn), match, filters, n, passed, facets, splitter
            )
        retrieve.load_candidates(conn, [r[0] for r in rows], filters, cache)
        ranked = rank.ranked_contents(rows, cache)
        lists[name] = [c.content_id for c in ranked]
        if _first_hit and ranked:
            raise _Found
        for c in ranked:  # a content is shown with its best chunk of the first list
            if name in rank.PHRASE_LISTS:  # ... or with its chunk holding the phrase
                shown[c.content_id] = c
            else:
                shown.setdefault(c.content_id, c)
        return rows

    if raw:
        try:
            run("words", "fts_words", query)
        except sqlite3.OperationalError as e:
            raise SearchSyntaxError(
                f"FTS5 syntax error: {e}",
                where=query,
                hint="fix the expression, or drop raw mode to search the words as typed",
            ) from None
    else:
        wm, phrase = words_match(query), phrase_match(query)
        cjk = any(has_cjk(t) for t in ts)
        mixed = cjk and any(not has_cjk(t) for t in ts)
        grams = ("grams_all" if mixed else "grams", grams_match(query))
        symbols = symbols_match(query) if any(is_symbol_term(t) for t in ts) else None
        several = len([t for t in ts if _word_term(t)]) > 1
        # under a facet filter, a term no entry passing it holds: the words (and phrase)
        # lists have no match, and the ``any`` list is the same without that term
        absent = _absent_terms(conn, query, filters.facet_match()) if several and facets else set()
        anym = any_match(query, absent) if several else None
        no_words = bool(absent & set(words_parts(query)))  # the words list has no match
        if two:
            ahead = _ahead(
                conn, filters, n, passed, facets, query, wm, phrase, grams, symbols, anym, cjk, no_words
            )
        try:
            # no entry holds a term without a prefix ``*`` that none passing the filter
            # holds: the words list's walk would prove it again (``_absent_terms``)
            word_rows = run("words", "fts_words", wm, [] if no_words else None)
            # the words side by side, in order: a content is shown with its chunk holding
            # the phrase, and ranks above those holding the words apart. A phrase match
            # holds all the words: none when the words list is empty; when the words list
            # holds every match (fewer than ``n``), the phrase is looked for among its
            # chunks only (no BM25: its IDF walks the phrase's whole posting list, p95
            # 8.6 ms at 2.5 GB); otherwise it is a list of its own
            if phrase and word_rows:
                among = retrieve.phrase_among(conn, phrase, word_rows) if len(word_rows) < n else None
                if among is not None and ahead is not None:
                    ahead.drop("phrase")
                run("phrase", "fts_words", phrase, among)
            elif ahead is not None:
                ahead.drop("phrase")
            run(grams[0], "fts_grams", grams[1])
            run("symbols", None, symbols)
            if several and len(lists.get("words", [])) < n:
                run("any", "fts_words", anym or any_match(query), None if anym else [])
            elif ahead is not None:
                ahead.drop("any")
        finally:
            if ahead is not None:
                ahead.close()
        if len(lists.get("words", [])) < limit:
            common = common_terms(conn, query)
            # without a prefix term the relaxed list is the ``any`` (or ``words``) list again
            if any(_prefix_star(t.rstrip("*"), common) for t in ts if _word_term(t)):
                run("prefix", "fts_words", prefix_match(query, common))
            vt = vocab_terms_of(query)
            want_subs = any(m for _, m in vt)
    ranked = _rank(conn, lists, shown, ts, limit, derived=not raw)
    # inner substrings (``subs``) rank below every word-level hit and never join a
    # word-level hit's lists: when the word-level lists already fill ``limit`` hits
    # after folding, they cannot change the result, and are not searched (their
    # vocabulary expansions OR dozens of tokens: ~a third of a slow query's time)
    if want_subs and len(ranked[3]) < limit:
        before = {cid for order in lists.values() for cid in order}
        run(
            "subs", "fts_words", subs_match([(t, retrieve.vocab_expand(conn, m) if m else []) for t, m in vt])
        )
        # only what the word-level lists missed: their order stays as it was
        if "subs" in lists:
            lists["subs"] = [cid for cid in lists["subs"] if cid not in before]
        ranked = _rank(conn, lists, shown, ts, limit, derived=True)
    lists, sc, titles, kept, folded = ranked
    hits = [
        render.to_hit(
            shown[cid],
            title=titles.get(cid),
            ts=ts,
            score=sc[cid],
            matched=[k for k, v in lists.items() if cid in v],
            folded=folded.get(cid, 0),
        )
        for cid in kept
    ]
    short = short_session_ids(conn, {h.session_id for h in hits})
    for h in hits:
        h.session_short_id = short.get(h.session_id, h.session_id)
    res = apply_budget(SearchResult(query=query, hits=hits), budget_tokens)
    notes = [n for n in (cut_note, res.note) if n]
    if (
        not raw
        and hits
        and len([t for t in ts if _WORD_RE.search(t)]) > 1
        and not any(m in h.matched for h in hits for m in ALL_TERMS_LISTS)
    ):
        notes.append("no entry holds all the terms: these match some of them")
    res.note = "; ".join(notes)
    if suggest_words and not raw and not any(m in h.matched for h in hits for m in ALL_TERMS_LISTS):
        # found nothing, or only entries holding some of the terms: "did you mean", only
        # a query that finds something (`"connection refused"` was offered where both
        # words stand, never side by side: "no matches", newuser16 F16)
        words = [w for t in ts if _word_term(t) for w in _WORD_TOKEN_RE.findall(t)]
        res.suggestions = [q for q in suggest.suggestions(conn, query, words) if finds(conn, q, filters)]
    return res


def _absent_terms(conn: sqlite3.Connection, query: str, fmatch: str | None) -> set[str]:
    """Quoted word terms of ``query`` (``any_match``'s phrases, e.g. ``'"embedding"'``)
    that no chunk passing the facet filter ``fmatch`` holds, each sought with ``LIMIT 1``
    (``retrieve.holds_none``); empty without ``fmatch`` or without a term of several
    words (a path, ``main_window``). The terms of one word are sought first; those of
    several only while none is found absent, up to the first absent one.

    Why: a term none passing the filter holds leaves the words list (all terms, AND) and
    the phrase list without a match, and leaves the ``any`` list (OR) the same rows with
    the same ranks without it (a row holding no phrase of it adds 0.0 to the BM25 sum
    for it, in ``bm25()`` and ``ck_bm25`` alike). Proving that is a walk of the term
    under the filter, which the words list and the ``any`` list each made: a path among
    users' messages (10 GB store, ``embedding <path>`` for role user: the words list 16
    and the ``any`` list 22 ms CPU, each walking the 28,764 matches of the path's 9-token
    phrase against the role's chunks, ~14 ms, for no row). Sought once here, the words
    list is not run and the ``any`` list walks only ``"embedding"``: 53.4 -> 36.9 ms.
    A term that is there stops at its newest match. What it does not pay for: a
    one-word term is cheap for FTS5 to find absent in both lists (an AND ends at its
    first exhausted term: ``foo AND`` among messages, both there, +1.7 ms with every
    term sought), and once the words list is known empty, a term of several words is
    walked by ``any`` only down to its window's floor, while proving it absent walks
    the whole table (``gui tab main_window`` for Claude Code tool calls: 18.8 -> 32.3
    ms when ``main_window`` was sought after ``gui`` was found absent)."""
    if not fmatch:
        return set()
    parts = any_parts(query)
    several = [p for p in parts if len(_WORD_TOKEN_RE.findall(p)) > 1]
    if not several:
        return set()
    out = {
        p for p in parts if p not in several and retrieve.holds_none(conn, "fts_words", f"{p} AND {fmatch}")
    }
    for p in several if not out else ():
        if retrieve.holds_none(conn, "fts_words", f"{p} AND {fmatch}"):
            out.add(p)
            break
    return out


def _ahead(
    conn: sqlite3.Connection,
    filters: Filters,
    n: int,
    passed: dict[int, bool],
    facets: bool,
    query: str,
    wm: str | None,
    phrase: str | None,
    grams: tuple[str, str | None],
    symbols: str | None,
    anym: str | None,
    cjk: bool,
    no_words: bool = False,
) -> Ahead | None:
    """The lists of a search run ahead on a second connection (``ahead.Ahead``,
    started), or None when there is none to run or no connection to borrow: the
    phrase list ranked on its own (when the word list ``wm`` will have ``n`` rows),
    ``grams`` (not alone for a ``cjk`` query), ``symbols``, and ``any`` (``anym``: a
    query of several word terms) when it will not, in the order ``search`` takes them.
    ``no_words``: the word list is known to have no match (``_absent_terms``): no
    guess, no phrase list, ``any`` always."""
    jobs: list[Job] = []
    guess = None
    # a time or status filter (checked per chunk, ``retrieve.fts_ids``) can leave the
    # word list short of what the guess counts: a wrong guess wastes a list's CPU
    # ("timeline filtering" since a date: +19 ms of 26), so none is made
    if wm and (phrase or anym) and filters.residual().is_empty() and not no_words:
        fmatch = filters.facet_match() if facets else None
        guess = Guess(f"({wm}) AND {fmatch}" if fmatch else wm, words_parts(query), n)
    if phrase and guess is not None:
        jobs.append(Job("phrase", "fts_words", phrase, guess=guess.full))
    if grams[1]:
        jobs.append(Job(grams[0], "fts_grams", grams[1]))
    if symbols:
        jobs.append(Job("symbols", None, symbols))
    if anym and (guess is not None or no_words):
        jobs.append(Job("any", "fts_words", anym, guess=guess.short if guess is not None else None))
    # a CJK query's bigram list is short (2.5 GB store: the bench's CJK queries p95
    # 1.3 ms on one connection): alone, it does not pay for the thread (+0.17 ms CPU,
    # 4-5 context switches a search)
    if not jobs or (cjk and len(jobs) == 1 and jobs[0].fts == "fts_grams"):
        return None
    a = Ahead(jobs, filters, n, passed, facets)
    return a if a.start(conn) else None


def _rank(
    conn: sqlite3.Connection,
    lists: dict[str, list[int]],
    shown: dict[int, Candidate],
    ts: list[str],
    limit: int,
    *,
    derived: bool,
) -> tuple[dict[str, list[int]], dict[int, float], dict[int, str], list[int], dict[int, int]]:
    """The candidate lists fused and folded: ``(lists, scores, titles, kept, folded)``,
    ``lists`` a copy of ``lists`` with the derived lists over the candidates (with
    ``derived``: the query verbatim, tool names; ``rank.exact_list``,
    ``rank.tool_list``), ``scores`` content_id → RRF score (``rank.scores``),
    ``titles`` content_id → first-chunk title of the first ``limit`` × 4 of the fused
    order and of the kept hits, ``kept`` the first ``limit`` content_ids after folding
    near-duplicates and ``folded`` per kept one the number folded into it
    (``rank.fold``)."""
    lists = dict(lists)
    if derived:
        base = rank.fuse(lists, shown)
        for name, order in (
            ("exact", rank.exact_list(base, shown, ts)),
            ("tool", rank.tool_list(base, shown, ts)),
        ):
            if order:
                lists[name] = order
    sc = rank.scores(lists, shown)
    fused = rank.fuse(lists, shown, sc)
    titles = retrieve.titles(conn, fused[: limit * 4])
    kept, folded = rank.fold(fused, shown, titles, limit)
    titles.update(retrieve.titles(conn, [cid for cid in kept if cid not in titles]))
    return lists, sc, titles, kept, folded

"""Did you mean: near words of the store for the query words it does not hold.

A query word is unknown when no term of the word index is its term or starts with it
(the index's ``fts5vocab`` table, ``sinks.sqlite.vocab.prefixes_held``: a prefix the
search's prefix list found is not a misspelling). For each
unknown word of ``MIN_CHARS`` or more ASCII letters and digits, the store's vocabulary
(``sinks.sqlite.vocab.near_words``: its words of about the same length that start with
the same letter) is compared with ``difflib.SequenceMatcher`` (Ratcliff/Obershelp
similarity, Python's standard library); the words at least ``CUTOFF`` alike whose term
the index holds are kept, the most alike first, then the most common (chunks holding
the term). The suggestions are the query with each unknown word replaced: its best
near word, then its second and third (``MAX_SUGGESTIONS``).

A word whose term the index holds can still be misspelled: the stemmer makes
``verifed`` a term (``verif``) that ``verify`` also makes, so a search finds it alone,
but with another word (``orgnization verifed``) no entry holds them all and only the
unknown word was corrected (newuser14 F4). So a word the store's vocabulary holds
neither as written nor as a prefix (``unseen_words``) gets near words too, unless one
of them has its own term (``refused`` beside the stored ``refuse``: a form of a stored
word, not a misspelling; ``verifed``'s near words ``verified``, ``verifies`` are all
``verifi``): the suggestions correct every misspelled word of the query at once.

Runs only when a search found little (``search``: no entry holding all the terms, as
words, substrings, symbols or verbatim); its SQL is in ``sinks.sqlite.vocab``.
"""

from __future__ import annotations

import difflib
import re
import sqlite3

from ctxkeep.sinks.sqlite import vocab

#: the shortest query word a suggestion is looked for (the vocabulary keeps words of 4+)
MIN_CHARS = 4
#: how alike a suggested word must be (``difflib.SequenceMatcher.ratio``, 0-1): 0.75
#: takes one wrong, missing, extra or swapped letter in a word of 4+ letters
#: (``databse`` → ``database`` 0.93, ``serach`` → ``search`` 0.83, ``conifg`` →
#: ``config`` 0.83) and leaves out unrelated words of one shared stem
CUTOFF = 0.75
#: how much longer or shorter than the query word a suggested word may be
LENGTH_SLACK = 2
#: near words kept per unknown word, and whole-query suggestions given at most
MAX_SUGGESTIONS = 3

_WORD = re.compile(r"[A-Za-z0-9]+")


def unknown_words(conn: sqlite3.Connection, words: list[str]) -> list[str]:
    """The ``words`` (lower-cased, each once) of ``MIN_CHARS``+ ASCII letters and
    digits, with a letter, whose term no term of the word index holds or starts with
    (a prefix the search found, ``validateUs``, is not misspelled)."""
    cand = [w.lower() for w in dict.fromkeys(words)]
    cand = [w for w in cand if len(w) >= MIN_CHARS and _WORD.fullmatch(w) and not w.isdigit()]
    if not cand:
        return []
    terms = vocab.index_terms(conn, cand)
    held = vocab.prefixes_held(conn, list(terms.values()))
    return [w for w in cand if w in terms and terms[w] not in held]


def unseen_words(conn: sqlite3.Connection, words: list[str], known: list[str]) -> list[str]:
    """The ``words`` (lower-cased, each once; ``MIN_CHARS``+ ASCII letters and digits,
    with a letter) not in ``known`` that the store's vocabulary holds neither as written
    nor as the start of a word (``vocab.words_held``: a prefix is kept as typed): a
    misspelling the stemmer maps to a held term (``verifed``), or a form of a word the
    store holds in another form (``verifying``)."""
    cand = [w.lower() for w in dict.fromkeys(words)]
    cand = [
        w for w in cand if len(w) >= MIN_CHARS and _WORD.fullmatch(w) and not w.isdigit() and w not in known
    ]
    if not cand:
        return []
    held = vocab.words_held(conn, cand)
    return [w for w in cand if w not in held]


def near(conn: sqlite3.Connection, word: str, other_than: str | None = None) -> list[str]:
    """Up to ``MAX_SUGGESTIONS`` words of the store near ``word`` (lower-case), best
    first: similarity ≥ ``CUTOFF``, then the chunks holding the word's term; only words
    the word index holds, one per index term (the most alike of ``database`` and
    ``databases``). With ``other_than`` (the word's own term, which the index holds:
    ``unseen_words``): [] when an alike word has that term (the word is a form of a
    stored word, ``refused`` beside ``refuse``: not a misspelling), else the alike
    words of other terms."""
    pool = vocab.near_words(conn, word[0], max(MIN_CHARS, len(word) - LENGTH_SLACK), len(word) + LENGTH_SLACK)
    alike = difflib.get_close_matches(word, pool, n=MAX_SUGGESTIONS * 4, cutoff=CUTOFF)
    if not alike:
        return []
    terms = vocab.index_terms(conn, alike)
    if other_than is not None and other_than in terms.values():
        return []
    held = vocab.terms_held(conn, list(terms.values()))
    sm = difflib.SequenceMatcher(b=word)
    by_ratio: dict[float, list[str]] = {}
    for w in alike:
        if terms.get(w) in held:
            sm.set_seq1(w)
            by_ratio.setdefault(round(sm.ratio(), 2), []).append(w)
    out, stems = [], set()
    for ratio in sorted(by_ratio, reverse=True):
        group = sorted(by_ratio[ratio])
        if len({terms[w] for w in group}) > 1:  # equally alike: the most common first
            # (counted only here: a term's count walks its whole posting list)
            docs = vocab.term_docs(conn, [terms[w] for w in group])
            group.sort(key=lambda w: -docs[terms[w]])  # stable: alphabetical within a count
        for w in group:
            if terms[w] not in stems:  # one word per term (not both database and databases)
                stems.add(terms[w])
                out.append(w)
        if len(out) >= MAX_SUGGESTIONS:
            break
    return out[:MAX_SUGGESTIONS]


def suggestions(conn: sqlite3.Connection, query: str, words: list[str]) -> list[str]:
    """``query`` with its unknown ``words`` (``unknown_words``) and its unseen ones
    (``unseen_words``) replaced by near words of the store (``near``): up to
    ``MAX_SUGGESTIONS`` whole queries, best first, each with every such word replaced ([]
    when every word is known or none has a near word). A word is replaced where it
    stands as a whole word (case-insensitively); the rest of the query is kept."""
    choices = {}
    unknown = unknown_words(conn, words)
    for w in unknown:
        got = near(conn, w)
        if got:
            choices[w] = got
    unseen = unseen_words(conn, words, unknown)
    own = vocab.index_terms(conn, unseen) if unseen else {}
    for w in unseen:
        got = near(conn, w, other_than=own.get(w))
        if got:
            choices[w] = got
    if not choices:
        return []
    out: list[str] = []
    for i in range(MAX_SUGGESTIONS):
        q = query
        for w, got in choices.items():
            pick = got[min(i, len(got) - 1)]
            q = re.sub(rf"(?<![A-Za-z0-9]){re.escape(w)}(?![A-Za-z0-9])", pick, q, flags=re.IGNORECASE)
        if q.count('"') % 2:  # a quote never closed (searched as words): not offered back (newuser21 N2)
            q = " ".join(q.replace('"', " ").split())
        if q not in out and q != query:
            out.append(q)
    return out

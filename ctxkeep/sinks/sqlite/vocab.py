"""The store's word vocabulary, read for "did you mean" (``query.search.suggest``).

Two sources, both read-only for the store (what they create lives in the connection's
in-memory ``temp`` schema, which a ``mode=ro`` or ``immutable`` connection may write):

- ``vocab``: every distinct identifier-like token of the chunk texts once, as written
  but lower-cased (ASCII letters and digits, 4 to 40 characters; ``transforms.grams``):
  the words a suggestion is chosen from (``near_words``);
- the word index ``fts_words`` read through an ``fts5vocab`` table of type ``row``
  (``temp.fts_words_terms``: one row per indexed term, its ``doc`` = chunks holding it;
  SQLite's FTS5 documentation, "The fts5vocab Virtual Table Module",
  https://sqlite.org/fts5.html#the_fts5vocab_virtual_table_module). Its terms are what
  the index's tokenizer makes of words (``ddl.WORDS_TOKENIZE``: porter stems,
  ``databases`` → ``databas``), so a word is first turned into its term
  (``index_terms``: the word put in a temporary FTS5 table with the same tokenizer and
  read back through that table's own ``fts5vocab`` of type ``instance``). Whether the
  index holds a term is read from an ``fts5vocab`` of type ``instance`` over
  ``fts_words`` (its first instance), which does not count the term's chunks.
"""

from __future__ import annotations

import sqlite3

from ctxkeep.sinks.sqlite.ddl import TEMP_VOCAB_TABLES

#: the candidates ``near_words`` returns at most (the words of one range, shortest first)
NEAR_MAX = 50_000


def _temp_tables(conn: sqlite3.Connection) -> None:
    """The ``temp`` tables of this module (``ddl.TEMP_VOCAB_TABLES``), made once per connection."""
    for sql in TEMP_VOCAB_TABLES:
        conn.execute(sql)


def index_terms(conn: sqlite3.Connection, words: list[str]) -> dict[str, str]:
    """word → the term the word index holds for it (its first token as
    ``ddl.WORDS_TOKENIZE`` makes it: lower-cased, diacritics removed, porter-stemmed);
    a word the tokenizer makes no token of is left out."""
    _temp_tables(conn)
    conn.execute("DELETE FROM temp.term_probe")
    conn.executemany("INSERT INTO temp.term_probe(rowid, w) VALUES(?, ?)", list(enumerate(words)))
    out: dict[str, str] = {}
    try:
        for doc, term in conn.execute("SELECT doc, term FROM temp.term_probe_terms ORDER BY doc, offset"):
            out.setdefault(words[doc], term)
    finally:
        conn.execute("DELETE FROM temp.term_probe")
    return out


def term_docs(conn: sqlite3.Connection, terms: list[str]) -> dict[str, int]:
    """index term → the chunks of the word index holding it (0 for a term it lacks)."""
    _temp_tables(conn)
    out = {}
    for t in dict.fromkeys(terms):
        row = conn.execute("SELECT doc FROM temp.fts_words_terms WHERE term = ?", (t,)).fetchone()
        out[t] = row[0] if row else 0
    return out


def terms_held(conn: sqlite3.Connection, terms: list[str]) -> set[str]:
    """The index ``terms`` the word index holds (in at least one chunk): the ``term_docs``
    that are not 0, without counting them (the first instance of each term,
    ``temp.fts_words_instances``: ~0.1 ms a term where its count took up to 40 ms on a
    10 GB store)."""
    _temp_tables(conn)
    return {
        t
        for t in dict.fromkeys(terms)
        if conn.execute("SELECT 1 FROM temp.fts_words_instances WHERE term = ? LIMIT 1", (t,)).fetchone()
    }


def prefixes_held(conn: sqlite3.Connection, terms: list[str]) -> set[str]:
    """The index ``terms`` that some term of the word index starts with (itself
    included): what a prefix query finds (the first instance of one term range of
    ``temp.fts_words_instances`` each; the ``row`` table counted the whole posting list
    of the range's first term first: 5-40 ms a common word on a 10 GB store)."""
    _temp_tables(conn)
    out = set()
    for t in dict.fromkeys(terms):
        if not t:
            continue
        hi = t[:-1] + chr(ord(t[-1]) + 1)
        if conn.execute(
            "SELECT 1 FROM temp.fts_words_instances WHERE term >= ? AND term < ? LIMIT 1", (t, hi)
        ).fetchone():
            out.add(t)
    return out


def words_held(conn: sqlite3.Connection, words: list[str]) -> set[str]:
    """The ``words`` (lower-case) that ``vocab`` holds as written or as the start of a
    word (a prefix the search's prefix list finds: ``orchestrat``), one range probe of
    its unique index each; every word on a store without a vocabulary (schema < 9: no
    word is then called unseen)."""
    out = set()
    try:
        for w in dict.fromkeys(words):
            if not w:
                continue
            hi = w[:-1] + chr(ord(w[-1]) + 1)
            if conn.execute("SELECT 1 FROM vocab WHERE term >= ? AND term < ? LIMIT 1", (w, hi)).fetchone():
                out.add(w)
    except sqlite3.OperationalError:  # no vocab table: an older store, read as it is
        return set(words)
    return out


def near_words(conn: sqlite3.Connection, first: str, shortest: int, longest: int) -> list[str]:
    """The ``vocab`` words starting with ``first`` (one or more characters, lower-case)
    of ``shortest`` to ``longest`` characters, shortest first, at most ``NEAR_MAX``
    (one range of ``vocab``'s unique index on ``term``). [] on a store without a
    vocabulary (schema < 9)."""
    hi = first[:-1] + chr(ord(first[-1]) + 1)
    try:
        rows = conn.execute(
            "SELECT term FROM vocab WHERE term >= ? AND term < ? AND length(term) BETWEEN ? AND ? "
            "ORDER BY length(term), term LIMIT ?",
            (first, hi, shortest, longest, NEAR_MAX),
        ).fetchall()
    except sqlite3.OperationalError:  # no vocab table: an older store, read as it is
        return []
    return [r[0] for r in rows]

"""Terms for the substring index, the cheap alternative to a trigram index.

The word index (``porter unicode61``) already finds words and identifier prefixes
(``validateUs*``). It misses two things, which this module turns into tokens of a
second, much smaller FTS5 table:

- CJK text: unicode61 makes one token of a whole run of CJK characters, so ``字段``
  inside ``这个字段`` is not found. Every run becomes its overlapping bigrams plus its
  last character (``这个 个字 字段 段``): a 2-character term is one bigram, a longer
  term a phrase of bigrams, a 1-character term the prefix query ``字*``.
- the inner parts of identifiers: ``validateUserInput`` → ``validate user input``,
  ``HTTPServerError`` → ``http server error``, so ``UserInput`` is the phrase
  ``"user input"``. (snake_case and kebab-case are already split by unicode61.)

- Latin words in CJK text: unicode61 glues ``gemini`` into ``涉及gemini的处理`` (CJK
  characters are token characters), so the word index cannot see it; and a query that
  mixes scripts (``gemini 处理``) must match within one index. A chunk that holds CJK
  therefore also gets its ASCII words (lower-cased) as terms here.

Only texts that contain CJK or camelCase identifiers get a row.

Symbol terms (``symbols``, ``symbols_batch``): terms whose symbols unicode61 drops
(``_SYMBOL``): ``c++`` and ``C#`` are ``c`` in the word index (and match ``c:\\Users``).
They are tokens as written in a third FTS5 table of their own, ``fts_symbols`` (its
tokenizer keeps ``+ # .``, ``ddl.FTS_TABLES``; ``.NET`` is ``.net``), with the chunk's
ASCII words, so ``c++ compiler`` matches within that index. Their own table (schema
v8) leaves ``fts_grams``' BM25 statistics as they are without them: in one table
(v7) every chunk holding ``i++`` or ``x#`` added all its words there, and the
relevance set's MRR fell 0.845 → 0.832.
"""

from __future__ import annotations

import functools
import re

CJK_CLASS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"


@functools.lru_cache(maxsize=1)
def cjk_run_re() -> re.Pattern:
    """A run of CJK characters (``CJK_CLASS``), compiled on first use: the Unicode
    ranges take 3-7 ms to compile, which every process importing this module paid (a
    no-op ingest, every search) before it met a text or query term."""
    return re.compile(f"[{CJK_CLASS}]+")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character (``CJK_CLASS``); an ASCII text is answered
    without compiling ``cjk_run_re``."""
    return not text.isascii() and cjk_run_re().search(text) is not None


_CAMEL = re.compile(r"\b[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*\b")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]{2,}")
#: a term whose symbols unicode61 drops: ``c++``, ``C#``, ``F#`` (trailing ``+``/``#``)
#: and ``.NET``-style names (a dot, then 2+ upper-case letters, after a non-word or a
#: word: ``ASP.NET`` holds ``.NET``; ``os.Path`` is not one, ``.json`` neither: they
#: would give most chunks a row); kept lower-cased as written
#: (written ``(?=…[A-Za-z])[A-Za-z0-9_]++``: the same matches as
#: ``[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*``, whose two overlapping stars backtrack
#: quadratically in the length of each word; 3-4x faster on session text)
_SYMBOL = re.compile(
    r"(?<![A-Za-z0-9_+#])(?=[A-Za-z0-9_]*[A-Za-z])[A-Za-z0-9_]++[+#]+(?![A-Za-z0-9_])"
    r"|\.[A-Z]{2,}(?![A-Za-z0-9_])"
)
#: Rust-regex prefilter of ``_SYMBOL`` (a superset: a text without it has no symbol
#: term; every match is a word character, ``+``/``#``, then a non-word character or
#: the end, so ``a+b`` and ``issue#12`` do not send a text to the Python scan)
_SYMBOL_CAND = r"[A-Za-z0-9_][+#]+(?:[^A-Za-z0-9_]|$)|\.[A-Z]{2,}(?:[^A-Za-z0-9_]|$)"


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping bigrams of a CJK run plus its last character."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def camel_parts(word: str) -> list[str]:
    """Lower-cased parts of a camelCase / PascalCase identifier."""
    return [p.lower() for p in _PARTS.findall(word)]


def grams(text: str) -> str:
    """Space-separated substring-index terms of ``text`` ('' when there are none)."""
    out: list[str] = []
    if not text:
        return ""
    seen_cjk = False
    for m in () if text.isascii() else cjk_run_re().finditer(text):
        seen_cjk = True
        out.extend(cjk_bigrams(m.group()))
        out.append("|")  # run boundary: keeps phrases from spanning two runs
    if seen_cjk:
        out.extend(w.lower() for w in _ASCII_WORD.findall(text))
        out.append("|")
    for m in _CAMEL.finditer(text):
        parts = camel_parts(m.group())
        if len(parts) > 1:
            out.extend(parts)
            out.append("|")
    return " ".join(out) if out else ""


#: Vectorized stand-ins for the scans, as Rust-regex patterns for Polars over a whole
#: batch (Polars' regex has no lookaround and a different Unicode ``\b``, hence:)
#: - ``_CJK_CHAR``: a text with a CJK run holds one (same code point class).
#: - ``_CAMEL_CAND``: a ``_CAMEL`` match is a maximal run of ASCII letters and digits
#:   that matches ``[A-Za-z][a-z0-9]*[A-Z]…`` as a whole and whose neighbours are not
#:   word characters. This pattern finds every such run (plus the one separator
#:   character before it, stripped later) whatever its neighbours.
#: - ``_CAMEL_AMBIGUOUS``: such a run next to ``_`` or a non-ASCII character, the only
#:   neighbours that may be word characters. A text without one gets exactly the
#:   ``_CAMEL`` matches from ``_CAMEL_CAND``; a text with one runs ``_CAMEL`` itself.
_CJK_CHAR = f"[{CJK_CLASS}]"
_CAMEL_RUN = r"[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*"
_CAMEL_CAND = rf"(?:^|[^A-Za-z0-9]){_CAMEL_RUN}"
_CAMEL_AMBIGUOUS = rf"(?:^|[^A-Za-z0-9]){_CAMEL_RUN}(?:_|[^\x00-\x7F])|(?:_|[^\x00-\x7F]){_CAMEL_RUN}"
_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@functools.lru_cache(maxsize=65536)
def _camel_parts_cached(word: str) -> tuple[str, ...]:
    return tuple(camel_parts(word))


def _grams_of(text: str, cjk: bool, camel_words: list[str]) -> str:
    """``grams(text)`` given whether the text has a CJK character and its ``_CAMEL``
    matches (in order)."""
    out: list[str] = []
    seen_cjk = False
    if cjk:
        for run in cjk_run_re().findall(text):
            seen_cjk = True
            out.extend(cjk_bigrams(run))
            out.append("|")
    if seen_cjk:
        out.extend(w.lower() for w in _ASCII_WORD.findall(text))
        out.append("|")
    for word in camel_words:
        parts = _camel_parts_cached(word)
        if len(parts) > 1:
            out.extend(parts)
            out.append("|")
    return " ".join(out) if out else ""


def _is_word(ch: str) -> bool:
    """Whether ``ch`` is a word character of Python's ``re`` (``\\w`` on str: what
    ``str.isalnum()`` holds, and ``_``), the neighbours ``_CAMEL``'s ``\\b`` looks at."""
    return ch == "_" or ch.isalnum()


def _camel_words(text: str, found: list[str]) -> list[str]:
    """``_CAMEL.findall(text)`` from the ``_CAMEL_CAND`` matches of ``text`` (in order):
    a ``_CAMEL`` match is a whole run of ASCII letters and digits of its shape whose
    neighbours are not word characters (``_is_word``), so it is one of the candidates
    (a maximal run, after a non-alphanumeric character or at the start) whose two
    neighbours pass. A candidate is found in the text from the end of the one before:
    no earlier occurrence of its characters can exist there, since that would have been
    an earlier match of the pattern."""
    words = []
    pos = 0
    for cand in found:
        at = text.find(cand, pos)
        pos = at + len(cand)
        if cand[0] in _ASCII_LETTERS:  # at the start of the text: no left neighbour
            word = cand
        elif _is_word(cand[0]):
            continue
        else:
            word = cand[1:]
        if pos < len(text) and _is_word(text[pos]):
            continue
        words.append(word)
    return words


def _has_cjk_batch(texts: list[str], s) -> list[bool]:
    """``[has_cjk(t) for t in texts]`` (``s``: ``texts`` as a Polars Series): an ASCII
    text has none (``str.isascii`` reads a flag CPython keeps on the string: no scan),
    so Polars scans only the others (``_CJK_CHAR``, one vectorized pass over them).
    On the 200 MB tree's chunks 77 % of the texts but 49 % of the characters are ASCII:
    0.071 -> 0.044 CPU s."""
    import polars as pl

    odd = [i for i, t in enumerate(texts) if not t.isascii()]
    out = [False] * len(texts)
    if odd:
        found = s.gather(pl.Series(odd, dtype=pl.UInt32)).str.contains(_CJK_CHAR).to_list()
        for i, c in zip(odd, found, strict=True):
            out[i] = c
    return out


def grams_batch(texts: list[str]) -> list[str]:
    """``[grams(t) for t in texts]``, several times faster on a batch: Polars finds, in
    one vectorized pass each, which texts have a CJK character and the camelCase
    candidates of every text (see ``_CAMEL_CAND``); the Python regexes run only where
    needed (CJK texts; the few texts with a candidate next to ``_`` or a non-ASCII
    character), and the parts of repeated identifiers are cached.

    Args: ``texts``, non-null str (chunk texts; valid UTF-8, as they come from a frame).
    Returns: one space-separated term string per text, '' for none; identical to
    ``grams`` (tests/transforms/test_grams_batch.py compares both on every corpus chunk).
    """
    import polars as pl

    if not texts:
        return []
    s = pl.Series("text", texts, dtype=pl.String)
    cjk = _has_cjk_batch(texts, s)
    cands = s.str.extract_all(_CAMEL_CAND).to_list()
    # ``_CAMEL_AMBIGUOUS`` needs a candidate and a ``_`` or a non-ASCII character: the
    # other texts are not scanned (without a candidate, ``_camel_words`` gives none)
    maybe = [
        i for i, (t, f) in enumerate(zip(texts, cands, strict=True)) if f and ("_" in t or not t.isascii())
    ]
    ambiguous = [False] * len(texts)
    if maybe:
        amb_of = s.gather(pl.Series(maybe, dtype=pl.UInt32)).str.contains(_CAMEL_AMBIGUOUS).to_list()
        for i, a in zip(maybe, amb_of, strict=True):
            ambiguous[i] = a
    out = []
    for t, c, found, amb in zip(texts, cjk, cands, ambiguous, strict=True):
        if amb:
            words = _camel_words(t, found)
        elif found:
            words = [w if w[0] in _ASCII_LETTERS else w[1:] for w in found]
        else:
            words = []
        out.append(_grams_of(t, c, words) if (c or words) else "")
    return out


def query_grams(term: str) -> str | None:
    """An FTS5 expression for ``term`` on the substring index, or None when the term
    has neither CJK nor camelCase parts. CJK: the phrase of its bigrams (a 2-character
    term is one bigram; 1 character: the prefix query ``"字"*``, which matches the
    bigrams it starts and the run-final character); camelCase: the phrase of its
    parts, the last one as a prefix. Only term characters reach FTS5, quoted, so the
    expression always parses."""
    pieces = []
    for m in () if term.isascii() else cjk_run_re().finditer(term):
        run = m.group()
        if len(run) == 1:
            pieces.append(f'"{run}"*')
        else:
            pieces.append('"' + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + '"')
    if not pieces:
        parts = camel_parts(term) if _CAMEL.fullmatch(term.strip()) else []
        if len(parts) > 1:
            # the last part may be cut short (``validateUs`` → ``"validate us"*``)
            pieces.append('"' + " ".join(parts) + '"*')
    return " AND ".join(pieces) if pieces else None


def is_symbol_term(term: str) -> bool:
    """Whether ``term`` is one symbol term (``c++``, ``C#``, ``.NET``, ``.net``; see
    ``_SYMBOL``): it is searched as written in ``fts_symbols``, not in the word index
    (where ``c++`` is ``c``)."""
    return bool(_SYMBOL_TERM.fullmatch(term.strip()))


#: written without nested stars (a lookahead for the letter, then possessive runs): the
#: plain ``[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*[+#]+`` backtracks ~n^2 steps on a long word
#: with no ``+``/``#`` (a 3,000-letter query term took 0.2 s a call, 100,000 minutes)
_SYMBOL_TERM = re.compile(r"(?=[0-9_]*[A-Za-z])[A-Za-z0-9_]++[+#]+|\.[A-Za-z][A-Za-z0-9]*+")


def symbols(text: str) -> str:
    """The ``fts_symbols`` terms of ``text``: its symbol terms (``_SYMBOL``, lower-cased
    as written: ``c++``, ``c#``, ``.net``), ``|``, then its ASCII words (2+ letters or
    digits, lower-cased); '' when it holds no symbol term."""
    syms = [m.group().lower() for m in _SYMBOL.finditer(text)] if text else []
    if not syms:
        return ""
    return " ".join([*syms, "|", *(w.lower() for w in _ASCII_WORD.findall(text)), "|"])


#: the anchor of ``_SYMBOL``'s second branch (``_symbol_terms``): a dot before two
#: capitals (the first branch's, a word character before ``+``/``#``, is found by
#: ``str.find``)
_SYMBOL_DOT = re.compile(r"\.[A-Z]{2}")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _symbol_terms(text: str) -> list[str]:
    """``[m.group() for m in _SYMBOL.finditer(text)]``, 2-3x faster on session text: a
    match starts either at a dot (the second branch: ``.NET``) or at the first
    character of a run of word characters that ``+``/``#`` follows (the first branch;
    its lookbehind refuses any other start), so ``_SYMBOL.match`` runs only there
    (``match(text, pos)`` sees the characters before ``pos``), found by two plain
    patterns instead of ``_SYMBOL``'s lookarounds at every position. The only match
    ``finditer`` would skip is a first-branch one starting just after a dot whose
    second-branch match covers it (``.NE+``: ``.NE``): skipped here too.
    tests/transforms/test_grams_batch.py compares both on every corpus chunk and on
    random texts of the characters that matter."""
    found: dict[int, str] = {}
    covered: set[int] = set()
    for m in _SYMBOL_DOT.finditer(text):
        dot = m.start()
        if hit := _SYMBOL.match(text, dot):
            found[dot] = hit.group()
            covered.add(dot + 1)
    # ``_SYMBOL_END``'s matches (word character, then ``+``/``#``) found from each
    # ``+`` and ``#`` by ``str.find`` (a C search): the pattern's scan stopped at nearly
    # every character (``_symbol_terms`` 0.118 -> 0.03 CPU s on the 200 MB tree's 2,806
    # candidate chunks). Its matches cannot overlap (a ``+``/``#`` is not a word
    # character), and each gives its own start, so the order they are met in is free
    for sym in "+#":
        at = text.find(sym, 1)
        while at > 0:
            start = at - 1
            at = text.find(sym, at + 1)
            if text[start] not in _WORD_CHARS:
                continue
            while start and text[start - 1] in _WORD_CHARS:
                start -= 1
            if start in covered or start in found:
                continue
            if hit := _SYMBOL.match(text, start):
                found[start] = hit.group()
    return [found[k] for k in sorted(found)]


def symbols_batch(texts: list[str]) -> list[str]:
    """``[symbols(t) for t in texts]``: Polars finds the texts that may hold a symbol
    term (``_SYMBOL_CAND``, one vectorized pass); the symbol terms of those are found
    by ``_symbol_terms`` and their ASCII words by Polars (``_ASCII_WORD``'s matches are
    ASCII: Polars' lower case is Python's). ``texts``: non-null str (chunk texts)."""
    import polars as pl

    if not texts:
        return []
    s = pl.Series("text", texts, dtype=pl.String)
    cand = s.str.contains(_SYMBOL_CAND).to_list()
    out = [""] * len(texts)
    picked = [i for i, c in enumerate(cand) if c]
    syms = {i: [t.lower() for t in _symbol_terms(texts[i])] for i in picked}
    picked = [i for i in picked if syms[i]]
    if not picked:
        return out
    words = s.gather(picked).str.extract_all(_ASCII_WORD.pattern).list.join(" ").str.to_lowercase().to_list()
    for i, w in zip(picked, words, strict=True):
        out[i] = " ".join([*syms[i], "|", w, "|"]) if w else " ".join([*syms[i], "|", "|"])
    return out


def query_symbol(term: str) -> str | None:
    """The ``fts_symbols`` expression of a symbol term (``is_symbol_term``): the
    lower-cased term quoted (``C#`` → ``"c#"``); None for any other term."""
    return '"' + term.strip().lower() + '"' if is_symbol_term(term) else None


# ---------------------------------------------------------------- vocabulary
#
# Inner substrings (``allbac`` in ``callback``, ``penPrintTa`` in ``openPrintTable``):
# a trigram index of every chunk text would cost more than the text itself (53 MB for
# 42 MB of chunk text, measured). The store instead keeps its *vocabulary*: every
# distinct identifier-like token once (``vocab`` and its FTS5 ``trigram`` index
# ``fts_vocab``). A substring query finds the tokens that contain it there, and the
# word index finds the chunks holding any of those tokens.

#: a vocabulary token: a run of ASCII letters and digits (what unicode61 makes of an
#: identifier: ``_``, ``.``, ``-`` split), 4 to ``VOCAB_MAX_CHARS`` characters, with a
#: letter; hex runs of 8+ with a digit (hashes, ids) are left out
VOCAB_TOKEN = r"[A-Za-z0-9]{4,}"
VOCAB_MAX_CHARS = 40
_VOCAB_HEX = re.compile(r"[0-9a-f]{8,}")
#: the only characters whose lower case holds an ASCII letter (checked over all of Unicode)
_LOWER_TO_ASCII = "[\u0130\u212a]"
#: ``VOCAB_TOKEN`` in a lower-cased text (``vocab_lists``)
_VOCAB_LOWER = r"[a-z0-9]{4,}"


def _vocab_ok(tok: str) -> bool:
    return (
        len(tok) <= VOCAB_MAX_CHARS
        and not tok.isdigit()
        and not (len(tok) >= 8 and _VOCAB_HEX.fullmatch(tok) and any(ch.isdigit() for ch in tok))
    )


def vocab_terms(texts: list[str]) -> set[str]:
    """The distinct vocabulary tokens (``VOCAB_TOKEN``, lower-cased) of ``texts``."""
    import polars as pl

    if not texts:
        return set()
    # the token class is case-blind: tokens are found in the texts as written and
    # only the distinct ones lower-cased (not a lower-cased copy of every text), unless
    # a text holds one of the two characters whose lower case is ASCII (U+0130 İ → i̇,
    # U+212A Kelvin sign → k): the same tokens either way
    s = pl.Series("t", texts, dtype=pl.String)
    if s.str.contains(_LOWER_TO_ASCII).any():
        s = s.str.to_lowercase()
    toks = s.str.extract_all(VOCAB_TOKEN).explode().drop_nulls().unique().str.to_lowercase().unique()
    return {t for t in toks.to_list() if _vocab_ok(t)}


def vocab_lists(texts: list[str]) -> list[str]:
    """Each text's distinct vocabulary tokens (``VOCAB_TOKEN``, lower-cased, those
    ``vocab_terms`` keeps) joined by spaces ('' for none): the union of their
    ``split()`` over any subset of ``texts`` is ``vocab_terms`` of that subset, since a
    text's tokens do not depend on the others (a text holding U+0130 or U+212A is
    lower-cased before its tokens are found, as ``vocab_terms`` does to all: the other
    texts' tokens are the same either way). A reader process computes them per chunk
    (``transforms.chunk.chunks_frame(index_terms=True)``), so the ingest process only
    takes the union of a group's (``vocab_union``)."""
    import polars as pl

    if not texts:
        return []
    # every text lower-cased first, then its tokens found (``_VOCAB_LOWER``): the same
    # lists as the tokens found as written, then lower-cased (only U+0130 and U+212A
    # lower-case to an ASCII letter, and such a text was lower-cased first either way),
    # without the per-token ``list.eval``: 0.56 -> 0.50 CPU s on the 200 MB tree's chunks
    s = pl.Series("t", texts, dtype=pl.String).str.to_lowercase()
    lists = s.str.extract_all(_VOCAB_LOWER).list.unique(maintain_order=True)
    bad = [t for t in lists.explode().drop_nulls().unique().to_list() if not _vocab_ok(t)]
    if bad:
        lists = lists.list.eval(pl.element().filter(~pl.element().is_in(bad)))
    return lists.list.join(" ").fill_null("").to_list()


def vocab_union(lists) -> set[str]:
    """The set of the tokens of ``lists`` (a Polars Series of ``vocab_lists`` strings):
    ``vocab_terms`` of the texts they were made from."""
    toks = lists.str.split(" ").explode().drop_nulls().unique().to_list()
    return {t for t in toks if t}


def query_vocab(term: str) -> str | None:
    """The ``fts_vocab`` (trigram) expression of ``term``'s inner substring: the quoted
    lower-cased term when it is one run of 3+ ASCII letters and digits with a letter
    (``penPrintTa`` → ``"penprintta"``), else None."""
    t = term.strip().lower()
    if len(t) < 3 or len(t) > VOCAB_MAX_CHARS or not t.isalnum() or not t.isascii() or t.isdigit():
        return None
    return f'"{t}"'

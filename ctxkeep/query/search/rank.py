"""Ranking for search: the candidate lists fused by reciprocal rank fusion, the priors
per list and per kind, ties, and the folding of near-duplicate hits. Pure functions
over ``retrieve.Candidate`` (no SQL).

The lists (``phrase``, ``words``, ``grams``, ``grams_all``, ``symbols``, ``any``, ``prefix``, ``exact``,
``tool``; see ``ctxkeep.query.search``) are fused by RRF: a candidate scores
Σ ``LIST_WEIGHT[list]`` / (``RRF_K`` + rank), rank 1-based, times the prior of its
kind (``KIND_WEIGHT``). Ties, within a list and after fusion, go to the more recent
entry (``ts``, ISO-8601 UTC text, compared as text).
"""

from __future__ import annotations

import re

from ctxkeep.query.search.retrieve import Candidate

RRF_K = 60
# Weight of each candidate list in the fusion: a tool-name match counts double
# (tool names weigh above body text); the others count once.
#: "grams_all": the substring index matched every term of a query that mixes CJK with
#: other words (``grams_match``) — as strong as the word index's all-terms list, which
#: cannot match such a text (unicode61 glues ``gemini`` into ``涉及gemini的处理``)
#: "symbols": every symbol term and other word of the query in ``fts_symbols``, the
#: only index that holds ``c++`` as written (as grams_all for ``c++`` in v7)
LIST_WEIGHT = {"tool": 2.0, "grams_all": 2.0, "symbols": 2.0}
#: lists of inner-substring matches (``allbac`` in ``callback``): a candidate only they
#: (and the lists derived from all candidates, ``exact`` and ``tool``) found ranks
#: below every whole-word or prefix hit, whatever its score
SUBSTRING_LISTS = frozenset({"subs"})
DERIVED_LISTS = frozenset({"exact", "tool"})
#: lists of texts holding the query's words side by side, in order (``phrase``): a
#: candidate they found ranks above every other, whatever its score (a short error
#: line holding "organization must be verified" above long tool output holding
#: ``Organization`` and ``verification`` 2,000 tokens apart)
PHRASE_LISTS = frozenset({"phrase"})
# Prior per kind, multiplied into the fused score: people mostly look for what was
# said (messages, summaries); tool input/output and reasoning come next; meta records
# (token counts, turn context, attachments) last.
KIND_WEIGHT = {
    "message": 1.0,
    "summary": 1.0,
    "tool_call": 0.85,
    "tool_result": 0.85,
    "thinking": 0.85,
    "meta": 0.5,
}
FOLD_TITLE_CHARS = 80
#: word-set overlap (Jaccard) above which two hits of one key are the same thing
FOLD_SIMILARITY = 0.6
_FOLD_WORD_RE = re.compile(r"\w+")
#: every ASCII character that ``\w`` does not match, mapped to a space
_ASCII_NON_WORD = str.maketrans({chr(i): " " for i in range(128) if not (chr(i).isalnum() or chr(i) == "_")})
#: the same, as a table of bytes (UTF-8 bytes of other characters kept)
_ASCII_NON_WORD_BYTES = bytes(
    0x20 if i < 128 and not (chr(i).isalnum() or chr(i) == "_") else i for i in range(256)
)


def fold_words(text: str) -> set[str]:
    r"""The distinct words (``\w+`` runs) of ``text`` lower-cased, as ``fold`` compares
    them. Every ASCII non-word character becomes a space (``\w`` is ``[a-z0-9_]`` in
    ASCII) and the text is ``split``; no character ``split`` cuts at is a word
    character (checked over every code point), so a piece that is ASCII is a whole
    word, and only the pieces holding other characters (``✓``, ``’``, CJK) are cut with
    the regex (in one pass): the same words as ``re.findall`` on the whole text, ~2x faster on long
    ASCII tool output. A text that is not ASCII is translated as UTF-8 bytes (``str``'s
    ``translate`` looks every character up in a dict once the text is not ASCII):
    ~3x faster than the regex on a long file read holding a few ``✓``."""
    low = text.lower()
    if low.isascii():
        return set(low.translate(_ASCII_NON_WORD).split())
    raw = low.encode("utf-8", "surrogatepass").translate(_ASCII_NON_WORD_BYTES)
    words = set(raw.decode("utf-8", "surrogatepass").split())
    odd = [w for w in words if not w.isascii()]
    if odd:  # one regex pass over those pieces, space-joined (a space is not \w)
        words.difference_update(odd)
        words.update(_FOLD_WORD_RE.findall(" ".join(odd)))
    return words


def ranked_contents(rows: list[tuple[int, float]], cache: dict[int, Candidate | None]) -> list[Candidate]:
    """One candidate per content, in list order (its best chunk), ties broken by
    recency. ``rows`` are ``(chunk_id, rank)`` with rank ascending = better (BM25);
    chunks absent from ``cache`` or ``None`` there (no entry passes the filters) are
    skipped. Ranks equal to 9 decimals count as ties."""
    best: dict[int, tuple[float, str, Candidate]] = {}
    for cid, rank in rows:
        c = cache.get(cid)
        if c is None:
            continue
        if c.content_id not in best or rank < best[c.content_id][0]:
            best[c.content_id] = (rank, c.entries[0].ts or "", c)
    order = sorted(best.values(), key=lambda v: v[1], reverse=True)  # newer first …
    order.sort(key=lambda v: round(v[0], 9))  # … within equal rank
    return [v[2] for v in order]


def scores(lists: dict[str, list[int]], shown: dict[int, Candidate]) -> dict[int, float]:
    """RRF score of every candidate: Σ over lists of weight / (RRF_K + rank), rank
    1-based (``LIST_WEIGHT``, default 1.0), times the prior of its kind
    (``KIND_WEIGHT``, default 1.0). ``lists``: list name → content_ids, best first;
    ``shown``: content_id → its candidate."""
    out: dict[int, float] = {}
    for name, order in lists.items():
        w = LIST_WEIGHT.get(name, 1.0)
        for r, cid in enumerate(order):
            out[cid] = out.get(cid, 0.0) + w / (RRF_K + r + 1)
    for cid in out:  # a text held by several entries counts as its best kind
        out[cid] *= max(KIND_WEIGHT.get(e.kind, 1.0) for e in shown[cid].entries)
    return out


def fuse(
    lists: dict[str, list[int]], shown: dict[int, Candidate], sc: dict[int, float] | None = None
) -> list[int]:
    """Reciprocal rank fusion of the lists (``scores``): content_ids best first, those
    found by ``PHRASE_LISTS`` before all others, those found only by
    ``SUBSTRING_LISTS`` (and derived lists) after all others; scores equal to 12
    decimals are ties and go to the newer entry. ``sc``: the lists' ``scores`` when
    already computed."""
    if sc is None:
        sc = scores(lists, shown)
    word_level: set[int] = set()
    phrase: set[int] = set()
    for name, order in lists.items():
        if name not in SUBSTRING_LISTS and name not in DERIVED_LISTS:
            word_level.update(order)
        if name in PHRASE_LISTS:
            phrase.update(order)
    scored = [
        (cid in phrase, cid in word_level, round(v, 12), shown[cid].entries[0].ts or "", cid)
        for cid, v in sc.items()
    ]
    scored.sort(key=lambda x: (x[0], x[1], x[2], x[3]), reverse=True)
    return [x[4] for x in scored]


def fold(
    fused: list[int], shown: dict[int, Candidate], titles: dict[int, str], limit: int
) -> tuple[list[int], dict[int, int]]:
    """The first ``limit`` of ``fused`` after dropping near-duplicates: a hit with the
    same session, kind, tool and title start (``FOLD_TITLE_CHARS``, whitespace
    collapsed; ``titles``: content_id → title) as a better one, and a matching chunk
    sharing ≥ ``FOLD_SIMILARITY`` of its words (successive versions of one todo list,
    re-reads of one file; not a session's different patches, which all start
    ``apply_patch <<'PATCH'``), is folded into it. Hits without a title are never
    folded. Returns the kept content_ids and, per kept one, how many were folded in."""
    kept: list = []
    seen: dict = {}
    similar: dict = {}
    words: dict[int, set[str]] = {}

    def ws(cid: int) -> set[str]:
        if cid not in words:
            words[cid] = fold_words(shown[cid].text)
        return words[cid]

    for cid in fused:
        if len(kept) >= limit:
            break
        e = shown[cid].entries[0]
        t = " ".join((titles.get(cid) or "").split())[:FOLD_TITLE_CHARS]
        key = (e.session_id, e.kind, e.tool_name, t) if t else None
        into = None
        for k in seen.get(key, ()) if key is not None else ():
            a, b = ws(k), ws(cid)
            if _similar(a, b):
                into = k
                break
        if into is not None:
            similar[into] = similar.get(into, 0) + 1
            continue
        if key is not None:
            seen.setdefault(key, []).append(cid)
        kept.append(cid)
    return kept, similar


def _similar(a: set[str], b: set[str]) -> bool:
    """Whether two non-empty word sets share ≥ ``FOLD_SIMILARITY`` of their union
    (Jaccard). The union's size is counted, not built (|a| + |b| - |a ∩ b|), and sets
    whose sizes differ too much are not intersected (|a ∩ b| ≤ the smaller size, |a ∪ b|
    ≥ the larger): a session's re-reads of one long file held a search for ~5 ms here."""
    if not a or not b:
        return False
    small, large = sorted((len(a), len(b)))
    if small < FOLD_SIMILARITY * large:
        return False
    inter = len(a & b)
    return inter >= FOLD_SIMILARITY * (len(a) + len(b) - inter)


def exact_list(base: list[int], shown: dict[int, Candidate], ts: list[str]) -> list[int]:
    """The ``exact`` list: the candidates of ``base`` (in its order) whose shown chunk
    (title, newline, text) holds the query terms ``ts`` verbatim, space-joined,
    case-insensitive, whitespace collapsed (hyphenated ids, paths, error messages)."""
    words = " ".join(ts).lower().split()
    if not words:
        return []
    # "w1 w2" is in the whitespace-collapsed text exactly when w1, a run of whitespace
    # (``\s``: the characters ``str.split`` cuts at) and w2 are in the lower-cased text:
    # no split and join of every candidate's chunk
    needle = re.compile(r"\s+".join(map(re.escape, words)))
    return [cid for cid in base if needle.search(f"{shown[cid].title}\n{shown[cid].text}".lower())]


def tool_list(base: list[int], shown: dict[int, Candidate], ts: list[str]) -> list[int]:
    """The ``tool`` list: the candidates of ``base`` (in its order) held by an entry
    whose tool name is one of the terms ``ts`` (case-insensitive)."""
    low_terms = {t.lower() for t in ts}
    return [cid for cid in base if any((e.tool_name or "").lower() in low_terms for e in shown[cid].entries)]

"""Query parsing for search: the query's terms, their quoting, the FTS5 MATCH
expressions of the candidate lists, time bounds (``parse_when``) and the filters
(``Filters``: validation, facet MATCH, WHERE fragment).

User input never reaches FTS5 as syntax: every term is quoted, so ``c++``,
``"unbalanced``, ``foo AND``, ``a-b``, ``it's``, ``NOT`` and ``(x`` are searched as
words and never raise. The builders here are pure (strings in, strings out), apart
from ``Filters.resolve_sessions``, which looks session ids up in the store.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, fields

from ctxkeep.errors import UsageError
from ctxkeep.paths import under_sql
from ctxkeep.schema import AGENTS, KINDS, ROLES, STATUSES
from ctxkeep.timeutil import check_window, format_utc, when_bound
from ctxkeep.transforms import facets as fx
from ctxkeep.transforms.grams import _ASCII_WORD as ASCII_WORD_RE
from ctxkeep.transforms.grams import has_cjk, is_symbol_term, query_grams, query_symbol, query_vocab

_TERM_RE = re.compile(r'"([^"]*)"|(\S+)')
_WORD_RE = re.compile(r"\w", re.UNICODE)
#: the last token as unicode61 cuts it (letters and digits; ``_`` and punctuation split)
_LAST_TOKEN_RE = re.compile(r"[^\W_]+(?=[\W_]*$)", re.UNICODE)


def parse_when(value: str | None, *, now: dt.datetime | None = None, upper: bool = False) -> str | None:
    """A ``since`` (or with ``upper`` an ``until``) value as stored-``ts`` text
    (ISO-8601 UTC, ``…Z``) for ``since <= ts < until``: ``timeutil.when_bound`` (the
    one parser: a date is a whole UTC day, so ``until`` of a date includes that day; a
    datetime or an age ``30m``, ``12h``, ``7d``, ``2w`` before ``now`` is exact).
    Returns None for None/''. Raises UsageError for anything else."""
    t = when_bound(value, upper=upper, now=now)
    return None if t is None else format_utc(t)


def _values(v) -> list[str]:
    if v is None or v == "":
        return []
    if isinstance(v, (list, tuple, set)):
        return [str(x) for x in v if x not in (None, "")]
    return [s.strip() for s in str(v).split(",") if s.strip()]


@dataclass
class Filters:
    """Search filters, all optional and combinable (AND). Each of agent, session,
    kind, role, tool, status takes one value or several (a list or ``a,b``: OR).
    ``project`` is a path prefix of ``project_dir`` (whole path components);
    ``since``/``until`` bound ``ts``, both inclusive (``parse_when``: a date
    ``until`` includes that whole UTC day).
    ``tool`` is matched case-insensitively."""

    agent: str | list | None = None
    project: str | None = None
    session: str | list | None = None
    kind: str | list | None = None
    role: str | list | None = None
    tool: str | list | None = None
    since: str | None = None
    until: str | None = None
    status: str | list | None = None

    def validate(self) -> Filters:
        """Check agent/kind/role/status values (agent, kind, role and status are
        lower-cased first) and that ``since`` is before ``until``. Raises UsageError
        naming the bad value."""
        for name in ("agent", "kind", "role", "status"):
            if _values(getattr(self, name)):
                setattr(self, name, [v.lower() for v in _values(getattr(self, name))])
        for name, allowed in (("agent", AGENTS), ("kind", KINDS), ("role", ROLES), ("status", STATUSES)):
            bad = [v for v in _values(getattr(self, name)) if v not in allowed]
            if bad:
                raise UsageError(
                    f"unknown {name} {', '.join(bad)}", where=name, hint="use one of " + ", ".join(allowed)
                )
        check_window(self.since, self.until)
        return self

    def resolve_sessions(self, conn) -> Filters:
        """Session values are ids or prefixes of ids (``c617``, as hits show them),
        each resolved by ``sinks.sqlite.lookup.resolve_session`` and widened to its
        sub-agent sessions ``<id>/…`` (``session_family``). Raises ``SessionNotFound``
        for a value no session starts, ``AmbiguousSession`` (listing the candidates)
        for a prefix that names several sessions."""
        from ctxkeep.sinks.sqlite.lookup import resolve_session, session_family

        vals = _values(self.session)
        if not vals:
            return self
        out: list[str] = []
        for v in vals:
            out += session_family(conn, resolve_session(conn, v, where="session"))
        self.session = sorted(set(out))
        return self

    def is_empty(self) -> bool:
        return not any(_values(getattr(self, f.name)) for f in fields(self))

    def facet_match(self) -> str | None:
        """The FTS5 expression (``facets`` column, ``transforms.facets``) of the
        filters that have facet tokens (agent, kind, role, tool, session, project),
        ANDed; None when none is set. A superset test: the exact check follows."""
        parts = []
        for name, (prefix, _) in fx.FIELDS.items():
            vals = _values(getattr(self, name))
            if name == "project" and vals and self.project is not None:
                vals = [self.project.rstrip("/") or "/"]
            if vals:
                parts.append(fx.filter_expr(prefix, vals))
        return " AND ".join(parts) or None

    def residual(self) -> Filters:
        """The filters facet tokens cannot answer: status (it changes after loading)
        and the time window."""
        return Filters(status=self.status, since=self.since, until=self.until)

    def sql(self, alias: str = "e") -> tuple[str, list]:
        """A WHERE fragment over ``entry_rows AS alias`` and its parameters."""
        conds: list[str] = []
        params: list = []
        for col, val in (
            ("agent", self.agent),
            ("session_id", self.session),
            ("kind", self.kind),
            ("role", self.role),
            ("status", self.status),
        ):
            vals = _values(val)
            if vals:
                conds.append(f"{alias}.{col} IN ({','.join('?' * len(vals))})")
                params += vals
        tools = _values(self.tool)
        if tools:
            conds.append(f"lower({alias}.tool_name) IN ({','.join('?' * len(tools))})")
            params += [t.lower() for t in tools]
        if self.project:
            under, under_params = under_sql("project_dir", self.project)  # v10: by project id
            conds.append(f"{alias}.project_id IN (SELECT project_id FROM projects WHERE {under})")
            params += under_params
        if self.since:
            conds.append(f"{alias}.ts >= ?")
            params.append(parse_when(self.since))
        if self.until:
            conds.append(f"{alias}.ts < ?")
            params.append(parse_when(self.until, upper=True))
        return (" AND ".join(conds) or "1"), params


#: a query's terms beyond this are ignored (a pasted log must not make search
#: quadratic: 1,000 terms took 22 s); the result's ``note`` says so
MAX_TERMS = 32
#: the words (unicode61 tokens: runs of letters and digits) of the query's terms beyond
#: this are ignored too: one term can be a long phrase (``a.b.c...``, a quoted log
#: line), and FTS5 walks every match's positions once per phrase word (a 5,000-word
#: term took 8.6 s on the 8.8 MB corpus store, 20,000 words 54 s)
MAX_WORDS = 64
#: a term is cut to this many characters (a 100,000-letter term took 1.4 s, most of it
#: compiling its highlight pattern)
MAX_TERM_CHARS = 1000
_WORD_TOKEN_RE = re.compile(r"[^\W_]+")


def _all_terms(query: str) -> list[str]:
    out = []
    for a, b in _TERM_RE.findall(query):
        t = (a if a else b.replace('"', "")).strip()
        if t:
            out.append(t)
    return out


def _capped(found: list[str]) -> list[str]:
    """The first terms of ``found`` within ``MAX_TERMS`` terms, ``MAX_WORDS`` words and
    ``MAX_TERM_CHARS`` characters a term; the term that crosses the word limit is cut
    after its last word within it (a phrase's prefix)."""
    out: list[str] = []
    words = 0
    for t in found[:MAX_TERMS]:
        t = t[:MAX_TERM_CHARS]
        spans = [m.end() for m in _WORD_TOKEN_RE.finditer(t)]
        if words + len(spans) > MAX_WORDS:
            keep = MAX_WORDS - words
            if keep > 0:
                out.append(t[: spans[keep - 1]])
            break
        words += len(spans)
        out.append(t)
    return out


def terms(query: str) -> list[str]:
    """Split a user query into terms: ``"quoted phrases"`` stay whole, stray quotes
    are dropped (``"unbalanced`` → ``unbalanced``); empty terms are skipped; at most
    ``MAX_TERMS`` terms, ``MAX_WORDS`` words and ``MAX_TERM_CHARS`` characters a term
    are kept (``_capped``)."""
    return _capped(_all_terms(query))


def cap_terms(query: str) -> tuple[str, str]:
    """``query`` cut to what ``terms`` keeps (phrases re-quoted) and a one-line note
    saying so; ``(query, "")`` unchanged when nothing is cut."""
    found = _all_terms(query)
    kept = _capped(found)
    if kept == found:
        return query, ""
    if len(found) > MAX_TERMS and sum(len(_WORD_TOKEN_RE.findall(t)) for t in kept) < MAX_WORDS:
        note = f"only the first {MAX_TERMS} of {len(found)} query terms were searched"
    else:
        words = sum(len(_WORD_TOKEN_RE.findall(t)) for t in found)
        note = (
            f"only the first {MAX_WORDS} of {words} query words were searched"
            if words > MAX_WORDS
            else f"query terms were cut to {MAX_TERM_CHARS} characters"
        )
    return " ".join(f'"{t}"' if " " in t else t for t in kept), note


def _quote(t: str) -> str:
    return '"' + t.replace('"', '""') + '"'


def _word_term(t: str) -> bool:
    """Whether term ``t`` goes to the word index: it has a word character and is not a
    ``c++``/``C#``-style symbol term (unicode61 would make it ``c``; ``fts_symbols``
    holds it as written). ``.NET``-style terms go to both (``net`` is a fair word)."""
    return bool(_WORD_RE.search(t)) and not (is_symbol_term(t) and not t.strip().startswith("."))


def words_parts(query: str) -> list[str]:
    """The FTS5 expressions ``words_match`` ANDs: every word term quoted; a trailing
    ``*`` on a term is a prefix query."""
    parts = []
    for t in terms(query):
        prefix = t.endswith("*") and len(t) > 1
        t = t.rstrip("*") if prefix else t
        if not _word_term(t):
            continue
        parts.append(_quote(t) + ("*" if prefix else ""))
    return parts


def words_match(query: str) -> str | None:
    """FTS5 expression for the word index: every term quoted, ANDed (``words_parts``);
    a trailing ``*`` on a term is a prefix query. None when no term has a word
    character."""
    return " AND ".join(words_parts(query)) or None


def phrase_match(query: str) -> str | None:
    """FTS5 phrase of a query of 2+ plain words: the terms in order as one quoted
    phrase (``organization must be verified`` → ``"organization must be verified"``),
    matching texts that hold the words side by side, in that order (the word index's
    tokens: case, punctuation between them and word endings, ``porter``, aside). None
    when the query has fewer than two terms or FTS5 syntax the user wrote: a quote
    (the user's own phrase), a trailing ``*`` (a prefix), a symbol or CJK term (their
    own indexes rank them)."""
    ts = terms(query)
    if len(ts) < 2 or '"' in query:
        return None
    if any(t.endswith("*") or not _word_term(t) or is_symbol_term(t) or has_cjk(t) for t in ts):
        return None
    return _quote(" ".join(ts))


def any_parts(query: str) -> list[str]:
    """The phrases ``any_match`` ORs: every word term quoted, a trailing ``*`` dropped."""
    return [_quote(t.rstrip("*")) for t in terms(query) if _word_term(t)]


def any_match(query: str, without: set[str] | frozenset = frozenset()) -> str | None:
    """FTS5 expression matching any term (OR), every term quoted: BM25 then ranks
    texts holding more of the terms first. ``without``: phrases (``any_parts``) left
    out. None when no term is left."""
    return " OR ".join(p for p in any_parts(query) if p not in without) or None


def _prefix_star(t: str, common: set[str] | frozenset) -> bool:
    """Whether term ``t`` (trailing ``*`` stripped) is searched as a prefix in the
    relaxed list (see ``prefix_match``)."""
    last = _LAST_TOKEN_RE.search(t)
    return (
        len(t) >= 3
        and last is not None
        and t not in common
        and len(last.group()) >= (3 if last.start() > 0 and _WORD_RE.search(t[: last.start()]) else 2)
    )


def prefix_match(query: str, common: set[str] | frozenset = frozenset()) -> str | None:
    """FTS5 expression for the relaxed list: any term (OR); terms of ≥ 3 characters
    as prefix queries, except the ``common`` ones (terms with many whole-word
    matches, ``retrieve.common_terms``: ``code*`` would add ``codex``, ``codes`` … to lists
    the word itself already fills, at 30–50 ms a search on a 450 MB store). None when
    no term has a word character.

    FTS5 applies a phrase's ``*`` to its last token only, so a term the tokenizer
    splits is a prefix query only when that last token has ≥ 3 characters: ``"it's"*``
    would expand ``s*`` to every token starting with s (87,000 chunks, 0.3–0.6 s per
    list), and ``"PLACEHOLDER_RE"*`` ``re*`` (130 ms); ``PLACEHOLDER_REG`` → ``reg*``
    stays a prefix (``PLACEHOLDER_REGEX``)."""
    parts = [
        _quote(t) + ("*" if _prefix_star(t, common) else "")
        for t in (t.rstrip("*") for t in terms(query))
        if _word_term(t)
    ]
    return " OR ".join(parts) or None


def _ascii_words(ts: list[str]) -> list[str]:
    """The quoted lower-cased ASCII words of the terms ``ts`` that hold neither CJK nor
    a symbol term."""
    return [
        '"' + w.lower() + '"'
        for t in ts
        if not has_cjk(t) and not is_symbol_term(t)
        for w in ASCII_WORD_RE.findall(t)
    ]


def grams_match(query: str) -> str | None:
    """FTS5 expression for the substring index ``fts_grams`` (terms with CJK or
    camelCase parts; ANDed), or None when no term has any. In a query that has CJK, the
    other (ASCII) words are ANDed in as plain terms: such a chunk also indexes its
    ASCII words there (``transforms.grams``), so ``gemini 处理`` matches within one
    index."""
    ts = [t.rstrip("*") for t in terms(query)]
    parts = [g for g in (query_grams(t) for t in ts) if g]
    if parts and any(has_cjk(t) for t in ts):
        parts += _ascii_words(ts)
    return " AND ".join(f"({p})" for p in parts) or None


def symbols_match(query: str) -> str | None:
    """FTS5 expression for ``fts_symbols``: the symbol terms of ``query`` (``c++``,
    ``C#``, ``.NET``, as written) and the ASCII words of its other terms, ANDed (a
    chunk there indexes its ASCII words too, so ``c++ compiler`` matches within one
    index); None when the query has no symbol term. CJK terms are left to
    ``grams_match``."""
    ts = [t.rstrip("*") for t in terms(query)]
    syms = [q for q in (query_symbol(t) for t in ts) if q]
    if not syms:
        return None
    return " AND ".join([*syms, *_ascii_words(ts)])


def vocab_terms_of(query: str) -> list[tuple[str, str | None]]:
    """Each term of ``query`` (trailing ``*`` stripped, word terms only) with its
    ``fts_vocab`` expression (``transforms.grams.query_vocab``; None when the term has
    no inner-substring form)."""
    return [(t, query_vocab(t)) for t in (t.rstrip("*") for t in terms(query)) if _word_term(t)]


def subs_match(expansions: list[tuple[str, list[str]]]) -> str | None:
    """FTS5 expression for the word index from the vocabulary expansion of each term
    (``(term, vocabulary tokens holding it)``): per term, its tokens ORed (the term
    itself quoted when it has none), the terms ANDed. None when no term expanded."""
    if not any(toks for _, toks in expansions):
        return None
    parts = []
    for t, toks in expansions:
        alts = [_quote(x) for x in toks] or [_quote(t)]
        parts.append("(" + " OR ".join(alts) + ")")
    return " AND ".join(parts)

"""Ranked, budgeted search over the SQLite store (tier 1 of retrieval).

How a query is answered:

1. The query is split into terms (``"quoted phrases"`` stay whole). User input never
   reaches FTS5 as syntax: every term is quoted, so ``c++``, ``"unbalanced``,
   ``foo AND``, ``a-b``, ``it's``, ``NOT`` and ``(x`` are searched as words and never
   raise. ``raw=True`` passes FTS5 syntax through and turns a parse error into a
   one-line ``SearchSyntaxError``.
2. Candidate lists, each ranked best first:
   - ``words``: all terms (AND) on the word index ``fts_words``, BM25 with the
     ``title`` column weighted ``sqlite_store.TITLE_WEIGHT`` × the body;
   - ``any``: for several terms, when ``words`` is short of candidates, any of them
     (OR), so a text missing one word of the query still ranks (BM25 favours texts
     holding more of the terms);
   - ``prefix``: when ``words`` finds fewer than ``limit`` entries, any term (OR),
     terms of ≥ 3 characters as prefixes (``validateUs`` → ``validateus*``);
   - ``grams``: the substring index ``fts_grams`` (CJK bigrams, camelCase parts;
     ``transforms.grams``) for terms that have them (``字段``, ``東京``, ``UserInput``);
   - ``exact``: candidates whose text holds the query verbatim (case-insensitive):
     hyphenated ids (``bd-q3fy``), paths, error messages;
   - ``tool``: candidates whose tool name is one of the terms (tool names weigh
     above body text).
3. The lists are fused by reciprocal rank fusion (``RRF_K``, ``LIST_WEIGHT``), times
   a prior per kind (``KIND_WEIGHT``); ties, within a list and after fusion, go to the
   more recent entry.

Cost bounds for large stores: BM25 costs per matching row, so each list is ranked
among its ``RANK_WINDOW`` newest matches (a term matching more rows is not specific,
and recent context matters more). Filters on agent, kind, role, tool, session and
project are part of the MATCH (facet tokens, ``transforms.facets``; schema v3): FTS5
intersects them with the terms in C, and the window holds only matches that pass.
Status and the time window, which facet tokens cannot answer, are checked per chunk:
on the best ``FILTER_DEPTH`` matches of the window, and when too few pass, on the
``FILTER_SCAN`` newest matches (the ``FILTER_RANK`` newest that pass are ranked). A
very common term's older matches can therefore be missed; add words or filters to
reach them. That check (~10 µs a chunk on a 450 MB store) runs in growing batches that
stop once enough pass, and its answers are shared by the lists of one search. A term
with many whole-word matches gets no prefix query (``_common_terms``). Each candidate
loads at most ``ENTRIES_PER_HIT`` of the entries holding its text.

4. One hit per distinct content (the most recent entry holding it that passes the
   filters; ``duplicates`` counts the others), then hits are taken in rank order
   until the token budget is spent.

Timestamps are ISO-8601 UTC text as stored in ``entries.ts``.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from dataclasses import asdict, dataclass, field

from ctxkeep.paths import under_sql
from ctxkeep.timeutil import format_utc, parse_utc
from ctxkeep.errors import SearchSyntaxError, UsageError
from ctxkeep.schema import AGENTS, KINDS, ROLES, STATUSES, EntryRef
from ctxkeep.transforms import facets as fx
from ctxkeep.transforms.grams import _ASCII_WORD as ASCII_WORD_RE, _CJK_RUN as CJK_RE, query_grams
from ctxkeep.transforms.tokens import heuristic_tokens
from ctxkeep.sinks import sqlite as sqlite_store

RRF_K = 60
SNIPPET_MAX_CHARS = 300
TITLE_MAX_CHARS = 120
MAX_LIMIT = 200
FOLD_TITLE_CHARS = 80
FILTER_DEPTH = 1000  # matches ranked before filters apply, in the fast path
RANK_WINDOW = 2000  # BM25 ranks at most this many of the newest matches of a list
FILTER_SCAN = 5000  # matches checked against selective filters, newest first
FILTER_RANK = 200  # of those that pass, the newest ranked by BM25
MAX_SESSIONS = 1000  # sessions one --session prefix may name
_TERM_RE = re.compile(r'"([^"]*)"|(\S+)')
_WORD_RE = re.compile(r"\w", re.UNICODE)
#: the last token as unicode61 cuts it (letters and digits; ``_`` and punctuation split)
_LAST_TOKEN_RE = re.compile(r"[^\W_]+(?=[\W_]*$)", re.UNICODE)
_REL_RE = re.compile(r"^(\d+)\s*([mhdw])$")
_REL_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Prior per kind, multiplied into the fused score: people mostly look for what was
# said (messages, summaries); tool input/output and reasoning come next; meta records
# (token counts, turn context, attachments) last.
# Weight of each candidate list in the fusion: a tool-name match counts double
# (tool names weigh above body text); the others count once.
#: "grams_all": the substring index matched every term of a query that mixes CJK with
#: other words (``grams_match``) — as strong as the word index's all-terms list, which
#: cannot match such a text (unicode61 glues ``gemini`` into ``涉及gemini的处理``)
LIST_WEIGHT = {"tool": 2.0, "grams_all": 2.0}
KIND_WEIGHT = {"message": 1.0, "summary": 1.0, "tool_call": 0.85, "tool_result": 0.85,
               "thinking": 0.85, "meta": 0.5}


def parse_when(value: str | None, *, now: dt.datetime | None = None) -> str | None:
    """A time bound as stored-``ts`` text (ISO-8601 UTC, ``…Z``).

    Accepts an ISO date (``2025-06-01``), an ISO datetime with or without offset
    (naive is UTC), or a relative age ``30m``, ``12h``, ``7d``, ``2w`` (before ``now``).
    Returns None for None/''. Raises UsageError for anything else.
    """
    if not value:
        return None
    v = value.strip()
    now = now or dt.datetime.now(dt.timezone.utc)
    m = _REL_RE.match(v)
    if m:
        t = now - dt.timedelta(seconds=int(m.group(1)) * _REL_UNITS[m.group(2)])
    else:
        try:
            t = parse_utc(v)
        except ValueError:
            raise UsageError(f"cannot read the time {value!r}", where="since/until",
                             hint="use an ISO date (2025-06-01), datetime, or an age like 7d, 12h") from None
    return format_utc(t)


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
    ``since``/``until`` bound ``ts`` (``parse_when`` formats; ``until`` exclusive).
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

    def validate(self) -> "Filters":
        """Check agent/kind/role/status values (agent, kind, role and status are
        lower-cased first) and that ``since`` is before ``until``. Raises UsageError
        naming the bad value."""
        for name in ("agent", "kind", "role", "status"):
            if _values(getattr(self, name)):
                setattr(self, name, [v.lower() for v in _values(getattr(self, name))])
        for name, allowed in (("agent", AGENTS), ("kind", KINDS), ("role", ROLES), ("status", STATUSES)):
            bad = [v for v in _values(getattr(self, name)) if v not in allowed]
            if bad:
                raise UsageError(f"unknown {name} {', '.join(bad)}", where=name,
                                 hint="use one of " + ", ".join(allowed))
        since, until = parse_when(self.since), parse_when(self.until)
        if since and until and since >= until:
            raise UsageError(f"--since {self.since} is not before --until {self.until}", where="since/until",
                             hint="swap them, or drop one")
        return self

    def resolve_sessions(self, conn) -> "Filters":
        """Session values are ids or prefixes of ids (``c61729d4``, as hits show them):
        each becomes the stored session ids it starts (sub-agent sessions
        ``<id>/…`` included, as purge does). A value no session starts is kept (no
        hits). Raises UsageError when one prefix starts more than ``MAX_SESSIONS``."""
        vals = _values(self.session)
        if not vals:
            return self
        out: list[str] = []
        for v in vals:
            found, cur = [], v
            while True:  # index skip-scan: one seek per distinct session
                r = conn.execute("SELECT session_id FROM entries INDEXED BY entries_session WHERE "
                                 "session_id >= ? AND session_id < ? ORDER BY session_id LIMIT 1",
                                 (cur, v + "\U0010ffff")).fetchone()
                if r is None:
                    break
                found.append(r[0])
                if len(found) > MAX_SESSIONS:
                    raise UsageError(f"session prefix {v!r} starts more than {MAX_SESSIONS} sessions",
                                     where="session", hint="give more of the session id")
                cur = r[0] + "\x00"
            out += found or [v]
        self.session = sorted(set(out))
        return self

    def is_empty(self) -> bool:
        return not any(_values(v) for v in asdict(self).values())

    def facet_match(self) -> str | None:
        """The FTS5 expression (``facets`` column, ``transforms.facets``) of the
        filters that have facet tokens (agent, kind, role, tool, session, project),
        ANDed; None when none is set. A superset test: the exact check follows."""
        parts = []
        for name, (prefix, _) in fx.FIELDS.items():
            vals = _values(getattr(self, name))
            if name == "project" and vals:
                vals = [self.project.rstrip("/") or "/"]
            if vals:
                parts.append(fx.filter_expr(prefix, vals))
        return " AND ".join(parts) or None

    def residual(self) -> "Filters":
        """The filters facet tokens cannot answer: status (it changes after loading)
        and the time window."""
        return Filters(status=self.status, since=self.since, until=self.until)

    def sql(self, alias: str = "e") -> tuple[str, list]:
        """A WHERE fragment over ``entries AS alias`` and its parameters."""
        conds, params = [], []
        for col, val in (("agent", self.agent), ("session_id", self.session),
                         ("kind", self.kind), ("role", self.role), ("status", self.status)):
            vals = _values(val)
            if vals:
                conds.append(f"{alias}.{col} IN ({','.join('?' * len(vals))})")
                params += vals
        tools = _values(self.tool)
        if tools:
            conds.append(f"lower({alias}.tool_name) IN ({','.join('?' * len(tools))})")
            params += [t.lower() for t in tools]
        if self.project:
            under, under_params = under_sql(f"{alias}.project_dir", self.project)
            conds.append(under)
            params += under_params
        if self.since:
            conds.append(f"{alias}.ts >= ?")
            params.append(parse_when(self.since))
        if self.until:
            conds.append(f"{alias}.ts < ?")
            params.append(parse_when(self.until))
        return (" AND ".join(conds) or "1"), params


@dataclass
class Hit(EntryRef):
    """One search hit (tier 1): enough to decide whether to fetch the entry.

    ``title`` is the entry's first line (≤ 120 chars), ``snippet`` ≤ 300 characters
    around the match, ``token_estimate`` the tokens of the full text (what a fetch
    costs), ``score`` the fused RRF score, ``matched`` the lists that found it,
    ``duplicates`` other entries with the same text (filters aside) plus near-duplicate
    hits folded into this one (``_collapse``), ``chunk`` the matching chunk's
    0-based position within the text.
    """

    title: str
    token_estimate: int
    bytes: int
    snippet: str
    score: float
    matched: list[str] = field(default_factory=list)
    duplicates: int = 0
    chunk: int = 0


@dataclass
class SearchResult:
    """Hits in rank order plus what the budget left out.

    ``budget_tokens`` None means no budget; ``used_tokens`` is the estimated size of
    the returned tier-1 entries; ``omitted`` hits were ranked but cut by the budget;
    ``note`` says so in one line ('' when nothing was cut).
    """

    query: str
    hits: list[Hit]
    budget_tokens: int | None = None
    used_tokens: int = 0
    omitted: int = 0
    note: str = ""

    # a result reads as its list of hits (``for h in search(...)``, ``[0]``, ``len``),
    # as ``search`` returned before budgets existed
    def __iter__(self):
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i):
        return self.hits[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, list):
            return self.hits == other
        if isinstance(other, SearchResult):
            return self.as_dict() == other.as_dict()
        return NotImplemented

    __hash__ = None  # mutable, like a list

    def as_dict(self) -> dict:
        return {"query": self.query, "hits": [h.as_dict() for h in self.hits],
                "budget_tokens": self.budget_tokens, "used_tokens": self.used_tokens,
                "omitted": self.omitted, "note": self.note}


# ---------------------------------------------------------------- query parsing

#: a query's terms beyond this are ignored (a pasted log must not make search
#: quadratic: 1,000 terms took 22 s); the result's ``note`` says so
MAX_TERMS = 32


def terms(query: str) -> list[str]:
    """Split a user query into terms: ``"quoted phrases"`` stay whole, stray quotes
    are dropped (``"unbalanced`` → ``unbalanced``); empty terms are skipped; at most
    ``MAX_TERMS`` terms are kept."""
    out = []
    for a, b in _TERM_RE.findall(query):
        t = (a if a else b.replace('"', "")).strip()
        if t:
            out.append(t)
            if len(out) == MAX_TERMS:
                break
    return out


def _quote(t: str) -> str:
    return '"' + t.replace('"', '""') + '"'


def words_match(query: str) -> str | None:
    """FTS5 expression for the word index: every term quoted, ANDed; a trailing ``*``
    on a term is a prefix query. None when no term has a word character."""
    parts = []
    for t in terms(query):
        prefix = t.endswith("*") and len(t) > 1
        t = t.rstrip("*") if prefix else t
        if not _WORD_RE.search(t):
            continue
        parts.append(_quote(t) + ("*" if prefix else ""))
    return " AND ".join(parts) or None


def any_match(query: str) -> str | None:
    """FTS5 expression matching any term (OR), every term quoted: BM25 then ranks
    texts holding more of the terms first. None when no term has a word character."""
    parts = [_quote(t.rstrip("*")) for t in terms(query) if _WORD_RE.search(t)]
    return " OR ".join(parts) or None


def _prefix_star(t: str, common: set[str] | frozenset) -> bool:
    """Whether term ``t`` (trailing ``*`` stripped) is searched as a prefix in the
    relaxed list (see ``prefix_match``)."""
    last = _LAST_TOKEN_RE.search(t)
    return (len(t) >= 3 and last is not None and t not in common
            and len(last.group()) >= (3 if last.start() > 0 and _WORD_RE.search(t[:last.start()]) else 2))


def prefix_match(query: str, common: set[str] | frozenset = frozenset()) -> str | None:
    """FTS5 expression for the relaxed list: any term (OR); terms of ≥ 3 characters
    as prefix queries, except the ``common`` ones (terms with many whole-word
    matches, ``_common_terms``: ``code*`` would add ``codex``, ``codes`` … to lists
    the word itself already fills, at 30–50 ms a search on a 450 MB store). None when
    no term has a word character.

    FTS5 applies a phrase's ``*`` to its last token only, so a term the tokenizer
    splits is a prefix query only when that last token has ≥ 3 characters: ``"it's"*``
    would expand ``s*`` to every token starting with s (87,000 chunks, 0.3–0.6 s per
    list), and ``"PLACEHOLDER_RE"*`` ``re*`` (130 ms); ``PLACEHOLDER_REG`` → ``reg*``
    stays a prefix (``PLACEHOLDER_REGEX``)."""
    parts = [_quote(t) + ("*" if _prefix_star(t, common) else "")
             for t in (t.rstrip("*") for t in terms(query)) if _WORD_RE.search(t)]
    return " OR ".join(parts) or None


#: a term with at least this many whole-word matches gets no prefix query
PREFIX_COMMON = 50


def _common_terms(conn, query: str) -> set[str]:
    """The terms of ``query`` with ≥ ``PREFIX_COMMON`` whole-word matches in
    ``fts_words`` (reads at most that many rowids of each term)."""
    out = set()
    for t in terms(query):
        t = t.rstrip("*")
        if _WORD_RE.search(t):
            n = conn.execute("SELECT count(*) FROM (SELECT rowid FROM fts_words WHERE fts_words "
                             "MATCH ? LIMIT ?)", (_quote(t), PREFIX_COMMON)).fetchone()[0]
            if n >= PREFIX_COMMON:
                out.add(t)
    return out


def grams_match(query: str) -> str | None:
    """FTS5 expression for the substring index (terms with CJK or camelCase parts,
    ANDed), or None when no term has any. In a query that has CJK, the other (ASCII)
    words are ANDed in as plain terms: a chunk with CJK also indexes its ASCII words
    there (``transforms.grams``), so ``gemini 处理`` matches within one index."""
    ts = [t.rstrip("*") for t in terms(query)]
    parts = [g for g in (query_grams(t) for t in ts) if g]
    if any(CJK_RE.search(t) for t in ts):
        for t in ts:
            if not CJK_RE.search(t):
                parts += ['"' + w.lower() + '"' for w in ASCII_WORD_RE.findall(t)]
    return " AND ".join(f"({p})" for p in parts) or None


# ---------------------------------------------------------------- candidates

@dataclass
class _Cand:
    chunk_id: int
    seq: int
    title: str
    text: str
    content_id: int
    content_hash: str
    c_tokens: int
    c_bytes: int
    entries: list[tuple]  # (entry_id, agent, session_id, project_dir, ts, role, kind, tool_name)
    total: int = 0  # entries holding the text (filters aside)


def _window_floor(conn, fts: str, match: str) -> int:
    """The smallest chunk id of the ``RANK_WINDOW`` newest matches (0 when there are
    fewer): BM25 is computed only above it. Counting down the rowids is cheap; ranking
    costs per match, so a very common term is ranked among its newest matches only."""
    r = conn.execute(f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC "
                     f"LIMIT 1 OFFSET ?", (match, RANK_WINDOW)).fetchone()
    return r[0] if r else 0


def _fts_ids(conn, fts: str, match: str, filters: Filters, n: int,
             passed: dict[int, bool] | None = None, facets: bool = False) -> list[tuple[int, float]]:
    """Top ``n`` chunk ids of one FTS table for ``match`` (best first, rank ascending),
    among the ``RANK_WINDOW`` newest matches (passing the filters).

    With ``facets`` (a v3 store), the filters that have facet tokens join the MATCH
    (``Filters.facet_match``) and only the rest (``Filters.residual``) are checked per
    chunk here; the exact check of every filter follows in ``_load_cands``.
    ``passed`` (chunk id → whether one of its entries passes ``filters``) is a memo
    shared by the lists of one search: the lists match mostly the same chunks, and
    the filter check (~10 µs a chunk) is the main cost of a filtered search."""
    fmatch = filters.facet_match() if facets else None
    if fmatch:
        match = f"({match}) AND {fmatch}"
        if filters.residual().is_empty():
            filters = Filters()
    floor = _window_floor(conn, fts, match)
    ranked = (f"SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? AND rowid > ? "
              f"ORDER BY rank LIMIT ?")
    if filters.is_empty():
        return conn.execute(ranked, (match, floor, n)).fetchall()
    where, params = filters.sql("e")
    passes = (f"SELECT ch.chunk_id FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
              f"WHERE ch.chunk_id IN ({{ids}}) AND EXISTS (SELECT 1 FROM entries e INDEXED BY "
              f"entries_content WHERE e.content_hash = c.content_hash AND {where})")
    memo: dict[int, bool] = {} if passed is None else passed

    def ok_of(ids: list[int]) -> set[int]:
        need = [i for i in ids if i not in memo]
        for i in range(0, len(need), 1000):
            part = need[i:i + 1000]
            good = {r[0] for r in conn.execute(passes.format(ids=",".join("?" * len(part))),
                                                [*part, *params])}
            memo.update((j, j in good) for j in part)
        return {i for i in ids if memo[i]}
    # 1. the best FILTER_DEPTH matches of the window, then the filters: enough unless
    #    the filters are selective
    #    (checked best first in growing batches, until ``n`` pass: the same first ``n``
    #    as checking all, at a fraction of the cost when the filters are not selective)
    #    Every match of the window is fetched with its rank (BM25 costs per match of
    #    the window whatever the LIMIT), so step 2 need not rank these again.
    window = conn.execute(ranked, (match, floor, RANK_WINDOW + 1)).fetchall()
    rows = window[:FILTER_DEPTH]
    if rows:
        kept, i, step = [], 0, 64
        while i < len(rows) and len(kept) < n:
            part = rows[i:i + step]
            ok = ok_of([r[0] for r in part])
            kept += [r for r in part if r[0] in ok]
            i, step = i + step, step * 2
        if len(kept) >= n or (len(rows) < FILTER_DEPTH and floor == 0):
            return kept[:n]
    # 2. selective filters: walk the newest FILTER_SCAN matches, keep those that pass
    #    (older matches are not reached); growing batches stop soon after
    #    ``FILTER_RANK`` pass, so the newest ``FILTER_RANK`` are the same as checking all
    found: list[int] = []
    cur = conn.execute(f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT ?",
                       (match, FILTER_SCAN))
    step = 256
    while len(found) < FILTER_RANK:
        batch = [r[0] for r in cur.fetchmany(step)]
        if not batch:
            break
        ok = ok_of(batch)
        found += [i for i in batch if i in ok]
        step = min(step * 2, 1000)
    # rank the newest FILTER_RANK of them, over the rowid range they span (bounded by
    # FILTER_SCAN matches; one MATCH per row would reload the term lists each time)
    if not found:
        return []
    top = found[:FILTER_RANK]
    keep = set(top)
    # ranks of the window's matches are known from step 1 (the same BM25 values);
    # only the kept matches at or below the window floor are ranked here: ``+rowid IN``
    # is tested before the rank column is read, so BM25 runs for those rows only
    # (``+`` keeps the IN list out of FTS5, which would run the MATCH once per value)
    known = {r[0]: r[1] for r in window if r[0] in keep}
    rows = [(i, known[i]) for i in sorted(known)]
    below = sorted(i for i in top if i not in known)
    if below:
        rows = conn.execute(
            f"SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? AND rowid BETWEEN ? AND ? "
            f"AND +rowid IN ({','.join('?' * len(below))}) ORDER BY rowid",
            (match, below[0], below[-1], *below)).fetchall() + rows
    rows.sort(key=lambda r: r[1])
    return rows[:n]


#: entries of one text loaded per candidate (the newest that pass the filters): a
#: stock text held by thousands of entries must not load them all
ENTRIES_PER_HIT = 8


def _load_cands(conn, ids: list[int], filters: Filters, cache: dict[int, _Cand]) -> None:
    """Load candidates ``ids`` (chunk ids) into ``cache``: the chunk, its content and
    the newest ``ENTRIES_PER_HIT`` entries holding the text that pass ``filters``
    (``None`` when none passes). ``total`` is the number of entries holding the text,
    filters aside (an index-only count)."""
    need = [i for i in ids if i not in cache]
    if not need:
        return
    where, params = filters.sql("e")
    chunks = conn.execute(
        f"SELECT ch.chunk_id, ch.seq, ch.title, ch.text, c.content_id, c.content_hash, "
        f"coalesce(c.token_estimate, 0), c.bytes FROM chunks ch JOIN contents c "
        f"ON c.content_id = ch.content_id WHERE ch.chunk_id IN ({','.join('?' * len(need))})",
        need).fetchall()
    ents = (f"SELECT e.entry_id, e.agent, e.session_id, e.project_dir, e.ts, e.role, e.kind, "
            f"e.tool_name FROM entries e INDEXED BY entries_content WHERE e.content_hash = ? "
            f"AND {where} ORDER BY e.ts DESC, e.rowid DESC LIMIT {ENTRIES_PER_HIT}")
    by_hash: dict[str, tuple[list, int]] = {}
    for r in chunks:
        h = r[5]
        if h not in by_hash:
            es = conn.execute(ents, (h, *params)).fetchall()
            total = len(es) if len(es) < ENTRIES_PER_HIT and not params else conn.execute(
                "SELECT count(*) FROM entries INDEXED BY entries_content WHERE content_hash = ?",
                (h,)).fetchone()[0]
            by_hash[h] = (es, total)
        es, total = by_hash[h]
        if es:
            cache[r[0]] = _Cand(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], es, total)
    for i in need:  # chunks whose entries all fail the filters
        cache.setdefault(i, None)  # type: ignore[arg-type]


def _ranked_contents(rows: list[tuple[int, float]], cache: dict[int, _Cand]) -> list[_Cand]:
    """One candidate per content, in list order (its best chunk), ties broken by
    recency. ``rows`` are (chunk_id, rank) with rank ascending = better."""
    best: dict[int, tuple[float, str, _Cand]] = {}
    for cid, rank in rows:
        c = cache.get(cid)
        if c is None:
            continue
        if c.content_id not in best or rank < best[c.content_id][0]:
            best[c.content_id] = (rank, c.entries[0][4] or "", c)
    order = sorted(best.values(), key=lambda v: v[1], reverse=True)  # newer first …
    order.sort(key=lambda v: round(v[0], 9))                          # … within equal rank
    return [v[2] for v in order]


def _snippet(text: str, needles: list[str], width: int = SNIPPET_MAX_CHARS) -> str:
    """≤ ``width`` characters of ``text`` around the first needle found
    (case-insensitive; whitespace collapsed; ``…`` marks cut ends)."""
    low = text.lower()
    pos = -1
    for n in needles:
        n = n.lower().strip("*")
        if not n:
            continue
        p = low.find(n)
        if p < 0 and len(n) > 5:  # stemmed match (porter): try the stem
            p = low.find(n[:max(4, len(n) - 3)])
        if p >= 0 and (pos < 0 or p < pos):
            pos = p
    if pos < 0:
        pos = 0
    start = max(0, pos - width // 3)
    piece = " ".join(text[start:start + width * 2].split())
    lead = "…" if start > 0 else ""
    body_max = width - len(lead) - 1
    tail = "…" if len(piece) > body_max or start + width * 2 < len(text) else ""
    return lead + piece[:body_max] + tail


def search(conn: sqlite3.Connection, query: str, *, filters: Filters | None = None,
           limit: int = 10, budget_tokens: int | None = None, raw: bool = False) -> SearchResult:
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
    Returns a ``SearchResult``. Raises ``SearchSyntaxError`` (raw mode only) when FTS5
    cannot parse the expression, ``UsageError`` for bad filter values.
    """
    filters = (filters or Filters()).validate().resolve_sessions(conn)
    limit = max(1, min(int(limit), MAX_LIMIT))
    cut_note = ""
    if not raw:
        all_terms = sum(1 for a, b in _TERM_RE.findall(query) if (a or b.replace('"', "")).strip())
        if all_terms > MAX_TERMS:
            query = " ".join(f'"{t}"' if " " in t else t for t in terms(query))
            cut_note = f"only the first {MAX_TERMS} of {all_terms} query terms were searched"
    n = max(50, limit * 5)
    cache: dict[int, _Cand] = {}
    lists: dict[str, list[int]] = {}  # list name → content_ids, best first
    shown: dict[int, _Cand] = {}      # content_id → the chunk it is shown with
    ts = terms(query)
    passed: dict[int, bool] = {}  # chunk id → passes the filters (memo across lists)
    facets = not filters.is_empty() and sqlite_store.schema_version(conn) >= 3

    def run(name: str, fts: str, match: str | None) -> None:
        if not match:
            return
        rows = _fts_ids(conn, fts, match, filters, n, passed, facets)
        _load_cands(conn, [r[0] for r in rows], filters, cache)
        ranked = _ranked_contents(rows, cache)
        lists[name] = [c.content_id for c in ranked]
        for c in ranked:  # a content is shown with its best chunk of the first list
            shown.setdefault(c.content_id, c)

    if raw:
        try:
            run("words", "fts_words", query)
        except sqlite3.OperationalError as e:
            raise SearchSyntaxError(f"FTS5 syntax error: {e}", where=query,
                                    hint="fix the expression, or drop raw mode to search the words as typed") from None
    else:
        run("words", "fts_words", words_match(query))
        mixed = any(CJK_RE.search(t) for t in ts) and any(not CJK_RE.search(t) for t in ts)
        run("grams_all" if mixed else "grams", "fts_grams", grams_match(query))
        if len([t for t in ts if _WORD_RE.search(t)]) > 1 and len(lists.get("words", [])) < n:
            run("any", "fts_words", any_match(query))
        if len(lists.get("words", [])) < limit:
            common = _common_terms(conn, query)
            # without a prefix term the relaxed list is the ``any`` (or ``words``) list again
            if any(_prefix_star(t.rstrip("*"), common) for t in ts if _WORD_RE.search(t)):
                run("prefix", "fts_words", prefix_match(query, common))
        # derived lists over the candidates: the query verbatim, tool names
        base = _fuse(lists, shown)
        needle = " ".join(" ".join(ts).lower().split())
        if needle:
            exact = [cid for cid in base
                     if needle in " ".join(f"{shown[cid].title}\n{shown[cid].text}".lower().split())]
            if exact:
                lists["exact"] = exact
        low_terms = {t.lower() for t in ts}
        tool = [cid for cid in base if any((e[7] or "").lower() in low_terms for e in shown[cid].entries)]
        if tool:
            lists["tool"] = tool
    fused = _fuse(lists, shown)

    hits: list[Hit] = []
    sc = _scores(lists, shown)
    fused, similar = _collapse(conn, fused, shown, limit)
    for cid in fused:
        c = shown[cid]
        e = c.entries[0]
        hits.append(Hit(entry_id=e[0], agent=e[1], session_id=e[2], project_dir=e[3], ts=e[4],
                        role=e[5], kind=e[6], tool_name=e[7], title="", token_estimate=c.c_tokens,
                        bytes=c.c_bytes, snippet=_snippet(c.text, [" ".join(ts)] + ts),
                        score=round(sc[cid], 6),
                        matched=[k for k, v in lists.items() if cid in v],
                        duplicates=max(c.total, len(c.entries)) - 1 + similar.get(cid, 0),
                        chunk=c.seq))
    _fill_titles(conn, hits, {h.entry_id: shown[cid].content_id for h, cid in zip(hits, fused)})
    res = apply_budget(SearchResult(query=query, hits=hits), budget_tokens)
    notes = [n for n in (cut_note, res.note) if n]
    if (not raw and hits and len([t for t in ts if _WORD_RE.search(t)]) > 1
            and not any(m in h.matched for h in hits for m in ("words", "grams_all", "exact"))):
        notes.append("no entry holds all the terms: these match some of them")
    res.note = "; ".join(notes)
    return res


def _scores(lists: dict[str, list[int]], shown: dict[int, _Cand]) -> dict[int, float]:
    """RRF score of every candidate: Σ over lists of weight / (RRF_K + rank), rank
    1-based (``LIST_WEIGHT``), times the prior of its kind (``KIND_WEIGHT``)."""
    out: dict[int, float] = {}
    for name, order in lists.items():
        w = LIST_WEIGHT.get(name, 1.0)
        for r, cid in enumerate(order):
            out[cid] = out.get(cid, 0.0) + w / (RRF_K + r + 1)
    for cid in out:  # a text held by several entries counts as its best kind
        out[cid] *= max(KIND_WEIGHT.get(e[6], 1.0) for e in shown[cid].entries)
    return out


def _fuse(lists: dict[str, list[int]], shown: dict[int, _Cand]) -> list[int]:
    """Reciprocal rank fusion of the lists; ties go to the newer entry."""
    sc = _scores(lists, shown)
    scored = [(round(v, 12), shown[cid].entries[0][4] or "", cid) for cid, v in sc.items()]
    scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return [cid for _, _, cid in scored]


#: word-set overlap (Jaccard) above which two hits of one key are the same thing
FOLD_SIMILARITY = 0.6
_FOLD_WORD_RE = re.compile(r"\w+")


def _collapse(conn, fused: list[int], shown: dict[int, _Cand], limit: int
              ) -> tuple[list[int], dict[int, int]]:
    """The first ``limit`` of ``fused`` after dropping near-duplicates: a hit with the
    same session, kind, tool and title start (``FOLD_TITLE_CHARS``) as a better one,
    and a matching chunk sharing ≥ ``FOLD_SIMILARITY`` of its words (successive versions
    of one todo list, re-reads of one file; not a session's different patches, which
    all start ``apply_patch <<'PATCH'``), is folded into it. Returns the kept
    content_ids and, per kept one, how many were folded in."""
    titles = _titles(conn, fused[:limit * 4])
    kept, seen, similar = [], {}, {}
    words: dict[int, set[str]] = {}

    def ws(cid: int) -> set[str]:
        if cid not in words:
            words[cid] = set(_FOLD_WORD_RE.findall(shown[cid].text.lower()))
        return words[cid]

    for cid in fused:
        if len(kept) >= limit:
            break
        e = shown[cid].entries[0]
        t = " ".join((titles.get(cid) or "").split())[:FOLD_TITLE_CHARS]
        key = (e[2], e[6], e[7], t) if t else None
        into = None
        for k in seen.get(key, ()) if key is not None else ():
            a, b = ws(k), ws(cid)
            if a and b and len(a & b) >= FOLD_SIMILARITY * len(a | b):
                into = k
                break
        if into is not None:
            similar[into] = similar.get(into, 0) + 1
            continue
        if key is not None:
            seen.setdefault(key, []).append(cid)
        kept.append(cid)
    return kept, similar


def _titles(conn, content_ids: list[int]) -> dict[int, str]:
    if not content_ids:
        return {}
    return dict(conn.execute(
        f"SELECT content_id, title FROM chunks WHERE seq = 0 AND content_id IN "
        f"({','.join('?' * len(content_ids))})", content_ids).fetchall())


def _fill_titles(conn, hits: list[Hit], content_of: dict[str, int]) -> None:
    if not hits:
        return
    ids = list(set(content_of.values()))
    rows = dict(conn.execute(
        f"SELECT content_id, title FROM chunks WHERE seq = 0 AND content_id IN ({','.join('?' * len(ids))})",
        ids).fetchall())
    for h in hits:
        t = rows.get(content_of[h.entry_id]) or ""
        h.title = t[:TITLE_MAX_CHARS - 1] + "…" if len(t) > TITLE_MAX_CHARS else t


# ---------------------------------------------------------------- budget

def hit_tokens(h: Hit) -> int:
    """Estimated tokens of a hit's tier-1 rendering (its JSON form)."""
    return heuristic_tokens(json.dumps(h.as_dict(), ensure_ascii=False))


def apply_budget(result: SearchResult, budget_tokens: int | None) -> SearchResult:
    """Keep hits in rank order while their tier-1 renderings fit in ``budget_tokens``
    (None: no budget). The first hit that does not fit ends the list; ``omitted`` and
    ``note`` report what was cut and how to get it."""
    result.budget_tokens = budget_tokens
    used, kept = 0, []
    for h in result.hits:
        cost = hit_tokens(h)
        if budget_tokens is not None and used + cost > budget_tokens:
            break
        used += cost
        kept.append(h)
    result.omitted = len(result.hits) - len(kept)
    result.used_tokens = used
    if result.omitted and not kept:
        result.note = (f"a budget of {budget_tokens} tokens is less than the first hit needs "
                       f"(~{hit_tokens(result.hits[0])} tokens for its id, title and snippet); "
                       f"raise the budget")
    elif result.omitted:
        result.note = (f"budget of {budget_tokens} tokens spent: {result.omitted} more hit(s) "
                       f"not shown; raise the budget, narrow the query or add filters")
    result.hits = kept
    return result

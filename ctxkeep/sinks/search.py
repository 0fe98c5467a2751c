"""Search over the SQLite store: BM25 on the word index, with the substring index
(CJK bigrams, identifier parts) for what the word index cannot find.

User input never reaches FTS5 as syntax: each term is quoted (``"c++"``), so no query
raises a syntax error; ``raw=True`` passes FTS5 syntax through and reports errors as
``SearchSyntaxError``.
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from ..errors import SearchSyntaxError
from ..transforms.grams import query_grams

_TERM_RE = re.compile(r'"([^"]+)"|(\S+)')


@dataclass
class Filters:
    """Search filters, all optional and combinable. ``project`` is a path prefix;
    ``since``/``until`` are ISO-8601 UTC bounds on ``ts``."""

    agent: str | None = None
    project: str | None = None
    session: str | None = None
    kind: str | None = None
    role: str | None = None
    tool: str | None = None
    since: str | None = None
    until: str | None = None
    status: str | None = None

    def sql(self) -> tuple[str, list]:
        conds, params = [], []
        for col, val in (("e.agent", self.agent), ("e.session_id", self.session),
                         ("e.kind", self.kind), ("e.role", self.role),
                         ("e.tool_name", self.tool), ("e.status", self.status)):
            if val:
                conds.append(f"{col} = ?")
                params.append(val)
        if self.project:
            conds.append("(e.project_dir = ? OR e.project_dir LIKE ? ESCAPE '\\')")
            esc = self.project.rstrip("/").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params += [self.project.rstrip("/"), esc + "/%"]
        if self.since:
            conds.append("e.ts >= ?")
            params.append(self.since)
        if self.until:
            conds.append("e.ts < ?")
            params.append(self.until)
        return (" AND ".join(conds) or "1"), params


@dataclass
class Hit:
    """One search hit (tier 1): the entry and a snippet of the matching chunk."""

    entry_id: str
    agent: str
    session_id: str
    project_dir: str | None
    ts: str | None
    role: str
    kind: str
    tool_name: str | None
    token_estimate: int
    snippet: str
    score: float
    index: str = "words"
    extra: dict = field(default_factory=dict)


def terms(query: str) -> list[str]:
    """Split a user query into terms: ``"quoted phrases"`` stay whole."""
    return [a or b for a, b in _TERM_RE.findall(query)]


def words_match(query: str) -> str | None:
    """An FTS5 MATCH expression for the word index: each term quoted, terms ANDed; a
    trailing ``*`` on a term is kept as a prefix query. None for an empty query."""
    parts = []
    for t in terms(query):
        prefix = t.endswith("*") and len(t) > 1
        t = t.rstrip("*") if prefix else t
        if not re.search(r"\w", t):
            continue
        parts.append('"' + t.replace('"', '""') + '"' + ("*" if prefix else ""))
    return " AND ".join(parts) or None


def grams_match(query: str) -> str | None:
    """An FTS5 MATCH expression for the substring index, or None when no term has CJK
    or camelCase parts."""
    parts = [g for g in (query_grams(t) for t in terms(query)) if g]
    return " AND ".join(parts) or None


_HIT_SQL = """
SELECT e.entry_id, e.agent, e.session_id, e.project_dir, e.ts, e.role, e.kind, e.tool_name,
       e.token_estimate, {snippet} AS snippet, {rank} AS score
FROM {fts} JOIN chunks ch ON ch.chunk_id = {fts}.rowid
JOIN contents c ON c.content_id = ch.content_id
JOIN entries e ON e.content_hash = c.content_hash
WHERE {fts} MATCH ? AND {where}
ORDER BY score, e.ts DESC
LIMIT ?
"""


def _run(conn, fts: str, match: str, filters: Filters, limit: int) -> list[Hit]:
    where, params = filters.sql()
    if fts == "fts_words":
        snippet = "snippet(fts_words, 0, '[', ']', '…', 24)"
        rank = "bm25(fts_words)"
    else:
        snippet = "substr(ch.text, 1, 200)"
        rank = "bm25(fts_grams)"
    sql = _HIT_SQL.format(snippet=snippet, rank=rank, fts=fts, where=where)
    rows = conn.execute(sql, [match, *params, limit * 4]).fetchall()
    hits, seen = [], set()
    for r in rows:
        if r[0] in seen:
            continue
        seen.add(r[0])
        hits.append(Hit(*r, index=fts[4:]))
        if len(hits) >= limit:
            break
    return hits


def search(conn: sqlite3.Connection, query: str, *, filters: Filters | None = None,
           limit: int = 10, raw: bool = False) -> list[Hit]:
    """Ranked hits for ``query`` (best first).

    The word index is searched first (BM25, ties broken by recency); when it yields
    fewer than ``limit`` hits, the substring index adds CJK and partial-identifier
    matches. Returns at most ``limit`` distinct entries. Raises SearchSyntaxError only
    when ``raw`` is True and the FTS5 expression does not parse.
    """
    filters = filters or Filters()
    if raw:
        try:
            return _run(conn, "fts_words", query, filters, limit)
        except sqlite3.OperationalError as e:
            raise SearchSyntaxError(f"FTS5 syntax error: {e}", where=query,
                                    hint="drop --raw to search the words as typed") from None
    hits: list[Hit] = []
    m = words_match(query)
    if m:
        hits = _run(conn, "fts_words", m, filters, limit)
    if len(hits) < limit:
        g = grams_match(query)
        if g:
            seen = {h.entry_id for h in hits}
            hits += [h for h in _run(conn, "fts_grams", g, filters, limit) if h.entry_id not in seen]
    return hits[:limit]

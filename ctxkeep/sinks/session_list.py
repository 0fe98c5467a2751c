"""One page of the store's session list, built in SQL: the sessions that match, newest
first, each sub-agent right under its parent, ``LIMIT``/``OFFSET`` applied to that
list in the database, and their total (``ctxkeep sessions``, the app's session index
through ``service.sessions``).

Two sources of the same rows: DuckDB (``analytics.duckdb``: the ``history`` view, store
and archive, with usage ``cost_usd`` and the titles of ``session_text``) and SQLite
(``store.db``'s ``entries`` and ``usage``, without cost or title: the fallback while
DuckDB lags or is missing). Both aggregate every matching entry once per session (a
hash aggregate: counts, first and last ``ts``, parent, project) and read usage and
titles for the page's sessions only; the page's order is the one rule below, in SQL.

Order: a top-level session is one whose parent is not among the matching sessions, or
whose parent is itself listed under its own parent (sub-agents nest one level; a
sub-agent of a sub-agent stands on its own); top-level sessions newest first (by
their first ``ts``; none last; ties by agent, then id, descending); each one's
sub-agents after it, oldest first (none first; ties by id). ``limit``, ``offset`` and
``total`` count rows of that list, sub-agents included (one Claude Code session of a
2.5 GB test tree holds 34,546 sidechains: a page of parents with their sub-agents
would be unbounded); a page may so begin with sub-agents whose parent ended the one
before.

Row keys: ``agent``, ``session_id``, ``parent_session_id``,
``project_dir`` (the session's most frequent non-empty one), ``started``/``ended``
(DuckDB: ``datetime`` in UTC; SQLite: stored ISO-8601 text), ``messages``,
``tool_calls``, ``token_estimate`` (estimated tokens of the stored texts), ``tokens``
(usage logged: input + output + cache read + cache write + reasoning logged beside the
output, ``schema.REASONING_OUTSIDE_OUTPUT``; 0: no usage; None: usage whose
tokens the agent did not record, only a cost: Crush, Go opencode), ``cost_usd`` (DuckDB only),
``cost_logged`` (DuckDB: the responses whose cost is the agent's own logged figure, which
``cost_usd`` takes over list prices as ``report``'s auto mode does; SQLite: 0),
``title`` (DuckDB: the session's title, else its first prompt; SQLite: None),
``depth`` (0 or 1).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.paths import under_sql
from ctxkeep.schema import reasoning_beside_sql
from ctxkeep.sinks.files import ANALYTICS_DB


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions: ``agents`` (empty: all); ``project``: this directory or below
    (``paths.under_sql``); ``since``: active at or after it (its last ``ts`` ≥);
    ``until``: started before it (its first ``ts`` <); a session without a time is
    left out by either (it cannot be placed in a period); both stored-``ts`` text (ISO-8601 UTC, ``query.search.parse.parse_when``)."""

    agents: tuple[str, ...] = ()
    project: str | None = None
    since: str | None = None
    until: str | None = None
    #: the empty sessions (no time, no message: a summary-only or file-history-only file,
    #: ~17 % of a heavy home's sessions, newuser16 F2) listed (True), or left out of the
    #: list and of ``total`` and counted apart (``SessionPage.empty``)
    empty: bool = True


@dataclass
class SessionPage:
    """``rows`` (dicts of the row keys of the module doc, in list order), ``total`` (the sessions
    that match, sub-agents included), ``source`` (``duckdb`` or ``sqlite``)."""

    rows: list[dict] = field(default_factory=list)
    total: int = 0
    source: str = "sqlite"
    empty: int = 0  # the empty sessions that match, left out (``SessionFilter.empty`` False)


#: the paging tail shared by both sources, over ``s`` (one row per session: agent,
#: session_id, parent_session_id, project_dir, started, ended, messages, tool_calls,
#: token_estimate); ``{filters}``: the WHERE of the matching sessions; ``{page}``: the
#: LIMIT/OFFSET clause
_TAIL = """,
f AS MATERIALIZED (SELECT * FROM s WHERE {filters}),
{nesting},
o AS (
    SELECT d.*, 0 AS depth, d.started AS top_started, d.session_id AS top_id FROM d
    WHERE NOT d.is_kid AND {keep}
    UNION ALL
    SELECT d.*, 1, p.started, p.session_id FROM d
    JOIN d p ON p.agent = d.agent AND p.session_id = d.parent_session_id
    WHERE d.is_kid AND {keep}),
listed AS MATERIALIZED (
    SELECT * FROM (
        SELECT o.*, row_number() OVER (
            ORDER BY top_started DESC NULLS LAST, agent DESC, top_id DESC, depth, started NULLS FIRST, session_id
        ) AS pos FROM o) n
    ORDER BY pos {page}),
u AS (
    SELECT x.agent, x.session_id,
           CASE WHEN count(x.input_tokens) + count(x.output_tokens) + count(x.cache_read_tokens)
                     + count(x.cache_creation_tokens) > 0 THEN
           sum(coalesce(x.input_tokens, 0) + coalesce(x.output_tokens, 0) + coalesce(x.cache_read_tokens, 0)
               + coalesce(x.cache_creation_tokens, 0) + {beside})
           END AS tokens, {cost} AS cost_usd,
           {logged} AS cost_logged
    FROM usage x JOIN (SELECT DISTINCT agent, session_id FROM listed) l
      ON l.agent = x.agent AND l.session_id = x.session_id
    GROUP BY x.agent, x.session_id){titles}
SELECT listed.agent, listed.session_id, listed.parent_session_id, listed.project_dir, listed.started,
       listed.ended, listed.messages, listed.tool_calls, listed.token_estimate,
       CASE WHEN u.session_id IS NULL THEN 0 ELSE u.tokens END AS tokens, u.cost_usd,
       coalesce(u.cost_logged, 0) AS cost_logged, {title} AS title, listed.depth, tot.total, tot.empty
FROM (SELECT count(*) FILTER (WHERE {keep}) AS total, count(*) FILTER (WHERE NOT ({keep})) AS empty
      FROM d) tot LEFT JOIN listed ON true
LEFT JOIN u ON u.agent = listed.agent AND u.session_id = listed.session_id{title_join}
ORDER BY listed.pos
"""

#: which sessions have their parent listed (``has_parent``) and are listed under it
#: (``is_kid``): DuckDB by self-joins (hash joins); SQLite by ``(agent, id) IN`` over
#: ``f`` (it indexes the list: its self-join of a materialized CTE ran as a nested loop,
#: 36,305 x 36,305 on the 2.5 GB store; an ``IN`` cost DuckDB ~25 % more), then by
#: ``EXISTS`` in ``kp``, the sessions with a parent, which SQLite searches through an
#: automatic index (the same ``IN`` over ``k WHERE has_parent`` ran as a scan per row:
#: the ~76 CPU s of the whole SQLite page at 2.5 GB; ``up to d`` now ~3.6 CPU s under
#: load, ~2 s of it the per-session aggregate)
_NESTING_JOIN = """k AS MATERIALIZED (
    SELECT f.*, p.session_id IS NOT NULL AS has_parent FROM f
    LEFT JOIN f p ON p.agent = f.agent AND p.session_id = f.parent_session_id
                 AND p.session_id <> f.session_id),
d AS MATERIALIZED (
    SELECT k.*, k.has_parent AND NOT coalesce(pp.has_parent, false) AS is_kid FROM k
    LEFT JOIN k pp ON pp.agent = k.agent AND pp.session_id = k.parent_session_id
                  AND pp.session_id <> k.session_id AND k.has_parent)"""
_NESTING_IN = """k AS MATERIALIZED (
    SELECT f.*, coalesce(f.parent_session_id <> f.session_id
                         AND (f.agent, f.parent_session_id) IN (SELECT agent, session_id FROM f), false)
               AS has_parent FROM f),
kp AS MATERIALIZED (SELECT agent, session_id FROM k WHERE has_parent),
d AS MATERIALIZED (
    SELECT k.*, k.has_parent AND NOT EXISTS (
               SELECT 1 FROM kp WHERE kp.agent = k.agent AND kp.session_id = k.parent_session_id)
               AS is_kid FROM k)"""

#: ``_DUCK_SESSIONS``'s ``g`` (one row per agent, session, project, parent) from every entry
_DUCK_G_LIVE = """e AS (
    SELECT agent, session_id, parent_session_id, project_dir, epoch_us(ts) AS us, kind, token_estimate,
           sqlite_rowid
    FROM entries WHERE status IS DISTINCT FROM 'rewound' AND {agents}
    UNION ALL
    SELECT agent, session_id, parent_session_id, project_dir, epoch_us(ts), kind, token_estimate, NULL
    FROM (SELECT * FROM archive a WHERE a.entry_id NOT IN (SELECT entry_id FROM entries)
          QUALIFY row_number() OVER (PARTITION BY a.entry_id ORDER BY a.archived_at DESC) = 1) x
    WHERE status IS DISTINCT FROM 'rewound' AND {agents}),
g AS (  -- one pass over the entries: per session, project and parent
    SELECT agent, session_id, project_dir, parent_session_id, count(*) AS n, min(us) AS first_us,
           max(us) AS last_us, min(coalesce(sqlite_rowid, 9223372036854775807)) AS first_row,
           count(*) FILTER (WHERE kind = 'message') AS messages,
           count(*) FILTER (WHERE kind = 'tool_call') AS tool_calls, sum(token_estimate) AS token_estimate
    FROM e GROUP BY ALL)"""
#: ``g`` from ``session_parts`` (``sinks.duckdb._sync_session_parts``: the same sums, kept
#: by the closing sync), while ``_PARTS_CURRENT`` holds: 0.02 s for a page at 10 GB
#: instead of ~0.45 CPU s over 5.4 M entries (rss20)
_DUCK_G_PARTS = """g AS (
    SELECT agent, session_id, project_dir, parent_session_id, n, first_us, last_us, first_row, messages,
           tool_calls, token_estimate
    FROM session_parts WHERE {agents})"""
#: ``session_parts`` holds DuckDB's entries as they are (its marks are the sync's) and no
#: archive adds entries (the parts sum ``entries`` only)
_PARTS_CURRENT = """
SELECT (SELECT value FROM meta WHERE key = 'parts_rowid')
         = coalesce((SELECT value FROM meta WHERE key = 'entries_rowid'), 0)
   AND (SELECT value FROM meta WHERE key = 'parts_status_seq')
         = coalesce((SELECT value FROM meta WHERE key = 'status_seq'), 0)
   AND (SELECT value FROM meta WHERE key = 'parts_count') = (SELECT count(*) FROM entries)
   AND NOT EXISTS (SELECT 1 FROM archive)"""

#: DuckDB: every session of the entries of ``history`` (store + archive, rewound left out:
#: its rows as ``model.sql``'s ``all_entries`` takes them, without the ``is_error`` column,
#: whose lookup in ``tool_errors`` was a third of the query's time), with the project and
#: parent chosen as the ``sessions`` view of ``model.sql`` chooses them (its window's
#: order as an ``arg_min`` key: a hash aggregate, no sort; a NULL sorts last in a
#: STRUCT as in its NULLS LAST).
#: Times as microseconds since the epoch (``epoch_us``): DuckDB 2.0.1's ``min``/``max``
#: of a TIMESTAMPTZ per session took 0.14 CPU s over 777,175 entries, of their
#: ``epoch_us`` 0.026 s (the 2.5 GB test store)
_DUCK_SESSIONS = """
WITH {g},
proj AS (  -- the most frequent project; ties: the earliest, then the first stored
    SELECT agent, session_id, arg_min(project_dir, (-n, first_us, first_row, project_dir)) AS project_dir
    FROM (
        SELECT agent, session_id, project_dir, sum(n) AS n, min(first_us) AS first_us,
               min(first_row) AS first_row
        FROM g WHERE coalesce(project_dir, '') <> '' GROUP BY ALL)
    GROUP BY agent, session_id),
parent AS (  -- the most frequent parent; ties: the earliest, then the smallest id
    SELECT agent, session_id, arg_min(parent_session_id, (-n, first_us, parent_session_id)) AS parent_session_id
    FROM (
        SELECT agent, session_id, parent_session_id, sum(n) AS n, min(first_us) AS first_us
        FROM g WHERE coalesce(parent_session_id, '') <> '' GROUP BY ALL)
    GROUP BY agent, session_id),
agg AS (
    SELECT agent, session_id, min(first_us) AS started, max(last_us) AS ended,
           sum(messages) AS messages, sum(tool_calls) AS tool_calls,
           coalesce(sum(token_estimate), 0) AS token_estimate
    FROM g GROUP BY agent, session_id),
s AS (
    SELECT agg.agent, agg.session_id, parent.parent_session_id, proj.project_dir, agg.started, agg.ended,
           agg.messages, agg.tool_calls, agg.token_estimate
    FROM agg LEFT JOIN parent USING (agent, session_id) LEFT JOIN proj USING (agent, session_id))"""

#: DuckDB: the titles of the listed sessions (``session_text``; an archived session's
#: from its archived texts, as the ``sessions`` view)
_DUCK_TITLES = """,
a AS (
    SELECT x.agent, x.session_id,
           arg_min(regexp_replace(trim(left(x.text, 200)), '\\s+', ' ', 'g'), x.ts)
               FILTER (WHERE x.kind = 'meta' AND x.tool_name = 'session' AND trim(coalesce(x.text, '')) <> '')
               AS title,
           arg_min(regexp_replace(trim(left(x.text, 200)), '\\s+', ' ', 'g'), x.ts)
               FILTER (WHERE x.kind = 'message' AND x.role = 'user' AND trim(coalesce(x.text, '')) <> '')
               AS first_prompt
    FROM archive x JOIN (SELECT DISTINCT agent, session_id FROM listed) l
      ON l.agent = x.agent AND l.session_id = x.session_id
    WHERE x.status IS DISTINCT FROM 'rewound' GROUP BY x.agent, x.session_id)"""

#: SQLite: every session of ``entries`` (rewound left out): its most frequent non-empty
#: project (ties: the first in the table's order), its largest parent id
_SQLITE_SESSIONS = """
WITH e AS (
    SELECT agent, session_id, parent_session_id, project_dir, ts, kind, token_estimate
    FROM entries WHERE status IS NOT 'rewound' AND {agents}),
s AS (
    SELECT agent, session_id, max(parent_session_id) AS parent_session_id,
           (SELECT project_dir FROM entries p WHERE p.agent = e.agent AND p.session_id = e.session_id
            AND coalesce(p.project_dir, '') <> '' GROUP BY project_dir ORDER BY count(*) DESC LIMIT 1)
               AS project_dir,
           min(ts) AS started, max(ts) AS ended,
           sum(kind = 'message') AS messages, sum(kind = 'tool_call') AS tool_calls,
           sum(coalesce(token_estimate, 0)) AS token_estimate
    FROM e GROUP BY agent, session_id)"""


def _where(flt: SessionFilter, ts_param: str) -> tuple[str, list, str, list]:
    """``(agents SQL, its params, filters SQL, its params)``."""
    agents, aparams = "true", []
    if flt.agents:
        agents = f"agent IN ({', '.join('?' for _ in flt.agents)})"
        aparams = list(flt.agents)
    conds, params = ["true"], []
    if flt.project:
        under, args = under_sql("project_dir", flt.project)
        conds.append(f"coalesce({under}, false)")
        params += args
    if flt.since:
        conds.append(f"ended >= {ts_param}")
        params.append(flt.since)
    if flt.until:
        conds.append(f"started < {ts_param}")
        params.append(flt.until)
    return agents, aparams, " AND ".join(conds), params


def _keep(flt: SessionFilter, d: str) -> str:
    """The SQL condition of a listed session over ``d`` (the alias's prefix): every one,
    or (``flt.empty`` False) one with a time or a message."""
    return "true" if flt.empty else f"({d}started IS NOT NULL OR {d}messages > 0)"


def _page_sql(limit: int | None, offset: int, *, sqlite: bool) -> tuple[str, list]:
    """The LIMIT/OFFSET clause and its parameters (SQLite takes an OFFSET only after a
    LIMIT: ``LIMIT -1``, none)."""
    if limit is None and not offset:
        return "", []
    if limit is None:
        return ("LIMIT -1 OFFSET ?", [offset]) if sqlite else ("OFFSET ?", [offset])
    return "LIMIT ? OFFSET ?", [limit, offset]


def _rows(cur) -> SessionPage:
    names = [d[0] for d in cur.description]
    got = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    total = int(got[0]["total"]) if got else 0  # one row of NULLs and the total: an empty page
    empty = int(got[0]["empty"] or 0) if got else 0
    for r in got:
        del r["total"], r["empty"]
    return SessionPage([r for r in got if r["session_id"] is not None], total, empty=empty)


def duckdb_page(
    home: Path, flt: SessionFilter, *, limit: int | None = None, offset: int = 0, live: bool | None = None
) -> SessionPage:
    """One page from ``<home>/analytics.duckdb`` opened read-only (the caller brought
    it current: ``analytics_current.bring_current``). ``limit`` None: every session
    from ``offset`` on. The sessions are summed from ``session_parts`` while it is
    current (``_PARTS_CURRENT``), else from every entry (``live`` True: always; the
    tests compare both). Raises duckdb.Error (a held, damaged or older file: the
    caller lists from SQLite)."""
    import duckdb

    agents, aparams, filters, fparams = _where(flt, "epoch_us(CAST(? AS TIMESTAMPTZ))")
    page, pparams = _page_sql(limit, offset, sqlite=False)
    con = duckdb.connect(str(Path(home) / ANALYTICS_DB), read_only=True)
    try:
        parts = bool(con.execute(_PARTS_CURRENT).fetchall()[0][0])
    except duckdb.Error:  # a file older than ``session_parts``: every entry
        parts = False
    parts = parts and live is not True
    g = (_DUCK_G_PARTS if parts else _DUCK_G_LIVE).format(agents=agents)
    sql = _DUCK_SESSIONS.format(g=g) + _TAIL.format(
        nesting=_NESTING_JOIN,
        filters=filters,
        keep=_keep(flt, "d."),
        page=page,
        cost="usd_sum(x.cost_usd)",
        beside=reasoning_beside_sql("x.agent", "x.reasoning_tokens"),
        logged="count(x.logged_cost_usd)",  # responses whose cost is the agent's own figure
        titles=_DUCK_TITLES,
        title="coalesce(t.title, a.title, t.first_prompt, a.first_prompt)",
        title_join=(
            " LEFT JOIN session_text t ON t.agent = listed.agent AND t.session_id = listed.session_id"
            " LEFT JOIN a ON a.agent = listed.agent AND a.session_id = listed.session_id"
        ),
    )
    try:
        p = _rows(con.execute(sql, [*aparams, *([] if parts else aparams), *fparams, *pparams]))
    finally:
        con.close()
    for r in p.rows:
        r["started"], r["ended"] = _utc(r["started"]), _utc(r["ended"])
    p.source = "duckdb"
    return p


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _utc(us: int | None) -> dt.datetime | None:
    """Microseconds since the epoch as a UTC ``datetime`` (exact: no float)."""
    return None if us is None else _EPOCH + dt.timedelta(microseconds=int(us))


def sqlite_page(
    conn: sqlite3.Connection, flt: SessionFilter, *, limit: int | None = None, offset: int = 0
) -> SessionPage:
    """One page from the SQLite store on ``conn`` (read-only is enough), without cost
    or titles. ``limit`` None: every session from ``offset`` on."""
    p = _rows(conn.execute(*sqlite_page_sql(flt, limit=limit, offset=offset)))
    p.source = "sqlite"
    return p


def sqlite_page_sql(flt: SessionFilter, *, limit: int | None = None, offset: int = 0) -> tuple[str, list]:
    """``sqlite_page``'s statement and its parameters."""
    agents, aparams, filters, fparams = _where(flt, "?")
    page, pparams = _page_sql(limit, offset, sqlite=True)
    sql = _SQLITE_SESSIONS.format(agents=agents) + _TAIL.format(
        nesting=_NESTING_IN,
        filters=filters,
        keep=_keep(flt, "d."),
        page=page,
        cost="NULL",
        beside=reasoning_beside_sql("x.agent", "x.reasoning_tokens"),
        logged="0",
        titles="",
        title="NULL",
        title_join="",
    )
    return sql, [*aparams, *fparams, *pparams]

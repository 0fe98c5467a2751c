"""Usage and cost reports over the DuckDB analytics store (``analytics.duckdb``).

One job: the SQL of ``ctxkeep report`` (daily, weekly, monthly, session, blocks,
models, projects, tools) over the model of ``sinks/duckdb/model.sql``; it returns typed
rows and never reads session files. Rendering lives in ``cli/report.py``.

Units: tokens are tokens; money is USD (``None`` when no response of the row has a
cost in the chosen mode, never 0); times are UTC ``datetime``; a period is the local
date (``YYYY-MM-DD``; a week by its Monday, a month as ``YYYY-MM``) in the report's IANA
time zone, computed in DuckDB with ``timezone(tz, ts)`` (ICU: right across DST changes
and near midnight). ``input_tokens`` is the non-cached input; ``total_tokens`` = input
+ output + cache read + cache creation + the reasoning tokens an agent logs beside its
output (Gemini CLI's thoughts, OpenCode's and Qwen Code's reasoning; Codex counts its
reasoning inside the output), as ccusage's totalTokens, Gemini CLI's own
``tokens.total`` and agentsview (thoughts folded into the output) count them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb

from ctxkeep.errors import UsageError
from ctxkeep.paths import under_sql
from ctxkeep.schema import (
    CACHE_WRITE_UNRECORDED,
    cache_write_shown,
    reasoning_beside_sql,
    tokens_unrecorded_note,
)
from ctxkeep.sinks import analytics_current
from ctxkeep.timeutil import check_timezone, local_timezone, when_day

#: the ``--json`` schema version (docs/analytics.md "Reports")
SCHEMA = 1
REPORTS = ("daily", "weekly", "monthly", "session", "blocks", "models", "projects", "tools")
MODES = ("auto", "calculate", "display")
#: ccusage's session block: 5 hours (Claude's usage window)
BLOCK_HOURS = 5.0
#: a projection above this share of the limit is a warning (ccusage's 0.8)
WARNING_SHARE = 0.8

_PERIOD_SQL = {
    "daily": "strftime(CAST(timezone({tz}, ts) AS DATE), '%Y-%m-%d')",
    "weekly": "strftime(date_trunc('week', CAST(timezone({tz}, ts) AS DATE)), '%Y-%m-%d')",
    "monthly": "strftime(CAST(timezone({tz}, ts) AS DATE), '%Y-%m')",
    "session": "session_id",
    # no project: null (``sessions --json``'s spelling); the table prints "(none)"
    "projects": "nullif(project_dir, '')",
    "models": "NULL",
}


@dataclass(frozen=True)
class Filters:
    """What a report covers. ``since``/``until``: local dates, inclusive; ``agents``:
    ``schema.AGENTS`` names (empty: all); ``project``: a project directory as
    ``paths.normalize_dir`` writes it, the report covering it and every directory below
    it (``paths.under_sql``, the rule of ``sessions``, ``search`` and ``purge``);
    ``timezone``: an IANA name; ``mode``: ``MODES``."""

    timezone: str = "UTC"
    since: dt.date | None = None
    until: dt.date | None = None
    agents: tuple[str, ...] = ()
    project: str | None = None
    mode: str = "auto"


@dataclass
class UsageRow:
    """One row of a usage report: the tokens and cost of ``period`` (a date, week,
    month, session id or project; None for ``models`` and for the sessions without a
    project in ``projects``), ``agent`` and ``model`` (None
    unless the report is broken down per model, or is ``models``). ``models``: the
    models of the row; ``assumed_models``: those only assumed (the file named none,
    ``usage.model_source = 'assumed'``); ``responses``: usage rows; ``unpriced``:
    responses without a cost in the mode; ``reasoning_tokens``: as logged (counted
    inside the output by OpenAI agents, beside it by Gemini CLI: then added to ``total_tokens``). ``project``, ``last_activity`` (UTC): for
    ``session`` rows; ``subagent_sessions``: the sub-agent sessions a ``session`` row
    rolled in (``SESSION_ROOTS``). The token fields are None when the agent recorded no
    tokens for any response of the row, only a cost (``schema.TOKENS_UNRECORDED_WHY``:
    Crush, Go opencode, Codebuff): "not recorded", not 0."""

    period: str | None
    agent: str
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_creation_tokens: int | None
    total_tokens: int | None
    cost_usd: float | None
    responses: int
    unpriced: int
    reasoning_tokens: int | None = 0
    models: list[str] = field(default_factory=list)
    assumed_models: list[str] = field(default_factory=list)
    project: str | None = None
    last_activity: dt.datetime | None = None
    subagent_sessions: list[str] = field(default_factory=list)
    #: the lake's machine of the row (``report --lake --by machine``, ``query.lake``)
    machine: str | None = None


@dataclass
class Block:
    """A 5-hour usage window (ccusage's session block) over the responses of every
    selected agent: ``start`` is the first response's time floored to the hour (UTC),
    ``end`` = start + 5 h; a gap block (``is_gap``) covers more than 5 h without a
    response. ``is_active``: now is within 5 h of the last response and before ``end``.
    Active blocks carry ``burn_rate`` (``tokens_per_minute``,
    ``tokens_per_minute_for_indicator`` (input + output only), ``cost_per_hour`` USD)
    and ``projection`` (``total_tokens``, ``cost_usd``, ``remaining_minutes``) at the
    burn rate until ``end``; with a token limit, ``limit_status`` (``limit``,
    ``projected_tokens``, ``percent``, ``status``: ok / warning / exceeds)."""

    start: dt.datetime
    end: dt.datetime
    actual_end: dt.datetime | None
    is_active: bool
    is_gap: bool
    responses: int = 0
    #: the token sums (tokens); each None when no response of the block recorded it
    #: (a logged cost only: Crush, Go opencode, Codebuff), as a usage row's
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_read_tokens: int | None = 0
    cache_creation_tokens: int | None = 0
    cost_usd: float | None = None
    models: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    first: dt.datetime | None = None
    burn_rate: dict | None = None
    projection: dict | None = None
    limit_status: dict | None = None
    #: the lake's machine of the block (``report --lake --by machine``)
    machine: str | None = None
    #: whose quota window it is (``provider_of``): one provider's responses never move
    #: another's block
    provider: str = ""

    #: reasoning tokens logged beside the output (Gemini CLI's thoughts: counted in the
    #: total, not in ``output_tokens``; ``schema.REASONING_OUTSIDE_OUTPUT``)
    reasoning_beside: int = 0

    @property
    def total_tokens(self) -> int | None:
        """The four token sums and the reasoning logged beside the output; None when
        the block's responses recorded none (newuser19 F1: it said 0)."""
        parts = (self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_creation_tokens)
        if all(p is None for p in parts):
            return None
        return sum(p or 0 for p in parts) + self.reasoning_beside


@dataclass
class ToolRow:
    """One tool of one agent (view ``tool_calls``): ``calls``, ``sessions``, ``results``,
    ``errors`` (flagged results), ``error_rate`` (errors / results, None without results),
    ``output_bytes`` and ``output_tokens`` (estimated) of the results."""

    agent: str
    tool_name: str | None
    calls: int
    sessions: int
    results: int
    errors: int
    error_rate: float | None
    output_bytes: int
    output_tokens: int
    #: the lake's machine of the row (``report --lake --by machine``)
    machine: str | None = None


@dataclass
class Report:
    """A report: ``rows`` (``UsageRow``, ``Block`` or ``ToolRow``), ``notes`` (one line
    each: unpriced and assumed models, a stale store …)."""

    name: str
    filters: Filters
    rows: list
    notes: list[str] = field(default_factory=list)


def parse_date(value: str, where: str, tz: str = "UTC") -> dt.date:
    """A ``--since``/``--until`` value as a calendar day in ``tz``: ``YYYY-MM-DD`` or
    ``YYYYMMDD`` (ccusage's form) as is, a datetime or an age (``7d``) as the day it
    falls on (``timeutil.when_day``, the one parser); UsageError otherwise."""
    return when_day(value, tz=tz, where=where)


def open_store(home: Path, wait: float = analytics_current.WAIT_SECONDS):
    """Open ``<home>/analytics.duckdb`` read-only, brought current with SQLite first
    (``sinks.analytics_read.open_readonly``, imported on use: it imports DuckDB).
    Returns ``(connection, note)``; raises StoreError (missing, damaged or held and
    unreadable)."""
    from ctxkeep.sinks.analytics_read import open_readonly

    return open_readonly(home, wait=wait)


def unreadable(home: Path, e: Exception):
    """The StoreError of an analytics store DuckDB failed to read mid-query
    (``sinks.analytics_read.unreadable``)."""
    from ctxkeep.sinks.analytics_read import unreadable as why

    return why(home, e)


def _where(f: Filters, base: str = "ts IS NOT NULL") -> tuple[str, list]:
    tz = _lit(f.timezone)
    conds: list[str] = [base]
    params: list = []
    # each local-day bound also as a bound on ts a day wider (redundant, so exact in
    # every zone and DST change): DuckDB skips the row groups outside it by their
    # min/max, where the cast alone reads every row (newuser20 F9: the status line's
    # daily figures at 12 GB)
    if f.since:
        conds.append(f"CAST(timezone({tz}, ts) AS DATE) >= ?")
        params.append(f.since)
        conds.append("ts >= ?")
        params.append(dt.datetime.combine(f.since - dt.timedelta(days=1), dt.time(0), tzinfo=dt.UTC))
    if f.until:
        conds.append(f"CAST(timezone({tz}, ts) AS DATE) <= ?")
        params.append(f.until)
        conds.append("ts < ?")
        params.append(dt.datetime.combine(f.until + dt.timedelta(days=2), dt.time(0), tzinfo=dt.UTC))
    if f.agents:
        conds.append(f"agent IN ({', '.join('?' for _ in f.agents)})")
        params.extend(f.agents)
    if f.project:
        under, args = under_sql("project_dir", f.project)
        conds.append(under)
        params.extend(args)
    return " AND ".join(conds), params


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _cost(mode: str) -> str:
    if mode not in MODES:
        raise UsageError(
            f"unknown cost mode {mode!r}", where="--mode", hint="give auto, calculate or display"
        )
    return f"cost_in_mode('{mode}', logged_cost_usd, calculated_cost_usd)"


#: each session of the store -> its root session: the parent chain followed up (sub-agent
#: transcripts, inline sidechains, forks) while the parent is a session the store holds
#: (an orphan sub-agent, whose parent file is missing, stays its own root), at most 8
#: levels; a session with several parents takes the smallest id (deterministic)
SESSION_ROOTS = """
WITH RECURSIVE known AS (SELECT DISTINCT agent, session_id FROM all_entries),
edge AS (
    SELECT p.agent, p.session_id, p.parent FROM (
        SELECT agent, session_id, min(parent_session_id) AS parent FROM all_entries
        WHERE coalesce(parent_session_id, '') <> '' AND parent_session_id <> session_id
        GROUP BY ALL) p
    JOIN known k ON k.agent = p.agent AND k.session_id = p.parent),
walk(agent, session_id, root, depth) AS (
    SELECT agent, session_id, session_id, 0 FROM known
    UNION ALL
    SELECT w.agent, w.session_id, e.parent, w.depth + 1
    FROM walk w JOIN edge e ON e.agent = w.agent AND e.session_id = w.root WHERE w.depth < 8)
SELECT agent, session_id, arg_max(root, depth) AS root FROM walk GROUP BY ALL
"""


_ROLLED = (
    "(SELECT u.* REPLACE (coalesce(r.root, u.session_id) AS session_id), u.session_id AS own_session "
    f"FROM usage u LEFT JOIN ({SESSION_ROOTS}) r USING (agent, session_id))"
)


def _session_project(source: str) -> str:
    """The project of a ``session`` report row: the root session's own (the most
    frequent ``project_dir`` of its own responses), else, when it logged none, its
    sub-agents'. Before, the mode over every rolled-up row: a sub-agent working in a git
    worktree with more responses than its parent named the worktree."""
    known = "coalesce(project_dir, '') <> ''"
    anyone = f"mode(project_dir ORDER BY ts) FILTER (WHERE {known})"
    if source != _ROLLED:
        return anyone
    return f"coalesce(mode(project_dir ORDER BY ts) FILTER (WHERE {known} AND own_session = session_id), {anyone})"


def _buckets_fresh(con) -> bool:
    """``buckets_fresh()`` of the model (``sinks.duckdb.buckets_fresh``, not imported:
    that module imports pyarrow, ~0.2 s a report); False on an older analytics file."""

    try:
        return bool(con.execute("SELECT buckets_fresh()").fetchall()[0][0])
    except duckdb.CatalogException:
        return False


def _has_entries(con) -> bool:
    """True when ``all_entries`` exists (a lake exported without entries has none: its
    sessions are not rolled up, ``query.lake``)."""

    try:
        con.execute("SELECT 1 FROM all_entries LIMIT 0").fetchall()
    except duckdb.CatalogException:
        return False
    return True


#: reports read from ``usage_buckets`` (no session dimension)
_BUCKETED = ("daily", "weekly", "monthly", "models", "projects")
#: per cost mode: the ``usage_buckets`` USD sum and its count of priced responses
_BUCKET_COST = {
    "auto": ("auto_usd", "n_auto"),
    "calculate": ("calculated_usd", "n_calculated"),
    "display": ("logged_usd", "n_logged"),
}
_BUCKETS = "(SELECT * EXCLUDE (bucket), bucket AS ts FROM usage_buckets)"
#: a usage row whose tokens the agent did not record (all null) but whose cost it logged
_TOKENS_UNKNOWN = (
    "(input_tokens IS NULL AND output_tokens IS NULL AND cache_read_tokens IS NULL "
    "AND cache_creation_tokens IS NULL AND logged_cost_usd IS NOT NULL)"
)


def usage_report(con, name: str, f: Filters, *, breakdown: bool = False) -> Report:
    """A usage report ``name`` (daily, weekly, monthly, session, models, projects) over
    DuckDB ``usage``: one ``UsageRow`` per period and agent (and model with
    ``breakdown``; ``models`` is always per model), ordered by period, agent, model.
    Costs are ``cost_in_mode(f.mode, …)`` summed exactly (``usd_sum``). ``session``
    rolls sub-agent sessions into their root session (``SESSION_ROOTS``), as ccusage
    counts a Claude Code ``<session>/subagents/`` file under its session. The other
    reports read the same sums from ``usage_buckets`` (15-minute UTC buckets: the
    same local dates in every zone, ~15x fewer rows) when it is fresh."""
    check_timezone(f.timezone)
    per_model = breakdown or name == "models"
    period = _PERIOD_SQL[name].format(tz=_lit(f.timezone))
    where, params = _where(f)
    cost = _cost(f.mode)
    bucketed = name in _BUCKETED and _buckets_fresh(con)
    if bucketed:
        usd, priced = _BUCKET_COST[f.mode]
        agg = (
            f"CAST(sum({usd}) AS DOUBLE), sum(responses), sum(responses - {priced}), "
            f"sum(coalesce(reasoning_tokens, 0)), sum({reasoning_beside_sql()})"
        )
        source = _BUCKETS
    else:
        agg = (
            f"usd_sum({cost}), count(*), count(*) FILTER (WHERE {cost} IS NULL), sum(coalesce(reasoning_tokens, 0)), "
            f"sum({reasoning_beside_sql()})"
        )
        source = _ROLLED if name == "session" and _has_entries(con) else "usage"
    sql = f"""
        SELECT {period} AS period, agent, {"model" if per_model else "NULL"} AS model,
               sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_tokens),
               {agg},
               list(DISTINCT model ORDER BY model) FILTER (WHERE model IS NOT NULL),
               list(DISTINCT model ORDER BY model) FILTER (WHERE model_source = 'assumed'),
               {_session_project(source) if name == "session" else "NULL"},
               max(ts),
               {"list(DISTINCT own_session ORDER BY own_session) FILTER (WHERE own_session <> session_id)" if name == "session" else "NULL"}
        FROM {source} WHERE {where}
        GROUP BY ALL ORDER BY period NULLS FIRST, agent, model NULLS FIRST"""
    rows = []
    beside: dict[str, int] = {}  # reasoning tokens counted in the totals, per agent
    for (
        p,
        agent,
        model,
        i,
        o,
        cr,
        cc,
        c,
        n,
        unpriced,
        rt,
        rb,
        models,
        assumed,
        proj,
        last,
        subs,
    ) in con.execute(sql, params).fetchall():
        # null sums: every usage row of the group has tokens the agent did not record
        # (a logged cost only, ``_TOKENS_UNKNOWN``): "not recorded", never 0
        i, o, cr, cc = (None if x is None else int(x) for x in (i, o, cr, cc))
        # an agent that logs no cache write (Codex: ``schema.CACHE_WRITE_UNRECORDED``):
        # "not recorded", never 0 (it still adds 0 to the total)
        cc = cache_write_shown(agent, cc) if i is not None else cc
        # the total counts the reasoning tokens an agent logs beside its output (Gemini
        # CLI's thoughts: ``schema.REASONING_OUTSIDE_OUTPUT``), as ccusage's totalTokens does
        unrecorded = i is None and o is None and cr is None and cc is None
        total = None if unrecorded else (i or 0) + (o or 0) + (cr or 0) + (cc or 0) + int(rb or 0)
        if rb and not unrecorded:
            beside[agent] = beside.get(agent, 0) + int(rb)
        # the reasoning of such a row is not recorded either (it said 0: newuser19 F1)
        reasoning = None if unrecorded and not rt else int(rt)
        rows.append(
            UsageRow(
                p, agent, model, i, o, cr, cc, total, c, int(n), int(unpriced), reasoning,
                list(models or []), list(assumed or []),
                proj if name == "session" else None, last if name == "session" else None,
                list(subs or []),
            )
        )  # fmt: skip
    if name == "session":  # the costliest first, as ccusage
        rows.sort(key=lambda r: (-(r.cost_usd or 0.0), r.period or ""))
    return Report(name, f, rows, _notes(con, f, bucketed=bucketed) + _beside_note(beside))


def _beside_note(beside: dict[str, int]) -> list[str]:
    """The note that says what a total holds beyond the token columns a table shows
    (newuser21 M4: Gemini CLI's thoughts made ``total`` larger than the columns' sum,
    and only the HTML report said why): ``[]`` when no row's agent logged reasoning
    beside its output (``schema.REASONING_OUTSIDE_OUTPUT``)."""
    if not beside:
        return []
    parts = ", ".join(f"{a} {n:,}" for a, n in sorted(beside.items()))
    return [
        "total = input + output + cache read + cache write + the reasoning tokens an agent logs "
        f"beside its output ({parts}), as ccusage and the agents count it"
    ]


def _responses(n) -> str:
    """``1 response``, ``2,000 responses`` (``n`` a count, int or DuckDB's HUGEINT sum)."""
    n = int(n)
    return f"{n:,} response{'' if n == 1 else 's'}"


def _notes(con, f: Filters, *, bucketed: bool = False, within: tuple[str, list] | None = None) -> list[str]:
    """The report's notes (unpriced and assumed models, tokens not recorded, logged
    costs) over the usage rows ``f`` selects; ``within``: a further SQL condition on
    them and its parameters (``blocks_report``: the shown blocks' rows)."""
    where, params = _where(f)
    if within is not None:
        where, params = f"{where} AND {within[0]}", [*params, *within[1]]
    notes = []
    cost = _cost(f.mode)
    if bucketed:
        _, priced = _BUCKET_COST[f.mode]
        unpriced = con.execute(
            f"SELECT coalesce(model, '(no model)'), sum(responses - {priced}) AS n FROM {_BUCKETS} "
            f"WHERE {where} GROUP BY ALL HAVING n > 0 ORDER BY 1",
            params,
        ).fetchall()
        assumed = con.execute(
            f"SELECT agent, model, sum(responses) FROM {_BUCKETS} WHERE {where} AND model_source = 'assumed' "
            "GROUP BY ALL ORDER BY 1, 2",
            params,
        ).fetchall()
    else:
        unpriced = con.execute(
            f"SELECT coalesce(model, '(no model)'), count(*) FROM usage WHERE {where} AND {cost} IS NULL "
            "GROUP BY ALL ORDER BY 1",
            params,
        ).fetchall()
        assumed = con.execute(
            f"SELECT agent, model, count(*) FROM usage WHERE {where} AND model_source = 'assumed' "
            "GROUP BY ALL ORDER BY 1, 2",
            params,
        ).fetchall()
    if unpriced and f.mode != "display":
        notes.append(
            "no price for "
            + ", ".join(f"{m} ({_responses(n)})" for m, n in unpriced)
            + ": their tokens are counted, their cost is null (add them to prices.toml)"
        )
    elif unpriced:
        notes.append(f"--mode display: {_responses(sum(n for _, n in unpriced))} logged no cost")
    for agent, model, n in assumed:
        notes.append(
            f"{agent}: {_responses(n)} name{'s' if n == 1 else ''} no model; counted as {model}, "
            "that version's default (assumed)"
        )
    # usage rows with a cost but no recorded tokens (Crush, Go opencode, Codebuff: a
    # session's cost; ``schema.TOKENS_UNRECORDED_WHY``): not in the token totals, and no
    # mode prices them
    unrecorded = dict(
        con.execute(
            f"SELECT agent, count(*) FROM usage WHERE {where} AND {_TOKENS_UNKNOWN} GROUP BY ALL ORDER BY 1",
            params,
        ).fetchall()
    )
    for agent, n in unrecorded.items():
        notes.append(tokens_unrecorded_note(agent, n))
    if f.mode == "auto":  # a logged cost wins over list prices (``cost_in_mode``): say whose
        logged = con.execute(
            (
                f"SELECT agent, sum(n_logged) AS n FROM {_BUCKETS} WHERE {where} GROUP BY ALL HAVING n > 0 ORDER BY 1"
                if bucketed
                else f"SELECT agent, count(*) FROM usage WHERE {where} AND logged_cost_usd IS NOT NULL "
                "GROUP BY ALL ORDER BY 1"
            ),
            params,
        ).fetchall()
        for agent, n in logged:
            if not (n := int(n) - unrecorded.get(agent, 0)):
                continue
            notes.append(
                f"{agent}: the cost of {_responses(n)} is the agent's own logged figure, not list "
                "prices (--mode calculate prices them)"
            )
    return notes


#: model name prefixes → the provider whose quota a response counts against
_PROVIDER_PREFIXES = (
    ("claude", "anthropic"),
    ("gpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("codex", "openai"),
    ("chatgpt", "openai"),
    ("gemini", "google"),
    ("grok", "xai"),
)
#: an agent's provider when the model names none (the agent's own default vendor)
_AGENT_PROVIDER = {"claude-code": "anthropic", "codex": "openai", "gemini-cli": "google"}


def provider_of(agent: str | None, model: str | None) -> str:
    """The provider a response's quota window belongs to: from the model's name
    (``claude-…`` Anthropic, ``gpt-…``/``o3``/``codex-…`` OpenAI, ``gemini-…`` Google,
    ``grok-…`` xAI; a ``vendor/model`` name by its model part), else the agent's vendor
    (Claude Code, Codex, Gemini CLI), else the agent's name."""
    m = (model or "").lower().rsplit("/", 1)[-1]
    for prefix, provider in _PROVIDER_PREFIXES:
        if m.startswith(prefix):
            return provider
    return _AGENT_PROVIDER.get(agent or "", agent or "")


def blocks_report(
    con,
    f: Filters,
    *,
    now: dt.datetime | None = None,
    token_limit: str | None = None,
    hours: float = BLOCK_HOURS,
    provider: str | None = None,
) -> Report:
    """5-hour blocks per provider (``provider_of``: a quota window belongs to one
    provider's subscription; a Codex response never moves Claude's block), as
    ccusage's ``blocks``: a block starts at its first response floored to the UTC hour
    and takes that provider's responses until one comes more than ``hours`` after the
    start or after the previous response; a gap of more than ``hours`` gives a gap
    block. Blocks come in order of start. ``provider``: only that provider's blocks.
    ``since``/``until`` keep blocks whose start's local date is within them.
    ``token_limit``: a number or ``max`` (the largest finished block's tokens).
    ``now``: UTC, default the clock."""
    check_timezone(f.timezone)
    now = now or dt.datetime.now(dt.UTC)
    span = dt.timedelta(hours=hours)
    fa = Filters(f.timezone, None, None, f.agents, f.project, f.mode)
    where, params = _where(fa)
    cost = _cost(f.mode)
    if f.since is not None:
        restart = _restart_before(con, where, params, f.since, f.timezone, span)
        if restart is not None:
            where, params = f"{where} AND ts >= ?", [*params, restart]
    rows = con.execute(
        f"SELECT ts, agent, model, input_tokens, output_tokens, "
        f"cache_read_tokens, cache_creation_tokens, {cost}, "
        f"{reasoning_beside_sql()} FROM usage WHERE {where} ORDER BY ts, usage_key",
        params,
    ).fetchall()
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(provider_of(r[1], r[2]), []).append(r)
    blocks: list[Block] = []
    for name, group in groups.items():
        if provider is not None and name != provider:
            continue
        for b in _blocks_of(group, now, span):
            b.provider = name
            blocks.append(b)
    blocks.sort(key=lambda b: (b.start, b.provider))
    tz = ZoneInfo(f.timezone)
    if f.since or f.until:
        blocks = [
            b
            for b in blocks
            if (f.since is None or b.start.astimezone(tz).date() >= f.since)
            and (f.until is None or b.start.astimezone(tz).date() <= f.until)
        ]
    finished = [t for b in blocks if not b.is_gap and not b.is_active and (t := b.total_tokens) is not None]
    max_tokens = max(finished, default=0)
    limit = None
    if token_limit is not None:
        if token_limit.strip().lower() == "max":
            limit = max_tokens or None
        else:
            try:
                limit = int(token_limit.replace(",", "").replace("_", ""))
            except ValueError as e:
                raise UsageError(
                    f"not a token limit: {token_limit!r}", where="--token-limit", hint="give a number or max"
                ) from e
            if limit <= 0:  # a block cannot be held to no or negative tokens (newuser17 F12)
                raise UsageError(
                    f"not a token limit: {token_limit!r}",
                    where="--token-limit",
                    hint="give a number above 0 or max",
                )
    for b in blocks:
        if b.is_active:
            _project(b, now, limit)
    return Report("blocks", f, blocks, _notes(con, fa, within=_shown_rows(blocks, f, provider)))


def _shown_rows(blocks: list[Block], f: Filters, provider: str | None) -> tuple[str, list] | None:
    """The SQL condition that keeps the usage rows of the ``blocks`` shown, for their
    notes (newuser21 N6: `--since 1d` showed one Claude Code block under notes about
    Codex, Crush and OpenCode): their agents, from the first block's first response to
    the last one's last. None: every row (no date nor provider filter)."""
    if f.since is None and f.until is None and provider is None:
        return None
    shown = [b for b in blocks if not b.is_gap and b.first is not None and b.actual_end is not None]
    if not shown:
        return "false", []
    agents = sorted({a for b in shown for a in b.agents})
    first = min(b.first for b in shown if b.first is not None)
    last = max(b.actual_end for b in shown if b.actual_end is not None)
    marks = ", ".join("?" * len(agents))
    return f"ts >= ? AND ts <= ? AND agent IN ({marks})", [first, last, *agents]


#: days before ``since`` first searched for a gap that restarts every block (then all)
_RESTART_LOOKBACK_DAYS = 14


def _restart_before(con, where: str, params: list, since: dt.date, tz: str, span: dt.timedelta):
    """The latest response time ``t`` at or before local midnight of ``since`` whose
    previous response (among the rows ``where`` keeps, every provider) is more than
    ``span`` earlier, or the first row's: None when no row is that old.

    Why it is exact: after such a gap every provider's next response starts a new block
    (its previous one is more than ``span`` before it), so the blocks from ``t`` on are the
    same whether the rows before ``t`` are read or not; the blocks those rows make (and
    the gap block up to ``t``) start before midnight of ``since`` and are filtered out
    anyway. A status line's ``since`` of two days ago then reads days, not the whole
    history (newuser20 F9: 1.3 M usage rows read twice, 8.8 CPU s, 970 MB at 12 GB).
    Searched in the last ``_RESTART_LOOKBACK_DAYS`` days first, then in all rows."""
    midnight = dt.datetime.combine(since, dt.time(0), tzinfo=ZoneInfo(tz))
    gap = f"INTERVAL {int(span.total_seconds())} SECOND"
    for lookback in (dt.timedelta(days=_RESTART_LOOKBACK_DAYS), None):
        lo, lo_params = ("", []) if lookback is None else (" AND ts >= ?", [midnight - lookback])
        got = con.execute(
            f"SELECT max(ts) FROM (SELECT ts, lag(ts) OVER (ORDER BY ts, usage_key) AS prev "
            f"FROM usage WHERE {where} AND ts <= ?{lo}) "
            f"WHERE {'prev IS NULL OR ' if lookback is None else ''}ts - prev > {gap}",
            [*params, midnight, *lo_params],
        ).fetchone()
        if got and got[0] is not None:
            return got[0]
    return None


def _blocks_of(rows: list, now: dt.datetime, span: dt.timedelta) -> list[Block]:
    """The blocks (and gap blocks) of one provider's usage rows, in time order."""
    blocks: list[Block] = []
    cur: list = []
    start = None
    for r in rows:
        ts = r[0]
        if start is not None:
            last = cur[-1][0]
            if ts - start > span or ts - last > span:
                blocks.append(_block(start, cur, now, span))
                if ts - last > span:
                    blocks.append(Block(last + span, ts, None, False, True))
                cur, start = [], None
        if start is None:
            start = ts.replace(minute=0, second=0, microsecond=0)
        cur.append(r)
    if cur:
        assert start is not None  # set with cur's first row
        blocks.append(_block(start, cur, now, span))
    return blocks


def _block(start: dt.datetime, rows: list, now: dt.datetime, span: dt.timedelta) -> Block:
    end = start + span
    last = rows[-1][0]
    b = Block(start, end, last, (now - last) < span and now < end, False, len(rows), first=rows[0][0])
    costs = []
    # per token column, the recorded values' sum; None when no row recorded it (SQL's
    # sum(), as usage_report's rows: "not recorded", never 0)
    sums: list[int | None] = [None] * 4
    # whether an agent that records its cache write has a response here: else a 0 sum
    # is "not recorded" (Codex: ``schema.CACHE_WRITE_UNRECORDED``), as in every report
    # (newuser21 N4: blocks said 0 where daily said -)
    cw_recorded = False
    for _, agent, model, i, o, cr, cc, c, rb in rows:
        for k, v in enumerate((i, o, cr, cc)):
            if v is not None:
                sums[k] = (sums[k] or 0) + v
        cw_recorded = cw_recorded or cc is not None and agent not in CACHE_WRITE_UNRECORDED
        b.reasoning_beside += rb
        if c is not None:
            costs.append(c)
        if model and model not in b.models:
            b.models.append(model)
        if agent not in b.agents:
            b.agents.append(agent)
    b.cost_usd = float(sum(costs)) if costs else None
    if not cw_recorded and not sums[3]:
        sums[3] = None
    b.input_tokens, b.output_tokens, b.cache_read_tokens, b.cache_creation_tokens = sums
    return b


def _project(b: Block, now: dt.datetime, limit: int | None) -> None:
    minutes = (b.actual_end - b.first).total_seconds() / 60 if b.first and b.actual_end else 0
    if minutes <= 0:
        return
    cost = b.cost_usd or 0.0
    tokens = b.total_tokens or 0  # a block of unrecorded tokens burns none that is known
    b.burn_rate = {
        "tokens_per_minute": tokens / minutes,
        "tokens_per_minute_for_indicator": ((b.input_tokens or 0) + (b.output_tokens or 0)) / minutes,
        "cost_per_hour": cost / minutes * 60,
    }
    remaining = round((b.end - now).total_seconds() / 60)
    total = round(tokens + b.burn_rate["tokens_per_minute"] * remaining)
    b.projection = {
        "total_tokens": total,
        "cost_usd": round(cost + b.burn_rate["cost_per_hour"] / 60 * remaining, 2),
        "remaining_minutes": remaining,
    }
    if limit:
        b.limit_status = {
            "limit": limit,
            "projected_tokens": total,
            "percent": total / limit * 100,
            "status": "exceeds" if total > limit else "warning" if total > limit * WARNING_SHARE else "ok",
        }


def tools_report(con, f: Filters) -> Report:
    """Per agent and tool (view ``tool_calls`` over store and archive, rewound entries
    left out), ordered by calls descending. The view has no time: ``since``/``until``
    and ``project`` are applied by recomputing over ``history``."""
    if f.since or f.until or f.project:
        check_timezone(f.timezone)
        sel, params = _where(f, "true")
        sql = f"""
            WITH h AS (SELECT * FROM history WHERE {sel}),
            calls AS (SELECT agent, session_id, native_id, tool_name FROM h WHERE kind = 'tool_call'),
            fc AS (SELECT * FROM calls WHERE native_id IS NOT NULL QUALIFY row_number()
                   OVER (PARTITION BY agent, session_id, native_id ORDER BY tool_name) = 1),
            res AS (SELECT r.agent, coalesce(r.tool_name, fc.tool_name) AS tool_name, r.is_error,
                           r.text_bytes, r.token_estimate FROM h r LEFT JOIN fc
                      ON fc.agent = r.agent AND fc.session_id = r.session_id AND fc.native_id = r.native_id
                    WHERE r.kind = 'tool_result'),
            c AS (SELECT agent, tool_name, count(*) AS calls, count(DISTINCT session_id) AS sessions
                  FROM calls GROUP BY ALL),
            r AS (SELECT agent, tool_name, count(*) AS results, count(*) FILTER (WHERE is_error) AS errors,
                         sum(text_bytes) AS output_bytes, sum(token_estimate) AS output_tokens
                  FROM res GROUP BY ALL)
            SELECT agent, tool_name, coalesce(calls, 0), coalesce(sessions, 0), coalesce(results, 0),
                   coalesce(errors, 0), CASE WHEN results > 0 THEN errors / results END,
                   coalesce(output_bytes, 0), coalesce(output_tokens, 0)
            FROM c FULL OUTER JOIN r USING (agent, tool_name)"""
    else:
        params = list(f.agents)
        sel = f"WHERE agent IN ({', '.join('?' for _ in f.agents)})" if f.agents else ""
        sql = (
            "SELECT agent, tool_name, calls, sessions, results, errors, error_rate, output_bytes, "
            f"output_tokens FROM tool_calls {sel}"
        )
    rows = [
        ToolRow(a, t, int(c), int(s), int(r), int(e), er, int(ob), int(ot))
        for a, t, c, s, r, e, er, ob, ot in con.execute(sql, params).fetchall()
    ]
    rows.sort(key=lambda r: (-r.calls, -r.results, r.agent, r.tool_name or ""))
    return Report("tools", f, rows, [])


def totals(rows: Sequence) -> dict:
    """The token and cost sums of usage rows or blocks: ``input_tokens``,
    ``output_tokens``, ``cache_read_tokens``, ``cache_creation_tokens``,
    ``total_tokens`` (int: the rows' recorded tokens; None when no row recorded any),
    ``cost_usd`` (USD, None when no row has a cost), and ``responses``. A gap block
    (no response) adds to no sum: its 0 tokens are not a recorded 0."""
    t: dict = {}
    spans = [r for r in rows if not getattr(r, "is_gap", False)]
    for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens"):
        known = [v for r in spans if (v := getattr(r, k)) is not None]
        t[k] = sum(known) if known or not spans else None
    costs = [r.cost_usd for r in rows if r.cost_usd is not None]
    t["cost_usd"] = float(sum(costs)) if costs else None
    t["responses"] = sum(r.responses for r in rows)
    return t


def statusline_figures(con, tz: str, session_id: str | None, *, now: dt.datetime | None = None) -> dict:
    """What ``ctxkeep statusline`` shows, from DuckDB: ``today_cost_usd`` (the local
    day of ``now`` in ``tz``, auto mode, every agent), ``block`` (the active 5-hour
    block: ``start``/``end`` ISO UTC, ``cost_usd``, ``total_tokens`` (None: not recorded), ``cost_per_hour``;
    None without one) and ``session`` (``context_tokens``: the input side of the
    session's last response = input + cache read + cache creation; ``model``;
    ``cost_usd``: auto mode, the session and the sub-agents it started; None when
    unknown). Raises CtxkeepError only through ``check_timezone``."""
    check_timezone(tz)
    now = now or dt.datetime.now(dt.UTC)
    today = now.astimezone(ZoneInfo(tz)).date()
    r = usage_report(con, "daily", Filters(tz, today, today))
    cost = totals(r.rows)["cost_usd"] if r.rows else 0.0
    recent = Filters(tz, today - dt.timedelta(days=2), None)
    # the statusline is Claude Code's: its block is Anthropic's quota window
    b = next((x for x in blocks_report(con, recent, now=now, provider="anthropic").rows if x.is_active), None)
    block = None
    if b is not None:
        rate = b.burn_rate["cost_per_hour"] if b.burn_rate else None
        block = {
            "start": b.start.isoformat(),
            "end": b.end.isoformat(),
            "cost_usd": b.cost_usd,
            "total_tokens": b.total_tokens,
            "cost_per_hour": rate,
        }
    session = None
    if session_id:
        got = con.execute(
            "SELECT coalesce(input_tokens, 0) + coalesce(cache_read_tokens, 0) + "
            "coalesce(cache_creation_tokens, 0), model FROM usage WHERE session_id = ? "
            "ORDER BY ts DESC, usage_key DESC LIMIT 1",
            [session_id],
        ).fetchall()
        if got:
            spent = con.execute(
                "SELECT sum(cost_usd) FROM usage WHERE session_id = ? OR session_id IN "
                "(SELECT DISTINCT session_id FROM history WHERE parent_session_id = ?)",  # not the sessions view: it aggregates every entry
                [session_id, session_id],
            ).fetchall()[0][0]
            session = {
                "context_tokens": int(got[0][0]),
                "model": got[0][1],
                "cost_usd": float(spent) if spent is not None else None,
            }
    return {"today_cost_usd": cost, "block": block, "session": session}


__all__ = [
    "MODES",
    "REPORTS",
    "SCHEMA",
    "Block",
    "Filters",
    "Report",
    "ToolRow",
    "UsageRow",
    "blocks_report",
    "check_timezone",
    "local_timezone",
    "open_store",
    "parse_date",
    "statusline_figures",
    "tools_report",
    "totals",
    "usage_report",
]

"""Sessions: how the context grew, and what the tools did (a marimo notebook).

Open it with `marimo edit sessions.py` (or `marimo export ipynb sessions.py` for
Jupyter); `ctxkeep report html DIR` runs it as a script. Parameters as in usage.py.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="ctxkeep · sessions")


@app.cell
def _():
    import altair as alt
    import marimo as mo
    import polars as pl

    from ctxkeep.render.nbkit import open_page, page_params, show, table

    return alt, mo, open_page, page_params, pl, show, table


@app.cell
def _(page_params):
    store, timezone, since, until = page_params()
    return since, store, timezone, until


@app.cell
def _(open_page, since, store, timezone, until):
    st = open_page(store, timezone, since, until)
    st.header(
        "Sessions: how the context grew, and what the tools did",
        "The largest sessions' context curves with their compactions, and the tool calls' mix and error rates "
        "(rewound entries left out; archived ones count).",
    )
    return (st,)


@app.cell
def _(mo, show, st, table):
    largest = st.q(f"""
        SELECT agent, session_id, project_dir, {st.local("started")} AS started, entries, compactions,
               final_context_estimate, largest_context_tokens
        FROM sessions WHERE final_context_estimate > 0 AND {st.in_period("started")}
        ORDER BY final_context_estimate DESC, session_id LIMIT 6""")
    _lines = [
        f"- **{r['agent']} {r['session_id']}**: {r['entries']:,} entries, all texts ~{r['final_context_estimate']:,} "
        f"tokens, {r['compactions']} compaction{'s' * (r['compactions'] != 1)}"
        for r in largest.iter_rows(named=True)
    ]
    show(
        mo.md(
            "## The largest sessions\nBy the estimated tokens of all their texts, among sessions started in the period; "
            "`largest_context_tokens` is the largest input side one API response logged.\n\n"
            + "\n".join(_lines)
        ),
        table(largest, empty="No session started in this period."),
    )
    return (largest,)


@app.cell
def _():
    # the context curve of a session is drawn from at most GROWTH_POINTS of its entries
    GROWTH_POINTS = 1500
    return (GROWTH_POINTS,)


@app.cell
def _(GROWTH_POINTS, alt, largest, mo, pl, show, st):
    _g = st.q(
        """
        SELECT g.agent, g.session_id, g.kind, g.ts, coalesce(g.token_estimate, 0) AS tokens,
               row_number() OVER (PARTITION BY g.agent, g.session_id ORDER BY g.cumulative_tokens, g.ts) AS n
        FROM context_growth g JOIN growth_keys k USING (agent, session_id)""",
        growth_keys=largest.select("agent", "session_id"),
    )
    # the context an agent carries restarts at a compaction: its summary begins the new context
    growth = (
        _g.sort("agent", "session_id", "n")
        .with_columns(
            segment=(pl.col("kind") == "summary").cast(pl.Int32).cum_sum().over("agent", "session_id")
        )
        .with_columns(context=pl.col("tokens").cum_sum().over("agent", "session_id", "segment"))
        .with_columns(session=pl.col("agent") + " " + pl.col("session_id").str.slice(0, 12))
    )
    _logged = st.q(
        f"""
        SELECT u.agent, u.session_id, {st.local("u.ts")} AS local_ts,
               coalesce(u.input_tokens, 0) + coalesce(u.cache_read_tokens, 0) + coalesce(u.cache_creation_tokens, 0)
                 AS context
        FROM usage u JOIN growth_keys k USING (agent, session_id) WHERE u.ts IS NOT NULL""",
        growth_keys=largest.select("agent", "session_id"),
    ).with_columns(session=pl.col("agent") + " " + pl.col("session_id").str.slice(0, 12))
    # drawn: every k-th entry of a session (k keeps it within GROWTH_POINTS), its first and
    # last, and each compaction: marimo draws at most 20,000 rows a chart, and the six
    # largest sessions of a 2 GB store hold ~100,000 entries
    _key = ["agent", "session_id"]
    _k = (pl.len().over(_key) / GROWTH_POINTS).ceil().cast(pl.Int64).clip(1)
    growth_drawn = growth.filter(
        (pl.col("n") % _k == 0)
        | (pl.col("n") == 1)
        | (pl.col("n") == pl.col("n").max().over(_key))
        | (pl.col("kind") == "summary")
    )
    _est = (
        alt.Chart(growth_drawn, title="Context carried, entry by entry (estimate; resets at each compaction)")
        .mark_line()
        .encode(
            alt.X("n:Q", title="entry"),
            alt.Y("context:Q", title="tokens (estimated)"),
            alt.Color("session:N", title="session"),
            tooltip=["session", "n", "context", "kind"],
        )
        .properties(width=720, height=260)
    )
    _marks = (
        alt.Chart(growth.filter(pl.col("kind") == "summary"))
        .mark_point(shape="cross", size=120, filled=True)
        .encode(alt.X("n:Q"), alt.Y("context:Q"), alt.Color("session:N"))
    )
    _log = (
        alt.Chart(_logged, title=f"Input side per API response (logged), local time ({st.tz})")
        .mark_line(point=True)
        .encode(
            alt.X("local_ts:T", title=f"time ({st.tz})"),
            alt.Y("context:Q", title="tokens (logged)"),
            alt.Color("session:N", title="session"),
            tooltip=["session", "local_ts:T", "context"],
        )
        .properties(width=720, height=260)
    )
    show(
        mo.md(
            "## Context growth\nTop: the estimated tokens carried, which restart at a compaction (a cross marks "
            "its summary). Bottom: what each API response logged as its input side, the real context fill."
        ),
        (_est + _marks) if growth.height else mo.md("*No session started in this period.*"),
        _log if _logged.height else mo.md("*These sessions logged no API usage.*") if growth.height else None,
    )
    return growth, growth_drawn


@app.cell
def _(alt, mo, pl, show, st, table):
    tools = st.q(f"""
        WITH s AS (SELECT agent, session_id FROM sessions WHERE {st.in_period("started")}),
        h AS (SELECT h.* FROM history h JOIN s USING (agent, session_id)),
        calls AS (SELECT agent, session_id, native_id, tool_name FROM h WHERE kind = 'tool_call'),
        named AS (SELECT agent, session_id, native_id, min(tool_name) AS tool_name FROM calls
                  WHERE native_id IS NOT NULL GROUP BY ALL),
        results AS (SELECT r.agent, coalesce(r.tool_name, c.tool_name) AS tool_name, r.is_error FROM h r
                    LEFT JOIN named c USING (agent, session_id, native_id) WHERE r.kind = 'tool_result')
        SELECT agent, coalesce(tool_name, '(unnamed)') AS tool_name, coalesce(c.calls, 0) AS calls,
               coalesce(r.results, 0) AS results, coalesce(r.errors, 0) AS errors
        FROM (SELECT agent, tool_name, count(*) AS calls FROM calls GROUP BY ALL) c
        FULL JOIN (SELECT agent, tool_name, count(*) AS results, count(*) FILTER (WHERE is_error) AS errors
                   FROM results GROUP BY ALL) r USING (agent, tool_name)""")
    by_tool = (
        tools.group_by("tool_name")
        .agg(pl.col("calls", "results", "errors").sum())
        .with_columns(error_rate=pl.when(pl.col("results") > 0).then(pl.col("errors") / pl.col("results")))
        .sort(["calls", "tool_name"], descending=[True, False])
    )
    _top = by_tool.head(15)["tool_name"].to_list()
    _drawn = tools.filter(pl.col("tool_name").is_in(_top))
    _mix = (
        alt.Chart(_drawn, title="Tool calls per tool and agent (15 most called)")
        .mark_bar()
        .encode(
            # at most 8 ticks, none overlapping (newuser23 F12: "480500" at the end)
            alt.X(
                "sum(calls):Q", title="calls", axis=alt.Axis(tickCount=8, labelOverlap=True, labelFlush=True)
            ),
            alt.Y("tool_name:N", sort=_top, title=None),
            alt.Color("agent:N", scale=st.colour_of(_drawn)),
            tooltip=["agent", "tool_name", "calls", "errors"],
        )
        .properties(width=640, height=alt.Step(18))
    )
    _lines = [
        f"- **{r['tool_name']}**: {r['calls']:,} calls, {r['errors']:,} errors in {r['results']:,} results"
        for r in by_tool.head(5).iter_rows(named=True)
    ]
    show(
        mo.md("## Tool-call mix\nIn sessions started in the period.\n\n" + "\n".join(_lines)),
        _mix if _top else None,
        table(by_tool.head(25), empty="No tool calls in this period.", formats={"error_rate": "{:.1%}"}),
    )
    return by_tool, tools


@app.cell
def _(alt, by_tool, mo, pl, show, st, table, tools):
    _rated = (
        by_tool.filter(pl.col("results") >= 3)
        .sort(["error_rate", "results"], descending=[True, True])
        .head(20)
    )
    per_agent_errors = (
        tools.group_by("agent")
        .agg(pl.col("calls", "results", "errors").sum())
        .with_columns(error_rate=pl.when(pl.col("results") > 0).then(pl.col("errors") / pl.col("results")))
        .sort("agent")
    )
    _chart = (
        alt.Chart(
            per_agent_errors.filter(pl.col("results") > 0),
            title="Share of tool results that are errors, per agent",
        )
        .mark_bar()
        .encode(
            alt.X("error_rate:Q", title="errors / results", axis=alt.Axis(format="%")),
            alt.Y("agent:N", title=None),
            alt.Color("agent:N", scale=st.colour, legend=None),
            tooltip=["agent", "results", "errors", alt.Tooltip("error_rate:Q", format=".1%")],
        )
        .properties(width=480, height=alt.Step(22))
    )
    show(
        mo.md(
            "## Tool error rates\nResults the agents flagged as errors: per tool (at least 3 results) and per agent."
        ),
        table(
            _rated, empty="No tool with 3 results or more in this period.", formats={"error_rate": "{:.1%}"}
        ),
        _chart if per_agent_errors.filter(pl.col("results") > 0).height else None,
        table(per_agent_errors, empty="No tool results in this period.", formats={"error_rate": "{:.1%}"}),
    )
    return


if __name__ == "__main__":
    from ctxkeep.render.nbkit import run_script

    raise SystemExit(run_script("sessions", app))

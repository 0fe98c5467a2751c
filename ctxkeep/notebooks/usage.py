"""Usage: where the tokens and the money went (a marimo notebook).

Open it with `marimo edit usage.py` (or `marimo export ipynb usage.py` for Jupyter);
`ctxkeep report html DIR` runs it as a script and writes usage.html. Parameters
(`--store`, `--timezone`, `--since`, `--until` after `--`, or `app.run(defs=...)`):
the ctxkeep home ("" = $CTXKEEP_HOME or the platform data dir), an IANA zone, and
the first and last local day (YYYY-MM-DD, inclusive; "" = open).
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="ctxkeep · usage")


@app.cell
def _():
    import altair as alt
    import marimo as mo
    import polars as pl

    from ctxkeep.render.nbkit import grain, open_page, page_params, show, table

    return alt, grain, mo, open_page, page_params, pl, show, table


@app.cell
def _(page_params):
    store, timezone, since, until = page_params()
    return since, store, timezone, until


@app.cell
def _(open_page, since, store, timezone, until):
    st = open_page(store, timezone, since, until)
    st.header(
        "Where the tokens and the money went",
        "Tokens as the agents logged them (each API response counted once) and their cost in USD "
        "(list prices at each response's own time, or the cost the agent logged). "
        "`total` = input + output + cache read + cache write + the reasoning an agent logs beside "
        "its output (Gemini CLI's thoughts).",
    )
    return (st,)


@app.cell
def _(pl, st):
    from ctxkeep.schema import CACHE_WRITE_UNRECORDED as _unrec
    from ctxkeep.schema import reasoning_beside_sql as _beside

    # an agent that logs no cache write (Codex, Gemini CLI): its 0 is "not recorded"
    # (null, shown "-"), as in `ctxkeep report` (newuser21 N4: 0 here, - there)
    _agents = ", ".join(f"'{a}'" for a in sorted(_unrec))
    usage = st.q(f"""
        SELECT agent, model, model_source, CAST({st.local("ts")} AS DATE) AS day, {st.local("ts")} AS local_ts,
               session_id, input_tokens, output_tokens, cache_read_tokens,
               CASE WHEN agent IN ({_agents}) AND cache_creation_tokens = 0 THEN NULL
                    ELSE cache_creation_tokens END AS cache_creation_tokens,
               CASE WHEN input_tokens IS NULL AND output_tokens IS NULL AND cache_read_tokens IS NULL
                         AND cache_creation_tokens IS NULL THEN NULL  -- not recorded by the agent
                    ELSE coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(cache_read_tokens, 0)
                         + coalesce(cache_creation_tokens, 0) + {_beside()} END AS total_tokens,
               cost_usd, cost_source
        FROM usage WHERE {st.in_period("ts")}""")
    TOK = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens"]
    # a sum of the recorded tokens; null when no response recorded any (Crush, Codebuff:
    # a logged cost only, "not recorded by the agent" as in `ctxkeep report`)
    SUMS = [pl.when(pl.col(c).count() > 0).then(pl.col(c).sum()).alias(c) for c in TOK]
    per_agent = (
        usage.group_by("agent")
        .agg(
            pl.len().alias("responses"),
            *SUMS,
            pl.col("cost_usd").sum().alias("cost_usd"),
            pl.col("cost_usd").is_null().sum().alias("unpriced"),
        )
        .sort("total_tokens", descending=True, nulls_last=True)
    )
    return SUMS, TOK, per_agent, usage


@app.cell
def _(mo, per_agent, show, st, table):
    _lines = []
    for _r in per_agent.iter_rows(named=True):
        _cost = f"${_r['cost_usd']:,.2f}" if _r["responses"] > _r["unpriced"] else "cost unknown"
        _tok = (
            "tokens not recorded by the agent"
            if _r["total_tokens"] is None
            else f"{_r['total_tokens']:,} tokens"
        )
        _lines.append(
            f"- **{_r['agent']}**: {_tok} in {_r['responses']:,} "
            f"response{'s' * (_r['responses'] != 1)}, {_cost}"
        )
    _total = (
        f"**All agents: {per_agent['total_tokens'].sum():,} tokens, ${per_agent['cost_usd'].sum() or 0:,.2f}**"
        if per_agent.height
        else ""
    )
    _none = (
        ""
        if per_agent.height
        else f"**No usage in this period** ({st.window.label()}): no API response was logged in it."
    )
    show(
        mo.md("## Totals per agent\n\n" + "\n".join(_lines) + ("\n\n" + _total if _total else "") + _none),
        table(
            per_agent,
            empty="No API responses in this period.",
            formats={"cost_usd": "${:,.2f}"},
        ),
    )
    return


@app.cell
def _(mo, pl, usage):
    _notes = []
    _unpriced = (
        usage.filter(pl.col("cost_usd").is_null() & pl.col("model").is_not_null())["model"].unique().sort()
    )
    if _unpriced.len():
        _notes.append(
            "No price known for "
            + ", ".join(_unpriced)
            + ": their tokens count, their cost is unknown (not 0)."
        )
    _nomodel = usage.filter(pl.col("model").is_null()).height
    if _nomodel:
        _notes.append(f"{_nomodel:,} responses name no model: cost unknown.")
    _assumed = usage.filter(pl.col("model_source") == "assumed")["model"].unique().sort()
    if _assumed.len():
        _notes.append(
            "Assumed model (the agent version's documented default; the file names none): "
            + ", ".join(_assumed)
            + "."
        )
    mo.md("\n".join(f"- {n}" for n in _notes) or ("Every response is priced." if usage.height else ""))
    return


@app.cell
def _(alt, grain, mo, pl, show, st, usage):
    _u = usage.filter(pl.col("day").is_not_null())
    _every, unit = grain(_u["day"].min(), _u["day"].max())
    periods = _u.with_columns(period=pl.col("day").dt.truncate(_every))
    _daily = periods.group_by("period", "agent").agg(
        (pl.col("total_tokens").sum() / 1e6).alias("million_tokens"),
        pl.col("cost_usd").sum().alias("cost_usd"),
    )
    _tu = {"day": "yearmonthdate", "week": "yearweek", "month": "yearmonth"}[unit]
    _x = alt.X(
        f"{_tu}(period):T", title=f"local {unit} ({st.tz})", axis=alt.Axis(format="%Y-%m-%d", labelAngle=-40)
    )
    _colour = alt.Color("agent:N", scale=st.colour_of(_daily), title="agent")
    _costed = _daily.filter(pl.col("cost_usd").is_not_null())
    tokens_chart = (
        alt.Chart(_daily, title=f"Tokens per {unit} and agent")
        .mark_bar()
        .encode(
            _x,
            alt.Y("sum(million_tokens):Q", title="million tokens"),
            _colour,
            tooltip=["agent", "period:T", "million_tokens"],
        )
        .properties(width=720, height=260)
    )
    cost_chart = (
        alt.Chart(_costed, title=f"Cost per {unit} and agent (USD)")
        .mark_bar()
        .encode(
            _x,
            alt.Y("sum(cost_usd):Q", title="USD"),
            alt.Color("agent:N", scale=st.colour_of(_costed), title="agent"),
            tooltip=["agent", "period:T", "cost_usd"],
        )
        .properties(width=720, height=260)
    )
    show(
        mo.md(
            f"## Tokens and cost over time\nBars per local {unit}, on a time axis (gaps are days without use)."
        ),
        tokens_chart if _daily.height else mo.md("*No usage in this period.*"),
        cost_chart if _daily.height else None,
    )
    return periods, unit


@app.cell
def _(SUMS, mo, pl, show, table, usage):
    per_model = (
        usage.group_by("agent", "model")
        .agg(
            pl.len().alias("responses"),
            *SUMS,
            pl.col("cost_usd").sum(),
        )
        .sort("cost_usd", descending=True, nulls_last=True)
    )
    show(
        mo.md("## Per model\nUSD; a model without a price shows no cost (see the notes above)."),
        table(per_model, empty="No API responses in this period.", formats={"cost_usd": "${:,.2f}"}),
    )
    return (per_model,)


@app.cell
def _(alt, mo, periods, pl, show, st, table, unit, usage):
    _inside = (
        pl.col("input_tokens").fill_null(0)
        + pl.col("cache_read_tokens").fill_null(0)
        + pl.col("cache_creation_tokens").fill_null(0)
    )
    cache = (
        usage.group_by("agent")
        .agg(
            pl.col("cache_read_tokens").fill_null(0).sum().alias("cache_read"),
            _inside.sum().alias("input_side"),
        )
        .filter(pl.col("input_side") > 0)
        .with_columns(ratio=pl.col("cache_read") / pl.col("input_side"))
        .sort("ratio", descending=True)
    )
    _over = (
        periods.group_by("period", "agent")
        .agg(
            pl.col("cache_read_tokens").fill_null(0).sum().alias("cache_read"),
            _inside.sum().alias("input_side"),
        )
        .filter(pl.col("input_side") > 0)
        .with_columns(ratio=pl.col("cache_read") / pl.col("input_side"))
        .sort("period")
    )
    _chart = (
        alt.Chart(_over, title=f"Cache hit ratio per {unit}, one line per agent")
        .mark_line(point=True)
        .encode(
            alt.X(
                "period:T", title=f"local {unit} ({st.tz})", axis=alt.Axis(format="%Y-%m-%d", labelAngle=-40)
            ),
            alt.Y(
                "ratio:Q",
                title="share of input from cache",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            alt.Color("agent:N", scale=st.colour_of(_over)),
            tooltip=["agent", "period:T", alt.Tooltip("ratio:Q", format=".1%")],
        )
        .properties(width=720, height=240)
    )
    show(
        mo.md(
            "## Cache hit ratio\nThe share of the input side read from the prompt cache: "
            "cache read / (input + cache read + cache write), per agent."
        ),
        _chart if _over.height else None,
        table(cache, empty="No input tokens logged in this period.", formats={"ratio": "{:.1%}"}),
    )
    return (cache,)


@app.cell
def _(alt, mo, pl, show, st, table):
    _s = st.q(f"""
        SELECT agent, session_id, parent_session_id, project_dir, title, {st.local("started")} AS started,
               coalesce(cost_usd, 0) AS cost_usd, cost_usd IS NULL AS unpriced, coalesce(total_tokens, 0) AS total_tokens
        FROM sessions WHERE {st.in_period("started")}""")
    # a sub-agent's cost counts in its parent's (when the parent is stored)
    _ids = set(zip(_s["agent"], _s["session_id"], strict=True))
    _root = [
        p if p and (a, p) in _ids else s
        for a, s, p in _s.select("agent", "session_id", "parent_session_id").iter_rows()
    ]
    _rolled = (
        _s.with_columns(root=pl.Series("root", _root, dtype=pl.String))
        .group_by("agent", "root")
        .agg(
            pl.col("cost_usd").sum(),
            pl.col("total_tokens").sum(),
            (pl.col("session_id") != pl.col("root")).sum().alias("sub_agents"),
            pl.col("unpriced").all(),
        )
    )
    costly = (
        _rolled.join(
            _s.select("agent", pl.col("session_id").alias("root"), "title", "project_dir", "started"),
            on=["agent", "root"],
            how="left",
        )
        .filter(~pl.col("unpriced"))
        .sort(["cost_usd", "root"], descending=[True, False])
        .head(15)
        .rename({"root": "session_id"})
        .select("agent", "session_id", "title", "started", "sub_agents", "total_tokens", "cost_usd")
    )
    _label = costly.with_columns(
        label=pl.col("agent")
        + " · "
        + pl.col("title").fill_null(pl.col("session_id")).str.slice(0, 50)
        + pl.when(pl.col("sub_agents") > 0)
        .then(pl.format(" (+{} sub-agents)", "sub_agents"))
        .otherwise(pl.lit(""))
    )
    _chart = (
        alt.Chart(_label, title="The costliest sessions, sub-agents counted in their parent")
        .mark_bar()
        .encode(
            alt.X("cost_usd:Q", title="USD"),
            alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=420)),
            alt.Color("agent:N", scale=st.colour_of(_label)),
            tooltip=["agent", "session_id", "sub_agents", alt.Tooltip("cost_usd:Q", format="$,.2f")],
        )
        .properties(width=560, height=alt.Step(18))
    )
    _top = costly.row(0, named=True) if costly.height else None
    show(
        mo.md(
            "## The costliest sessions\nSessions started in the period, by cost (USD); a sub-agent's cost is added to its parent's."
        ),
        _chart if costly.height else None,
        mo.md(f"Costliest session: **{_top['agent']} {_top['session_id']} ${_top['cost_usd']:,.2f}**")
        if _top
        else None,
        table(
            costly.drop("title"),
            empty="No priced session started in this period.",
            formats={"cost_usd": "${:,.2f}"},
        ),
    )
    return (costly,)


@app.cell
def _(alt, mo, pl, show, st, usage):
    _act = (
        usage.filter(pl.col("local_ts").is_not_null())
        .with_columns(
            weekday=pl.col("local_ts").dt.strftime("%a"),
            wd=pl.col("local_ts").dt.weekday(),
            hour=pl.col("local_ts").dt.hour(),
        )
        .group_by("weekday", "wd", "hour")
        .agg(pl.len().alias("responses"))
    )
    _heat = (
        alt.Chart(_act, title=f"Activity: API responses per weekday and hour ({st.tz})")
        .mark_rect()
        .encode(
            alt.X("hour:O", title="hour of day"),
            alt.Y("weekday:N", sort=["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], title=None),
            alt.Color("responses:Q", scale=alt.Scale(scheme="blues")),
            tooltip=["weekday", "hour", "responses"],
        )
        .properties(width=640, height=200)
    )
    show(mo.md("## When the agents worked"), _heat if _act.height else mo.md("*No usage in this period.*"))
    return


if __name__ == "__main__":
    from ctxkeep.render.nbkit import run_script

    raise SystemExit(run_script("usage", app))

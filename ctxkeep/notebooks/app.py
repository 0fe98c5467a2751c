"""The ctxkeep app (`ctxkeep ui`; or `marimo run app.py -- --store HOME`): Overview,
Sessions (→ a session's transcript), Search (→ the transcript at the hit) and Store,
over the DuckDB model and the service layer. Read-only.

URL parameters open a view: `?tab=Sessions&session=ID&entry=ENTRY` (a transcript, at
an entry), `?tab=Search&q=WORDS`.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="ctxkeep")


@app.cell
def _():
    import datetime as dt
    import urllib.parse

    import altair as alt
    import marimo as mo
    import polars as pl

    from ctxkeep.render import transcript as tr
    from ctxkeep.render.nbkit import Store, grain, no_store
    from ctxkeep.service import search as svc_search
    from ctxkeep.service import transcripts as svc_tr
    from ctxkeep.timeutil import local_timezone

    return Store, alt, dt, grain, local_timezone, mo, no_store, pl, svc_search, svc_tr, tr, urllib


@app.cell
def _(mo):
    _args = mo.cli_args()
    store = str(_args.get("store") or "")
    return (store,)


@app.cell
def _(mo):
    qp = mo.query_params()
    return (qp,)


@app.cell
def _(Store, local_timezone, mo, store):
    try:
        st = Store(store, "UTC", "", "")
    except Exception as _e:
        mo.stop(
            True,
            mo.md(
                f"# ctxkeep\n\n**Nothing to show yet:** {_e.args[0] if _e.args else _e}.\n\n"
                "Run `ctxkeep ingest` (it finds the agents' session files on this machine), then reload this page."
            ),
        )
    local_tz = local_timezone()
    return local_tz, st


@app.cell
def _(pl, st):
    # every API response with its session's project (times UTC, naive)
    usage_all = st.q("""
        SELECT u.agent, u.model, u.session_id, s.project_dir, u.ts AT TIME ZONE 'UTC' AS ts,
               coalesce(u.input_tokens, 0) + coalesce(u.output_tokens, 0) + coalesce(u.cache_read_tokens, 0)
                 + coalesce(u.cache_creation_tokens, 0) AS total_tokens,
               u.cost_usd
        FROM usage u LEFT JOIN sessions s USING (agent, session_id) WHERE u.ts IS NOT NULL""")
    sessions_all = st.q("""
        SELECT agent, session_id, parent_session_id, project_dir, started AT TIME ZONE 'UTC' AS started,
               ended AT TIME ZONE 'UTC' AS ended, messages, tool_calls, total_tokens, cost_usd,
               largest_context_tokens, final_context_estimate
        FROM sessions""")
    projects = sorted({p for p in sessions_all["project_dir"].to_list() if p})
    first_day = sessions_all["started"].min()
    last_day = sessions_all["ended"].max()
    _ = pl
    return first_day, last_day, projects, sessions_all, usage_all


@app.cell
def _(dt, first_day, last_day, local_tz, mo, projects, st):
    _zones = sorted(
        {
            local_tz,
            "UTC",
            "Europe/Berlin",
            "Europe/London",
            "America/New_York",
            "America/Los_Angeles",
            "Asia/Tokyo",
        }
    )
    f_agents = mo.ui.multiselect(st.agents, label="agents (none: all)")
    f_project = mo.ui.dropdown(["(all)", *projects], value="(all)", label="project")
    _start = first_day.date() if first_day else dt.date.today()
    _stop = last_day.date() if last_day else dt.date.today()
    f_days = mo.ui.date_range(start=_start, stop=_stop, value=(_start, _stop), label="days")
    f_tz = mo.ui.dropdown(_zones, value=local_tz, label="time zone")
    filters = mo.hstack([f_agents, f_project, f_days, f_tz], justify="start", gap=1.5, wrap=True)
    return f_agents, f_days, f_project, f_tz, filters


@app.cell
def _(f_agents, f_days, f_project, f_tz, pl, sessions_all, usage_all):
    tz = f_tz.value

    def _keep(df, when: str):
        df = df.with_columns(pl.col(when).dt.replace_time_zone("UTC").dt.convert_time_zone(tz).alias("local"))
        if f_agents.value:
            df = df.filter(pl.col("agent").is_in(list(f_agents.value)))
        if f_project.value and f_project.value != "(all)":
            df = df.filter(pl.col("project_dir") == f_project.value)
        lo, hi = f_days.value
        return df.filter(pl.col("local").dt.date().is_between(lo, hi))

    usage = _keep(usage_all, "ts")
    sessions = _keep(sessions_all, "started")
    return sessions, tz, usage


@app.cell
def _(alt, dt, grain, mo, pl, sessions, st, tz, usage):
    _colour = alt.Color("agent:N", scale=st.colour)
    if usage.height == 0:
        overview = mo.md(
            "*No API usage matches these filters.*"
            if st.agents
            else "*No sessions yet: run `ctxkeep ingest`, then reload.*"
        )
    else:
        _every, _unit = grain(usage["local"].min().date(), usage["local"].max().date())
        _tu = {"day": "yearmonthdate", "week": "yearweek", "month": "yearmonth"}[_unit]
        _days = (
            usage.with_columns(day=pl.col("local").dt.date().dt.truncate(_every))
            .group_by("day", "agent")
            .agg(pl.col("total_tokens").sum(), pl.col("cost_usd").sum())
        )
        _tokens = (
            alt.Chart(_days, title=f"Tokens per {_unit} ({tz})").mark_bar()
            .encode(alt.X(f"{_tu}(day):T", title=_unit), alt.Y("sum(total_tokens):Q", title="tokens"), _colour,
                    tooltip=["agent", "day:T", "total_tokens"])
            .properties(width=520, height=220)
        )  # fmt: skip
        _cost = (
            alt.Chart(_days, title=f"Cost per {_unit} (USD)").mark_bar()
            .encode(alt.X(f"{_tu}(day):T", title=_unit), alt.Y("sum(cost_usd):Q", title="USD"), _colour,
                    tooltip=["agent", "day:T", alt.Tooltip("cost_usd:Q", format="$,.2f")])
            .properties(width=520, height=220)
        )  # fmt: skip
        _proj = (
            usage.group_by("project_dir", "agent").agg(pl.col("cost_usd").sum())
            .with_columns(project=pl.col("project_dir").fill_null("(none)").str.slice(-48))
        )  # fmt: skip
        _per_project = (
            alt.Chart(_proj, title="Cost per project (USD)").mark_bar()
            .encode(alt.X("sum(cost_usd):Q", title="USD"), alt.Y("project:N", sort="-x", title=None), _colour)
            .properties(width=520, height=alt.Step(16))
        )  # fmt: skip
        _heat = (
            alt.Chart(
                usage.with_columns(weekday=pl.col("local").dt.strftime("%a"), hour=pl.col("local").dt.hour())
                .group_by("weekday", "hour").agg(pl.len().alias("responses")),
                title=f"Activity: responses per weekday and hour ({tz})",
            )
            .mark_rect()
            .encode(alt.X("hour:O"), alt.Y("weekday:N", sort=["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]),
                    alt.Color("responses:Q", scale=alt.Scale(scheme="blues")), tooltip=["weekday", "hour", "responses"])
            .properties(width=520, height=180)
        )  # fmt: skip
        # 5-hour blocks per agent (provider): a block starts at the hour of its first response
        _rows = []
        for (_agent,), _g in usage.sort("local").group_by(["agent"], maintain_order=True):
            _start = _end = None
            _tok = 0
            for _t, _n in _g.select("local", "total_tokens").iter_rows():
                if _start is None or _t >= _start + dt.timedelta(hours=5):
                    if _start is not None:
                        _rows.append((_agent, _start, _end, _tok))
                    _start, _tok = _t.replace(minute=0, second=0, microsecond=0), 0
                _end, _tok = _t, _tok + (_n or 0)
            _rows.append((_agent, _start, _end, _tok))
        _blocks = pl.DataFrame(_rows, schema=["agent", "start", "last", "tokens"], orient="row")
        _timeline = (
            alt.Chart(_blocks, title="5-hour blocks per agent").mark_bar(height=12)
            .encode(alt.X("start:T", title=f"time ({tz})"), alt.X2("last:T"), alt.Y("agent:N", title=None), _colour,
                    tooltip=["agent", "start:T", "last:T", "tokens"])
            .properties(width=1080, height=alt.Step(20))
        )  # fmt: skip
        _lengths = sessions.with_columns(
            minutes=(pl.col("ended") - pl.col("started")).dt.total_seconds() / 60,
        ).filter(pl.col("minutes").is_not_null())
        _len_chart = (
            alt.Chart(_lengths, title="Session length (minutes)").mark_bar()
            .encode(alt.X("minutes:Q", bin=alt.Bin(maxbins=30)), alt.Y("count():Q", title="sessions"), _colour)
            .properties(width=520, height=200)
        )  # fmt: skip
        _ctx_chart = (
            alt.Chart(sessions.filter(pl.col("largest_context_tokens").is_not_null()), title="Largest context per session (tokens, logged)")
            .mark_bar()
            .encode(alt.X("largest_context_tokens:Q", bin=alt.Bin(maxbins=30), title="tokens"), alt.Y("count():Q", title="sessions"), _colour)
            .properties(width=520, height=200)
        )  # fmt: skip
        _total = usage["total_tokens"].sum()
        _cost_sum = usage["cost_usd"].sum() or 0
        overview = mo.vstack(
            [
                mo.md(
                    f"**{usage.height:,} API responses · {_total:,} tokens · ${_cost_sum:,.2f} · "
                    f"{sessions.height:,} sessions**"
                ),
                mo.hstack([_tokens, _cost], wrap=True),
                mo.hstack([_per_project, _heat], wrap=True),
                _timeline,
                mo.hstack([_len_chart, _ctx_chart], wrap=True),
            ]
        )
    return (overview,)


@app.cell
def _(mo, pl, sessions, st, svc_tr, tr, tz, urllib):
    index = svc_tr.session_index(svc_tr.SessionIndexRequest(home=st.home)).sessions
    _keep = set(sessions["session_id"].to_list())  # what the filters keep
    _rows = []
    for _s in index:
        if _s.session_id not in _keep:
            continue
        _href = "?" + urllib.parse.urlencode({"tab": "Sessions", "session": _s.session_id})
        _rows.append(
            {
                "session": mo.Html(
                    f'<a href="{_href}" target="_top">{"↳ " if _s.depth else ""}{tr.html.escape(_s.short_id)}</a>'
                ),
                "agent": _s.agent,
                "title": _s.title,
                "project": _s.project_dir or "",
                "start": tr.local_time(_s.started, tz, "%Y-%m-%d %H:%M"),
                "duration": tr.duration(_s.started, _s.ended),
                "messages": _s.messages,
                "tools": _s.tool_calls,
                "tokens": _s.tokens,
                "cost": round(_s.cost_usd, 2) if _s.cost_usd is not None else None,
                "id": _s.session_id,
            }
        )
    session_table = (
        mo.ui.table(
            _rows,
            selection="single",
            page_size=20,
            hidden_columns=["id"],
            show_data_types=False,
            label="Sessions (sub-agents under their parent, ↳): pick one to read it",
        )
        if _rows
        else None
    )
    _ = pl
    return (session_table,)


@app.cell
def _(mo, qp, session_table, st, svc_tr, tr, tz):
    _picked = None
    _focus = qp.get("entry")
    if session_table is not None and session_table.value:
        _picked = session_table.value[0]["id"]
    elif qp.get("session"):
        _picked = qp.get("session")
    if _picked:
        try:
            _t = next(svc_tr.transcripts(svc_tr.TranscriptRequest(home=st.home, sessions=[_picked])))
            transcript_view = mo.vstack(
                [
                    mo.md(f"### Transcript · {_t.session.agent} `{_t.session.session_id}`"),
                    mo.iframe(
                        tr.page_html(_t, tz=tz, link=lambda _sid: None, index_href=None, focus=_focus),
                        height="900px",
                    ),
                ]
            )
        except Exception as _e:
            transcript_view = mo.md(f"**Cannot open session {_picked}:** {_e.args[0] if _e.args else _e}")
    else:
        transcript_view = mo.md(
            "*Pick a session in the table (or open one from a search hit) to read its transcript.*"
        )
    return (transcript_view,)


@app.cell
def _(mo, qp):
    search_box = mo.ui.text(
        value=qp.get("q") or "",
        placeholder='words, "a phrase", an identifier…',
        label="Search",
        full_width=True,
    )
    return (search_box,)


@app.cell
def _(f_agents, mo, search_box, st, svc_search, tr, urllib):
    if not search_box.value.strip():
        search_view = mo.md(
            "*Type words to search every stored session (the same search as `ctxkeep search`).*"
        )
    else:
        try:
            _req = {"queries": [search_box.value], "limit": 20}
            if f_agents.value:
                _req["filters"] = {"agent": list(f_agents.value)}
            _res = svc_search.search(st.home, svc_search.SearchRequest.parse(_req)).results[0]
            _items = []
            for _h in _res.hits:
                _href = "?" + urllib.parse.urlencode(
                    {"tab": "Sessions", "session": _h.session_id, "entry": _h.entry_id}
                )
                _p = dict(_h.render())  # the one rendering of a hit (SearchHit.render)
                _items.append(
                    f'<li class="hit"><a href="{_href}" target="_top">{tr.html.escape(_p.get("title") or _h.entry_id)}</a>'
                    f"<br><small>{tr.html.escape(_p['head'])}</small>"
                    + (f"<br>{tr.html.escape(_p['snippet'])}" if "snippet" in _p else "")
                    + "</li>"
                )
            search_view = mo.Html(
                f"<p>{len(_res.hits)} hits for <b>{tr.html.escape(_res.query)}</b></p><ol>{''.join(_items)}</ol>"
                if _items
                else f"<p>No hits for <b>{tr.html.escape(_res.query)}</b>.</p>"
            )
        except Exception as _e:
            search_view = mo.md(f"**Search failed:** {_e.args[0] if _e.args else _e}")
    return (search_view,)


@app.cell
def _(mo, pl, st):
    from ctxkeep.sinks.files import store_files

    _cover = st.q("""
        SELECT agent, count(DISTINCT session_id) AS sessions, count(*) AS entries,
               min(ts) AT TIME ZONE 'UTC' AS first, max(ts) AT TIME ZONE 'UTC' AS last,
               count(*) FILTER (WHERE archived) AS archived
        FROM all_entries GROUP BY agent ORDER BY entries DESC""")
    _q = pl.read_database(
        "SELECT agent, action, count(*) AS lines FROM quarantine GROUP BY agent, action ORDER BY agent",
        st.lite,
    )
    _files = store_files(st.home)
    store_view = mo.vstack(
        [
            mo.md(f"### Sources and coverage\nStore `{st.home}` (read-only here; times UTC)."),
            mo.ui.table(_cover, selection=None, show_data_types=False)
            if _cover.height
            else mo.md("*No entries yet: run `ctxkeep ingest`.*"),
            mo.md("### Quarantine"),
            mo.ui.table(_q, selection=None, show_data_types=False)
            if _q.height
            else mo.md("*The quarantine is empty: every line and row was read.*"),
            mo.md("### Files\n" + "\n".join(f"- `{k}`: {v:,} bytes" for k, v in _files.items())),
        ]
    )
    return (store_view,)


@app.cell
def _(filters, mo, overview, qp, search_box, search_view, session_table, store_view, transcript_view):
    _tab = qp.get("tab") or ("Sessions" if qp.get("session") else "Overview")
    mo.vstack(
        [
            mo.md("# ctxkeep"),
            filters,
            mo.ui.tabs(
                {
                    "Overview": overview,
                    "Sessions": mo.vstack(
                        [
                            session_table
                            if session_table is not None
                            else mo.md("*No sessions match these filters.*"),
                            transcript_view,
                        ]
                    ),
                    "Search": mo.vstack([search_box, search_view]),
                    "Store": store_view,
                },
                value=_tab if _tab in ("Overview", "Sessions", "Search", "Store") else "Overview",
            ),
        ]
    )
    return


if __name__ == "__main__":
    app.run()

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
    from ctxkeep.service import resume as svc_resume
    from ctxkeep.service import search as svc_search
    from ctxkeep.service import transcripts as svc_tr
    from ctxkeep.timeutil import local_timezone

    return Store, alt, dt, grain, local_timezone, mo, no_store, pl, svc_resume, svc_search, svc_tr, tr, urllib


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
def _(st):
    # one row per session (the sessions view aggregates every entry: asked once per
    # store change, shared by the pages of the server); the filters offer its days and projects
    facts = st.cached(
        "session_facts",
        lambda: st.q("""SELECT agent, session_id, project_dir, started AT TIME ZONE 'UTC' AS started,
                        ended AT TIME ZONE 'UTC' AS ended, largest_context_tokens FROM sessions"""),
    )
    projects = sorted({p for p in facts["project_dir"].to_list() if p})
    first_day = facts["started"].min()
    last_day = facts["ended"].max()
    return facts, first_day, last_day, projects


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
def _(f_agents, f_days, f_project, f_tz, facts, pl):
    # every view's filter, as DuckDB parameters: $agents (empty: all), $project (NULL:
    # all), the local days $lo..$hi in $tz
    tz = f_tz.value
    fparams = {
        "tz": tz,
        "agents": list(f_agents.value or []),
        "project": f_project.value if f_project.value and f_project.value != "(all)" else None,
        "lo": f_days.value[0],
        "hi": f_days.value[1],
    }

    def keep(when: str) -> str:
        """The SQL filter of a row with ``agent``, ``project_dir`` and the time column ``when``."""
        return (
            "(len($agents::VARCHAR[]) = 0 OR list_contains($agents::VARCHAR[], agent)) "
            "AND ($project::VARCHAR IS NULL OR project_dir = $project::VARCHAR) "
            f"AND CAST(timezone($tz, {when}) AS DATE) BETWEEN $lo::DATE AND $hi::DATE"
        )

    def _kept_sessions():
        df = facts.with_columns(
            local=pl.col("started").dt.replace_time_zone("UTC").dt.convert_time_zone(tz).dt.date()
        ).filter(pl.col("local").is_between(fparams["lo"], fparams["hi"]))
        if fparams["agents"]:
            df = df.filter(pl.col("agent").is_in(fparams["agents"]))
        if fparams["project"] is not None:
            df = df.filter(pl.col("project_dir") == fparams["project"])
        return df

    kept_sessions = _kept_sessions()  # the sessions the filters keep (by their start)
    return fparams, keep, kept_sessions, tz


@app.cell
def _():
    # the Sessions table holds at most TABLE_ROWS sessions (the newest that match);
    # a transcript is drawn TURNS_PER_PAGE turns at a time
    TABLE_ROWS = 1000
    TURNS_PER_PAGE = 300
    return TABLE_ROWS, TURNS_PER_PAGE


@app.cell
def _(mo, qp):
    # the views: a tab bar whose choice gates the cells below (a hidden view computes nothing)
    TABS = ("Overview", "Sessions", "Search", "Store")
    _tab = qp.get("tab") or ("Sessions" if qp.get("session") else "Overview")
    nav = mo.ui.tabs({t: mo.md("") for t in TABS}, value=_tab if _tab in TABS else "Overview")
    return (nav,)


@app.cell
def _(alt, dt, fparams, grain, keep, kept_sessions, mo, nav, pl, st, tz):
    # Overview: from the 15-minute usage_buckets (pre-aggregated at sync; every zone's
    # offset is a multiple of 15 minutes), or usage itself while they are not fresh
    overview = None
    totals = None
    if nav.value == "Overview":
        _src = f"""WITH b AS (
            SELECT bucket AS ts, agent, project_dir, responses,
                   coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(cache_read_tokens, 0)
                     + coalesce(cache_creation_tokens, 0) AS total_tokens, auto_usd AS cost_usd
            FROM usage_buckets WHERE buckets_fresh()
            UNION ALL
            SELECT ts, agent, project_dir, 1,
                   coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(cache_read_tokens, 0)
                     + coalesce(cache_creation_tokens, 0), cost_usd
            FROM usage WHERE ts IS NOT NULL AND NOT buckets_fresh()),
          u AS (SELECT *, timezone($tz, ts) AS local FROM b WHERE {keep("ts")})"""
        _r = st.qs(
            {
                "totals": _src
                + """ SELECT coalesce(sum(responses), 0) AS responses,
                    coalesce(sum(total_tokens), 0) AS tokens, coalesce(sum(cost_usd), 0) AS cost_usd,
                    CAST(min(local) AS DATE) AS first, CAST(max(local) AS DATE) AS last FROM u""",
                "days": _src
                + """ SELECT CAST(local AS DATE) AS day, agent, sum(total_tokens) AS total_tokens,
                    sum(cost_usd) AS cost_usd FROM u GROUP BY ALL""",
                "proj": _src
                + """ SELECT coalesce(right(project_dir, 48), '(none)') AS project, agent,
                    sum(cost_usd) AS cost_usd FROM u GROUP BY ALL""",
                "heat": _src
                + """ SELECT strftime(local, '%a') AS weekday, hour(local) AS hour,
                    sum(responses) AS responses FROM u GROUP BY ALL""",
                "buckets": _src + " SELECT agent, local, total_tokens FROM u ORDER BY agent, local",
            },
            fparams,
        )
        totals = _r["totals"].row(0, named=True)
        _colour = alt.Color("agent:N", scale=st.colour)
        if not totals["responses"]:
            overview = mo.md(
                "*No API usage matches these filters.*"
                if st.agents
                else "*No sessions yet: run `ctxkeep ingest`, then reload.*"
            )
        else:
            _every, _unit = grain(totals["first"], totals["last"])
            _tu = {"day": "yearmonthdate", "week": "yearweek", "month": "yearmonth"}[_unit]
            _days = (
                _r["days"].with_columns(day=pl.col("day").dt.truncate(_every))
                .group_by("day", "agent").agg(pl.col("total_tokens").sum(), pl.col("cost_usd").sum())
            )  # fmt: skip
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
            _per_project = (
                alt.Chart(_r["proj"], title="Cost per project (USD)").mark_bar()
                .encode(alt.X("sum(cost_usd):Q", title="USD"), alt.Y("project:N", sort="-x", title=None), _colour)
                .properties(width=520, height=alt.Step(16))
            )  # fmt: skip
            _heat = (
                alt.Chart(_r["heat"], title=f"Activity: responses per weekday and hour ({tz})")
                .mark_rect()
                .encode(alt.X("hour:O"), alt.Y("weekday:N", sort=["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]),
                        alt.Color("sum(responses):Q", title="responses", scale=alt.Scale(scheme="blues")),
                        tooltip=["weekday", "hour", alt.Tooltip("sum(responses):Q", title="responses")])
                .properties(width=520, height=180)
            )  # fmt: skip
            # 5-hour blocks per agent: a block starts at the hour of its first response and
            # ends on an hour, so a 15-minute bucket falls wholly inside one block
            _rows = []
            for (_agent,), _g in _r["buckets"].group_by(["agent"], maintain_order=True):
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
            _sessions = kept_sessions.select(
                "agent",
                "largest_context_tokens",
                minutes=(pl.col("ended") - pl.col("started")).dt.total_seconds() / 60,
            )
            _len_chart = (
                alt.Chart(_sessions.filter(pl.col("minutes").is_not_null()).select("agent", "minutes"),
                          title="Session length (minutes)").mark_bar()
                .encode(alt.X("minutes:Q", bin=alt.Bin(maxbins=30)), alt.Y("count():Q", title="sessions"), _colour)
                .properties(width=520, height=200)
            )  # fmt: skip
            _ctx_chart = (
                alt.Chart(_sessions.filter(pl.col("largest_context_tokens").is_not_null()).select("agent", "largest_context_tokens"),
                          title="Largest context per session (tokens, logged)")
                .mark_bar()
                .encode(alt.X("largest_context_tokens:Q", bin=alt.Bin(maxbins=30), title="tokens"), alt.Y("count():Q", title="sessions"), _colour)
                .properties(width=520, height=200)
            )  # fmt: skip
            totals["sessions"] = _sessions.height
            overview = mo.vstack(
                [
                    mo.md(
                        f"**{totals['responses']:,} API responses · {totals['tokens']:,} tokens · "
                        f"${totals['cost_usd'] or 0:,.2f} · {_sessions.height:,} sessions**"
                    ),
                    mo.hstack([_tokens, _cost], wrap=True),
                    mo.hstack([_per_project, _heat], wrap=True),
                    _timeline,
                    mo.hstack([_len_chart, _ctx_chart], wrap=True),
                ]
            )
    return overview, totals


@app.cell
def _(TABLE_ROWS, kept_sessions, mo, nav, st, svc_tr, tr, tz, urllib):
    # the Sessions table: the sessions the filters keep, at most TABLE_ROWS (newest first)
    session_table = None
    session_rows = None
    if nav.value == "Sessions":
        _keep = set(kept_sessions["session_id"].to_list())  # what the filters keep
        index = st.cached(
            "session_index", lambda: svc_tr.session_index(svc_tr.SessionIndexRequest(home=st.home)).sessions
        )
        _rows = []
        for _s in index:
            if _s.session_id not in _keep:
                continue
            if len(_rows) >= TABLE_ROWS:  # the table holds the newest; the count says how many match
                _rows.append(None)
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
        session_rows = len(_rows)
        _rows = [_r for _r in _rows if _r is not None]
        _more = (
            f"the newest {len(_rows):,} of {session_rows:,}: narrow them with the filters; "
            if session_rows > len(_rows)
            else ""
        )
        session_table = (
            mo.ui.table(
                _rows,
                selection="single",
                page_size=20,
                hidden_columns=["id"],
                show_data_types=False,
                label=f"Sessions ({_more}sub-agents under their parent, ↳): pick one to read it",
            )
            if _rows
            else None
        )
    return session_rows, session_table


@app.cell
def _(TURNS_PER_PAGE, mo, nav, qp, session_table, st, svc_resume, svc_tr, tr, tz, urllib):
    transcript_view = None
    if nav.value == "Sessions":
        _picked = None
        _focus = qp.get("entry")
        if session_table is not None and session_table.value:
            _picked = session_table.value[0]["id"]
        elif qp.get("session"):
            _picked = qp.get("session")
        if _picked and qp.get("resume") and _picked == qp.get("session"):
            # the resume snapshot: what `ctxkeep resume --session ID` prints
            _back = "?" + urllib.parse.urlencode({"tab": "Sessions", "session": _picked})
            try:
                _snap = svc_resume.resume(st.home, svc_resume.ResumeRequest(sessionId=_picked))
                transcript_view = mo.vstack(
                    [
                        mo.Html(
                            f'<p><a href="{tr.html.escape(_back)}" target="_top">← the transcript</a> · resume snapshot of '
                            f"{tr.html.escape(_snap.agent)} <code>{tr.html.escape(_snap.session_id)}</code> "
                            f"(~{_snap.tokens:,} tokens; <code>ctxkeep resume --session {tr.html.escape(_snap.session_id)}</code>)</p>"
                        ),
                        mo.md(_snap.markdown),
                    ]
                )
            except Exception as _e:
                transcript_view = mo.md(
                    f"**No resume snapshot of {_picked}:** {_e.args[0] if _e.args else _e}"
                )
        elif _picked:
            try:
                _index = st.cached(
                    "session_index",
                    lambda: svc_tr.session_index(svc_tr.SessionIndexRequest(home=st.home)).sessions,
                )
                # a long session is read a page of TURNS_PER_PAGE turns at a time (the
                # page holding a search hit first): whole, the largest session of a 2 GB
                # store took 4.5 s to render and sent 28 MB to the browser
                try:
                    _page = int(qp.get("page") or 1) - 1
                except ValueError:
                    _page = 0
                _t = next(
                    svc_tr.transcripts(
                        svc_tr.TranscriptRequest(
                            home=st.home,
                            sessions=[_picked],
                            index=_index,
                            page_turns=TURNS_PER_PAGE,
                            page=max(_page, 0),
                            focus=_focus,
                        )
                    )
                )
                _resume = "?" + urllib.parse.urlencode(
                    {"tab": "Sessions", "session": _t.session.session_id, "resume": "1"}
                )
                _lo, _hi = _t.window or (0, len(_t.turns))
                _pages = max(1, -(-len(_t.turns) // TURNS_PER_PAGE))
                _pager = ""
                if _pages > 1:
                    _here = _lo // TURNS_PER_PAGE

                    def _to(_k: int, _label: str) -> str:
                        _href = "?" + urllib.parse.urlencode(
                            {"tab": "Sessions", "session": _t.session.session_id, "page": _k + 1}
                        )
                        return f'<a class="page" href="{tr.html.escape(_href)}" target="_top">{_label}</a>'

                    _pager = (
                        f"<p>Turns {_lo + 1:,}–{_hi:,} of {len(_t.turns):,} (page {_here + 1} of {_pages}) · "
                        + " · ".join(
                            _x
                            for _x in (
                                _to(0, "« first") if _here > 0 else "",
                                _to(_here - 1, "‹ previous") if _here > 0 else "",
                                _to(_here + 1, "next ›") if _here < _pages - 1 else "",
                                _to(_pages - 1, "last »") if _here < _pages - 1 else "",
                            )
                            if _x
                        )
                        + "</p>"
                    )
                transcript_view = mo.vstack(
                    [
                        mo.Html(
                            f"<h3>Transcript · {tr.html.escape(_t.session.agent)} "
                            f"<code>{tr.html.escape(_t.session.session_id)}</code></h3>"
                            f'<p><a class="resume" href="{tr.html.escape(_resume)}" target="_top">Resume snapshot</a> '
                            "(what <code>ctxkeep resume</code> gives an agent to pick this session up)</p>"
                            + _pager
                        ),
                        mo.iframe(
                            tr.page_html(
                                _t,
                                tz=tz,
                                link=lambda _sid: None,
                                index_href=None,
                                focus=_focus,
                            ),
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
def _(f_agents, mo, nav, search_box, st, svc_search, tr, urllib):
    if nav.value != "Search":
        search_view = None
    elif not search_box.value.strip():
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
def _(mo, nav, pl, st):
    store_view = None
    if nav.value == "Store":
        from ctxkeep.sinks.files import store_files

        _cover = st.q("""
            SELECT agent, count(DISTINCT session_id) AS sessions, count(*) AS entries,
                   min(ts) AT TIME ZONE 'UTC' AS first, max(ts) AT TIME ZONE 'UTC' AS last,
                   count(*) FILTER (WHERE archived) AS archived
            FROM all_entries GROUP BY agent ORDER BY entries DESC""")
        _q = pl.DataFrame(
            st.lite.execute(
                "SELECT agent, action, count(*) FROM quarantine GROUP BY agent, action ORDER BY agent"
            ).fetchall(),
            schema=["agent", "action", "lines"],
            orient="row",
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
def _(filters, mo, nav, overview, search_box, search_view, session_table, store_view, transcript_view):
    _views = {
        "Overview": lambda: overview,
        "Sessions": lambda: mo.vstack(
            [
                session_table if session_table is not None else mo.md("*No sessions match these filters.*"),
                transcript_view,
            ]
        ),
        "Search": lambda: mo.vstack([search_box, search_view]),
        "Store": lambda: store_view,
    }
    mo.vstack([mo.md("# ctxkeep"), filters, nav, _views[nav.value]()])
    return


if __name__ == "__main__":
    app.run()

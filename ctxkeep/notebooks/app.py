"""The ctxkeep app (`ctxkeep ui`; or `marimo run app.py -- --store HOME`): Overview,
Sessions (→ a session's transcript), Search (→ the transcript at the hit) and Store,
over the DuckDB model and the service layer. Read-only. The cells wire the UI
elements; each tab's content is built by ``ctxkeep.render.app_views`` (code kept here
is parsed again by ``marimo run`` for every page opened).

URL parameters open a view: `?tab=Sessions&session=ID&entry=ENTRY` (a transcript, at
an entry), `?tab=Search&q=WORDS`.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="ctxkeep")


@app.cell
def _():
    import datetime as dt

    import marimo as mo
    import polars as pl

    from ctxkeep.render import app_views as views
    from ctxkeep.render.nbkit import Store
    from ctxkeep.service import transcripts as svc_tr
    from ctxkeep.timeutil import local_timezone

    return Store, dt, local_timezone, mo, pl, svc_tr, views


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
def _(Store, local_timezone, mo, store, views):
    try:
        st = Store(store, "UTC", "", "")
    except Exception as _e:
        mo.stop(True, views.store_unavailable(store, _e))
    local_tz = local_timezone()
    return local_tz, st


@app.cell
def _(st, views):
    # one row per session (the sessions view aggregates every entry: asked once per
    # store change, shared by the pages of the server); the filters offer its days and projects
    # (the empty sessions left out, as `ctxkeep sessions` does: views.SESSION_FACTS_SQL)
    facts = st.cached("session_facts", lambda: st.q(views.SESSION_FACTS_SQL))
    projects = sorted({p for p in facts["project_dir"].to_list() if p})
    first_day = facts["started"].min()
    last_day = facts["ended"].max()
    return facts, first_day, last_day, projects


@app.cell
def _(dt, first_day, last_day, local_tz, mo, projects, st, views):
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
    # each project by the overview's short label (the readable end of its path), its value
    # the whole path: whole paths made the dropdown wider than a 390 px screen (Chromium)
    f_project = mo.ui.dropdown(views.project_options(projects), value="(all)", label="project (and below)")
    _start = first_day.date() if first_day else dt.date.today()
    _stop = last_day.date() if last_day else dt.date.today()
    f_days = mo.ui.date_range(start=_start, stop=_stop, value=(_start, _stop), label="days")
    f_tz = mo.ui.dropdown(_zones, value=local_tz, label="time zone")
    filters = mo.hstack([f_agents, f_project, f_days, f_tz], justify="start", gap=1.5, wrap=True)
    return f_agents, f_days, f_project, f_tz, filters


@app.cell
def _(f_agents, f_days, f_project, f_tz, facts, views):
    # every view's filter, as DuckDB parameters: $agents (empty: all), $project (NULL:
    # all), the local days $lo..$hi in $tz
    tz = f_tz.value
    fparams = {
        "tz": tz,
        "agents": list(f_agents.value or []),
        "project": f_project.value or None,  # "(all)": None
        "lo": f_days.value[0],
        "hi": f_days.value[1],
        # the days left at the store's whole span: no time filter (undated sessions kept)
        "all_days": tuple(f_days.value) == (f_days.start, f_days.stop),
    }

    keep = views.filter_sql  # the SQL filter of a row (agent, project_dir, a time column)

    # the sessions the filters keep (by their start; those without one while the days
    # are the whole span)
    kept_sessions = views.kept_sessions(facts, fparams)
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
def _(fparams, keep, kept_sessions, nav, st, views):
    overview, totals = (
        views.or_stop(st.home, lambda: views.overview(st, fparams, keep, kept_sessions))
        if nav.value == "Overview"
        else (None, None)
    )
    return overview, totals


@app.cell
def _(TABLE_ROWS, kept_sessions, nav, st, svc_tr, tz, views):
    # the service's session index: asked once per store change, shared by the pages
    index = (
        views.or_stop(
            st.home,
            lambda: st.cached(
                "session_index",
                lambda: svc_tr.session_index(svc_tr.SessionIndexRequest(home=st.home)).sessions,
            ),
        )
        if nav.value == "Sessions"
        else None
    )
    session_table, session_rows = (
        views.session_table(index, kept_sessions, tz, TABLE_ROWS) if index is not None else (None, None)
    )
    return index, session_rows, session_table


@app.cell
def _(TURNS_PER_PAGE, index, mo, nav, qp, session_table, st, tz, views):
    transcript_view = None
    if nav.value == "Sessions":
        _picked = qp.get("session")
        if session_table is not None and session_table.value:
            _picked = session_table.value[0]["id"]
        try:
            _page = int(qp.get("page") or 1) - 1
        except ValueError:
            _page = 0
        if _picked and qp.get("resume") and _picked == qp.get("session"):
            transcript_view = views.resume_view(st.home, _picked)
        elif _picked:
            transcript_view = views.or_stop(
                st.home,
                lambda: views.transcript_view(
                    st.home, index, _picked, tz=tz, focus=qp.get("entry"), page=_page, per_page=TURNS_PER_PAGE
                ),
            )
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
def _(f_agents, nav, search_box, st, views):
    search_view = (
        views.or_stop(
            st.home, lambda: views.search_view(st.home, search_box.value, list(f_agents.value or []))
        )
        if nav.value == "Search"
        else None
    )
    return (search_view,)


@app.cell
def _(nav, st, views):
    store_view = views.or_stop(st.home, lambda: views.store_view(st)) if nav.value == "Store" else None
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

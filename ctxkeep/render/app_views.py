"""The views of the ctxkeep app (``ctxkeep/notebooks/app.py``): each builds one tab's
content from the page's ``nbkit.Store`` and the filters' values, so the notebook's
cells only wire the UI elements to them.

Why a module: ``marimo run`` parses the notebook file again for every page a browser
opens (marimo 0.25: the page route and the session's start each load it; tokenizing
every cell's source, ~0.09 CPU s for the 555-line app), so the code kept in the
notebook is paid on every page; a module is compiled once per server.

Filters (``fparams``): ``tz`` (IANA zone), ``agents`` (empty: all), ``project`` (None:
all), ``lo``/``hi`` (local dates, inclusive); ``keep(when)`` is their SQL filter of a
row with ``agent``, ``project_dir`` and the time column ``when``. Costs are USD,
tokens tokens, times shown in ``tz``.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import altair as alt
import marimo as mo
import polars as pl

from ctxkeep.paths import under_expr
from ctxkeep.render import transcript as tr
from ctxkeep.render.nbkit import Store, grain, store_problem
from ctxkeep.schema import reasoning_beside_sql

#: the reasoning tokens a usage row's output leaves out (Gemini CLI's thoughts), in totals
_BESIDE = reasoning_beside_sql()
#: the shortest tail of a project path shown on the charts (path components)
TAIL_PARTS = 2


def project_labels(paths: Iterable[str | None]) -> dict[str | None, str]:
    """A readable label per project directory: its last ``TAIL_PARTS`` components
    (``…/owner/repo``), more where two projects would share one; the whole path when it
    is that short already; ``(none)`` for no project. Labels are unique per path."""
    uniq = sorted({p for p in paths if p})
    parts = {p: [x for x in p.replace("\\", "/").split("/") if x] for p in uniq}
    n = dict.fromkeys(uniq, TAIL_PARTS)
    while True:
        seen: dict[str, list[str]] = {}
        for p in uniq:
            seen.setdefault("/".join(parts[p][-n[p] :]), []).append(p)
        clash = [p for group in seen.values() if len(group) > 1 for p in group if n[p] < len(parts[p])]
        if not clash:
            break
        for p in clash:
            n[p] += 1
    out: dict[str | None, str] = {None: "(none)"}
    for p in uniq:
        tail = "/".join(parts[p][-n[p] :])
        out[p] = p if n[p] >= len(parts[p]) else "…/" + tail
    return out


def project_options(projects: Iterable[str]) -> dict[str, str | None]:
    """The project filter's options: ``"(all)"`` (value None), then each project
    directory of ``projects`` by its ``project_labels`` label (value: the directory),
    in the labels' order."""
    labels = project_labels(projects)
    mine = sorted(((labels[p], p) for p in projects if p), key=lambda x: x[0].lstrip("…/").lower())
    return {"(all)": None, **dict(mine)}


def ingest_command(store: str) -> str:
    """The command that fills the store ``store``: ``ctxkeep ingest`` when it is the
    store a plain run would fill (``--home``, else ``$CTXKEEP_HOME``, else the user data
    dir: ``config.resolve_home``), else with ``--home STORE`` (newuser24 F20: the app
    started with ``--home`` said to run a plain ingest, which fills another store)."""
    import shlex

    from ctxkeep.config import resolve_home

    if Path(store).expanduser().resolve() == resolve_home(None):
        return "ctxkeep ingest"
    return f"ctxkeep ingest --home {shlex.quote(str(Path(store).expanduser().resolve()))}"


def store_unavailable(store: str, e: BaseException):
    """The app's page when the store ``store`` cannot be opened (``e``): with none yet
    (or no usage in it), what to run; else what failed, where and what to do
    (``nbkit.store_problem``: a damaged store.db says doctor, a damaged
    analytics.duckdb reindex)."""
    from ctxkeep.errors import NothingStored

    err = store_problem(store, e)
    if isinstance(err, NothingStored) and err.todo == "try again when it ends":  # an ingest runs
        return mo.md(f"# ctxkeep\n\n**Nothing to show yet:** {err.what}.\n\nReload this page when it ends.")
    if isinstance(err, NothingStored) or err.what == "no store yet":
        return mo.md(
            f"# ctxkeep\n\n**Nothing to show yet:** {err.what} in `{store}`.\n\n"
            f"Run `{ingest_command(store)}` (it finds the agents' session files on this machine), "
            "then reload this page."
        )
    where = f" (`{err.where}`)" if err.where else ""
    return mo.md(
        f"# ctxkeep\n\n**Cannot read the store:** {err.what}{where}.\n\n"
        f"What to do: {err.todo or 'run `ctxkeep doctor`'}, then reload this page."
    )


def or_stop(store: str, ask: Callable[[], Any]) -> Any:
    """``ask()``'s answer; when it raises a ``CtxkeepError`` (a store that cannot be
    read: damaged, held, gone), the cell stops showing ``store_unavailable``'s one
    message (``mo.stop``: the cells after it do not run) instead of failing, which left
    the whole page blank (newuser19 F15: "store.db is damaged" in the log, nothing on
    screen). Any other exception (a defect) is raised as it is."""
    from ctxkeep.errors import CtxkeepError

    try:
        return ask()
    except CtxkeepError as e:
        mo.stop(True, store_unavailable(store, e))
        raise  # not reached: mo.stop raises


def filter_sql(when: str) -> str:
    """The SQL filter (DuckDB, named parameters ``$agents``, ``$project``, ``$tz``,
    ``$lo``, ``$hi`` of the app's ``fparams``) of a row with ``agent``, ``project_dir``
    and the time column ``when``. A project is its folder and everything below it, as
    the CLI's ``--project`` (``paths.under_sql``): the folder alone showed $0.61 of a
    project's $2.39 (newuser17 F6)."""
    return (
        "(len($agents::VARCHAR[]) = 0 OR list_contains($agents::VARCHAR[], agent)) "
        "AND ($project::VARCHAR IS NULL OR project_dir = $project::VARCHAR "
        "OR starts_with(project_dir, rtrim($project::VARCHAR, '/\\') || '/') "
        "OR starts_with(project_dir, rtrim($project::VARCHAR, '/\\') || '\\')) "
        f"AND CAST(timezone($tz, {when}) AS DATE) BETWEEN $lo::DATE AND $hi::DATE"
    )


#: the app's sessions (one row each: ``agent``, ``session_id``, ``project_dir``,
#: ``started``/``ended`` UTC, ``largest_context_tokens``), DuckDB: every session
#: ``ctxkeep sessions`` lists, so without the empty ones (no time and no message: a
#: summary-only or file-history-only file; ``sinks.session_list``'s rule) the CLI
#: leaves out and counts apart since session 17 (the app counted 38 where it lists 35)
SESSION_FACTS_SQL = """SELECT agent, session_id, project_dir, started AT TIME ZONE 'UTC' AS started,
       ended AT TIME ZONE 'UTC' AS ended, largest_context_tokens
FROM sessions WHERE started IS NOT NULL OR messages > 0"""


def kept_sessions(facts: pl.DataFrame, fparams: dict) -> pl.DataFrame:
    """The rows of ``facts`` (one per session: ``agent``, ``session_id``,
    ``project_dir``, ``started``/``ended`` as naive UTC datetimes or null, ...) that the
    filters ``fparams`` keep: agent as chosen, project as chosen or below it (as the
    CLI's ``--project``: ``paths.under_expr``), and a start on a local day
    (in ``tz``) within ``lo``..``hi``. A session without a start (a Claude Code session
    of ``summary`` or ``file-history-snapshot`` records only) cannot be placed in days:
    while they are the store's whole span (``all_days``, the app's default: no time
    filter) it is kept, so every session ``ctxkeep sessions`` lists stays reachable
    (the Sessions table shows it last, its start empty); narrowed, the days are a time
    filter and leave it out (as ``ctxkeep sessions --since/--until``)."""
    local = pl.col("started").dt.replace_time_zone("UTC").dt.convert_time_zone(fparams["tz"]).dt.date()
    undated = pl.col("started").is_null() & pl.lit(bool(fparams.get("all_days", False)))
    df = facts.filter(undated | local.is_between(fparams["lo"], fparams["hi"]))
    if fparams["agents"]:
        df = df.filter(pl.col("agent").is_in(fparams["agents"]))
    if fparams["project"] is not None:  # the folder and below, as the CLI's --project
        df = df.filter(under_expr(pl.col("project_dir"), fparams["project"]).fill_null(False))
    return df


def overview(
    st: Store, fparams: dict, keep: Callable[[str], str], kept_sessions: pl.DataFrame
) -> tuple[Any, dict]:
    """The Overview tab and its totals (``responses``, ``tokens``, ``cost_usd``, local
    ``first``/``last`` day, ``sessions``): from the 15-minute ``usage_buckets``
    (pre-aggregated at sync; every zone's offset is a multiple of 15 minutes), or
    ``usage`` itself while they are not fresh."""
    tz = fparams["tz"]
    src = f"""WITH b AS (
        SELECT bucket AS ts, agent, project_dir, responses,
               coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(cache_read_tokens, 0)
                 + coalesce(cache_creation_tokens, 0) + {_BESIDE}
                 AS total_tokens, auto_usd AS cost_usd
        FROM usage_buckets WHERE buckets_fresh()
        UNION ALL
        SELECT ts, agent, project_dir, 1,
               coalesce(input_tokens, 0) + coalesce(output_tokens, 0) + coalesce(cache_read_tokens, 0)
                 + coalesce(cache_creation_tokens, 0) + {_BESIDE}, cost_usd
        FROM usage WHERE ts IS NOT NULL AND NOT buckets_fresh()),
      u AS (SELECT *, timezone($tz, ts) AS local FROM b WHERE {keep("ts")})"""
    r = st.qs(
        {
            "totals": src
            + """ SELECT coalesce(sum(responses), 0) AS responses,
                coalesce(sum(total_tokens), 0) AS tokens, coalesce(sum(cost_usd), 0) AS cost_usd,
                CAST(min(local) AS DATE) AS first, CAST(max(local) AS DATE) AS last FROM u""",
            "days": src
            + """ SELECT CAST(local AS DATE) AS day, agent, sum(total_tokens) AS total_tokens,
                sum(cost_usd) AS cost_usd FROM u GROUP BY ALL""",
            "proj": src + """ SELECT project_dir, agent, sum(cost_usd) AS cost_usd FROM u GROUP BY ALL""",
            "heat": src
            + """ SELECT strftime(local, '%a') AS weekday, hour(local) AS hour,
                sum(responses) AS responses FROM u GROUP BY ALL""",
            "buckets": src + " SELECT agent, local, total_tokens FROM u ORDER BY agent, local",
        },
        fparams,
    )
    totals = r["totals"].row(0, named=True)
    # the legend lists the agents the charts draw, each in its store-wide colour (the
    # store's every agent listed aider, copilot-cli, specstory with no usage: newuser23 F12)
    colour = alt.Color("agent:N", scale=st.colour_of(r["days"]))
    if not totals["responses"]:
        view = mo.md(
            "*No API usage matches these filters.*"
            if st.agents
            else "*No sessions yet: run `ctxkeep ingest`, then reload.*"
        )
        return view, totals
    every, unit = grain(totals["first"], totals["last"])
    tu = {"day": "yearmonthdate", "week": "yearweek", "month": "yearmonth"}[unit]
    days = (
        r["days"].with_columns(day=pl.col("day").dt.truncate(every))
        .group_by("day", "agent").agg(pl.col("total_tokens").sum(), pl.col("cost_usd").sum())
    )  # fmt: skip
    tokens = (
        alt.Chart(days, title=f"Tokens per {unit} ({tz})").mark_bar()
        .encode(alt.X(f"{tu}(day):T", title=unit), alt.Y("sum(total_tokens):Q", title="tokens"), colour,
                tooltip=["agent", "day:T", "total_tokens"])
        .properties(width="container", height=220)
    )  # fmt: skip
    cost = (
        alt.Chart(days, title=f"Cost per {unit} (USD)").mark_bar()
        .encode(alt.X(f"{tu}(day):T", title=unit), alt.Y("sum(cost_usd):Q", title="USD"), colour,
                tooltip=["agent", "day:T", alt.Tooltip("cost_usd:Q", format="$,.2f")])
        .properties(width="container", height=220)
    )  # fmt: skip
    # a project by the readable end of its path (…/owner/repo); the whole path on hover
    labels = project_labels(r["proj"]["project_dir"].to_list())
    proj = r["proj"].with_columns(
        project=pl.col("project_dir").replace_strict(labels, default="(none)", return_dtype=pl.String),
        path=pl.col("project_dir").fill_null("(none)"),
    )
    per_project = (
        alt.Chart(proj, title="Cost per project (USD)").mark_bar()
        .encode(alt.X("sum(cost_usd):Q", title="USD"), alt.Y("project:N", sort="-x", title=None), colour,
                tooltip=[alt.Tooltip("path:N", title="project"), "agent",
                         alt.Tooltip("sum(cost_usd):Q", title="USD", format="$,.2f")])
        .properties(width="container", height=alt.Step(16))
    )  # fmt: skip
    heat = activity_heatmap(r["heat"], tz)
    # a tick per block: a 5-hour bar is under a pixel wide on a months-long axis (the
    # blocks of the corpus were invisible in Chromium)
    timeline = (
        alt.Chart(_blocks(r["buckets"]), title="5-hour blocks per agent (a tick each)")
        .mark_tick(thickness=3, size=14, opacity=0.8)
        .encode(alt.X("start:T", title=f"time ({tz})"), alt.Y("agent:N", title=None), colour,
                tooltip=["agent", "start:T", "last:T", "tokens"])
        .properties(width="container", height=alt.Step(20))
    )  # fmt: skip
    sessions = kept_sessions.select(
        "agent",
        "largest_context_tokens",
        minutes=(pl.col("ended") - pl.col("started")).dt.total_seconds() / 60,
    )
    # the distributions binned here: a chart's rows stay ~30 per agent whatever the
    # store holds (marimo draws at most 20,000 rows a chart; a 2 GB store has 7,000 sessions)
    # (each chart's legend: the agents it draws, one with sessions and no usage too)
    lengths = histogram(sessions, "minutes", upto=0.95)
    contexts = histogram(sessions, "largest_context_tokens")
    len_chart = (
        alt.Chart(lengths, title="Session length (minutes; the last bar: longer)")
        .mark_bar()
        .encode(alt.X("lo:Q", bin="binned", title="minutes"), alt.X2("hi:Q"), alt.Y("sessions:Q", title="sessions"),
                alt.Color("agent:N", scale=st.colour_of(lengths)),
                tooltip=["agent", alt.Tooltip("lo:Q", title="from"), alt.Tooltip("hi:Q", title="to"), "sessions"])
        .properties(width="container", height=200)
    )  # fmt: skip
    ctx_chart = (
        alt.Chart(contexts, title="Largest context per session (tokens, logged)")
        .mark_bar()
        .encode(alt.X("lo:Q", bin="binned", title="tokens"), alt.X2("hi:Q"), alt.Y("sessions:Q", title="sessions"),
                alt.Color("agent:N", scale=st.colour_of(contexts)),
                tooltip=["agent", alt.Tooltip("lo:Q", title="from"), alt.Tooltip("hi:Q", title="to"), "sessions"])
        .properties(width="container", height=200)
    )  # fmt: skip
    totals["sessions"] = sessions.height
    view = mo.vstack(
        [
            mo.md(
                f"**{totals['responses']:,} API responses · {totals['tokens']:,} tokens · "
                f"${totals['cost_usd'] or 0:,.2f} · {sessions.height:,} sessions**"
            ),
            _grid([tokens, cost]),
            _grid([per_project, heat]),
            _grid([timeline], wide=True),
            _grid([len_chart, ctx_chart]),
        ]
    )
    return view, totals


#: the heatmap's rows, Monday first (DuckDB's ``strftime(ts, '%a')``)
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def activity_heatmap(heat: pl.DataFrame, tz: str):
    """Responses per weekday and local hour (``heat``: ``weekday``, ``hour``,
    ``responses``) as an Altair rect chart whose axes are all 7 days and all 24 hours,
    an hour or day without responses a blank cell: the axes held only the hours and
    days with data, so neighbouring cells were not neighbouring hours (newuser18 F11)."""
    import altair as alt

    return (
        alt.Chart(heat, title=f"Activity: responses per weekday and hour ({tz})")
        .mark_rect()
        .encode(alt.X("hour:O", scale=alt.Scale(domain=list(range(24)))),
                alt.Y("weekday:N", scale=alt.Scale(domain=WEEKDAYS), title=None),
                alt.Color("sum(responses):Q", title="responses", scale=alt.Scale(scheme="blues")),
                tooltip=["weekday", "hour", alt.Tooltip("sum(responses):Q", title="responses")])
        .properties(width="container", height=180)
    )  # fmt: skip


def _grid(charts: list, wide: bool = False):
    """Charts side by side while each gets at least 420 px (``wide``: one a row), else
    one a row: each chart is as wide as its cell (``width="container"``), so a phone's
    390 px shows every chart whole (fixed 520 px charts were cut at the screen's edge)."""
    cells = "".join(f'<div style="min-width:0">{mo.as_html(c).text}</div>' for c in charts)
    cols = "1fr" if wide else "repeat(auto-fit, minmax(min(100%, 420px), 1fr))"
    return mo.Html(
        f'<div style="display:grid;grid-template-columns:{cols};gap:1rem;width:100%">{cells}</div>'
    )


def histogram(df: pl.DataFrame, col: str, maxbins: int = 30, upto: float | None = None) -> pl.DataFrame:
    """The sessions of ``df`` (``agent`` and the number column ``col``; nulls left out)
    counted per agent in equal bins of a round width (1, 2 or 5 times a power of ten,
    at most ``maxbins`` bins over the values' range): ``agent``, ``lo``, ``hi`` (the
    bin's bounds, ``lo`` <= value < ``hi``; the largest value falls in the last bin),
    ``sessions``. ``upto`` (a quantile, 0-1): the bins span the values up to it, and the
    last bin holds every value above (one session of months made every other fall in
    the first of 30 bins: the corpus's session lengths in Chromium)."""
    v = df.select("agent", x=pl.col(col).cast(pl.Float64)).drop_nulls("x")
    if v.height == 0:
        return pl.DataFrame(
            schema={"agent": pl.String, "lo": pl.Float64, "hi": pl.Float64, "sessions": pl.UInt32}
        )
    lo, hi = float(v["x"].min()), float(v["x"].max())  # type: ignore[arg-type]
    if upto is not None:
        hi = min(hi, float(v["x"].quantile(upto, "higher")))  # type: ignore[arg-type]
    span = hi - lo
    step = 1.0
    if span > 0:
        raw = span / maxbins
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    last = max(math.floor((hi - start) / step), 0)
    return (
        v.with_columns(b=((pl.col("x") - start) / step).floor().clip(0, last).cast(pl.Int64))
        .group_by("agent", "b")
        .agg(sessions=pl.len())
        .with_columns(lo=start + pl.col("b") * step, hi=start + (pl.col("b") + 1) * step)
        .select("agent", "lo", "hi", "sessions")
        .sort("agent", "lo")
    )


def _blocks(buckets: pl.DataFrame) -> pl.DataFrame:
    """5-hour blocks per agent from its buckets (``agent``, ``local``, ``total_tokens``,
    in order): a block starts at the hour of its first response and ends on an hour, so
    a 15-minute bucket falls wholly inside one block."""
    rows = []
    for (agent,), g in buckets.group_by(["agent"], maintain_order=True):
        start = end = None
        tok = 0
        for t, n in g.select("local", "total_tokens").iter_rows():
            if start is None or t >= start + dt.timedelta(hours=5):
                if start is not None:
                    rows.append((agent, start, end, tok))
                start, tok = t.replace(minute=0, second=0, microsecond=0), 0
            end, tok = t, tok + (n or 0)
        rows.append((agent, start, end, tok))
    return pl.DataFrame(rows, schema=["agent", "start", "last", "tokens"], orient="row")


def session_table(index: list, kept_sessions: pl.DataFrame, tz: str, table_rows: int) -> tuple[Any, int]:
    """The Sessions table: the sessions of ``index`` (the service's session index,
    newest first, sub-agents under their parent) that the filters keep, at most
    ``table_rows`` of them (the newest); returns ``(table or None, sessions matching)``."""
    keep = set(kept_sessions["session_id"].to_list())
    rows: list[dict[str, Any]] = []
    matching = 0
    # a project by the readable end of its path (the overview's labels), so the tokens
    # and cost columns fit beside it at 1280 px (whole paths pushed them out of view)
    labels = project_labels(s.project_dir for s in index if s.session_id in keep)
    for s in index:
        if s.session_id not in keep:
            continue
        matching += 1
        if len(rows) >= table_rows:  # the table holds the newest; the count says how many match
            continue
        href = "?" + urllib.parse.urlencode({"tab": "Sessions", "session": s.session_id})
        rows.append(
            {
                "session": mo.Html(
                    f'<a href="{href}" target="_top" style="{LINK_STYLE}">{"↳ " if s.depth else ""}{html.escape(s.short_id)}</a>'
                ),
                "agent": s.agent,
                # the figures before the texts: at 1280 px the title and project took
                # the width and the tokens and cost were out of view (Chromium)
                "start": tr.local_time(s.started, tz, "%Y-%m-%d %H:%M"),
                "duration": tr.duration(s.started, s.ended),
                "tokens": s.tokens,
                "cost": round(s.cost_usd, 2) if s.cost_usd is not None else None,
                "title": s.title or "",  # (None: no title or prompt; marimo would print "None")
                "project": labels.get(s.project_dir, "(none)"),
                "messages": s.messages,
                "tools": s.tool_calls,
                "id": s.session_id,
            }
        )
    if not rows:
        return None, matching
    more = (
        f"the newest {len(rows):,} of {matching:,}: narrow them with the filters; "
        if matching > len(rows)
        else ""
    )
    table = mo.ui.table(
        rows,
        selection="single",
        page_size=20,
        hidden_columns=["id"],
        show_data_types=False,
        # not recorded by the agent (Crush, Go opencode: a cost only): "-", as the CLI
        format_mapping={
            "tokens": lambda v: "-" if v is None else f"{v:,}",
            "cost": lambda v: "-" if v is None else f"${v:,.2f}",
        },
        label=f"Sessions ({more}sub-agents under their parent, ↳): pick one to read it",
    )
    return table, matching


def resume_view(home, sid: str):
    """The resume snapshot of session ``sid``: what ``ctxkeep resume --session ID``
    prints, under a link back to its transcript."""
    from ctxkeep.service import resume as svc_resume

    back = "?" + urllib.parse.urlencode({"tab": "Sessions", "session": sid})
    try:
        snap = svc_resume.resume(home, svc_resume.ResumeRequest.parse({"sessionId": sid}))
    except Exception as e:
        return mo.md(f"**No resume snapshot of {sid}:** {e.args[0] if e.args else e}")
    return mo.vstack(
        [
            mo.Html(
                f'<p><a href="{html.escape(back)}" target="_top" style="{LINK_STYLE}">← the transcript</a> · resume snapshot of '
                f"{html.escape(snap.agent)} <code>{html.escape(snap.session_id)}</code> "
                f"(~{snap.tokens:,} tokens; <code>ctxkeep resume --session {html.escape(snap.session_id)}</code>)</p>"
            ),
            mo.md(snap.markdown),
        ]
    )


def transcript_view(home, index: list, sid: str, *, tz: str, focus: str | None, page: int, per_page: int):
    """Session ``sid``'s transcript, a page of ``per_page`` turns at a time (page
    ``page``, 0-based, or the page holding the entry ``focus``: a search hit): read by
    the service (only the page's texts), drawn in a frame, with links to the other
    pages, to the resume snapshot and to its parent and sub-agents (those ``index``
    holds). A long session is paged because drawn whole the
    largest session of a 2 GB store took 4.5 s to render and sent 28 MB to the browser."""
    from ctxkeep.service import transcripts as svc_tr

    try:
        t = next(
            svc_tr.transcripts(
                svc_tr.TranscriptRequest(
                    home=home,
                    sessions=[sid],
                    index=index,
                    page_turns=per_page,
                    page=max(page, 0),
                    focus=focus,
                )
            )
        )
    except Exception as e:
        return mo.md(f"**Cannot open session {sid}:** {e.args[0] if e.args else e}")
    own = t.session.session_id
    known = {s.session_id for s in index or ()}

    def session_link(other: str) -> str | None:
        """The app's page of session ``other`` (its parent, a sub-agent), None when the
        store does not hold it (an orphan sub-agent's parent)."""
        return "?" + urllib.parse.urlencode({"tab": "Sessions", "session": other}) if other in known else None

    resume = "?" + urllib.parse.urlencode({"tab": "Sessions", "session": own, "resume": "1"})
    lo, hi = t.window or (0, len(t.turns))
    pages = max(1, -(-len(t.turns) // per_page))
    pager = ""
    if pages > 1:
        here = lo // per_page

        def to(k: int, label: str) -> str:
            href = "?" + urllib.parse.urlencode({"tab": "Sessions", "session": own, "page": k + 1})
            return (
                f'<a class="page" href="{html.escape(href)}" target="_top" style="{LINK_STYLE}">{label}</a>'
            )

        links = [
            to(0, "« first") if here > 0 else "",
            to(here - 1, "‹ previous") if here > 0 else "",
            to(here + 1, "next ›") if here < pages - 1 else "",
            to(pages - 1, "last »") if here < pages - 1 else "",
        ]
        pager = (
            f"<p>Turns {lo + 1:,}–{hi:,} of {len(t.turns):,} (page {here + 1} of {pages}) · "
            + " · ".join(x for x in links if x)
            + "</p>"
        )
    return mo.vstack(
        [
            mo.Html(
                f"<h3>Transcript · {html.escape(t.session.agent)} <code>{html.escape(own)}</code></h3>"
                f'<p><a class="resume" href="{html.escape(resume)}" target="_top" style="{LINK_STYLE}">Resume snapshot</a> '
                "(what <code>ctxkeep resume</code> gives an agent to pick this session up)</p>" + pager
            ),
            mo.iframe(
                tr.page_html(t, tz=tz, link=session_link, index_href=None, focus=focus, target="_top"),
                height="900px",
            ),
        ]
    )


def search_view(home, query: str, agents: list[str]):
    """The hits of ``query`` (the same search as ``ctxkeep search``, 20 hits; ``agents``
    empty: all), each linking into its transcript at the hit."""
    from ctxkeep.service import search as svc_search

    if not query.strip():
        return mo.md("*Type words to search every stored session (the same search as `ctxkeep search`).*")
    try:
        req: dict[str, Any] = {"queries": [query], "limit": 20}
        if agents:
            req["filters"] = {"agent": list(agents)}
        res = svc_search.search(home, svc_search.SearchRequest.parse(req)).results[0]
    except Exception as e:
        return mo.md(f"**Search failed:** {e.args[0] if e.args else e}")
    items = []
    for h in res.hits:
        href = "?" + urllib.parse.urlencode({"tab": "Sessions", "session": h.session_id, "entry": h.entry_id})
        p = dict(h.render())  # the one rendering of a hit (SearchHit.render)
        title, snippet = p.get("title") or "", p.get("snippet")
        if snippet and title and snippet.startswith(title.rstrip("…")):
            # the title is the snippet's first line cut short: the snippet alone, linked
            # (the page showed the same words twice)
            title, snippet = snippet, None
        items.append(
            f'<li class="hit" style="{HIT_STYLE}"><a href="{href}" target="_top" style="{LINK_STYLE}">{html.escape(title or h.entry_id)}</a>'
            f"<br><small>{html.escape(p['head'])}</small>"
            + (f"<br>{html.escape(snippet)}" if snippet else "")
            + "</li>"
        )
    return mo.Html(
        f"<p>{len(res.hits)} hits for <b>{html.escape(res.query)}</b></p>"
        f'<ol style="padding-left:1.6em">{"".join(items)}</ol>'
        if items
        else f"<p>No hits for <b>{html.escape(res.query)}</b>.</p>"
    )


def at_risk_words(v) -> str:
    """What the Store tab says of the files an agent will delete that the vault does not
    hold whole (``service.vault.VaultStatusResult``), as ``vault status`` does: those of
    a purged project or session are purged on purpose, not at risk (newuser18 F9: "1
    files at risk" for a project the user had purged)."""
    risky = [x for a in v.agents for x in a.at_risk]
    purged = sum(bool(x.purged) for x in risky)
    n = len(risky) - purged
    words = (
        f"**{n:,} file{'s' * (n != 1)} at risk** (an agent will delete {'them' if n != 1 else 'it'} and the "
        f"vault does not hold {'them' if n != 1 else 'it'} whole: `ctxkeep vault status`)"
        if n
        else "no file at risk"
    )
    if purged:
        words += (
            f"; {purged:,} file{'s' * (purged != 1)} of what you purged, which the vault no longer "
            "holds (nothing to do if that was meant)"
        )
    return words


def vault_runs(st: Store) -> tuple[list, Any]:
    """The Store tab's vault and runs parts: the vault per agent (``ctxkeep vault
    status``: files, sessions, generations, bytes as found and stored, files an agent
    will delete that it does not hold whole) and the last 20 runs (ingest, compress,
    purge, retention, backfill; by hand or on ``serve``'s schedules): ``(vault parts
    (a line and a table), runs table)``, or sentences saying why there is none."""
    from ctxkeep.service import runs as svc_runs
    from ctxkeep.service import vault as svc_vault

    try:
        # 0.6-1.0 CPU s on a 2 GB store (its entries joined to the vault's files): asked
        # once per store change, shared by the pages (files coming due are seen then)
        v = st.cached(
            "vault_status", lambda: svc_vault.vault_status(svc_vault.VaultStatusRequest(home=st.home))
        )
        rows = [
            {
                "agent": a.agent,
                "files": a.files,
                "sessions": a.sessions,
                "generations": a.generations,
                "found (bytes)": a.raw_bytes,
                "stored (bytes)": a.stored_bytes,
                "deletes": a.deletes or "",
                "at risk": sum(not x.purged for x in a.at_risk),
            }
            for a in v.agents
        ]
        vault = (
            [
                mo.md(f"`{v.vault_dir}`: {v.pack_bytes:,} bytes of packs; " + at_risk_words(v)),
                mo.ui.table(rows, selection=None, show_data_types=False),
            ]
            if rows
            else [
                mo.md("*The vault holds nothing yet: `ctxkeep ingest` captures the session files into it.*")
            ]
        )
    except Exception as e:
        vault = [mo.md(f"*Vault status unavailable: {e.args[0] if e.args else e}.*")]
    try:
        got = svc_runs.recent_runs(svc_runs.RunsRequest(home=st.home)).runs
        runs = (
            mo.ui.table(run_cells(got), selection=None, show_data_types=False, page_size=20)
            if got
            else mo.md("*No runs recorded yet.*")
        )
    except Exception as e:
        runs = mo.md(f"*Runs unavailable: {e.args[0] if e.args else e}.*")
    return vault, runs


#: the app's links (an inline style: marimo's page styles none of the HTML it is given).
#: They had the body text's colour and no underline, so nothing showed they could be
#: clicked (newuser24 F20, Chromium: rgb(15, 23, 42), text-decoration none)
LINK_STYLE = "color:#1d4ed8;text-decoration:underline;text-underline-offset:2px"
#: a search hit set apart from the next: a gap and a rule (the hits ran together)
HIT_STYLE = "margin:0 0 0.8em 0;padding-bottom:0.6em;border-bottom:1px solid #e5e7eb"


def run_cells(runs: list) -> list[dict]:
    """The Runs table's rows from ``service.runs``' rows: a figure a run did not record
    is ``-`` (Python's ``None`` showed: newuser24 F23), ``seconds`` to 0.1 s."""
    out = []
    for r in runs:
        d = r.model_dump()
        if isinstance(d.get("seconds"), float):
            d["seconds"] = round(d["seconds"], 1)
        out.append({k: "-" if v is None else v for k, v in d.items()})
    return out


def coverage(st: Store) -> pl.DataFrame:
    """The Store tab's "Sources and coverage" table, one row per agent, most entries
    first: ``sessions``, ``entries`` (store and Parquet archive), ``first``/``last``
    (UTC, minutes), ``archived by compress`` (entries of status ``archived``: what
    compress cut out of a session file, still searchable) and ``in Parquet archive``
    (the rows retention moved out of the store). One column "archived" counted the
    latter only, so it said 0 right after compress archived 60 entries (newuser19 F2)."""
    return st.q("""
        SELECT agent, count(DISTINCT session_id) AS sessions, count(*) AS entries,
               strftime(min(ts) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M') AS first,
               strftime(max(ts) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M') AS last,
               count(*) FILTER (WHERE status = 'archived') AS "archived by compress",
               count(*) FILTER (WHERE archived) AS "in Parquet archive"
        FROM all_entries GROUP BY agent ORDER BY entries DESC""")


def store_view(st: Store):
    """The Store tab: coverage per agent (``coverage``), the quarantine, the vault, the
    last runs, the store's files."""
    from ctxkeep.sinks.files import store_files

    cover = coverage(st)
    q = pl.DataFrame(
        st.lite.execute(
            "SELECT agent, action, count(*) FROM quarantine GROUP BY agent, action ORDER BY agent"
        ).fetchall(),
        schema=["agent", "action", "lines"],
        orient="row",
    )
    files = store_files(st.home)
    vault, runs = vault_runs(st)
    return mo.vstack(
        [
            mo.md(f"### Sources and coverage\nStore `{st.home}` (read-only here; times UTC)."),
            mo.ui.table(cover, selection=None, show_data_types=False)
            if cover.height
            else mo.md("*No entries yet: run `ctxkeep ingest`.*"),
            mo.md("### Quarantine"),
            mo.ui.table(q, selection=None, show_data_types=False)
            if q.height
            else mo.md("*The quarantine is empty: every line and row was read.*"),
            mo.md("### Vault"),
            *vault,
            mo.md("### Runs (the last 20; times UTC; an ingest that finds nothing new records none)"),
            runs,
            mo.md("### Files\n" + "\n".join(f"- `{k}`: {v:,} bytes" for k, v in files.items())),
        ]
    )

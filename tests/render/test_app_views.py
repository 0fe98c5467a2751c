"""The app's view helpers (ctxkeep/render/app_views.py) on their own."""

from __future__ import annotations

import pytest

from ctxkeep.render.app_views import project_labels


def test_project_labels_show_the_readable_end_of_each_path_and_stay_unique():
    paths = [
        "/home/alice/work/acme/api",
        "/home/alice/work/other/api",  # same last part: "…/acme/api" and "…/other/api"
        "/srv/x/clients/acme/web/app",
        "/srv/y/clients/acme/web/app",  # same last three parts: one more each
        "/tmp",  # shorter than the tail: shown whole
        "C:\\Users\\bob\\src\\tool",  # Windows separators
        None,
        "",
    ]
    got = project_labels(paths)
    assert got["/home/alice/work/acme/api"] == "…/acme/api"
    assert got["/home/alice/work/other/api"] == "…/other/api"
    assert got["/srv/x/clients/acme/web/app"] == "…/x/clients/acme/web/app"
    assert got["/srv/y/clients/acme/web/app"] == "…/y/clients/acme/web/app"
    assert got["/tmp"] == "/tmp"
    assert got["C:\\Users\\bob\\src\\tool"] == "…/src/tool"
    assert got[None] == "(none)" and "" not in got
    labels = [v for k, v in got.items() if k]
    assert len(labels) == len(set(labels))  # one label, one project
    # the start of a long path no longer decides what is shown (it was right(path, 48))
    long = "/home/someone/" + "deep/" * 20 + "project-with-a-long-name"
    assert project_labels([long])[long] == "…/deep/project-with-a-long-name"


def test_histogram_counts_every_session_once_in_round_bins():
    import polars as pl

    from ctxkeep.render.app_views import histogram

    minutes = [0.0, 0.5, 3.0, 59.9, 60.0, 61.0, 299.0, 300.0, None]
    agents = ["a", "a", "b", "a", "b", "b", "a", "a", "b"]
    df = pl.DataFrame({"agent": agents, "minutes": minutes})
    h = histogram(df, "minutes", maxbins=30)
    steps = (h["hi"] - h["lo"]).unique().to_list()
    assert steps == [10.0]  # 300 / 30 = 10: a round width
    assert h["sessions"].sum() == 8  # every timed session, once (the null left out)
    got = {(a, lo): n for a, lo, n in h.select("agent", "lo", "sessions").iter_rows()}
    assert got == {
        ("a", 0.0): 2,
        ("b", 0.0): 1,
        ("a", 50.0): 1,
        ("b", 60.0): 2,
        ("a", 290.0): 1,
        ("a", 300.0): 1,
    }
    # 7,000 sessions give at most ~30 rows per agent (what the chart carries)
    many = pl.DataFrame({"agent": ["x"] * 7000, "t": [i * 37 for i in range(7000)]})
    assert histogram(many, "t").height <= 31 and histogram(many, "t")["sessions"].sum() == 7000
    one = histogram(pl.DataFrame({"agent": ["x", "x"], "t": [5, 5]}), "t")
    assert one.rows() == [("x", 5.0, 6.0, 2)]
    assert (
        histogram(
            pl.DataFrame({"agent": ["x"], "t": [None]}, schema={"agent": pl.String, "t": pl.Int64}), "t"
        ).height
        == 0
    )


def test_kept_sessions_keep_the_sessions_without_a_start():
    """A session without a start (a Claude Code session of summary or
    file-history-snapshot records only) was dropped by the days filter: the app
    counted 34 of the store's 38 sessions and could not open the others."""
    import datetime as dt

    import polars as pl

    from ctxkeep.render.app_views import kept_sessions

    facts = pl.DataFrame(
        {
            "agent": ["claude-code", "claude-code", "codex", "claude-code", "codex"],
            "session_id": ["early", "late", "cx", "summary-only", "cx-undated"],
            "project_dir": ["/p", "/p", "/q", None, "/q"],
            # naive UTC, as the app's query gives them; 23:30 UTC is the next day in Tokyo
            "started": [
                dt.datetime(2025, 1, 1, 10),
                dt.datetime(2025, 1, 5, 23, 30),
                dt.datetime(2025, 1, 3),
                None,
                None,
            ],
            "ended": [
                dt.datetime(2025, 1, 1, 11),
                dt.datetime(2025, 1, 6),
                dt.datetime(2025, 1, 3, 1),
                None,
                None,
            ],
            "largest_context_tokens": [10, 20, 30, None, None],
        }
    )

    def ids(
        tz="UTC", lo=dt.date(2025, 1, 1), hi=dt.date(2025, 1, 31), agents=(), project=None, all_days=True
    ):
        f = {"tz": tz, "lo": lo, "hi": hi, "agents": list(agents), "project": project, "all_days": all_days}
        return sorted(kept_sessions(facts, f)["session_id"].to_list())

    assert ids() == ["cx", "cx-undated", "early", "late", "summary-only"]  # all 5, not 3
    # narrowed days are a time filter: they filter the dated ones, in the chosen zone,
    # and leave out the undated ones (as `ctxkeep sessions --since/--until`)
    narrow = {"lo": dt.date(2025, 1, 2), "hi": dt.date(2025, 1, 5), "all_days": False}
    assert ids(**narrow) == ["cx", "late"]
    assert ids(tz="Asia/Tokyo", **narrow) == ["cx"]
    # agent and project filters apply to undated sessions too
    assert ids(agents=["codex"]) == ["cx", "cx-undated"]
    assert ids(project="/p") == ["early", "late"]


def test_the_project_filter_is_the_folder_and_below_as_the_cli(corpus_store):
    """The app's project filter kept the folder alone while the CLI's ``--project``
    keeps the folder and everything below it: $0.61 against $2.39 for the corpus's
    ``/path/to/Demo`` (newuser17 F6). Both now count the same usage rows and sessions."""
    import datetime as dt

    import duckdb
    import polars as pl

    from ctxkeep.paths import is_under
    from ctxkeep.render.app_views import filter_sql, kept_sessions

    home, _ = corpus_store
    root = "/path/to/Demo"
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        dirs = [d for (d,) in con.execute("SELECT DISTINCT project_dir FROM usage").fetchall() if d]
        below = sorted(d for d in dirs if is_under(d, root))
        assert root in below and len(below) > 1  # the folder and its sub-folders hold usage
        params = {
            "tz": "UTC",
            "agents": [],
            "project": root,
            "lo": dt.date(2000, 1, 1),
            "hi": dt.date(2100, 1, 1),
        }
        got = con.execute(
            f"SELECT count(*), sum(cost_usd) FROM usage WHERE {filter_sql('ts')}", params
        ).fetchall()[0]
        want = con.execute(
            "SELECT count(*), sum(cost_usd) FROM usage WHERE ts IS NOT NULL AND list_contains($d, project_dir)",
            {"d": below},
        ).fetchall()[0]
        alone = con.execute("SELECT count(*) FROM usage WHERE project_dir = $r", {"r": root}).fetchall()[0][0]
        facts = con.sql(
            "SELECT agent, session_id, project_dir, started AT TIME ZONE 'UTC' AS started, "
            "ended AT TIME ZONE 'UTC' AS ended FROM sessions"
        ).pl()
    finally:
        con.close()
    assert got == want and got[0] > alone
    f = {"tz": "UTC", "lo": dt.date(2000, 1, 1), "hi": dt.date(2100, 1, 1), "agents": [], "project": root}
    kept = kept_sessions(
        facts.with_columns(pl.col("started").dt.replace_time_zone(None)), {**f, "all_days": True}
    )
    assert sorted(set(kept["project_dir"].to_list())) == sorted(
        {d for d in facts["project_dir"].to_list() if d and is_under(d, root)}
    )
    assert len(set(kept["project_dir"].to_list())) > 1


def test_histogram_upto_a_quantile_keeps_a_months_long_session_from_flattening_the_rest():
    """The corpus in Chromium: one session of ~180,000 minutes put the 37 others in the
    first of 30 bins (one bar). Up to the 95th percentile the bins are narrow; the
    outlier is counted in the last bin."""
    import polars as pl

    from ctxkeep.render.app_views import histogram

    minutes = [float(i) for i in range(1, 40)] + [180_000.0]
    df = pl.DataFrame({"agent": ["a"] * len(minutes), "minutes": minutes})
    h = histogram(df, "minutes", upto=0.95)
    assert h["sessions"].sum() == 40
    assert (h["hi"] - h["lo"]).unique().to_list() == [2.0]  # 38 / 30 -> 2: not 10,000
    assert h.sort("lo").row(-1, named=True)["lo"] == 38.0  # 38, 39 and the outlier
    assert h.sort("lo").row(-1, named=True)["sessions"] == 3
    assert histogram(df, "minutes")["hi"].max() > 180_000  # without it, as before


def test_the_app_counts_the_sessions_the_cli_lists(corpus_store):
    """The app counted 38 sessions where ``ctxkeep sessions`` lists 35: the 3 empty ones
    (no time, no message) the CLI leaves out and counts apart (``"empty"`` in
    ``sessions --json``) were in its facts (session 17's closing note)."""
    import datetime as dt

    import duckdb
    import polars as pl

    from ctxkeep.render.app_views import SESSION_FACTS_SQL, kept_sessions
    from ctxkeep.service.sessions_core import SessionsArgs, session_list

    home, _ = corpus_store
    listed = session_list(home, SessionsArgs.parse(all=True, empty=False))  # `ctxkeep sessions --all`
    assert (len(listed.rows), listed.empty) == (35, 3)
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        facts = con.sql(SESSION_FACTS_SQL).pl()
    finally:
        con.close()
    f = {"tz": "UTC", "lo": dt.date(2000, 1, 1), "hi": dt.date(2100, 1, 1), "agents": [], "project": None}
    kept = kept_sessions(
        facts.with_columns(pl.col("started").dt.replace_time_zone(None)), {**f, "all_days": True}
    )
    assert kept.height == 35  # the overview's "35 sessions"
    assert sorted(kept["session_id"].to_list()) == sorted(r.session_id for r in listed.rows)


def test_a_store_that_cannot_be_read_stops_the_view_with_one_message(tmp_path):
    """newuser19 F15: a view whose service call raised StoreDamaged failed its cell and
    every cell after it: the app showed a blank page. The cell now stops with the one
    message (what, where, what to do); a defect is raised as it is."""
    from marimo._runtime.control_flow import MarimoStopError

    from ctxkeep.render.app_views import or_stop
    from ctxkeep.sinks.sqlite.store_safety import damaged

    def broken():
        raise damaged(tmp_path / "store.db", "database disk image is malformed")

    with pytest.raises(MarimoStopError) as got:
        or_stop(str(tmp_path), broken)
    text = got.value.output.text
    assert "Cannot read the store:" in text and "store.db is damaged" in text and "ctxkeep doctor" in text
    assert or_stop(str(tmp_path), lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        or_stop(str(tmp_path), lambda: 1 / 0)


def test_the_overview_legends_list_only_the_agents_each_chart_draws(corpus_store):
    """newuser23 F12 (the app's Overview, left24): every chart's legend listed the
    store's 9 agents, aider, copilot-cli and specstory among them, which have no usage.
    Each chart's colour domain is now the agents of its own rows (usage charts: the 6
    with usage; session length: every agent with a session), in the store-wide colours."""
    import datetime as dt
    import re

    import duckdb
    import polars as pl

    from ctxkeep.render import app_views as views
    from ctxkeep.render.nbkit import PALETTE, Store

    home, _ = corpus_store
    st = Store(str(home), "UTC", "", "")
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        facts = con.sql(views.SESSION_FACTS_SQL).pl()
        used = sorted(a for (a,) in con.sql("SELECT DISTINCT agent FROM usage").fetchall())
    finally:
        con.close()
    f = {"tz": "UTC", "lo": dt.date(2000, 1, 1), "hi": dt.date(2100, 1, 1), "agents": [], "project": None}
    f["all_days"] = True
    kept = views.kept_sessions(facts.with_columns(pl.col("started").dt.replace_time_zone(None)), f)
    view, _ = views.overview(st, f, views.filter_sql, kept)
    spec = view.text.replace("&#92;&quot;", '"').replace("&#92;n", "\n")
    scales = re.findall(r'"domain": \[([^\]]*)\],\s*"range": \[([^\]]*)\]', spec)
    got = [(re.findall(r'"([^"]+)"', d), re.findall(r'"([^"]+)"', r)) for d, r in scales]
    assert len(got) == 6, got  # tokens, cost, per project, blocks, session length, context
    every = sorted(st.agents)
    assert {"aider", "copilot-cli", "specstory"} <= set(every) - set(used)
    domains = [d for d, _ in got]
    assert domains[:4] == [used] * 4 and domains[4] == sorted(kept["agent"].unique().to_list())
    assert all(set(d) <= set(every) for d in domains)
    for d, r in got:  # each agent in its store-wide colour
        assert r == [PALETTE[every.index(a) % len(PALETTE)] for a in d]

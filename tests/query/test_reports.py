"""query.reports over a small DuckDB store written here: local days across a DST change
and at midnight, weeks, cost modes, unpriced models, blocks with burn rate,
projection and token limit."""

from __future__ import annotations

import datetime as dt

import pytest

from ctxkeep.errors import StoreError, UsageError
from ctxkeep.query import reports as R
from ctxkeep.sinks import duckdb as duckdb_store

UTC = dt.UTC


def _write(home, rows):
    """rows: (key, agent, session, ts (aware), model, input, output, logged, calculated)."""
    con = duckdb_store.connect(home)
    for key, agent, session, ts, model, i, o, logged, calc in rows:
        con.execute(
            "INSERT INTO usage(usage_key, agent, session_id, project_dir, ts, model, input_tokens, "
            "output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, model_source, "
            "logged_cost_usd, calculated_cost_usd, cost_usd) VALUES (?, ?, ?, '/p/' || ?, ?, ?, ?, ?, 0, 0, 0, "
            "'logged', ?, ?, coalesce(?, ?))",
            [key, agent, session, agent, ts, model, i, o, logged, calc, logged, calc],
        )
    con.close()


@pytest.fixture
def berlin(store_home):
    """Responses around Berlin's 2025-03-30 spring-forward (02:00 CET -> 03:00 CEST) and
    around local midnight on 2025-10-25/26 (the autumn change is 2025-10-26 03:00)."""
    _write(
        store_home,
        [
            # 2025-03-29 23:59 CET = 22:59 UTC -> Berlin day 03-29
            ("a", "claude-code", "s1", dt.datetime(2025, 3, 29, 22, 59, tzinfo=UTC), "m", 1, 1, None, 1.0),
            # 2025-03-30 00:01 CET = 23:01 UTC on 03-29 -> Berlin day 03-30
            ("b", "claude-code", "s1", dt.datetime(2025, 3, 29, 23, 1, tzinfo=UTC), "m", 10, 1, None, 2.0),
            # 2025-03-30 23:59 CEST = 21:59 UTC -> 03-30 (the offset is +2 after the change)
            ("c", "codex", "s2", dt.datetime(2025, 3, 30, 21, 59, tzinfo=UTC), "m", 100, 1, 0.5, 3.0),
            # 2025-03-31 00:01 CEST = 22:01 UTC on 03-30 -> 03-31
            ("d", "codex", "s2", dt.datetime(2025, 3, 30, 22, 1, tzinfo=UTC), "m", 1000, 1, None, 4.0),
            # autumn: 2025-10-26 23:59 CET = 22:59 UTC -> 10-26 (offset back to +1)
            ("e", "codex", "s3", dt.datetime(2025, 10, 26, 22, 59, tzinfo=UTC), "x", 5, 0, None, None),
        ],
    )
    con, note = R.open_store(store_home)
    assert note is None
    yield con
    con.close()


def test_days_across_dst_and_midnight(berlin):
    rows = R.usage_report(berlin, "daily", R.Filters("Europe/Berlin")).rows
    got = {(r.period, r.agent): r.input_tokens for r in rows}
    assert got == {
        ("2025-03-29", "claude-code"): 1,
        ("2025-03-30", "claude-code"): 10,
        ("2025-03-30", "codex"): 100,
        ("2025-03-31", "codex"): 1000,
        ("2025-10-26", "codex"): 5,
    }
    # the same responses in UTC: a and b on 03-29, c and d on 03-30
    utc = {
        (r.period, r.agent): r.input_tokens for r in R.usage_report(berlin, "daily", R.Filters("UTC")).rows
    }
    assert utc[("2025-03-29", "claude-code")] == 11 and utc[("2025-03-30", "codex")] == 1100


def test_since_until_are_local_dates_inclusive(berlin):
    f = R.Filters("Europe/Berlin", dt.date(2025, 3, 30), dt.date(2025, 3, 30))
    rows = R.usage_report(berlin, "daily", f).rows
    assert sorted(r.input_tokens for r in rows) == [10, 100]


def test_week_starts_monday_and_month(berlin):
    weeks = {r.period for r in R.usage_report(berlin, "weekly", R.Filters("Europe/Berlin")).rows}
    assert weeks == {"2025-03-24", "2025-03-31", "2025-10-20"}  # 03-30 is a Sunday
    months = {r.period for r in R.usage_report(berlin, "monthly", R.Filters("Europe/Berlin")).rows}
    assert months == {"2025-03", "2025-10"}


def test_cost_modes_and_unpriced_model(berlin):
    def cost(mode):
        return {
            r.agent: r.cost_usd
            for r in R.usage_report(berlin, "monthly", R.Filters("UTC", mode=mode, agents=("codex",))).rows
            if r.period == "2025-03"
        }

    assert cost("auto") == {"codex": pytest.approx(4.5)}  # c logged 0.5, d calculated 4.0
    assert cost("calculate") == {"codex": pytest.approx(7.0)}
    assert cost("display") == {"codex": pytest.approx(0.5)}
    r = R.usage_report(berlin, "models", R.Filters("UTC", agents=("codex",)))
    x = next(row for row in r.rows if row.model == "x")
    assert x.cost_usd is None and x.input_tokens == 5 and x.unpriced == 1  # null, never 0
    assert any("no price for x" in n for n in r.notes)


def test_session_and_project_filters(berlin):
    r = R.usage_report(berlin, "session", R.Filters("UTC", project="/p/codex"))
    assert [(row.period, row.input_tokens) for row in r.rows] == [("s2", 1100), ("s3", 5)]
    assert r.rows[0].project == "/p/codex"


@pytest.fixture
def nested(store_home):
    """One response per project dir: a project, a folder below it, a sibling whose name
    starts with the project's, another project, and none."""
    con = duckdb_store.connect(store_home)
    dirs = ["/home/u/code/noora", "/home/u/code/noora/api", "/home/u/code/noora-old", "/home/u/crush", None]
    for i, d in enumerate(dirs):
        con.execute(
            "INSERT INTO usage(usage_key, agent, session_id, project_dir, ts, model, input_tokens, "
            "output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, model_source, "
            "calculated_cost_usd, cost_usd) VALUES (?, 'claude-code', ?, ?, ?, 'm', ?, 0, 0, 0, 0, 'logged', 1, 1)",
            [f"k{i}", f"s{i}", d, dt.datetime(2025, 5, 1, 12, i, tzinfo=UTC), 10**i],
        )
    con.close()
    con, _ = R.open_store(store_home)
    yield con
    con.close()


@pytest.mark.parametrize("name", ["daily", "monthly", "session", "projects", "models"])
def test_project_is_this_dir_or_below_in_every_report(nested, name):
    def tokens(project):
        return sum(
            r.input_tokens for r in R.usage_report(nested, name, R.Filters("UTC", project=project)).rows
        )

    # noora and noora/api; not noora-old (a name that merely starts alike), not crush
    assert tokens("/home/u/code/noora") == 1 + 10
    assert tokens("/home/u/code/noora/") == 1 + 10  # a trailing separator is the same dir
    assert tokens("/home/u") == 1 + 10 + 100 + 1000  # the home dir holds every project under it
    assert tokens("/home/u/code/noora/api") == 10
    assert tokens("noora") == 0  # not a substring any more
    assert tokens(None) == 11111


def test_blocks_burn_rate_projection_and_limit(store_home):
    t0 = dt.datetime(2026, 1, 5, 9, 20, tzinfo=UTC)
    _write(
        store_home,
        [
            ("1", "claude-code", "s", t0, "m", 600, 0, None, 1.0),
            ("2", "claude-code", "s", t0 + dt.timedelta(minutes=30), "m", 600, 0, None, 2.0),
            # another provider's responses: their own blocks, never Claude's
            ("3", "codex", "t", t0 + dt.timedelta(minutes=40), "m", 5000, 0, None, 9.0),
            # 6 h later: a gap, then a new block floored to 15:00
            ("4", "codex", "t", t0 + dt.timedelta(hours=6, minutes=10), "m", 100, 0, None, 0.5),
        ],
    )
    con, _ = R.open_store(store_home)
    now = t0 + dt.timedelta(hours=1)  # inside the first block
    b = R.blocks_report(con, R.Filters("UTC"), now=now, token_limit="1000").rows
    claude_only = R.blocks_report(con, R.Filters("UTC"), now=now, provider="anthropic").rows
    status = R.statusline_figures(con, "UTC", None, now=now)
    con.close()
    assert [(x.start.hour, x.provider, x.is_gap) for x in b] == [
        (9, "anthropic", False),
        (10, "openai", False),  # its first response at 10:00, not inside Claude's 9:00 block
        (15, "openai", True),
        (15, "openai", False),
    ]
    first = b[0]
    assert first.end == dt.datetime(2026, 1, 5, 14, 0, tzinfo=UTC)
    assert first.agents == ["claude-code"] and first.total_tokens == 1200
    # ccusage's rule: active when now - last response < 5 h and now < end
    assert first.is_active
    assert first.burn_rate["tokens_per_minute"] == pytest.approx(1200 / 30)
    assert first.burn_rate["cost_per_hour"] == pytest.approx(3.0 / 30 * 60)
    remaining = 14 * 60 - (10 * 60 + 20)  # minutes from 10:20 to 14:00
    assert first.projection["remaining_minutes"] == remaining
    assert first.projection["total_tokens"] == round(1200 + 40 * remaining)
    assert first.limit_status["status"] == "exceeds" and first.limit_status["limit"] == 1000
    assert b[1].agents == ["codex"] and b[1].total_tokens == 5000
    assert [x.provider for x in claude_only] == ["anthropic"]
    # the statusline's block is Claude's: the Codex response changes neither its cost nor its rate
    assert status["block"]["cost_usd"] == pytest.approx(3.0)
    assert status["block"]["cost_per_hour"] == pytest.approx(3.0 / 30 * 60)


def test_provider_of_a_response():
    assert R.provider_of("opencode", "anthropic/claude-sonnet-4") == "anthropic"
    assert R.provider_of("crush", "gpt-5") == R.provider_of("codex", None) == "openai"
    assert R.provider_of("gemini-cli", "gemini-2.5-pro") == "google"
    assert R.provider_of("aider", None) == "aider"


def test_blocks_max_limit_is_largest_finished_block(store_home):
    t0 = dt.datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    _write(
        store_home,
        [
            ("1", "codex", "t", t0, "m", 5000, 0, None, 1.0),
            ("2", "codex", "t", t0 + dt.timedelta(hours=8), "m", 10, 0, None, 1.0),
            ("3", "codex", "t", t0 + dt.timedelta(hours=8, minutes=10), "m", 10, 0, None, 1.0),
        ],
    )
    con, _ = R.open_store(store_home)
    b = R.blocks_report(con, R.Filters("UTC"), now=t0 + dt.timedelta(hours=8, minutes=20), token_limit="max")
    con.close()
    active = [x for x in b.rows if x.is_active]
    assert len(active) == 1 and active[0].limit_status["limit"] == 5000


def _block_rows(blocks):
    import dataclasses

    return [dataclasses.asdict(b) for b in blocks]  # every field: times, sums, rate, projection, limit


@pytest.mark.parametrize("tz", ["UTC", "Asia/Kolkata", "America/Los_Angeles"])
def test_blocks_since_a_day_read_from_the_last_restart_equal_a_full_read(store_home, tz, monkeypatch):
    """newuser20 F9: a status line asked for blocks of the last days and read every
    usage row ever (twice). With ``since``, rows are read from the last gap of more than
    5 h at or before that day's local midnight: the blocks equal a full read's, filtered,
    for every day and provider, including blocks that run across midnight, gap blocks,
    providers interleaved and half-hour zones."""
    import random

    rnd = random.Random(20)
    t = dt.datetime(2026, 3, 1, 0, 7, tzinfo=UTC)
    rows = []
    for k in range(900):  # ~12 days: bursts, short pauses, some gaps over 5 h
        t += dt.timedelta(minutes=rnd.choice([3, 10, 45, 90, 200, 290, 310, 420, 700]))
        agent, model = rnd.choice(
            [("claude-code", "claude-sonnet-4"), ("codex", "gpt-5"), ("gemini-cli", None)]
        )
        rows.append((str(k), agent, "s", t, model, rnd.randint(1, 900), 7, None, rnd.random()))
    _write(store_home, rows)
    con, _ = R.open_store(store_home)
    now = t + dt.timedelta(hours=1)
    read: list[str] = []
    real = R._restart_before

    def spy(*a, **k):
        got = real(*a, **k)
        read.append(got)
        return got

    try:
        for since in [dt.date(2026, 3, d) for d in range(1, 15)]:
            for provider in (None, "anthropic"):
                f = R.Filters(tz, since, None)
                monkeypatch.setattr(R, "_restart_before", lambda *a, **k: None)  # the full read
                full = R.blocks_report(con, f, now=now, provider=provider, token_limit="max").rows
                monkeypatch.setattr(R, "_restart_before", spy)
                cut = R.blocks_report(con, f, now=now, provider=provider, token_limit="max").rows
                assert _block_rows(cut) == _block_rows(full), (since, provider)
        status = R.statusline_figures(con, tz, None, now=now)
    finally:
        con.close()
    # the read was cut (a restart found) for every day after the first
    assert sum(x is not None for x in read) >= 24
    assert status["block"] is not None


def test_bad_input_raises_one_line_errors(store_home, tmp_path):
    with pytest.raises(UsageError, match="unknown time zone 'Mars/Olympus'"):
        R.check_timezone("Mars/Olympus")
    with pytest.raises(UsageError, match=r"cannot read the time .2025-13-01. \(--since\)"):
        R.parse_date("2025-13-01", "--since")
    assert R.parse_date("20250330", "--since") == dt.date(2025, 3, 30)
    with pytest.raises(StoreError, match="no analytics store.*ctxkeep ingest"):
        R.open_store(tmp_path / "nothing")
    (store_home / "analytics.duckdb").write_bytes(b"this is not a database" * 1000)
    with pytest.raises(StoreError, match="unreadable.*ctxkeep reindex") as e:
        R.open_store(store_home)
    assert "\n" not in str(e.value)


def test_session_report_rolls_sub_agents_into_the_root_session(store_home):
    """A sub-agent of a sub-agent lands in the root; an orphan (its parent session is not
    in the store) and a session naming itself as parent stay their own rows."""
    t = dt.datetime(2025, 5, 1, 10, tzinfo=UTC)
    _write(
        store_home,
        [
            ("r", "claude-code", "root", t, "m", 1, 0, None, 1.0),
            ("c", "claude-code", "child", t, "m", 10, 0, None, 2.0),
            ("g", "claude-code", "grandchild", t, "m", 100, 0, None, 4.0),
            ("o", "claude-code", "orphan", t, "m", 1000, 0, None, 8.0),
            ("x", "codex", "child", t, "m", 10000, 0, None, 16.0),  # another agent's "child"
        ],
    )
    con = duckdb_store.connect(store_home)
    parents = [
        ("claude-code", "root", None),
        ("claude-code", "child", "root"),
        ("claude-code", "grandchild", "child"),
        ("claude-code", "orphan", "missing-parent"),
        ("codex", "child", "child"),
    ]
    for n, (agent, sid, parent) in enumerate(parents, 1):
        con.execute(
            "INSERT INTO entries(sqlite_rowid, entry_id, agent, session_id, parent_session_id, kind, status) "
            "VALUES (?, ?, ?, ?, ?, 'message', 'active')",
            [n, f"e{n}", agent, sid, parent],
        )
    con.close()
    con, _ = R.open_store(store_home)
    try:
        rows = R.usage_report(con, "session", R.Filters("UTC")).rows
    finally:
        con.close()
    got = {(r.agent, r.period): (r.input_tokens, r.cost_usd, r.subagent_sessions, r.responses) for r in rows}
    assert got == {
        ("claude-code", "root"): (111, 7.0, ["child", "grandchild"], 3),
        ("claude-code", "orphan"): (1000, 8.0, [], 1),
        ("codex", "child"): (10000, 16.0, [], 1),
    }
    # the daily report is not rolled: it has no session dimension
    con, _ = R.open_store(store_home)
    try:
        assert R.totals(R.usage_report(con, "daily", R.Filters("UTC")).rows)["input_tokens"] == 11111
    finally:
        con.close()


class _CannedCon:
    """A connection whose queries answer canned rows by what they select: the notes'
    wording only (the SQL is covered by the corpus tests)."""

    def __init__(self, unpriced, assumed, logged, unrecorded=()):
        self.rows = {
            "input_tokens IS NULL": list(unrecorded),
            "IS NULL": unpriced,
            "assumed": assumed,
            "logged_cost_usd IS NOT NULL": logged,
        }

    def execute(self, sql, params=None):
        rows = next(v for k, v in self.rows.items() if k in sql)
        return type("Cur", (), {"fetchall": lambda _self: rows})()


def test_notes_count_one_response_in_the_singular():
    """The report notes said "the cost of 1 responses": a count of 1 is singular."""
    one = _CannedCon([("m-x", 1)], [("codex", "gpt-5", 1)], [("crush", 1)])
    notes = R._notes(one, R.Filters())
    assert notes == [
        "no price for m-x (1 response): their tokens are counted, their cost is null (add them to prices.toml)",
        "codex: 1 response names no model; counted as gpt-5, that version's default (assumed)",
        "crush: the cost of 1 response is the agent's own logged figure, not list prices "
        "(--mode calculate prices them)",
    ]


def test_notes_say_which_agents_recorded_no_tokens():
    """Crush / Go opencode rows carry a session's logged cost and no tokens: the notes
    say so, and the logged-cost note no longer offers --mode calculate for them."""
    con = _CannedCon(
        [], [], [("crush", 3), ("opencode-go", 1)], unrecorded=[("crush", 2), ("opencode-go", 1)]
    )
    assert R._notes(con, R.Filters()) == [
        "crush: tokens not recorded by the agent (2 sessions: it logs each session's cost, and only its "
        "last response's tokens): not in the token totals; every mode shows the logged cost",
        "opencode-go: tokens not recorded by the agent (1 session: it logs each session's cost, and only "
        "its last response's tokens): not in the token totals; every mode shows the logged cost",
        "crush: the cost of 1 response is the agent's own logged figure, not list prices "
        "(--mode calculate prices them)",
    ]
    two = _CannedCon([("m-x", 2)], [("codex", "gpt-5", 1200)], [("crush", 2)])
    notes = R._notes(two, R.Filters())
    assert notes[0].startswith("no price for m-x (2 responses):")
    assert notes[1].startswith("codex: 1,200 responses name no model;")
    assert notes[2].startswith("crush: the cost of 2 responses is")


def test_a_note_says_what_the_total_holds_beyond_the_columns(store_home):
    """newuser21 M4: Gemini CLI's thoughts (reasoning logged beside the output) are in
    ``total`` but in no column of the table: a note says so, with the sums per agent;
    no note when no agent logged such reasoning."""
    con = duckdb_store.connect(store_home)
    for key, agent, reasoning in (("g", "gemini-cli", 1310), ("c", "codex", 500), ("o", "opencode", 10)):
        con.execute(
            "INSERT INTO usage(usage_key, agent, session_id, project_dir, ts, model, input_tokens, "
            "output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, model_source, "
            "calculated_cost_usd, cost_usd) VALUES (?, ?, 's', '/p', ?, 'm', 100, 10, 0, 0, ?, 'logged', 1, 1)",
            [key, agent, dt.datetime(2025, 5, 1, 12, tzinfo=UTC), reasoning],
        )
    con.close()
    con, _ = R.open_store(store_home)
    try:
        rep = R.usage_report(con, "daily", R.Filters("UTC"))
        got = {r.agent: r.total_tokens for r in rep.rows}
        # Codex's reasoning is inside its output: not added again
        assert got == {"gemini-cli": 110 + 1310, "codex": 110, "opencode": 120}
        (note,) = [n for n in rep.notes if n.startswith("total = ")]
        assert note == (
            "total = input + output + cache read + cache write + the reasoning tokens an agent logs "
            "beside its output (gemini-cli 1,310, opencode 10), as ccusage and the agents count it"
        )
        codex = R.usage_report(con, "daily", R.Filters("UTC", agents=("codex",)))
        assert not [n for n in codex.notes if n.startswith("total = ")]
    finally:
        con.close()

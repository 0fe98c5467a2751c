"""The period reports read ``usage_buckets`` (15-minute UTC sums kept by the sync); they
must give exactly what the per-response ``usage`` path gives, in any time zone."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, available_timezones

import duckdb
import pytest

from ctxkeep.query import reports as R
from ctxkeep.sinks import duckdb as duckdb_store

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Eucla",
         "Pacific/Chatham", "Pacific/Kiritimati", "America/St_Johns")  # fmt: skip


def test_every_zone_offset_since_1980_is_a_multiple_of_15_minutes():
    """What makes a 15-minute UTC bucket fall on one local date in every zone (checked
    monthly and at every transition the zone data lists from 1980 to 2040)."""
    start = dt.datetime(1980, 1, 1, tzinfo=dt.UTC)
    bad = []
    for name in sorted(available_timezones()):
        z = ZoneInfo(name)
        t = start
        while t.year < 2040:
            off = t.astimezone(z).utcoffset()
            if off.total_seconds() % 900:
                bad.append((name, t.date(), off))
                break
            t += dt.timedelta(days=14)
    assert bad == []


def _plain(con, name, f, breakdown=False):
    """The report through ``usage`` (buckets hidden)."""
    orig = R._buckets_fresh
    R._buckets_fresh = lambda _con: False
    try:
        return R.usage_report(con, name, f, breakdown=breakdown)
    finally:
        R._buckets_fresh = orig


def _rows(rep):
    return [
        (r.period, r.agent, r.model, r.input_tokens, r.output_tokens, r.cache_read_tokens,
         r.cache_creation_tokens, r.cost_usd, r.responses, r.unpriced, r.reasoning_tokens,
         r.models, r.assumed_models)
        for r in rep.rows
    ]  # fmt: skip


@pytest.fixture(scope="module")
def duck(corpus_store):
    home, _ = corpus_store
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    assert duckdb_store.buckets_fresh(con)
    yield con
    con.close()


@pytest.mark.parametrize("tz", ZONES)
@pytest.mark.parametrize("name", ["daily", "weekly", "monthly"])
def test_buckets_equal_the_per_response_path(duck, tz, name):
    for mode in R.MODES:
        f = R.Filters(tz, mode=mode)
        for breakdown in (False, True):
            fast = R.usage_report(duck, name, f, breakdown=breakdown)
            assert _rows(fast) == _rows(_plain(duck, name, f, breakdown)), (name, tz, mode, breakdown)
            assert fast.notes == _plain(duck, name, f, breakdown).notes


def test_buckets_equal_with_filters(duck):
    for name in ("models", "projects", "daily"):
        f = R.Filters("Asia/Kathmandu", dt.date(2025, 9, 1), dt.date(2025, 12, 31), ("claude-code", "codex"))
        assert _rows(R.usage_report(duck, name, f)) == _rows(_plain(duck, name, f))
        f = R.Filters("UTC", project="worktrees", mode="display")
        assert _rows(R.usage_report(duck, name, f)) == _rows(_plain(duck, name, f))


def test_stale_buckets_fall_back_to_usage(tmp_path):
    """Usage rows the sync did not bucket (written by hand here) are still reported."""
    con = duckdb_store.connect(tmp_path)
    con.execute(
        "INSERT INTO usage(usage_key, agent, session_id, ts, model, input_tokens, output_tokens, "
        "cache_read_tokens, cache_creation_tokens, reasoning_tokens, calculated_cost_usd, cost_usd) "
        "VALUES ('k', 'codex', 's', TIMESTAMPTZ '2025-05-01 10:00:00+00', 'm', 5, 0, 0, 0, 0, 1.5, 1.5)"
    )
    assert not duckdb_store.buckets_fresh(con)
    rows = R.usage_report(con, "daily", R.Filters("UTC")).rows
    con.close()
    assert [(r.period, r.input_tokens, r.cost_usd) for r in rows] == [("2025-05-01", 5, 1.5)]
